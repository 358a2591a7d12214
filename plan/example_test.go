package plan_test

import (
	"context"
	"fmt"

	"github.com/knowdp/knowdp/plan"
)

// Two measurements sharing a term, under Gaussian shares (convex):
// F(x) = 4/x_1 + 1/(2 x_2) + 2/(x_1 + 2 x_2), whose minimum on the simplex
// is at x_1 = 0.72170 (a ternary search finds the same). The split, its
// certificate, and its work against the bound known before the solve
// starts. A meter on the context counts the work of every solve
// under it, as a rate limiter would.
func ExampleSolve() {
	pr := plan.Problem{
		Power:   1,
		Coef:    []float64{1, 2},
		Weights: []float64{4, 1, 2},
		Covers:  [][]int{{0}, {1}, {0, 1}},
	}
	var meter plan.Meter
	ctx := plan.WithMeter(context.Background(), &meter)
	res, err := plan.Solve(ctx, pr, plan.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("split %.4f %.4f, certified %v\n", res.X[0], res.X[1], res.Global)
	fmt.Println("within its bound:", res.Work <= plan.WorkBound(pr.Shape(), plan.Options{}))
	fmt.Println("metered:", meter.Work() == res.Work)
	// Output:
	// split 0.7217 0.2783, certified true
	// within its bound: true
	// metered: true
}

// Two tables share a term: V_1 = 1/x_1 + 1/(x_1 + x_2) and V_2 =
// 1/(x_1 + x_2) + 4/x_2. The larger is least where they are equal, 1/x_1 =
// 4/x_2: x = (0.2, 0.8), both 6.
func ExampleSolveMax() {
	mp := plan.MaxProblem{
		Covers: [][]int{{0}, {0, 1}, {1}},
		Coef:   []float64{1, 1},
		Tables: [][]plan.TableTerm{
			{{Term: 0, Coef: 1}, {Term: 1, Coef: 1}},
			{{Term: 1, Coef: 1}, {Term: 2, Coef: 4}},
		},
	}
	res, err := plan.SolveMax(context.Background(), mp)
	if err != nil {
		panic(err)
	}
	fmt.Printf("split %.4f, largest variance %.4f, certified: %v\n", res.X, res.Objective, res.Global)
	// Output:
	// split [0.2000 0.8000], largest variance 6.0000, certified: true
}
