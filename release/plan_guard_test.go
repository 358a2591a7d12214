package release

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/knowdp/knowdp/internal/testkit"
	splitplan "github.com/knowdp/knowdp/plan"
)

// Extreme weights never panic or hang the planning of a workload or of
// views: each spec is planned or refused with an error, within a deadline.
// Before the guards, [1e308, 1e308] panicked in optimalFractions (their
// residual's weight overflowed to +Inf) and [1e300, 1] hung it.
func TestPlanExtremeWeights(t *testing.T) {
	s := testkit.SmallGeo(t)
	for _, tc := range []struct {
		name    string
		weights []float64
		views   []string
		split   Split
		gauss   bool
		want    string // "" when the plan must succeed
	}{
		{"workload 1e308 both", []float64{1e308, 1e308}, []string{"sex", "age"}, SplitOptimal, false, "weight"},
		{"workload 1e300:1", []float64{1e300, 1}, []string{"sex", "age"}, SplitOptimal, false, "epsilon is too small"},
		{"workload 1e300:1 equal", []float64{1e300, 1}, []string{"sex", "age"}, SplitEqual, false, ""},
		{"workload 1e300:1 gaussian", []float64{1e300, 1}, []string{"sex", "age"}, SplitOptimal, true, ""},
		{"workload 1e6:1e-6", []float64{1e6, 1e-6}, []string{"sex", "age"}, SplitOptimal, false, ""},
		{"views 1e308 both", []float64{1e308, 1e308}, []string{"geo:state", "geo,sex"}, SplitOptimal, false, "finite"},
		{"views 1e300:1", []float64{1e300, 1}, []string{"geo:state", "geo,sex"}, SplitOptimal, false, "not determined"},
		{"views 1e300:1 gaussian", []float64{1e300, 1}, []string{"geo:state", "geo,sex"}, SplitOptimal, true, ""},
		{"views 1e308 both spine", []float64{1e308, 1e308}, []string{"geo:state", "geo,sex"}, SplitSpine, false, "finite"},
		{"views 1e6:1e-6", []float64{1e6, 1e-6}, []string{"geo:state", "geo,sex"}, SplitOptimal, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := viewSpec{Split: tc.split, Weights: tc.weights}
			if tc.gauss {
				spec.Mechanism, spec.Rho, spec.Delta = MechanismGaussian, mustRho(t, 0.5), 1e-6
			} else {
				spec.Epsilon = mustEps(t, 1)
			}
			for _, v := range tc.views {
				spec.Views = append(spec.Views, testkit.MustView(t, s, v))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := newViewsPlanContext(ctx, s, spec)
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(25 * time.Second):
				t.Fatal("planning ignored its deadline")
			}
			if ctx.Err() != nil {
				t.Fatalf("planning took the whole deadline: %v", err)
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// Planning honours its context: an ended context fails the plan of an
// optimal split, for flat workloads and for views, with its error.
func TestPlanContext(t *testing.T) {
	s := testkit.SmallGeo(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, views := range [][]string{{"sex,age", "geo,sex"}, {"geo:state", "geo,sex"}} {
		spec := viewSpec{Split: SplitOptimal, Epsilon: mustEps(t, 1)}
		for _, v := range views {
			spec.Views = append(spec.Views, testkit.MustView(t, s, v))
		}
		if _, err := newViewsPlanContext(ctx, s, spec); !errors.Is(err, context.Canceled) {
			t.Errorf("%v: %v, want the context's error", views, err)
		}
		if _, err := newViewsPlanContext(context.Background(), s, spec); err != nil {
			t.Errorf("%v without a deadline: %v", views, err)
		}
	}
}

// SplitWork is known from the spec alone, 0 without an optimal split, and
// bounds the work the split then takes, for flat workloads (requested and
// best strategies, both mechanisms) and for views across the hierarchy.
func TestSplitWork(t *testing.T) {
	s := testkit.SmallGeo(t)
	for _, tc := range []struct {
		name  string
		views []string
		exact []string
		split Split
		gauss bool
		best  bool
	}{
		{"flat laplace", []string{"sex,age", "geo,sex", "age"}, nil, SplitOptimal, false, false},
		{"flat laplace best", []string{"sex,age", "geo,sex", "geo,age"}, nil, SplitOptimal, false, true},
		{"flat gaussian", []string{"sex,age", "geo,sex", "age"}, []string{"sex"}, SplitOptimal, true, false},
		{"flat gaussian best", []string{"sex,age", "geo,sex", "age"}, []string{"sex"}, SplitOptimal, true, true},
		{"flat gaussian best, no invariant", []string{"sex,age", "geo,sex", "geo,age"}, nil, SplitOptimal, true, true},
		{"flat laplace best, invariant", []string{"sex,age", "geo,sex", "geo,age"}, []string{"sex"}, SplitOptimal, false, true},
		{"flat equal", []string{"sex,age", "geo,sex"}, nil, SplitEqual, false, false},
		{"views laplace", viewSplitCases[0].views, viewSplitCases[0].exact, SplitOptimal, false, false},
		{"views gaussian", viewSplitCases[1].views, viewSplitCases[1].exact, SplitOptimal, true, false},
		{"views spine", viewSplitCases[1].views, nil, SplitSpine, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := viewSpec{Split: tc.split}
			if tc.gauss {
				spec.Mechanism, spec.Rho, spec.Delta = MechanismGaussian, mustRho(t, 0.5), 1e-6
			} else {
				spec.Epsilon = mustEps(t, 1)
			}
			for _, v := range tc.views {
				spec.Views = append(spec.Views, testkit.MustView(t, s, v))
			}
			for _, v := range tc.exact {
				spec.Exact = append(spec.Exact, testkit.MustView(t, s, v))
			}
			var bound, used float64
			var err error
			if w, flat := spec.flat(); flat {
				if tc.best {
					w.Strategy = MeasureBest
				}
				if bound, err = w.SplitWork(s); err != nil {
					t.Fatal(err)
				}
				var meter splitplan.Meter
				p, err := planWorkloadCtx(splitplan.WithMeter(context.Background(), &meter), s, w)
				if err != nil {
					t.Fatal(err)
				}
				if p.cert != nil {
					used = p.cert.Work
				}
				if meter.Work() > bound {
					t.Fatalf("metered work %v above the bound %v", meter.Work(), bound)
				}
			} else {
				if bound, err = spec.SplitWork(s); err != nil {
					t.Fatal(err)
				}
				p, err := planViews(s, spec)
				if err != nil {
					t.Fatal(err)
				}
				if p.cert != nil {
					used = p.cert.Work
				}
			}
			if tc.split != SplitOptimal {
				if bound != 0 || used != 0 {
					t.Fatalf("no optimal split: bound %v, work %v", bound, used)
				}
				return
			}
			if !(used > 0 && used <= bound) {
				t.Fatalf("work %v, bound %v", used, bound)
			}
			t.Logf("work %.3g of its bound %.3g", used, bound)
		})
	}
}
