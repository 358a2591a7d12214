package release

// The one release path. A release is a set of tables (views of the schema:
// cuboids whose hierarchical dimensions may stand at coarser levels),
// invariants (views published exactly), a budget and post-processing; one
// table is a release like any other. NewPlan decides everything that does
// not depend on the data (what to measure, with which sensitivity and which
// share, the error of every table, the privacy story) and refuses what it
// cannot do, before any data is read; Plan.Run draws the noise, estimates
// every table from one least-squares fit subject to the invariants, and
// post-processes. The command line, the server and the Beam pipeline all
// release through it.
//
// How a plan estimates is chosen here and only here, from the shape of the
// release:
//
//   - every table and invariant at the finest level of every dimension:
//     the residual basis of the marginals (package estimate/resbasis),
//     exact in linear passes;
//   - one hierarchical dimension at coarser levels, crossed with flat ones:
//     the residual basis over the flat dimensions and two tree passes per
//     residual (package estimate/hier), exact in linear passes;
//   - two or more hierarchical dimensions at coarser levels: the
//     generalised least-squares estimate over the leaves in the query model
//     (package gls), by conjugate gradients to a certified residual
//     (cross.go);
//   - tables of prefix sums or ranges along ordered dimensions: package
//     strategy's measurements (residuals, the marginal lattice, Kronecker
//     products of intervals and p-Identity), measured exactly, and the
//     same generalised least-squares estimate (ranges.go).
//
// What is measured for flat tables is the strategy's choice (split.go:
// requested, marginals, ResidualPlanner's residuals for Gaussian noise,
// residual.go, or the marginal lattice for Laplace noise, lattice.go), and
// what the split minimises the objective's (objective.go).

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/integer"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/sidecar"
)

// Spec says what to release and how.
type Spec struct {
	// Tables are the views to release, without duplicates; Weights, if
	// set, has one weight > 0 per table, its importance in the objective
	// the optimal split minimises (nil: 1 each).
	Tables  []domain.View
	Weights []float64
	// Queries, if set, has one entry per table: what it publishes, its
	// cells (the zero TableQuery) or the prefix sums or ranges along one
	// of its ordered dimensions (ranges.go plans such a release).
	Queries []TableQuery
	// Objective says what the optimal split minimises (objective.go): the
	// weighted sum of every cell's variance (ObjectiveTotal), of each
	// table's mean cell variance (ObjectiveMean), or the largest weighted
	// cell variance of any table (ObjectiveMax: Gaussian noise, tables at
	// their finest levels); the zero value, ObjectiveAuto, is the mean
	// across the levels of a hierarchy and the total otherwise.
	Objective Objective
	// TargetMOE90, if set, has one target margin of error per table (0:
	// none, at least one > 0): the release spends the least budget that
	// meets every target (Epsilon or Rho is then a cap, refused if the
	// targets need more), tables at their finest levels (objective.go).
	TargetMOE90 []float64
	// InvariantCosts asks for what each invariant costs every table: its
	// error in the plans without each invariant and without any
	// (invcost.go), in the sidecar.
	InvariantCosts bool
	// Exact are the invariants: views whose counts are published exactly,
	// which every released table agrees with.
	Exact []domain.View
	// Mechanism is Laplace (pure DP: Epsilon, the default) or Gaussian
	// (zero-concentrated DP: Rho, its (eps, delta) equivalent stated at
	// Delta in (0, 1)).
	Mechanism Mechanism
	Epsilon   privacy.Epsilon
	Rho       privacy.Rho
	Delta     float64
	// Split shares the budget among the measurements (SplitOptimal, the
	// zero value, SplitEqual or SplitSpine), and Strategy chooses what to
	// measure when Measure does not list it.
	Split    Split
	Strategy MeasureStrategy
	Measure  []domain.View
	// Sensitivity, when > 0, replaces the generic sensitivity of every
	// measurement (Laplace only): refused below a value knowdp computes;
	// where knowdp has none, the guarantee becomes conditional on it.
	Sensitivity int
	// NonNegative publishes non-negative counts, Integer non-negative
	// integer counts that keep every invariant exactly where an integer
	// table exists; Tol is the tolerance of their least-squares step (0:
	// 1e-6).
	NonNegative, Integer bool
	Tol                  float64
	// KeepMeasurements keeps the noisy measurements in the release, for
	// SaveMeasurements.
	KeepMeasurements bool
	// DomainsFromData records that the schema's domains were read from the
	// data: the release is then not private, whatever the noise.
	DomainsFromData bool
	// Unit, if set, says the rows belong to privacy units: the release is
	// private per unit and runs with RunUnits (unit.go).
	Unit *Unit
	// unitRows is the K every sensitivity is multiplied by (0: rows), and
	// unitPlan what checkSpec decided about the units (unit.go).
	unitRows int
	unitPlan *unitPlan
}

