// Package treesplit solves the budget split of tables at the levels of one
// hierarchy crossed with flat dimensions, with a certificate: how far the
// split returned can be from the optimum. It is pure mathematics on
// numbers (the hierarchy's shape tree, precisions per unit of share, weights
// per level); the caller builds the Problem from its tables.
//
// The objective is the one a flat workload's split (package plan)
// minimises: the weighted total variance Σ_t w_t Σ_cells Var ŷ,
// data-independent. Across a hierarchy it is a sum over the flat residuals T and the tree's nodes of the posterior
// variances of the tree-structured estimate (docs/hierarchy.md):
//
//	F = Σ_T π_T Σ_ℓ c_{T,ℓ} Σ_{g at level ℓ} P_T(g),
//	c_{T,ℓ} = Σ_{tables t at ℓ, T ⊆ S_t} w_t Π_{d∈S_t} n_d / (Π_{d∈S_t\T} n_d)²,
//
// where P_T(g) is the posterior variance of node g in the tree problem of
// T whose level ℓ is observed with precision Σ_{j at ℓ, T ⊆ S_j}
// 1/(v_j m_{jT}), m_{jT} = Π_{d∈S_j\T} n_d (or exactly, by an invariant).
// Two passes give every P_T(g): upward, the variance w of each node's
// estimate from its subtree; downward, the smoothed variance
// P_c = w_c + (w_c/W)² (P_p - W), W = Σ_children w (Rauch-Tung-Striebel
// on a tree). The derivatives of F in each share come exactly (to rounding)
// from the same passes in complex arithmetic (the complex-step derivative:
// F'(x) = Im F(x + ih)/h, no cancellation).
//
// Gaussian shares of rho: each precision is linear in the shares and the
// posterior variance of a linear functional is convex in the precisions,
// so F is convex on the simplex; exponentiated-gradient steps with a
// backtracking line search minimise it, and the Frank-Wolfe gap
// ∇F·x - min_k ∂_k F bounds F(x) - min F: the certificate.
//
// Laplace shares of eps: precisions grow as the share squared and F is
// not convex in the shares. With y_k = x_k², F is convex in y, and
// {Σ √y_k ≤ 1} lies inside {Σ y_k ≤ 1}, so the convex minimum over the
// latter, less its Frank-Wolfe gap, is a proved lower bound; local searches
// in x from several starts give the split, and the gap to that bound is
// reported (it says how far the split can be from the optimum, not that it
// is that far).
package treesplit

import (
	"context"
	"errors"
	"math"
	"slices"

	"github.com/knowdp/knowdp/estimate/hier"
	"github.com/knowdp/knowdp/plan"
)

// Residual is the tree problem of one flat residual T: per level ℓ of the
// hierarchy (0 the leaves), whether an invariant fixes it, the noisy
// measurements that observe it, and c_{T,ℓ}.
type Residual struct {
	// Weight is π_T = Π_{d∈T} (1 - 1/n_d).
	Weight float64
	// Exact[ℓ] is true when an invariant fixes level ℓ.
	Exact []bool
	// Obs[ℓ] are the noisy measurements that observe level ℓ.
	Obs [][]Obs
	// Coef[ℓ] is c_{T,ℓ} (package comment).
	Coef []float64
}

// Obs is one measurement observing a level of a residual's tree problem.
type Obs struct {
	// Measurement is the index j of the measurement (of Problem.Unit).
	Measurement int
	// Cells is m_{jT} = Π_{d∈S_j\T} n_d: how many of the measurement's
	// cells sum into one of T.
	Cells float64
}

// Problem is an instance of the split problem (package comment).
type Problem struct {
	// Tree is the hierarchy up to its automorphisms: every node of one
	// shape has the same upward variance w, and every node of one class
	// the same posterior variance P, so the passes visit one node per
	// shape and per class, not every node.
	Tree *hier.ShapeTree
	// Residuals are the tree problems, one per flat residual.
	Residuals []Residual
	// Gaussian says that the shares are of rho (precision linear in the
	// share); otherwise of eps (precision as the share squared).
	Gaussian bool
	// Unit[j] is the precision of measurement j per unit of its share
	// (Gaussian) or of its share squared (Laplace).
	Unit []float64
}

