package noise_test

import (
	"fmt"

	"github.com/knowdp/knowdp/noise"
)

// A count with sensitivity 1 released with eps = 0.5: the output is a grid
// point, and the mechanism's loss for a change of 1 is at most 0.5.
func ExampleNewLaplace() {
	lap, err := noise.NewLaplace(1, 0.5)
	if err != nil {
		panic(err)
	}
	r := noise.NewSeeded(1) // reproducible and NOT private; use noise.NewRand() for real releases
	y, _ := lap.Add(r, 42)
	fmt.Printf("scale %.4f, grid 2^%d, loss %.6f\n", lap.Scale(), exponent(lap.Grid()), lap.Loss(1))
	fmt.Println("on the grid:", y/lap.Grid() == float64(int64(y/lap.Grid())))
	// Output:
	// scale 2.0000, grid 2^-20, loss 0.500000
	// on the grid: true
}

func exponent(g float64) int {
	e := 0
	for ; g < 1; g *= 2 {
		e--
	}
	return e
}

// The exponential mechanism: pick a candidate with probability
// proportional to exp(eps * utility / (2 * sensitivity)).
func ExampleChoose() {
	utility := []float64{3, 10, 7}
	const eps, sens = 1.0, 1.0
	logw := make([]float64, len(utility))
	for i, u := range utility {
		logw[i] = eps * u / (2 * sens)
	}
	i, err := noise.Choose(noise.NewSeeded(3), logw)
	fmt.Println(i >= 0 && i < len(utility), err)
	// Output: true <nil>
}

// A count with L2 sensitivity 1 released under rho-zCDP with rho = 0.5:
// discrete Gaussian noise with sigma = 1/sqrt(2 rho) = 1, on the grid.
func ExampleNewGaussian() {
	g, err := noise.NewGaussian(1, 0.5)
	if err != nil {
		panic(err)
	}
	r := noise.NewSeeded(1) // reproducible and NOT private; use noise.NewRand() for real releases
	y, _ := g.Add(r, 42)
	fmt.Printf("sigma %.4f, rho for a change of 1: %.4f\n", g.Sigma(), g.Rho(1))
	fmt.Println("on the grid:", y/g.Grid() == float64(int64(y/g.Grid())))
	// Output:
	// sigma 1.0000, rho for a change of 1: 0.5000
	// on the grid: true
}

// The discrete Gaussian on the integers: exact samples, exact variance.
func ExampleNewDiscreteGaussian() {
	g, err := noise.NewDiscreteGaussian(0.5)
	if err != nil {
		panic(err)
	}
	z := g.Sample(noise.NewSeeded(2)) // seeded: NOT private
	fmt.Printf("variance %.6f (sigma^2 = 0.25), P(0) = %.6f, rho for sensitivity 1: %v\n", g.Variance(), g.Prob(0), g.Rho(1))
	fmt.Println("small sample:", z >= -3 && z <= 3)
	// Output:
	// variance 0.215013 (sigma^2 = 0.25), P(0) = 0.786571, rho for sensitivity 1: 2
	// small sample: true
}
