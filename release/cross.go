package release

// Tables at coarser levels of two or more hierarchical dimensions: the
// census shape (persons by state x 5-year age band, by county x broad age,
// by region x single year). Each measured view gets noise calibrated to its
// generic sensitivity under the exact views, and every table comes from one
// generalised least-squares estimate subject to the invariants over the
// schema's leaves, in the query model (package gls: conjugate gradients with
// Kronecker products, to a certified residual). Every table's cells carry
// a margin of error from the exact variance of their error; integer and
// non-negative tables are made top-down through the lattice of the
// hierarchies' levels (integer.RoundLattice), so every pair of tables adds
// up on every common roll-up.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate"
	"github.com/knowdp/knowdp/gls"
	"github.com/knowdp/knowdp/integer"
	"github.com/knowdp/knowdp/moe"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/sensitivity"
	"github.com/knowdp/knowdp/sidecar"
)

// crossPlan is a release across several hierarchies, decided from the
// schema and the spec alone.
type crossPlan struct {
	s           *domain.Schema
	spec        Spec
	hier        []int // the dimensions used at coarser levels
	exact       []domain.View
	tables      []Table
	meas        []viewMeasurement
	conditional bool
	split       Split
	// solver is the least-squares problem's structure; queries maps its
	// queries to the tables they answer. detail is the table the estimate
	// is completed to for post-processing.
	solver  *gls.Plan
	queries []int
	detail  domain.View
}

func planCross(s *domain.Schema, spec Spec, hier []int) (*crossPlan, error) {
	gaussian := spec.Mechanism == MechanismGaussian
	switch {
	case spec.Weights != nil && len(spec.Weights) != len(spec.Tables):
		return nil, fmt.Errorf("release: %d weights for %d tables", len(spec.Weights), len(spec.Tables))
	case spec.Sensitivity < 0:
		return nil, fmt.Errorf("release: sensitivity must be positive, got %d", spec.Sensitivity)
	case gaussian && !spec.Epsilon.IsZero():
		return nil, errors.New("release: a Gaussian release is calibrated to rho; leave epsilon unset")
	case gaussian && spec.Sensitivity != 0:
		return nil, errors.New("release: a Gaussian release is calibrated to the L2 generic sensitivities, which cannot be overridden")
	case gaussian && !(spec.Delta > 0 && spec.Delta < 1):
		return nil, fmt.Errorf("release: a Gaussian release states its equivalent (eps, delta) guarantee at a delta in (0, 1), got %v", spec.Delta)
	case !gaussian && (!spec.Rho.IsZero() || spec.Delta != 0):
		return nil, errors.New("release: rho and delta apply to Gaussian releases only")
	case spec.Split == SplitOptimal:
		return nil, errors.New("release: the optimal split is certified for tables at the levels of one hierarchy; across two or more, use spine or equal (the default, auto, takes spine)")
	case spec.Strategy == MeasureMarginals || spec.Strategy == MeasureResiduals || spec.Strategy == MeasureLattice:
		return nil, fmt.Errorf("release: the %v strategy is not available across two or more hierarchies; use requested or best (which measures the requested tables)", spec.Strategy)
	}
	p := &crossPlan{s: s, spec: spec, hier: hier, split: spec.Split}
	if p.split == SplitAuto {
		p.split = SplitSpine
	}
	for _, e := range spec.Exact {
		e = e.Normal()
		if !slices.Contains(p.exact, e) {
			p.exact = append(p.exact, e)
		}
	}
	for i, v := range spec.Tables {
		v = v.Normal()
		for j, w := range spec.Tables[:i] {
			if w.Normal() == v {
				return nil, fmt.Errorf("release: table %s is requested twice (tables %d and %d)", s.FormatView(v), j+1, i+1)
			}
		}
		w, err := weightOf(spec.Weights, i, "table "+s.FormatView(v))
		if err != nil {
			return nil, err
		}
		t := Table{Cuboid: v.Dims, View: v, Weight: w}
		for _, e := range p.exact {
			if v.RollUpOf(e) {
				t.Public, t.SensitivityRule = true, "public: a roll-up of the exact view "+s.FormatView(e)
				break
			}
		}
		p.tables = append(p.tables, t)
	}
	measured := spec.Measure
	if measured == nil {
		for _, t := range p.tables {
			if !t.Public {
				measured = append(measured, t.View)
			}
		}
	}
	for i, v := range measured {
		v = v.Normal()
		for j, w := range measured[:i] {
			if w.Normal() == v {
				return nil, fmt.Errorf("release: view %s is measured twice (measured views %d and %d)", s.FormatView(v), j+1, i+1)
			}
		}
		m, err := p.measurement(v)
		if err != nil {
			return nil, err
		}
		p.meas = append(p.meas, m)
	}
	switch {
	case len(p.meas) > 0 && gaussian && spec.Rho.IsZero():
		return nil, errors.New("release: rho must be set (> 0)")
	case len(p.meas) > 0 && !gaussian && !(spec.Epsilon.Float64() > 0):
		return nil, errors.New("release: epsilon must be set (> 0)")
	}
	if err := p.chooseShares(); err != nil {
		return nil, err
	}
	// The estimate's structure, refused here, before any data, if a table
	// is not determined.
	if err := p.buildSolver(); err != nil {
		return nil, err
	}
	// The detail table: every dimension any table or invariant uses, each
	// hierarchy at the finest level used.
	for _, v := range slices.Concat(spec.Tables, p.exact) {
		for _, d := range v.Dims.Dims() {
			if !p.detail.Dims.Has(d) || v.Up[d] < p.detail.Up[d] {
				p.detail.Up[d] = v.Up[d]
			}
			p.detail.Dims |= 1 << d
		}
	}
	for i := range p.tables {
		t := &p.tables[i]
		for _, m := range p.meas {
			if m.v != t.View {
				continue
			}
			t.Measured = true
			t.Sensitivity, t.SensitivityRule = m.sens, m.rule
			if gaussian {
				t.RhoShare, t.Sigma, t.Grid = m.rhoShare.Float64(), m.gauss.Sigma(), m.gauss.Grid()
				t.SensitivityRule = m.l2.Rule
			} else {
				t.Share, t.Scale, t.Grid = m.share.Float64(), m.lap.Scale(), m.lap.Grid()
			}
		}
	}
	return p, nil
}

