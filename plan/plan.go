// Package plan solves the budget-split problem of a workload release to a
// certified optimum. It is pure mathematics: no I/O, no randomness that is
// not seeded by the caller, no global state.
//
// The problem. A release measures m cuboids; measurement k gets the fraction
// x_k of the budget (x on the simplex Σ x_k = 1, x ≥ 0). Its noise gives
// every free residual A it covers a precision c_k x_k^p, where p = 2 for
// Laplace noise and shares of epsilon (variance ∝ 1/eps²) and p = 1 for
// Gaussian noise and shares of rho (variance ∝ 1/rho). The weighted total
// variance of the released tables is
//
//	F(x) = Σ_i a_i / Σ_{k ∈ covers(i)} c_k x_k^p,
//
// one term per free residual (a_i > 0, every term covered by at least one
// measurement).
//
// p = 1 is convex: each term is 1/t composed with a linear map. Solve finds
// the minimum by a log-barrier interior-point method with Newton steps and
// certifies it by the Frank-Wolfe duality gap: for a convex F on the simplex,
// F(x) - F* ≤ ∇F(x)·x - min_k ∂_k F(x).
//
// p = 2 is not convex in general (a/(x_1² + x_2²) on x_1 + x_2 = 1 has its
// maximum at the centre and its minima at the vertices), and can have
// several local minima. Up to Options.GlobalMax measurements Solve runs a
// spatial branch-and-bound: on a box lo ≤ x ≤ hi every term is
// under-estimated by a convex function (a term of one measurement,
// a/(c x²) = a/(√c x)², is convex as it is; a shared one gets the secant
// x_k² ≤ (lo_k + hi_k) x_k - lo_k hi_k or Σ c_k x_k² ≤ (Σ √c_k x_k)²), so the
// certified minimum of the relaxation (its value minus its Frank-Wolfe gap)
// is a proved lower bound of F on the box; the relaxation's minimiser is a
// feasible split, polished by a local Newton method, which gives upper
// bounds. Boxes are split until the best split is within the tolerance of
// the least lower bound. Beyond GlobalMax, local searches from several
// starts give the split and the root box's relaxation the bound. Either
// way Result.Gap is the distance from the split returned to a proved lower
// bound.
//
// Bounded work. Every loop has a cap (Newton steps, halvings of a line
// search, shifts of a Hessian that is not positive definite, boxes of the
// branch-and-bound), the whole solve has a budget of work known from the
// problem's shape before it starts (WorkBound; Result.Work counts what was
// done), Solve honours its context between Newton steps, and
// non-finite arithmetic ends a search instead of feeding it: a problem
// whose weights or coefficients span so many orders of magnitude that
// float64 cannot follow it gets ErrNotFinite, never a hang or a result
// that is not a point of the simplex with a finite objective. F is
// homogeneous (scaling every weight by s scales F by s, every coefficient
// by s scales it by 1/s), so Solve first scales both by powers of two to a
// largest entry in [2^-6, 1): the same arithmetic to the last bit, far
// from overflow.
package plan

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// ErrNotFinite is returned by Solve when the problem's arithmetic leaves
// float64 (an infinite or undefined value in the objective, its
// derivatives or the split): its weights or coefficients span too many
// orders of magnitude (more than about 1e250 between the largest and the
// smallest term's a_i / c_k).
var ErrNotFinite = errors.New("plan: the split problem's arithmetic is not finite (weights or coefficients span too many orders of magnitude)")

// Problem is an instance of the split problem (package comment).
type Problem struct {
	// Weights holds a_i > 0, one per term.
	Weights []float64
	// Covers lists, per term, the measurements whose precision it sums
	// (each at least one, each in [0, len(Coef))).
	Covers [][]int
	// Coef holds c_k > 0, one per measurement.
	Coef []float64
	// Power is p: 1 (Gaussian shares, convex) or 2 (Laplace shares).
	Power int
}

