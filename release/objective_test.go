package release

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate/resbasis"
	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/query"
	"github.com/knowdp/knowdp/strategy"
)

// TestMaxObjective: the max objective's split (Gaussian noise) is
// certified by its dual bound, no random split of the same candidates has
// a smaller largest weighted variance, and without invariants it equals
// package strategy's max-variance plan (an independent implementation of
// ResidualPlanner's max-variance objective).
func TestMaxObjective(t *testing.T) {
	s := testkit.TestSchema(t, 3, 4, 2, 5)
	tables := []domain.Cuboid{0b0011, 0b0110, 0b1100, 0b1000, 0b0101}
	weights := []float64{1, 3, 0.5, 2, 1}
	for _, exact := range [][]domain.Cuboid{nil, {0b0001}} {
		spec := workloadSpec{Mechanism: MechanismGaussian, Rho: rho(t, 1), Delta: 1e-6, Exact: exact, Cuboids: tables, Weights: weights,
			Objective: ObjectiveMax, Strategy: MeasureBest}
		p, err := planWorkloadCtx(context.Background(), s, spec)
		if err != nil {
			t.Fatal(err)
		}
		if p.cert == nil || p.cert.Gap > 1e-5 {
			t.Fatalf("exact %v: certificate %+v", exact, p.cert)
		}
		worst := 0.0
		for _, tb := range p.tables {
			if !tb.Public {
				worst = max(worst, tb.Weight*tb.Variance)
			}
		}
		if math.Abs(worst-p.objValue) > 1e-9*worst {
			t.Errorf("exact %v: objective %v, largest weighted variance %v", exact, p.objValue, worst)
		}
		// Random splits of the same measurements do no better.
		o := p.objective()
		r := noise.NewSeeded(3)
		for range 300 {
			x := make([]float64, len(p.meas))
			for i := range x {
				x[i] = float64(r.Uint64N(1000)+1) / 1000
			}
			normalise(x)
			w := map[domain.Cuboid]float64{}
			for a, res := range p.basis.Res {
				if res.Status != resbasis.Free {
					continue
				}
				for _, k := range res.Covers {
					w[a] += o.C[k] * x[k]
				}
			}
			vars := p.tableVariances(w)
			m := 0.0
			for i, tb := range p.tables {
				if !tb.Public {
					m = max(m, tb.Weight*vars[i])
				}
			}
			if m < p.objValue*(1-1e-6) {
				t.Fatalf("exact %v: a random split has largest weighted variance %v < %v", exact, m, p.objValue)
			}
		}
		if exact != nil {
			continue
		}
		var wl query.Workload
		for i, c := range tables {
			wl = append(wl, query.Weighted{Term: marginalTerm(s.Sizes(), c), Weight: weights[i]})
		}
		st, err := strategy.Optimize(context.Background(), s.Sizes(), wl, strategy.Gaussian, 1, strategy.Options{MaxVariance: true})
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(st.Objective/p.objValue-1) > 1e-5 {
			t.Errorf("max objective %v, package strategy's %v", p.objValue, st.Objective)
		}
	}
	// Laplace noise is refused, with the reason.
	_, err := planWorkload(s, workloadSpec{Epsilon: eps(t, 1), Cuboids: tables, Objective: ObjectiveMax})
	if err == nil || !strings.Contains(err.Error(), "Gaussian") {
		t.Errorf("max objective with Laplace noise: %v", err)
	}
}

// TestMeanObjective: the mean objective is the weighted sum of the tables'
// mean cell variances, and gives the small tables a smaller variance than
// the total objective does.
func TestMeanObjective(t *testing.T) {
	s := testkit.TestSchema(t, 3, 4, 2, 5)
	tables := []domain.View{domain.ViewOf(0b0001), domain.ViewOf(0b1110), domain.ViewOf(0b0011)}
	var plans [2]*Plan
	for i, obj := range []Objective{ObjectiveTotal, ObjectiveMean} {
		p, err := NewPlan(s, Spec{Tables: tables, Epsilon: eps(t, 1), Objective: obj, Strategy: MeasureBest})
		if err != nil {
			t.Fatal(err)
		}
		plans[i] = p
		rel := p.flat.Release
		var want float64
		for _, tb := range rel.Tables {
			n := float64(s.CuboidSize(tb.Cuboid))
			if obj == ObjectiveTotal {
				want += tb.Variance * n
			} else {
				want += tb.Variance
			}
		}
		if math.Abs(rel.Objective-want) > 1e-6*want {
			t.Errorf("%v: objective %v, sum %v", obj, rel.Objective, want)
		}
		if m := rel.Metadata(); !strings.Contains(m.ObjectiveOf, map[Objective]string{ObjectiveTotal: "every cell", ObjectiveMean: "mean cell"}[obj]) {
			t.Errorf("%v: objective_of %q", obj, m.ObjectiveOf)
		}
	}
	small := plans[0].flat.Release.Tables[0].Variance
	if meanSmall := plans[1].flat.Release.Tables[0].Variance; !(meanSmall < small) {
		t.Errorf("the 3-cell table: variance %v under the mean objective, %v under the total", meanSmall, small)
	}
}