// Objective is F as a function of the measurements' shares, with the
// buffers of its passes: it is not for concurrent use.
type Objective struct {
	Problem
	// Buffers of the passes, per level: per shape w and the sums over the
	// children of a node of that shape, per class P.
	w, P       [][]complex128
	winf, pinf [][]bool
	childW     [][]complex128
	childInf   [][]int
	// evals counts the evaluations of F; the searches stop once it
	// reaches maxEvals (0: no cap), the budget of WorkBound.
	evals, maxEvals int
}

// New returns the objective of p.
func New(p Problem) *Objective { return &Objective{Problem: p} }

// Solution is a split with its certificate.
type Solution struct {
	// X is the split: one share per measurement, on the simplex.
	X []float64
	// Value is F(X).
	Value float64
	// Bound is a proved lower bound of F over every split, and Gap is
	// (Value - Bound) / Value.
	Bound, Gap float64
	// Global is true when Gap is within 1e-6.
	Global bool
	// Work is what the solve took, in plan.Result.Work's unit.
	Work float64
	// Method says how the split was found and the bound proved.
	Method string
}

// cost returns the node visits of one evaluation of F.
func (o *Objective) cost() int {
	n := 0
	if o.Tree != nil {
		for k := range o.Tree.Classes {
			n += len(o.Tree.Kids[k]) + len(o.Tree.Classes[k])
		}
	}
	return max(1, n*len(o.Residuals))
}

// splitSteps returns the exponentiated-gradient steps of a descent and the
// Newton steps of a polish, for k measurements: a descent is bounded to
// about 10^8 node visits however large the hierarchy (but takes at least
// 20 steps), a polish (whose step evaluates F (k+1)² times) to about 10^9
// (at least 3 steps).
func (o *Objective) splitSteps(k int) (descent, newton int) {
	c := float64(o.cost())
	descent = int(min(300, max(20, 1e8/(c*float64(k+1)))))
	newton = int(min(20, max(3, 1e9/(c*float64((k+1)*(k+1))))))
	return descent, newton
}

// splitEvals returns the budget of evaluations of F of Solve
// for k measurements: per descent step a gradient (k+1 evaluations) and up
// to 16 of the line search (it takes 1 to 3 when it succeeds); per Newton
// step k+1 gradients and up to 30 of the line search; one descent and
// polish for Gaussian shares, four for Laplace shares, and the final
// evaluations.
func (o *Objective) splitEvals(k int) int {
	descent, newton := o.splitSteps(k)
	searches := 4
	if o.Gaussian {
		searches = 1
	}
	perSearch := descent*(k+1+16) + newton*((k+1)*(k+1)+30)
	return searches*perSearch + 4*(k+2)
}

// NodeVisitWork is the work of one node visit of the variance passes in
// plan.Result.Work's unit, so that the work of both splits is counted in
// one unit: a visit (complex arithmetic and the tree's bookkeeping) takes
// about 14 ns, a unit of the flat split about 2.4 ns
// (BenchmarkSplitWorkUnits, 2-core development machine).
const NodeVisitWork = 6

// Work returns the work done so far, in plan.Result.Work's unit.
func (o *Objective) Work() float64 {
	return float64(o.evals) * float64(o.cost()) * NodeVisitWork
}

// WorkBound returns the most work Solve does (plan.Result.Work's unit):
// its budget of evaluations of F times the node visits of one.
func (o *Objective) WorkBound() float64 {
	return float64(o.splitEvals(len(o.Unit))) * float64(o.cost()) * NodeVisitWork
}

// spent reports whether the evaluations reached their budget.
func (o *Objective) spent() bool { return o.maxEvals > 0 && o.evals >= o.maxEvals }

// ErrUndetermined says that a split leaves a table without an estimate.
var ErrUndetermined = errors.New("a table is not determined by the measurements")

// errNoTree says that the problem has no shape tree.
var errNoTree = errors.New("treesplit: the problem has no hierarchy (Problem.Tree is nil)")

// ErrNotFinite says that the objective or its gradient left float64 (an
// infinite or undefined value): weights or noise spanning too many orders
// of magnitude.
var ErrNotFinite = errors.New("the weighted total variance is not finite (weights too large or too far apart)")

