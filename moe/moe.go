// Package moe computes margins of error: the 90% quantile of the absolute
// value of an error that is a fixed linear combination of independent noise
// variables (grid Laplace, or Gaussian), from the mechanism alone, never
// from the data.
//
// Its 0.9 quantile of |error| is found in two ways:
//   - when the error is one grid Laplace variable, exactly from the discrete
//     distribution (Laplace90): the smallest grid multiple m with
//     P(|error| <= m) >= 0.9, so coverage is at least 90% (a little more, as
//     the noise is discrete);
//   - otherwise (Quantile90, Law.Margin) by inverting the characteristic
//     function of the continuous Laplace approximation,
//     φ(t) = Π (1 + c² t²)^(-n), with the Gil-Pelaez formula
//     P(|E| <= m) = (2/π) ∫_0^∞ sin(m t)/t φ(t) dt, integrated by
//     Gauss-Legendre panels and truncated where a proven bound on the tail
//     is below 1e-7. The grid Laplace noise differs from the continuous one
//     by one part in 2^20 of its scale, far below that.
//
// A sum of independent discrete Gaussians on grids far finer than their
// sigmas is normal, and its margin is Z95 times its standard deviation.
package moe

import (
	"math"
	"sync"

	"gonum.org/v1/gonum/integrate/quad"

	"github.com/knowdp/knowdp/noise"
)

// Z95 is the 0.95 quantile of the standard normal distribution: the margin
// of error of a normal error is Z95 times its standard deviation.
const Z95 = 1.6448536269514722

// Term is Scale times a sum of Count independent standard Laplace variables
// (Laplace(1)): Count iid Laplace(Scale) variables.
type Term struct {
	Scale float64
	Count float64
}

// Laplace90 returns the margin of error of one grid Laplace variable,
// exactly: the smallest multiple m of the grid with P(|noise| <= m) >= 0.9.
// With a = exp(-1/t), P(|Z| > k) = 2 a^(k+1) / (1 + a) for the discrete
// Laplace Z of scale t.
func Laplace90(l noise.Laplace) float64 {
	t := l.Dist().Scale()
	a := math.Exp(-1 / t)
	tail := func(k float64) float64 { return math.Log(2) - (k+1)/t - math.Log1p(a) }
	k := math.Max(0, math.Ceil(-t*math.Log(0.05*(1+a)))-1)
	// Guard the rounding of the closed form on either side.
	for k > 0 && tail(k-1) <= math.Log(0.1) {
		k--
	}
	for tail(k) > math.Log(0.1) {
		k++
	}
	return k * l.Grid()
}

// Gil-Pelaez quadrature: Gauss-Legendre panels of width glPanel (in units
// of the error's standard deviation) with glNodes nodes each; the tail
// beyond the last panel is below glTail in probability. The margins of a
// hierarchy, thousands of laws, use panels of width glPanelWide with
// glNodesWide nodes: the rule is as exact there (its error on sin(μu) over
// a panel, μ <= √10, is below 1e-11; on the national benchmark's 8,900
// laws 8 nodes and 10 agree to 2e-12); only the point where the tail is cut
// moves, which moves the margins by less than the cut (2e-7 relative there),
// for a third of the evaluations of the characteristic function.
const (
	glPanel     = 0.5
	glNodes     = 10
	glPanelWide = 1
	glNodesWide = 8
	glTail      = 1e-7
	glMaxPanel  = 1 << 20
)

// Rule is a Gauss-Legendre rule on one panel [0, width] (width in units of
// the error's standard deviation), repeated panel after panel along the
// Gil-Pelaez integral.
type Rule struct {
	width          float64
	nodes, weights []float64
}

// newRule returns the n-point rule on [0, width].
func newRule(width float64, n int) Rule {
	r := Rule{width: width, nodes: make([]float64, n), weights: make([]float64, n)}
	quad.Legendre{}.FixedLocations(r.nodes, r.weights, 0, width)
	return r
}

// The two rules, made once: read-only after.
var (
	narrow = sync.OnceValue(func() Rule { return newRule(glPanel, glNodes) })
	wide   = sync.OnceValue(func() Rule { return newRule(glPanelWide, glNodesWide) })
)

// NarrowRule is the rule of flat workloads: panels of half a standard
// deviation, 10 nodes each.
func NarrowRule() Rule { return narrow() }

// WideRule is the rule of hierarchies, whose margins are thousands of laws:
// panels of one standard deviation, 8 nodes each (see the constants).
func WideRule() Rule { return wide() }

