package gls

import (
	"fmt"
	"math"

	"github.com/knowdp/knowdp/query"
)

// invTerm is an invariant over the reduced domain.
type invTerm struct {
	term  query.Term
	parts []partition // per dimension, the partition it sums over
	size  []float64   // per row, the cells it sums (the diagonal of E E^T)
}

func newInvTerm(t query.Term) invTerm {
	it := invTerm{term: t, parts: make([]partition, len(t))}
	ones := make([]float64, t.Cells())
	for i := range ones {
		ones[i] = 1
	}
	it.size = t.Apply(ones)
	for d, f := range t {
		it.parts[d], _ = partOf(f)
	}
	return it
}

// sweep applies, for each invariant in turn, the projection onto its
// affine set {y : E y = e}: y += E^T ((e - E y) / size). With vals nil it
// applies the homogeneous projections I - E^T (E E^T)^{-1} E, whose
// product is the orthogonal projector P onto the invariants' null space
// (the package doc proves that the projections commute).
func sweep(y []float64, invs []invTerm, vals [][]float64, w *kronWork) {
	if w == nil {
		w = new(kronWork)
	}
	for i, it := range invs {
		ey := w.apply(it.term, y, false)
		for r := range ey {
			v := -ey[r]
			if vals != nil {
				v += vals[i][r]
			}
			ey[r] = v / it.size[r]
		}
		corr := w.apply(it.term, ey, true)
		for k, v := range corr {
			y[k] += v
		}
	}
}

// consistent checks every pair of invariants on their common roll-up (per
// dimension the coarser of their two partitions): the invariants have a
// common solution iff every pair agrees there (package doc). Two values
// agree within 1e-9 of the sum of the absolute values they add up.
func consistent(invs []invTerm, vals [][]float64, name func(int) string) error {
	for i := range invs {
		for k := i + 1; k < len(invs); k++ {
			a, b := invs[i], invs[k]
			ta, tb := make(query.Term, len(a.parts)), make(query.Term, len(a.parts))
			shape := make([]int, len(a.parts))
			for d := range a.parts {
				pa, pb := a.parts[d], b.parts[d]
				coarse := pa
				if pa.groups > pb.groups {
					coarse = pb
				}
				shape[d] = coarse.groups
				ta[d] = rollTo(pa, coarse)
				tb[d] = rollTo(pb, coarse)
			}
			va, vb := ta.Apply(vals[i]), tb.Apply(vals[k])
			aa, ab := ta.Apply(absAll(vals[i])), tb.Apply(absAll(vals[k]))
			for c := range va {
				if math.Abs(va[c]-vb[c]) > 1e-9*(aa[c]+ab[c]) {
					return fmt.Errorf("gls: %s and %s disagree on cell %v of their common roll-up (the coarser partition along each dimension): %g and %g", name(i), name(k), unflat(c, shape), va[c], vb[c])
				}
			}
		}
	}
	return nil
}

// rollTo returns the factor summing the groups of fine into those of
// coarse (which fine refines).
func rollTo(fine, coarse partition) query.Factor {
	if fine.groups == coarse.groups {
		return query.NewIdentity(fine.groups)
	}
	g := make([]int32, fine.groups)
	for x, f := range fine.of {
		g[f] = coarse.of[x]
	}
	r, err := query.NewRollUp(g)
	if err != nil {
		panic("gls: " + err.Error())
	}
	return r
}

func absAll(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = math.Abs(x)
	}
	return out
}

// unflat returns the multi-index of cell c of a row-major table.
func unflat(c int, shape []int) []int {
	idx := make([]int, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		idx[d] = c % shape[d]
		c /= shape[d]
	}
	return idx
}
