package estimate_test

import (
	"fmt"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate"
)

// Corrections makes noisy counts consistent with an invariant from their
// marginals alone, as a distributed release does: here the 2 x 3 table of
// noisy counts x must agree with the exact row totals (the cuboid {sex}).
func ExampleCorrections() {
	s, _ := domain.NewSchema([]domain.Dimension{
		{Name: "sex", Values: []string{"F", "M"}},
		{Name: "age", Values: []string{"young", "middle", "old"}},
	})
	x := []float64{10.5, 20, 5, 8, 12.25, 3}
	rows := []float64{35, 24} // exact counts of {sex}
	inv := []estimate.Invariant{{Cuboid: 1, Counts: rows}}
	marg := [][]float64{{x[0] + x[1] + x[2], x[3] + x[4] + x[5]}} // x's marginal on {sex}
	corr, err := estimate.Corrections(s, 3, marg, inv)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range corr {
		fmt.Println(s.Format(c.Keep), c.Delta)
	}
	// Output:
	// {sex} [-0.16666666666666666 0.25]
}