// Width is the width of one panel, in standard deviations of the error.
func (r Rule) Width() float64 { return r.width }

// Quantile90 returns m with P(|E| <= m) = 0.9 for E = Σ_g c_g Σ_{n_g iid}
// Laplace(1) (c_g = terms[g].Scale, n_g = terms[g].Count), by the
// Gil-Pelaez formula on the characteristic function of the continuous
// Laplace distribution (package comment), with NarrowRule.
func Quantile90(terms []Term) float64 {
	return Law{Terms: terms}.Margin(NarrowRule()).MOE90
}

// Margin is what Law.Margin finds of an error.
type Margin struct {
	// MOE90 is the margin of error: the 0.9 quantile of |E|.
	MOE90 float64
	// CoverageErr bounds how far the coverage of MOE90 can be from 90%
	// because the law's normal part stands for Laplace terms (0 without
	// one).
	CoverageErr float64
	// MeanAbs is the expected absolute error E|E|.
	MeanAbs float64
}

// Law is the law of an error E = K + D: K = Σ Terms, and D, independent of
// K, a sum of independent Laplace variables whose terms are not known one
// by one, only their total variance and a bound on the scale of each. D is
// taken as normal, N(0, NormalVariance).
type Law struct {
	Terms []Term
	// NormalVariance is the variance of D (0: no D).
	NormalVariance float64
	// NormalMaxScale bounds the Laplace scale of every term of D (0: no
	// bound known, and no CoverageErr is stated).
	NormalMaxScale float64
}

