package release

import (
	"context"
	"math"
	"testing"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/tensor"
	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/noise"
)

// marginOf returns the marginal of table t (over cuboid c) on keep ⊆ c.
func marginOf(s *domain.Schema, c, keep domain.Cuboid, t []float64) []float64 {
	out := make([]float64, s.CuboidSize(keep))
	tensor.Project(tensor.SubSizes(s.Sizes(), c), tensor.Reindex(keep, c), t, out)
	return out
}

// checkAgreement reports the largest disagreement between any two tables,
// or a table and an invariant, on their common dimensions.
func worstDisagreement(s *domain.Schema, w *Release) float64 {
	type tab struct {
		c domain.Cuboid
		x []float64
	}
	var all []tab
	for _, v := range w.Invariants {
		all = append(all, tab{v.Cuboid, v.Counts})
	}
	for _, t := range w.Tables {
		all = append(all, tab{t.Cuboid, t.Counts})
	}
	worst := 0.0
	for i := range all {
		for j := i + 1; j < len(all); j++ {
			common := all[i].c & all[j].c
			a := marginOf(s, all[i].c, common, all[i].x)
			b := marginOf(s, all[j].c, common, all[j].x)
			for k := range a {
				worst = max(worst, math.Abs(a[k]-b[k]))
			}
		}
	}
	return worst
}

func TestWorkloadPostProcessing(t *testing.T) {
	s := testkit.TestSchema(t, 3, 4, 2, 3)
	ctx := context.Background()
	r := noise.NewSeeded(11)
	for trial := range 6 {
		counts := make([]float64, s.Cells())
		for i := range counts {
			counts[i] = float64(r.Uint64N(6)) // many small counts: non-negativity binds
		}
		c := &cube.Cube{Schema: s, Counts: counts}
		spec := workloadSpec{
			Epsilon: eps(t, 0.5),
			Exact:   []domain.Cuboid{0b0001, 0b0110},
			Cuboids: []domain.Cuboid{0b0011, 0b0101, 0b1001, 0b1010, 0b1100, 0b0010},
		}
		for _, integer := range []bool{false, true} {
			w, err := runWorkloadCube(ctx, c, spec, noise.NewSeeded(uint64(trial)))
			if err != nil {
				t.Fatal(err)
			}
			if integer {
				err = w.RoundIntegers(ctx, noise.NewSeeded(uint64(100+trial)))
			} else {
				err = w.MakeNonNegative(ctx, 1e-7)
			}
			if err != nil {
				t.Fatal(err)
			}
			tol := 1e-6
			for _, tb := range w.Tables {
				if tb.Public {
					continue // exact counts from the invariants
				}
				if !tb.NonNegative || tb.Integer != integer {
					t.Fatalf("table %s: nonneg %v integer %v", s.Format(tb.Cuboid), tb.NonNegative, tb.Integer)
				}
				for _, v := range tb.Counts {
					if v < -tol || (integer && v != math.Round(v)) {
						t.Fatalf("trial %d integer=%v table %s: count %v", trial, integer, s.Format(tb.Cuboid), v)
					}
				}
				if integer && !tb.IntegerExact {
					t.Errorf("table %s (two-dimensional, one-dimensional margins): rounding not exact: %s, deviation %v",
						s.Format(tb.Cuboid), tb.IntegerMethod, tb.IntegerMaxDeviation)
				}
			}
			// Every table agrees with every other and with the invariants.
			limit := 1e-6
			if integer {
				limit = 0
			}
			if d := worstDisagreement(s, w); d > limit {
				t.Errorf("trial %d integer=%v: tables disagree by %v", trial, integer, d)
			}
			m := w.Metadata()
			if integer && !w.Tables[0].Public && m.Tables[0].MOE90 != w.Tables[0].MOE90+1 {
				t.Errorf("integer moe90 %v, want least-squares %v + 1", m.Tables[0].MOE90, w.Tables[0].MOE90)
			}
		}
	}
}
