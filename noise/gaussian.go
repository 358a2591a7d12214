package noise

import (
	"fmt"
	"math"
	"math/big"
)

// MinSigma and MaxSigma bound the discrete Gaussian's sigma, in units of the
// integers sampled. Below MinSigma the distribution is 0 with probability
// above 1 - 2^-10^11; above MaxSigma the discrete Laplace proposal would
// exceed MaxScale.
const (
	MinSigma = 0x1p-20
	MaxSigma = MaxScale - 1
)

// DiscreteGaussian is the discrete Gaussian distribution N_Z(0, sigma^2) on
// the integers: P(Z = z) = exp(-z^2/(2 sigma^2)) / N, with N the sum of the
// numerator over all integers. Adding it to an integer query whose values on
// neighbouring inputs differ by at most D in L2 norm (for a vector query,
// with independent noise per coordinate) satisfies rho-zero-concentrated DP
// with rho = D^2/(2 sigma^2) (Canonne, Kamath and Steinke, "The Discrete
// Gaussian for Differential Privacy", NeurIPS 2020, Theorem 4).
//
// Sample is exact: every integer has exactly the stated probability.
type DiscreteGaussian struct {
	sigma    float64
	sigma2   float64 // sigma^2 rounded, for the fast path only
	t        int64   // proposal scale floor(sigma)+1
	c        float64 // sigma^2/t rounded, for the fast path only
	inv2s2   float64 // 1/(2 sigma^2) rounded, for the fast path only
	invSigma float64 // 1/sigma rounded, for the fast path's error bound
	lap      DiscreteLaplace
	acc      *[gaussTab][2]uint64 // bounds on floor(p(y) 2^64) for |y| < gaussTab
	logNorm  float64              // ln N
	variance float64
}

// NewDiscreteGaussian returns N_Z(0, sigma^2); sigma must be in
// [MinSigma, MaxSigma].
func NewDiscreteGaussian(sigma float64) (DiscreteGaussian, error) {
	if !(sigma >= MinSigma && sigma <= MaxSigma) {
		return DiscreteGaussian{}, fmt.Errorf("noise: discrete Gaussian sigma must be in [2^-20, 2^40-1], got %v", sigma)
	}
	t := int64(math.Floor(sigma)) + 1
	lap, err := NewDiscreteLaplace(float64(t))
	if err != nil {
		return DiscreteGaussian{}, err
	}
	g := DiscreteGaussian{sigma: sigma, sigma2: sigma * sigma, t: t, lap: lap}
	g.c = g.sigma2 / float64(t)
	g.inv2s2 = 0.5 / g.sigma2
	g.invSigma = 1 / sigma
	g.acc = new([gaussTab][2]uint64)
	for y := range gaussTab {
		g.acc[y][0], g.acc[y][1] = g.acceptBounds(int64(y))
	}
	g.logNorm, g.variance = gaussianSums(sigma)
	return g, nil
}

// gaussianSums returns ln sum_z exp(-z^2/(2 s^2)) and the variance
// sum_z z^2 exp(-z^2/(2 s^2)) / sum_z exp(-z^2/(2 s^2)) over all integers z,
// to float64 precision.
//
// For s <= 64 it sums the series directly out to |z| = 40 s + 2, beyond
// which the terms are below e^-800 of the largest. For larger s it uses the
// Poisson summation formula: the sums are s sqrt(2 pi) (1 + 2 sum_k q_k) and
// s^3 sqrt(2 pi) (1 + 2 sum_k (1 - 4 pi^2 s^2 k^2) q_k), q_k =
// exp(-2 pi^2 s^2 k^2), and q_1 < e^-80000 vanishes: the variance is
// s^2 exactly in float64.
func gaussianSums(s float64) (logNorm, variance float64) {
	if s > 64 {
		return math.Log(s) + 0.5*math.Log(2*math.Pi), s * s
	}
	inv := 0.5 / (s * s)
	zmax := int64(40*s) + 2
	// Sum the small terms first.
	var n, m float64
	for z := zmax; z >= 1; z-- {
		f := float64(z)
		e := math.Exp(-f * f * inv)
		n += 2 * e
		m += 2 * f * f * e
	}
	n++
	return math.Log(n), m / n
}

