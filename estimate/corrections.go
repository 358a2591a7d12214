package estimate

import (
	"fmt"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/tensor"
)

// Correction is one additive term of the least-squares consistency step:
// every cell a of the released cuboid gets Delta[a restricted to Keep].
// Keep is a set of schema dimensions within the released cuboid, and Delta
// is row-major over Keep's dimensions (schema order).
type Correction struct {
	Keep  domain.Cuboid
	Delta []float64
}

// Corrections computes the consistency step of Consistent from marginals
// only, for releases whose cells are spread over many machines: with
// K_i = inv[i].Cuboid ∩ over and xMarg[i] the marginal of the noisy counts
// x on K_i, the least-squares consistent release is
//
//	y(a) = x(a) + Σ_j corr[j].Delta[a restricted to corr[j].Keep].
//
// It applies the same projections, in the same order, as Consistent, but
// tracks their effect on the marginals instead of on the cells: the
// marginal on K_i of a broadcast over K_j is the broadcast over K_i of its
// marginal on K_i ∩ K_j, times size(over)/size(K_i ∪ K_j). Everything it
// touches has the size of the invariants' marginals, not of the cuboid.
// Invariants are validated as in Consistent.
func Corrections(s *domain.Schema, over domain.Cuboid, xMarg [][]float64, inv []Invariant) ([]Correction, error) {
	base := domain.Base(s.NumDims())
	if over&^base != 0 {
		return nil, fmt.Errorf("cuboid %#x has dimensions beyond the schema's %d", uint64(over), s.NumDims())
	}
	if len(xMarg) != len(inv) {
		return nil, fmt.Errorf("%d marginals for %d invariants", len(xMarg), len(inv))
	}
	if err := checkInvariants(s, inv, true); err != nil {
		return nil, err
	}
	for i, v := range inv {
		k := v.Cuboid & over
		if want := s.CuboidSize(k); len(xMarg[i]) != want {
			return nil, fmt.Errorf("marginal of the release on %s has %d cells, got %d values", s.Format(k), want, len(xMarg[i]))
		}
	}
	sizes := s.Sizes()
	overSize := float64(s.CuboidSize(over))
	var out []Correction
	for i, v := range inv {
		// The same reduction as Consistent: a constraint implied by a
		// larger (or an earlier equal) one is dropped.
		if implied(inv, over, i) {
			continue
		}
		k := v.Cuboid & over
		kSizes := tensor.SubSizes(sizes, k)
		m := append([]float64(nil), xMarg[i]...)
		// The marginal on k of the corrections applied so far.
		for _, c := range out {
			common := k & c.Keep
			part := make([]float64, s.CuboidSize(common))
			tensor.Project(tensor.SubSizes(sizes, c.Keep), tensor.Reindex(common, c.Keep), c.Delta, part)
			f := overSize / float64(s.CuboidSize(k|c.Keep))
			for j := range part {
				part[j] *= f
			}
			tensor.BroadcastAdd(kSizes, tensor.Reindex(common, k), m, part)
		}
		target := make([]float64, len(m))
		tensor.Project(tensor.SubSizes(sizes, v.Cuboid), tensor.Reindex(k, v.Cuboid), v.Counts, target)
		deg := overSize / float64(len(m))
		for j := range m {
			m[j] = (target[j] - m[j]) / deg
		}
		out = append(out, Correction{Keep: k, Delta: m})
	}
	return out, nil
}