// finite reports whether v is neither infinite nor NaN.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// value returns F at the given precision scale of each measurement
// (complex, for the complex-step derivative).
func (o *Objective) value(prec []complex128) (complex128, error) {
	o.evals++
	if o.Tree == nil {
		return 0, errNoTree
	}
	t := o.Tree
	L := len(t.Classes) - 1
	shapes := func(l int) int {
		if l == 0 {
			return 1 // every leaf has the same (empty) subtree
		}
		return len(t.Kids[l])
	}
	var total complex128
	if o.w == nil {
		for l := range L + 1 {
			n, c := shapes(l), len(t.Classes[l])
			o.w, o.winf = append(o.w, make([]complex128, n)), append(o.winf, make([]bool, n))
			o.childW, o.childInf = append(o.childW, make([]complex128, n)), append(o.childInf, make([]int, n))
			o.P, o.pinf = append(o.P, make([]complex128, c)), append(o.pinf, make([]bool, c))
		}
	}
	w, winf, P, pinf, childW, childInf := o.w, o.winf, o.P, o.pinf, o.childW, o.childInf
	for _, r := range o.Residuals {
		// Upward, one node per shape: its children by shape and count.
		for l := range L + 1 {
			var lambda complex128
			for _, ob := range r.Obs[l] {
				lambda += prec[ob.Measurement] / complex(ob.Cells, 0)
			}
			for sh := range shapes(l) {
				var W complex128
				nInf := 0
				if l > 0 {
					for _, k := range t.Kids[l][sh] {
						if winf[l-1][k.Shape] {
							nInf += k.Count
						} else {
							W += complex(float64(k.Count), 0) * w[l-1][k.Shape]
						}
					}
				}
				childW[l][sh], childInf[l][sh] = W, nInf
				wInf := l == 0 || nInf > 0
				switch {
				case r.Exact[l]:
					w[l][sh], winf[l][sh] = 0, false
				case lambda == 0 && wInf:
					winf[l][sh] = true
				case lambda == 0:
					w[l][sh], winf[l][sh] = W, false
				case wInf:
					w[l][sh], winf[l][sh] = 1/lambda, false
				case W == 0:
					w[l][sh], winf[l][sh] = 0, false
				default:
					w[l][sh], winf[l][sh] = W/(1+lambda*W), false
				}
			}
		}
		// Downward, one node per class: its shape's w and its parent's P
		// and children.
		P[L][0], pinf[L][0] = w[L][0], winf[L][0]
		for l := L - 1; l >= 0; l-- {
			for c, ci := range t.Classes[l] {
				pc := ci.Parent
				ps := t.Classes[l+1][pc].Shape
				W, nInf := childW[l+1][ps], childInf[l+1][ps]
				wc, wcInf := w[l][ci.Shape], winf[l][ci.Shape]
				switch {
				case pinf[l+1][pc] || nInf >= 2:
					P[l][c], pinf[l][c] = wc, wcInf
				case nInf == 1 && wcInf:
					P[l][c], pinf[l][c] = P[l+1][pc]+W, false
				case nInf == 1:
					P[l][c], pinf[l][c] = wc, false
				case W == 0:
					P[l][c], pinf[l][c] = 0, false
				default:
					g := wc / W
					P[l][c], pinf[l][c] = wc+g*g*(P[l+1][pc]-W), false
				}
			}
		}
		for l := range L + 1 {
			if r.Coef[l] == 0 {
				continue
			}
			var sum complex128
			for c, ci := range t.Classes[l] {
				if pinf[l][c] {
					return 0, ErrUndetermined
				}
				sum += complex(float64(ci.Nodes), 0) * P[l][c]
			}
			total += complex(r.Coef[l]*r.Weight, 0) * sum
		}
	}
	return total, nil
}

// Eval returns F and its gradient (into grad, unless it is nil) in the
// shares x: precision Unit·x, or Unit·x² for Laplace unless squared is
// false (the convex relaxation in y = x²).
func (o *Objective) Eval(x []float64, squared bool, grad []float64) (float64, error) {
	prec := make([]complex128, len(x))
	for j, xj := range x {
		v := xj
		if squared {
			v = xj * xj
		}
		prec[j] = complex(o.Unit[j]*v, 0)
	}
	f, err := o.value(prec)
	if err == nil && !finite(real(f)) {
		err = ErrNotFinite
	}
	if err != nil || grad == nil {
		return real(f), err
	}
	const h = 1e-30
	for j, xj := range x {
		save := prec[j]
		d := complex(xj, h)
		if squared {
			d *= d
		}
		prec[j] = complex(o.Unit[j], 0) * d
		fj, err := o.value(prec)
		if err != nil {
			return 0, err
		}
		if grad[j] = imag(fj) / h; !finite(grad[j]) {
			return 0, ErrNotFinite
		}
		prec[j] = save
	}
	return real(f), nil
}

