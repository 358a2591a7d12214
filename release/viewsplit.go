package release

// The optimal split for views across a hierarchy.
//
// The objective is the one the flat workload minimises: the weighted total
// variance Σ_t w_t Σ_cells Var ŷ, data-independent. Across a hierarchy it
// is a sum over the flat residuals T and the tree's nodes of the posterior
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

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/knowdp/knowdp/domain"
	splitplan "github.com/knowdp/knowdp/plan"
	"github.com/knowdp/knowdp/sensitivity"
)

// viewTree is the hierarchy h as the split's objective walks it.
type viewTree struct {
	nodes  []int   // per level 0..L (L the root)
	parent [][]int // per level < L: the parent at the next level
}

// viewResidual is the tree problem of one flat residual T.
type viewResidual struct {
	pi    float64
	exact []bool      // per level: an invariant fixes it
	obs   [][]viewObs // per level: the noisy measurements observing it
	coef  []float64   // per level: c_{T,ℓ}
}

type viewObs struct {
	j int     // measurement
	m float64 // m_{jT}
}

// viewObjective is F as a function of the measurements' shares.
type viewObjective struct {
	tree  viewTree
	res   []viewResidual
	gauss bool
	// unit[j] is the precision of measurement j per unit of its share
	// (Gaussian, linear in the share) or of its share squared (Laplace).
	unit []float64
	// Buffers of the passes, per level (an objective is not for
	// concurrent use).
	w, P       [][]complex128
	winf, pinf [][]bool
	childW     [][]complex128
	childInf   [][]int
	// evals counts the evaluations of F; the searches stop once it
	// reaches maxEvals (0: no cap), the budget of workBound.
	evals, maxEvals int
}

func (p *viewPlan) viewObjective() *viewObjective {
	s, h := p.s, p.h
	L := s.NumLevels(h)
	o := &viewObjective{gauss: p.mech == MechanismGaussian}
	o.tree.nodes = make([]int, L+1)
	o.tree.parent = make([][]int, L)
	for l := range L {
		o.tree.nodes[l] = s.LevelSize(h, l)
		o.tree.parent[l] = make([]int, o.tree.nodes[l])
		for i := range o.tree.parent[l] {
			if l < L-1 {
				o.tree.parent[l][i] = s.Parent(h, l, i)
			}
		}
	}
	o.tree.nodes[L] = 1
	flat := func(v domain.View) domain.Cuboid { return (v.Dims &^ (1 << h)) &^ sensitivity.TrivialDims(s) }
	size := func(c domain.Cuboid) float64 { return float64(s.CuboidSize(c)) }
	var ts []domain.Cuboid
	for _, t := range p.tables {
		if t.Public {
			continue
		}
		st := flat(t.View)
		for a := st; ; a = (a - 1) & st {
			if !slices.Contains(ts, a) {
				ts = append(ts, a)
			}
			if a == 0 {
				break
			}
		}
	}
	for _, m := range p.meas {
		if o.gauss {
			o.unit = append(o.unit, 2*p.rho.Float64()/(m.l2.Value*m.l2.Value))
		} else {
			e := p.budget.Float64() / float64(m.sens)
			o.unit = append(o.unit, e*e/2)
		}
	}
	for _, a := range ts {
		r := viewResidual{pi: 1, exact: make([]bool, L+1), obs: make([][]viewObs, L+1), coef: make([]float64, L+1)}
		for _, d := range a.Dims() {
			r.pi *= 1 - 1/float64(s.Size(d))
		}
		for _, e := range p.exact {
			if a.AncestorOf(flat(e)) {
				r.exact[p.level(e)] = true
			}
		}
		for j, m := range p.meas {
			if sj := flat(m.v); a.AncestorOf(sj) {
				l := p.level(m.v)
				r.obs[l] = append(r.obs[l], viewObs{j: j, m: size(sj &^ a)})
			}
		}
		for _, t := range p.tables {
			if st := flat(t.View); !t.Public && a.AncestorOf(st) {
				sc := size(st &^ a)
				r.coef[p.level(t.View)] += t.Weight * size(st) / (sc * sc)
			}
		}
		o.res = append(o.res, r)
	}
	return o
}

