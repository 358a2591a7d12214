package release

// Releases of prefix sums and ranges (tables that publish, along an ordered
// dimension, every prefix sum or every contiguous range; tablequery.go).
//
// Planning. The tables are a workload of query terms; package strategy
// chooses what to measure (Optimize: ResidualPlanner's residuals for
// Gaussian noise, the marginal lattice for Laplace noise, and for ordered
// dimensions Kronecker products of per-dimension factors, hierarchical
// intervals and HDMM's p-Identity, alone or one per table), each
// measurement calibrated to its sensitivity: for add/remove neighbours the
// largest column norm, under invariants the invariant-aware value of
// sensitivity.TermL1Sensitivity and TermL2Sensitivity (the residuals the
// invariants fix are then left out, and the families that do not work in
// the residual basis are not searched).
//
// Exact arithmetic. A measured factor with real entries (p-Identity's
// scaled columns) is quantised to integers (at most 2^12 in magnitude): the
// measured queries are then integer combinations of counts, computed
// exactly, on the noise's grid, and their sensitivity is exact; the
// objective is recomputed for the quantised strategy. Helmert residuals
// are measured as package contrast measures them.
//
// Estimate. One generalised least-squares estimate of the base table from
// every measurement, subject to the invariants (package gls, certified
// residual); every table's queries are answered from it, so all agree with
// each other and with the invariants. Each query's error variance is exact
// (gls.Plan.Variances, from the structure alone), and its margin of error
// is 1.645 standard deviations. The objective is the weighted sum of every
// query's variance: each query counts once, as HDMM's expected error does.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"

	"github.com/knowdp/knowdp/contrast"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate"
	"github.com/knowdp/knowdp/gls"
	"github.com/knowdp/knowdp/internal/tensor"
	"github.com/knowdp/knowdp/moe"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/query"
	"github.com/knowdp/knowdp/sensitivity"
	"github.com/knowdp/knowdp/sidecar"
	"github.com/knowdp/knowdp/strategy"
)

// quantBits bounds a quantised factor's entries: |entry| <= 2^quantBits.
const quantBits = 16

// rangeMeasurement is one measured query term.
type rangeMeasurement struct {
	term    query.Term    // over the whole domain
	support domain.Cuboid // the dimensions where it is not a total
	resid   bool          // Helmert contrasts (residual.go); else integer rows
	l1, l2  float64
	rule    string
	desc    string
	queries string // desc, or "" when the measurement is a cuboid's cells
	share   privacy.Epsilon
	rho     privacy.Rho
	lap     noise.Laplace
	gauss   noise.Gaussian
	rn      contrast.Noise
	v       float64 // per-row noise variance (per normalised contrast)
}

// rangePlan is a release of prefix and range tables, decided before any
// data is read.
type rangePlan struct {
	s           *domain.Schema
	spec        Spec
	exact       []domain.Cuboid
	tables      []Table
	terms       []query.Term
	meas        []rangeMeasurement
	solver      *gls.Plan
	queries     []int // the tables the solver estimates
	objective   float64
	family      string
	lower       *sidecar.Bound
	conditional bool
}

