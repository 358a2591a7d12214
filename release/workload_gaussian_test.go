package release

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/sensitivity"
	"github.com/knowdp/knowdp/sidecar"
)

// TestGaussianWorkloadPrivacy: each measured cuboid's noise keeps its share
// of rho on the worst-case induced neighbours the brute force finds (its L2
// sensitivity is at least theirs), and the shares add up to at most rho
// (zCDP composes by adding rho).
func TestGaussianWorkloadPrivacy(t *testing.T) {
	ctx := context.Background()
	s := testkit.TestSchema(t, 2, 3, 2)
	c := &cube.Cube{Schema: s, Counts: testkit.RandomTable(noise.NewSeeded(4), s.Cells())}
	for _, exact := range [][]domain.Cuboid{nil, {0b001}, {0b011, 0b110}} {
		spec := workloadSpec{Mechanism: MechanismGaussian, Rho: rho(t, 0.5), Delta: 1e-6, Exact: exact,
			Cuboids: []domain.Cuboid{0b011, 0b110, 0b101, 0b111}}
		w, err := runWorkloadCube(ctx, c, spec, noise.NewRand())
		if err != nil {
			t.Fatal(err)
		}
		var total float64
		for _, m := range w.Measurements {
			wit, err := sensitivity.BruteForceSensitivity(ctx, s, exact, nil, m.Cuboid)
			if err != nil {
				t.Fatal(err)
			}
			if float64(wit.L2Squared) > m.L2Sensitivity*m.L2Sensitivity*(1+1e-12) {
				t.Errorf("%v %s: L2 sensitivity %v below the brute force's sqrt(%d)", exact, s.Format(m.Cuboid), m.L2Sensitivity, wit.L2Squared)
			}
			if loss := float64(wit.L2Squared) / (2 * m.Sigma * m.Sigma); loss > m.RhoShare*(1+1e-12) {
				t.Errorf("%v %s: rho %v on the worst neighbours, share %v", exact, s.Format(m.Cuboid), loss, m.RhoShare)
			}
			if m.Share != 0 || m.Scale != 0 {
				t.Errorf("a Gaussian measurement with eps share %v, scale %v", m.Share, m.Scale)
			}
			total += m.RhoShare
		}
		if total > 0.5 || w.Rho != total || w.RhoBudget != spec.Rho.Float64() {
			t.Errorf("%v: shares %v, spent %v, budget %v", exact, total, w.Rho, w.RhoBudget)
		}
		if want, _ := privacy.EpsilonFor(w.Rho, 1e-6); w.Epsilon != want {
			t.Errorf("epsilon %v, want the equivalent %v", w.Epsilon, want)
		}
		m := w.Metadata()
		if !strings.HasPrefix(m.Mechanism, "Gaussian") || m.RhoExact != w.Rho || m.Rho != sidecar.StatedUp(w.Rho) || m.Rho < w.Rho || m.EpsilonExact != w.Epsilon || m.Epsilon < w.Epsilon || m.Delta != 1e-6 || !strings.HasPrefix(m.Composition, "zero-concentrated") || m.Budget != 0 {
			t.Errorf("metadata %+v", m)
		}
	}
}

// TestGaussianWorkloadCoverage: 90% ± 1.5% of cells within moe90.
func TestGaussianWorkloadCoverage(t *testing.T) {
	ctx := context.Background()
	s := testkit.TestSchema(t, 3, 4, 2)
	c := &cube.Cube{Schema: s, Counts: testkit.RandomTable(noise.NewSeeded(2), s.Cells())}
	spec := workloadSpec{Mechanism: MechanismGaussian, Rho: rho(t, 0.2), Delta: 1e-6, Exact: []domain.Cuboid{0b001},
		Cuboids: []domain.Cuboid{0b011, 0b110, 0b101, 0b010}}
	cov := coverage(t, 300, func(r *noise.Rand) ([][]float64, [][]float64, []float64) {
		w, err := runWorkloadCube(ctx, c, spec, r)
		if err != nil {
			t.Fatal(err)
		}
		var got, truth [][]float64
		var moe []float64
		for _, tb := range w.Tables {
			got, truth, moe = append(got, tb.Counts), append(truth, c.Project(tb.Cuboid)), append(moe, tb.MOE90)
		}
		return got, truth, moe
	})
	if math.Abs(cov-0.9) > 0.015 {
		t.Errorf("coverage %.4f, want 0.90 ± 0.015", cov)
	}
}