// buildSolver sets the estimate's structure: every table that is not
// public, from the measurements and the invariants. Its errors (a table
// not determined) depend on the plan alone.
func (p *crossPlan) buildSolver() error {
	s := p.s
	prob := gls.Problem{Shape: s.Sizes()}
	for _, m := range p.meas {
		prob.Measurements = append(prob.Measurements, gls.Measurement{Name: s.FormatView(m.v), Term: s.Term(m.v), Variance: m.variance})
	}
	for _, e := range p.exact {
		prob.Invariants = append(prob.Invariants, gls.Invariant{Name: s.FormatView(e), Term: s.Term(e)})
	}
	p.queries = p.queries[:0]
	for i, t := range p.tables {
		if t.Public {
			continue
		}
		prob.Queries = append(prob.Queries, gls.Query{Name: s.FormatView(t.View), Term: s.Term(t.View)})
		p.queries = append(p.queries, i)
	}
	solver, err := gls.NewPlan(prob, gls.Options{})
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	p.solver = solver
	return nil
}

// measurement returns view v's measurement before its share: its
// sensitivity under the invariants (or the caller's, checked where knowdp
// has one).
func (p *crossPlan) measurement(v domain.View) (viewMeasurement, error) {
	s, spec := p.s, p.spec
	m := viewMeasurement{v: v}
	if spec.Mechanism == MechanismGaussian {
		l2, err := sensitivity.GenericL2SensitivityViews(s, p.exact, v)
		if err == nil {
			l2, err = unitL2(l2, spec.unitRows)
		}
		if err != nil {
			return m, fmt.Errorf("release: view %s: %w", s.FormatView(v), err)
		}
		if l2.Value == 0 {
			return m, fmt.Errorf("release: measured view %s is determined by the exact views (%s): noise on it would be wasted", s.FormatView(v), l2.Rule)
		}
		m.l2 = l2
		return m, nil
	}
	sens, err := sensitivity.GenericSensitivityViews(s, p.exact, v)
	switch {
	case err == nil && spec.Sensitivity > 0 && spec.Sensitivity < sens.Value:
		return m, fmt.Errorf("release: view %s: sensitivity %d is below the generic sensitivity %d (%s)", s.FormatView(v), spec.Sensitivity, sens.Value, sens.Rule)
	case err == nil && spec.Sensitivity > 0:
		sens = sensitivity.Sensitivity{Value: spec.Sensitivity, Rule: fmt.Sprintf("given by the caller (at least the generic sensitivity %d, %s)", sens.Value, sens.Rule)}
	case errors.Is(err, sensitivity.ErrNoClosedForm) && spec.Sensitivity > 0:
		sens = sensitivity.Sensitivity{Value: spec.Sensitivity, Rule: "given by the caller: knowdp has no closed form here and cannot check it"}
		p.conditional = true
	case err != nil:
		return m, fmt.Errorf("release: view %s: %w", s.FormatView(v), err)
	}
	if sens.Value == 0 {
		return m, fmt.Errorf("release: measured view %s is determined by the exact views (%s): noise on it would be wasted", s.FormatView(v), sens.Rule)
	}
	if sens, err = unitL1(sens, spec.unitRows); err != nil {
		return m, fmt.Errorf("release: view %s: %w", s.FormatView(v), err)
	}
	m.sens, m.rule = sens.Value, sens.Rule
	return m, nil
}