// Margin is Quantile90 of the law with the given rule, and more. With
// vd = NormalVariance and amax = NormalMaxScale, CoverageErr bounds how far
// the true P(|E| <= m) can then be from 0.9 (beyond the quadrature's 1e-7);
// it is 0 when vd is. It also returns MeanAbs = E|E| (of K plus the normal
// part): for a symmetric error, E|E| = (2/π) ∫_0^∞
// (1 - φ(t))/t² dt, on the same nodes up to the cut U, and past it
// ∫_U^∞ (1 - φ)/u² du = 1/U - ∫_U^∞ φ/u² du, the last between 0 and the
// tail bound over U (taken at half: to 1e-7 relative).
//
// The bound: in u = σt, the characteristic function of a Laplace variable
// of scale a is 1/(1 + α u²), α = a²/σ², and log(1 + αu²) lies between
// αu² - (αu²)²/2 and αu², so that φ_N(u) = exp(-y u²/2) <= φ_D(u), with
// y = vd/σ². As g(s) = s - log(1+s) is convex with g(0) = 0, g(s)/s
// increases, and every term's α is at most A = amax²/σ²:
// log φ_D + y u²/2 = Σ g(α u²) <= (y/(2A)) g(A u²), that is
// φ_D(u) <= (1 + A u²)^(-y/(2A)) = U(u). By Gil-Pelaez the two
// probabilities differ by (2/π) |∫ sin(mt)/t φ_K (φ_D - φ_N) dt| <=
// (2/π) ∫ φ_K (U - φ_N)/u du, computed on the same panels (the integrand
// is smooth and positive) with the tail bound of φ_K U past the last one.
func (law Law) Margin(rule Rule) Margin {
	terms, vd, amax := law.Terms, law.NormalVariance, law.NormalMaxScale
	sigma2 := vd
	for _, t := range terms {
		sigma2 += 2 * t.Count * t.Scale * t.Scale
	}
	if sigma2 == 0 {
		return Margin{}
	}
	sigma := math.Sqrt(sigma2)
	// In u = σ t, each factor is (1 + x u²)^(-n) with x = c²/σ² <= 1/2.
	x := make([]float64, len(terms))
	for i, t := range terms {
		x[i] = t.Scale * t.Scale / sigma2
	}
	y := vd / sigma2
	bounded := vd > 0 && amax > 0
	var bigA, bigM float64 // U(u) = (1 + A u²)^(-M)
	if bounded {
		bigA = amax * amax / sigma2
		bigM = y / (2 * bigA)
	}
	logPhiK := func(u float64) float64 {
		var l float64
		for i, t := range terms {
			l -= t.Count * math.Log1p(x[i]*u*u)
		}
		return l
	}
	// Past U, φ(u) <= φ(U) (u/U)^(-2R) with R = Σ n x U²/(1+x U²) + y U²/2
	// (R is half of -d log φ / d log u, which grows with u, factor by
	// factor), so the tail of ∫ φ(u)/u du is at most φ(U)/(2R).
	rK := func(u float64) float64 {
		var r float64
		for i, t := range terms {
			r += t.Count * x[i] * u * u / (1 + x[i]*u*u)
		}
		return r
	}
	tail := func(u float64) float64 {
		return math.Exp(logPhiK(u)-y*u*u/2) / (2 * (rK(u) + y*u*u/2))
	}
	// The same for φ_K U, which bounds the integrand of covErr.
	tailU := func(u float64) float64 {
		au := bigA * u * u
		return math.Exp(logPhiK(u)-bigM*math.Log1p(au)) / (2 * (rK(u) + bigM*au/(1+au)))
	}
	// φ(u) = φ_K(u) exp(-y u²/2) at the quadrature's nodes, where most of
	// the time goes: the factors of terms of few variables multiplied
	// (n divisions' worth), the others through their logarithm.
	small := make([]int, len(terms))
	for i, t := range terms {
		if t.Count <= 8 && t.Count == math.Trunc(t.Count) {
			small[i] = int(t.Count)
		}
	}
	phi := func(u float64) float64 {
		u2 := u * u
		l, prod := -y*u2/2, 1.0
		for i, t := range terms {
			if k := small[i]; k > 0 {
				f := 1 + x[i]*u2
				for range k {
					prod *= f
				}
				if prod > 1e200 {
					l -= math.Log(prod)
					prod = 1
				}
				continue
			}
			l -= t.Count * math.Log1p(x[i]*u2)
		}
		return math.Exp(l) / prod
	}
	nodes, weights, panel := rule.nodes, rule.weights, rule.width
	nn := len(nodes)
	fs := make([]float64, 0, 16*nn) // per node: weight × φ(u)/u
	panels := 0
	var covErr, abs float64
	for k := 0; k < glMaxPanel; k++ {
		lo := float64(k) * panel
		if k > 0 && tail(lo) < glTail && (!bounded || tailU(lo) < glTail) {
			if bounded {
				covErr += tailU(lo)
			}
			abs += 1/lo - tail(lo)/(2*lo)
			break
		}
		panels++
		for i, v := range nodes {
			u := lo + v
			ph := phi(u)
			f := weights[i] * ph / u
			fs = append(fs, f)
			abs += weights[i] * (1 - ph) / (u * u)
			if bounded {
				// U - φ_N = φ_N (exp(M g(A u²)) - 1), g(s) = s - log(1+s).
				au := bigA * u * u
				covErr += f * math.Expm1(bigM*(au-math.Log1p(au)))
			}
		}
	}
	covErr *= 2 / math.Pi
	abs *= 2 / math.Pi * sigma
	// P(|E| <= μσ) and its derivative in μ, together: sin and cos of μu at
	// every node by rotating the panel's start (exact every 64 panels, so
	// the rounding of the rotations stays far below the quadrature's
	// accuracy) by each node's offset, instead of a sine and a cosine per
	// node.
	sv, cv := make([]float64, nn), make([]float64, nn)
	eval := func(mu float64) (prob, density float64) {
		for i, v := range nodes {
			sv[i], cv[i] = math.Sincos(mu * v)
		}
		sh, ch := math.Sincos(mu * panel)
		var sp, cp float64
		for k := range panels {
			lo := float64(k) * panel
			if k%64 == 0 {
				sp, cp = math.Sincos(mu * lo)
			}
			for i, w := range fs[k*nn : (k+1)*nn] {
				prob += w * (sp*cv[i] + cp*sv[i])
				density += w * (lo + nodes[i]) * (cp*cv[i] - sp*sv[i])
			}
			sp, cp = sp*ch+cp*sh, cp*ch-sp*sh
		}
		return 2 / math.Pi * prob, 2 / math.Pi * density
	}
	// By Chebyshev, P(|E| >= sqrt(10) σ) <= 0.1. Newton steps from the
	// normal quantile, kept inside the bracket (bisection otherwise):
	// a handful of evaluations instead of fifty halvings.
	lo, hi := 0.0, math.Sqrt(10)
	mu := 1.6448536269514722
	for range 60 {
		prob, density := eval(mu)
		f := prob - 0.9
		if f < 0 {
			lo = mu
		} else {
			hi = mu
		}
		if math.Abs(f) < 1e-13 || hi-lo < 1e-13 {
			break
		}
		next := mu - f/density
		if !(next > lo && next < hi) {
			next = (lo + hi) / 2
		}
		mu = next
	}
	return Margin{MOE90: mu * sigma, CoverageErr: covErr, MeanAbs: abs}
}
