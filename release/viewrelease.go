package release

// A release of views at several levels of a hierarchy, under one budget.
//
// Views at coarser levels of ONE hierarchical dimension h (a geography)
// crossed with flat dimensions are measured with noise calibrated to their
// generic sensitivity under the exact views (the invariants, at any
// level), then estimated together by one weighted least-squares fit
// subject to the invariants. The fit is exact and takes linear passes: the
// flat dimensions split into residual components, and each component is a
// tree-structured least-squares problem over h's levels (package hier).
// Every published table at every level then agrees with every other and
// with the invariants.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate"
	"github.com/knowdp/knowdp/integer"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/sensitivity"
)

// viewSpec says which views to release together and how. It is the
// workloadSpec of views; a spec whose views and invariants all stand at
// their finest levels is released by the workload engine (workload.go).
type viewSpec struct {
	// Epsilon is the total privacy loss (Laplace); Rho and Delta the zCDP
	// budget and the delta of its stated (eps, delta) equivalent
	// (Gaussian).
	Epsilon   privacy.Epsilon
	Mechanism Mechanism
	Rho       privacy.Rho
	Delta     float64
	// Exact are the invariants: views published exactly.
	Exact []domain.View
	// Views are the tables to release, without duplicates.
	Views []domain.View
	// Weights, if set, has one weight > 0 per view (nil: 1 each).
	Weights []float64
	// Split is SplitEqual (every measured view the same share), SplitSpine
	// or SplitOptimal.
	Split Split
	// Sensitivity, when > 0, replaces the generic sensitivity of every
	// measured view (Laplace only), as in workloadSpec.
	Sensitivity int
	// DomainsFromData records that the domains came from the data.
	DomainsFromData bool
	// KeepMeasurements keeps the noisy measurements in the release, for
	// SaveMeasurements.
	KeepMeasurements bool
	// unitRows: see workloadSpec.
	unitRows int
}

// flat reports whether every view and invariant stands at its finest
// levels, and returns the spec as a workloadSpec.
func (spec viewSpec) flat() (workloadSpec, bool) {
	w := workloadSpec{Epsilon: spec.Epsilon, Weights: spec.Weights, Split: spec.Split, Sensitivity: spec.Sensitivity,
		DomainsFromData: spec.DomainsFromData, Mechanism: spec.Mechanism, Rho: spec.Rho, Delta: spec.Delta, unitRows: spec.unitRows}
	for _, v := range spec.Views {
		if !v.Flat() {
			return w, false
		}
		w.Cuboids = append(w.Cuboids, v.Dims)
	}
	for _, v := range spec.Exact {
		if !v.Flat() {
			return w, false
		}
		w.Exact = append(w.Exact, v.Dims)
	}
	return w, spec.Split != SplitSpine
}

// viewsPlan is a release of views planned from the schema and the spec
// alone (what to measure, the split, the errors): counting the views it
// Needs and releasing them from the plan plans once.
type viewsPlan struct {
	spec viewSpec
	// flat is the plan of a spec whose views all stand at their finest
	// levels (a workload); p the plan across a hierarchy otherwise.
	flat *WorkloadPlan
	p    *viewPlan
}

// newViewsPlanContext plans the release spec describes and returns its
// errors, under ctx: the optimal split's search stops when ctx ends, and
// the plan fails with ctx's error.
func newViewsPlanContext(ctx context.Context, s *domain.Schema, spec viewSpec) (*viewsPlan, error) {
	if w, ok := spec.flat(); ok {
		wp, err := newWorkloadPlanContext(ctx, s, w, false)
		if err != nil {
			return nil, err
		}
		return &viewsPlan{spec: spec, flat: wp}, nil
	}
	p, err := planViewsCtx(ctx, s, spec)
	if err != nil {
		return nil, err
	}
	return &viewsPlan{spec: spec, p: p}, nil
}

