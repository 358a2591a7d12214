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
)

func rho(t testing.TB, x float64) privacy.Rho {
	t.Helper()
	r, err := privacy.NewRho(x)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestGaussianRelease checks the privacy story of a Gaussian release and
// its zCDP guarantee on the worst-case induced neighbours the brute force
// finds: the noisy cuboids of two neighbours, discrete Gaussians on a grid
// through integer counts, have Renyi divergence alpha*||M_C g||^2/(2 sigma^2)
// of order alpha, so rho must be at least L2Squared/(2 sigma^2).
func TestGaussianRelease(t *testing.T) {
	ctx := context.Background()
	s := testkit.TestSchema(t, 2, 3, 2)
	c := &cube.Cube{Schema: s, Counts: testkit.RandomTable(noise.NewSeeded(3), s.Cells())}
	for _, tc := range []struct {
		exact   []domain.Cuboid
		release domain.Cuboid
	}{
		{nil, domain.Base(3)},
		{[]domain.Cuboid{0b001}, domain.Base(3)},
		{[]domain.Cuboid{0b011, 0b110}, domain.Base(3)},
		{[]domain.Cuboid{0b011, 0b110}, 0b101},
		{[]domain.Cuboid{0b001, 0b010, 0b100}, domain.Base(3)},
	} {
		spec := cuboidSpec{Mechanism: MechanismGaussian, Rho: rho(t, 0.3), Delta: 1e-6, Exact: tc.exact, Cuboid: tc.release}
		rel, err := runCube(ctx, c, spec, noise.NewRand())
		if err != nil {
			t.Fatal(err)
		}
		w, err := sensitivity.BruteForceSensitivity(ctx, s, tc.exact, nil, tc.release)
		if err != nil {
			t.Fatal(err)
		}
		if rel.L2Squared < w.L2Squared {
			t.Errorf("%v -> %s: L2 sensitivity squared %d below the brute force's %d", tc.exact, s.Format(tc.release), rel.L2Squared, w.L2Squared)
		}
		if loss := float64(w.L2Squared) / (2 * rel.Sigma * rel.Sigma); loss > rel.Rho*(1+1e-12) {
			t.Errorf("%v -> %s: worst induced neighbours have rho %v > %v", tc.exact, s.Format(tc.release), loss, rel.Rho)
		}
		wantEps, _ := privacy.EpsilonFor(rel.Rho, 1e-6)
		m := rel.Metadata()
		if m.Rho != rel.Rho || m.Epsilon != wantEps || m.Delta != 1e-6 || m.Sigma <= 0 || !strings.HasPrefix(m.Mechanism, "Gaussian") || !m.Private {
			t.Errorf("metadata %+v", m)
		}
	}
}

// TestGaussianMOE90Coverage: 90% of cells lie within moe90 of the truth.
func TestGaussianMOE90Coverage(t *testing.T) {
	ctx := context.Background()
	s := testkit.TestSchema(t, 3, 4, 2)
	c := &cube.Cube{Schema: s, Counts: testkit.RandomTable(noise.NewSeeded(5), s.Cells())}
	for _, exact := range [][]domain.Cuboid{nil, {0b011, 0b110}} {
		cov := coverage(t, 800, func(r *noise.Rand) ([][]float64, [][]float64, []float64) {
			rel, err := runCube(ctx, c, cuboidSpec{Mechanism: MechanismGaussian, Rho: rho(t, 0.05), Delta: 1e-6, Exact: exact, Cuboid: domain.Base(3)}, r)
			if err != nil {
				t.Fatal(err)
			}
			return [][]float64{rel.Counts}, [][]float64{c.Counts}, []float64{rel.MOE90}
		})
		if math.Abs(cov-0.9) > 0.015 {
			t.Errorf("exact %v: coverage %.4f, want 0.90 ± 0.015", exact, cov)
		}
	}
}

func TestGaussianReleaseErrors(t *testing.T) {
	s := testkit.TestSchema(t, 2, 2)
	c := &cube.Cube{Schema: s, Counts: []float64{1, 2, 3, 4}}
	for _, tc := range []struct {
		spec cuboidSpec
		want string
	}{
		{cuboidSpec{Mechanism: MechanismGaussian, Delta: 1e-6, Cuboid: domain.Base(2)}, "rho must be set"},
		{cuboidSpec{Mechanism: MechanismGaussian, Rho: rho(t, 1), Epsilon: eps(t, 1), Cuboid: domain.Base(2)}, "leave epsilon unset"},
		{cuboidSpec{Mechanism: MechanismGaussian, Rho: rho(t, 1), Sensitivity: 3, Cuboid: domain.Base(2)}, "cannot be overridden"},
		{cuboidSpec{Mechanism: MechanismGaussian, Rho: rho(t, 1), Delta: 1, Cuboid: domain.Base(2)}, "delta"},
		{cuboidSpec{Mechanism: MechanismGaussian, Rho: rho(t, 1), Cuboid: domain.Base(2)}, "at a delta in (0, 1)"},
		{cuboidSpec{Epsilon: eps(t, 1), Delta: 1e-6, Cuboid: domain.Base(2)}, "Gaussian releases only"},
	} {
		if _, err := runCube(context.Background(), c, tc.spec, noise.NewSeeded(1)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.spec, err, tc.want)
		}
	}
}