// planRanges plans a release with prefix or range tables (qs: one query
// per table). Every error is decided by the schema and the spec alone, but
// for ctx's.
func planRanges(ctx context.Context, s *domain.Schema, spec Spec, qs []TableQuery) (*rangePlan, error) {
	gaussian := spec.Mechanism == MechanismGaussian
	switch {
	case spec.Measure != nil:
		return nil, errors.New("release: a list of views to measure is not supported with prefix or range tables: the strategy chooses the measurements")
	case spec.Strategy != MeasureBest:
		return nil, fmt.Errorf("release: prefix and range tables are planned by the strategy best (the strategy %v measures cuboids, which answers ranges far worse)", spec.Strategy)
	case spec.Split != SplitOptimal && spec.Split != SplitAuto:
		return nil, fmt.Errorf("release: prefix and range tables take the optimal split (the strategy chooses the shares with the measurements), not %v", spec.Split)
	case spec.NonNegative || spec.Integer:
		return nil, errors.New("release: non-negative or integer counts are not available with prefix or range tables (their queries overlap)")
	case spec.KeepMeasurements:
		return nil, errors.New("release: saving the measurements (--measurements) is not available with prefix or range tables yet")
	case spec.Sensitivity != 0:
		return nil, errors.New("release: a given sensitivity (--sensitivity) applies to cuboid measurements; prefix and range tables are calibrated to the sensitivities knowdp computes")
	case spec.Weights != nil && len(spec.Weights) != len(spec.Tables):
		return nil, fmt.Errorf("release: %d weights for %d tables", len(spec.Weights), len(spec.Tables))
	case gaussian && !spec.Epsilon.IsZero():
		return nil, errors.New("release: a Gaussian release is calibrated to rho; leave epsilon unset")
	case gaussian && !(spec.Delta > 0 && spec.Delta < 1):
		return nil, fmt.Errorf("release: a Gaussian release states its equivalent (eps, delta) guarantee at a delta in (0, 1), got %v", spec.Delta)
	case !gaussian && (!spec.Rho.IsZero() || spec.Delta != 0):
		return nil, errors.New("release: rho and delta apply to Gaussian releases only")
	}
	p := &rangePlan{s: s, spec: spec}
	trivial := sensitivity.TrivialDims(s)
	for i, e := range spec.Exact {
		if !e.Flat() {
			return nil, fmt.Errorf("release: exact view %d (%s): with prefix or range tables the invariants are cuboids at the finest levels", i+1, s.FormatView(e))
		}
		if !slices.Contains(p.exact, e.Dims) {
			p.exact = append(p.exact, e.Dims)
		}
	}
	for i, v := range spec.Tables {
		if !v.Flat() {
			return nil, fmt.Errorf("release: table %d (%s): a release with prefix or range tables takes tables at the finest levels", i+1, s.FormatView(v))
		}
		for j := range i {
			if spec.Tables[j] == v && qs[j] == qs[i] {
				return nil, fmt.Errorf("release: table %s (%v) is requested twice (tables %d and %d)", s.FormatView(v), qs[i].Kind, j+1, i+1)
			}
		}
		w, err := weightOf(spec.Weights, i, "table "+s.FormatView(v))
		if err != nil {
			return nil, err
		}
		t := Table{Cuboid: v.Dims, Weight: w, Query: qs[i]}
		for _, e := range p.exact {
			if (v.Dims &^ trivial).AncestorOf(e) {
				t.Public, t.SensitivityRule = true, fmt.Sprintf("public: computable from exact cuboid %s", s.Format(e))
				break
			}
		}
		p.tables = append(p.tables, t)
		p.terms = append(p.terms, TableTerm(s, v, qs[i]))
	}
	var w query.Workload
	for i, t := range p.tables {
		if !t.Public {
			w = append(w, query.Weighted{Term: p.terms[i], Weight: t.Weight})
		}
	}
	if len(w) > 0 {
		switch {
		case gaussian && spec.Rho.IsZero():
			return nil, errors.New("release: rho must be set (> 0)")
		case !gaussian && !(spec.Epsilon.Float64() > 0):
			return nil, errors.New("release: epsilon must be set (> 0)")
		}
		if err := p.chooseStrategy(ctx, w); err != nil {
			return nil, err
		}
	}
	if err := p.buildSolver(); err != nil {
		return nil, err
	}
	if err := p.errors(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// chooseStrategy runs package strategy on the workload and turns its
// measurements into exact ones with their noise.
func (p *rangePlan) chooseStrategy(ctx context.Context, w query.Workload) error {
	s, spec := p.s, p.spec
	gaussian := spec.Mechanism == MechanismGaussian
	mech, budget := strategy.Laplace, spec.Epsilon.Float64()
	if gaussian {
		mech, budget = strategy.Gaussian, spec.Rho.Float64()
	}
	opt := strategy.Options{MaxWork: latticeMaxWork}
	if len(p.exact) > 0 {
		opt.Sensitivity = func(t query.Term) (float64, float64, error) {
			l1, err := sensitivity.TermL1Sensitivity(s, p.exact, t)
			if err != nil {
				return 0, 0, err
			}
			l2, err := sensitivity.TermL2Sensitivity(s, p.exact, t)
			if err != nil {
				return 0, 0, err
			}
			return l1.Value, l2.Value, nil
		}
		opt.Known = func(a uint64) bool {
			for _, e := range p.exact {
				if domain.Cuboid(a).AncestorOf(e) {
					return true
				}
			}
			return false
		}
	}
	st, err := strategy.Optimize(ctx, s.Sizes(), w, mech, budget, opt)
	if err != nil {
		return fmt.Errorf("release: strategy: %w", err)
	}
	p.family = st.Family
	if st.LowerBound.Value > 0 {
		p.lower = &sidecar.Bound{Value: st.LowerBound.Value, Over: st.LowerBound.Over, Method: st.LowerBound.Method}
	}
	total := spec.Epsilon.Steps()
	if gaussian {
		total = spec.Rho.Steps()
	}
	for _, m := range st.Measurements {
		rm, err := p.exactMeasurement(m.Term)
		if err != nil {
			return err
		}
		steps := int64(math.Floor(m.Share * float64(total)))
		if steps <= 0 {
			return fmt.Errorf("release: the budget is too small to share among %d measurements", len(st.Measurements))
		}
		if gaussian {
			if rm.rho, err = privacy.RhoFromSteps(steps); err != nil {
				return fmt.Errorf("release: %w", err)
			}
			if rm.resid {
				rm.rn, err = contrast.NewNoise(s.SubSizesOf(rm.support), rm.l2, rm.rho.Float64())
				if err != nil {
					return fmt.Errorf("release: %s: %w", rm.desc, err)
				}
				rm.v = rm.rn.Variance()
			} else {
				if rm.gauss, err = noise.NewGaussian(rm.l2*(1+contrast.SensitivityMargin), rm.rho.Float64()); err != nil {
					return fmt.Errorf("release: %s: %w", rm.desc, err)
				}
				rm.v = rm.gauss.Variance()
			}
		} else {
			if rm.share, err = privacy.NewEpsilon(float64(steps) * privacy.EpsilonStep); err != nil {
				return fmt.Errorf("release: %w", err)
			}
			if rm.lap, err = noise.NewLaplace(rm.l1*(1+contrast.SensitivityMargin), rm.share.Float64()); err != nil {
				return fmt.Errorf("release: %s: %w", rm.desc, err)
			}
			rm.v = rm.lap.Variance()
		}
		p.meas = append(p.meas, rm)
	}
	return nil
}

// exactMeasurement returns the measurement of term t: Helmert contrasts
// (residual.go) when its factors are residuals and totals, otherwise its
// factors quantised to integers, with its sensitivities.
func (p *rangePlan) exactMeasurement(t query.Term) (rangeMeasurement, error) {
	s := p.s
	var rm rangeMeasurement
	resid := false
	for i, f := range t {
		if f.Kind == query.Residual {
			resid = true
		}
		if f.Kind != query.Total {
			rm.support |= 1 << i
		}
	}
	rm.term = make(query.Term, len(t))
	var parts []string
	for i, f := range t {
		switch {
		case resid && f.Kind != query.Residual && f.Kind != query.Total:
			return rm, fmt.Errorf("release: internal: a measurement mixes Helmert contrasts with %v", f.Kind)
		case f.Kind == query.Matrix:
			q, err := quantise(f)
			if err != nil {
				return rm, fmt.Errorf("release: dimension %s: %w", s.Dim(i).Name, err)
			}
			rm.term[i] = q
		default:
			rm.term[i] = f
		}
		if f.Kind != query.Total {
			parts = append(parts, s.Dim(i).Name+": "+describeFactor(rm.term[i]))
		}
	}
	rm.resid = resid
	if len(parts) == 0 {
		parts = []string{"the grand total"}
	}
	rm.desc = strings.Join(parts, "; ")
	cells := true
	for _, f := range rm.term {
		cells = cells && (f.Kind == query.Identity || f.Kind == query.Total)
	}
	if !cells {
		rm.queries = rm.desc
	}
	if len(p.exact) == 0 {
		rm.l1, rm.l2 = strategy.AddRemove(rm.term)
		rm.rule = "no background knowledge: one row added or removed moves one cell; the largest column norm of the queries' matrix"
		return rm, nil
	}
	l1, err := sensitivity.TermL1Sensitivity(s, p.exact, rm.term)
	if err != nil {
		return rm, fmt.Errorf("release: %s: %w", rm.desc, err)
	}
	l2, err := sensitivity.TermL2Sensitivity(s, p.exact, rm.term)
	if err != nil {
		return rm, fmt.Errorf("release: %s: %w", rm.desc, err)
	}
	rm.l1, rm.l2 = l1.Value, l2.Value
	rm.rule = l1.Rule
	if p.spec.Mechanism == MechanismGaussian {
		rm.rule = l2.Rule
	}
	if !(rm.l1 > 0 && rm.l2 > 0) {
		return rm, fmt.Errorf("release: internal: %s is known exactly (%s) but was planned", rm.desc, rm.rule)
	}
	return rm, nil
}

// quantise returns a matrix factor with integer entries of at most
// 2^quantBits in magnitude: f itself when its entries are integers,
// otherwise f scaled by a power of two and rounded (measuring it answers
// the scaled queries exactly; the strategy's error is recomputed for it).
func quantise(f query.Factor) (query.Factor, error) {
	top := 0.0
	integral := true
	for _, v := range f.M {
		top = max(top, math.Abs(v))
		integral = integral && v == math.Trunc(v) && math.Abs(v) <= 1<<quantBits
	}
	if integral {
		return f, nil
	}
	if !(top > 0) {
		return query.Factor{}, errors.New("a measured factor is zero")
	}
	_, e := math.Frexp(top) // top < 2^e
	m := make([]float64, len(f.M))
	for i, v := range f.M {
		m[i] = math.Round(math.Ldexp(v, quantBits-e))
	}
	return query.NewMatrix(f.Rows(), f.N, m)
}

// describeFactor names a measured factor for the sidecar.
func describeFactor(f query.Factor) string {
	switch f.Kind {
	case query.Identity:
		return "identity"
	case query.Residual:
		return fmt.Sprintf("Helmert contrasts (%d rows)", f.Rows())
	case query.Prefix:
		return "prefix sums"
	case query.Ranges:
		return "every range"
	case query.Matrix:
		if intervals(f) {
			return fmt.Sprintf("hierarchical intervals (%d rows)", f.Rows())
		}
		return fmt.Sprintf("p-Identity: the identity and %d weighted sums, integer weights", f.Rows()-f.N)
	}
	return f.Kind.String()
}

// intervals reports whether every row of a 0/1 matrix is one contiguous
// run of ones.
func intervals(f query.Factor) bool {
	for r := range f.Rows() {
		row := f.M[r*f.N : (r+1)*f.N]
		runs := 0
		for j, v := range row {
			if v != 0 && v != 1 {
				return false
			}
			if v == 1 && (j == 0 || row[j-1] == 0) {
				runs++
			}
		}
		if runs != 1 {
			return false
		}
	}
	return true
}

// buildSolver sets the estimate's structure; a table it cannot determine
// is refused here, before any data.
func (p *rangePlan) buildSolver() error {
	s := p.s
	prob := gls.Problem{Shape: s.Sizes()}
	for _, m := range p.meas {
		prob.Measurements = append(prob.Measurements, gls.Measurement{Name: m.desc, Term: m.term, Variance: m.v})
	}
	for _, e := range p.exact {
		prob.Invariants = append(prob.Invariants, gls.Invariant{Name: s.Format(e), Term: s.Term(domain.ViewOf(e))})
	}
	p.queries = p.queries[:0]
	for i, t := range p.tables {
		if t.Public {
			continue
		}
		prob.Queries = append(prob.Queries, gls.Query{Name: s.Format(t.Cuboid), Term: p.terms[i]})
		p.queries = append(p.queries, i)
	}
	if len(prob.Queries) == 0 {
		return nil
	}
	solver, err := gls.NewPlan(prob, gls.Options{})
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	p.solver = solver
	return nil
}

// errors sets every table's per-query variance and margin of error, and the
// objective, from the structure alone.
func (p *rangePlan) errors(ctx context.Context) error {
	for q, i := range p.queries {
		t := &p.tables[i]
		vars, err := p.solver.Variances(ctx, q)
		if err != nil {
			return fmt.Errorf("release: %w", err)
		}
		t.MOE90s, t.absErrSum, t.moeSum = make([]float64, len(vars.Values)), 0, 0
		for c, v := range vars.Values {
			sd := math.Sqrt(max(v, 0))
			t.MOE90s[c] = moe.Z95 * sd
			t.moeSum += t.MOE90s[c]
			t.absErrSum += sd * math.Sqrt(2/math.Pi)
			t.Variance = max(t.Variance, v)
		}
		t.MOE90 = slices.Max(t.MOE90s)
		p.objective += t.Weight * sum(vars.Values)
	}
	for i := range p.tables {
		if t := &p.tables[i]; t.Public {
			n := p.terms[i].Rows()
			t.MOE90s, t.absErrSum, t.moeSum = make([]float64, n), 0, 0
		}
	}
	return nil
}

// needs lists the invariants, then the cuboids the measurements are
// computed from (each measurement's support).
func (p *rangePlan) needs() []domain.View {
	var out []domain.View
	for _, e := range p.exact {
		out = append(out, domain.ViewOf(e))
	}
	for _, m := range p.meas {
		if v := domain.ViewOf(m.support); !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// newRelease returns the release the plan describes before any counts.
func (p *rangePlan) newRelease(seeded bool) (*Release, error) {
	s, spec := p.s, p.spec
	rel := &Release{
		Schema:          s,
		Tables:          slices.Clone(p.tables),
		Budget:          spec.Epsilon.Float64(),
		Mechanism:       spec.Mechanism,
		Split:           SplitOptimal,
		Strategy:        MeasureBest,
		Objective:       p.objective,
		LowerBound:      p.lower,
		Neighbours:      neighbours(s, p.exact),
		Conditional:     p.conditional,
		Seeded:          seeded,
		DomainsFromData: spec.DomainsFromData,
		family:          p.family,
	}
	for _, e := range p.exact {
		rel.Invariants = append(rel.Invariants, estimate.Invariant{Cuboid: e})
	}
	var spent privacy.Budget
	for _, m := range p.meas {
		x := Measurement{Cuboid: m.support, Queries: m.queries, Residual: m.resid}
		if spec.Mechanism == MechanismGaussian {
			spent = privacy.Sequential(spent, privacy.Concentrated(m.rho))
			x.RhoShare, x.L2Sensitivity, x.L2Rule = m.rho.Float64(), m.l2, m.rule
			if m.resid {
				x.Sigma, x.Grid = m.rn.Sigma(), m.rn.Grid()
			} else {
				x.Sigma, x.Grid = m.gauss.Sigma(), m.gauss.Grid()
			}
		} else {
			spent = privacy.Sequential(spent, privacy.Pure(m.share))
			x.Share, x.Scale, x.Grid, x.SensitivityRule = m.share.Float64(), m.lap.Scale(), m.lap.Grid(), m.rule
			x.Sensitivity = int(math.Ceil(m.l1))
			x.L1Sensitivity = m.l1
		}
		rel.Measurements = append(rel.Measurements, x)
	}
	if err := rel.stateSpent(spent, spec.Mechanism, spec.Rho, spec.Delta); err != nil {
		return nil, err
	}
	return rel, nil
}

// run draws the planned release from the exact counts of the views needs
// lists: noise on every measurement (measurement k from the (k+1)-th Split
// of r), then the one estimate.
func (p *rangePlan) run(ctx context.Context, counts map[domain.View][]float64, r *noise.Rand) (*Release, error) {
	s := p.s
	if err := checkCounts(s, p.needs(), counts, true); err != nil {
		return nil, err
	}
	rel, err := p.newRelease(r.Seeded())
	if err != nil {
		return nil, err
	}
	inv := make([][]float64, len(p.exact))
	for i, e := range p.exact {
		x := counts[domain.ViewOf(e)]
		for c, n := range x {
			if !(n >= 0) || math.IsInf(n, 0) {
				return nil, fmt.Errorf("release: exact cuboid %s: cell %d is %v; invariants are finite, non-negative counts", s.Format(e), c, n)
			}
		}
		inv[i] = slices.Clone(x)
		rel.Invariants[i].Counts = inv[i]
	}
	noisy := make([][]float64, len(p.meas))
	for k, m := range p.meas {
		rk := r.Split()
		x := counts[domain.ViewOf(m.support)]
		if m.resid {
			if noisy[k], err = m.rn.Measure(ctx, x, rk); err != nil {
				return nil, fmt.Errorf("release: %s: %w", m.desc, err)
			}
			continue
		}
		noisy[k] = integerAnswers(subTerm(m.term, m.support), s.SubSizesOf(m.support), x)
		var d noise.Adder = m.lap
		if p.spec.Mechanism == MechanismGaussian {
			d = m.gauss
		}
		if err := noise.AddParallel(ctx, d, rk, noisy[k]); err != nil {
			return nil, fmt.Errorf("release: %s: %w", m.desc, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.solver != nil {
		est, err := p.solver.Solve(ctx, noisy, inv)
		if err != nil {
			return nil, fmt.Errorf("release: %w", err)
		}
		rel.solve = &est.Certificate
		for q, i := range p.queries {
			rel.Tables[i].Counts = est.Answers[q]
		}
	}
	for i := range rel.Tables {
		t := &rel.Tables[i]
		if !t.Public {
			continue
		}
		for k, e := range p.exact {
			if (t.Cuboid &^ sensitivity.TrivialDims(s)).AncestorOf(e) {
				// The table's cuboid within e, and its dimensions of one
				// value outside e: the same counts.
				m := make([]float64, s.CuboidSize(t.Cuboid))
				tensor.Project(tensor.SubSizes(s.Sizes(), e), tensor.Reindex(t.Cuboid&e, e), inv[k], m)
				t.Counts = integerAnswers(subTerm(p.terms[i], t.Cuboid), s.SubSizesOf(t.Cuboid), m)
				break
			}
		}
	}
	return rel, nil
}

// subTerm returns t's factors on the dimensions of c, in order.
func subTerm(t query.Term, c domain.Cuboid) query.Term {
	var out query.Term
	for _, d := range c.Dims() {
		out = append(out, t[d])
	}
	return out
}

// integerAnswers applies a term of integer factors to integer counts
// exactly: in float64 where every partial sum stays below 2^53 (checked
// from the counts' largest value and the factors' column sums), with big
// integers otherwise; answers beyond ±2^53 are clamped there (a 1-Lipschitz
// map: the sensitivity holds), where no count table of this world goes.
func integerAnswers(t query.Term, sizes []int, x []float64) []float64 {
	if len(t) == 0 {
		out := slices.Clone(x)
		return clampAnswers(out)
	}
	bound := 0.0
	for _, v := range x {
		bound = max(bound, math.Abs(v))
	}
	for _, f := range t {
		l1 := 0.0
		switch f.Kind {
		case query.Matrix:
			for r := range f.Rows() {
				var s float64
				for _, v := range f.M[r*f.N : (r+1)*f.N] {
					s += math.Abs(v)
				}
				l1 = max(l1, s)
			}
		default:
			l1 = float64(f.N)
		}
		bound *= l1
	}
	if bound < 1<<53 {
		return clampAnswers(t.Apply(x))
	}
	// Exact: the dense integer matrix of each factor, axis by axis.
	cur := make([]*big.Int, len(x))
	for i, v := range x {
		cur[i], _ = new(big.Float).SetFloat64(roundHalf(v)).Int(nil)
	}
	shape := slices.Clone(sizes)
	for d, f := range t {
		dense := f.Dense()
		rows, n := f.Rows(), f.N
		outer, inner := 1, 1
		for _, s := range shape[:d] {
			outer *= s
		}
		for _, s := range shape[d+1:] {
			inner *= s
		}
		next := make([]*big.Int, outer*rows*inner)
		for o := range outer {
			for i := range inner {
				for r := range rows {
					acc := new(big.Int)
					for j := range n {
						if c := dense[r*n+j]; c != 0 {
							acc.Add(acc, new(big.Int).Mul(big.NewInt(int64(c)), cur[(o*n+j)*inner+i]))
						}
					}
					next[(o*rows+r)*inner+i] = acc
				}
			}
		}
		cur, shape[d] = next, rows
	}
	out := make([]float64, len(cur))
	lim := big.NewInt(1 << 53)
	for i, v := range cur {
		switch {
		case v.Cmp(lim) > 0:
			out[i] = 1 << 53
		case v.CmpAbs(lim) > 0:
			out[i] = -(1 << 53)
		default:
			out[i] = float64(v.Int64())
		}
	}
	return out
}

func clampAnswers(x []float64) []float64 {
	for i, v := range x {
		x[i] = max(min(v, 1<<53), -(1 << 53))
	}
	return x
}

// roundHalf rounds half up; values that are not finite become 0 (counts
// are integers, so this only guards the exact path).
func roundHalf(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return math.Floor(v + 0.5)
}
