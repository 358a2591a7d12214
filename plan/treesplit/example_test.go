package treesplit_test

import (
	"context"
	"fmt"

	"github.com/knowdp/knowdp/estimate/hier"
	"github.com/knowdp/knowdp/plan/treesplit"
)

// Two Gaussian measurements of a root with four leaves, the leaves
// (measurement 0) and the root (1), for a table of the leaves and one of
// the root weighted equally.
func ExampleObjective_Solve() {
	h, err := hier.NewHierarchy([]int{4}, nil)
	if err != nil {
		panic(err)
	}
	o := treesplit.New(treesplit.Problem{
		Tree:     h.ShapeTree(),
		Gaussian: true,
		Unit:     []float64{1, 1},
		Residuals: []treesplit.Residual{{
			Weight: 1,
			Exact:  []bool{false, false},
			Obs:    [][]treesplit.Obs{{{Measurement: 0, Cells: 1}}, {{Measurement: 1, Cells: 1}}},
			Coef:   []float64{1, 1},
		}},
	})
	sol, err := o.Solve(context.Background(), nil)
	if err != nil {
		panic(err)
	}
	fmt.Printf("split %.3f, weighted total variance %.4f, certified: %v\n", sol.X, sol.Value, sol.Global)
	// Output:
	// split [0.764 0.236], weighted total variance 6.8541, certified: true
}