// cost returns the node visits of one evaluation of F.
func (o *viewObjective) cost() int {
	n := 0
	for _, c := range o.tree.nodes {
		n += c
	}
	return max(1, n*len(o.res))
}

// splitSteps returns the exponentiated-gradient steps of a descent and the
// Newton steps of a polish, for k measurements: a descent is bounded to
// about 10^8 node visits however large the hierarchy (but takes at least
// 20 steps), a polish (whose step evaluates F (k+1)² times) to about 10^9
// (at least 3 steps).
func (o *viewObjective) splitSteps(k int) (descent, newton int) {
	c := float64(o.cost())
	descent = int(min(300, max(20, 1e8/(c*float64(k+1)))))
	newton = int(min(20, max(3, 1e9/(c*float64((k+1)*(k+1))))))
	return descent, newton
}

// splitEvals returns the budget of evaluations of F of optimalFractions
// for k measurements: per descent step a gradient (k+1 evaluations) and up
// to 16 of the line search (it takes 1 to 3 when it succeeds); per Newton
// step k+1 gradients and up to 30 of the line search; one descent and
// polish for Gaussian shares, four for Laplace shares, and the final
// evaluations.
func (o *viewObjective) splitEvals(k int) int {
	descent, newton := o.splitSteps(k)
	searches := 4
	if o.gauss {
		searches = 1
	}
	perSearch := descent*(k+1+16) + newton*((k+1)*(k+1)+30)
	return searches*perSearch + 4*(k+2)
}

// nodeVisitWork is the work of one node visit of the variance passes in
// plan.Result.Work's unit, so that the work of both splits is counted in
// one unit: a visit (complex arithmetic and the tree's bookkeeping) takes
// about 14 ns, a unit of the flat split about 2.4 ns
// (BenchmarkSplitWorkUnits, 2-core development machine).
const nodeVisitWork = 6

// work returns the work done so far, in plan.Result.Work's unit.
func (o *viewObjective) work() float64 {
	return float64(o.evals) * float64(o.cost()) * nodeVisitWork
}

// workBound returns the most work optimalFractions does for k
// measurements (plan.Result.Work's unit): its budget of evaluations of F
// times the node visits of one.
func (o *viewObjective) workBound(k int) float64 {
	return float64(o.splitEvals(k)) * float64(o.cost()) * nodeVisitWork
}

// spent reports whether the evaluations reached their budget.
func (o *viewObjective) spent() bool { return o.maxEvals > 0 && o.evals >= o.maxEvals }

// errUndetermined says that a split leaves a table without an estimate.
var errUndetermined = errors.New("a table is not determined by the measurements")

// errNotFinite says that the objective or its gradient left float64 (an
// infinite or undefined value): weights or noise spanning too many orders
// of magnitude.
var errNotFinite = errors.New("the weighted total variance is not finite (weights too large or too far apart)")