// Options tune Solve. The zero value is usable.
type Options struct {
	// Tol is the relative optimality gap to reach (default 1e-6).
	Tol float64
	// GlobalMax is the largest number of measurements for which a p = 2
	// problem is solved by branch-and-bound to Tol (default 6); larger ones
	// get a multi-start local search and a branch-and-bound limited to
	// MaxNodes.
	GlobalMax int
	// MaxNodes bounds the branch-and-bound nodes (default 5000 up to
	// GlobalMax measurements; beyond, 1: the root's relaxation alone).
	MaxNodes int
	// Starts are extra starting points for the local searches (each a
	// point of the simplex with one entry per measurement), such as the
	// optimum of a related problem.
	Starts [][]float64
	// Seed seeds the random starting points of the multi-start search.
	Seed uint64
	// MaxWork caps the solver's work (Result.Work's unit): past it, every
	// search stops and Solve returns the best split found with its
	// certified gap. 0 means the problem's WorkBound, which no ordinary
	// problem comes near: the cap only keeps a pathological one bounded.
	MaxWork float64
}

// Shape is what the solver's work depends on: the number of measurements
// n, and over the terms, Σ_i (1 + |cov_i|) (Covers: the work of one value
// of F) and Σ_i (1 + |cov_i|²) (CoverSquares: the work of one Hessian). A
// caller can bound them from its request before it builds the problem.
type Shape struct {
	Measurements int
	Covers       int
	CoverSquares int
	Power        int
}

// Shape returns the problem's shape, counting only the measurements some
// term uses (those Solve solves for).
func (pr Problem) Shape() Shape {
	sh := Shape{Power: pr.Power}
	used := make([]bool, len(pr.Coef))
	for _, cov := range pr.Covers {
		sh.Covers += 1 + len(cov)
		sh.CoverSquares += 1 + len(cov)*len(cov)
		for _, k := range cov {
			if k >= 0 && k < len(used) && !used[k] {
				used[k] = true
				sh.Measurements++
			}
		}
	}
	return sh
}

// The budget of Newton steps per search (one interior-point solve), and of
// a whole solve. On 400 random workloads of 1 to 64 cuboids over the
// arrests schema, an interior-point solve took at most 170 Newton steps,
// a branch-and-bound at most 87 per box (5000 boxes), and a step's work
// was at most 2.1 times the cost WorkBound charges it: the budget is at
// least 4 times what any of them used.
const (
	stepsPerSearch = 800
	minSteps       = 8000
)

// WorkBound returns the most work (Result.Work's unit) Solve does on a
// problem of this shape under these options, known before it starts: a
// budget of Newton steps per search, times the searches it runs (one for
// p = 1; for p = 2 the starts, the support swaps and two per
// branch-and-bound box), times the cost of a step. It is monotone in
// every field of the shape but Measurements, which also decides how the
// p = 2 problem is searched (Options.GlobalMax). Solve stops its searches
// once its work reaches the bound (or Options.MaxWork): it can exceed it
// only by the few evaluations of F each search makes before it checks.
func WorkBound(sh Shape, opt Options) float64 {
	n := float64(sh.Measurements)
	step := float64(sh.CoverSquares) + n*n*n/6 + 4*float64(sh.Covers)
	searches := 1.0
	if sh.Power != 1 {
		globalMax, maxNodes := opt.GlobalMax, opt.MaxNodes
		if globalMax <= 0 {
			globalMax = 6
		}
		global := sh.Measurements <= globalMax
		if maxNodes <= 0 {
			maxNodes = 1
			if global {
				maxNodes = 5000
			}
		}
		searches = float64(2 + len(opt.Starts) + 2*(maxNodes+1))
		if !global {
			searches += 4
			if sh.Measurements <= 16 {
				searches += 6 * n
			}
		}
	}
	return max(stepsPerSearch*searches, minSteps) * step
}

