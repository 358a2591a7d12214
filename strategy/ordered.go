package strategy

// Kronecker strategies, one factor per dimension (HDMM's OPT_⊗), for
// workloads with ordered dimensions (prefix sums, ranges) or any other
// factors.
//
// A strategy A = ⊗_i A_i measured once with all the budget has the
// sensitivities Π_i Δ(A_i) and, for a workload term W = ⊗_i W_i, the error
// Π_i tr(W_iᵀW_i (A_iᵀA_i)⁺) times the noise variance: the problem
// separates by dimension for a single workload term, and for a union of
// terms it is solved by HDMM's alternating scheme (each dimension's factor
// optimised for the workload's Grams weighted by the other dimensions'
// current errors). The factor for one dimension of Gram G is the best, by
// Δ² tr(G A⁺), of:
//
//   - the identity, and the total where G is a multiple of J;
//   - hierarchical intervals: every node of a b-ary tree over the values
//     (Hay et al. 2010), b = 2..16, Δ1 = levels, Δ2 = sqrt(levels);
//   - p-Identity (HDMM's OPT_0): [I; B] with columns scaled to unit L1
//     (Laplace) or L2 (Gaussian) norm, B (p × n) optimised by L-BFGS from
//     deterministic starts, for a few p.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"

	"github.com/knowdp/knowdp/query"
)

// maxPIdentity bounds the dimension size for which p-Identity is optimised
// (each evaluation costs O(n³)).
const maxPIdentity = 256

// factorCost returns tr(G (AᵀA)⁺) for a factor's Gram a (n×n), +Inf when
// G is not in its range.
func factorCost(g, a []float64, n int) float64 {
	v, err := traceInv(g, a, n)
	if err != nil {
		return math.Inf(1)
	}
	return v
}

// sensOf returns a factor's sensitivity for the mechanism.
func sensOf(f query.Factor, mech Mechanism) float64 {
	l1, l2 := factorSens(f)
	if mech == Laplace {
		return l1
	}
	return l2
}

// hierarchy returns the b-ary tree of intervals over n values: one row per
// node, root first.
func hierarchy(n, b int) query.Factor {
	var rows [][2]int
	var rec func(lo, hi int)
	rec = func(lo, hi int) {
		rows = append(rows, [2]int{lo, hi})
		if hi-lo <= 1 {
			return
		}
		k := min(b, hi-lo)
		for c := range k {
			rec(lo+(hi-lo)*c/k, lo+(hi-lo)*(c+1)/k)
		}
	}
	rec(0, n)
	m := make([]float64, len(rows)*n)
	for r, iv := range rows {
		for j := iv[0]; j < iv[1]; j++ {
			m[r*n+j] = 1
		}
	}
	f, err := query.NewMatrix(len(rows), n, m)
	if err != nil {
		panic(err)
	}
	return f
}

// pIdentity is HDMM's p-Identity template for one Gram G.
type pIdentity struct {
	n, p int
	g    *mat.SymDense
	l2   bool // Gaussian: unit L2 columns; else unit L1, B ≥ 0 (B = θ²)
}

// loss returns tr(G (AᵀA)⁻¹) for A = [I; B] S⁻¹ and its gradient in θ.
// With M = (I + BᵀB)⁻¹ and C = S G S, the loss is tr(C M); ∂/∂B (s fixed)
// is -2 B M C M, and ∂/∂s_j = 2 (G S M)_jj.
func (pi *pIdentity) loss(theta, grad []float64) float64 {
	n, p := pi.n, pi.p
	b := mat.NewDense(p, n, nil)
	for i := range p {
		for j := range n {
			t := theta[i*n+j]
			if pi.l2 {
				b.Set(i, j, t)
			} else {
				b.Set(i, j, t*t)
			}
		}
	}
	s := make([]float64, n)
	for j := range n {
		var a float64
		for i := range p {
			v := b.At(i, j)
			if pi.l2 {
				a += v * v
			} else {
				a += v
			}
		}
		if pi.l2 {
			s[j] = math.Sqrt(1 + a)
		} else {
			s[j] = 1 + a
		}
	}
	var btb mat.SymDense
	btb.SymOuterK(1, b.T())
	for j := range n {
		btb.SetSym(j, j, btb.At(j, j)+1)
	}
	var ch mat.Cholesky
	if !ch.Factorize(&btb) {
		return math.Inf(1)
	}
	var ms mat.SymDense
	if err := ch.InverseTo(&ms); err != nil {
		return math.Inf(1)
	}
	// A general matrix: products with it take the fast (gemm) path.
	m := mat.DenseCopyOf(&ms)
	c := mat.NewDense(n, n, nil)
	for i := range n {
		for j := range n {
			c.Set(i, j, s[i]*pi.g.At(i, j)*s[j])
		}
	}
	var cm mat.Dense
	cm.Mul(c, m)
	loss := mat.Trace(&cm)
	if grad == nil {
		return loss
	}
	var mcm, bmcm mat.Dense
	mcm.Mul(m, &cm)
	bmcm.Mul(b, &mcm)
	// (G S M)_jj = Σ_k G_jk s_k M_kj.
	ds := make([]float64, n)
	for j := range n {
		var v float64
		for k := range n {
			v += pi.g.At(j, k) * s[k] * m.At(k, j)
		}
		ds[j] = 2 * v
	}
	for i := range p {
		for j := range n {
			gb := -2 * bmcm.At(i, j)
			bij := b.At(i, j)
			if pi.l2 {
				gb += ds[j] * bij / s[j]
				grad[i*n+j] = gb
			} else {
				gb += ds[j]
				grad[i*n+j] = gb * 2 * theta[i*n+j]
			}
		}
	}
	return loss
}