// finite reports whether v is neither infinite nor NaN.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// value returns F at the given precision scale of each measurement
// (complex, for the complex-step derivative).
func (o *viewObjective) value(prec []complex128) (complex128, error) {
	o.evals++
	t := o.tree
	L := len(t.nodes) - 1
	var total complex128
	if o.w == nil {
		for l := range L + 1 {
			n := t.nodes[l]
			o.w, o.winf = append(o.w, make([]complex128, n)), append(o.winf, make([]bool, n))
			o.P, o.pinf = append(o.P, make([]complex128, n)), append(o.pinf, make([]bool, n))
			o.childW, o.childInf = append(o.childW, make([]complex128, n)), append(o.childInf, make([]int, n))
		}
	}
	w, winf, P, pinf, childW, childInf := o.w, o.winf, o.P, o.pinf, o.childW, o.childInf
	for _, r := range o.res {
		for l := range L + 1 {
			clear(childW[l])
			clear(childInf[l])
		}
		for l := range L + 1 {
			var lambda complex128
			for _, ob := range r.obs[l] {
				lambda += prec[ob.j] / complex(ob.m, 0)
			}
			for i := range t.nodes[l] {
				W, wInf := childW[l][i], l == 0 || childInf[l][i] > 0
				switch {
				case r.exact[l]:
					w[l][i], winf[l][i] = 0, false
				case lambda == 0 && wInf:
					winf[l][i] = true
				case lambda == 0:
					w[l][i], winf[l][i] = W, false
				case wInf:
					w[l][i], winf[l][i] = 1/lambda, false
				case W == 0:
					w[l][i], winf[l][i] = 0, false
				default:
					w[l][i], winf[l][i] = W/(1+lambda*W), false
				}
				if l < L {
					p := t.parent[l][i]
					if winf[l][i] {
						childInf[l+1][p]++
					} else {
						childW[l+1][p] += w[l][i]
					}
				}
			}
		}
		P[L][0], pinf[L][0] = w[L][0], winf[L][0]
		for l := L - 1; l >= 0; l-- {
			for i := range t.nodes[l] {
				p := t.parent[l][i]
				W := childW[l+1][p]
				switch {
				case pinf[l+1][p] || childInf[l+1][p] >= 2:
					P[l][i], pinf[l][i] = w[l][i], winf[l][i]
				case childInf[l+1][p] == 1 && winf[l][i]:
					P[l][i], pinf[l][i] = P[l+1][p]+W, false
				case childInf[l+1][p] == 1:
					P[l][i], pinf[l][i] = w[l][i], false
				case W == 0:
					P[l][i], pinf[l][i] = 0, false
				default:
					g := w[l][i] / W
					P[l][i], pinf[l][i] = w[l][i]+g*g*(P[l+1][p]-W), false
				}
			}
		}
		for l := range L + 1 {
			if r.coef[l] == 0 {
				continue
			}
			var sum complex128
			for i := range t.nodes[l] {
				if pinf[l][i] {
					return 0, errUndetermined
				}
				sum += P[l][i]
			}
			total += complex(r.coef[l]*r.pi, 0) * sum
		}
	}
	return total, nil
}