// levelKey names the levels a view stands at along the hierarchies, as
// "state x band" ("total" for a hierarchy summed out).
func (p *crossPlan) levelKey(v domain.View) string {
	var parts []string
	for _, d := range p.hier {
		name := "all " + p.s.Dim(d).Name
		if v.Dims.Has(d) {
			levels := p.s.Levels(d)
			name = levels[len(levels)-1-int(v.Up[d])]
		}
		parts = append(parts, name)
	}
	return strings.Join(parts, " x ")
}

// chooseShares turns the split into exact shares of the budget and
// calibrates each measurement's noise: equal, or spine (every combination
// of levels measured the same share, shared equally by its views).
func (p *crossPlan) chooseShares() error {
	k := len(p.meas)
	if k == 0 {
		return nil
	}
	frac := make([]float64, k)
	switch p.split {
	case SplitEqual:
		for i := range frac {
			frac[i] = 1 / float64(k)
		}
	case SplitSpine:
		per := map[string]int{}
		for _, m := range p.meas {
			per[p.levelKey(m.v)]++
		}
		for i, m := range p.meas {
			frac[i] = 1 / float64(len(per)) / float64(per[p.levelKey(m.v)])
		}
	default:
		return fmt.Errorf("release: unknown split %v", p.split)
	}
	gaussian := p.spec.Mechanism == MechanismGaussian
	total := p.spec.Epsilon.Steps()
	if gaussian {
		total = p.spec.Rho.Steps()
	}
	for i := range p.meas {
		m := &p.meas[i]
		steps := int64(math.Floor(frac[i] * float64(total)))
		if steps <= 0 {
			return fmt.Errorf("release: the budget is too small to share among %d measurements", k)
		}
		if gaussian {
			share, err := privacy.RhoFromSteps(steps)
			if err != nil {
				return fmt.Errorf("release: share of view %s: %w", p.s.FormatView(m.v), err)
			}
			g, err := noise.NewGaussian(m.l2.Value, share.Float64())
			if err != nil {
				return fmt.Errorf("release: view %s: %w", p.s.FormatView(m.v), err)
			}
			m.rhoShare, m.gauss, m.variance = share, g, g.Variance()
			continue
		}
		share, err := privacy.NewEpsilon(float64(steps) * privacy.EpsilonStep)
		if err != nil {
			return fmt.Errorf("release: share of view %s: %w", p.s.FormatView(m.v), err)
		}
		lap, err := noise.NewLaplace(float64(m.sens), share.Float64())
		if err != nil {
			return fmt.Errorf("release: view %s: %w", p.s.FormatView(m.v), err)
		}
		m.share, m.lap, m.variance = share, lap, lap.Variance()
	}
	return nil
}

