package noise

import (
	"fmt"
	"math"
)

// GridBits sets the resolution of the Laplace grid: the grid step is the
// largest power of two at most 2^-GridBits times the smaller of the noise
// scale and the input change the mechanism must protect. With 20 bits,
// rounding the input and discretising the noise cost a relative 2^-20 (about
// one part in a million) in noise scale, far below the sampling error of any
// release.
const GridBits = 20

// Laplace is the Laplace mechanism on a power-of-two grid (the "snapping"
// idea of Mironov 2012, with exact discrete noise). It releases
//
//	Grid * (round(x/Grid) + Z),   Z ~ DiscreteLaplace(Scale/Grid),
//
// so every output is a multiple of Grid, computed exactly in float64, and the
// output distribution depends on x only through round(x/Grid). Rounding is
// half-up, which commutes with shifts by grid multiples: inputs on the grid,
// such as counts, are never moved.
//
// The accuracy cost, compared with continuous Lap(Scale): the variance is
// Grid^2 Var(Z) = 2 Scale^2 - Grid^2/6 + O(Grid^4/Scale^2), the rounding moves
// an input by at most Grid/2, and the calibration pays one extra grid step of
// sensitivity (see Loss). The grid is at most 2^-20 of both the scale and the
// sensitivity, so each cost is below one part in a million.
type Laplace struct {
	grid float64
	geo  DiscreteLaplace
}

// NewLaplace returns the grid Laplace mechanism for a query whose values on
// neighbouring inputs differ by at most sensitivity, with privacy loss at
// most epsilon: Loss(sensitivity) <= epsilon.
func NewLaplace(sensitivity, epsilon float64) (Laplace, error) {
	if math.IsNaN(sensitivity) || math.IsInf(sensitivity, 0) || sensitivity <= 0 {
		return Laplace{}, fmt.Errorf("noise: sensitivity must be finite and > 0, got %v", sensitivity)
	}
	if math.IsNaN(epsilon) || math.IsInf(epsilon, 0) || epsilon <= 0 {
		return Laplace{}, fmt.Errorf("noise: epsilon must be finite and > 0, got %v", epsilon)
	}
	grid := gridFor(min(sensitivity, sensitivity/epsilon))
	// The rounded inputs differ by at most grid*(floor(s/grid)+1); scale the
	// noise to that, rounding t up so the loss never exceeds epsilon.
	t := (math.Floor(sensitivity/grid) + 1) / epsilon
	return newLaplace(grid, math.Nextafter(t, math.Inf(1)))
}

// NewLaplaceScale returns the grid Laplace mechanism with noise scale b
// (Scale() == b exactly) whose grid resolves input changes down to
// resolution: Loss(d) <= (d + Grid)/b with Grid <= 2^-20 min(b, resolution).
// d_X-private mechanisms use it, calibrating b per pair of universe elements
// with Loss.
func NewLaplaceScale(b, resolution float64) (Laplace, error) {
	if math.IsNaN(b) || math.IsInf(b, 0) || b <= 0 {
		return Laplace{}, fmt.Errorf("noise: Laplace scale must be finite and > 0, got %v", b)
	}
	if math.IsNaN(resolution) || math.IsInf(resolution, 0) || resolution <= 0 {
		return Laplace{}, fmt.Errorf("noise: Laplace resolution must be finite and > 0, got %v", resolution)
	}
	grid := gridFor(min(b, resolution))
	return newLaplace(grid, b/grid)
}

func newLaplace(grid, t float64) (Laplace, error) {
	if grid == 0 || math.IsInf(grid, 0) {
		return Laplace{}, fmt.Errorf("noise: Laplace scale %g is outside the float64 range", grid*0x1p20)
	}
	geo, err := NewDiscreteLaplace(t)
	if err != nil {
		return Laplace{}, err
	}
	return Laplace{grid: grid, geo: geo}, nil
}

// gridFor returns the largest power of two at most b*2^-GridBits.
func gridFor(b float64) float64 {
	_, e := math.Frexp(b) // b = f * 2^e, f in [1/2, 1)
	return math.Ldexp(1, e-1-GridBits)
}

// Grid returns the grid step: every output is a multiple of it.
func (l Laplace) Grid() float64 { return l.grid }

// Scale returns the noise scale b of the equivalent continuous Lap(b).
func (l Laplace) Scale() float64 { return l.grid * l.geo.scale }

// Variance returns the exact variance of the added noise.
func (l Laplace) Variance() float64 { return l.grid * l.grid * l.geo.Variance() }

// Loss returns the worst-case privacy loss (the log of the largest ratio of
// output probabilities) between two inputs that differ by at most d:
// their rounded values differ by at most Grid*(floor(d/Grid)+1), or by
// exactly d when d is a multiple of Grid and both inputs lie on the grid.
// Loss(0) is 0.
func (l Laplace) Loss(d float64) float64 {
	if d == 0 {
		return 0
	}
	return (math.Floor(math.Abs(d)/l.grid) + 1) / l.geo.scale
}

// Dist returns the distribution of the grid noise in grid units: the output
// for input x is Grid*(Round(x)/Grid + Z) with Z drawn from it.
func (l Laplace) Dist() DiscreteLaplace { return l.geo }

// Round returns the grid point an input is rounded to before noise is added.
func (l Laplace) Round(x float64) float64 { return l.grid * float64(roundHalfUp(x/l.grid)) }

// Add returns x plus grid Laplace noise. It fails for NaN or infinite x and
// for |x| >= Grid*2^51, where grid points are no longer exact in float64.
func (l Laplace) Add(r *Rand, x float64) (float64, error) {
	v := x / l.grid // exact: grid is a power of two
	if !(math.Abs(v) < 0x1p51) {
		return 0, fmt.Errorf("noise: value %v cannot be noised on grid %g (must be finite and below %g in magnitude)", x, l.grid, l.grid*0x1p51)
	}
	k := roundHalfUp(v) + l.geo.Sample(r)
	return float64(k) * l.grid, nil
}

// AddTo adds independent grid Laplace noise to every element of xs in place.
// On error xs is unchanged.
func (l Laplace) AddTo(r *Rand, xs []float64) error {
	lim := l.grid * 0x1p51
	for i, x := range xs {
		if !(math.Abs(x) < lim) {
			return fmt.Errorf("noise: element %d = %v cannot be noised on grid %g (must be finite and below %g in magnitude)", i, x, l.grid, lim)
		}
	}
	inv := 1 / l.grid
	for i, x := range xs {
		xs[i] = float64(roundHalfUp(x*inv)+l.geo.Sample(r)) * l.grid
	}
	return nil
}

// roundHalfUp returns floor(v + 1/2) computed without the double rounding
// of v+0.5 (which maps 0.49999999999999994 to 1). |v| < 2^52.
func roundHalfUp(v float64) int64 {
	f := math.Floor(v)
	if v-f >= 0.5 { // v-f is exact for |v| < 2^52
		f++
	}
	return int64(f)
}
