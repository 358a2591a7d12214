package plan_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/knowdp/knowdp/plan"
)

// BenchmarkSolve times Solve on random problems shaped like workloads
// (three terms per measurement): convex (Gaussian) and Laplace, within
// GlobalMax (branch-and-bound to 1e-6) and beyond it (multi-start local
// search and a bounded branch-and-bound).
func BenchmarkSolve(b *testing.B) {
	for _, tc := range []struct {
		power, n int
	}{{1, 10}, {1, 50}, {1, 100}, {2, 6}, {2, 8}, {2, 16}, {2, 27}, {2, 50}} {
		name := "gaussian"
		if tc.power == 2 {
			name = "laplace"
		}
		b.Run(fmt.Sprintf("%s/n=%d", name, tc.n), func(b *testing.B) {
			pr := randomProblem(rand.New(rand.NewPCG(uint64(tc.n), 9)), tc.n, 3*tc.n, tc.power)
			var res plan.Result
			for b.Loop() {
				var err error
				if res, err = plan.Solve(context.Background(), pr, plan.Options{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(res.Gap, "gap")
			b.ReportMetric(float64(res.Nodes), "nodes")
			b.ReportMetric(res.Work, "work")
			b.ReportMetric(plan.WorkBound(pr.Shape(), plan.Options{}), "work-bound")
		})
	}
}