// eval returns F and its gradient in the shares x (precision unit·x, or
// unit·x² for Laplace unless squared is false).
func (o *viewObjective) eval(x []float64, squared bool, grad []float64) (float64, error) {
	prec := make([]complex128, len(x))
	for j, xj := range x {
		v := xj
		if squared {
			v = xj * xj
		}
		prec[j] = complex(o.unit[j]*v, 0)
	}
	f, err := o.value(prec)
	if err == nil && !finite(real(f)) {
		err = errNotFinite
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
		prec[j] = complex(o.unit[j], 0) * d
		fj, err := o.value(prec)
		if err != nil {
			return 0, err
		}
		if grad[j] = imag(fj) / h; !finite(grad[j]) {
			return 0, errNotFinite
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
func (o *viewObjective) descend(ctx context.Context, x []float64, squared bool, tol float64, steps int) ([]float64, float64, float64, error) {
	x = slices.Clone(x)
	g := make([]float64, len(x))
	f, err := o.eval(x, squared, g)
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
			fn, err := o.eval(next, squared, nil)
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
		if f, err = o.eval(x, squared, g); err != nil {
			return nil, 0, 0, err
		}
		eta *= 2
	}
	return x, f, fwGap(x, g), nil
}

// optimalFractions chooses the shares that minimise the weighted total
// variance, with the certificate of viewsplit.go's file comment. It fails
// with ctx's error when ctx ends first, and when the objective is not
// finite.
func (p *viewPlan) optimalFractions(ctx context.Context) ([]float64, error) {
	x, err := p.optimalFractionsCtx(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("release: optimal split: %w", ctx.Err())
		}
		return nil, err
	}
	var sum float64
	for _, v := range x {
		if !(v >= 0) || !finite(v) {
			return nil, fmt.Errorf("release: optimal split: %w", errNotFinite)
		}
		sum += v
	}
	if math.Abs(sum-1) > 1e-9 || !finite(p.objective) || p.cert == nil || !finite(p.cert.Bound) || !finite(p.cert.Gap) {
		return nil, fmt.Errorf("release: optimal split: %w", errNotFinite)
	}
	return x, nil
}

// optimalFractionsCtx is optimalFractions without the final checks. Its
// work is added to the context's plan.Meter, whatever the outcome.
func (p *viewPlan) optimalFractionsCtx(ctx context.Context) ([]float64, error) {
	o := p.viewObjective()
	defer func() { splitplan.MeterFrom(ctx).Add(o.work()) }()
	k := len(p.meas)
	equal := make([]float64, k)
	for i := range equal {
		equal[i] = 1 / float64(k)
	}
	// A rough descent, then Newton steps polish it, within a budget of
	// evaluations known before they start (workBound).
	const tol = 1e-4
	steps, newtonSteps := o.splitSteps(k)
	o.maxEvals = o.splitEvals(k)
	if o.gauss {
		x, _, _, err := o.descend(ctx, equal, false, tol, steps)
		if err != nil {
			return nil, fmt.Errorf("release: optimal split: %w", err)
		}
		// The certificate is for the point used: shares too small to
		// matter are dropped first, then Newton steps on the rest.
		x = o.newton(ctx, dropTiny(x), false, newtonSteps)
		g := make([]float64, k)
		f, err := o.eval(x, false, g)
		if err != nil {
			return nil, fmt.Errorf("release: optimal split: %w", err)
		}
		gap := max(0, fwGap(x, g))
		p.cert = &SplitCertificate{Bound: f - gap, Gap: gap / f, Global: gap <= 1e-6*f, Work: o.work(),
			Method: "exponentiated-gradient descent on the convex zCDP objective (exact derivatives by complex step); the bound is the Frank-Wolfe duality gap"}
		p.objective = f
		return x, nil
	}
	// Laplace: the convex relaxation in y = x² gives the bound.
	y, _, _, err := o.descend(ctx, equal, false, tol, steps)
	if err != nil {
		return nil, fmt.Errorf("release: optimal split: %w", err)
	}
	y = o.newton(ctx, dropTiny(y), false, newtonSteps)
	gy := make([]float64, k)
	fy, err := o.eval(y, false, gy)
	if err != nil {
		return nil, fmt.Errorf("release: optimal split: %w", err)
	}
	bound := fy - fwGap(y, gy)
	starts := [][]float64{equal}
	if sp, err := p.spineFractions(); err == nil {
		starts = append(starts, sp)
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
			return nil, fmt.Errorf("release: optimal split: %w", err)
		}
		x = o.newton(ctx, dropTiny(x), true, newtonSteps)
		f, err := o.eval(x, true, nil)
		if err != nil {
			return nil, fmt.Errorf("release: optimal split: %w", err)
		}
		if f < bestF {
			best, bestF = x, f
		}
	}
	best = dropTiny(best)
	if bestF, err = o.eval(best, true, nil); err != nil {
		return nil, fmt.Errorf("release: optimal split: %w", err)
	}
	gap := max(0, (bestF-bound)/bestF)
	p.cert = &SplitCertificate{Bound: bound, Gap: gap, Global: gap <= 1e-6, Work: o.work(),
		Method: "local exponentiated-gradient searches from the equal, spine and relaxed splits (the Laplace objective is not convex in the shares); " +
			"the bound is the minimum of the convex relaxation in the squared shares, less its Frank-Wolfe gap"}
	p.objective = bestF
	return best, nil
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
func (o *viewObjective) newton(ctx context.Context, x []float64, squared bool, iters int) []float64 {
	x = slices.Clone(x)
	k := len(x)
	g := make([]float64, k)
	gj := make([]float64, k)
	f, err := o.eval(x, squared, g)
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
			if _, err := o.eval(y, squared, gj); err != nil {
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
			fy, err := o.eval(y, squared, nil)
			if err == nil && fy < f {
				x, f, improved = y, fy, true
				break
			}
			t /= 2
		}
		if !improved {
			return x
		}
		if _, err := o.eval(x, squared, g); err != nil {
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