// fwGap is the Frank-Wolfe gap ∇F·x - min_k ∂_k F at x on the simplex.
func fwGap(x, g []float64) float64 {
	var dot float64
	for j := range x {
		dot += g[j] * x[j]
	}
	return dot - slices.Min(g)
}

// descend minimises F on the simplex from x by exponentiated-gradient steps
// with backtracking, until the Frank-Wolfe gap is below tol·F or the steps
// run out. It returns the point, F and the gap there, or ctx's error when
// ctx ends first.
func (o *Objective) descend(ctx context.Context, x []float64, squared bool, tol float64, steps int) ([]float64, float64, float64, error) {
	x = slices.Clone(x)
	g := make([]float64, len(x))
	f, err := o.Eval(x, squared, g)
	if err != nil {
		return nil, 0, 0, err
	}
	eta := 1.0
	next := make([]float64, len(x))
	for range steps {
		if err := ctx.Err(); err != nil {
			return nil, 0, 0, err
		}
		if o.spent() {
			break
		}
		gap := fwGap(x, g)
		if gap <= tol*f {
			return x, f, gap, nil
		}
		gmax := 0.0
		for _, v := range g {
			gmax = max(gmax, math.Abs(v))
		}
		if !(gmax > 0) {
			break // a level gradient: nowhere to go
		}
		improved := false
		for range 60 {
			var sum float64
			for j := range x {
				next[j] = x[j] * math.Exp(-eta*g[j]/gmax)
				sum += next[j]
			}
			for j := range next {
				next[j] /= sum
			}
			fn, err := o.Eval(next, squared, nil)
			if err == nil && fn <= f-1e-4*eta*gap/gmax {
				improved = true
				break
			}
			eta /= 2
		}
		if !improved {
			break
		}
		copy(x, next)
		if f, err = o.Eval(x, squared, g); err != nil {
			return nil, 0, 0, err
		}
		eta *= 2
	}
	return x, f, fwGap(x, g), nil
}

// Solve chooses the shares that minimise F, with the certificate of the
// package comment. hint, when not nil, is one more start of the Laplace
// local searches (after the equal split). Its work is added to the
// context's plan.Meter, whatever the outcome. It fails with ctx's error
// when ctx ends first, and with ErrUndetermined or ErrNotFinite.
func (o *Objective) Solve(ctx context.Context, hint []float64) (Solution, error) {
	defer func() { plan.MeterFrom(ctx).Add(o.Work()) }()
	k := len(o.Unit)
	equal := make([]float64, k)
	for i := range equal {
		equal[i] = 1 / float64(k)
	}
	// A rough descent, then Newton steps polish it, within a budget of
	// evaluations known before they start (workBound).
	const tol = 1e-4
	steps, newtonSteps := o.splitSteps(k)
	o.maxEvals = o.splitEvals(k)
	if o.Gaussian {
		x, _, _, err := o.descend(ctx, equal, false, tol, steps)
		if err != nil {
			return Solution{}, err
		}
		// The certificate is for the point used: shares too small to
		// matter are dropped first, then Newton steps on the rest.
		x = o.newton(ctx, dropTiny(x), false, newtonSteps)
		g := make([]float64, k)
		f, err := o.Eval(x, false, g)
		if err != nil {
			return Solution{}, err
		}
		gap := max(0, fwGap(x, g))
		return Solution{X: x, Value: f, Bound: f - gap, Gap: gap / f, Global: gap <= 1e-6*f, Work: o.Work(),
			Method: "exponentiated-gradient descent on the convex zCDP objective (exact derivatives by complex step); the bound is the Frank-Wolfe duality gap"}, nil
	}
	// Laplace: the convex relaxation in y = x² gives the bound.
	y, _, _, err := o.descend(ctx, equal, false, tol, steps)
	if err != nil {
		return Solution{}, err
	}
	y = o.newton(ctx, dropTiny(y), false, newtonSteps)
	gy := make([]float64, k)
	fy, err := o.Eval(y, false, gy)
	if err != nil {
		return Solution{}, err
	}
	bound := fy - fwGap(y, gy)
	starts := [][]float64{equal}
	if hint != nil {
		starts = append(starts, hint)
	}
	root := make([]float64, k)
	var sum float64
	for j := range y {
		root[j] = math.Sqrt(y[j])
		sum += root[j]
	}
	for j := range root {
		root[j] /= sum
	}
	starts = append(starts, root)
	var best []float64
	bestF := math.Inf(1)
	for _, st := range starts {
		x, _, _, err := o.descend(ctx, st, true, tol, steps)
		if err != nil {
			return Solution{}, err
		}
		x = o.newton(ctx, dropTiny(x), true, newtonSteps)
		f, err := o.Eval(x, true, nil)
		if err != nil {
			return Solution{}, err
		}
		if f < bestF {
			best, bestF = x, f
		}
	}
	best = dropTiny(best)
	if bestF, err = o.Eval(best, true, nil); err != nil {
		return Solution{}, err
	}
	gap := max(0, (bestF-bound)/bestF)
	return Solution{X: best, Value: bestF, Bound: bound, Gap: gap, Global: gap <= 1e-6, Work: o.Work(),
		Method: "local exponentiated-gradient searches from the equal, spine and relaxed splits (the Laplace objective is not convex in the shares); " +
			"the bound is the minimum of the convex relaxation in the squared shares, less its Frank-Wolfe gap"}, nil
}

