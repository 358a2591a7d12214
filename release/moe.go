package release

// Margins of error. A released cell's error is a fixed linear combination of
// the independent noise variables of the measurements, so its distribution
// comes from the mechanism alone, never from the data.
//
// By symmetry (permuting the values of a dimension permutes cells and noise
// alike), the coefficient of noise cell c' of measurement j in the error of
// cell c of table C depends only on the set p of common dimensions on which
// c and c' agree:
//
//	K_{j,p} = Σ_{A ⊆ C∩C_j free} β_{A,j} (|A|/|C|) Π_{i∈A} (δ_i(p) - 1/n_i),
//
// (δ_i(p) = 1 when i ∈ p), with n_p = Π_{i∈(C∩C_j)\p} (n_i - 1) Π_{i∈C_j\C} n_i
// noise cells sharing pattern p. The error is Σ_{j,p} K_{j,p} times a sum of
// n_p independent Laplace(b_j) variables, the same law for every cell of C.
//
// Its 0.9 quantile of |error| is found in two ways:
//   - when the error is one grid Laplace variable (a measured table that no
//     invariant or other measurement touches), exactly from the discrete
//     distribution: the smallest grid multiple m with P(|error| <= m) >= 0.9,
//     so coverage is at least 90% (a little more, as the noise is discrete);
//   - otherwise by inverting the characteristic function of the continuous
//     Laplace approximation, φ(t) = Π (1 + K² b² t²)^(-n_p), with the
//     Gil-Pelaez formula P(|E| <= m) = (2/π) ∫_0^∞ sin(m t)/t φ(t) dt,
//     integrated by Gauss-Legendre panels and truncated where a proven
//     bound on the tail is below 1e-7. The grid Laplace noise differs from
//     the continuous one by one part in 2^20 of its scale, far below that.

import (
	"fmt"
	"math"
	"sync"

	"gonum.org/v1/gonum/integrate/quad"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/sensitivity"
)

// lawTerm is K Σ_{n iid} L with L ~ Laplace(b): scale c = K b.
type lawTerm struct {
	c float64
	n float64
}

// cellLaw returns the terms of the error of a cell of table c, and, when
// that error is exactly one noise variable of one measurement, its index.
func (p *workloadPlan) cellLaw(c domain.Cuboid) (terms []lawTerm, single int) {
	trivial := sensitivity.TrivialDims(p.s)
	size := float64(p.s.CuboidSize(c))
	single = -1
	var kmax float64
	type raw struct {
		k, n float64
		j    int
	}
	var all []raw
	for j, m := range p.meas {
		common := ((c & m.c) &^ trivial).Dims()
		g := make([]float64, 1<<len(common))
		for pat := range g {
			var a domain.Cuboid
			for b, d := range common {
				if pat&(1<<b) != 0 {
					a |= 1 << d
				}
			}
			if r := p.res[a]; r != nil && r.status == resFree {
				beta := 1 / (m.v * float64(p.s.CuboidSize(m.c)) * r.w)
				g[pat] = beta * float64(p.s.CuboidSize(a)) / size
			}
		}
		// Σ_A g(A) Π_{i∈A}(δ_i - 1/n_i) is a Kronecker product over the
		// common dimensions: one butterfly per dimension.
		for b, d := range common {
			inv := 1 / float64(p.sizes[d])
			for pat := range g {
				if pat&(1<<b) != 0 {
					continue
				}
				a0, a1 := g[pat], g[pat|1<<b]
				g[pat], g[pat|1<<b] = a0-a1*inv, a0+a1*(1-inv)
			}
		}
		outside := float64(p.s.CuboidSize(m.c &^ c))
		for pat, k := range g {
			n := outside
			for b, d := range common {
				if pat&(1<<b) == 0 {
					n *= float64(p.sizes[d] - 1)
				}
			}
			all = append(all, raw{k, n, j})
			kmax = max(kmax, math.Abs(k))
		}
	}
	for _, t := range all {
		// Coefficients that are zero in exact arithmetic come out as
		// rounding noise; drop them.
		if math.Abs(t.k) <= 1e-12*kmax || t.n == 0 {
			continue
		}
		terms = append(terms, lawTerm{c: t.k * p.meas[t.j].lap.Scale(), n: t.n})
		single = t.j
		if t.n != 1 || math.Abs(t.k-1) > 1e-9 {
			single = -2
		}
	}
	if len(terms) != 1 || single < 0 {
		single = -1
	}
	return terms, single
}

// moe90 returns the margin of error of every cell of table c.
func (p *workloadPlan) moe90(c domain.Cuboid) float64 {
	if p.mech == MechanismGaussian {
		// A fixed linear combination of independent discrete Gaussians on
		// grids far finer than their sigmas: normal.
		return z95 * math.Sqrt(p.cellVariance(c))
	}
	terms, single := p.cellLaw(c)
	if single >= 0 {
		return laplaceMOE90(p.meas[single].lap)
	}
	return quantile90(terms)
}

