package hier_test

import (
	"context"
	"fmt"

	"github.com/knowdp/knowdp/estimate/hier"
)

// Four counties in two states, crossed with one flat dimension of two
// values (say sex). The county × sex table is measured with noise of
// variance 1, the state totals are public (exact). The estimate makes the
// county table add up to the exact state totals and gives the state × sex
// table and each county's error law.
func Example() {
	h, err := hier.NewHierarchy([]int{4, 2}, [][]int32{{0, 0, 1, 1}})
	if err != nil {
		panic(err)
	}
	p := hier.Problem{
		Hierarchy: h,
		FlatSizes: []int{2},
		Measurements: []hier.Measurement{
			// county × sex, row-major: county 0 (F, M), county 1 (F, M), ...
			{Flat: 1, Level: 0, Values: []float64{10, 12, 7, 9, 20, 18, 4, 6}, Variance: 1},
			// state totals, exact
			{Flat: 0, Level: 1, Values: []float64{40, 50}},
		},
	}
	queries := []hier.View{{Flat: 1, Level: 0}, {Flat: 1, Level: 1}}
	sol, err := hier.Solve(context.Background(), p, queries)
	if err != nil {
		panic(err)
	}
	fmt.Println("county x sex:", sol.Tables[0])
	fmt.Println("state x sex: ", sol.Tables[1])
	law, err := sol.Law(0, 0, hier.LawOptions{})
	if err != nil {
		panic(err)
	}
	for _, t := range law.Terms {
		fmt.Printf("%+.3f x (sum of %d noise cells of measurement %d)\n", t.Coef, t.Count, t.Measurement)
	}
	fmt.Printf("variance %.4f\n", law.Variance)
	// Output:
	// county x sex: [10.5 12.5 7.5 9.5 20.5 18.5 4.5 6.5]
	// state x sex:  [18 22 25 25]
	// +0.750 x (sum of 1 noise cells of measurement 0)
	// -0.250 x (sum of 3 noise cells of measurement 0)
	// variance 0.7500
}