// Plan is a release decided from the schema and the spec alone.
type Plan struct {
	schema *domain.Schema
	spec   Spec
	// flat or views is set: the engine that estimates. single is set
	// beside flat for a release of one table at the finest levels, which it
	// draws (noise on the table, then the projection onto the invariants)
	// while flat gives its privacy story and errors.
	flat   *WorkloadPlan
	views  *viewsPlan
	cross  *crossPlan
	single *cuboidSpec
	// cuboid is single's release as planned, without counts (Cuboid).
	cuboid *CuboidRelease
	unit   *unitPlan
	// ranges plans a release with prefix or range tables (ranges.go).
	ranges *rangePlan
	// targets are the tables' target margins of error, when the budget
	// was chosen to meet them (objective.go).
	targets []float64
	// costs are what each invariant costs each table (invcost.go).
	costs [][]sidecar.InvariantCost
}

// NewPlan validates the spec and plans the release. Every error it returns
// is decided by the schema and the spec alone, before any data is read.
func NewPlan(s *domain.Schema, spec Spec) (*Plan, error) {
	return NewPlanContext(context.Background(), s, spec)
}

// NewPlanContext is NewPlan under ctx: the optimal split's search stops
// when ctx ends, and the plan fails with ctx's error.
func NewPlanContext(ctx context.Context, s *domain.Schema, spec Spec) (*Plan, error) {
	spec, coarse, err := checkSpec(s, spec)
	if err != nil {
		return nil, err
	}
	p := &Plan{schema: s, spec: spec, unit: spec.unitPlan}
	qs, queries, err := validTableQueries(s, spec)
	if err != nil {
		return nil, err
	}
	switch {
	case spec.TargetMOE90 != nil:
		return planTargets(s, spec, p)
	case spec.Objective == ObjectiveMean && (queries || len(coarse) > 0):
		// The other engines take the mean through the weights.
		spec.Weights = meanWeights(s, spec)
	}
	switch {
	case queries:
		// Prefix and range tables: their own engine (ranges.go).
		if p.ranges, err = planRanges(ctx, s, spec, qs); err != nil {
			return nil, err
		}
	case engineOf(spec, coarse) == engineFlat:
		ws := spec.workload()
		wp, err := newWorkloadPlanContext(ctx, s, ws, false)
		if err != nil {
			return nil, err
		}
		p.flat = wp
		if len(spec.Tables) == 1 && spec.Measure == nil && len(wp.Release.Measurements) <= 1 && (len(wp.Release.Measurements) == 0 || wp.Release.Measurements[0].Cuboid == ws.Cuboids[0] && !wp.Release.Measurements[0].Residual) {
			one := cuboidSpec{Mechanism: spec.Mechanism, Rho: spec.Rho, Delta: spec.Delta, Epsilon: spec.Epsilon,
				Exact: ws.Exact, Cuboid: ws.Cuboids[0], Sensitivity: spec.Sensitivity, DomainsFromData: spec.DomainsFromData,
				NonNegative: spec.NonNegative, Tol: spec.Tol, Integer: spec.Integer, keepNoisy: spec.KeepMeasurements, unitRows: spec.unitRows}
			planned, _, err := planRelease(s, one, false)
			if err != nil {
				return nil, err
			}
			p.single, p.cuboid = &one, planned
		}
	case engineOf(spec, coarse) == engineViews:
		vp, err := newViewsPlanContext(ctx, s, spec.views())
		if err != nil {
			return nil, err
		}
		if err := checkIntegerViews(ctx, s, spec, vp.p); err != nil {
			return nil, err
		}
		p.views = vp
	default:
		cp, err := planCross(s, spec, coarse)
		if err != nil {
			return nil, err
		}
		p.cross = cp
	}
	if spec.InvariantCosts {
		if p.costs, err = invariantCosts(p); err != nil {
			return nil, err
		}
		if p.flat != nil {
			// The planned release's story too (pipelines write it).
			for i := range p.flat.Release.Tables {
				p.flat.Release.Tables[i].WithoutInvariants = p.costs[i]
			}
		}
	}
	return p, nil
}

