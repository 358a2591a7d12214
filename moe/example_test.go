package moe_test

import (
	"fmt"

	"github.com/knowdp/knowdp/moe"
)

// The margin of error of the difference of two Laplace(2) noises, and of
// the same error with a normal part of variance 1 whose Laplace terms have
// scale at most 0.1, with the bound on the coverage that approximation
// costs.
func ExampleQuantile90() {
	terms := []moe.Term{{Scale: 2, Count: 1}, {Scale: -2, Count: 1}}
	fmt.Printf("%.4f\n", moe.Quantile90(terms))
	m := moe.Law{Terms: terms, NormalVariance: 1, NormalMaxScale: 0.1}.Margin(moe.WideRule())
	fmt.Printf("%.4f within %.0e of 90%%, E|E| = %.4f\n", m.MOE90, m.CoverageErr, m.MeanAbs)
	// Output:
	// 6.5436
	// 6.7340 within 5e-05 of 90%, E|E| = 3.1197
}
