package release

// A workload release: several cuboids released together under one budget,
// from one weighted least-squares estimate of the base table subject to the
// invariants, so that every released table agrees with every other and with
// the invariants exactly.
//
// The estimate and its variances are package estimate/resbasis's: the
// residual basis of the marginals (McKenna et al.; ResidualPlanner's
// Theorem) splits the least-squares problem into one weighted mean per
// residual, exact in linear passes. This file plans what resbasis solves
// (what to measure, each measurement's noise and share) and publishes it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/knowdp/knowdp/contrast"
	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate"
	"github.com/knowdp/knowdp/estimate/resbasis"
	"github.com/knowdp/knowdp/gls"
	"github.com/knowdp/knowdp/internal/tensor"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/sensitivity"
	"github.com/knowdp/knowdp/sidecar"
)

// Split says how a workload's budget is shared among its measurements.
type Split int

const (
	// SplitOptimal chooses the shares that minimise the weighted total
	// variance of the released tables.
	SplitOptimal Split = iota
	// SplitEqual gives every measured cuboid the same share.
	SplitEqual
	// SplitSpine, for views at several levels of a hierarchy, gives every
	// measured level of the hierarchy the same
	// share, shared equally by the views measured at that level: the
	// Census TopDown's per-level budget.
	SplitSpine
	// SplitAuto is SplitOptimal wherever knowdp certifies the optimum
	// (flat dimensions, or one hierarchy crossed with them), SplitSpine
	// otherwise; the release states the split it took.
	SplitAuto
)

// String returns "optimal", "equal", "spine" or "auto".
func (sp Split) String() string {
	switch sp {
	case SplitOptimal:
		return "optimal"
	case SplitEqual:
		return "equal"
	case SplitSpine:
		return "spine"
	case SplitAuto:
		return "auto"
	}
	return fmt.Sprintf("Split(%d)", int(sp))
}

// ParseSplit parses "auto", "optimal", "equal" or "spine".
func ParseSplit(name string) (Split, error) {
	switch name {
	case "optimal":
		return SplitOptimal, nil
	case "equal":
		return SplitEqual, nil
	case "spine":
		return SplitSpine, nil
	case "auto":
		return SplitAuto, nil
	}
	return 0, fmt.Errorf("split %q: want auto, optimal, equal or spine", name)
}

// workloadSpec says which cuboids to release together and how.
type workloadSpec struct {
	// Epsilon is the total privacy loss of the release (pure DP, with
	// respect to the neighbours induced by the exact cuboids).
	Epsilon privacy.Epsilon
	// Exact lists the invariants: cuboids published exactly, which every
	// released table agrees with.
	Exact []domain.Cuboid
	// Cuboids are the tables to release, without duplicates.
	Cuboids []domain.Cuboid
	// Weights, if set, has one weight > 0 per cuboid: its importance in the
	// weighted total variance that SplitOptimal minimises. Nil means 1 each.
	Weights []float64
	// Split chooses the shares of Epsilon (default SplitOptimal).
	Split Split
	// Sensitivity, when > 0, replaces the generic sensitivity of every
	// measured cuboid. It must not be below a sensitivity the library can
	// compute (the release is refused, naming it); where none is known
	// (ErrNoClosedForm) the guarantee becomes conditional on it.
	Sensitivity int
	// DomainsFromData records that the schema's domains were read from the
	// data: the release is then not private, whatever the noise.
	DomainsFromData bool
	// Measure, if set, lists the cuboids to add noise to instead of the
	// requested ones (a measurement strategy: the base cuboid, a few large
	// cuboids...). Every requested cuboid must then be computable from them
	// and the invariants; ExpectedRMSE compares strategies before release.
	Measure []domain.Cuboid
	// Mechanism is Laplace (pure Epsilon, the default) or Gaussian: exact
	// discrete Gaussian noise calibrated to each measured cuboid's L2
	// generic sensitivity, with shares of Rho (zCDP: the shares' rho add
	// up), the equivalent (eps, delta) guarantee stated at Delta in (0, 1).
	// Epsilon and Sensitivity are then unset.
	Mechanism Mechanism
	Rho       privacy.Rho
	Delta     float64
	// Strategy chooses what to measure when Measure is not set: the
	// requested cuboids (the default), the marginals under them
	// (MeasureMarginals, which needs SplitOptimal) or the better of the two
	// (MeasureBest; with another split than SplitOptimal, the requested
	// cuboids).
	Strategy MeasureStrategy
	// KeepMeasurements keeps a copy of the noisy measurements in the
	// release, for SaveMeasurements.
	KeepMeasurements bool
	// unitRows, when above 1, is the most rows a privacy unit keeps: every
	// sensitivity is that many times the row-level one (unit.go).
	unitRows int
	// Objective says what the optimal split minimises (objective.go): the
	// weighted sum of every cell's variance (the zero value), of each
	// table's mean cell variance, or the largest weighted cell variance
	// (Gaussian noise).
	Objective Objective
	// residuals are residual measurements (Gaussian only) to plan besides
	// Measure, set by the residuals strategy.
	residuals []domain.Cuboid
}

