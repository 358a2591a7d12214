package release

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate/hier"
	"github.com/knowdp/knowdp/internal/testkit"
)

// viewSplitCases are workloads of views on smallGeo for the split tests.
var viewSplitCases = []struct {
	views, exact []string
}{
	{[]string{"geo:region", "geo:state,sex", "geo,sex,age"}, []string{"geo:state"}},
	{[]string{"geo:region,age", "geo:state,sex", "geo,sex"}, nil},
	{[]string{"", "geo:state", "geo"}, nil},
	{[]string{"geo:state,sex,age", "geo,age", "sex,age"}, []string{"geo:region,sex"}},
}

func viewSplitPlan(t *testing.T, s *domain.Schema, views, exact []string, gaussian bool, split Split) *viewPlan {
	t.Helper()
	spec := viewSpec{Split: split}
	if gaussian {
		spec.Mechanism, spec.Rho, spec.Delta = MechanismGaussian, mustRho(t, 0.5), 1e-6
	} else {
		spec.Epsilon = mustEps(t, 1)
	}
	for _, x := range views {
		spec.Views = append(spec.Views, testkit.MustView(t, s, x))
	}
	for _, x := range exact {
		spec.Exact = append(spec.Exact, testkit.MustView(t, s, x))
	}
	p, err := planViews(s, spec)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestViewObjectiveAgainstLaws checks the split's objective, computed by
// the variance passes, against the weighted total variance of the
// estimator's own error laws (cube/hier, checked against a dense solve).
func TestViewObjectiveAgainstLaws(t *testing.T) {
	s := testkit.SmallGeo(t)
	for _, tc := range viewSplitCases {
		for _, gaussian := range []bool{false, true} {
			p := viewSplitPlan(t, s, tc.views, tc.exact, gaussian, SplitSpine)
			o, err := p.viewObjective()
			if err != nil {
				t.Fatal(err)
			}
			x := make([]float64, len(p.meas))
			for k, m := range p.meas {
				x[k] = m.share.Float64()
				if gaussian {
					x[k] = m.rhoShare.Float64() / 0.5
				}
			}
			got, err := o.Eval(x, !gaussian, nil)
			if err != nil {
				t.Fatal(err)
			}
			// The reference: Σ_t w_t Σ_cells Var from the error laws, with
			// the continuous noise variances the objective uses.
			l, err := newHierLayout(s, p.h)
			if err != nil {
				t.Fatal(err)
			}
			prob := hier.Problem{Hierarchy: l.tree}
			for _, d := range l.flat {
				prob.FlatSizes = append(prob.FlatSizes, s.Size(d))
			}
			for _, e := range p.exact {
				hv := l.view(e)
				prob.Measurements = append(prob.Measurements, hier.Measurement{Flat: hv.Flat, Level: hv.Level, Values: make([]float64, s.ViewSize(e))})
			}
			for k, m := range p.meas {
				hv := l.view(m.v)
				v := 1 / (o.Unit[k] * x[k] * x[k])
				if gaussian {
					v = 1 / (o.Unit[k] * x[k])
				}
				prob.Measurements = append(prob.Measurements, hier.Measurement{Flat: hv.Flat, Level: hv.Level, Values: make([]float64, s.ViewSize(m.v)), Variance: v})
			}
			var queries []hier.View
			var tables []Table
			for _, tb := range p.tables {
				if !tb.Public {
					queries = append(queries, l.view(tb.View))
					tables = append(tables, tb)
				}
			}
			sol, err := hier.Solve(context.Background(), prob, queries)
			if err != nil {
				t.Fatal(err)
			}
			var want float64
			for q, tb := range tables {
				nodes := 1
				if tb.View.Dims.Has(p.h) {
					nodes = s.LevelSize(p.h, int(tb.View.Up[p.h]))
				}
				perNode := s.ViewSize(tb.View) / nodes
				for g := range nodes {
					v, err := sol.Variance(q, g)
					if err != nil {
						t.Fatal(err)
					}
					want += tb.Weight * float64(perNode) * v
				}
			}
			if math.Abs(got-want) > 1e-9*want {
				t.Errorf("%v gaussian=%v: objective %v, laws %v", tc.views, gaussian, got, want)
			}
		}
	}
}

// TestViewOptimalSplit checks the optimal split against an independent
// search (the best of many random splits, refined coordinate-wise), that
// its certificate holds, and that the Laplace bound is below the objective
// everywhere it is sampled.
func TestViewOptimalSplit(t *testing.T) {
	s := testkit.SmallGeo(t)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, tc := range viewSplitCases {
		for _, gaussian := range []bool{false, true} {
			p := viewSplitPlan(t, s, tc.views, tc.exact, gaussian, SplitOptimal)
			o, err := p.viewObjective()
			if err != nil {
				t.Fatal(err)
			}
			x, err := p.optimalFractions(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			f, _ := o.Eval(x, !gaussian, nil)
			if p.cert == nil || p.cert.Bound > f*(1+1e-12) {
				t.Fatalf("%v: certificate %+v above the objective %v", tc.views, p.cert, f)
			}
			if gaussian && p.cert.Gap > 1e-6 {
				t.Errorf("%v: Gaussian gap %v", tc.views, p.cert.Gap)
			}
			// Independent search: random splits, then coordinate moves.
			best := math.Inf(1)
			var bx []float64
			for range 2000 {
				y := make([]float64, len(x))
				var sum float64
				for i := range y {
					y[i] = rng.ExpFloat64()
					sum += y[i]
				}
				for i := range y {
					y[i] /= sum
				}
				fy, err := o.Eval(y, !gaussian, nil)
				if err != nil {
					continue
				}
				if fy < p.cert.Bound*(1-1e-9) {
					t.Fatalf("%v gaussian=%v: %v at %v is below the proved bound %v", tc.views, gaussian, fy, y, p.cert.Bound)
				}
				if fy < best {
					best, bx = fy, y
				}
			}
			for step := 0.1; step > 1e-7; step /= 2 {
				for moved := true; moved; {
					moved = false
					for i := range bx {
						for j := range bx {
							if i == j || bx[j] < step {
								continue
							}
							y := append([]float64(nil), bx...)
							y[i], y[j] = y[i]+step, y[j]-step
							if fy, err := o.Eval(y, !gaussian, nil); err == nil && fy < best {
								best, bx, moved = fy, y, true
							}
						}
					}
				}
			}
			if f > best*(1+1e-4) {
				t.Errorf("%v gaussian=%v: split %v gives %v, the search found %v at %v", tc.views, gaussian, x, f, best, bx)
			}
			t.Logf("%v gaussian=%v: objective %.6g (search %.6g), gap %.2g", tc.views, gaussian, f, best, p.cert.Gap)
		}
	}
}