// factor returns the strategy factor for θ: [I; B] with unit columns.
func (pi *pIdentity) factor(theta []float64) query.Factor {
	n, p := pi.n, pi.p
	m := make([]float64, (n+p)*n)
	for j := range n {
		m[j*n+j] = 1
	}
	for i := range p {
		for j := range n {
			t := theta[i*n+j]
			if !pi.l2 {
				t *= t
			}
			m[(n+i)*n+j] = t
		}
	}
	for j := range n {
		var a float64
		for i := range n + p {
			if pi.l2 {
				a += m[i*n+j] * m[i*n+j]
			} else {
				a += math.Abs(m[i*n+j])
			}
		}
		if pi.l2 {
			a = math.Sqrt(a)
		}
		for i := range n + p {
			m[i*n+j] /= a
		}
	}
	f, err := query.NewMatrix(n+p, n, m)
	if err != nil {
		panic(err)
	}
	return f
}

// optimizePIdentity returns the best p-Identity factor for G from
// deterministic starts, and its cost (sensitivity 1).
func optimizePIdentity(ctx context.Context, g []float64, n, p int, mech Mechanism, starts int, rng *rand.Rand) (query.Factor, float64) {
	pi := &pIdentity{n: n, p: p, g: mat.NewSymDense(n, nil), l2: mech == Gaussian}
	for i := range n {
		for j := i; j < n; j++ {
			pi.g.SetSym(i, j, (g[i*n+j]+g[j*n+i])/2)
		}
	}
	best, fbest := []float64(nil), math.Inf(1)
	for range starts {
		if ctx.Err() != nil {
			break
		}
		x0 := make([]float64, p*n)
		for i := range x0 {
			// HDMM draws B uniformly in [0, 1); θ = sqrt(B) for L1.
			x0[i] = rng.Float64()
			if !pi.l2 {
				x0[i] = math.Sqrt(x0[i])
			}
		}
		x, fx := lbfgs(ctx, pi.loss, x0, 600)
		if fx < fbest {
			best, fbest = x, fx
		}
	}
	if best == nil {
		return query.Factor{}, math.Inf(1)
	}
	f := pi.factor(best)
	// The exact cost of the factor actually returned.
	return f, factorCost(g, gram(f), n)
}

// bestFactor returns the best strategy factor for one dimension of Gram g
// (n×n), and its cost Δ² tr(G A⁺).
func bestFactor(ctx context.Context, g []float64, n int, mech Mechanism, opt Options, rng *rand.Rand) (query.Factor, float64) {
	var best query.Factor
	fbest := math.Inf(1)
	try := func(f query.Factor) {
		d := sensOf(f, mech)
		if c := d * d * factorCost(g, gram(f), n); c < fbest {
			best, fbest = f, c
		}
	}
	try(query.NewIdentity(n))
	try(query.NewTotal(n))
	for b := 2; b <= 16 && b < n; b++ {
		try(hierarchy(n, b))
	}
	if n > 1 && n <= maxPIdentity {
		seen := map[int]bool{}
		for _, p := range []int{n / 16, n / 8, n / 4} {
			p = max(p, 1)
			if seen[p] {
				continue
			}
			seen[p] = true
			f, c := optimizePIdentity(ctx, g, n, p, mech, max(2, opt.restarts()/3), rng)
			if c < fbest {
				best, fbest = f, c
			}
		}
	}
	return best, fbest
}