// Result is a solution with its certificate.
type Result struct {
	// X is the split: x_k ≥ 0, Σ x_k = 1. Measurements with no share
	// have x_k = 0 exactly.
	X []float64
	// Objective is F(X); Bound is a proved lower bound of min F; Gap is
	// (Objective - Bound) / Objective, the relative optimality gap.
	Objective, Bound, Gap float64
	// Method says how X was found and the bound proved.
	Method string
	// Global is true when Gap ≤ Tol: X is optimal to within Tol.
	Global bool
	// Nodes is the number of branch-and-bound nodes solved (0 for p = 1).
	Nodes int
	// Steps is the number of Newton steps taken, over every search, and
	// Work the arithmetic they and the other evaluations of F did, in
	// units of one term of F for a value (Σ_i (1 + |cov_i|) a value, Σ_i
	// (1 + |cov_i|²) a Hessian, n³/6 a factorisation): a count of the
	// solver's work that does not depend on the machine.
	Steps int
	Work  float64
}

// Validate checks the problem's shape.
func (pr Problem) Validate() error {
	if pr.Power != 1 && pr.Power != 2 {
		return fmt.Errorf("plan: power %d, want 1 or 2", pr.Power)
	}
	if len(pr.Coef) == 0 {
		return errors.New("plan: no measurements")
	}
	for k, c := range pr.Coef {
		if !(c > 0) || math.IsInf(c, 0) {
			return fmt.Errorf("plan: coefficient %d is %v, want finite and > 0", k, c)
		}
	}
	if len(pr.Covers) != len(pr.Weights) {
		return fmt.Errorf("plan: %d weights for %d terms", len(pr.Weights), len(pr.Covers))
	}
	for i, a := range pr.Weights {
		if !(a > 0) || math.IsInf(a, 0) {
			return fmt.Errorf("plan: weight %d is %v, want finite and > 0", i, a)
		}
		if len(pr.Covers[i]) == 0 {
			return fmt.Errorf("plan: term %d is covered by no measurement", i)
		}
		for _, k := range pr.Covers[i] {
			if k < 0 || k >= len(pr.Coef) {
				return fmt.Errorf("plan: term %d covered by measurement %d of %d", i, k, len(pr.Coef))
			}
		}
	}
	return nil
}

// Value returns F(x) (+Inf where a term has no precision).
func (pr Problem) Value(x []float64) float64 {
	return pr.model().value(x)
}

// Gradient sets g to ∇F(x).
func (pr Problem) Gradient(x, g []float64) {
	m := pr.model()
	m.eval(x, g, nil)
}

// model returns F as a sum of a_i / D_i(x) with D_i quadratic.
func (pr Problem) model() *model {
	m := &model{a: pr.Weights, cov: pr.Covers, d: make([]float64, len(pr.Weights)), q: make([]float64, len(pr.Coef)), r: make([]float64, len(pr.Coef))}
	if pr.Power == 1 {
		copy(m.q, pr.Coef)
	} else {
		copy(m.r, pr.Coef)
	}
	return m
}

// ClosedForm returns the split that is optimal when no term is covered by
// two measurements: with B_k the sum of a_i over k's terms (a term covered
// by several measurements divided evenly among them), x_k ∝ (B_k/c_k)^(1/(p+1)).
func (pr Problem) ClosedForm() []float64 {
	b := make([]float64, len(pr.Coef))
	for i, a := range pr.Weights {
		for _, k := range pr.Covers[i] {
			b[k] += a / float64(len(pr.Covers[i]))
		}
	}
	x := make([]float64, len(b))
	for k := range x {
		if pr.Power == 1 {
			x[k] = math.Sqrt(b[k] / pr.Coef[k])
		} else {
			x[k] = math.Cbrt(b[k] / pr.Coef[k])
		}
	}
	if !normalise(x) {
		// The ratios overflow: the equal split is a start like another.
		for k := range x {
			x[k] = 1 / float64(len(x))
		}
	}
	return x
}

