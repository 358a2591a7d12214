package server

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/release"
	"github.com/knowdp/knowdp/sidecar"
)

// Cuboid queries: one table ("cuboid") or several under one budget
// ("cuboids"), each a cuboid whose hierarchical dimensions may stand at
// coarser levels ("geo:state"), with Laplace noise for epsilon or Gaussian
// noise for rho. A query is read into one release.Spec, with the dataset's
// invariants and the defaults knowdp release has (the automatic split, the
// best strategy), checked as release.NewPlan checks it before anything is
// charged, planned in full once it is affordable, and released by the one
// release path (release.Plan.Run): the server chooses no estimator itself.

// maxWorkloadCuboids bounds the cuboids of one query.
const maxWorkloadCuboids = 64

// defaultGaussianDelta is the delta at which a Gaussian answer states its
// equivalent (eps, delta) guarantee unless the query gives one.
const defaultGaussianDelta = 1e-6

// conditionalGuarantee qualifies every answer whose sensitivity knowdp could
// not compute and took from the curator's policy.
const conditionalGuarantee = "conditional on the curator's sensitivity claim: knowdp cannot compute the generic sensitivity for these invariants, and the epsilon holds only if the policy's sensitivity is at least the true one"

// viewTable is one released table at its levels.
type viewTable struct {
	// Dimensions are the table's dimensions in schema order, a coarser
	// level written "name:level".
	Dimensions []string `json:"dimensions"`
	// Values are, for each dimension, its values at the table's level:
	// the counts are row-major over them.
	Values [][]string `json:"values"`
	Counts []float64  `json:"counts"`
	// MOE90 is the largest margin of error of a cell, MOE90s each cell's:
	// the true count lies within Counts[i] ± MOE90s[i] with probability
	// 90% under the mechanism (plus 1 for integer counts).
	MOE90  float64   `json:"moe90"`
	MOE90s []float64 `json:"moe90s"`
}

// tableAnswer is the answer to a one-table cuboid query.
type tableAnswer struct {
	viewTable
	Privacy   sidecar.Metadata `json:"privacy"`
	Guarantee string           `json:"guarantee,omitempty"`
}

// tablesAnswer is the answer to a cuboid query of several tables.
type tablesAnswer struct {
	Tables    []viewTable      `json:"tables"`
	Privacy   sidecar.Metadata `json:"privacy"`
	Guarantee string           `json:"guarantee,omitempty"`
}

// cuboidLists returns the cuboids a cuboid query names: its tables, or its
// one table (nil if it names none).
func cuboidLists(q QueryRequest) [][]string {
	if q.Cuboids != nil {
		return q.Cuboids
	}
	if q.Cuboid != nil {
		return [][]string{q.Cuboid}
	}
	return nil
}

// queryViews parses a cuboid query's cuboids as views, each at its normal
// form (a dimension named at its finest level, "geo:place", is "geo"); ok
// is false when one does not parse (planning then says why).
func (d *dataset) queryViews(q QueryRequest) (views []domain.View, ok bool) {
	for _, names := range cuboidLists(q) {
		v, err := d.schema.ViewOfNames(names...)
		if err != nil {
			return nil, false
		}
		views = append(views, v.Normal())
	}
	return views, true
}

// coarseQuery reports whether some table of q stands at a coarser level of
// a hierarchy than its values.
func (d *dataset) coarseQuery(q QueryRequest) bool {
	views, ok := d.queryViews(q)
	if !ok {
		return false
	}
	for _, v := range views {
		if !v.Flat() {
			return true
		}
	}
	return false
}

// viewPublic reports whether view v is determined by the invariants: a
// roll-up of one of them, or of generic sensitivity 0. Released exactly,
// it is free.
func (d *dataset) viewPublic(v domain.View) bool {
	one, err := privacy.NewEpsilon(1)
	if err != nil {
		return false
	}
	checked, err := release.Check(d.schema, release.Spec{Tables: []domain.View{v}, Exact: d.views, Epsilon: one})
	return err == nil && !checked.Measured
}

// oneTableWork is the most search work (package plan's unit, about 1.5 ns)
// a one-table query is planned with before its admission: about 15 ms.
const oneTableWork = 1e7

