package strategy

// Laplace noise on the marginal lattice (HDMM's OPT_M family, and more).
//
// Marginal C measured with a share x_C of epsilon has per-cell variance
// v_C = 2 (L1_C / (x_C eps))² and gives every residual A ⊆ C the precision
// (N/|C|)/v_C, so the objective is
//
//	F(x) = Σ_A b_A / Σ_{C ⊇ A} c_C x_C²,   c_C = N eps² / (2 |C| L1_C²),
//
// on the simplex Σ_C x_C = 1, x ≥ 0 (sequential composition). With add /
// remove neighbours L1_C = 1 for every marginal, and this is exactly the
// matrix-mechanism error of HDMM's weighted-marginals strategy (its weights
// θ_C ∝ x_C, sensitivity Σ θ_C). F is not convex (a share that is zero has
// zero gradient: adding a measurement is a finite step), so it is searched
// by local optimisation from several deterministic starts, with moves that
// add or remove a marginal.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"

	splitplan "github.com/knowdp/knowdp/plan"
)

// candidates returns the marginals the lattice search considers: every
// cuboid when there are at most max of them, else the cuboids of up to
// the workload's order plus two dimensions (plus one, or the order itself,
// while too many).
func (l *lattice) candidates(max int) []uint64 {
	d := len(l.shape)
	var full uint64
	for i, n := range l.shape {
		if n > 1 {
			full |= 1 << i
		}
	}
	live := bits.OnesCount64(full)
	if live < 63 && 1<<live <= max {
		var out []uint64
		for sub := full; ; sub = (sub - 1) & full {
			out = append(out, sub)
			if sub == 0 {
				break
			}
		}
		slices.Sort(out)
		return out
	}
	for extra := 2; extra >= 0; extra-- {
		order := min(l.maxOrder+extra, live)
		if count := binomSum(live, order); count <= float64(max) || extra == 0 {
			var out []uint64
			var rec func(start int, cur uint64, k int)
			rec = func(start int, cur uint64, k int) {
				out = append(out, cur)
				if k == order {
					return
				}
				for i := start; i < d; i++ {
					if full&(1<<i) != 0 {
						rec(i+1, cur|1<<i, k+1)
					}
				}
			}
			rec(0, 0, 0)
			slices.Sort(out)
			return out
		}
	}
	return nil
}

// LatticeCuboids returns the cuboids (bit i for dimension i; dimensions of
// one value left out) a lattice search considers for a workload of the
// given order (the most dimensions a term involves): every cuboid when
// there are at most max of them (0: 4096), else those of up to order + 2
// dimensions (+ 1, or order, while too many). They are in increasing order.
func LatticeCuboids(shape []int, order, max int) []uint64 {
	if max <= 0 {
		max = Options{}.maxCandidates()
	}
	l := &lattice{shape: shape, maxOrder: order}
	return l.candidates(max)
}

func binomSum(n, k int) float64 {
	var s, c float64 = 0, 1
	for i := 0; i <= k; i++ {
		s += c
		c = c * float64(n-i) / float64(i+1)
	}
	return s
}

// maxReshape is the largest candidate set on which moves try reshapes.
const maxReshape = 512

// marginalProblem is F over a set of candidate marginals.
type marginalProblem struct {
	a   []float64 // b_A per residual
	cov [][]int   // per residual: the candidates covering it
	c   []float64 // per candidate
	// byCand[k]: the residuals candidate k covers.
	byCand [][]int
	// sets are the candidates' dimension sets, index finds one.
	sets  []uint64
	index map[uint64]int
	// work counts the search's work in package plan's unit (one value of
	// F costs Σ over residuals of 1 + its covering candidates), and the
	// search stops at maxWork (0: no cap) or when its context ends.
	work, maxWork, vcost float64
	ctx                  context.Context
}

// stopped reports whether the search must stop: its context ended or its
// work reached the cap. Every loop checks it, so a search returns the best
// point it has, deterministically for a cap.
func (pr *marginalProblem) stopped() bool {
	return (pr.maxWork > 0 && pr.work >= pr.maxWork) || (pr.ctx != nil && pr.ctx.Err() != nil)
}