// Needs returns the views whose exact counts releaseFrom needs.
func (vp *viewsPlan) Needs() []domain.View {
	if vp.flat != nil {
		cs := vp.flat.Needs()
		out := make([]domain.View, len(cs))
		for i, c := range cs {
			out[i] = domain.ViewOf(c)
		}
		return out
	}
	return vp.p.needs()
}

// needs lists the invariants, then the views the plan measures.
func (p *viewPlan) needs() []domain.View {
	out := slices.Clone(p.exact)
	for _, m := range p.meas {
		if !slices.Contains(out, m.v) {
			out = append(out, m.v)
		}
	}
	return out
}

// viewMeasurement is one noisy view of the plan.
type viewMeasurement struct {
	v        domain.View
	sens     int
	rule     string
	l2       sensitivity.L2Sensitivity
	share    privacy.Epsilon
	rhoShare privacy.Rho
	lap      noise.Laplace
	gauss    noise.Gaussian
	variance float64
}

// checkCounts checks that counts has every view needs lists, each with one
// count per cell; flat names them as cuboids, else as views.
func checkCounts(s *domain.Schema, needs []domain.View, counts map[domain.View][]float64, flat bool) error {
	name := func(v domain.View) string {
		if flat {
			return "cuboid " + s.Format(v.Dims)
		}
		return "view " + s.FormatView(v)
	}
	for _, v := range needs {
		x, ok := counts[v]
		if !ok {
			return fmt.Errorf("release: the exact counts of %s are missing", name(v))
		}
		if want := s.ViewSize(v); len(x) != want {
			return fmt.Errorf("release: %s has %d cells, got %d counts", name(v), want, len(x))
		}
	}
	return nil
}

// stated is the measurement as the release states it.
func (m viewMeasurement) stated(mech Mechanism) Measurement {
	x := Measurement{
		Cuboid: m.v.Dims, View: m.v, Share: m.share.Float64(), Sensitivity: m.sens, SensitivityRule: m.rule,
		Scale: m.lap.Scale(), Grid: m.lap.Grid(),
		RhoShare: m.rhoShare.Float64(), L2Sensitivity: m.l2.Value, L2Rule: m.l2.Rule, Sigma: m.gauss.Sigma(),
	}
	if mech == MechanismGaussian {
		x.Grid = m.gauss.Grid()
	}
	return x
}

func (m viewMeasurement) dist(mech Mechanism) noise.Adder {
	if mech == MechanismGaussian {
		return m.gauss
	}
	return m.lap
}

// viewPlan is everything about a release of views that does not depend on
// the data.
type viewPlan struct {
	s           *domain.Schema
	h           int // the dimension used at coarser levels
	exact       []domain.View
	tables      []Table
	meas        []viewMeasurement
	mech        Mechanism
	budget      privacy.Epsilon
	rho         privacy.Rho
	split       Split
	conditional bool
	// objective is the weighted total variance at the shares chosen, and
	// cert the optimal split's certificate.
	objective float64
	cert      *SplitCertificate
}

// planViews is planViewsCtx without a deadline.
func planViews(s *domain.Schema, spec viewSpec) (*viewPlan, error) {
	return planViewsCtx(context.Background(), s, spec)
}

