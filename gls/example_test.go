package gls_test

import (
	"context"
	"fmt"

	"github.com/knowdp/knowdp/gls"
	"github.com/knowdp/knowdp/query"
)

// Four counties in two states, by sex: the county x sex table and the
// state x sex table are measured with noise, the state totals are exact.
// The estimate of the county totals agrees with the state totals exactly.
func Example() {
	ctx := context.Background()
	state, err := query.NewRollUp([]int32{0, 0, 1, 1})
	if err != nil {
		panic(err)
	}
	I, T := query.NewIdentity, query.NewTotal
	p := gls.Problem{
		Shape: []int{4, 2}, // county x sex
		Measurements: []gls.Measurement{
			{Name: "county x sex", Term: query.Term{I(4), I(2)}, Variance: 2},
			{Name: "state x sex", Term: query.Term{state, I(2)}, Variance: 1},
		},
		Invariants: []gls.Invariant{{Name: "state totals", Term: query.Term{state, T(2)}}},
		Queries: []gls.Query{
			{Name: "county totals", Term: query.Term{I(4), T(2)}},
			{Name: "state x sex", Term: query.Term{state, I(2)}},
		},
	}
	plan, err := gls.NewPlan(p, gls.Options{})
	if err != nil {
		panic(err)
	}
	est, err := plan.Solve(ctx,
		[][]float64{{10, 12, 7, 9, 20, 18, 3, 5}, {16, 22, 24, 22}},
		[][]float64{{40, 50}})
	if err != nil {
		panic(err)
	}
	fmt.Printf("county totals: %.2f\n", est.Answers[0])
	fmt.Printf("state x sex: %.2f\n", est.Answers[1])
	fmt.Println("converged:", est.Certificate.Residual <= est.Certificate.Tolerance)
	vars, err := plan.Variances(ctx, 1)
	if err != nil {
		panic(err)
	}
	fmt.Printf("state x sex variances: %.3f (%d solve)\n", vars.Values, vars.Solves)
	law, err := plan.Law(ctx, 1, 0)
	if err != nil {
		panic(err)
	}
	fmt.Printf("state 0, sex 0 error: %.3f on county x sex, %.3f on state x sex\n", law.Coefs[0], law.Coefs[1])

	// Counties by sex are not determined once the county table is gone.
	p.Measurements = p.Measurements[1:]
	p.Queries = []gls.Query{{Name: "county x sex", Term: query.Term{I(4), I(2)}}}
	_, err = gls.NewPlan(p, gls.Options{})
	fmt.Println(err)
	// Output:
	// county totals: [23.00 17.00 40.00 10.00]
	// state x sex: [17.20 22.80 25.80 24.20]
	// converged: true
	// state x sex variances: [0.400 0.400 0.400 0.400] (1 solve)
	// state 0, sex 0 error: [0.100 -0.100 0.100 -0.100 0.000 0.000 0.000 0.000] on county x sex, [0.400 -0.400 0.000 0.000] on state x sex
	// gls: query "county x sex" is not determined: along dimension 0 it tells apart values that every measurement and invariant adds together
}