func newMarginalProblem(l *lattice, cands []uint64, coef []float64) *marginalProblem {
	pr := &marginalProblem{a: l.b, cov: make([][]int, len(l.sets)), c: coef, byCand: make([][]int, len(cands)), sets: cands, index: map[uint64]int{}}
	for k, c := range cands {
		pr.index[c] = k
	}
	for p, a := range l.sets {
		for k, c := range cands {
			if a&^c == 0 {
				pr.cov[p] = append(pr.cov[p], k)
				pr.byCand[k] = append(pr.byCand[k], p)
			}
		}
		pr.vcost += float64(1 + len(pr.cov[p]))
	}
	return pr
}

// value returns F(x) (x need not sum to 1: F is evaluated at x/Σx).
func (pr *marginalProblem) value(x []float64) float64 {
	pr.work += pr.vcost
	var sum float64
	for _, v := range x {
		sum += v
	}
	var f float64
	for p, a := range pr.a {
		var den float64
		for _, k := range pr.cov[p] {
			den += pr.c[k] * x[k] * x[k]
		}
		if !(den > 0) {
			return math.Inf(1)
		}
		f += a / den
	}
	return f * sum * sum
}

// valueGrad returns f(θ) = (Σθ)² Σ_A a_A / Σ_C c_C θ_C² (scale-free) and
// its gradient.
func (pr *marginalProblem) valueGrad(th, g []float64, den []float64) float64 {
	pr.work += 2 * pr.vcost
	var sum float64
	for _, v := range th {
		sum += v
	}
	var f float64
	for p, a := range pr.a {
		var d float64
		for _, k := range pr.cov[p] {
			d += pr.c[k] * th[k] * th[k]
		}
		den[p] = d
		if !(d > 0) {
			return math.Inf(1)
		}
		f += a / d
	}
	s2 := sum * sum
	for k := range g {
		var s float64
		for _, p := range pr.byCand[k] {
			s += pr.a[p] / (den[p] * den[p])
		}
		g[k] = 2*sum*f - s2*2*pr.c[k]*th[k]*s
	}
	return s2 * f
}

// local minimises f from θ (θ ≥ 0) by projected gradient steps with a
// diagonal scaling and backtracking, then drops shares that no longer pay.
// It returns the point normalised to the simplex and F there.
func (pr *marginalProblem) local(ctx context.Context, th []float64, iters int) ([]float64, float64) {
	n := len(th)
	x := slices.Clone(th)
	normalise(x)
	g := make([]float64, n)
	den := make([]float64, len(pr.a))
	try := make([]float64, n)
	f := pr.valueGrad(x, g, den)
	step := 1e-2
	for it := 0; it < iters; it++ {
		if pr.stopped() {
			break
		}
		// Multiplicative (mirror) step: keeps θ ≥ 0, and zero stays
		// zero, so the support is changed only by the moves outside.
		var gs float64
		for k := range x {
			gs += x[k] * g[k]
		}
		improved := false
		for range 30 {
			var z float64
			for k := range x {
				if x[k] == 0 {
					try[k] = 0
					continue
				}
				e := -step * (g[k] - gs) / max(f, 1e-300)
				e = max(min(e, 20), -20)
				try[k] = x[k] * math.Exp(e)
				z += try[k]
			}
			for k := range try {
				try[k] /= z
			}
			ft := pr.value(try)
			if ft < f {
				copy(x, try)
				f = pr.valueGrad(x, g, den)
				step *= 1.3
				improved = true
				break
			}
			step /= 3
		}
		if !improved {
			break
		}
	}
	return pr.clean(x, f)
}

// clean zeroes the shares below 1e-9 of the largest when that does not
// raise F by more than one part in 1e12: mirror steps shrink a share that
// does not pay geometrically but never to zero, and a measurement with a
// share of 1e-20 would only publish noise.
func (pr *marginalProblem) clean(x []float64, f float64) ([]float64, float64) {
	top := slices.Max(x)
	try := slices.Clone(x)
	for k, v := range try {
		if v < 1e-9*top {
			try[k] = 0
		}
	}
	normalise(try)
	if ft := pr.value(try); ft <= f*(1+1e-12) {
		return try, min(ft, f)
	}
	return x, f
}

