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
// such as counts, are never moved. Inputs beyond 2^51 grid steps are
// clamped and NaN is released as 0 (see Add): no input value makes it fail.
//
// The accuracy cost, compared with continuous Lap(Scale): the variance is
// Grid^2 Var(Z) = 2 Scale^2 - Grid^2/6 + O(Grid^4/Scale^2), the rounding moves
// an input by at most Grid/2, and the calibration pays at most one extra grid
// step of sensitivity, none when the sensitivity is a multiple of Grid (see
// Loss). The grid is at most 2^-20 of both the scale and the
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
	b := sensitivity / epsilon
	if err := checkGridRange("sensitivity", sensitivity); err != nil {
		return Laplace{}, err
	}
	if err := checkGridRange("sensitivity/epsilon", b); err != nil {
		return Laplace{}, err
	}
	grid := gridFor(min(sensitivity, b))
	// Inputs differing by at most s are rounded to grid points at most
	// ceil(s/grid) steps apart (see Loss); scale the noise to that. t is
	// raised by a relative calibrationMargin: far more than the one
	// rounding of the quotient needs, it keeps float64 evaluations of the
	// loss (Loss itself, audits summing log-probabilities) below epsilon.
	t := math.Ceil(sensitivity/grid) / epsilon * (1 + calibrationMargin)
	return newLaplace(grid, t)
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
	if err := checkGridRange("Laplace scale", b); err != nil {
		return Laplace{}, err
	}
	if err := checkGridRange("Laplace resolution", resolution); err != nil {
		return Laplace{}, err
	}
	grid := gridFor(min(b, resolution))
	return newLaplace(grid, b/grid)
}

// Grid parameters must be at least minGridParam, so that the grid step
// (about 2^-20 of them) is a normal float64 and x/Grid is exact, and at most
// maxGridParam, so that every output (at most 2^53 grid steps) is finite.
const (
	minGridParam = 0x1p-1001 // about 4.5e-302
	maxGridParam = 0x1p990   // about 1e298
)

// checkGridRange rejects a grid parameter outside [minGridParam,
// maxGridParam], naming it: a subnormal grid would make the outputs
// inexact, a huge one would overflow them.
func checkGridRange(name string, v float64) error {
	if v < minGridParam || v > maxGridParam {
		return fmt.Errorf("noise: %s %g is outside [%g, %g], where the Laplace grid (2^-%d of it) and its outputs are exact float64 values", name, v, minGridParam, maxGridParam, GridBits)
	}
	return nil
}

func newLaplace(grid, t float64) (Laplace, error) {
	if !(t <= MaxScale) {
		return Laplace{}, fmt.Errorf("noise: Laplace noise scale is %g grid steps of %g, above MaxScale 2^40: epsilon is too small for this sensitivity (or the scale too large for this resolution)", t, grid)
	}
	geo, err := NewDiscreteLaplace(t)
	if err != nil {
		return Laplace{}, err
	}
	return Laplace{grid: grid, geo: geo}, nil
}

// calibrationMargin is the relative amount by which NewLaplace and
// NewGaussian raise the noise above the exact calibration, so that the loss
// they promise holds with room for the float64 rounding of whoever checks
// it: Loss(sensitivity) is within 2^-40 (relative) below epsilon.
const calibrationMargin = 0x1p-40

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
// output probabilities) between two real inputs that differ by at most d,
// wherever they lie: ceil(|d|/Grid)/(Scale/Grid).
//
// Rounding half-up maps inputs u <= v with v-u <= d to grid points at most
// ceil(d/Grid) steps apart (floor(a)-floor(b) < a-b+1 and is an integer),
// and two grid points k steps apart have loss exactly k/(Scale/Grid) (in the
// tails beyond both). The bound is attained: for d a multiple of Grid by two
// inputs on the grid, otherwise by inputs just below a rounding boundary and
// just above another. Loss(0) is 0.
func (l Laplace) Loss(d float64) float64 {
	return math.Ceil(math.Abs(d)/l.grid) / l.geo.scale
}

// Dist returns the distribution of the grid noise in grid units: the output
// for input x is Grid*(Round(x)/Grid + Z) with Z drawn from it.
func (l Laplace) Dist() DiscreteLaplace { return l.geo }

// Round returns the grid point an input is rounded to before noise is added.
func (l Laplace) Round(x float64) float64 { return l.grid * float64(roundHalfUp(x/l.grid)) }

// maxGridSteps bounds |x/Grid| after clamping. With noise of at most 2^52
// steps (see MaxScale) every output is below 2^53 steps, so it is an exact
// float64 multiple of the grid.
const maxGridSteps = 0x1p51

// clampSteps returns v = x/Grid clamped to [-2^51, 2^51], and 0 for NaN.
//
// Clamping keeps the privacy guarantee: |clamp(u)-clamp(v)| <= |u-v| and,
// as the bounds are integers, rounding commutes with it, so inputs within d
// of each other are still rounded to grid points at most ceil(d/Grid)
// apart. It replaces an error that would have told a data-dependent fact
// (whether some value is huge) to whoever sees the error.
//
// NaN has no place in that order. A query of finite sensitivity never yields
// it, so it can only come from a broken query, for which no guarantee holds
// anyway; it is released as 0 rather than refused, so that not even then
// does an error path depend on the data.
func clampSteps(v float64) float64 {
	if v != v {
		return 0
	}
	return min(max(v, -maxGridSteps), maxGridSteps)
}

// Add returns x plus grid Laplace noise. Values beyond 2^51 grid steps
// (including infinities) are first clamped to ±Grid*2^51, and NaN is
// released as 0 (see clampSteps): no input value makes it fail. The error
// is always nil; it is kept so that callers need not change if a future
// mechanism can fail for a reason that does not depend on x.
func (l Laplace) Add(r *Rand, x float64) (float64, error) {
	k := roundHalfUp(clampSteps(x/l.grid)) + l.geo.Sample(r) // x/grid is exact: grid is a power of two
	return float64(k) * l.grid, nil
}

// AddTo adds independent grid Laplace noise to every element of xs in place,
// clamping as Add does. The error is always nil, as for Add.
func (l Laplace) AddTo(r *Rand, xs []float64) error {
	inv := 1 / l.grid
	for i, x := range xs {
		xs[i] = float64(roundHalfUp(clampSteps(x*inv))+l.geo.Sample(r)) * l.grid
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