// Sigma returns sigma.
func (g DiscreteGaussian) Sigma() float64 { return g.sigma }

// Variance returns Var Z, the sum of the series to float64 precision. It
// is slightly below sigma^2 for small sigma and equals it in float64 for
// sigma above about 2.
func (g DiscreteGaussian) Variance() float64 { return g.variance }

// Prob returns P(Z = z).
func (g DiscreteGaussian) Prob(z int64) float64 {
	f := float64(z) / g.sigma
	return math.Exp(-0.5*f*f - g.logNorm)
}

// Rho returns the zCDP parameter of adding Z to an integer query whose
// values on neighbouring inputs differ by at most d in L2 norm:
// d^2/(2 sigma^2).
func (g DiscreteGaussian) Rho(d float64) float64 {
	f := d / g.sigma
	return 0.5 * f * f
}

// Sample draws one value exactly, by the rejection sampler of Canonne,
// Kamath and Steinke (2020, Algorithm 3): propose Y from the discrete
// Laplace distribution with scale t = floor(sigma)+1 and accept it with
// probability exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2)). The proposal is exact
// (DiscreteLaplace.Sample), and the acceptance is decided exactly
// (acceptGauss), so the output has exactly the discrete Gaussian law. The
// expected number of proposals is below 2 for sigma >= 1 and tends to
// about 1.6 for large sigma (CKS Proposition 5 bounds it); for small sigma
// the rejections of |Y| >= 1 make it at most about 1/P(Y = 0) <= 2.2.
func (g DiscreteGaussian) Sample(r *Rand) int64 {
	if g.t == 0 {
		panic("noise: Sample of a zero DiscreteGaussian; use NewDiscreteGaussian")
	}
	for {
		y := g.lap.Sample(r)
		if g.acceptGauss(r, y) {
			return y
		}
	}
}

// acceptGauss returns true with probability exactly
// exp(-(|y| - sigma^2/t)^2 / (2 sigma^2)).
func (g *DiscreteGaussian) acceptGauss(r *Rand, y int64) bool {
	return g.acceptGaussWord(r, y, r.Uint64())
}

// acceptGaussWord is acceptGauss with the first 64 bits of its uniform U
// given (tests force the exact path through it).
//
// For |y| < gaussTab, w is compared with precomputed integer bounds on
// floor(p 2^64), from the float64 analysis below. Otherwise:
//
// Fast path: x = d^2 inv2s2 with d = |y| - c, in float64 (|y| < 2^53 is
// exact). sigma^2 and c = sigma^2/t are within a relative 2^-52 (2^-51 for
// c), so c is within sigma 2^-51 of sigma^2/t (which is below sigma, as
// t > sigma); the subtraction adds |d| 2^-53, so |d - d*| <= sigma 2^-51 +
// |d| 2^-53, which moves x by at most about |d| |d - d*| / sigma^2 <=
// (|d|/sigma) 2^-51 + 2x 2^-53; the two products and inv2s2 add a relative
// 2^-51. So |x - x*| <= (2x + |d|/sigma) 2^-50 <= ex = (x + |d|/sigma + 1)
// 2^-46 (|d|/sigma computed with 1/sigma, well inside the factor 16).
// U lies in [v, v + 2^-53) with v = (w >> 11) 2^-53, both ends exact
// float64 values.
//
// For x <= 1/2, the alternating Taylor series brackets exp(-x) between
// 1 - x + x^2/2 - x^3/6 and that plus x^4/24 (width below 0.003), evaluated
// to within 2^-50; widening by ex + 2^-48 brackets exp(-x*). Otherwise, or
// when U falls in the bracket, exp(-x*) is within exp(-x) (1 ± 2 ex) for
// ex < 2^-10, and math.Exp is within a relative 2^-52, so pe = p (2 ex +
// 2^-49) bounds |p - exp(-x*)|. When U's interval and [p-pe, p+pe] overlap
// (about 2^-49 of the time) the exact path decides.
func (g *DiscreteGaussian) acceptGaussWord(r *Rand, y int64, w uint64) bool {
	if ay := uint64(max(y, -y)); ay < gaussTab {
		b := &g.acc[ay]
		if w < b[0] { // U < (w+1) 2^-64 <= lo 2^-64 <= p
			return true
		}
		if w > b[1] { // U >= w 2^-64 >= (hi+1) 2^-64 > p
			return false
		}
		return g.acceptExact(r, y, w)
	}
	x, ex := g.exponent(y)
	ulo := float64(int64(w>>11)) * 0x1p-53
	uhi := ulo + 0x1p-53
	if x <= 0.5 {
		t3 := 1 - x*(1-x*(0.5-x*(1.0/6)))
		m := ex + 0x1p-48
		if uhi <= t3-m {
			return true
		}
		if ulo >= t3+x*x*x*x*(1.0/24)+m {
			return false
		}
	}
	if ex < 0x1p-10 && x < 700 {
		p := math.Exp(-x)
		pe := p * (2*ex + 0x1p-49)
		if uhi <= p-pe {
			return true
		}
		if ulo >= p+pe {
			return false
		}
	} else if x-2*ex > 50 && w != 0 {
		// exp(-x*) < e^-50 < 2^-64 <= U whenever the first word is not 0.
		return false
	}
	return g.acceptExact(r, y, w)
}

