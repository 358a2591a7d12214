package tensor

import (
	"math"
	"testing"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/noise"
)

// centred returns centre_A(marginal_A x) for x over cuboid c, computed from
// the definitions: project, then subtract the mean along each dimension of
// A in turn (means along different dimensions commute).
func centred(s *domain.Schema, c, a domain.Cuboid, x []float64) []float64 {
	out := make([]float64, s.CuboidSize(a))
	Project(SubSizes(s.Sizes(), c), Reindex(a, c), x, out)
	sizes := SubSizes(s.Sizes(), a)
	for k := range sizes {
		keep := domain.Base(len(sizes)) &^ (1 << k)
		mean := make([]float64, len(out)/sizes[k])
		Project(sizes, keep, out, mean)
		for i := range mean {
			mean[i] /= -float64(sizes[k])
		}
		BroadcastAdd(sizes, keep, out, mean)
	}
	return out
}

// block returns the block of residual a in the extended array of c.
func block(s *domain.Schema, c, a domain.Cuboid, ext []float64) []float64 {
	st := extStrides(s.Sizes(), c)
	var out []float64
	dims := a.Dims()
	idx := make([]int, len(dims))
	for {
		off := 0
		for k, d := range dims {
			off += (idx[k] + 1) * st[d]
		}
		out = append(out, ext[off])
		k := len(idx) - 1
		for ; k >= 0; k-- {
			idx[k]++
			if idx[k] < s.Size(dims[k]) {
				break
			}
			idx[k] = 0
		}
		if k < 0 {
			return out
		}
	}
}

func TestExtendHoldsCentredMarginals(t *testing.T) {
	r := noise.NewSeeded(3)
	s := testkit.TestSchema(t, 3, 1, 4, 2)
	for _, c := range []domain.Cuboid{0, 1, 0b101, 0b1111, 0b1100} {
		x := testkit.RandomTable(r, s.CuboidSize(c))
		ext := Extend(SubSizes(s.Sizes(), c), x)
		if len(ext) != ExtSize(SubSizes(s.Sizes(), c)) {
			t.Fatalf("%s: extended size %d", s.Format(c), len(ext))
		}
		for a := c; ; a = (a - 1) & c {
			got, want := block(s, c, a, ext), centred(s, c, a, x)
			for i := range want {
				if math.Abs(got[i]-want[i]) > 1e-9 {
					t.Fatalf("%s, residual %s, cell %d: %v, want %v", s.Format(c), s.Format(a), i, got[i], want[i])
				}
			}
			if a == 0 {
				break
			}
		}
		// All residuals together give the table back: Σ_A (|A|/|C|) r_A = x.
		back := Contract(SubSizes(s.Sizes(), c), ext)
		for i := range x {
			if math.Abs(back[i]-x[i]) > 1e-9 {
				t.Fatalf("%s: contract(extend(x))[%d] = %v, want %v", s.Format(c), i, back[i], x[i])
			}
		}
	}
}

// transfer with weight 1 on every pattern moves a table's residuals on the
// common dimensions into another's extended array; contracted, that is the
// table's marginal on the common dimensions, broadcast.
func TestTransferMovesCommonResiduals(t *testing.T) {
	r := noise.NewSeeded(4)
	s := testkit.TestSchema(t, 3, 2, 4, 2)
	for _, tc := range []struct{ src, dst domain.Cuboid }{
		{0b0111, 0b1110}, {0b1111, 0b0101}, {0b0001, 0b1000}, {0b0110, 0b0110},
	} {
		x := testkit.RandomTable(r, s.CuboidSize(tc.src))
		ext := Extend(SubSizes(s.Sizes(), tc.src), x)
		common := tc.src & tc.dst
		w := make([]float64, 1<<common.Len())
		for i := range w {
			w[i] = 1
		}
		dst := make([]float64, ExtSize(SubSizes(s.Sizes(), tc.dst)))
		Transfer(s.Sizes(), tc.src, ext, tc.dst, dst, w)
		got := Contract(SubSizes(s.Sizes(), tc.dst), dst)
		marg := make([]float64, s.CuboidSize(common))
		Project(SubSizes(s.Sizes(), tc.src), Reindex(common, tc.src), x, marg)
		want := make([]float64, s.CuboidSize(tc.dst))
		deg := float64(s.CuboidSize(tc.dst &^ common))
		for i := range marg {
			marg[i] /= deg
		}
		BroadcastAdd(SubSizes(s.Sizes(), tc.dst), Reindex(common, tc.dst), want, marg)
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-9 {
				t.Fatalf("%s -> %s, cell %d: %v, want %v", s.Format(tc.src), s.Format(tc.dst), i, got[i], want[i])
			}
		}
	}
}
