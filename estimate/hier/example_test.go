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

// Five counties in two states: the first state has two counties, the
// second three. The counties of one state can be exchanged by permuting
// the state's children, so they fall into one class and share one error
// law; the two states differ in shape, so they are classes of their own.
// With the county table measured (variance 1) and the state totals exact,
// a county's error is its own noise less its share of its state's noise:
// variance 1 - 1/2 in the first state, 1 - 1/3 in the second.
func ExampleSolution_TableLaws() {
	h, err := hier.NewHierarchy([]int{5, 2}, [][]int32{{0, 0, 1, 1, 1}})
	if err != nil {
		panic(err)
	}
	class, reps := h.Classes(0)
	fmt.Println("county classes:", class, "first county of each:", reps)
	p := hier.Problem{
		Hierarchy: h,
		Measurements: []hier.Measurement{
			{Level: 0, Values: []float64{10, 12, 7, 9, 20}, Variance: 1},
			{Level: 1, Values: []float64{20, 40}},
		},
	}
	sol, err := hier.Solve(context.Background(), p, []hier.View{{Level: 0}})
	if err != nil {
		panic(err)
	}
	laws, class, err := sol.TableLaws(context.Background(), 0, hier.LawOptions{})
	if err != nil {
		panic(err)
	}
	for c, law := range laws {
		fmt.Printf("class %d: variance %.4f\n", c, law.Variance)
	}
	fmt.Println("county 4's law is class", class[4])
	// Output:
	// county classes: [0 0 1 1 1] first county of each: [0 2]
	// class 0: variance 0.5000
	// class 1: variance 0.6667
	// county 4's law is class 1
}
