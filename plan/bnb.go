package plan

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
)

// solveConvex solves a p = 1 problem: one interior-point solve, certified
// by the Frank-Wolfe gap.
func solveConvex(sv *solver, pr Problem, opt Options) Result {
	m := pr.model()
	m.sv = sv
	n := len(pr.Coef)
	lo, hi := make([]float64, n), ones(n)
	x := m.minimize(sv, lo, hi, pr.ClosedForm(), opt.Tol/10)
	bound := m.lowerBound(x, lo, hi)
	return finish(pr, x, bound, opt, "convex: interior point (log barrier, Newton steps); bound: Frank-Wolfe duality gap", 0)
}

// node is a box of the branch-and-bound with its relaxation's solution.
type node struct {
	lo, hi []float64
	x      []float64 // minimiser of the relaxation on the box
	rel    *model    // the relaxation
	bound  float64   // lower bound of F on the box
}

type nodeHeap []*node

func (h nodeHeap) Len() int           { return len(h) }
func (h nodeHeap) Less(i, j int) bool { return h[i].bound < h[j].bound }
func (h nodeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *nodeHeap) Push(v any)        { *h = append(*h, v.(*node)) }
func (h *nodeHeap) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}

// solveLaplace solves a p = 2 problem: local searches from several starts
// for the best split, and a spatial branch-and-bound on convex relaxations
// for the lower bound (package comment).
func solveLaplace(sv *solver, pr Problem, opt Options) Result {
	m := pr.model()
	m.sv = sv
	n := len(pr.Coef)
	global := n <= opt.GlobalMax
	maxNodes := opt.MaxNodes
	if maxNodes <= 0 {
		maxNodes = 1
		if global {
			maxNodes = 5000
		}
	}
	zero, one := make([]float64, n), ones(n)
	best, fbest := []float64(nil), math.Inf(1)
	try := func(x []float64) {
		if f := m.value(x); f < fbest {
			best, fbest = append([]float64(nil), x...), f
		}
	}
	local := func(start []float64) {
		try(start)
		if x := m.minimize(sv, zero, one, start, opt.Tol); x != nil {
			try(x)
		}
	}
	equal := make([]float64, n)
	for k := range equal {
		equal[k] = 1 / float64(n)
	}
	local(pr.ClosedForm())
	local(equal)
	for _, s := range opt.Starts {
		local(s)
	}
	if !global {
		rng := rand.New(rand.NewPCG(opt.Seed, 0x6b6e6f77))
		starts := 4
		if n > 30 {
			starts = 2
		}
		for range starts {
			x := make([]float64, n)
			for k := range x {
				x[k] = rng.ExpFloat64()
			}
			normalise(x)
			local(x)
		}
	}
	if !global && n <= 16 {
		// Support swaps: a local minimum may use a measurement the
		// minimum does not (or the reverse, which the local search then
		// finds). Re-optimise without each measurement of the best split
		// in turn, until none helps.
		for round := 0; round < 3 && !sv.stopped(); round++ {
			before := fbest
			support := append([]float64(nil), best...)
			for k := range n {
				if support[k] == 0 {
					continue
				}
				h := ones(n)
				h[k] = 0
				start := append([]float64(nil), support...)
				start[k] = 0
				if !normalise(start) {
					continue
				}
				if x := m.minimize(sv, zero, h, start, opt.Tol/10); x != nil && m.value(x) < fbest {
					local(x)
				}
			}
			if !(fbest < before*(1-opt.Tol)) {
				break
			}
		}
	}
	// Branch and bound.
	solve := func(lo, hi, warm []float64, parent float64) *node {
		ref := best
		for k := range ref {
			if ref[k] < lo[k] || ref[k] > hi[k] {
				ref = warm
				break
			}
		}
		if ref == nil {
			ref = make([]float64, n)
			for k := range ref {
				ref[k] = (lo[k] + hi[k]) / 2
			}
		}
		rel := relax(pr, lo, hi, ref)
		rel.sv = sv
		x := rel.minimize(sv, lo, hi, warm, opt.Tol/10)
		if x == nil {
			return nil
		}
		nd := &node{lo: lo, hi: hi, x: x, rel: rel, bound: max(parent, rel.lowerBound(x, lo, hi))}
		if f := m.value(x); f < fbest {
			try(x)
			local(x)
		}
		return nd
	}
	lo, hi := zero, one
	if l, h, ok := reduceBox(pr, fbest); ok {
		lo, hi = l, h
	}
	root := solve(lo, hi, nil, math.Inf(-1))
	if root == nil {
		// No split in the box beats the best one found: it is optimal
		// to within rounding.
		return finish(pr, best, fbest, opt, "not convex: local Newton searches; bound: no split beats the best found (box reduction)", 0)
	}
	// The bound is the least bound of the open boxes and of the boxes
	// pruned because their bound was within the tolerance of the best split.
	open := nodeHeap{root}
	nodes := 1
	pruned := math.Inf(1)
	for open.Len() > 0 && !sv.stopped() {
		nd := open[0]
		if fbest-min(nd.bound, pruned) <= opt.Tol*fbest {
			break
		}
		heap.Pop(&open)
		if nodes >= maxNodes {
			heap.Push(&open, nd)
			break
		}
		k, at := branchOn(pr, nd.rel, nd)
		for side := range 2 {
			lo, hi := append([]float64(nil), nd.lo...), append([]float64(nil), nd.hi...)
			if side == 0 {
				hi[k] = at
			} else {
				lo[k] = at
			}
			if !tighten(lo, hi) {
				continue
			}
			child := solve(lo, hi, nd.x, nd.bound)
			nodes++
			switch {
			case child == nil:
			case fbest-child.bound > opt.Tol*fbest:
				heap.Push(&open, child)
			default:
				pruned = min(pruned, child.bound)
			}
		}
	}
	bound := min(pruned, fbest)
	if open.Len() > 0 {
		bound = min(bound, open[0].bound)
	}
	method := fmt.Sprintf("not convex: spatial branch-and-bound over the simplex (boxes: %d; convex relaxation on each box, its bound certified by its Frank-Wolfe gap), local Newton searches for the splits", nodes)
	if fbest-bound > opt.Tol*fbest {
		method = fmt.Sprintf("not convex: multi-start local search (interior point, Newton steps); lower bound from a branch-and-bound (boxes: %d) on convex relaxations, certified by its Frank-Wolfe gap", nodes)
	}
	return finish(pr, best, bound, opt, method, nodes)
}