// kronStrategy returns the best single Kronecker product strategy for the
// workload, measured with all the budget.
func kronStrategy(ctx context.Context, shape []int, w query.Workload, mech Mechanism, budget float64, opt Options) (*Strategy, error) {
	d := len(shape)
	for i, n := range shape {
		if n > maxDense*2 {
			return nil, fmt.Errorf("strategy: dimension %d has %d values: too large for a Kronecker factor search", i+1, n)
		}
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0x6b726f6e))
	// Grams per term and dimension; C[t][i] the current cost of term t
	// on dimension i (identity strategy to start: tr G).
	grams := make([][][]float64, len(w))
	cost := make([][]float64, len(w))
	for t, wt := range w {
		grams[t] = make([][]float64, d)
		cost[t] = make([]float64, d)
		for i, f := range wt.Term {
			grams[t][i] = gram(f)
			for j := range shape[i] {
				cost[t][i] += grams[t][i][j*shape[i]+j]
			}
		}
	}
	factors := make(query.Term, d)
	for i, n := range shape {
		factors[i] = query.NewIdentity(n)
	}
	rounds := 1
	if len(w) > 1 {
		rounds = 6
	}
	for range rounds {
		for i, n := range shape {
			// What_i = Σ_t w_t Π_{l≠i} C[t][l] G_{t,i}.
			what := make([]float64, n*n)
			for t, wt := range w {
				c := wt.Weight
				for l := range d {
					if l != i {
						c *= cost[t][l]
					}
				}
				for q, v := range grams[t][i] {
					what[q] += c * v
				}
			}
			var tot float64
			for q := range n {
				tot += what[q*n+q]
			}
			if tot > 0 {
				for q := range what {
					what[q] /= tot
				}
			}
			f, _ := bestFactor(ctx, what, n, mech, opt, rng)
			if f.N == 0 {
				return nil, fmt.Errorf("strategy: no strategy factor supports dimension %d", i+1)
			}
			factors[i] = f
			gf := gram(f)
			for t := range w {
				cost[t][i] = factorCost(grams[t][i], gf, n)
			}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	l1, l2, err := opt.sens(factors)
	if err != nil {
		return nil, err
	}
	m := Measurement{Term: factors, Share: 1, L1: l1, L2: l2, Variance: variance(mech, l1, l2, 1, budget)}
	obj, err := Objective(shape, w, []Measurement{m})
	if err != nil {
		return nil, err
	}
	return &Strategy{Mechanism: mech, Budget: budget, Measurements: []Measurement{m}, Objective: obj,
		Family: "one Kronecker product of per-dimension factors (identity, total, hierarchical intervals, p-Identity; HDMM's OPT_⊗)"}, nil
}

// unionStrategy measures, for each workload term, the Kronecker product of
// the best factors for that term alone (HDMM's OPT_+), with shares of the
// budget that minimise the sum of the terms' errors as if each were
// estimated from its own measurement alone (Σ_t E_t / x_t^p, p = 2 for
// Laplace and 1 for Gaussian: x_t ∝ E_t^{1/(p+1)}). The GLS estimate from
// all of them together is never worse, and the objective returned is its
// exact value.
func unionStrategy(ctx context.Context, shape []int, w query.Workload, mech Mechanism, budget float64, opt Options) (*Strategy, error) {
	rng := rand.New(rand.NewPCG(opt.Seed, 0x756e696f))
	type cached struct {
		in   query.Factor
		out  query.Factor
		cost float64
	}
	var cache []cached
	best := func(f query.Factor) (query.Factor, float64) {
		for _, c := range cache {
			if c.in.Equal(f) {
				return c.out, c.cost
			}
		}
		g := gram(f)
		out, cost := bestFactor(ctx, g, f.N, mech, opt, rng)
		cache = append(cache, cached{f, out, cost})
		return out, cost
	}
	ms := make([]Measurement, len(w))
	e := make([]float64, len(w))
	var z float64
	for t, wt := range w {
		term := make(query.Term, len(shape))
		e[t] = wt.Weight
		for i, f := range wt.Term {
			var c float64
			term[i], c = best(f)
			if term[i].N == 0 {
				return nil, fmt.Errorf("strategy: no strategy factor supports dimension %d of term %d", i+1, t+1)
			}
			// bestFactor's cost includes the factor's squared
			// sensitivity; the term's sensitivities multiply.
			e[t] *= c
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		l1, l2, err := opt.sens(term)
		if err != nil {
			return nil, err
		}
		ms[t] = Measurement{Term: term, L1: l1, L2: l2}
		if mech == Laplace {
			e[t] = math.Cbrt(e[t])
		} else {
			e[t] = math.Sqrt(e[t])
		}
		z += e[t]
	}
	for t := range ms {
		ms[t].Share = e[t] / z
		ms[t].Variance = variance(mech, ms[t].L1, ms[t].L2, ms[t].Share, budget)
	}
	obj, err := Objective(shape, w, ms)
	if err != nil {
		return nil, err
	}
	return &Strategy{Mechanism: mech, Budget: budget, Measurements: ms, Objective: obj,
		Family: "a union of Kronecker products, one per workload term, with shares of the budget (HDMM's OPT_+)"}, nil
}