// laplaceLattice searches the marginal lattice for the shares of epsilon.
func laplaceLattice(ctx context.Context, l *lattice, eps float64, opt Options) (*Strategy, error) {
	all := l.candidates(opt.maxCandidates())
	var cands []uint64
	var l1, l2, coef []float64
	for _, c := range all {
		a, b, err := opt.sens(marginalTerm(l.shape, c))
		if err != nil {
			return nil, err
		}
		if !(a > 0) {
			// Known exactly (its residuals are all known): no noise buys
			// anything there.
			continue
		}
		cands = append(cands, c)
		l1, l2 = append(l1, a), append(l2, b)
		coef = append(coef, l.cells*eps*eps/(2*l.size(c)*a*a))
	}
	if len(cands) == 0 {
		return nil, errors.New("strategy: no marginal can be measured (every candidate is known exactly)")
	}
	pr := newMarginalProblem(l, cands, coef)
	pr.ctx, pr.maxWork = ctx, opt.MaxWork
	defer func() { splitplan.MeterFrom(ctx).Add(pr.work) }()
	// The workload's own cuboids, equal shares: the plan without the
	// lattice.
	own := make([]float64, len(cands))
	for t, ok := range l.marginal {
		if ok {
			if k, found := slices.BinarySearch(cands, l.support[t]); found {
				own[k] = 1
			}
		}
	}
	var extra [][]float64
	if normalise(own) {
		extra = append(extra, own)
	}
	x, f := searchMarginals(ctx, pr, extra, opt)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st := &Strategy{Mechanism: Laplace, Budget: eps, Objective: f, Candidates: len(cands), Work: pr.work,
		Family: fmt.Sprintf("marginals with shares of epsilon (HDMM's OPT_M family): %d candidate cuboids", len(cands))}
	for k, c := range cands {
		if x[k] <= 0 {
			continue
		}
		st.Measurements = append(st.Measurements, Measurement{
			Term:     marginalTerm(l.shape, c),
			Share:    x[k],
			Variance: variance(Laplace, l1[k], l2[k], x[k], eps),
			L1:       l1[k],
			L2:       l2[k],
		})
	}
	return st, ctx.Err()
}

// searchMarginals runs the multi-start local search: deterministic starts
// (every candidate equal; the Gaussian-optimal-like start with shares ∝
// the cube root of the weight each candidate alone would carry; the
// workload's own cuboids; random points), each polished, then moves that
// add the best absent candidate or drop the weakest present one.
func searchMarginals(ctx context.Context, pr *marginalProblem, extra [][]float64, opt Options) ([]float64, float64) {
	n := len(pr.c)
	rng := rand.New(rand.NewPCG(opt.Seed, 0x73747261))
	var starts [][]float64
	eq := make([]float64, n)
	for k := range eq {
		eq[k] = 1
	}
	starts = append(starts, eq)
	cf := make([]float64, n)
	for k := range cf {
		var s float64
		for _, p := range pr.byCand[k] {
			s += pr.a[p] / float64(len(pr.cov[p]))
		}
		cf[k] = math.Cbrt(s / pr.c[k])
	}
	starts = append(starts, cf)
	starts = append(starts, extra...)
	for range opt.restarts() - len(starts) {
		x := make([]float64, n)
		for k := range x {
			x[k] = rng.ExpFloat64()
		}
		starts = append(starts, x)
	}
	best, fbest := []float64(nil), math.Inf(1)
	for _, s := range starts {
		if pr.stopped() {
			break
		}
		x, f := pr.local(ctx, s, 3000)
		x, f = pr.moves(ctx, x, f)
		if f < fbest {
			best, fbest = x, f
		}
	}
	// Basin hopping from the best: add a few random candidates with
	// finite shares and shake the others, search again, keep what is
	// better.
	// Small lattices are cheap to search: hop more there.
	hops := 2 * opt.restarts()
	if n <= maxReshape {
		hops = 8 * opt.restarts()
	}
	for range hops {
		if pr.stopped() || best == nil {
			break
		}
		x := slices.Clone(best)
		for k := range x {
			x[k] *= math.Exp(0.5 * rng.NormFloat64())
		}
		normalise(x)
		for range 1 + rng.IntN(3) {
			k := rng.IntN(n)
			x[k] += 0.1 + 0.2*rng.Float64()
		}
		normalise(x)
		x, f := pr.local(ctx, x, 3000)
		x, f = pr.moves(ctx, x, f)
		if f < fbest*(1-1e-12) {
			best, fbest = x, f
		}
	}
	return best, fbest
}