// planTables plans a cuboid query: its tables and the policy's invariants
// as one release.Spec, with Laplace noise for eps or Gaussian noise for rho
// stated at delta. It charges the whole budget (the shares spent add up to
// at most it), or nothing when every table is public. Everything it
// decides comes from the request, the schema and the policy; the split's
// search, priced here, runs in prepare once the query is affordable.
func planTables(d *dataset, q QueryRequest, eps privacy.Epsilon, rho privacy.Rho, delta float64) (*plan, error) {
	s := d.schema
	gaussian := q.Mechanism == "gaussian"
	several := q.Cuboids != nil
	field := "cuboid"
	switch {
	case several && q.Cuboid != nil:
		return nil, badInput("cuboid and cuboids exclude each other")
	case several:
		field = "cuboids"
		if len(q.Cuboids) == 0 || len(q.Cuboids) > maxWorkloadCuboids {
			return nil, badInput("cuboids: give 1 to %d cuboids, got %d", maxWorkloadCuboids, len(q.Cuboids))
		}
		if q.Weights != nil && len(q.Weights) != len(q.Cuboids) {
			return nil, badInput("weights: %d weights for %d cuboids", len(q.Weights), len(q.Cuboids))
		}
	case q.Weights != nil || q.Split != "":
		return nil, badInput("weights and split apply to several tables: give cuboids, a list of cuboids")
	case q.Cuboid == nil:
		return nil, badInput("cuboid: required: the dimensions of the cuboid to release ([] is the grand total)")
	}
	if q.NonNeg && q.Integer {
		return nil, badInput("nonneg and integer exclude each other (integer counts are non-negative)")
	}
	lists := cuboidLists(q)
	spec := release.Spec{Exact: d.views, Weights: q.Weights, Strategy: release.MeasureBest,
		NonNegative: q.NonNeg, Integer: q.Integer, KeepMeasurements: true}
	cells := 0
	for i, names := range lists {
		name := field
		if several {
			name = fmt.Sprintf("cuboids[%d]", i)
		}
		v, err := s.ViewOfNames(names...)
		if err != nil {
			return nil, badInput("%s: %v", name, err)
		}
		v = v.Normal()
		if cells += s.ViewSize(v); cells > maxAnswerCells {
			return nil, badInput("%s: %s brings the answer to more than %d cells; at most %d per answer", name, s.FormatView(v), maxAnswerCells, maxAnswerCells)
		}
		spec.Tables = append(spec.Tables, v)
	}
	if spec.Weights == nil {
		spec.Weights = slices.Repeat([]float64{1}, len(spec.Tables))
	}
	var err error
	if spec.Split, err = release.ParseSplit(q.Split); q.Split == "" {
		spec.Split, err = release.SplitAuto, nil
	}
	if err != nil {
		return nil, badInput("split: %v", err)
	}
	if gaussian {
		spec.Mechanism, spec.Rho, spec.Delta = release.MechanismGaussian, rho, delta
	} else {
		spec.Epsilon, spec.Sensitivity = eps, d.policy.Sensitivity
	}
	d.unitSpec(&spec)
	checked, err := release.Check(s, spec)
	if err != nil {
		return nil, badInput("%s: %v", field, err)
	}
	guarantee := ""
	if checked.Conditional {
		guarantee = conditionalGuarantee
	}
	var h *hasher
	var charge int64
	switch {
	case !checked.Measured:
		// Computable from the invariants: released exactly, free and the
		// same whatever the budget, so stored once.
		h = newHasher("cuboid", privacy.Epsilon{})
	case gaussian:
		h = newHasher("cuboid/gaussian", privacy.Epsilon{})
		h.int(rho.Steps())
		h.float(delta)
		charge = rho.Steps()
	default:
		h = newHasher("cuboid", eps)
		charge = epsSteps(eps)
	}
	if several {
		h.int(-1)
	} else {
		h.int(1)
	}
	h.int(int64(len(spec.Tables)))
	for i, v := range spec.Tables {
		h.int(int64(v.Dims))
		for _, k := range v.Dims.Dims() {
			h.int(int64(v.Up[k]))
		}
		if q.Weights != nil {
			h.float(q.Weights[i])
		}
	}
	h.int(int64(spec.Split))
	h.postProcessing(q)
	var planned *release.Plan
	prepare := func(ctx context.Context) error {
		var err error
		if planned, err = release.NewPlanContext(ctx, s, spec); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return badInput("%s: %v", field, err)
		}
		return nil
	}
	p := &plan{hash: h.sum(), uniform: charge, prepare: prepare, work: splitCells(checked.SplitWork),
		compute: releaseTables(d, &planned, !several, guarantee)}
	if !several && checked.SplitWork <= oneTableWork {
		// One table whose plan costs little search (no invariants: the
		// table is measured as it is, with the whole budget): planned
		// now, like any check. Under invariants the strategy's search can
		// take longer, and is prepared like a workload's split.
		if err := prepare(context.Background()); err != nil {
			return nil, err
		}
		p.prepare, p.work = nil, 0
	}
	if !several && checked.Measured && !q.NonNeg && !q.Integer && spec.Tables[0].Flat() {
		p.fresh = func(ctx context.Context) (float64, error) {
			// Planned like the fresh query would be, strategy search
			// included (under invariants it can take a while): under the
			// request's context, so that a client that leaves stops it.
			one, err := release.NewPlanContext(ctx, s, spec)
			if err != nil {
				if ctx.Err() != nil {
					return 0, ctx.Err()
				}
				return 0, err
			}
			return one.Workload().Release.Tables[0].CellMOE90(), nil
		}
	}
	return p, nil
}