// Table is one released cuboid of a workload.
type Table struct {
	Cuboid domain.Cuboid
	// View is the table's view in a release of views at coarser levels of
	// a hierarchy; it is zero in a flat workload's tables,
	// whose view is the cuboid itself: TableView gives it in both cases.
	View domain.View
	// Query says what the table publishes: its cells (the zero value), or
	// the prefix sums or ranges along an ordered dimension (Counts and
	// MOE90s then hold one value per query, in TableTerm's row order;
	// internal/tablefile's WriteQueryCSV writes them).
	Query TableQuery
	// MOE90s, when set, is the margin of error of each cell, in the order
	// of Counts: across a hierarchy the law of the error differs from node
	// to node. MOE90 is then the largest of them.
	MOE90s []float64
	// absErrSum and moeSum are the sums of the cells' expected absolute
	// errors and MOE90s, and moeCoverage how far the coverage of MOE90s may
	// be from 90%, for the level summary.
	absErrSum, moeSum, moeCoverage float64
	// Counts are the released counts, row-major over Cuboid's dimensions.
	Counts []float64
	// MOE90 is the margin of error of every cell: the true count lies
	// within Counts[i] ± MOE90 with probability 90% under the mechanism,
	// computed from the noise alone. It is 0 for a public table.
	MOE90 float64
	// Variance is the variance of the error of every cell.
	Variance float64
	// Weight is the table's weight in the split's objective.
	Weight float64
	// TargetMOE90 is the margin of error the release was planned to meet
	// (Spec.TargetMOE90), 0 when none was set.
	TargetMOE90 float64
	// WithoutInvariants is the table's error in the plans without each
	// invariant and without any (Spec.InvariantCosts).
	WithoutInvariants []sidecar.InvariantCost
	// Measured is true when noise was added to this cuboid, with Share of
	// the budget, calibrated to Sensitivity (from SensitivityRule), at
	// Laplace scale Scale on grid Grid. A table that is not measured is
	// public (Sensitivity 0) or estimated from the measurements of larger
	// cuboids alone (the optimal split gave it no share, or Measure did
	// not list it); Sensitivity is then its generic sensitivity.
	Measured        bool
	Share           float64
	Sensitivity     int
	SensitivityRule string
	Scale, Grid     float64
	// Public is true when the table is computed from the invariants alone.
	Public bool
	// Sigma is the standard deviation of a Gaussian measurement's noise
	// (Scale is then 0) and RhoShare its share of rho.
	Sigma, RhoShare float64
	// Post-processing (see MakeNonNegative and RoundIntegers):
	// NonNegative tables had their negative counts removed, leaving a KKT
	// residual of NonNegativeResidual; Integer tables were rounded to
	// integers by IntegerMethod, keeping every margin constraint exactly
	// when IntegerExact, and otherwise within IntegerMaxDeviation.
	NonNegative         bool
	NonNegativeResidual float64
	Integer             bool
	IntegerExact        bool
	IntegerMethod       string
	IntegerMaxDeviation float64
}

// TableView returns the view the table is released at.
func (t Table) TableView() domain.View { return measuredView(t.Cuboid, t.View) }

// CellMOE90 is the moe90 column of the table: MOE90, plus 1 for an integer
// table (rounding moves a cell by less than 1).
func (t Table) CellMOE90() float64 {
	if t.Integer {
		return t.MOE90 + 1
	}
	return t.MOE90
}

// Measurement is one noisy cuboid of a workload release.
type Measurement struct {
	Cuboid domain.Cuboid
	// View is the measured view in a release of views (zero otherwise).
	View domain.View
	// Share is its part of the budget; Sensitivity (from SensitivityRule)
	// and Share give the Laplace scale Scale, on grid Grid.
	Share           float64
	Sensitivity     int
	SensitivityRule string
	Scale, Grid     float64
	// A Gaussian measurement: its share of rho, its L2 generic sensitivity
	// (and rule) and the noise's standard deviation; Share and Scale are 0.
	RhoShare, L2Sensitivity, Sigma float64
	L2Rule                         string
	// Residual is true when the measurement is not the cuboid's cells but
	// its residual: the Π(n_i - 1) Helmert contrasts of the cuboid's
	// dimensions (ResidualPlanner), Sigma on every normalised contrast
	// (residual.go).
	Residual bool
	// Queries, when set, says what was measured along each dimension of
	// Cuboid when it is not the cells (a release of prefix or range
	// tables: hierarchical intervals, p-Identity...), and L1Sensitivity is
	// then its L1 sensitivity (Sensitivity is its ceiling).
	Queries       string
	L1Sensitivity float64
}

// TableView returns the view the measurement is of.
func (m Measurement) TableView() domain.View { return measuredView(m.Cuboid, m.View) }

// Release is a set of tables released together, with its privacy
// story.
type Release struct {
	Schema *domain.Schema
	Tables []Table
	// Measurements are the noisy cuboids the tables are estimated from.
	Measurements []Measurement
	// Invariants are the exact cuboids, published as they are.
	Invariants []estimate.Invariant
	// Epsilon is the privacy loss of the whole release: the sum of the
	// measurements' shares (sequential composition), at most Budget.
	Epsilon, Budget float64
	// Mechanism is the noise; for a Gaussian release Rho is the zCDP loss
	// (the sum of the shares, at most RhoBudget) and Epsilon its equivalent
	// at Delta (Budget is then 0).
	Mechanism             Mechanism
	Rho, RhoBudget, Delta float64
	Split                 Split
	// Strategy is what was measured: MeasureRequested, MeasureMarginals,
	// or -1 when the caller listed the measurements (Spec.Measure).
	Strategy MeasureStrategy
	// Objective is the weighted total variance of the tables,
	// Σ_C w_C |C| Var ŷ_C, at the shares given; with the optimal split,
	// Certificate bounds how far it can be from the minimum.
	Objective   float64
	Certificate *SplitCertificate
	// ObjectiveKind is what Objective is (Spec.Objective).
	ObjectiveKind Objective
	// LowerBound, where one is known, bounds Objective from below over
	// every strategy of the mechanism class (not only the families
	// searched), with what it bounds.
	LowerBound *sidecar.Bound
	// solve is the certificate of an iterative estimate (across two or more
	// hierarchies); nil where the estimate is exact in closed form.
	solve *gls.Certificate
	// noisy holds the noisy measurements, in the order of Measurements,
	// when the spec asked to keep them.
	noisy [][]float64
	// Neighbours describes the neighbour relation the guarantee is about.
	Neighbours string
	// Conditional is true when a caller-given sensitivity replaced one the
	// library could not compute: the guarantee holds only if it is right.
	Conditional bool
	// Seeded is true when the noise came from a seeded generator;
	// DomainsFromData when the schema came from the data. Either makes the
	// release NOT private.
	Seeded, DomainsFromData bool
	// Hierarchy names the dimension whose levels a release of views
	// crosses (empty for a flat workload), and Levels summarises the
	// error of its tables level by level.
	Hierarchy string
	Levels    []sidecar.LevelError
	// Unit is set for a release per privacy unit (unit.go).
	Unit *UnitStory
	// family names the strategy family package strategy chose (a release
	// of prefix or range tables).
	family string
}

// measurement is one noisy cuboid of the plan, or one residual of a
// cuboid (resid: its Helmert contrasts, residual.go).
type measurement struct {
	c     domain.Cuboid
	resid bool
	sens  int
	rule  string
	share privacy.Epsilon
	lap   noise.Laplace
	v     float64 // per-cell noise variance
	// A Gaussian measurement: its L2 generic sensitivity (and rule), its
	// share of rho and its noise.
	l2       float64
	l2rule   string
	rhoShare privacy.Rho
	gauss    noise.Gaussian
	// rn is a residual measurement's noise (v is then its variance on every
	// normalised contrast).
	rn contrast.Noise
}

