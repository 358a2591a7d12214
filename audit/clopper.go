package audit

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mathext"
)

// ClopperPearson returns exact (Clopper–Pearson) one-sided confidence bounds
// for the success probability p of a binomial from k successes in n trials:
// P(p < lo) <= alpha and P(p > hi) <= alpha, whatever p is. They are
// quantiles of beta distributions,
//
//	lo = I^-1_alpha(k, n-k+1)    (0 when k = 0),
//	hi = I^-1_{1-alpha}(k+1, n-k)  (1 when k = n),
//
// where I is the regularized incomplete beta function. The interval [lo, hi]
// has two-sided confidence 1-2 alpha.
func ClopperPearson(k, n int, alpha float64) (lo, hi float64, err error) {
	if n <= 0 || k < 0 || k > n {
		return 0, 0, fmt.Errorf("audit: Clopper-Pearson needs 0 <= k <= n and n > 0, got k = %d, n = %d", k, n)
	}
	if !(alpha > 0 && alpha < 0.5) {
		return 0, 0, fmt.Errorf("audit: Clopper-Pearson level alpha must be in (0, 0.5), got %v", alpha)
	}
	lo, hi = 0, 1
	if k > 0 {
		lo = mathext.InvRegIncBeta(float64(k), float64(n-k+1), alpha)
	}
	if k < n {
		hi = mathext.InvRegIncBeta(float64(k+1), float64(n-k), 1-alpha)
	}
	// Guard the inversion's last-bit error in the conservative direction.
	return math.Max(0, lo*(1-1e-12)), math.Min(1, hi*(1+1e-12)), nil
}
