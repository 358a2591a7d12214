package contrast_test

import (
	"context"
	"fmt"

	"github.com/knowdp/knowdp/contrast"
	"github.com/knowdp/knowdp/noise"
)

// The residual of a 2 x 3 marginal, its two contrasts measured under
// rho = 0.5 at L2 sensitivity 1 (a seeded run: not private), and the
// measurement's contribution to the marginal's residual. The marginal is
// additive (rows and columns do not interact), so its residual is 0 and
// what comes out is the noise alone.
func ExampleNoise_Measure() {
	rn, err := contrast.NewNoise([]int{2, 3}, 1, 0.5)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d contrasts, sigma %.6f\n", rn.Rows(), rn.Sigma())
	z, err := rn.Measure(context.Background(), []float64{10, 20, 30, 40, 50, 60}, noise.NewSeeded(1))
	if err != nil {
		panic(err)
	}
	fmt.Printf("%.2f\n", contrast.PseudoMarginal(z, []int{2, 3}))
	// Output:
	// 2 contrasts, sigma 1.000000
	// [0.64 -0.98 0.34 -0.64 0.98 -0.34]
}