// Checked is what Check finds of a release without solving its split.
type Checked struct {
	// Measured says the release adds noise to something; when false every
	// table is public (determined by the invariants) and the release costs
	// nothing.
	Measured bool
	// Conditional says the guarantee rests on a sensitivity the caller
	// gave where knowdp has none.
	Conditional bool
	// SplitWork bounds the work of the optimal split's search, in
	// plan.WorkBound's unit (0 when the split is not searched).
	SplitWork float64
}

// Check validates the spec as NewPlan does, but for the split's search,
// which it only prices: for a caller (the server) that decides what a
// release costs, and refuses it, before paying for its planning. Its
// errors are NewPlan's, but for those of the split itself.
func Check(s *domain.Schema, spec Spec) (Checked, error) {
	spec, coarse, err := checkSpec(s, spec)
	if err != nil {
		return Checked{}, err
	}
	if spec.Queries != nil || spec.TargetMOE90 != nil || spec.InvariantCosts {
		// Their planning is their check.
		p, err := NewPlan(s, spec)
		if err != nil {
			return Checked{}, err
		}
		return p.checked(), nil
	}
	switch engineOf(spec, coarse) {
	case engineFlat:
		ws := spec.workload()
		req := ws
		req.Strategy = MeasureRequested
		p, err := measuredPlan(s, req, nil)
		if err != nil {
			return Checked{}, err
		}
		work, err := ws.SplitWork(s)
		if err != nil {
			return Checked{}, err
		}
		return Checked{Measured: len(p.meas) > 0, Conditional: p.conditional, SplitWork: work}, nil
	case engineViews:
		vs := spec.views()
		vp, err := viewPlanOf(s, vs)
		if err != nil {
			return Checked{}, err
		}
		work, err := vs.SplitWork(s)
		if err != nil {
			return Checked{}, err
		}
		if err := checkIntegerViews(context.Background(), s, spec, vp); err != nil {
			return Checked{}, err
		}
		return Checked{Measured: len(vp.meas) > 0, Conditional: vp.conditional, SplitWork: work}, nil
	default:
		cp, err := planCross(s, spec, coarse)
		if err != nil {
			return Checked{}, err
		}
		return Checked{Measured: len(cp.meas) > 0, Conditional: cp.conditional}, nil
	}
}