// planGaussian plans a cuboid query with Gaussian noise (a dataset with
// zCDP budgets): rho, and the delta its (eps, delta) equivalent is stated
// at.
func planGaussian(d *dataset, q QueryRequest) (*plan, error) {
	rho, err := privacy.NewRho(q.Rho)
	if err != nil {
		return nil, badInput("rho: %v", err)
	}
	delta := q.Delta
	if delta == 0 {
		delta = defaultGaussianDelta
	}
	if !(delta > 0 && delta < 1) {
		return nil, badInput("delta: must be in (0, 1), got %v", q.Delta)
	}
	return planTables(d, q, privacy.Epsilon{}, rho, delta)
}

// postProcessing adds a cuboid query's post-processing to its hash.
func (h *hasher) postProcessing(q QueryRequest) {
	switch {
	case q.NonNeg:
		h.int(1)
	case q.Integer:
		h.int(2)
	}
}

// releaseTables returns the computation of a cuboid answer from its plan
// (*planned, set by the preparation): the one release path, and the
// measurements the answer keeps for later derivations.
func releaseTables(d *dataset, planned **release.Plan, single bool, guarantee string) func(context.Context, *noise.Rand) (any, error) {
	s := d.schema
	return func(ctx context.Context, r *noise.Rand) (any, error) {
		p := *planned
		if p == nil {
			return nil, errors.New("release: computed before it was planned")
		}
		var rel *release.Release
		var err error
		if d.units != nil {
			rel, err = d.runUnits(ctx, p, r)
		} else {
			var counts map[domain.View][]float64
			if counts, err = d.viewCounts(p.Needs()); err == nil {
				rel, err = p.Run(ctx, counts, r)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("release: %w", err)
		}
		tables := make([]viewTable, len(rel.Tables))
		for i, t := range rel.Tables {
			tables[i] = viewTableOf(s, t)
		}
		var ans any = tablesAnswer{Tables: tables, Privacy: rel.Metadata(), Guarantee: guarantee}
		if single {
			ans = tableAnswer{viewTable: tables[0], Privacy: rel.Metadata(), Guarantee: guarantee}
		}
		rec, err := releaseMeasurements(d, rel, guarantee)
		if err != nil {
			return nil, err
		}
		if rec == nil {
			return ans, nil
		}
		return measuredAnswer{answer: ans, record: rec}, nil
	}
}

// viewCounts returns the exact counts of views, each the roll-up of the
// projection of the dataset's base cuboid.
func (d *dataset) viewCounts(views []domain.View) (map[domain.View][]float64, error) {
	out := make(map[domain.View][]float64, len(views))
	for _, v := range views {
		if _, done := out[v]; done {
			continue
		}
		x := d.cube.Project(v.Dims)
		if !v.Flat() {
			var err error
			if x, err = d.schema.RollUp(domain.LeafView(v), x, v); err != nil {
				return nil, fmt.Errorf("counts of %s: %w", d.schema.FormatView(v), err)
			}
		}
		out[v] = x
	}
	return out, nil
}

// viewTableOf labels a released table with its levels' values and each
// cell's margin of error.
func viewTableOf(s *domain.Schema, t release.Table) viewTable {
	v := t.TableView()
	vt := viewTable{Dimensions: nonNilNames(s.ViewNames(v)), Values: [][]string{}, Counts: t.Counts, MOE90: t.CellMOE90(),
		MOE90s: make([]float64, len(t.Counts))}
	for _, i := range v.Dims.Dims() {
		vt.Values = append(vt.Values, slices.Clone(s.LevelValues(i, int(v.Up[i]))))
	}
	for c := range vt.MOE90s {
		vt.MOE90s[c] = t.CellMOE(c)
	}
	return vt
}

// nonNilNames returns names, or an empty list for the grand total.
func nonNilNames(names []string) []string {
	if names == nil {
		return []string{}
	}
	return names
}
