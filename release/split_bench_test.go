package release

import (
	"fmt"
	"testing"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/privacy"
)

// BenchmarkPlanSplit times planWorkload (sensitivities, classification,
// the certified split, margins of error) on workloads of about 50
// cuboids: the 45 two-way cuboids and 5 three-way cuboids of ten
// dimensions of sizes 2 to 6, with the invariant {d0,d1} or none, Laplace
// and Gaussian, measuring the requested cuboids or the better of those and
// the marginals under them (the down-closure: 66 candidates).
func BenchmarkPlanSplit(b *testing.B) {
	s := testkit.TestSchema(b, 2, 3, 4, 5, 6, 2, 3, 4, 5, 6)
	var cuboids []domain.Cuboid
	for i := range 10 {
		for j := i + 1; j < 10; j++ {
			cuboids = append(cuboids, 1<<i|1<<j)
		}
	}
	for i := range 5 {
		cuboids = append(cuboids, 1<<i|1<<(i+3)|1<<(i+5))
	}
	for _, mech := range []Mechanism{MechanismLaplace, MechanismGaussian} {
		for _, exact := range [][]domain.Cuboid{nil, {0b11}} {
			for _, st := range []MeasureStrategy{MeasureRequested, MeasureBest} {
				name := fmt.Sprintf("%v/invariants=%d/%v", mech, len(exact), st)
				b.Run(name, func(b *testing.B) {
					spec := workloadSpec{Epsilon: eps(b, 1), Exact: exact, Cuboids: cuboids, Strategy: st}
					if mech == MechanismGaussian {
						r, _ := privacy.NewRho(1)
						spec = workloadSpec{Mechanism: mech, Rho: r, Delta: 1e-6, Exact: exact, Cuboids: cuboids, Strategy: st}
					}
					var p *workloadPlan
					for b.Loop() {
						var err error
						if p, err = planWorkload(s, spec); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(len(p.meas)), "measured")
					b.ReportMetric(p.cert.Gap, "gap")
				})
			}
		}
	}
}
