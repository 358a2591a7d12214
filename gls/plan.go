package gls

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/knowdp/knowdp/query"
)

// Options tunes the solver.
type Options struct {
	// Tolerance is the relative residual of the normal equations the
	// conjugate gradients must reach (Certificate); 0 means 1e-10.
	Tolerance float64
	// MaxIterations bounds the iterations of one solve; 0 means 5000.
	MaxIterations int
	// Preconditioner chooses the preconditioner (default Kronecker).
	Preconditioner Preconditioner
	// Workers bounds the goroutines of Variances; 0 means GOMAXPROCS.
	Workers int
}

func (o Options) withDefaults() (Options, error) {
	if o.Tolerance == 0 {
		o.Tolerance = 1e-10
	}
	if !(o.Tolerance > 0 && o.Tolerance < 1) {
		return o, fmt.Errorf("gls: the tolerance must be in (0, 1), got %v", o.Tolerance)
	}
	if o.MaxIterations == 0 {
		o.MaxIterations = 5000
	}
	if o.MaxIterations < 0 {
		return o, fmt.Errorf("gls: MaxIterations must be >= 0, got %d", o.MaxIterations)
	}
	switch o.Preconditioner {
	case Kronecker, Jacobi, NoPreconditioner:
	default:
		return o, fmt.Errorf("gls: unknown preconditioner %v", o.Preconditioner)
	}
	if o.Workers < 0 {
		return o, fmt.Errorf("gls: Workers must be >= 0, got %d", o.Workers)
	}
	return o, nil
}

// Certificate states how well a solve met the normal equations.
type Certificate struct {
	// Iterations of preconditioned conjugate gradients.
	Iterations int
	// Residual is the relative residual reached, recomputed from the
	// final iterate (not the recurrence): for an estimate ||P(b - N x)|| /
	// (||b|| + ||N x0||), with b = Σ_j M_j^T z_j / v_j and x0 the
	// least-norm table meeting the invariants; for a law ||P q - P N P
	// g|| / ||q||.
	Residual float64
	// Tolerance is the relative residual that was asked for.
	Tolerance float64
}

// measTerm is a measurement over the reduced domain, with its precision
// w = 1/v.
type measTerm struct {
	term query.Term
	w    float64
}

// Plan is a Problem prepared for solving: the domain reduced, every query
// checked to be determined, the preconditioner set up. It depends on the
// structure only; its methods only read it and may be called
// concurrently.
type Plan struct {
	prob    Problem
	opt     Options
	red     []reduction
	shape   []int // the reduced domain
	cells   int
	meas    []measTerm
	inv     []invTerm
	queries []query.Term
	// denseMax is the largest dimension given an explicit basis.
	denseMax int
	axes     []*axis
	lam      [][][]float64 // [measurement][dimension] diagonal in the axis basis
	measSup  []box
	invSup   []box
	pre      *precond
}

// NewPlan checks the problem and prepares its solution: it reduces the
// domain (summing out what no measurement or invariant tells apart),
// builds each dimension's atoms and basis, decides from the structure
// alone that every query is determined (an error names the first that is
// not), and sets up the preconditioner. Costs: O(n_d²) per dimension of
// an explicit basis and per factor that is not a level of its dimension's
// chain, O(n_d³) for explicit bases, and a few passes over the reduced
// domain per measurement and invariant.
func NewPlan(p Problem, opt Options) (*Plan, error) {
	return newPlan(p, opt, defaultDenseMax)
}