// Solve minimises F on the simplex (package comment) and certifies the
// result. It returns ctx's error, wrapped, when ctx ends first, and
// ErrNotFinite when the problem's arithmetic is not finite.
func Solve(ctx context.Context, pr Problem, opt Options) (Result, error) {
	if err := pr.Validate(); err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("plan: %w", err)
	}
	if opt.Tol <= 0 {
		opt.Tol = 1e-6
	}
	if opt.GlobalMax <= 0 {
		opt.GlobalMax = 6
	}
	for i, s := range opt.Starts {
		if len(s) != len(pr.Coef) {
			return Result{}, fmt.Errorf("plan: start %d has %d entries for %d measurements", i, len(s), len(pr.Coef))
		}
	}
	n := len(pr.Coef)
	// Measurements that no term uses get nothing; solve for the others.
	used := make([]bool, n)
	for _, cov := range pr.Covers {
		for _, k := range cov {
			used[k] = true
		}
	}
	var keep []int
	index := make([]int, n)
	for k := range used {
		index[k] = -1
		if used[k] {
			index[k] = len(keep)
			keep = append(keep, k)
		}
	}
	if len(pr.Weights) == 0 {
		x := make([]float64, n)
		for k := range x {
			x[k] = 1 / float64(n)
		}
		return Result{X: x, Method: "no term: every split is optimal", Global: true}, nil
	}
	// The weights and coefficients scaled by powers of two (exactly) to a
	// largest entry in [2^-6, 1): F(x) = 2^(wexp-cexp) F_sub(x).
	wexp, cexp := maxExp(pr.Weights), maxExp(pr.Coef)
	sub := Problem{Weights: make([]float64, len(pr.Weights)), Covers: make([][]int, len(pr.Covers)), Coef: make([]float64, len(keep)), Power: pr.Power}
	for i, cov := range pr.Covers {
		sub.Weights[i] = math.Ldexp(pr.Weights[i], -wexp)
		sub.Covers[i] = make([]int, len(cov))
		for j, k := range cov {
			sub.Covers[i][j] = index[k]
		}
	}
	for j, k := range keep {
		sub.Coef[j] = math.Ldexp(pr.Coef[k], -cexp)
	}
	starts := make([][]float64, 0, len(opt.Starts))
	for _, s := range opt.Starts {
		t := make([]float64, len(keep))
		for j, k := range keep {
			t[j] = max(s[k], 0)
		}
		if normalise(t) {
			starts = append(starts, t)
		}
	}
	opt.Starts = starts
	maxWork := opt.MaxWork
	if maxWork <= 0 {
		maxWork = WorkBound(sub.Shape(), opt)
	}
	sv := &solver{ctx: ctx, maxWork: maxWork}
	defer func() { MeterFrom(ctx).Add(sv.work) }()
	var res Result
	if sub.Power == 1 {
		res = solveConvex(sv, sub, opt)
	} else {
		res = solveLaplace(sv, sub, opt)
	}
	res.Steps, res.Work = sv.steps, sv.work
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("plan: %w", err)
	}
	if !res.finite() {
		return Result{}, ErrNotFinite
	}
	x := make([]float64, n)
	for j, k := range keep {
		x[k] = res.X[j]
	}
	res.X = x
	// Back to the problem's own scale; Gap is a ratio and does not move.
	res.Objective = math.Ldexp(res.Objective, wexp-cexp)
	res.Bound = math.Ldexp(res.Bound, wexp-cexp)
	if math.IsInf(res.Objective, 0) || math.IsInf(res.Bound, 0) {
		return Result{}, ErrNotFinite // F itself overflows at the split
	}
	if f := pr.Value(x); f != res.Objective {
		// Scaling is exact unless a value under- or overflows: the
		// objective is F(X) as the caller computes it, and the gap is to
		// the bound in that scale.
		if !(f > 0) || math.IsInf(f, 0) || math.IsInf(res.Bound, 0) {
			return Result{}, ErrNotFinite
		}
		res.Objective, res.Bound = f, min(res.Bound, f)
		res.Gap = (f - res.Bound) / f
		res.Global = res.Gap <= opt.Tol
	}
	return res, nil
}