// relax returns a convex relaxation of a p = 2 problem on a box: every
// term is under-estimated by a convex function of x. A term with one
// measurement, a/(c x²) = a/(√c x)², is kept as it is (convex). A shared
// term a / Σ c_k x_k² gets one of two under-estimates, both over-estimating
// the precision: Σ c_k x_k² ≤ (Σ √c_k x_k)² for x ≥ 0 (1/linear²), whose
// error is its cross terms, where they are smaller at ref than the largest
// error of the other, the secant x_k² ≤ (lo_k + hi_k) x_k - lo_k hi_k on
// the box (1/linear), which vanishes as the box shrinks.
func relax(pr Problem, lo, hi, ref []float64) *model {
	n := len(pr.Coef)
	rel := &model{a: pr.Weights, cov: pr.Covers, d: make([]float64, len(pr.Weights)), q: make([]float64, n), r: make([]float64, n),
		s: make([]float64, n), sq: make([]bool, len(pr.Weights))}
	for k, c := range pr.Coef {
		rel.q[k] = c * (lo[k] + hi[k])
		rel.s[k] = math.Sqrt(c)
	}
	for i, cov := range pr.Covers {
		// The squared-linear form's error at ref (its cross terms) against
		// the secant's largest error on the box.
		var secErr, lin, den float64
		for _, k := range cov {
			rel.d[i] -= pr.Coef[k] * lo[k] * hi[k]
			secErr += pr.Coef[k] * (hi[k] - lo[k]) * (hi[k] - lo[k]) / 4
			lin += rel.s[k] * ref[k]
			den += pr.Coef[k] * ref[k] * ref[k]
		}
		rel.sq[i] = len(cov) == 1 || lin*lin-den < secErr
	}
	return rel
}