// weightOf is the weight of table i (named name in errors): weights[i],
// finite and > 0, or 1 when no weights are given.
func weightOf(weights []float64, i int, name string) (float64, error) {
	if weights == nil {
		return 1, nil
	}
	if w := weights[i]; !(w > 0) || math.IsInf(w, 0) {
		return 0, fmt.Errorf("release: weight of %s must be finite and > 0, got %v", name, w)
	}
	return weights[i], nil
}

// stateSpent states what the measurements spent: epsilon under Laplace
// noise; under Gaussian noise rho, the budget it came from and its (eps,
// delta) equivalent at delta.
func (rel *Release) stateSpent(spent privacy.Budget, mech Mechanism, budget privacy.Rho, delta float64) error {
	rel.Epsilon = spent.Epsilon()
	if mech != MechanismGaussian {
		return nil
	}
	rel.Budget, rel.Rho, rel.RhoBudget, rel.Delta = 0, spent.Rho(), budget.Float64(), delta
	if rel.Rho > 0 {
		var err error
		if rel.Epsilon, err = privacy.EpsilonFor(rel.Rho, delta); err != nil {
			return fmt.Errorf("release: %w", err)
		}
	}
	return nil
}

// dist is the measurement's noise distribution.
func (m measurement) dist(mech Mechanism) noise.Adder {
	if mech == MechanismGaussian {
		return m.gauss
	}
	return m.lap
}

// workloadPlan is everything about a workload release that does not depend
// on the data: which cuboids are public or measured, the shares, the
// estimator's weights and the error of every table.
type workloadPlan struct {
	s           *domain.Schema
	sizes       []int
	exact       []domain.Cuboid
	tables      []Table
	meas        []measurement
	basis       *resbasis.Basis
	budget      privacy.Epsilon
	mech        Mechanism
	rho         privacy.Rho
	split       Split
	conditional bool
	unitRows    int // see workloadSpec.unitRows
	// strategy is what was measured (-1: the caller's list); start, if
	// set, is a split to start the optimal split's search from; cert is
	// the optimal split's certificate and objValue the objective at the
	// shares given.
	strategy MeasureStrategy
	start    []float64
	cert     *SplitCertificate
	objValue float64
	// ncands is the number of candidate measurements the split chose
	// among, latticeCands the cuboids package strategy searched (lattice).
	ncands, latticeCands int
	// objKind is what the split minimises (maxVar: ObjectiveMax).
	objKind Objective
	maxVar  bool
}

func (p *workloadPlan) needs() []domain.Cuboid {
	out := slices.Clone(p.exact)
	for _, m := range p.meas {
		if !slices.Contains(out, m.c) {
			out = append(out, m.c)
		}
	}
	return out
}

// planWorkload is planWorkloadCtx without a deadline.
func planWorkload(s *domain.Schema, spec workloadSpec) (*workloadPlan, error) {
	return planWorkloadCtx(context.Background(), s, spec)
}

// planWorkloadCtx validates the spec, chooses what to measure, classifies
// the requested cuboids and residuals, and chooses the shares. Every error
// it returns is decided by the schema and the spec alone, but for ctx's:
// the optimal split stops when ctx ends.
func planWorkloadCtx(ctx context.Context, s *domain.Schema, spec workloadSpec) (*workloadPlan, error) {
	switch {
	case spec.Strategy < MeasureRequested || spec.Strategy > MeasureLattice:
		return nil, fmt.Errorf("release: unknown strategy %v", spec.Strategy)
	case spec.Strategy != MeasureRequested && spec.Measure != nil:
		return nil, fmt.Errorf("release: strategy %v chooses the measurements; leave Measure unset", spec.Strategy)
	case spec.Strategy == MeasureMarginals && spec.Split != SplitOptimal:
		return nil, errors.New("release: strategy marginals needs the optimal split (an equal split among every marginal under the workload wastes the budget)")
	case (spec.Strategy == MeasureResiduals || spec.Strategy == MeasureLattice) && spec.Split != SplitOptimal:
		return nil, fmt.Errorf("release: strategy %v needs the optimal split (it chooses the shares with the measurements)", spec.Strategy)
	case spec.Strategy == MeasureResiduals && spec.Mechanism != MechanismGaussian:
		return nil, errors.New("release: strategy residuals is planned for Gaussian noise (ResidualPlanner's closed forms); with Laplace noise use lattice or best")
	case spec.Strategy == MeasureLattice && spec.Mechanism == MechanismGaussian:
		return nil, errors.New("release: strategy lattice is planned for Laplace noise; with Gaussian noise use residuals or best, which reach the least error of every strategy on marginal workloads")
	case spec.Strategy == MeasureBest && spec.Split != SplitOptimal:
		spec.Strategy = MeasureRequested
	}
	if spec.Strategy != MeasureRequested {
		return planStrategy(ctx, s, spec)
	}
	p, err := planMeasured(ctx, s, spec, nil)
	if err == nil && spec.Measure != nil {
		p.strategy = -1
	}
	return p, err
}

// planMeasured plans a release that measures spec.Measure, or else the
// requested cuboids; start, if not nil, is a split to start the optimal
// split's search from (one fraction per measurement).
func planMeasured(ctx context.Context, s *domain.Schema, spec workloadSpec, start []float64) (*workloadPlan, error) {
	p, err := measuredPlan(s, spec, start)
	if err != nil {
		return nil, err
	}
	if err := p.chooseShares(ctx); err != nil {
		return nil, err
	}
	p.finishErrors()
	if err := p.finishObjective(); err != nil {
		return nil, err
	}
	return p, nil
}

