package release

import (
	"context"
	"testing"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/testkit"
)

// TestBestNeverWorseUnderInvariants: under invariants, strategy best is
// never worse than the requested cuboids (what knowdp measured before the
// lattice and the residuals), for both mechanisms, and on issue 32's case
// (arrests, every two-way marginal, exact {year} and {colour, sex}) it is
// much better for both.
func TestBestNeverWorseUnderInvariants(t *testing.T) {
	ctx := context.Background()
	s := testkit.TestSchema(t, 3, 4, 2, 3)
	tables := []domain.Cuboid{0b0011, 0b0110, 0b1100, 0b1001, 0b0101, 0b1010}
	for _, exact := range [][]domain.Cuboid{nil, {0b0001}, {0b0011}, {0b0001, 0b0110}, {0b0011, 0b1100}} {
		for _, gauss := range []bool{false, true} {
			spec := WorkloadSpec{Exact: exact, Cuboids: tables}
			if gauss {
				spec.Mechanism, spec.Rho, spec.Delta = MechanismGaussian, rho(t, 1), 1e-6
			} else {
				spec.Epsilon = eps(t, 1)
			}
			req, err := planWorkloadCtx(ctx, s, spec)
			if err != nil {
				t.Fatal(err)
			}
			spec.Strategy = MeasureBest
			best, err := planWorkloadCtx(ctx, s, spec)
			if err != nil {
				t.Fatal(err)
			}
			if best.objValue > req.objValue*(1+1e-9) {
				t.Errorf("exact %v, gaussian %v: best %v worse than requested %v", exact, gauss, best.objValue, req.objValue)
			}
		}
	}
	if testing.Short() {
		return
	}
	a := arrests(t)
	yr, err := a.ViewOfNames("year")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := a.ViewOfNames("colour", "sex")
	if err != nil {
		t.Fatal(err)
	}
	for _, gauss := range []bool{false, true} {
		spec := Spec{Tables: kwayViews(a, 2), Exact: []domain.View{yr, cs}}
		if gauss {
			spec.Mechanism, spec.Rho, spec.Delta = MechanismGaussian, rho(t, 1), 1e-6
		} else {
			spec.Epsilon = eps(t, 1)
		}
		req, err := NewPlan(a, spec)
		if err != nil {
			t.Fatal(err)
		}
		spec.Strategy = MeasureBest
		best, err := NewPlan(a, spec)
		if err != nil {
			t.Fatal(err)
		}
		r := best.flat.Release.Objective / req.flat.Release.Objective
		t.Logf("gaussian %v: requested %.6g, best %.6g (%v): %.3f", gauss, req.flat.Release.Objective, best.flat.Release.Objective, best.flat.Release.Strategy, r)
		if r > 0.75 {
			t.Errorf("gaussian %v: best %.6g is %.3f of requested %.6g", gauss, best.flat.Release.Objective, r, req.flat.Release.Objective)
		}
	}
}