// gaussTab is the number of values |y| whose acceptance bounds are
// precomputed: all but e^-(64/t) of the proposals for small sigma.
const gaussTab = 64

// exponent returns x = (|y| - sigma^2/t)^2 / (2 sigma^2) in float64 and the
// bound ex on its error (see acceptGaussWord).
func (g *DiscreteGaussian) exponent(y int64) (x, ex float64) {
	d := math.Abs(float64(y)) - g.c
	x = d * d * g.inv2s2
	return x, (x + math.Abs(d)*g.invSigma + 1) * 0x1p-46
}

// acceptBounds returns lo <= floor(p(y) 2^64) <= hi for the acceptance
// probability p(y), from the float64 path's bounds.
func (g *DiscreteGaussian) acceptBounds(y int64) (lo, hi uint64) {
	x, ex := g.exponent(y)
	switch {
	case ex < 0x1p-10 && x < 700:
		p := math.Exp(-x)
		pe := p * (2*ex + 0x1p-49)
		return toU64Floor(p - pe), toU64Floor(p + pe)
	case x-2*ex > 50:
		return 0, 0 // p < 2^-64
	}
	return 0, math.MaxUint64
}

// acceptExact decides U < p(y) with arbitrary precision, U's first word
// being w.
func (g *DiscreteGaussian) acceptExact(r *Rand, y int64, w uint64) bool {
	u := newLazyU(w, 64)
	xr := g.exactExponent(y)
	return u.less(r, func(prec uint) (*big.Float, *big.Float) { return expRat(xr, prec) })
}

// exactExponent returns (|y| - sigma^2/t)^2 / (2 sigma^2) as an exact
// rational: (|y| t - sigma^2)^2 / (2 sigma^2 t^2).
func (g *DiscreteGaussian) exactExponent(y int64) *big.Rat {
	s := new(big.Rat).SetFloat64(g.sigma) // exact: sigma is finite
	s2 := new(big.Rat).Mul(s, s)
	ay := new(big.Rat).SetInt64(y)
	ay.Abs(ay)
	tr := new(big.Rat).SetInt64(g.t)
	num := new(big.Rat).Mul(ay, tr)
	num.Sub(num, s2)
	num.Mul(num, num)
	den := new(big.Rat).Mul(s2, tr)
	den.Mul(den, tr)
	den.Add(den, den)
	return num.Quo(num, den)
}

