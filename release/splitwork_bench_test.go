package release

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/plan/treesplit"
)

// BenchmarkSplitWorkUnits measures what one unit of the splits' work
// (plan.Result.Work's unit, in which SplitWork bounds them) costs in time:
// the certified split of the 56 three-way cuboids of a schema shaped like
// the arrests data (Laplace, beyond GlobalMax: local searches), and the
// optimal split of the 20 views of the US hierarchy (Laplace and
// Gaussian), whose node visits count treesplit.NodeVisitWork units each. It reports
// ns per unit (ns/unit) and, for the views, ns per node visit: their
// ratio is what treesplit.NodeVisitWork should be.
func BenchmarkSplitWorkUnits(b *testing.B) {
	s := testkit.TestSchema(b, 6, 2, 2, 5, 2, 2, 7, 2)
	var three []domain.Cuboid
	for i := range 8 {
		for j := i + 1; j < 8; j++ {
			for k := j + 1; k < 8; k++ {
				three = append(three, 1<<i|1<<j|1<<k)
			}
		}
	}
	b.Run("workload", func(b *testing.B) {
		spec := workloadSpec{Epsilon: eps(b, 1), Cuboids: three}
		var work float64
		for b.Loop() {
			p, err := planWorkload(s, spec)
			if err != nil {
				b.Fatal(err)
			}
			work = p.cert.Work
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/work, "ns/unit")
	})
	raw, err := os.ReadFile(filepath.Join("..", "data", "us-geo.schema.json"))
	if err != nil {
		b.Fatal(err)
	}
	geo, err := domain.ParseSchema(raw)
	if err != nil {
		b.Fatal(err)
	}
	var views []domain.View
	for _, g := range []string{"", "geo:region", "geo:division", "geo:state", "geo"} {
		for _, rest := range []string{"", "sex", "agegroup", "sex,agegroup"} {
			name := g
			if rest != "" && g != "" {
				name += ","
			}
			v, err := geo.ParseView(name + rest)
			if err != nil {
				b.Fatal(err)
			}
			views = append(views, v)
		}
	}
	for _, gauss := range []bool{false, true} {
		name := "views/laplace"
		spec := viewSpec{Split: SplitOptimal, Views: views, Epsilon: eps(b, 1)}
		if gauss {
			name = "views/gaussian"
			spec = viewSpec{Split: SplitOptimal, Views: views, Mechanism: MechanismGaussian, Rho: mustRho(b, 1), Delta: 1e-6}
		}
		b.Run(name, func(b *testing.B) {
			var work float64
			for b.Loop() {
				p, err := planViews(geo, spec)
				if err != nil {
					b.Fatal(err)
				}
				work = p.cert.Work
			}
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(ns/work, "ns/unit")
			b.ReportMetric(ns/(work/treesplit.NodeVisitWork), "ns/visit")
		})
	}
}