// needs lists the invariants, then the measured views.
func (p *crossPlan) needs() []domain.View {
	out := slices.Clone(p.exact)
	for _, m := range p.meas {
		if !slices.Contains(out, m.v) {
			out = append(out, m.v)
		}
	}
	return out
}

// newRelease returns the release the plan describes before any counts.
func (p *crossPlan) newRelease(seeded bool) (*Release, error) {
	s := p.s
	names := make([]string, len(p.hier))
	for i, d := range p.hier {
		names[i] = s.Dim(d).Name
	}
	rel := &Release{
		Schema:          s,
		Tables:          slices.Clone(p.tables),
		Budget:          p.spec.Epsilon.Float64(),
		Mechanism:       p.spec.Mechanism,
		Split:           p.split,
		Strategy:        MeasureRequested,
		Neighbours:      viewNeighbours(s, p.exact),
		Conditional:     p.conditional,
		Seeded:          seeded,
		DomainsFromData: p.spec.DomainsFromData,
		Hierarchy:       strings.Join(names, ","),
	}
	if p.spec.Measure != nil {
		rel.Strategy = -1
	}
	for _, e := range p.exact {
		rel.Invariants = append(rel.Invariants, estimate.Invariant{Cuboid: e.Dims, View: e})
	}
	var spent privacy.Budget
	for _, m := range p.meas {
		if p.spec.Mechanism == MechanismGaussian {
			spent = privacy.Sequential(spent, privacy.Concentrated(m.rhoShare))
		} else {
			spent = privacy.Sequential(spent, privacy.Pure(m.share))
		}
		rel.Measurements = append(rel.Measurements, m.stated(p.spec.Mechanism))
	}
	if err := rel.stateSpent(spent, p.spec.Mechanism, p.spec.Rho, p.spec.Delta); err != nil {
		return nil, err
	}
	return rel, nil
}

// run draws the planned release from the exact counts of the views needs
// lists: noise on every measurement (measurement k from the (k+1)-th Split
// of r), the one estimate, every cell's margin of error, and the
// post-processing the spec asks for (integer rounding from the next Split
// of r).
func (p *crossPlan) run(ctx context.Context, counts map[domain.View][]float64, r *noise.Rand) (*Release, error) {
	s := p.s
	if err := checkCounts(s, p.needs(), counts, false); err != nil {
		return nil, err
	}
	rel, err := p.newRelease(r.Seeded())
	if err != nil {
		return nil, err
	}
	inv := make([][]float64, len(p.exact))
	for i, e := range p.exact {
		x := counts[e]
		for c, n := range x {
			if !(n >= 0) || math.IsInf(n, 0) {
				return nil, fmt.Errorf("release: exact view %s: cell %d is %v; invariants are finite, non-negative counts", s.FormatView(e), c, n)
			}
		}
		inv[i] = slices.Clone(x)
		rel.Invariants[i].Counts = inv[i]
	}
	noisy := make([][]float64, len(p.meas))
	for k, m := range p.meas {
		rk := r.Split()
		noisy[k] = slices.Clone(counts[m.v])
		if err := noise.AddParallel(ctx, m.dist(p.spec.Mechanism), rk, noisy[k]); err != nil {
			return nil, fmt.Errorf("release: view %s: %w", s.FormatView(m.v), err)
		}
	}
	if p.spec.KeepMeasurements {
		rel.noisy = make([][]float64, len(noisy))
		for k := range noisy {
			rel.noisy[k] = slices.Clone(noisy[k])
		}
	}
	est, err := p.estimate(ctx, rel, noisy, inv)
	if err != nil {
		return nil, err
	}
	rel.Levels = p.levelSummary(rel.Tables)
	if p.spec.Integer || p.spec.NonNegative {
		if err := p.postProcess(ctx, rel, est, inv, r); err != nil {
			return nil, err
		}
	}
	return rel, nil
}