// laplaceMOE90 returns the smallest multiple m of the grid with
// P(|noise| <= m) >= 0.9 for grid Laplace noise: with a = exp(-1/t),
// P(|Z| > k) = 2 a^(k+1) / (1 + a) for the discrete Laplace Z of scale t.
func laplaceMOE90(l noise.Laplace) float64 {
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

// glRule is a Gauss-Legendre rule on a panel [0, width].
type glRule struct {
	width          float64
	nodes, weights []float64
}

// newGLRule returns the n-point rule on [0, width].
func newGLRule(width float64, n int) glRule {
	r := glRule{width: width, nodes: make([]float64, n), weights: make([]float64, n)}
	quad.Legendre{}.FixedLocations(r.nodes, r.weights, 0, width)
	return r
}

// The rules of flat workloads and of hierarchies, made once.
var (
	glNarrow = sync.OnceValue(func() glRule { return newGLRule(glPanel, glNodes) })
	glWide   = sync.OnceValue(func() glRule { return newGLRule(glPanelWide, glNodesWide) })
)

// quantile90 returns m with P(|E| <= m) = 0.9 for E = Σ_g c_g Σ_{n_g iid}
// Laplace(1), by the Gil-Pelaez formula on the characteristic function of
// the continuous Laplace distribution (file comment).
func quantile90(terms []lawTerm) float64 {
	return lawQuantile90(terms, 0, 0, glNarrow()).moe
}

// lawError is what lawQuantile90 finds of an error: its margin of error
// (90% quantile of |E|), how far the coverage of that margin can be from
// 90% because of the normal part, and the expected absolute error E|E|.
type lawError struct {
	moe, covErr, abs float64
}

// lawQuantile90 is quantile90 for E = K + D: K = Σ terms as in quantile90,
// and D, independent of K, a sum of independent Laplace variables whose
// terms are not known one by one, only their total variance vd and a bound
// amax on the scale of each. D is taken as normal, N(0, vd), and covErr
// bounds how far the true P(|E| <= m) can then be from 0.9 (beyond the
// quadrature's 1e-7); it is 0 when vd is. It also returns E|E| (of K plus
// the normal part): for a symmetric error, E|E| = (2/π) ∫_0^∞
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
func lawQuantile90(terms []lawTerm, vd, amax float64, rule glRule) lawError {
	sigma2 := vd
	for _, t := range terms {
		sigma2 += 2 * t.n * t.c * t.c
	}
	if sigma2 == 0 {
		return lawError{}
	}
	sigma := math.Sqrt(sigma2)
	// In u = σ t, each factor is (1 + x u²)^(-n) with x = c²/σ² <= 1/2.
	x := make([]float64, len(terms))
	for i, t := range terms {
		x[i] = t.c * t.c / sigma2
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
			l -= t.n * math.Log1p(x[i]*u*u)
		}
		return l
	}
	// Past U, φ(u) <= φ(U) (u/U)^(-2R) with R = Σ n x U²/(1+x U²) + y U²/2
	// (R is half of -d log φ / d log u, which grows with u, factor by
	// factor), so the tail of ∫ φ(u)/u du is at most φ(U)/(2R).
	rK := func(u float64) float64 {
		var r float64
		for i, t := range terms {
			r += t.n * x[i] * u * u / (1 + x[i]*u*u)
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
		if t.n <= 8 && t.n == math.Trunc(t.n) {
			small[i] = int(t.n)
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
			l -= t.n * math.Log1p(x[i]*u2)
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
	return lawError{moe: mu * sigma, covErr: covErr, abs: abs}
}

// MOE90 returns the margin of error of the release's least-squares
// estimate (the Release.MOE90 field): the true count lies within the
// estimate ± MOE90 with probability 90% under the mechanism. It is exact for
// a cuboid no invariant touches (one grid Laplace variable per cell) and
// otherwise inverts the characteristic function of the cell's error; it
// uses the mechanism only, never the data. It is 0 for a public cuboid. A
// non-negative or integer release post-processes that estimate by
// data-dependent amounts the margin does not cover.
func (rel *CuboidRelease) lsMOE90(lap noise.Laplace) (float64, error) {
	if rel.Sensitivity == 0 {
		return 0, nil
	}
	eps, err := privacy.NewEpsilon(rel.Epsilon)
	if err != nil {
		return 0, fmt.Errorf("moe90: %w", err)
	}
	p := &workloadPlan{s: rel.Schema, sizes: rel.Schema.Sizes(), tables: []Table{{Cuboid: rel.Cuboid, Weight: 1}}}
	for _, v := range rel.Invariants {
		p.exact = append(p.exact, v.Cuboid)
	}
	p.meas = []measurement{{c: rel.Cuboid, sens: rel.Sensitivity, share: eps, lap: lap, v: lap.Variance()}}
	p.classify()
	p.setCoverage()
	return p.moe90(rel.Cuboid), nil
}

// gaussianMOE90 is MOE90 for a Gaussian release: the error of every cell of
// the least-squares estimate is a fixed linear combination of independent
// discrete Gaussians on a grid far finer than sigma, so it is normal to
// within that discretisation, and its 90% half-width is z_0.95 = 1.6449
// times its standard deviation (the variance from the residual basis, as
// for Laplace noise).
func (rel *CuboidRelease) gaussianMOE90(g noise.Gaussian) float64 {
	p := &workloadPlan{s: rel.Schema, sizes: rel.Schema.Sizes(), tables: []Table{{Cuboid: rel.Cuboid, Weight: 1}}}
	for _, v := range rel.Invariants {
		p.exact = append(p.exact, v.Cuboid)
	}
	p.meas = []measurement{{c: rel.Cuboid, sens: rel.Sensitivity, v: g.Variance()}}
	p.classify()
	p.setCoverage()
	return z95 * math.Sqrt(p.cellVariance(rel.Cuboid))
}

// z95 is the 0.95 quantile of the standard normal distribution.
const z95 = 1.6448536269514722
