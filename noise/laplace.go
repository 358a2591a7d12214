package noise

import (
	"fmt"
	"math"
	"math/big"
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
// so every output is a multiple of Grid, computed exactly in float64 up to
// 2^53 grid steps, and the output distribution depends on x only through
// round(x/Grid). Rounding is
// half-up, which commutes with shifts by grid multiples: inputs on the grid,
// such as counts, are never moved. Inputs beyond Range() in magnitude (at
// least MinRange = 2^80 for every accepted parameter, far beyond any count)
// are clamped and NaN is released as 0 (see Add): no input value makes it
// fail. Outputs are exact up to 2^53 grid steps; beyond, the exact noisy
// value is rounded to the nearest float64, a function of it alone (see
// Add).
//
// The accuracy cost, compared with continuous Lap(Scale): the variance is
// Grid^2 Var(Z) = 2 Scale^2 - Grid^2/6 + O(Grid^4/Scale^2), the rounding moves
// an input by at most Grid/2, and the calibration pays at most one extra grid
// step of sensitivity, none when the sensitivity is a multiple of Grid (see
// Loss). The grid is at most 2^-20 of both the scale and the
// sensitivity, so each cost is below one part in a million.
type Laplace struct {
	grid  float64
	limit float64 // clamp bound in grid steps: stepLimit(grid)
	geo   DiscreteLaplace
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
// (about 2^-20 of them, at least 2^-920) is a normal float64, x/Grid is
// exact and the representable range Range() = 2^1000 Grid is at least
// MinRange, and at most maxGridParam, so that the grid is at most 2^969 and
// every output (at most 2^1000 plus 2^53 grid steps) is finite.
const (
	minGridParam = 0x1p-900 // about 1.2e-271
	maxGridParam = 0x1p990  // about 1e298
)

// MinRange is the smallest representable range of any grid mechanism
// (Laplace.Range, Gaussian.Range): inputs up to MinRange in magnitude, in
// particular every integer count up to 2^53 and beyond, are never clamped,
// whatever the accepted sensitivity, epsilon, rho, scale or resolution.
const MinRange = 0x1p80

// rangeCap bounds the representable range of every grid mechanism, so that
// outputs stay finite: Range() = min(2^1000 Grid, 2^1000).
const rangeCap = 0x1p1000

// stepLimit returns the clamp bound in grid steps for a grid g in
// [2^-920, 2^969]: min(2^1000, 2^1000/g), a power of two and an integer (at
// least 2^31), so that clamping commutes with rounding to the grid.
func stepLimit(g float64) float64 { return min(rangeCap, rangeCap/g) }

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
	return Laplace{grid: grid, limit: stepLimit(grid), geo: geo}, nil
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

// Range returns the representable range: inputs x with |x| <= Range() are
// never clamped. It is min(2^1000 Grid, 2^1000), at least MinRange.
func (l Laplace) Range() float64 { return l.limit * l.grid }

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

// Round returns the grid point an input is rounded to before noise is added
// (after clamping to Range()).
func (l Laplace) Round(x float64) float64 {
	return l.grid * roundHalfUp(clampSteps(x/l.grid, l.limit))
}

// clampSteps returns v = x/Grid clamped to [-limit, limit], and 0 for NaN.
// x/Grid is exact (Grid is a power of two) unless it overflows to ±Inf,
// beyond 2^1023 > limit, which clamping maps where the exact quotient would
// go, or is below 2^-1022, where it rounds to 0 either way.
//
// Clamping keeps the privacy guarantee: |clamp(u)-clamp(v)| <= |u-v| and,
// as the bounds are integers, rounding commutes with it, so inputs within d
// of each other are still rounded to grid points at most ceil(d/Grid)
// apart. It replaces an error that would have told a data-dependent fact
// (whether some value is huge) to whoever sees the error. The limit
// (stepLimit) puts the clamp at Range() >= MinRange = 2^80, beyond every
// count a table can hold: no real input is ever moved by it.
//
// NaN has no place in that order. A query of finite sensitivity never yields
// it, so it can only come from a broken query, for which no guarantee holds
// anyway; it is released as 0 rather than refused, so that not even then
// does an error path depend on the data.
func clampSteps(v, limit float64) float64 {
	if v != v {
		return 0
	}
	return min(max(v, -limit), limit)
}

// maxExactSample bounds the noise samples that float64 holds exactly. A
// discrete Laplace or Gaussian sample of an accepted scale exceeds it with
// probability below exp(-2^12) (see MaxScale).
const maxExactSample = 1 << 53

// addSteps returns k + z rounded to the nearest float64 (ties to even), for
// k an integer-valued float64 (the rounded input, in grid steps) and z the
// noise: exactly k + z when |k + z| <= 2^53. It depends on k + z alone
// (float64 addition of exact operands is correctly rounded), so the output
// is a function of the exact noisy value: post-processing, which keeps the
// loss of the exact mechanism. Which path it takes depends on z only, never
// on the input.
func addSteps(k float64, z int64) float64 {
	if uint64(z)+maxExactSample > 2*maxExactSample { // |z| > 2^53, in one comparison
		return addStepsBig(k, z)
	}
	return k + float64(z) // float64(z) is exact
}

// addStepsBig is addSteps for the (practically never drawn) samples beyond
// 2^53, which float64(z) would round: the sum is formed exactly (|k| <=
// 2^1000, |z| < 2^63) and rounded once.
func addStepsBig(k float64, z int64) float64 {
	s := new(big.Float).SetPrec(1100).SetFloat64(k)
	s.Add(s, new(big.Float).SetInt64(z))
	f, _ := s.Float64()
	return f
}

// Add returns x plus grid Laplace noise: Grid times round(x/Grid) + Z,
// rounded to float64 (exact up to 2^53 grid steps, see addSteps). Values
// beyond Range() (including infinities) are first clamped to ±Range(), and
// NaN is released as 0 (see clampSteps): no input value makes it fail. The
// error is always nil; it is kept so that callers need not change if a
// future mechanism can fail for a reason that does not depend on x.
func (l Laplace) Add(r *Rand, x float64) (float64, error) {
	k := roundHalfUp(clampSteps(x/l.grid, l.limit)) // x/grid is exact: grid is a power of two
	return addSteps(k, l.geo.Sample(r)) * l.grid, nil
}

// AddTo adds independent grid Laplace noise to every element of xs in place,
// clamping and rounding as Add does. The error is always nil, as for Add.
func (l Laplace) AddTo(r *Rand, xs []float64) error {
	inv, limit := 1/l.grid, l.limit
	for i, x := range xs {
		z := l.geo.Sample(r) // first, so that nothing lives across the call
		xs[i] = addSteps(roundHalfUp(clampSteps(x*inv, limit)), z) * l.grid
	}
	return nil
}

// roundHalfUp returns floor(v + 1/2) computed without the double rounding
// of v+0.5 (which maps 0.49999999999999994 to 1), as a float64: exact for
// every finite v (v-f is exact below 2^52, and from 2^52 on every float64
// is an integer, so v-f is 0).
func roundHalfUp(v float64) float64 {
	f := math.Floor(v)
	if v-f >= 0.5 {
		f++
	}
	return f
}