// moves improves a local minimum by changing its support: dropping a
// measurement (the smallest shares first), moving one's share to a
// neighbouring cuboid (one dimension more or less), or adding an absent
// candidate (the few whose addition with a finite share lowers F most),
// each followed by a local search, until none helps.
func (pr *marginalProblem) moves(ctx context.Context, x []float64, f float64) ([]float64, float64) {
	n := len(x)
	for round := 0; round < 100 && !pr.stopped(); round++ {
		improved := false
		order := make([]int, 0, n)
		for k, v := range x {
			if v > 0 {
				order = append(order, k)
			}
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmpFloat(x[a], x[b]) })
		for _, k := range order {
			try := slices.Clone(x)
			try[k] = 0
			if !normalise(try) || math.IsInf(pr.value(try), 1) {
				continue
			}
			y, fy := pr.local(ctx, try, 400)
			if fy < f*(1-1e-9) {
				x, f, improved = y, fy, true
				break
			}
		}
		if improved {
			continue
		}
		// Reshapes: move a measurement's share to a neighbouring
		// cuboid (one dimension more or less), the largest shares
		// first: a local search over the design itself.
		slices.Reverse(order)
		if len(x) > maxReshape {
			// Too many neighbours to try on large lattices.
			order = nil
		}
	reshape:
		for _, k := range order {
			c := pr.sets[k]
			for i := range 64 {
				j, ok := pr.index[c^(1<<i)]
				if !ok {
					continue
				}
				try := slices.Clone(x)
				try[j] += try[k]
				try[k] = 0
				if math.IsInf(pr.value(try), 1) {
					continue
				}
				y, fy := pr.local(ctx, try, 400)
				if fy < f*(1-1e-9) {
					x, f, improved = y, fy, true
					break reshape
				}
			}
		}
		if improved {
			continue
		}
		// Adds: score every absent candidate by the best of a few finite
		// shares, then polish the most promising.
		type scored struct {
			k    int
			f, t float64
		}
		var adds []scored
		// With x on the simplex and x_k = 0, adding k with share t
		// scales every precision by (1-t)² and adds c_k t² to the
		// residuals under k: F is updated from the precisions at x.
		den := make([]float64, len(pr.a))
		var total float64
		pr.work += 4 * pr.vcost // the scores below: about a few values of F
		for p, a := range pr.a {
			for _, k := range pr.cov[p] {
				den[p] += pr.c[k] * x[k] * x[k]
			}
			total += a / den[p]
		}
		ts := []float64{0.03, 0.1, 0.25}
		for k := range n {
			if x[k] > 0 {
				continue
			}
			var under float64
			for _, p := range pr.byCand[k] {
				under += pr.a[p] / den[p]
			}
			best := scored{k: k, f: math.Inf(1)}
			for _, t := range ts {
				u := (1 - t) * (1 - t)
				f := (total - under) / u
				for _, p := range pr.byCand[k] {
					f += pr.a[p] / (u*den[p] + pr.c[k]*t*t)
				}
				if f < best.f {
					best.f, best.t = f, t
				}
			}
			adds = append(adds, best)
		}
		slices.SortStableFunc(adds, func(a, b scored) int { return cmpFloat(a.f, b.f) })
		for _, a := range adds[:min(len(adds), 4)] {
			at := make([]float64, n)
			for j := range x {
				at[j] = (1 - a.t) * x[j]
			}
			at[a.k] = a.t
			y, fy := pr.local(ctx, at, 1500)
			if fy < f*(1-1e-9) {
				x, f, improved = y, fy, true
				break
			}
		}
		if !improved {
			break
		}
	}
	return x, f
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func normalise(x []float64) bool {
	var s float64
	for _, v := range x {
		s += v
	}
	if !(s > 0) || math.IsInf(s, 0) {
		return false
	}
	for i := range x {
		x[i] /= s
	}
	return true
}