func newPlan(p Problem, opt Options, denseMax int) (*Plan, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	opt, err := opt.withDefaults()
	if err != nil {
		return nil, err
	}
	// The plan keeps its own copy of the structure's slices: a caller
	// reusing its Problem must not change a plan in use.
	p.Shape = slices.Clone(p.Shape)
	p.Measurements = slices.Clone(p.Measurements)
	p.Invariants = slices.Clone(p.Invariants)
	p.Queries = slices.Clone(p.Queries)
	for j := range p.Measurements {
		p.Measurements[j].Term = slices.Clone(p.Measurements[j].Term)
	}
	for i := range p.Invariants {
		p.Invariants[i].Term = slices.Clone(p.Invariants[i].Term)
	}
	for q := range p.Queries {
		p.Queries[q].Term = slices.Clone(p.Queries[q].Term)
	}
	pl := &Plan{prob: p, opt: opt, denseMax: denseMax}
	var terms []query.Term
	for _, m := range p.Measurements {
		terms = append(terms, m.Term)
	}
	for _, e := range p.Invariants {
		terms = append(terms, e.Term)
	}
	pl.red = reductions(p.Shape, terms)
	D := len(p.Shape)
	pl.shape = make([]int, D)
	pl.cells = 1
	for d, n := range p.Shape {
		pl.shape[d] = pl.red[d].size(n)
		pl.cells *= pl.shape[d]
	}
	for _, m := range p.Measurements {
		t, _, _ := reduceTerm(m.Term, pl.red)
		pl.meas = append(pl.meas, measTerm{t, 1 / m.Variance})
	}
	for _, e := range p.Invariants {
		t, _, _ := reduceTerm(e.Term, pl.red)
		pl.inv = append(pl.inv, newInvTerm(t))
	}
	for q, x := range p.Queries {
		t, d, ok := reduceTerm(x.Term, pl.red)
		if !ok {
			return nil, fmt.Errorf("gls: %s is not determined: along dimension %d it tells apart values that every measurement and invariant adds together", p.queryName(q), d)
		}
		pl.queries = append(pl.queries, t)
	}
	for d := range D {
		for i := range pl.inv {
			for k := i + 1; k < len(pl.inv); k++ {
				a, b := pl.inv[i].parts[d], pl.inv[k].parts[d]
				if !refines(a, b) && !refines(b, a) {
					return nil, fmt.Errorf("gls: %s and %s: their partitions of dimension %d are not nested (one must refine the other)", p.invName(i), p.invName(k), d)
				}
			}
		}
	}
	if err := pl.buildAxes(); err != nil {
		return nil, err
	}
	for q := range pl.queries {
		if err := pl.determined(pl.queries[q], p.queryName(q)); err != nil {
			return nil, err
		}
	}
	pl.newPrecond(opt.Preconditioner)
	return pl, nil
}

// factorName names the j-th factor of the list passed to newAxis.
func (pl *Plan) factorName(j int) string {
	if j < len(pl.meas) {
		return pl.prob.measName(j)
	}
	return pl.prob.invName(j - len(pl.meas))
}

func (pl *Plan) buildAxes() error {
	D := len(pl.shape)
	// meanDiag[j][d]: the mean of the diagonal of measurement j's Gram
	// along d, standing for the other dimensions in a dimension's
	// weighted Gram.
	meanDiag := make([][]float64, len(pl.meas))
	for j, m := range pl.meas {
		meanDiag[j] = make([]float64, D)
		for d, f := range m.term {
			var s float64
			for _, v := range colSq(f) {
				s += v
			}
			meanDiag[j][d] = s / float64(f.N)
		}
	}
	pl.axes = make([]*axis, D)
	for d, n := range pl.shape {
		var facs []query.Factor
		omega := make([]float64, len(pl.meas))
		for j, m := range pl.meas {
			facs = append(facs, m.term[d])
			omega[j] = m.w
			for e := range D {
				if e != d {
					omega[j] *= meanDiag[j][e]
				}
			}
		}
		for _, it := range pl.inv {
			facs = append(facs, it.term[d])
		}
		ax, err := newAxis(n, facs, omega, pl.denseMax)
		if err != nil {
			var c *conflict
			if errors.As(err, &c) {
				switch {
				case c.i >= 0 && c.k >= 0:
					return fmt.Errorf("gls: dimension %d: %s and %s: %s", d, pl.factorName(c.i), pl.factorName(c.k), c.why)
				case c.i >= 0:
					return fmt.Errorf("gls: dimension %d: %s: %s", d, pl.factorName(c.i), c.why)
				}
			}
			return fmt.Errorf("gls: dimension %d: %w", d, err)
		}
		if n == 1 {
			ax.u[0] = 1
		}
		pl.axes[d] = ax
	}
	pl.lam = make([][][]float64, len(pl.meas))
	for j, m := range pl.meas {
		pl.lam[j] = make([][]float64, D)
		b := make(box, D)
		for d, f := range m.term {
			pl.lam[j][d] = pl.axes[d].diag(f)
			s, exact := pl.axes[d].support(f, pl.lam[j][d])
			if !exact {
				return fmt.Errorf("gls: %s: its %v factor along dimension %d has a row space that is not a sum of the dimension's atoms (it cuts across the other measurements' and invariants' row spaces along that dimension)", pl.prob.measName(j), f.Kind, d)
			}
			// Outside its atoms the factor's Gram is zero; clear the
			// rounding an explicit basis leaves there, which the
			// preconditioner would otherwise divide by.
			for k, a := range pl.axes[d].atomOf {
				if s&(1<<a) == 0 {
					pl.lam[j][d][k] = 0
				}
			}
			b[d] = s
		}
		pl.measSup = append(pl.measSup, b)
	}
	for i, it := range pl.inv {
		b := make(box, D)
		for d, f := range it.term {
			s, exact := pl.axes[d].support(f, pl.axes[d].diag(f))
			if !exact {
				return fmt.Errorf("gls: %s: its factor along dimension %d is not a sum of the dimension's atoms", pl.prob.invName(i), d)
			}
			b[d] = s
		}
		pl.invSup = append(pl.invSup, b)
	}
	return nil
}

