package integer_test

import (
	"context"
	"fmt"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/integer"
	"github.com/knowdp/knowdp/noise"
)

// Round a least-squares release to non-negative whole numbers that keep
// the published sex and age totals exactly.
func ExampleRoundInteger() {
	s, _ := domain.NewSchema([]domain.Dimension{
		{Name: "sex", Values: []string{"F", "M"}},
		{Name: "age", Values: []string{"0-17", "18-64", "65+"}},
	})
	sex, _ := s.CuboidOf("sex")
	age, _ := s.CuboidOf("age")
	// Published exactly: 57 women, 52 men; 22, 75 and 12 by age.
	margins := []integer.Margin{
		{Dims: sex, Targets: []float64{57, 52}},
		{Dims: age, Targets: []float64{22, 75, 12}},
	}
	// A noisy estimate made consistent with them, with a negative cell.
	estimate := []float64{10.4, 47.1, -0.5, 11.6, 27.9, 12.5}
	res, err := integer.RoundInteger(context.Background(), s, domain.Base(2), estimate, margins,
		noise.NewSeeded(1)) // seeded: reproducible rounding
	if err != nil {
		panic(err)
	}
	fmt.Println("counts:", res.Counts)
	fmt.Println("exact:", res.Exact, "largest deviation:", res.MaxDeviation)
	// Output:
	// counts: [10 47 0 12 28 12]
	// exact: true largest deviation: 0
}