// dropTiny sets the shares below 1e-6 of the largest to zero (a
// measurement that would get them adds nothing) and renormalises. A point
// that is not finite is returned as it is (the caller's checks refuse it).
func dropTiny(x []float64) []float64 {
	x = slices.Clone(x)
	top := slices.Max(x)
	if !(top > 0) || !finite(top) {
		return x
	}
	var sum float64
	for i := range x {
		if x[i] < 1e-6*top {
			x[i] = 0
		}
		sum += x[i]
	}
	for i := range x {
		x[i] /= sum
	}
	return x
}

// newton polishes a point of the simplex by Newton steps on its support
// (the Hessian by differences of the exact gradient), each kept only when
// it lowers F and stays in the simplex, until iters steps are done or ctx
// ends.
func (o *Objective) newton(ctx context.Context, x []float64, squared bool, iters int) []float64 {
	x = slices.Clone(x)
	k := len(x)
	g := make([]float64, k)
	gj := make([]float64, k)
	f, err := o.Eval(x, squared, g)
	if err != nil {
		return x
	}
	for range iters {
		if ctx.Err() != nil || o.spent() {
			return x
		}
		var sup []int
		for i := range x {
			if x[i] > 0 {
				sup = append(sup, i)
			}
		}
		n := len(sup)
		if n < 2 {
			return x
		}
		// KKT system of the step d on the support: H d + μ 1 = -g, Σ d = 0.
		a := make([][]float64, n+1)
		for r := range a {
			a[r] = make([]float64, n+2)
		}
		for c, j := range sup {
			h := 1e-6 * x[j]
			y := slices.Clone(x)
			y[j] += h
			if _, err := o.Eval(y, squared, gj); err != nil {
				return x
			}
			for r, i := range sup {
				a[r][c] += (gj[i] - g[i]) / h / 2
				a[c][r] += (gj[i] - g[i]) / h / 2
			}
		}
		for r, i := range sup {
			a[r][n], a[n][r], a[r][n+1] = 1, 1, -g[i]
		}
		d, ok := solveDense(a)
		if !ok {
			return x
		}
		t := 1.0
		for c, j := range sup {
			if d[c] < 0 {
				t = min(t, -0.99*x[j]/d[c])
			}
		}
		improved := false
		for range 30 {
			y := slices.Clone(x)
			for c, j := range sup {
				y[j] += t * d[c]
			}
			fy, err := o.Eval(y, squared, nil)
			if err == nil && fy < f {
				x, f, improved = y, fy, true
				break
			}
			t /= 2
		}
		if !improved {
			return x
		}
		if _, err := o.Eval(x, squared, g); err != nil {
			return x
		}
	}
	return x
}

// solveDense solves the square system a[:, :n] z = a[:, n] (n = len(a)) by
// Gaussian elimination with partial pivoting.
func solveDense(a [][]float64) ([]float64, bool) {
	n := len(a)
	for c := range n {
		piv := c
		for r := c + 1; r < n; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[piv][c]) {
				piv = r
			}
		}
		if a[piv][c] == 0 {
			return nil, false
		}
		a[c], a[piv] = a[piv], a[c]
		for r := c + 1; r < n; r++ {
			m := a[r][c] / a[c][c]
			for k := c; k <= n; k++ {
				a[r][k] -= m * a[c][k]
			}
		}
	}
	z := make([]float64, n)
	for r := n - 1; r >= 0; r-- {
		v := a[r][n]
		for k := r + 1; k < n; k++ {
			v -= a[r][k] * z[k]
		}
		z[r] = v / a[r][r]
	}
	return z, true
}
