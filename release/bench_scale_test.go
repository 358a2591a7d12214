package release

import (
	"fmt"
	"testing"

	"github.com/knowdp/knowdp/domain"
)

// scaleSchema returns a schema of d dimensions of sizes cycling through
// 2, 3, 5 and 4: about 3.5^d cells, never formed.
func scaleSchema(b testing.TB, d int) *domain.Schema {
	b.Helper()
	var dims []domain.Dimension
	sizes := []int{2, 3, 5, 4}
	for i := range d {
		dim := domain.Dimension{Name: fmt.Sprintf("a%02d", i)}
		for v := range sizes[i%len(sizes)] {
			dim.Values = append(dim.Values, fmt.Sprint(v))
		}
		dims = append(dims, dim)
	}
	s, err := domain.NewSchema(dims)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkPlanScale plans, with --strategy best, every two-way marginal of
// 15 and 20 attributes (105 and 190 tables), for Gaussian noise (the
// residuals, a certified convex split over every residual of the workload)
// and Laplace noise (the marginal lattice, pruned to the cuboids of up to
// three dimensions, its search capped at latticeMaxWork). It reports the
// objective, the measurements and the work.
//
//	go test ./release -run '^$' -bench PlanScale -benchtime 1x
func BenchmarkPlanScale(b *testing.B) {
	for _, d := range []int{15, 20} {
		s := scaleSchema(b, d)
		var tables []domain.View
		for c := range domain.Base(d) + 1 {
			if c.Len() == 2 {
				tables = append(tables, domain.ViewOf(c))
			}
		}
		for _, gauss := range []bool{true, false} {
			name := fmt.Sprintf("%d-attributes/%d-tables/laplace", d, len(tables))
			spec := Spec{Tables: tables, Strategy: MeasureBest}
			if gauss {
				name = fmt.Sprintf("%d-attributes/%d-tables/gaussian", d, len(tables))
				spec.Mechanism, spec.Rho, spec.Delta = MechanismGaussian, rho(b, 1), 1e-6
			} else {
				spec.Epsilon = eps(b, 1)
			}
			b.Run(name, func(b *testing.B) {
				var p *Plan
				for b.Loop() {
					var err error
					if p, err = NewPlan(s, spec); err != nil {
						b.Fatal(err)
					}
				}
				rel := p.flat.Release
				b.ReportMetric(rel.Objective, "objective")
				b.ReportMetric(float64(len(rel.Measurements)), "measurements")
				if rel.Certificate != nil {
					b.ReportMetric(rel.Certificate.Work, "work")
				}
				if rel.LowerBound != nil {
					b.ReportMetric(rel.Objective/rel.LowerBound.Value, "objective/SVD-bound")
				}
			})
		}
	}
}