// checkSpec validates what every engine needs and returns the spec with
// its defaults (the tolerance, the automatic split resolved) and the
// dimensions used at coarser levels.
func checkSpec(s *domain.Schema, spec Spec) (Spec, []int, error) {
	if s == nil {
		return spec, nil, errors.New("release: nil schema")
	}
	switch {
	case len(spec.Tables) == 0:
		return spec, nil, errors.New("release: no tables to release")
	case spec.NonNegative && spec.Integer:
		return spec, nil, errors.New("release: non-negative and integer exclude each other (integer counts are non-negative)")
	case spec.Tol < 0 || math.IsNaN(spec.Tol) || math.IsInf(spec.Tol, 0):
		return spec, nil, fmt.Errorf("release: the tolerance must be a positive number, got %v", spec.Tol)
	}
	if spec.Tol == 0 {
		spec.Tol = 1e-6
	}
	for i, v := range spec.Tables {
		if err := s.CheckView(v); err != nil {
			return spec, nil, fmt.Errorf("release: table %d: %w", i+1, err)
		}
	}
	for i, v := range spec.Exact {
		if err := s.CheckView(v); err != nil {
			return spec, nil, fmt.Errorf("release: exact view %d: %w", i+1, err)
		}
	}
	for i, v := range spec.Measure {
		if err := s.CheckView(v); err != nil {
			return spec, nil, fmt.Errorf("release: measured view %d: %w", i+1, err)
		}
	}
	coarse := coarseDims(spec)
	queries := spec.Queries != nil && slices.ContainsFunc(spec.Queries, func(q TableQuery) bool { return q.Kind != QueryCells })
	if spec.Objective == ObjectiveAuto && spec.TargetMOE90 == nil {
		spec.Objective = ObjectiveTotal
		if len(coarse) > 0 && !queries {
			spec.Objective = ObjectiveMean
		}
	}
	switch {
	case spec.Objective < ObjectiveAuto || spec.Objective > ObjectiveMax:
		return spec, nil, fmt.Errorf("release: unknown objective %v", spec.Objective)
	case spec.Weights != nil && len(spec.Weights) != len(spec.Tables):
		return spec, nil, fmt.Errorf("release: %d weights for %d tables", len(spec.Weights), len(spec.Tables))
	case spec.Objective == ObjectiveMax && (queries || len(coarse) > 0):
		return spec, nil, errors.New("release: the max objective is planned for tables of cells at the finest levels of every dimension; use total or mean")
	}
	if (len(coarse) <= 1 || queries) && spec.Split == SplitAuto {
		spec.Split = SplitOptimal
	}
	if !queries && engineOf(spec, coarse) == engineViews {
		switch {
		case spec.Measure != nil:
			return spec, nil, errors.New("release: a list of views to measure is not supported for tables at coarser levels of a hierarchy yet; leave it to the strategy")
		case spec.Strategy == MeasureMarginals || spec.Strategy == MeasureResiduals || spec.Strategy == MeasureLattice:
			return spec, nil, fmt.Errorf("release: the %v strategy is not supported for tables at coarser levels of a hierarchy yet; use requested or best", spec.Strategy)
		}
	}
	if spec.Unit != nil && spec.unitPlan == nil {
		up, rest, err := planUnit(s, spec)
		if err != nil {
			return spec, nil, err
		}
		spec = rest
		spec.unitPlan, spec.unitRows = up, up.rows()
	}
	return spec, coarse, nil
}

// engine names how a release is estimated.
type engine int

const (
	engineFlat  engine = iota // every table and invariant at its finest levels: the residual basis
	engineViews               // one hierarchy at coarser levels: tree passes
	engineCross               // two or more: the iterative GLS
)

// engineOf chooses the engine, from the dimensions used at coarser levels
// (and the spine split, which needs the hierarchy's levels).
func engineOf(spec Spec, coarse []int) engine {
	switch {
	case len(coarse) == 0 && spec.Split != SplitSpine:
		return engineFlat
	case len(coarse) <= 1:
		return engineViews
	}
	return engineCross
}

// workload returns the spec of a release at the finest levels as the flat
// engine takes it.
func (spec Spec) workload() workloadSpec {
	ws := workloadSpec{Epsilon: spec.Epsilon, Weights: spec.Weights, Split: spec.Split, Sensitivity: spec.Sensitivity,
		DomainsFromData: spec.DomainsFromData, Mechanism: spec.Mechanism, Rho: spec.Rho, Delta: spec.Delta,
		Strategy: spec.Strategy, KeepMeasurements: spec.KeepMeasurements, Objective: spec.Objective, unitRows: spec.unitRows}
	ws.Cuboids, ws.Exact, ws.Measure = cuboidsOf(spec.Tables), cuboidsOf(spec.Exact), cuboidsOf(spec.Measure)
	return ws
}

// views returns the spec of a release across one hierarchy as its engine
// takes it.
func (spec Spec) views() viewSpec {
	return viewSpec{Epsilon: spec.Epsilon, Mechanism: spec.Mechanism, Rho: spec.Rho, Delta: spec.Delta,
		Exact: spec.Exact, Views: spec.Tables, Weights: spec.Weights, Split: spec.Split, Sensitivity: spec.Sensitivity,
		DomainsFromData: spec.DomainsFromData, KeepMeasurements: spec.KeepMeasurements, unitRows: spec.unitRows}
}