// measuredPlan is planMeasured up to the shares: what is measured, the
// classification and the objective's terms, without solving the split.
func measuredPlan(s *domain.Schema, spec workloadSpec, start []float64) (*workloadPlan, error) {
	if s == nil {
		return nil, errors.New("release: nil schema")
	}
	if len(spec.Cuboids) == 0 {
		return nil, errors.New("release: no cuboids to release")
	}
	if spec.Weights != nil && len(spec.Weights) != len(spec.Cuboids) {
		return nil, fmt.Errorf("release: %d weights for %d cuboids", len(spec.Weights), len(spec.Cuboids))
	}
	if spec.Sensitivity < 0 {
		return nil, fmt.Errorf("release: sensitivity must be positive, got %d", spec.Sensitivity)
	}
	if spec.Split != SplitOptimal && spec.Split != SplitEqual {
		return nil, fmt.Errorf("release: unknown split %v", spec.Split)
	}
	gaussian := spec.Mechanism == MechanismGaussian
	switch {
	case gaussian && !spec.Epsilon.IsZero():
		return nil, errors.New("release: a Gaussian release is calibrated to rho; leave epsilon unset")
	case gaussian && spec.Sensitivity != 0:
		return nil, errors.New("release: a Gaussian release is calibrated to the L2 generic sensitivities, which cannot be overridden")
	case gaussian && !(spec.Delta > 0 && spec.Delta < 1):
		return nil, fmt.Errorf("release: a Gaussian release states its equivalent (eps, delta) guarantee at a delta in (0, 1), got %v", spec.Delta)
	case !gaussian && (!spec.Rho.IsZero() || spec.Delta != 0):
		return nil, errors.New("release: rho and delta apply to Gaussian releases only")
	case spec.Objective < ObjectiveAuto || spec.Objective > ObjectiveMax:
		return nil, fmt.Errorf("release: unknown objective %v", spec.Objective)
	case spec.Objective == ObjectiveMax && !gaussian:
		return nil, errors.New("release: the max objective (the largest weighted cell variance) is planned for Gaussian noise, where the split is convex and its dual certifies it; with Laplace noise use total or mean")
	}
	for i, e := range spec.Exact {
		if err := sensitivity.CheckCuboid(s, e, fmt.Sprintf("release: exact cuboid %d", i+1)); err != nil {
			return nil, err
		}
	}
	p := &workloadPlan{s: s, sizes: s.Sizes(), exact: dedupe(spec.Exact), budget: spec.Epsilon, mech: spec.Mechanism, rho: spec.Rho, split: spec.Split, start: start, unitRows: spec.unitRows,
		objKind: spec.Objective, maxVar: spec.Objective == ObjectiveMax}
	for i, c := range spec.Cuboids {
		if err := sensitivity.CheckCuboid(s, c, fmt.Sprintf("release: cuboid %d", i+1)); err != nil {
			return nil, err
		}
		for j, d := range spec.Cuboids[:i] {
			if c == d {
				return nil, fmt.Errorf("release: cuboid %s is requested twice (cuboids %d and %d)", s.Format(c), j+1, i+1)
			}
		}
		w, err := weightOf(spec.Weights, i, "cuboid "+s.Format(c))
		if err != nil {
			return nil, err
		}
		if spec.Objective == ObjectiveMean {
			// The weight of the table's mean cell variance.
			w /= float64(s.CuboidSize(c))
		}
		t := Table{Cuboid: c, Weight: w}
		sens, err := p.sensitivity(c, spec.Sensitivity)
		if err != nil {
			return nil, err
		}
		t.Sensitivity, t.SensitivityRule, t.Public = sens.Value, sens.Rule, sens.Value == 0
		if !t.Public && spec.Measure == nil {
			p.meas = append(p.meas, measurement{c: c, sens: sens.Value, rule: sens.Rule})
		}
		p.tables = append(p.tables, t)
	}
	for i, c := range spec.Measure {
		if err := sensitivity.CheckCuboid(s, c, fmt.Sprintf("release: measured cuboid %d", i+1)); err != nil {
			return nil, err
		}
		for j, d := range spec.Measure[:i] {
			if c == d {
				return nil, fmt.Errorf("release: cuboid %s is measured twice (measured cuboids %d and %d)", s.Format(c), j+1, i+1)
			}
		}
		sens, err := p.sensitivity(c, spec.Sensitivity)
		if err != nil {
			return nil, err
		}
		if sens.Value == 0 {
			return nil, fmt.Errorf("release: measured cuboid %s is determined by the exact cuboids (%s): noise on it would be wasted", s.Format(c), sens.Rule)
		}
		p.meas = append(p.meas, measurement{c: c, sens: sens.Value, rule: sens.Rule})
	}
	switch {
	case len(p.meas) > 0 && gaussian && spec.Rho.IsZero():
		return nil, errors.New("release: rho must be set (> 0)")
	case len(p.meas) > 0 && !gaussian && !(spec.Epsilon.Float64() > 0):
		return nil, errors.New("release: epsilon must be set (> 0)")
	}
	if gaussian {
		for k := range p.meas {
			m := &p.meas[k]
			l2, err := sensitivity.GenericL2Sensitivity(s, p.exact, m.c)
			if err == nil {
				l2, err = unitL2(l2, p.unitRows)
			}
			if err != nil {
				return nil, fmt.Errorf("release: cuboid %s: %w", s.Format(m.c), err)
			}
			m.l2, m.l2rule = l2.Value, l2.Rule
		}
		if err := p.addResiduals(spec.residuals); err != nil {
			return nil, err
		}
	}
	p.ncands = len(p.meas)
	p.classify()
	for _, t := range p.tables {
		for a := range p.basis.Subsets(t.Cuboid) {
			r := p.basis.Res[a]
			switch {
			case r.Status != resbasis.Free:
			case t.Public:
				// GenericSensitivity is 0 exactly when an invariant
				// determines the cuboid: when every residual of it is fixed.
				return nil, fmt.Errorf("release: cuboid %s has generic sensitivity 0 but is not determined by the exact cuboids", s.Format(t.Cuboid))
			case len(r.Covers) == 0:
				return nil, fmt.Errorf("release: cuboid %s cannot be estimated: no measured cuboid contains %s and no exact cuboid fixes it", s.Format(t.Cuboid), s.Format(a))
			}
		}
	}
	if p.start != nil && len(p.start) != len(p.meas) {
		p.start = nil
	}
	return p, nil
}

// sensitivity returns the sensitivity a measurement of c is calibrated to:
// the generic sensitivity (0 for a public cuboid), or the caller's override
// where it is at least that, or where none is known (the release is then
// conditional).
func (p *workloadPlan) sensitivity(c domain.Cuboid, override int) (sensitivity.Sensitivity, error) {
	sens, err := p.rowSensitivity(c, override)
	if err != nil {
		return sens, err
	}
	return unitL1(sens, p.unitRows)
}