// determined reports an error naming the query when t (over the reduced
// domain) is not in the row space of the measurements and invariants.
func (pl *Plan) determined(t query.Term, name string) error {
	q := make(box, len(t))
	for d, f := range t {
		q[d], _ = pl.axes[d].support(f, pl.axes[d].diag(f))
	}
	cover := append(append([]box(nil), pl.measSup...), pl.invSup...)
	cell := uncovered(q, cover)
	if cell == nil {
		return nil
	}
	var parts []string
	for d, a := range cell {
		if pl.shape[d] > 1 {
			parts = append(parts, fmt.Sprintf("dimension %d: %s", d, pl.axes[d].atomDesc[a]))
		}
	}
	where := strings.Join(parts, "; ")
	if where == "" {
		where = "the grand total"
	}
	return fmt.Errorf("gls: %s is not determined by the measurements and invariants: none of them observes its component made of (%s)", name, where)
}

// Shape returns the reduced domain the plan solves over.
func (pl *Plan) Shape() []int { return append([]int(nil), pl.shape...) }

// normal sets out = N x = Σ_j w_j M_j^T M_j x.
func (pl *Plan) normal(x, out []float64, w *kronWork) {
	clear(out)
	for _, m := range pl.meas {
		y := w.apply(m.term, x, false)
		back := w.apply(m.term, y, true)
		for c, v := range back {
			out[c] += m.w * v
		}
	}
}

// op sets out = P N p.
func (pl *Plan) op(p, out []float64, w *kronWork) {
	pl.normal(p, out, w)
	sweep(out, pl.inv, nil, w)
}

// pcg solves P N P u = rhs (rhs in the invariants' null space) from u = 0
// by preconditioned conjugate gradients, to ||rhs - P N u|| <= tol *
// scale, the residual recomputed from u before it is trusted.
func (pl *Plan) pcg(ctx context.Context, rhs, u []float64, scale float64, w *work) (Certificate, error) {
	tol, maxit := pl.opt.Tolerance, pl.opt.MaxIterations
	cert := Certificate{Tolerance: tol}
	clear(u)
	n := len(rhs)
	r := append([]float64(nil), rhs...)
	if scale == 0 {
		return cert, nil
	}
	z, p, q := make([]float64, n), make([]float64, n), make([]float64, n)
	restart := func() float64 {
		pl.applyPrecond(r, z, w)
		copy(p, z)
		return dot(r, z)
	}
	trueResidual := func() float64 {
		pl.op(u, q, &w.kron)
		for c := range r {
			r[c] = rhs[c] - q[c]
		}
		return norm2(r) / scale
	}
	rz := restart()
	cert.Residual = norm2(r) / scale
	for cert.Residual > tol {
		if err := ctx.Err(); err != nil {
			return cert, err
		}
		if cert.Iterations >= maxit {
			return cert, fmt.Errorf("gls: conjugate gradients reached a relative residual of %.3g after %d iterations, not the tolerance %.3g", cert.Residual, cert.Iterations, tol)
		}
		pl.op(p, q, &w.kron)
		pq := dot(p, q)
		cert.Iterations++
		if !(pq > 0) || !(rz > 0) {
			// The search direction carries no curvature: the residual
			// left is rounding; check it.
			cert.Residual = trueResidual()
			if cert.Residual <= tol {
				break
			}
			rz = restart()
			continue
		}
		alpha := rz / pq
		for c := range u {
			u[c] += alpha * p[c]
			r[c] -= alpha * q[c]
		}
		if norm2(r)/scale <= tol {
			cert.Residual = trueResidual()
			if cert.Residual <= tol {
				break
			}
			rz = restart()
			continue
		}
		pl.applyPrecond(r, z, w)
		rzNew := dot(r, z)
		beta := rzNew / rz
		rz = rzNew
		for c := range p {
			p[c] = z[c] + beta*p[c]
		}
	}
	return cert, nil
}

// Estimate is the solution of a plan for one set of answers.
type Estimate struct {
	// Answers holds, per query of the problem, the estimate of its rows
	// (row-major over the term's rows).
	Answers [][]float64
	// Certificate says how well the normal equations were met.
	Certificate Certificate
	x           []float64 // over the reduced domain
	plan        *Plan
}