// estimate fills rel's tables (counts, margins of error, the objective)
// from the noisy measurements and the invariants' counts, in the order of
// p.meas and p.exact.
func (p *crossPlan) estimate(ctx context.Context, rel *Release, noisy, inv [][]float64) (*gls.Estimate, error) {
	s := p.s
	est, err := p.solver.Solve(ctx, noisy, inv)
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	rel.solve = &est.Certificate
	for q, i := range p.queries {
		t := &rel.Tables[i]
		t.Counts = est.Answers[q]
		vars, err := p.solver.Variances(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("release: %w", err)
		}
		t.MOE90s, t.absErrSum, t.moeSum = make([]float64, len(t.Counts)), 0, 0
		for c, v := range vars.Values {
			sd := math.Sqrt(max(v, 0))
			// Gaussian noise: the error is normal. Laplace noise: the
			// normal quantile of the exact variance (see the metadata's
			// moe90 note and TestCrossCoverage).
			t.MOE90s[c] = moe.Z95 * sd
			t.moeSum += t.MOE90s[c]
			t.absErrSum += sd * math.Sqrt(2/math.Pi)
			t.Variance = max(t.Variance, v)
		}
		t.MOE90 = slices.Max(t.MOE90s)
		rel.Objective += t.Weight * sum(vars.Values)
	}
	for i := range rel.Tables {
		t := &rel.Tables[i]
		if !t.Public {
			continue
		}
		for k, e := range p.exact {
			if t.View.RollUpOf(e) {
				if t.Counts, err = s.RollUp(e, inv[k], t.View); err != nil {
					return nil, err
				}
				break
			}
		}
		t.MOE90s, t.absErrSum, t.moeSum = make([]float64, len(t.Counts)), 0, 0
	}
	return est, nil
}

func sum(x []float64) float64 {
	var t float64
	for _, v := range x {
		t += v
	}
	return t
}

// postProcess makes the tables non-negative or non-negative integers,
// top-down through the lattice of the hierarchies' levels, from the
// estimate completed to the detail table.
func (p *crossPlan) postProcess(ctx context.Context, rel *Release, est *gls.Estimate, inv [][]float64, r *noise.Rand) error {
	s := p.s
	x, err := est.Completion(s.Term(p.detail))
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	exact := make(map[domain.View][]float64, len(p.exact))
	for i, e := range p.exact {
		exact[e] = inv[i]
	}
	var published []domain.View
	for _, t := range rel.Tables {
		if !t.Public {
			published = append(published, t.View)
		}
	}
	var res map[domain.View]integer.IntegerResult
	if p.spec.Integer {
		res, err = integer.RoundLattice(ctx, s, p.detail, x, published, exact, r.Split())
	} else {
		res, err = integer.NonNegativeLattice(ctx, s, p.detail, x, published, exact)
	}
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	for i := range rel.Tables {
		t := &rel.Tables[i]
		if t.Public {
			continue
		}
		x := res[t.View]
		t.Counts = x.Counts
		t.NonNegative, t.NonNegativeResidual = true, x.NonNegativeResidual
		if p.spec.Integer {
			t.Integer, t.IntegerExact, t.IntegerMethod, t.IntegerMaxDeviation = true, x.Exact, x.Method, x.MaxDeviation
		}
	}
	return nil
}

// levelSummary returns the error of the tables by combination of levels,
// coarsest first.
func (p *crossPlan) levelSummary(tables []Table) []sidecar.LevelError {
	by := map[string]*sidecar.LevelError{}
	var order []string
	for _, t := range tables {
		k := p.levelKey(t.View)
		e := by[k]
		if e == nil {
			e = &sidecar.LevelError{Level: k}
			by[k] = e
			order = append(order, k)
		}
		e.Tables = append(e.Tables, p.s.FormatView(t.View))
		e.Cells += len(t.Counts)
		e.MeanMOE90 += t.moeSum
		e.MeanAbsError += t.absErrSum
		e.MaxMOE90 = max(e.MaxMOE90, t.MOE90)
	}
	out := make([]sidecar.LevelError, 0, len(order))
	for _, k := range order {
		e := by[k]
		if e.Cells > 0 {
			e.MeanMOE90 /= float64(e.Cells)
			e.MeanAbsError /= float64(e.Cells)
		}
		out = append(out, *e)
	}
	return out
}