// rowSensitivity is sensitivity for rows (one row per unit).
func (p *workloadPlan) rowSensitivity(c domain.Cuboid, override int) (sensitivity.Sensitivity, error) {
	s := p.s
	sens, err := sensitivity.GenericSensitivity(s, p.exact, c)
	switch {
	case errors.Is(err, sensitivity.ErrNoClosedForm) && override > 0:
		p.conditional = true
		return sensitivity.Sensitivity{Value: override, Rule: "given by the caller: no generic sensitivity is known for these exact cuboids, so the guarantee is conditional on it"}, nil
	case err != nil:
		return sensitivity.Sensitivity{}, fmt.Errorf("release: cuboid %s: %w", s.Format(c), err)
	case sens.Value == 0 || override == 0:
		return sens, nil
	case override < sens.Value:
		return sensitivity.Sensitivity{}, fmt.Errorf("release: sensitivity %d is below the generic sensitivity %d of cuboid %s (%s)",
			override, sens.Value, s.Format(c), sens.Rule)
	}
	return sensitivity.Sensitivity{Value: override, Rule: fmt.Sprintf("given by the caller, at least the generic sensitivity %d (%s)", sens.Value, sens.Rule)}, nil
}

// classify builds the residual basis of the requested cuboids under the
// invariants and the measurements (resbasis.New).
func (p *workloadPlan) classify() {
	tables := make([]resbasis.Table, len(p.tables))
	for i, t := range p.tables {
		tables[i] = resbasis.Table{Cuboid: t.Cuboid, Weight: t.Weight}
	}
	p.basis = resbasis.New(p.sizes, p.exact, tables, p.basisMeasurements())
}

// basisMeasurements returns the measurements as resbasis takes them.
func (p *workloadPlan) basisMeasurements() []resbasis.Measurement {
	out := make([]resbasis.Measurement, len(p.meas))
	for k, m := range p.meas {
		out[k] = m.basis()
	}
	return out
}

// basis returns the measurement as resbasis takes it.
func (m measurement) basis() resbasis.Measurement {
	return resbasis.Measurement{Cuboid: m.c, Residual: m.resid, Variance: m.v}
}

// chooseShares sets every measurement's share of the budget (multiples of
// the accounting step, summing to at most the budget) and its noise.
// Measurements the optimal split gives no share are dropped.
func (p *workloadPlan) chooseShares(ctx context.Context) error {
	if len(p.meas) == 0 {
		return nil
	}
	frac := make([]float64, len(p.meas))
	for k := range frac {
		frac[k] = 1 / float64(len(frac))
	}
	if p.split == SplitOptimal {
		var err error
		if p.maxVar {
			frac, err = p.minimaxFractions(ctx)
		} else {
			frac, err = p.optimalFractions(ctx)
		}
		if err != nil {
			return err
		}
	}
	total := p.budget.Steps()
	if p.mech == MechanismGaussian {
		total = p.rho.Steps()
	}
	var kept []measurement
	for k, m := range p.meas {
		steps := int64(math.Floor(frac[k] * float64(total)))
		if steps <= 0 {
			if p.split == SplitOptimal && p.coveredWithout(k, frac) {
				continue
			}
			return fmt.Errorf("release: the budget %v is too small to share among %d measurements", float64(total)*privacy.EpsilonStep, len(p.meas))
		}
		if p.mech == MechanismGaussian {
			share, err := privacy.RhoFromSteps(steps)
			if err != nil {
				return fmt.Errorf("release: share of cuboid %s: %w", p.s.Format(m.c), err)
			}
			if m.resid {
				rn, err := contrast.NewNoise(tensor.SubSizes(p.sizes, m.c), m.l2, share.Float64())
				if err != nil {
					return fmt.Errorf("release: residual %s: %w", p.s.Format(m.c), err)
				}
				m.rhoShare, m.rn, m.v = share, rn, rn.Variance()
				kept = append(kept, m)
				continue
			}
			g, err := noise.NewGaussian(m.l2, share.Float64())
			if err != nil {
				return fmt.Errorf("release: cuboid %s: %w", p.s.Format(m.c), err)
			}
			m.rhoShare, m.gauss, m.v = share, g, g.Variance()
			kept = append(kept, m)
			continue
		}
		// steps * 2^-40 is exact, so NewEpsilon keeps it as it is.
		share, err := privacy.NewEpsilon(float64(steps) * privacy.EpsilonStep)
		if err != nil {
			return fmt.Errorf("release: share of cuboid %s: %w", p.s.Format(m.c), err)
		}
		m.share = share
		lap, err := noise.NewLaplace(float64(m.sens), m.share.Float64())
		if err != nil {
			return fmt.Errorf("release: cuboid %s: %w", p.s.Format(m.c), err)
		}
		m.lap, m.v = lap, lap.Variance()
		kept = append(kept, m)
	}
	p.meas = kept
	p.setCoverage()
	return nil
}

// setCoverage records, for every free residual, the measurements covering
// it and W_A, and the measured tables' noise.
func (p *workloadPlan) setCoverage() {
	p.basis.Cover(p.basisMeasurements())
	for _, m := range p.meas {
		if m.resid {
			continue // no table is measured itself
		}
		for i := range p.tables {
			if t := &p.tables[i]; t.Cuboid == m.c {
				t.Measured, t.Share, t.Scale, t.Grid = true, m.share.Float64(), m.lap.Scale(), m.lap.Grid()
				if p.mech == MechanismGaussian {
					t.Sigma, t.Grid, t.RhoShare = m.gauss.Sigma(), m.gauss.Grid(), m.rhoShare.Float64()
				}
				t.Sensitivity, t.SensitivityRule = m.sens, m.rule
			}
		}
	}
}

// measurements returns the plan's measurements for the release.
func (p *workloadPlan) measurements() []Measurement {
	out := make([]Measurement, len(p.meas))
	for k, m := range p.meas {
		out[k] = Measurement{Cuboid: m.c, Share: m.share.Float64(), Sensitivity: m.sens, SensitivityRule: m.rule, Scale: m.lap.Scale(), Grid: m.lap.Grid()}
		if p.mech == MechanismGaussian {
			out[k].RhoShare, out[k].L2Sensitivity, out[k].L2Rule = m.rhoShare.Float64(), m.l2, m.l2rule
			out[k].Sigma, out[k].Grid = m.gauss.Sigma(), m.gauss.Grid()
			if m.resid {
				out[k].Sigma, out[k].Grid, out[k].Residual = m.rn.Sigma(), m.rn.Grid(), true
			}
		}
	}
	return out
}