// branchOn picks the coordinate whose relaxation error at the relaxation's
// solution costs the most, weighted by how much the objective depends on
// it, and the point to split it at.
func branchOn(pr Problem, rel *model, nd *node) (int, float64) {
	n := len(pr.Coef)
	x := nd.x
	score := make([]float64, n)
	for i, a := range pr.Weights {
		cov := pr.Covers[i]
		if len(cov) == 1 {
			continue // exact
		}
		var den, lin float64
		for _, k := range cov {
			den += pr.Coef[k] * x[k] * x[k]
			lin += rel.s[k] * x[k]
		}
		wt := a / max(den*den, 1e-300)
		for _, k := range cov {
			if rel.sq[i] {
				// The squared-linear form does not shrink with the box; the
				// secant replaces it once its largest error is smaller.
				w := nd.hi[k] - nd.lo[k]
				score[k] += wt * min(pr.Coef[k]*w*w/4, rel.s[k]*x[k]*(lin-rel.s[k]*x[k]))
			} else {
				score[k] += wt * pr.Coef[k] * (x[k] - nd.lo[k]) * (nd.hi[k] - x[k])
			}
		}
	}
	best, bestK, widest, widestK := -1.0, -1, -1.0, 0
	for k := range n {
		w := nd.hi[k] - nd.lo[k]
		if w > widest {
			widest, widestK = w, k
		}
		if w > 1e-12 && score[k] > best {
			best, bestK = score[k], k
		}
	}
	if bestK < 0 || best <= 0 {
		bestK = widestK
	}
	lo, hi := nd.lo[bestK], nd.hi[bestK]
	w := hi - lo
	return bestK, min(max(x[bestK], lo+0.1*w), hi-0.1*w)
}

// reduceBox returns a box that holds every split x with F(x) ≤ fbest.
// Dropping every shared term, F(x) ≥ B_k/(c_k x_k²) + S_k/(1 - x_k)², where
// B_k sums the terms measurement k covers alone and S_k =
// (Σ_{j≠k} (B_j/c_j)^(1/3))³ is the least the other measurements' own terms
// can be on Σ_{j≠k} x_j = 1 - x_k (the closed form); this convex function
// of x_k must be ≤ fbest, which bounds x_k on both sides.
func reduceBox(pr Problem, fbest float64) (lo, hi []float64, ok bool) {
	n := len(pr.Coef)
	if n < 2 || math.IsInf(fbest, 0) {
		return nil, nil, false
	}
	own := make([]float64, n)
	for i, cov := range pr.Covers {
		if len(cov) == 1 {
			own[cov[0]] += pr.Weights[i]
		}
	}
	root := make([]float64, n)
	var sum float64
	for k := range root {
		root[k] = math.Cbrt(own[k] / pr.Coef[k])
		sum += root[k]
	}
	lo, hi = make([]float64, n), ones(n)
	// A little slack, so that rounding cannot cut off the best split.
	limit := fbest * (1 + 1e-9)
	for k := range n {
		b := own[k] / pr.Coef[k]
		rest := sum - root[k]
		s := rest * rest * rest
		phi := func(t float64) float64 {
			v := 0.0
			if b > 0 {
				v += b / (t * t)
			}
			if s > 0 {
				v += s / ((1 - t) * (1 - t))
			}
			return v
		}
		// The minimiser of phi: t/(1-t) = (b/s)^(1/3).
		tm := 0.5
		switch {
		case b == 0 && s == 0:
			continue
		case b == 0:
			tm = 0
		case s == 0:
			tm = 1
		default:
			r := math.Cbrt(b / s)
			tm = r / (1 + r)
		}
		if phi(tm) > limit {
			return nil, nil, false // cannot happen when fbest is a value of F
		}
		if b > 0 {
			l, h := 0.0, tm // phi(l) > limit ≥ phi(h)
			for range 60 {
				mid := (l + h) / 2
				if phi(mid) > limit {
					l = mid
				} else {
					h = mid
				}
			}
			lo[k] = l
		}
		if s > 0 {
			l, h := tm, 1.0 // phi(l) ≤ limit < phi(h)
			for range 60 {
				mid := (l + h) / 2
				if phi(mid) > limit {
					h = mid
				} else {
					l = mid
				}
			}
			hi[k] = h
		}
	}
	return lo, hi, tighten(lo, hi)
}

// tighten shrinks a box to what the simplex allows (x_k ≤ 1 - Σ_{j≠k} lo_j,
// x_k ≥ 1 - Σ_{j≠k} hi_j) and reports whether it still meets the simplex.
func tighten(lo, hi []float64) bool {
	var sl, sh float64
	for k := range lo {
		sl += lo[k]
		sh += hi[k]
	}
	if sl > 1+1e-12 || sh < 1-1e-12 {
		return false
	}
	for k := range lo {
		hi[k] = min(hi[k], 1-(sl-lo[k]))
		lo[k] = max(lo[k], 1-(sh-hi[k]))
		if lo[k] > hi[k] {
			lo[k] = hi[k]
		}
	}
	return true
}

func ones(n int) []float64 {
	x := make([]float64, n)
	for k := range x {
		x[k] = 1
	}
	return x
}