// expRat returns lo <= exp(-x) <= hi for a rational x >= 0, with hi-lo
// below about 2^-prec. x is rounded to wp = prec + 64 + (bits of x's
// integer part) bits, an absolute error below x 2^-wp <= 2^-(prec+64) that
// moves exp(-x) <= 1 by at most as much; bigExp adds 2^-(prec+8), and the
// final rounding of lo and hi 2^-(prec+64) each: the margin 2^-(prec+6)
// covers them.
func expRat(x *big.Rat, prec uint) (lo, hi *big.Float) {
	ip := new(big.Int).Quo(x.Num(), x.Denom())
	wp := prec + 64 + uint(ip.BitLen())
	xf := new(big.Float).SetPrec(wp).SetRat(x)
	if xf.MantExp(nil) > 30 {
		// x >= 2^29: exp(-x) < 2^-(2^29), near the bottom of big.Float's
		// exponent range; [0, 2^-min(prec+6, 2^29)] bounds it.
		return new(big.Float), pow2(-int(min(prec+6, 1<<29)))
	}
	e := bigExp(xf.Neg(xf), prec+8)
	m := pow2(-int(prec + 6))
	lo = new(big.Float).SetPrec(prec+64).Sub(e, m)
	hi = new(big.Float).SetPrec(prec+64).Add(e, m)
	return lo, hi
}

// Gaussian is the discrete Gaussian mechanism on a power-of-two grid, for
// real-valued queries, as Laplace is for the Laplace mechanism. It releases
//
//	Grid * (round(x/Grid) + Z),   Z ~ DiscreteGaussian(Sigma/Grid),
//
// so every output is a multiple of Grid, exact in float64 up to 2^53 grid
// steps, and depends on x only through round(x/Grid) (half-up). Inputs beyond Range() (at least
// MinRange = 2^80) are clamped and NaN is released as 0, as for Laplace, so
// no input value makes it fail; outputs beyond 2^53 grid steps are rounded
// to float64 as Laplace's are.
//
// Its guarantee: two scalar inputs at most d apart are rounded to grid
// points at most ceil(d/Grid) steps apart, so the release is Rho(d)-zCDP
// with Rho(d) = ceil(d/Grid)^2 / (2 (Sigma/Grid)^2). For a vector released
// with AddTo, the loss is ||k - k'||^2 / (2 (Sigma/Grid)^2) for the rounded
// vectors k, k' in grid units: for inputs on the grid (counts, and any
// multiples of Grid) that is ||x - x'||^2/(2 Sigma^2), while rounding can
// add up to one grid step to each coordinate that changes.
type Gaussian struct {
	grid  float64
	limit float64 // clamp bound in grid steps: stepLimit(grid)
	dg    DiscreteGaussian
}

// NewGaussian returns the grid discrete Gaussian mechanism for a scalar query
// whose values on neighbouring inputs differ by at most l2sensitivity (or a
// vector query of that L2 sensitivity whose values are on the grid, such as
// counts), satisfying rho-zCDP: Rho(l2sensitivity) <= rho. Sigma is
// l2sensitivity/sqrt(2 rho), raised by at most one grid step of sensitivity
// (none when the sensitivity is a multiple of Grid, as for integers), and
// Grid <= 2^-20 min(l2sensitivity, Sigma).
func NewGaussian(l2sensitivity, rho float64) (Gaussian, error) {
	if math.IsNaN(l2sensitivity) || math.IsInf(l2sensitivity, 0) || l2sensitivity <= 0 {
		return Gaussian{}, fmt.Errorf("noise: L2 sensitivity must be finite and > 0, got %v", l2sensitivity)
	}
	if math.IsNaN(rho) || math.IsInf(rho, 0) || rho <= 0 {
		return Gaussian{}, fmt.Errorf("noise: rho must be finite and > 0, got %v", rho)
	}
	sigma := l2sensitivity / math.Sqrt(2*rho)
	if err := checkGridRange("L2 sensitivity", l2sensitivity); err != nil {
		return Gaussian{}, err
	}
	if err := checkGridRange("sigma = L2 sensitivity/sqrt(2 rho)", sigma); err != nil {
		return Gaussian{}, err
	}
	grid := gridFor(min(l2sensitivity, sigma))
	steps := math.Ceil(l2sensitivity / grid) // exact: grid is a power of two
	// sigma_g >= steps/sqrt(2 rho) in exact arithmetic: the square root and
	// the quotient are within 2^-52 (relative) each, far inside
	// calibrationMargin, which also leaves room for float64 checks.
	sg := steps / math.Sqrt(2*rho) * (1 + calibrationMargin)
	return newGaussian(grid, sg)
}