// coveredWithout reports whether every free residual of measurement k is
// covered by another measurement with a positive fraction.
func (p *workloadPlan) coveredWithout(k int, frac []float64) bool {
	for a := range p.basis.Informs(p.meas[k].basis()) {
		r := p.basis.Res[a]
		if r.Status != resbasis.Free || r.Weight == 0 {
			continue // fixed, or no table needs it
		}
		ok := false
		for _, j := range r.Covers {
			ok = ok || (j != k && frac[j] > 0)
		}
		if !ok {
			return false
		}
	}
	return true
}

// finishErrors sets every table's per-cell variance and margin of error.
func (p *workloadPlan) finishErrors() {
	for i := range p.tables {
		t := &p.tables[i]
		if t.Public {
			continue
		}
		t.Variance = p.basis.CellVariance(t.Cuboid)
		t.MOE90 = p.moe90(t.Cuboid)
	}
}

// objective is the weighted total variance Σ_C w_C |C| Var ŷ_C as a
// function of the budget fractions (resbasis.Objective), with the
// measurements' coefficients: eps²/(2 S_k² |C_k|) for Laplace noise,
// 2 rho/(l2_k² |C_k|) for Gaussian noise.
func (p *workloadPlan) objective() resbasis.Objective {
	power := 2.0
	c := make([]float64, 0, len(p.meas))
	eps := p.budget.Float64()
	for _, m := range p.meas {
		if p.mech == MechanismGaussian {
			// 1/v = 2 rho x / l2^2 for sigma^2 = l2^2 / (2 rho x).
			power = 1
			c = append(c, 2*p.rho.Float64()/(m.l2*m.l2*float64(p.s.CuboidSize(m.c))))
			continue
		}
		s := float64(m.sens)
		c = append(c, eps*eps/(2*s*s*float64(p.s.CuboidSize(m.c))))
	}
	return p.basis.NewObjective(c, power)
}

