package repro

import (
	"context"
	"math"
	"testing"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/data"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/release"
	"github.com/knowdp/knowdp/sensitivity"
)

// TestCompareZCDP checks the comparison's budget conversion, its expected
// winners (Laplace for one cuboid, Gaussian once there are many: the
// Gaussian's sigma grows as sqrt(k), Laplace's scale as k) and its errors
// against seeded releases of the four cuboids of the k = 4 row.
func TestCompareZCDP(t *testing.T) {
	const eps, delta = 1.0, 1e-6
	rows, err := CompareZCDP(eps, delta, []int{1, 4, 64})
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := privacy.EpsilonFor(rows[0].Rho, delta); e > eps || e < eps*(1-1e-9) {
		t.Errorf("rho %v is (%v, %v)-DP, want eps %v", rows[0].Rho, e, delta, eps)
	}
	if rows[0].LaplaceRMSE >= rows[0].GaussianRMSE || rows[2].GaussianRMSE >= rows[2].LaplaceRMSE {
		t.Errorf("winners: %+v", rows)
	}
	// Simulate k = 4.
	tab, s, err := data.Arrests()
	if err != nil {
		t.Fatal(err)
	}
	c, err := cube.Build(context.Background(), tab, s, cube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	year, _ := s.CuboidOf("year")
	colourSex, _ := s.CuboidOf("colour", "sex")
	exact := []domain.Cuboid{year, colourSex}
	var cuboids []domain.Cuboid
	for cb := domain.Cuboid(1); len(cuboids) < 4; cb++ {
		if sens, err := sensitivity.GenericSensitivity(s, exact, cb); cb.Len() == 2 && err == nil && sens.Value > 0 {
			cuboids = append(cuboids, cb)
		}
	}
	share, _ := privacy.NewEpsilon(eps / 4)
	rhoShare, _ := privacy.NewRho(rows[1].Rho / 4)
	r := noise.NewSeeded(12)
	const runs = 300
	var sqL, sqG, cells float64
	exactViews := []domain.View{domain.ViewOf(year), domain.ViewOf(colourSex)}
	run := func(plan *release.Plan, counts map[domain.View][]float64) []float64 {
		t.Helper()
		rel, err := plan.Run(context.Background(), counts, r)
		if err != nil {
			t.Fatal(err)
		}
		return rel.Tables[0].Counts
	}
	for _, cb := range cuboids {
		truth := c.Project(cb)
		tables := []domain.View{domain.ViewOf(cb)}
		lap, err := release.NewPlan(s, release.Spec{Epsilon: share, Exact: exactViews, Tables: tables})
		if err != nil {
			t.Fatal(err)
		}
		gauss, err := release.NewPlan(s, release.Spec{Mechanism: release.MechanismGaussian, Rho: rhoShare, Delta: delta, Exact: exactViews, Tables: tables})
		if err != nil {
			t.Fatal(err)
		}
		counts, err := c.ProjectViews(append(lap.Needs(), gauss.Needs()...))
		if err != nil {
			t.Fatal(err)
		}
		for range runs {
			l, g := run(lap, counts), run(gauss, counts)
			for k := range truth {
				sqL += (l[k] - truth[k]) * (l[k] - truth[k])
				sqG += (g[k] - truth[k]) * (g[k] - truth[k])
			}
		}
		cells += float64(len(truth) * runs)
	}
	// Relative standard error of a root mean square of n squared errors
	// of kurtosis at most 6: below 0.5 sqrt(5/n); 5 of them.
	tol := 5 * 0.5 * math.Sqrt(5/cells)
	for _, x := range []struct {
		name      string
		got, want float64
	}{{"laplace", math.Sqrt(sqL / cells), rows[1].LaplaceRMSE}, {"gaussian", math.Sqrt(sqG / cells), rows[1].GaussianRMSE}} {
		if math.Abs(x.got/x.want-1) > tol {
			t.Errorf("%s, 4 cuboids: simulated RMSE %v, computed %v (tolerance %.1f%%)", x.name, x.got, x.want, 100*tol)
		}
	}
}