// TestGaussianOptimalSplit: under zCDP the split's objective is convex in
// the shares of rho: the optimal split is never beaten by the equal split
// nor by random points of the simplex, and in the disjoint case (the grand
// total fixed, so the cuboids share no free residual) it is the closed
// form, shares proportional to sqrt(b_k / c_k).
func TestGaussianOptimalSplit(t *testing.T) {
	s := testkit.TestSchema(t, 3, 4, 5)
	for _, tc := range []struct {
		name    string
		exact   []domain.Cuboid
		cuboids []domain.Cuboid
	}{
		{"disjoint", []domain.Cuboid{0}, []domain.Cuboid{0b001, 0b010, 0b100}},
		{"overlapping", []domain.Cuboid{0b001}, []domain.Cuboid{0b011, 0b110, 0b101, 0b111}},
	} {
		spec := workloadSpec{Mechanism: MechanismGaussian, Rho: rho(t, 1), Delta: 1e-6, Exact: tc.exact, Cuboids: tc.cuboids, Weights: []float64{1, 3, 2, 1}[:len(tc.cuboids)]}
		p, err := planWorkload(s, spec)
		if err != nil {
			t.Fatal(err)
		}
		o := p.objective()
		if o.Power != 1 {
			t.Fatalf("power %v", o.Power)
		}
		// The gradient against central finite differences.
		x := make([]float64, len(o.C))
		for i := range x {
			x[i] = float64(i+1) / float64(len(x)*(len(x)+1)/2)
		}
		g := make([]float64, len(x))
		o.Gradient(x, g)
		for k := range x {
			h := 1e-6 * x[k]
			up, down := append([]float64(nil), x...), append([]float64(nil), x...)
			up[k] += h
			down[k] -= h
			if fd := (o.Value(up) - o.Value(down)) / (2 * h); math.Abs(fd-g[k]) > 1e-5*math.Abs(fd) {
				t.Errorf("%s: gradient %v, finite difference %v", tc.name, g[k], fd)
			}
		}
		opt, err := p.optimalFractions(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		fopt := o.Value(opt)
		equal := make([]float64, len(opt))
		for i := range equal {
			equal[i] = 1 / float64(len(equal))
		}
		if fe := o.Value(equal); fopt > fe*(1+1e-9) {
			t.Errorf("%s: optimal %v worse than equal %v", tc.name, fopt, fe)
		}
		r := noise.NewSeeded(5)
		for range 300 {
			x := make([]float64, len(opt))
			for i := range x {
				x[i] = float64(r.Uint64N(1000)+1) / 1000
			}
			normalise(x)
			if f := o.Value(x); f < fopt*(1-1e-6) {
				t.Errorf("%s: a random split %v does better (%v < %v)", tc.name, x, f, fopt)
				break
			}
		}
		if tc.name == "disjoint" {
			cf := o.ClosedForm()
			for i := range cf {
				if math.Abs(cf[i]-opt[i]) > 1e-6 {
					t.Errorf("disjoint: optimal %v, closed form %v", opt, cf)
					break
				}
			}
		}
	}
}

func TestGaussianWorkloadErrors(t *testing.T) {
	s := testkit.TestSchema(t, 2, 3)
	for _, tc := range []struct {
		spec workloadSpec
		want string
	}{
		{workloadSpec{Mechanism: MechanismGaussian, Delta: 1e-6, Cuboids: []domain.Cuboid{1}}, "rho must be set"},
		{workloadSpec{Mechanism: MechanismGaussian, Rho: rho(t, 1), Epsilon: eps(t, 1), Delta: 1e-6, Cuboids: []domain.Cuboid{1}}, "leave epsilon unset"},
		{workloadSpec{Mechanism: MechanismGaussian, Rho: rho(t, 1), Cuboids: []domain.Cuboid{1}}, "delta in (0, 1)"},
		{workloadSpec{Mechanism: MechanismGaussian, Rho: rho(t, 1), Delta: 1e-6, Sensitivity: 3, Cuboids: []domain.Cuboid{1}}, "cannot be overridden"},
		{workloadSpec{Epsilon: eps(t, 1), Rho: rho(t, 1), Cuboids: []domain.Cuboid{1}}, "Gaussian releases only"},
	} {
		if _, err := planWorkload(s, tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.spec, err, tc.want)
		}
	}
	if _, err := expectedRMSE(s, workloadSpec{Mechanism: MechanismGaussian, Rho: rho(t, 1), Delta: 1e-6, Cuboids: []domain.Cuboid{1}}, StrategyOptimal); err == nil {
		t.Error("ExpectedRMSE accepted a Gaussian workload")
	}
}