// solver carries what every search of one Solve shares: its context and
// its work (see Result.Work) against its cap.
type solver struct {
	ctx     context.Context
	work    float64
	maxWork float64
	steps   int
}

// stopped reports whether the context has ended or the work reached its
// cap: every search then returns the best point it has.
func (sv *solver) stopped() bool { return sv.work >= sv.maxWork || sv.ctx.Err() != nil }

// maxExp returns a multiple e of 6 such that the largest of xs (all
// finite and > 0) scaled by 2^-e is in [2^-6, 1). Multiples of 6 keep the
// solver's square and cube roots of coefficients and of their ratios to
// weights exactly scaled too, so that the scaled problem's arithmetic is
// the original's to the last bit.
func maxExp(xs []float64) int {
	top := 0.0
	for _, v := range xs {
		top = max(top, v)
	}
	_, e := math.Frexp(top)
	q := e / 6
	if e%6 > 0 {
		q++
	}
	return 6 * q
}

// finite reports whether a result is a point of the simplex with a finite
// objective, bound and gap.
func (r Result) finite() bool {
	var sum float64
	for _, v := range r.X {
		if !(v >= 0) || math.IsInf(v, 0) {
			return false
		}
		sum += v
	}
	ok := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	return math.Abs(sum-1) <= 1e-9 && ok(r.Objective) && ok(r.Bound) && ok(r.Gap) && r.Gap >= 0 && r.Objective > 0
}

// finish drops the measurements whose tiny share buys (almost) nothing,
// evaluates the result and its gap to the bound.
func finish(pr Problem, x []float64, bound float64, opt Options, method string, nodes int) Result {
	if len(x) != len(pr.Coef) {
		// No search reached a point where F is finite: the caller's
		// checks turn this into ErrNotFinite.
		return Result{Objective: math.NaN(), Method: method}
	}
	m := pr.model()
	x = clean(m, x, opt.Tol)
	f := m.value(x)
	// F > 0 everywhere, so 0 is a lower bound whatever the certificate
	// (a bound that is not finite certifies nothing more).
	if math.IsNaN(bound) {
		bound = 0
	}
	bound = max(min(bound, f), 0)
	gap := 0.0
	if f > 0 {
		gap = (f - bound) / f
	}
	return Result{X: x, Objective: f, Bound: bound, Gap: gap, Method: method, Global: gap <= opt.Tol, Nodes: nodes}
}

// clean zeroes the shares below 1e-5 of the largest when that raises F by
// at most a hundredth of tol (relative), smallest first: an interior-point
// method leaves a measurement the optimum does not use a share of order
// 1e-10, which would only add noise to publish.
func clean(m *model, x []float64, tol float64) []float64 {
	x = append([]float64(nil), x...)
	for k := range x {
		x[k] = max(x[k], 0)
	}
	normalise(x)
	f := m.value(x)
	top := 0.0
	for _, v := range x {
		top = max(top, v)
	}
	for {
		best, bestK := math.Inf(1), -1
		for k, v := range x {
			if v > 0 && v < 1e-5*top && v < best {
				best, bestK = v, k
			}
		}
		if bestK < 0 {
			return x
		}
		try := append([]float64(nil), x...)
		try[bestK] = 0
		normalise(try)
		if ft := m.value(try); ft <= f*(1+tol/100) {
			x, f = try, ft
			continue
		}
		// Keep it, and do not try the larger ones.
		return x
	}
}

// normalise scales x to sum 1 and reports whether it could.
func normalise(x []float64) bool {
	var sum float64
	for _, v := range x {
		sum += v
	}
	if !(sum > 0) || math.IsInf(sum, 0) {
		return false
	}
	for i := range x {
		x[i] /= sum
	}
	return true
}