// Solve computes the estimate from the measurements' answers meas[j] and
// the invariants' exact answers inv[i] (row-major over each term's rows):
// it checks that the invariants agree with each other, starts from the
// least-norm table meeting them (one sweep of projections), and solves the
// normal equations on their null space by preconditioned conjugate
// gradients with Kronecker matrix-vector products, to the plan's
// tolerance (an error otherwise). The answers read are the noisy
// measurements and the public invariants, so the iterations and any
// failure to converge are post-processing. Each iteration costs one
// product and one transposed product per measurement term, one sweep, and
// one preconditioner application (a transform per dimension).
func (pl *Plan) Solve(ctx context.Context, meas, inv [][]float64) (*Estimate, error) {
	p := &pl.prob
	if len(meas) != len(pl.meas) {
		return nil, fmt.Errorf("gls: answers for %d measurements, the problem has %d", len(meas), len(pl.meas))
	}
	if len(inv) != len(pl.inv) {
		return nil, fmt.Errorf("gls: answers for %d invariants, the problem has %d", len(inv), len(pl.inv))
	}
	for j, m := range pl.meas {
		if err := checkValues(meas[j], m.term.Rows()); err != nil {
			return nil, fmt.Errorf("gls: %s: %w", p.measName(j), err)
		}
	}
	for i, it := range pl.inv {
		if err := checkValues(inv[i], it.term.Rows()); err != nil {
			return nil, fmt.Errorf("gls: %s: %w", p.invName(i), err)
		}
	}
	if err := consistent(pl.inv, inv, p.invName); err != nil {
		return nil, err
	}
	w := pl.newWork()
	x0 := make([]float64, pl.cells)
	sweep(x0, pl.inv, inv, &w.kron)
	b := make([]float64, pl.cells)
	for j, m := range pl.meas {
		back := w.kron.apply(m.term, meas[j], true)
		for c, v := range back {
			b[c] += m.w * v
		}
	}
	nx := make([]float64, pl.cells)
	pl.normal(x0, nx, &w.kron)
	rhs := make([]float64, pl.cells)
	for c := range rhs {
		rhs[c] = b[c] - nx[c]
	}
	sweep(rhs, pl.inv, nil, &w.kron)
	// The scale is taken before projecting: when the invariants explain
	// the data, P b and P N x0 are rounding, and so is their ratio.
	scale := norm2(b) + norm2(nx)
	u := make([]float64, pl.cells)
	cert, err := pl.pcg(ctx, rhs, u, scale, w)
	if err != nil {
		return nil, err
	}
	x := x0
	for c, v := range u {
		x[c] += v
	}
	// Rounding leaves the iterate a hair off the invariants; one more
	// sweep puts it back (a change far below the tolerance).
	sweep(x, pl.inv, inv, &w.kron)
	est := &Estimate{Certificate: cert, x: x, plan: pl}
	for _, t := range pl.queries {
		est.Answers = append(est.Answers, t.Apply(x))
	}
	return est, nil
}

// Answer estimates any other query term over the problem's domain, after
// checking from the structure that it is determined.
func (e *Estimate) Answer(t query.Term) ([]float64, error) {
	pl := e.plan
	if err := checkTerm(t, pl.prob.Shape); err != nil {
		return nil, fmt.Errorf("gls: the query: %w", err)
	}
	rt, d, ok := reduceTerm(t, pl.red)
	if !ok {
		return nil, fmt.Errorf("gls: the query is not determined: along dimension %d it tells apart values that every measurement and invariant adds together", d)
	}
	if err := pl.determined(rt, "the query"); err != nil {
		return nil, err
	}
	return rt.Apply(e.x), nil
}

// Completion answers t on this estimate's table even where t is not
// determined: the one solution the conjugate gradients reached (the
// invariants' least-norm table plus the solve from it). Its roll-ups to
// every determined query equal their answers, so it completes a release's
// tables into one finer table from which they all add up (integer rounding
// across hierarchies needs such a table). t must still factor through the
// reduced domain: it may not tell apart values that every measurement,
// invariant and query adds together.
func (e *Estimate) Completion(t query.Term) ([]float64, error) {
	pl := e.plan
	if err := checkTerm(t, pl.prob.Shape); err != nil {
		return nil, fmt.Errorf("gls: the query: %w", err)
	}
	rt, d, ok := reduceTerm(t, pl.red)
	if !ok {
		return nil, fmt.Errorf("gls: along dimension %d the query tells apart values that every measurement, invariant and query adds together", d)
	}
	return rt.Apply(e.x), nil
}