// NewGaussianSigma returns the grid discrete Gaussian mechanism with
// Sigma() == sigma exactly, on a grid that resolves input changes down to
// resolution: Grid <= 2^-20 min(sigma, resolution). Its guarantee for
// inputs d apart is Rho(d).
func NewGaussianSigma(sigma, resolution float64) (Gaussian, error) {
	if math.IsNaN(sigma) || math.IsInf(sigma, 0) || sigma <= 0 {
		return Gaussian{}, fmt.Errorf("noise: Gaussian sigma must be finite and > 0, got %v", sigma)
	}
	if math.IsNaN(resolution) || math.IsInf(resolution, 0) || resolution <= 0 {
		return Gaussian{}, fmt.Errorf("noise: Gaussian resolution must be finite and > 0, got %v", resolution)
	}
	if err := checkGridRange("Gaussian sigma", sigma); err != nil {
		return Gaussian{}, err
	}
	if err := checkGridRange("Gaussian resolution", resolution); err != nil {
		return Gaussian{}, err
	}
	grid := gridFor(min(sigma, resolution))
	return newGaussian(grid, sigma/grid)
}

func newGaussian(grid, sg float64) (Gaussian, error) {
	if !(sg <= MaxSigma) {
		return Gaussian{}, fmt.Errorf("noise: Gaussian noise is %g grid steps of %g, above MaxSigma 2^40-1: rho is too small for this sensitivity (or sigma too large for this resolution)", sg, grid)
	}
	dg, err := NewDiscreteGaussian(sg)
	if err != nil {
		return Gaussian{}, err
	}
	return Gaussian{grid: grid, limit: stepLimit(grid), dg: dg}, nil
}

// Grid returns the grid step: every output is a multiple of it.
func (g Gaussian) Grid() float64 { return g.grid }

// Range returns the representable range: inputs x with |x| <= Range() are
// never clamped. It is min(2^1000 Grid, 2^1000), at least MinRange.
func (g Gaussian) Range() float64 { return g.limit * g.grid }

// Sigma returns the noise's sigma, Grid times that of Dist.
func (g Gaussian) Sigma() float64 { return g.grid * g.dg.sigma }

// Variance returns the exact variance of the added noise.
func (g Gaussian) Variance() float64 { return g.grid * g.grid * g.dg.variance }

// Dist returns the distribution of the grid noise in grid units.
func (g Gaussian) Dist() DiscreteGaussian { return g.dg }

// Round returns the grid point an input is rounded to before noise is added.
func (g Gaussian) Round(x float64) float64 {
	return g.grid * roundHalfUp(clampSteps(x/g.grid, g.limit))
}

// Rho returns the worst-case zCDP parameter between two scalar inputs at
// most d apart, wherever they lie: ceil(|d|/Grid)^2 / (2 (Sigma/Grid)^2).
// See Gaussian for vectors.
func (g Gaussian) Rho(d float64) float64 {
	return g.dg.Rho(math.Ceil(math.Abs(d) / g.grid))
}

// Add returns x plus grid discrete Gaussian noise, clamping and rounding as
// Laplace.Add does. The error is always nil.
func (g Gaussian) Add(r *Rand, x float64) (float64, error) {
	k := roundHalfUp(clampSteps(x/g.grid, g.limit))
	return addSteps(k, g.dg.Sample(r)) * g.grid, nil
}

// AddTo adds independent grid discrete Gaussian noise to every element of
// xs in place, clamping as Add does. The error is always nil.
func (g Gaussian) AddTo(r *Rand, xs []float64) error {
	inv, limit := 1/g.grid, g.limit
	for i, x := range xs {
		z := g.dg.Sample(r) // first, so that nothing lives across the call
		xs[i] = addSteps(roundHalfUp(clampSteps(x*inv, limit)), z) * g.grid
	}
	return nil
}