// coarseDims returns the dimensions some view of the spec uses at a level
// coarser than its values.
func coarseDims(spec Spec) []int {
	var out []int
	seen := map[int]bool{}
	for _, vs := range [][]domain.View{spec.Tables, spec.Exact, spec.Measure} {
		for _, v := range vs {
			for _, d := range v.Dims.Dims() {
				if v.Up[d] != 0 && !seen[d] {
					seen[d] = true
					out = append(out, d)
				}
			}
		}
	}
	return out
}

// cuboidsOf returns the cuboids of views at their finest levels (nil for
// nil).
func cuboidsOf(vs []domain.View) []domain.Cuboid {
	if vs == nil {
		return nil
	}
	out := make([]domain.Cuboid, len(vs))
	for i, v := range vs {
		out[i] = v.Dims
	}
	return out
}

// Schema returns the schema the plan is for.
func (p *Plan) Schema() *domain.Schema { return p.schema }

// Spec returns the spec the plan was made from.
func (p *Plan) Spec() Spec { return p.spec }

// Needs returns the views whose exact counts Run needs: the invariants, then
// the measured views. Counting them is the only access to the data.
func (p *Plan) Needs() []domain.View {
	if p.ranges != nil {
		return p.ranges.needs()
	}
	if p.flat != nil {
		cs := p.flat.Needs()
		if p.single != nil {
			// The table itself, even when the invariants determine it:
			// counting it is how releaseFrom checks them.
			cs = p.single.Needs()
		}
		out := make([]domain.View, len(cs))
		for i, c := range cs {
			out[i] = domain.ViewOf(c)
		}
		return out
	}
	if p.cross != nil {
		return p.cross.needs()
	}
	return p.views.Needs()
}

// Cuboid returns, for a release of one table at the finest levels that is
// measured itself, that release as planned, without counts: its cuboid,
// sensitivity, noise (scale and grid, or sigma), margin of error and
// invariants (their cuboids, without counts), for pipelines that noise the
// table and project it onto the invariants block by block as Run does; nil
// otherwise. Its privacy story is Workload's; its Seeded is false, whatever
// the generator Run is given. It describes the noisy cuboid and its
// projection: a non-negative or integer step the spec asks for is Run's
// (and its MOE90 does not cover that step).
func (p *Plan) Cuboid() *CuboidRelease {
	if p.cuboid == nil {
		return nil
	}
	c := *p.cuboid
	c.Invariants = slices.Clone(c.Invariants)
	return &c
}

// QueryTables reports whether a table publishes prefix sums or ranges
// rather than cells (Table.Query): such tables are written by
// internal/tablefile's WriteQueryCSV.
func (p *Plan) QueryTables() bool { return p.ranges != nil }

// Workload returns the plan of a release whose tables and invariants all
// stand at their finest levels and whose measurements are cuboids, for
// pipelines that estimate it block by block (WorkloadPlan.Terms); nil
// otherwise (a release that measures residuals is estimated by Run).
func (p *Plan) Workload() *WorkloadPlan {
	if p.flat != nil && p.flat.Release.hasResiduals() {
		return nil
	}
	return p.flat
}

// Run draws the planned release from the exact counts of the views Needs
// lists (more are ignored): noise on every measurement (measurement k from
// the (k+1)-th Split of r), one least-squares estimate of every table
// subject to the invariants, then the post-processing the spec asks for
// (integer rounding from the next Split of r). A seeded r gives the same
// release every time.
func (p *Plan) Run(ctx context.Context, counts map[domain.View][]float64, r *noise.Rand) (*Release, error) {
	if p.unit != nil {
		return nil, errors.New("release: a release per privacy unit bounds the rows first: use RunUnits")
	}
	return p.run(ctx, counts, r)
}

// run is Run by engine, with the plan's objective and invariant costs.
func (p *Plan) run(ctx context.Context, counts map[domain.View][]float64, r *noise.Rand) (*Release, error) {
	w, err := p.runEngine(ctx, counts, r)
	if err != nil {
		return nil, err
	}
	w.ObjectiveKind = p.spec.Objective
	for i := range w.Tables {
		if i < len(p.costs) {
			w.Tables[i].WithoutInvariants = p.costs[i]
		}
	}
	return w, nil
}