// planViewsCtx validates the spec and chooses what to measure and the
// shares. Every error it returns is decided by the schema and the spec
// alone, but for ctx's: the optimal split stops when ctx ends.
func planViewsCtx(ctx context.Context, s *domain.Schema, spec viewSpec) (*viewPlan, error) {
	p, err := viewPlanOf(s, spec)
	if err != nil {
		return nil, err
	}
	if err := p.chooseShares(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// viewPlanOf is planViewsCtx up to the shares: what is measured, without
// solving the split.
func viewPlanOf(s *domain.Schema, spec viewSpec) (*viewPlan, error) {
	if s == nil {
		return nil, errors.New("release: nil schema")
	}
	if len(spec.Views) == 0 {
		return nil, errors.New("release: no views to release")
	}
	if spec.Weights != nil && len(spec.Weights) != len(spec.Views) {
		return nil, fmt.Errorf("release: %d weights for %d views", len(spec.Weights), len(spec.Views))
	}
	if spec.Sensitivity < 0 {
		return nil, fmt.Errorf("release: sensitivity must be positive, got %d", spec.Sensitivity)
	}
	gaussian := spec.Mechanism == MechanismGaussian
	switch {
	case spec.Split != SplitEqual && spec.Split != SplitSpine && spec.Split != SplitOptimal:
		return nil, fmt.Errorf("release: unknown split %v", spec.Split)
	case gaussian && !spec.Epsilon.IsZero():
		return nil, errors.New("release: a Gaussian release is calibrated to rho; leave epsilon unset")
	case gaussian && spec.Sensitivity != 0:
		return nil, errors.New("release: a Gaussian release is calibrated to the L2 generic sensitivities, which cannot be overridden")
	case gaussian && !(spec.Delta > 0 && spec.Delta < 1):
		return nil, fmt.Errorf("release: a Gaussian release states its equivalent (eps, delta) guarantee at a delta in (0, 1), got %v", spec.Delta)
	case !gaussian && (!spec.Rho.IsZero() || spec.Delta != 0):
		return nil, errors.New("release: rho and delta apply to Gaussian releases only")
	}
	p := &viewPlan{s: s, h: -1, mech: spec.Mechanism, budget: spec.Epsilon, rho: spec.Rho, split: spec.Split}
	all := append(slices.Clone(spec.Views), spec.Exact...)
	for i, v := range all {
		what := fmt.Sprintf("view %d", i+1)
		if i >= len(spec.Views) {
			what = fmt.Sprintf("exact view %d", i-len(spec.Views)+1)
		}
		if err := s.CheckView(v); err != nil {
			return nil, fmt.Errorf("release: %s: %w", what, err)
		}
		for _, d := range v.Dims.Dims() {
			if v.Up[d] == 0 {
				continue
			}
			if p.h >= 0 && p.h != d {
				return nil, fmt.Errorf("release: views at coarser levels of two dimensions (%q and %q) in one release are not supported: "+
					"the exact estimate needs one hierarchy crossed with flat dimensions; release them separately", s.Dim(p.h).Name, s.Dim(d).Name)
			}
			p.h = d
		}
	}
	if p.h < 0 {
		// Spine with no hierarchy used: one level, the equal split.
		for i := range s.NumDims() {
			if s.Hierarchical(i) {
				p.h = i
				break
			}
		}
		if p.h < 0 {
			return nil, errors.New("release: the spine split needs a hierarchical dimension")
		}
	}
	for _, e := range spec.Exact {
		e = e.Normal()
		if !slices.Contains(p.exact, e) {
			p.exact = append(p.exact, e)
		}
	}
	for i, v := range spec.Views {
		v = v.Normal()
		for j, w := range spec.Views[:i] {
			if w.Normal() == v {
				return nil, fmt.Errorf("release: view %s is requested twice (views %d and %d)", s.FormatView(v), j+1, i+1)
			}
		}
		w, err := weightOf(spec.Weights, i, "view "+s.FormatView(v))
		if err != nil {
			return nil, err
		}
		t := Table{Cuboid: v.Dims, View: v, Weight: w}
		if rule, ok := p.publicBy(v); ok {
			t.Public, t.SensitivityRule = true, rule
			p.tables = append(p.tables, t)
			continue
		}
		m := viewMeasurement{v: v}
		if gaussian {
			l2, err := sensitivity.GenericL2SensitivityViews(s, p.exact, v)
			if err == nil {
				l2, err = unitL2(l2, spec.unitRows)
			}
			if err != nil {
				return nil, fmt.Errorf("release: view %s: %w", s.FormatView(v), err)
			}
			m.l2 = l2
			t.SensitivityRule = l2.Rule
		} else {
			sens, err := sensitivity.GenericSensitivityViews(s, p.exact, v)
			switch {
			case err == nil && spec.Sensitivity > 0 && spec.Sensitivity < sens.Value:
				return nil, fmt.Errorf("release: view %s: sensitivity %d is below the generic sensitivity %d (%s)", s.FormatView(v), spec.Sensitivity, sens.Value, sens.Rule)
			case err == nil && spec.Sensitivity > 0:
				sens = sensitivity.Sensitivity{Value: spec.Sensitivity, Rule: fmt.Sprintf("given by the caller (at least the generic sensitivity %d, %s)", sens.Value, sens.Rule)}
			case errors.Is(err, sensitivity.ErrNoClosedForm) && spec.Sensitivity > 0:
				sens = sensitivity.Sensitivity{Value: spec.Sensitivity, Rule: "given by the caller: knowdp has no closed form here and cannot check it"}
				p.conditional = true
			case err != nil:
				return nil, fmt.Errorf("release: view %s: %w", s.FormatView(v), err)
			}
			if sens.Value == 0 {
				t.Public, t.SensitivityRule = true, sens.Rule
				p.tables = append(p.tables, t)
				continue
			}
			if sens, err = unitL1(sens, spec.unitRows); err != nil {
				return nil, fmt.Errorf("release: view %s: %w", s.FormatView(v), err)
			}
			m.sens, m.rule = sens.Value, sens.Rule
			t.Sensitivity, t.SensitivityRule = sens.Value, sens.Rule
		}
		p.meas = append(p.meas, m)
		p.tables = append(p.tables, t)
	}
	switch {
	case len(p.meas) > 0 && gaussian && spec.Rho.IsZero():
		return nil, errors.New("release: rho must be set (> 0)")
	case len(p.meas) > 0 && !gaussian && !(spec.Epsilon.Float64() > 0):
		return nil, errors.New("release: epsilon must be set (> 0)")
	}
	return p, nil
}

// SplitWork returns the most work the optimal split of this release can
// take (plan.WorkBound's unit), from the schema and the spec alone,
// without solving it: workloadSpec.SplitWork for views at their finest
// levels (released as a workload), and otherwise the view split's budget
// of evaluations of its variance passes; 0 when the split is not the
// optimal one. Planning stops its searches there. Its errors are the
// plan's that come before the split.
func (spec viewSpec) SplitWork(s *domain.Schema) (float64, error) {
	if w, ok := spec.flat(); ok {
		return w.SplitWork(s)
	}
	if spec.Split != SplitOptimal {
		return 0, nil
	}
	p, err := viewPlanOf(s, spec)
	if err != nil || len(p.meas) == 0 {
		return 0, err
	}
	o, err := p.viewObjective()
	if err != nil {
		return 0, err
	}
	return o.WorkBound(), nil
}

// publicBy reports whether view v is a roll-up of an invariant, and says
// which.
func (p *viewPlan) publicBy(v domain.View) (string, bool) {
	for _, e := range p.exact {
		if v.RollUpOf(e) {
			return "public: a roll-up of the exact view " + p.s.FormatView(e), true
		}
	}
	return "", false
}

// level returns the level of h a view stands at: its Up, or the number of
// levels (the root) when h is not in it.
func (p *viewPlan) level(v domain.View) int {
	if !v.Dims.Has(p.h) {
		return p.s.NumLevels(p.h)
	}
	return int(v.Up[p.h])
}

// fractions returns each measurement's fraction of the budget.
func (p *viewPlan) fractions(ctx context.Context) ([]float64, error) {
	k := len(p.meas)
	frac := make([]float64, k)
	switch p.split {
	case SplitEqual:
		for i := range frac {
			frac[i] = 1 / float64(k)
		}
	case SplitSpine:
		return p.spineFractions()
	case SplitOptimal:
		return p.optimalFractions(ctx)
	}
	return frac, nil
}

// spineFractions gives every measured level the same share, shared equally
// by the views measured at that level.
func (p *viewPlan) spineFractions() ([]float64, error) {
	perLevel := map[int]int{}
	for _, m := range p.meas {
		perLevel[p.level(m.v)]++
	}
	frac := make([]float64, len(p.meas))
	for i, m := range p.meas {
		frac[i] = 1 / float64(len(perLevel)) / float64(perLevel[p.level(m.v)])
	}
	return frac, nil
}

// chooseShares turns the fractions into exact shares of the budget and
// calibrates each measurement's noise.
func (p *viewPlan) chooseShares(ctx context.Context) error {
	if len(p.meas) == 0 {
		return nil
	}
	frac, err := p.fractions(ctx)
	if err != nil {
		return err
	}
	total := p.budget.Steps()
	if p.mech == MechanismGaussian {
		total = p.rho.Steps()
	}
	var kept []viewMeasurement
	for k := range p.meas {
		m := &p.meas[k]
		if frac[k] == 0 && p.split == SplitOptimal {
			continue // the optimal split measures it with nothing: derived
		}
		kept = append(kept, *m)
		m = &kept[len(kept)-1]
		steps := int64(math.Floor(frac[k] * float64(total)))
		if steps <= 0 {
			return fmt.Errorf("release: the budget is too small to share among %d measurements", len(p.meas))
		}
		if p.mech == MechanismGaussian {
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
	p.meas = kept
	if p.split != SplitOptimal {
		x := make([]float64, len(p.meas))
		for k, m := range p.meas {
			x[k] = m.share.Float64() / p.budget.Float64()
			if p.mech == MechanismGaussian {
				x[k] = m.rhoShare.Float64() / p.rho.Float64()
			}
		}
		// Every table is determined by its own measurement, so the only
		// error is an objective that is not finite (weights too large).
		o, err := p.viewObjective()
		if err == nil {
			p.objective, err = o.Eval(x, p.mech != MechanismGaussian, nil)
		}
		if err != nil {
			return fmt.Errorf("release: the weighted total variance: %w", err)
		}
	}
	for i := range p.tables {
		t := &p.tables[i]
		for _, m := range p.meas {
			if m.v != t.View {
				continue
			}
			t.Measured = true
			if p.mech == MechanismGaussian {
				t.RhoShare, t.Sigma, t.Grid = m.rhoShare.Float64(), m.gauss.Sigma(), m.gauss.Grid()
			} else {
				t.Share, t.Scale, t.Grid = m.share.Float64(), m.lap.Scale(), m.lap.Grid()
			}
		}
	}
	return nil
}

// releaseFrom draws the planned release from the exact counts of the views
// Needs lists (more are ignored). Each measured view gets noise calibrated
// to its generic sensitivity under the exact views and a share of the
// budget, the shares adding up to at most the budget (sequential
// composition, or zCDP for Gaussian noise), and every table comes from one
// exact least-squares estimate subject to the invariants
// (docs/hierarchy.md). Every table's cells carry their own margin of error
// (MOE90s: the error's law differs from one node of the hierarchy to
// another).
func (vp *viewsPlan) releaseFrom(ctx context.Context, counts map[domain.View][]float64, r *noise.Rand) (*Release, error) {
	if vp.flat != nil {
		exact := make(map[domain.Cuboid][]float64, len(counts))
		for v, x := range counts {
			if v.Flat() {
				exact[v.Dims] = x
			}
		}
		return vp.flat.releaseFrom(ctx, exact, r)
	}
	p, spec, s := vp.p, vp.spec, vp.p.s
	if err := checkCounts(s, p.needs(), counts, false); err != nil {
		return nil, err
	}
	inv := make([]estimate.Invariant, len(p.exact))
	for i, e := range p.exact {
		x := counts[e]
		for c, n := range x {
			if !(n >= 0) || math.IsInf(n, 0) {
				return nil, fmt.Errorf("release: exact view %s: cell %d is %v; invariants are finite, non-negative counts", s.FormatView(e), c, n)
			}
		}
		inv[i] = estimate.Invariant{Cuboid: e.Dims, View: e, Counts: slices.Clone(x)}
	}
	rel := &Release{
		Schema:          s,
		Tables:          slices.Clone(p.tables),
		Invariants:      inv,
		Budget:          p.budget.Float64(),
		Mechanism:       p.mech,
		Split:           p.split,
		Neighbours:      viewNeighbours(s, p.exact),
		Conditional:     p.conditional,
		Seeded:          r.Seeded(),
		DomainsFromData: spec.DomainsFromData,
		Hierarchy:       s.Dim(p.h).Name,
		Objective:       p.objective,
		Certificate:     p.cert,
	}
	var spent privacy.Budget
	noisy := make([][]float64, len(p.meas))
	for k, m := range p.meas {
		rk := r.Split()
		noisy[k] = slices.Clone(counts[m.v])
		if err := noise.AddParallel(ctx, m.dist(p.mech), rk, noisy[k]); err != nil {
			return nil, fmt.Errorf("release: view %s: %w", s.FormatView(m.v), err)
		}
		if spec.KeepMeasurements {
			if rel.noisy == nil {
				rel.noisy = make([][]float64, len(p.meas))
			}
			rel.noisy[k] = slices.Clone(noisy[k])
		}
		if p.mech == MechanismGaussian {
			spent = privacy.Sequential(spent, privacy.Concentrated(m.rhoShare))
		} else {
			spent = privacy.Sequential(spent, privacy.Pure(m.share))
		}
		rel.Measurements = append(rel.Measurements, m.stated(p.mech))
	}
	if err := rel.stateSpent(spent, p.mech, p.rho, spec.Delta); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := p.estimate(ctx, rel.Tables, inv, noisy); err != nil {
		return nil, err
	}
	rel.Levels = p.levelSummary(rel.Tables)
	return rel, nil
}

func viewNeighbours(s *domain.Schema, exact []domain.View) string {
	names := make([]string, len(exact))
	for i, e := range exact {
		names[i] = s.FormatView(e)
	}
	return inducedNeighbours("views", names)
}

// roundViews is RoundIntegers for a release of views: integer tables made
// top-down through the hierarchy, every child table adding up exactly to
// its parent's and to the invariants (integer.RoundViews). With r nil it is
// MakeNonNegative for a release of views: the same top-down steps without
// the rounding (integer.NonNegativeViews).
func (w *Release) roundViews(ctx context.Context, r *noise.Rand) error {
	tables := make(map[domain.View][]float64, len(w.Tables))
	for _, t := range w.Tables {
		if !t.Public {
			tables[t.View] = t.Counts
		}
	}
	exact := make(map[domain.View][]float64, len(w.Invariants))
	for _, v := range w.Invariants {
		exact[v.View] = v.Counts
	}
	var res map[domain.View]integer.IntegerResult
	var err error
	if r == nil {
		res, err = integer.NonNegativeViews(ctx, w.Schema, tables, exact)
	} else {
		res, err = integer.RoundViews(ctx, w.Schema, tables, exact, r)
	}
	if err != nil {
		return err
	}
	for i := range w.Tables {
		t := &w.Tables[i]
		if t.Public {
			continue
		}
		x, ok := res[t.View]
		if !ok {
			return fmt.Errorf("release: no post-processed table for %s", w.Schema.FormatView(t.View))
		}
		t.Counts = x.Counts
		t.NonNegative, t.NonNegativeResidual = true, x.NonNegativeResidual
		if r != nil {
			t.Integer, t.IntegerExact, t.IntegerMethod, t.IntegerMaxDeviation = true, x.Exact, x.Method, x.MaxDeviation
		}
	}
	return nil
}