// TestTargets: with a target margin of error per table, the release meets
// every target, spends at most the budget and no more than it needs (the
// tightest table is at its target to 1e-4), and refuses a budget too small,
// naming what the targets need.
func TestTargets(t *testing.T) {
	s := testkit.TestSchema(t, 3, 4, 2, 5)
	tables := []domain.View{domain.ViewOf(0b0011), domain.ViewOf(0b0110), domain.ViewOf(0b1000)}
	targets := []float64{10, 20, 8}
	for _, gauss := range []bool{true, false} {
		spec := Spec{Tables: tables, TargetMOE90: targets, Strategy: MeasureBest}
		if gauss {
			spec.Mechanism, spec.Rho, spec.Delta = MechanismGaussian, rho(t, 10), 1e-6
		} else {
			spec.Epsilon = eps(t, 10)
		}
		p, err := NewPlan(s, spec)
		if err != nil {
			t.Fatal(err)
		}
		rel := p.flat.Release
		tight := 0.0
		for i, tb := range rel.Tables {
			if tb.MOE90 > targets[i] {
				t.Errorf("gaussian %v: table %s moe90 %v above its target %v", gauss, s.FormatView(tables[i]), tb.MOE90, targets[i])
			}
			tight = max(tight, tb.MOE90/targets[i])
			if tb.TargetMOE90 != targets[i] {
				t.Errorf("target %v, want %v", tb.TargetMOE90, targets[i])
			}
		}
		if tight < 1-1e-4 {
			t.Errorf("gaussian %v: the tightest table is at %v of its target: the budget is not the least", gauss, tight)
		}
		spent := rel.Epsilon
		if gauss {
			spent = rel.Rho
		}
		if spent > 10 || !(spent > 0) {
			t.Errorf("gaussian %v: spent %v of the cap 10", gauss, spent)
		}
		// The run keeps the targets in the sidecar.
		w, err := p.Run(context.Background(), countsFor(&cube.Cube{Schema: s, Counts: testkit.RandomTable(noise.NewSeeded(7), s.Cells())}, p.Needs()), noise.NewSeeded(1))
		if err != nil {
			t.Fatal(err)
		}
		if m := w.Metadata(); m.Tables[0].TargetMOE90 != targets[0] {
			t.Errorf("sidecar target %v", m.Tables[0].TargetMOE90)
		}
		// A cap below what the targets need.
		low := spec
		if gauss {
			low.Rho = rho(t, spent/2)
		} else {
			low.Epsilon = eps(t, spent/2)
		}
		if _, err := NewPlan(s, low); err == nil || !strings.Contains(err.Error(), "the targets of accuracy need") {
			t.Errorf("gaussian %v: a cap too small: %v", gauss, err)
		}
	}
}

// TestInvariantCosts: each table states its error without each invariant
// and without any, and those are the errors of the plans without them.
func TestInvariantCosts(t *testing.T) {
	s := testkit.TestSchema(t, 3, 4, 2)
	tables := []domain.View{domain.ViewOf(0b011), domain.ViewOf(0b110), domain.ViewOf(0b101)}
	exact := []domain.View{domain.ViewOf(0b001), domain.ViewOf(0b100)}
	for _, gauss := range []bool{false, true} {
		spec := Spec{Tables: tables, Exact: exact, Strategy: MeasureBest, InvariantCosts: true}
		if gauss {
			spec.Mechanism, spec.Rho, spec.Delta = MechanismGaussian, rho(t, 1), 1e-6
		} else {
			spec.Epsilon = eps(t, 1)
		}
		p, err := NewPlan(s, spec)
		if err != nil {
			t.Fatal(err)
		}
		w, err := p.Run(context.Background(), countsFor(&cube.Cube{Schema: s, Counts: testkit.RandomTable(noise.NewSeeded(3), s.Cells())}, p.Needs()), noise.NewSeeded(1))
		if err != nil {
			t.Fatal(err)
		}
		m := w.Metadata()
		for i, tm := range m.Tables {
			if len(tm.WithoutInvariants) != 3 {
				t.Fatalf("table %d: %d costs, want 3 (each invariant, then both)", i, len(tm.WithoutInvariants))
			}
			for k, c := range tm.WithoutInvariants {
				alt := spec
				alt.InvariantCosts = false
				switch k {
				case 0:
					alt.Exact = exact[1:]
				case 1:
					alt.Exact = exact[:1]
				default:
					alt.Exact = nil
				}
				q, err := NewPlan(s, alt)
				if err != nil {
					t.Fatal(err)
				}
				if want := q.flat.Release.Tables[i].Variance; math.Abs(c.Variance-want) > 1e-12*want || c.Note != "" {
					t.Errorf("gaussian %v, table %d without %v: %v (%s), the plan says %v", gauss, i, c.Without, c.Variance, c.Note, want)
				}
			}
		}
	}
}