func normalise(x []float64) {
	var sum float64
	for _, v := range x {
		sum += v
	}
	for i := range x {
		x[i] /= sum
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// release draws the planned release from the exact counts of the cuboids
// needs lists (more are ignored; the dense base cube is never needed).
//
// Each measured cuboid gets noise calibrated to its generic sensitivity
// under the invariants (Lemma 4.4) and its share of the budget; the shares
// add up to at most the budget (sequential composition, or zCDP for
// Gaussian noise), so the release is private with respect to the
// worst-case induced neighbours. Every table is then derived from one
// weighted least-squares estimate subject to the invariants (derived in
// docs/release.md), which is post-processing. Noise for each measurement
// comes from r.Split() taken in the measurements' order, so a seeded
// release is reproducible.
func (p *workloadPlan) release(ctx context.Context, spec workloadSpec, exact map[domain.Cuboid][]float64, r *noise.Rand) (*Release, error) {
	s := p.s
	for _, c := range p.needs() {
		x, ok := exact[c]
		if !ok {
			return nil, fmt.Errorf("release: the exact counts of cuboid %s are missing", s.Format(c))
		}
		if want := s.CuboidSize(c); len(x) != want {
			return nil, fmt.Errorf("release: cuboid %s has %d cells, got %d counts", s.Format(c), want, len(x))
		}
	}
	inv := make([]estimate.Invariant, len(p.exact))
	for i, e := range p.exact {
		inv[i] = estimate.Invariant{Cuboid: e, Counts: slices.Clone(exact[e])}
	}
	// The invariants are public: check them as Consistent does (finite,
	// non-negative, agreeing on common margins), over the grand total.
	if _, err := estimate.Constraints(s, 0, make([]float64, 1), inv); err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	rel, err := p.newRelease(spec, inv, r.Seeded())
	if err != nil {
		return nil, err
	}
	noisy := make([][]float64, len(p.meas))
	var contrasts [][]float64 // the residual measurements' noisy contrasts, as released
	if spec.KeepMeasurements {
		contrasts = make([][]float64, len(p.meas))
	}
	for k, m := range p.meas {
		rk := r.Split()
		if m.resid {
			sizes := tensor.SubSizes(p.sizes, m.c)
			z, err := m.rn.Measure(ctx, exact[m.c], rk)
			if err != nil {
				return nil, fmt.Errorf("release: residual %s: %w", s.Format(m.c), err)
			}
			if contrasts != nil {
				contrasts[k] = z
			}
			y := contrast.PseudoMarginal(z, sizes)
			noisy[k] = make([]float64, len(y), tensor.ExtSize(sizes))
			copy(noisy[k], y)
			continue
		}
		// Room for the extended array, which estimate builds in place.
		noisy[k] = make([]float64, len(exact[m.c]), tensor.ExtSize(tensor.SubSizes(p.sizes, m.c)))
		copy(noisy[k], exact[m.c])
		if err := noise.AddParallel(ctx, m.dist(p.mech), rk, noisy[k]); err != nil {
			return nil, fmt.Errorf("release: cuboid %s: %w", s.Format(m.c), err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if spec.KeepMeasurements {
		rel.noisy = make([][]float64, len(noisy))
		for k := range noisy {
			rel.noisy[k] = slices.Clone(noisy[k])
			if p.meas[k].resid {
				rel.noisy[k] = contrasts[k]
			}
		}
	}
	p.estimate(rel.Tables, inv, noisy)
	return rel, nil
}

// newRelease returns the release the plan describes before any counts: its
// tables (Counts nil), measurements, the invariants inv and the privacy
// story, which depend on the schema and the spec alone. release and
// newWorkloadPlanContext both build their release with it, so a planned
// release's metadata is the drawn release's.
func (p *workloadPlan) newRelease(spec workloadSpec, inv []estimate.Invariant, seeded bool) (*Release, error) {
	rel := &Release{
		Schema:          p.s,
		Tables:          slices.Clone(p.tables),
		Measurements:    p.measurements(),
		Invariants:      inv,
		Budget:          p.budget.Float64(),
		Mechanism:       p.mech,
		Split:           p.split,
		Strategy:        p.strategy,
		Objective:       p.objValue,
		ObjectiveKind:   p.objKind,
		Neighbours:      neighbours(p.s, p.exact),
		Conditional:     p.conditional,
		Seeded:          seeded,
		DomainsFromData: spec.DomainsFromData,
	}
	if p.cert != nil {
		c := *p.cert
		rel.Certificate = &c
	}
	rel.LowerBound = p.lowerBound()
	var spent privacy.Budget
	for _, m := range p.meas {
		if p.mech == MechanismGaussian {
			spent = privacy.Sequential(spent, privacy.Concentrated(m.rhoShare))
		} else {
			spent = privacy.Sequential(spent, privacy.Pure(m.share))
		}
	}
	if err := rel.stateSpent(spent, p.mech, p.rho, spec.Delta); err != nil {
		return nil, err
	}
	return rel, nil
}

// estimate fills the counts of every table from the invariants and the
// noisy measurements (resbasis.Basis.Estimate). A noisy array with the
// capacity of its extended array is overwritten by it.
func (p *workloadPlan) estimate(tables []Table, inv []estimate.Invariant, noisy [][]float64) {
	cs := make([]domain.Cuboid, len(tables))
	for i, t := range tables {
		cs[i] = t.Cuboid
	}
	ms := make([]resbasis.Marginal, len(inv))
	for i, v := range inv {
		ms[i] = resbasis.Marginal{Cuboid: v.Cuboid, Counts: v.Counts}
	}
	for i, x := range p.basis.Estimate(cs, ms, noisy) {
		tables[i].Counts = x
	}
}

// TableFileName returns the file name of a released table at its finest
// levels (domain.Schema.ViewFileName).
func TableFileName(s *domain.Schema, c domain.Cuboid) string {
	return s.ViewFileName(domain.ViewOf(c))
}

// WriteCSV writes the table with one column per dimension of its view,
// then "count" and "moe90" (CellMOE), as WriteTableCSV does.
func (t Table) WriteCSV(w io.Writer, s *domain.Schema) error {
	return WriteTableCSV(w, s, t.TableView(), t.Counts, t.CellMOE)
}

// CellMOE is the moe90 column of cell i: its margin of error (MOE90s[i],
// or MOE90 when the margin is the same for every cell), plus 1 for an
// integer table.
func (t Table) CellMOE(i int) float64 {
	m := t.MOE90
	if t.MOE90s != nil {
		m = t.MOE90s[i]
	}
	if t.Integer {
		m++
	}
	return m
}

// Strategy is a way to release a workload, for comparing their errors.
type Strategy int

const (
	// StrategySeparate releases each cuboid on its own with an equal share
	// of the budget, made consistent with the invariants but not with the
	// other cuboids (what one Release per cuboid does).
	StrategySeparate Strategy = iota
	// StrategyBase measures the base cuboid with the whole budget, makes it
	// consistent with the invariants and aggregates it.
	StrategyBase
	// StrategyEqual is a release of the tables with SplitEqual.
	StrategyEqual
	// StrategyOptimal is a release of the tables with SplitOptimal.
	StrategyOptimal
)

// String names the strategy.
func (st Strategy) String() string {
	switch st {
	case StrategySeparate:
		return "separate releases, equal shares"
	case StrategyBase:
		return "noisy base cuboid, aggregated"
	case StrategyEqual:
		return "equal split + least squares"
	case StrategyOptimal:
		return "optimal split + least squares"
	}
	return fmt.Sprintf("Strategy(%d)", int(st))
}

// ExpectedRMSE returns, for each of spec's tables, the root mean squared
// error of its cells under a strategy that spends spec.Epsilon in total
// (spec.Split, spec.Strategy and spec.Measure are set by the strategy).
// Every strategy is unbiased, so this is the square root of the per-cell
// variance, computed from the mechanism alone (no data): the numbers a
// release would have on any table over the schema. It compares Laplace
// releases of tables of cells at the finest levels of every dimension.
func ExpectedRMSE(s *domain.Schema, spec Spec, st Strategy) ([]float64, error) {
	switch {
	case spec.Mechanism != MechanismLaplace:
		return nil, errors.New("release: ExpectedRMSE compares Laplace strategies; a Gaussian workload's per-table errors are in Release.Tables")
	case spec.Queries != nil || spec.TargetMOE90 != nil || spec.Unit != nil:
		return nil, errors.New("release: ExpectedRMSE compares strategies for tables of cells at a given budget, without privacy units")
	}
	spec, coarse, err := checkSpec(s, spec)
	if err != nil {
		return nil, err
	}
	if len(coarse) > 0 {
		return nil, errors.New("release: ExpectedRMSE compares strategies for tables at the finest levels of every dimension; NewPlan gives the errors of tables at coarser levels")
	}
	return expectedRMSE(s, spec.workload(), st)
}

// expectedRMSE is ExpectedRMSE in the flat engine's terms.
func expectedRMSE(s *domain.Schema, spec workloadSpec, st Strategy) ([]float64, error) {
	if spec.Mechanism != MechanismLaplace {
		return nil, errors.New("release: ExpectedRMSE compares Laplace strategies; a Gaussian workload's per-table errors are in WorkloadRelease.Tables")
	}
	var p *workloadPlan
	var err error
	switch st {
	case StrategyEqual, StrategyOptimal:
		spec.Measure = nil
		spec.Split = SplitOptimal
		if st == StrategyEqual {
			spec.Split, spec.Strategy = SplitEqual, MeasureRequested
		}
		p, err = planWorkload(s, spec)
	case StrategyBase:
		spec.Measure, spec.Strategy = nil, MeasureRequested
		if sens, err := sensitivity.GenericSensitivity(s, spec.Exact, domain.Base(s.NumDims())); err != nil || sens.Value > 0 {
			spec.Measure = []domain.Cuboid{domain.Base(s.NumDims())}
		}
		p, err = planWorkload(s, spec)
	case StrategySeparate:
		spec.Measure, spec.Strategy = nil, MeasureRequested
		if p, err = planWorkload(s, spec); err != nil {
			return nil, err
		}
		// Every non-public table is released on its own: the budget is
		// shared among all of them (the plan's own measurements may be
		// fewer, when the optimal split leaves a table unmeasured).
		separate := 0
		for _, t := range p.tables {
			if !t.Public {
				separate++
			}
		}
		share, err := privacy.NewEpsilon(spec.Epsilon.Float64() / float64(max(separate, 1)))
		if err != nil {
			return nil, fmt.Errorf("release: %w", err)
		}
		for i, t := range p.tables {
			if t.Public {
				continue
			}
			one := spec
			one.Cuboids, one.Weights, one.Epsilon = []domain.Cuboid{t.Cuboid}, nil, share
			q, err := planWorkload(s, one)
			if err != nil {
				return nil, err
			}
			p.tables[i].Variance = q.tables[0].Variance
		}
	default:
		return nil, fmt.Errorf("release: unknown strategy %v", st)
	}
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(p.tables))
	for i, t := range p.tables {
		out[i] = math.Sqrt(t.Variance)
	}
	return out, nil
}

// ParseWorkload decodes a workload file: a JSON list whose entries are
// either a list of dimension names, such as ["sex","age"] ([] is the grand
// total; a dimension may be named at a level of its hierarchy, "geo:state"),
// or an object {"cuboid": ["sex","age"], "weight": 2} (weight optional,
// default 1). Errors name the entry. An entry asking for prefix sums or
// ranges is refused: ParseWorkloadTables reads those.
func ParseWorkload(s *domain.Schema, b []byte) (views []domain.View, weights []float64, err error) {
	entries, err := ParseWorkloadEntries(s, b)
	if err != nil {
		return nil, nil, err
	}
	for i, e := range entries {
		switch {
		case e.Query.Kind != QueryCells:
			return nil, nil, fmt.Errorf("workload entry %d asks for %v: read the workload with ParseWorkloadEntries", i+1, e.Query.Kind)
		case e.TargetMOE90 != 0:
			return nil, nil, fmt.Errorf("workload entry %d sets a target margin of error: read the workload with ParseWorkloadEntries", i+1)
		}
		views, weights = append(views, e.View), append(weights, e.Weight)
	}
	return views, weights, nil
}

// WorkloadEntry is one table of a workload file.
type WorkloadEntry struct {
	View   domain.View
	Weight float64
	// Query is what the table publishes: its cells, or the prefix sums or
	// ranges along an ordered dimension ("prefix", "ranges").
	Query TableQuery
	// TargetMOE90 is the entry's "moe90", the margin of error the release
	// must meet for it (0: none set).
	TargetMOE90 float64
}

// ParseWorkloadEntries decodes a workload file as ParseWorkload does, and
// entries that ask, along an ordered dimension of their cuboid, for every
// prefix sum, {"cuboid": ["year", "checks"], "prefix": "checks"}, or every
// contiguous range, {"cuboid": ["age"], "ranges": "age"} (with an optional
// weight), or that set a target margin of error, {"cuboid": ["sex"],
// "moe90": 5} (Spec.TargetMOE90). Errors name the entry.
func ParseWorkloadEntries(s *domain.Schema, b []byte) ([]WorkloadEntry, error) {
	views, weights, queries, targets, err := parseWorkload(s, b)
	if err != nil {
		return nil, err
	}
	out := make([]WorkloadEntry, len(views))
	for i := range views {
		out[i] = WorkloadEntry{View: views[i], Weight: weights[i], Query: queries[i], TargetMOE90: targets[i]}
	}
	return out, nil
}

func parseWorkload(s *domain.Schema, b []byte) (views []domain.View, weights []float64, queries []TableQuery, targets []float64, err error) {
	var entries []json.RawMessage
	if err := json.Unmarshal(b, &entries); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("release: want a JSON list of cuboids: %w", err)
	}
	if len(entries) == 0 {
		return nil, nil, nil, nil, errors.New("release: the list of cuboids is empty")
	}
	for i, raw := range entries {
		var names []string
		weight, target := 1.0, 0.0
		var q TableQuery
		if string(bytes.TrimSpace(raw)) == "null" {
			return nil, nil, nil, nil, fmt.Errorf("workload entry %d: null is not a cuboid (the grand total is [])", i+1)
		}
		var along *string
		if err := json.Unmarshal(raw, &names); err != nil {
			var obj struct {
				Cuboid *[]string `json:"cuboid"`
				Weight *float64  `json:"weight"`
				Prefix *string   `json:"prefix"`
				Ranges *string   `json:"ranges"`
				MOE90  *float64  `json:"moe90"`
			}
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&obj); err != nil {
				return nil, nil, nil, nil, fmt.Errorf("workload entry %d: want a list of dimension names or {\"cuboid\": [...], \"weight\": w} (with \"prefix\" or \"ranges\": an ordered dimension of the cuboid, and \"moe90\": a target margin of error): %w", i+1, err)
			}
			if obj.Cuboid == nil {
				return nil, nil, nil, nil, fmt.Errorf("workload entry %d: no \"cuboid\"", i+1)
			}
			names = *obj.Cuboid
			if obj.Weight != nil {
				weight = *obj.Weight
			}
			if obj.MOE90 != nil {
				target = *obj.MOE90
				if !(target > 0) || math.IsInf(target, 0) {
					return nil, nil, nil, nil, fmt.Errorf("workload entry %d: \"moe90\" must be finite and > 0, got %v", i+1, target)
				}
			}
			switch {
			case obj.Prefix != nil && obj.Ranges != nil:
				return nil, nil, nil, nil, fmt.Errorf("workload entry %d: \"prefix\" and \"ranges\" exclude each other (one table asks for one of them)", i+1)
			case obj.Prefix != nil:
				q.Kind, along = QueryPrefix, obj.Prefix
			case obj.Ranges != nil:
				q.Kind, along = QueryRanges, obj.Ranges
			}
		}
		v, err := s.ViewOfNames(names...)
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("workload entry %d: %w", i+1, err)
		}
		if !(weight > 0) || math.IsInf(weight, 0) {
			return nil, nil, nil, nil, fmt.Errorf("workload entry %d (%s): weight must be finite and > 0, got %v", i+1, s.FormatView(v), weight)
		}
		if along != nil {
			d, ok := s.Lookup(*along)
			if !ok {
				return nil, nil, nil, nil, fmt.Errorf("workload entry %d: %v along %q: the schema has no such dimension", i+1, q.Kind, *along)
			}
			q.Dim = d
			if err := q.check(s, v); err != nil {
				return nil, nil, nil, nil, fmt.Errorf("workload entry %d: %w", i+1, err)
			}
		}
		views = append(views, v)
		weights = append(weights, weight)
		queries = append(queries, q)
		targets = append(targets, target)
	}
	return views, weights, queries, targets, nil
}

// measuredView returns v, or the view of cuboid c when v is the zero view
// of a flat release.
func measuredView(c domain.Cuboid, v domain.View) domain.View {
	if v.Dims != c {
		return domain.ViewOf(c)
	}
	return v
}

// CubeInvariants returns the exact counts of the given cuboids of c.
func CubeInvariants(c *cube.Cube, exact []domain.Cuboid) []estimate.Invariant {
	inv := make([]estimate.Invariant, len(exact))
	for i, e := range exact {
		inv[i] = estimate.Invariant{Cuboid: e, Counts: c.Project(e)}
	}
	return inv
}