// runEngine is run by engine.
func (p *Plan) runEngine(ctx context.Context, counts map[domain.View][]float64, r *noise.Rand) (*Release, error) {
	if p.ranges != nil {
		return p.ranges.run(ctx, counts, r)
	}
	if p.single != nil {
		return p.runSingle(ctx, counts, r)
	}
	if p.cross != nil {
		return p.cross.run(ctx, counts, r)
	}
	var w *Release
	var err error
	if p.flat != nil {
		exact := make(map[domain.Cuboid][]float64, len(counts))
		for v, x := range counts {
			if v.Flat() {
				exact[v.Dims] = x
			}
		}
		w, err = p.flat.releaseFrom(ctx, exact, r)
	} else {
		w, err = p.views.releaseFrom(ctx, counts, r)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case p.spec.Integer:
		err = w.RoundIntegers(ctx, r.Split())
	case p.spec.NonNegative:
		err = w.MakeNonNegative(ctx, p.spec.Tol)
	}
	if err != nil {
		return nil, err
	}
	return w, nil
}

// runSingle draws a release of one table at the finest levels: noise on the
// table, then its projection onto the invariants (and the non-negative or
// integer step), with the privacy story and errors the workload plan of the
// same spec gives, which are the same numbers.
func (p *Plan) runSingle(ctx context.Context, counts map[domain.View][]float64, r *noise.Rand) (*Release, error) {
	tables := make(map[domain.Cuboid][]float64, len(counts))
	for v, x := range counts {
		if v.Flat() {
			tables[v.Dims] = slices.Clone(x)
		}
	}
	rel, err := releaseFrom(ctx, p.schema, tables, *p.single, r)
	if err != nil {
		return nil, err
	}
	w := *p.flat.Release
	w.Seeded = rel.Seeded
	w.Tables = slices.Clone(w.Tables)
	w.Measurements = slices.Clone(w.Measurements)
	w.Invariants = rel.Invariants
	t := &w.Tables[0]
	t.Counts = rel.Counts
	t.NonNegative, t.NonNegativeResidual = rel.NonNegative, rel.NonNegativeResidual
	t.Integer, t.IntegerExact, t.IntegerMethod, t.IntegerMaxDeviation = rel.Integer, rel.IntegerExact, rel.IntegerMethod, rel.IntegerMaxDeviation
	if p.spec.KeepMeasurements {
		w.noisy = [][]float64{}
		if rel.noisy != nil {
			w.noisy = [][]float64{rel.noisy}
		}
	}
	return &w, nil
}

// checkIntegerViews refuses, before any data is read, integer tables across
// a hierarchy that top-down rounding cannot make add up (a level with no
// published table to round it from): it rounds all-zero tables of the same
// views, which depends on the views and the invariants' levels only.
func checkIntegerViews(ctx context.Context, s *domain.Schema, spec Spec, p *viewPlan) error {
	if !spec.Integer || p == nil {
		return nil
	}
	tables := map[domain.View][]float64{}
	for _, t := range p.tables {
		if !t.Public {
			tables[t.View] = make([]float64, s.ViewSize(t.View))
		}
	}
	if len(tables) == 0 {
		return nil
	}
	exact := map[domain.View][]float64{}
	for _, e := range p.exact {
		exact[e] = make([]float64, s.ViewSize(e))
	}
	if _, err := integer.RoundViews(ctx, s, tables, exact, noise.NewSeeded(1)); err != nil {
		return fmt.Errorf("release: integer: %w", err)
	}
	return nil
}

// checked is what Check reports of a plan made in full.
func (p *Plan) checked() Checked {
	switch {
	case p.ranges != nil:
		return Checked{Measured: len(p.ranges.meas) > 0, Conditional: p.ranges.conditional}
	case p.flat != nil:
		return Checked{Measured: len(p.flat.Release.Measurements) > 0, Conditional: p.flat.Release.Conditional}
	case p.views != nil && p.views.flat != nil:
		return Checked{Measured: len(p.views.flat.Release.Measurements) > 0, Conditional: p.views.flat.Release.Conditional}
	case p.views != nil:
		return Checked{Measured: len(p.views.p.meas) > 0, Conditional: p.views.p.conditional}
	default:
		return Checked{Measured: len(p.cross.meas) > 0, Conditional: p.cross.conditional}
	}
}
