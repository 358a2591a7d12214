package sidecar

import (
	"math"
	"strconv"
)

// StatedUp returns x as a loss is stated to a reader: the shortest
// decimal (fewest significant digits) that is at least x and exceeds it
// by at most a billionth of it, so that a spend of 0.9999999999990905,
// the sum of shares on the 2^-40 grid, reads 1 and is never understated.
// A loss with no such decimal is returned as it is.
func StatedUp(x float64) float64 {
	if !(x > 0) || math.IsInf(x, 0) {
		return x
	}
	for sig := 1; sig <= 17; sig++ {
		d, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'e', sig-1, 64), 64)
		if d < x {
			// Rounded to nearest, down: one unit of the last digit up.
			exp := math.Floor(math.Log10(d))
			d, _ = strconv.ParseFloat(strconv.FormatFloat(d+math.Pow(10, exp-float64(sig-1)), 'e', sig-1, 64), 64)
		}
		if d >= x && d-x <= 1e-9*x {
			return d
		}
	}
	return x
}
