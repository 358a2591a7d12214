package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/integer"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/release"
	"github.com/knowdp/knowdp/sensitivity"
)

// Cuboid queries at the levels of a hierarchy (docs/hierarchy.md). A
// cuboid may name a hierarchical dimension at a coarser level,
// "geo:state", and a policy may declare invariants at levels. Such a query
// (and every cuboid query on a dataset with an invariant at a coarser
// level, or with the spine split) is released by release.ReleaseViews: each
// measured view gets noise calibrated to its generic sensitivity under the
// invariants at their levels, and every table comes from one least-squares
// estimate subject to the invariants. Every decision of the plan comes
// from the request, the schema and the policy.

// viewTable is one released table at its levels.
type viewTable struct {
	// Dimensions are the table's dimensions in schema order, a coarser
	// level written "name:level".
	Dimensions []string `json:"dimensions"`
	// Values are, for each dimension, its values at the table's level:
	// the counts are row-major over them.
	Values [][]string `json:"values"`
	Counts []float64  `json:"counts"`
	// MOE90 is the largest margin of error of a cell, MOE90s each cell's
	// (the law of the error differs from one node of the hierarchy to
	// another): the true count lies within Counts[i] ± MOE90s[i] with
	// probability 90% under the mechanism (plus 1 for integer counts).
	MOE90  float64   `json:"moe90"`
	MOE90s []float64 `json:"moe90s"`
}

// viewAnswer is the answer to a cuboid query released as a view.
type viewAnswer struct {
	viewTable
	Privacy   release.Metadata `json:"privacy"`
	Guarantee string           `json:"guarantee,omitempty"`
}

// viewsAnswer is the answer to a workload query released as views.
type viewsAnswer struct {
	Tables    []viewTable      `json:"tables"`
	Privacy   release.Metadata `json:"privacy"`
	Guarantee string           `json:"guarantee,omitempty"`
}

// cuboidLists returns the cuboids a cuboid query names: its workload, or
// its one cuboid (nil if it names none).
func cuboidLists(q QueryRequest) [][]string {
	if q.Cuboids != nil {
		return q.Cuboids
	}
	if q.Cuboid != nil {
		return [][]string{q.Cuboid}
	}
	return nil
}

// namesLevel reports whether some cuboid of q names a level ("geo:state").
func namesLevel(q QueryRequest) bool {
	for _, names := range cuboidLists(q) {
		for _, n := range names {
			if strings.Contains(n, ":") {
				return true
			}
		}
	}
	return false
}

// viewQuery reports whether a cuboid query is released as views: it names
// a level, asks for the spine split, or the dataset has an invariant at a
// coarser level. It depends on the request and the policy only.
func (d *dataset) viewQuery(q QueryRequest) bool {
	return d.coarse || q.Split == "spine" || namesLevel(q)
}

// queryViews parses a cuboid query's cuboids as views; ok is false when
// one does not parse (planning then says why).
func (d *dataset) queryViews(q QueryRequest) (views []domain.View, ok bool) {
	for _, names := range cuboidLists(q) {
		v, err := d.schema.ViewOfNames(names...)
		if err != nil {
			return nil, false
		}
		views = append(views, v)
	}
	return views, true
}

// viewPublic reports whether view v is determined by the invariants: a
// roll-up of one of them, or of generic sensitivity 0. Released exactly,
// it is free.
func (d *dataset) viewPublic(v domain.View) bool {
	for _, e := range d.views {
		if v.RollUpOf(e) {
			return true
		}
	}
	sens, err := sensitivity.GenericSensitivityViews(d.schema, d.views, v)
	return err == nil && sens.Value == 0
}

// planViewQuery plans a cuboid query released as views (viewQuery): one
// cuboid ("cuboid") or a workload ("cuboids") with Laplace noise for eps,
// or Gaussian noise for rho stated at delta. It charges the whole budget
// (the shares spent add up to at most it), or nothing when every view is
// public.
func planViewQuery(d *dataset, q QueryRequest, eps privacy.Epsilon, rho privacy.Rho, delta float64) (*plan, error) {
	s := d.schema
	gaussian := q.Mechanism == "gaussian"
	workload := q.Cuboids != nil
	field := "cuboid"
	switch {
	case workload && q.Cuboid != nil:
		return nil, badInput("cuboid and cuboids exclude each other")
	case workload:
		field = "cuboids"
		if len(q.Cuboids) == 0 || len(q.Cuboids) > maxWorkloadCuboids {
			return nil, badInput("cuboids: give 1 to %d cuboids, got %d", maxWorkloadCuboids, len(q.Cuboids))
		}
		if q.Weights != nil && len(q.Weights) != len(q.Cuboids) {
			return nil, badInput("weights: %d weights for %d cuboids", len(q.Weights), len(q.Cuboids))
		}
	case q.Weights != nil || q.Split != "":
		return nil, badInput("weights and split apply to a workload: give cuboids, a list of cuboids")
	case q.Cuboid == nil:
		return nil, badInput("cuboid: required: the dimensions of the cuboid to release ([] is the grand total)")
	}
	if q.NonNeg && q.Integer {
		return nil, badInput("nonneg and integer exclude each other (integer counts are non-negative)")
	}
	lists := cuboidLists(q)
	views := make([]domain.View, len(lists))
	cells, flat := 0, true
	for i, names := range lists {
		name := field
		if workload {
			name = fmt.Sprintf("cuboids[%d]", i)
		}
		v, err := s.ViewOfNames(names...)
		if err != nil {
			return nil, badInput("%s: %v", name, err)
		}
		if cells += s.ViewSize(v); cells > maxAnswerCells {
			return nil, badInput("%s: %s brings the answer to more than %d cells; at most %d per answer", name, s.FormatView(v), maxAnswerCells, maxAnswerCells)
		}
		views[i] = v
		flat = flat && v.Flat()
	}
	if flat && !d.coarse && q.Split != "spine" {
		// Levels were named, but each is a dimension's finest: the flat
		// query, answered (and stored) as such.
		for i, v := range views {
			lists[i] = nonNilNames(s.ViewNames(v))
		}
		if workload {
			q.Cuboids = lists
		} else {
			q.Cuboid = lists[0]
		}
		if gaussian {
			return planGaussianCuboid(d, q)
		}
		return planCuboid(d, q, eps)
	}
	if q.NonNeg {
		return nil, badInput("nonneg: tables at the levels of a hierarchy (or under invariants at coarser levels) are published as real counts or, with integer, as non-negative integers that add up level by level; use integer")
	}
	split := release.SplitEqual
	if workload {
		var err error
		if split, err = release.ParseSplit(q.Split); q.Split == "" {
			split, err = release.SplitSpine, nil
		}
		if err != nil {
			return nil, badInput("split: %v", err)
		}
	}
	spec := release.ViewSpec{Exact: d.views, Views: views, Weights: q.Weights, Split: split}
	public := true
	guarantee := ""
	for i, v := range views {
		if d.viewPublic(v) {
			continue
		}
		public = false
		if gaussian {
			continue // planViews computes the L2 sensitivities and refuses what it cannot
		}
		sens, err := sensitivity.GenericSensitivityViews(s, d.views, v)
		switch {
		case err == nil && !workload && d.policy.Sensitivity > sens.Value:
			// The curator asked for more noise than needed: allowed (as for
			// flat cuboids; the base cuboid's value bounds every view's).
			spec.Sensitivity = d.policy.Sensitivity
		case err == nil:
		case errors.Is(err, sensitivity.ErrNoClosedForm) && d.policy.Sensitivity > 0:
			spec.Sensitivity, guarantee = d.policy.Sensitivity, conditionalGuarantee
		default:
			name := field
			if workload {
				name = fmt.Sprintf("cuboids[%d]", i)
			}
			return nil, badInput("%s: %v", name, err)
		}
	}
	if gaussian {
		spec.Mechanism, spec.Rho, spec.Delta = release.MechanismGaussian, rho, delta
	} else {
		spec.Epsilon = eps
	}
	var h *hasher
	var charge int64
	switch {
	case public && gaussian:
		h = newHasher("cuboid/views/gaussian", privacy.Epsilon{}) // exact: the same whatever rho
	case public:
		h = newHasher("cuboid/views", privacy.Epsilon{}) // exact: the same whatever epsilon
	case gaussian:
		h = newHasher("cuboid/views/gaussian", privacy.Epsilon{})
		h.int(rho.Steps())
		h.float(delta)
		charge = rho.Steps()
	default:
		h = newHasher("cuboid/views", eps)
		charge = epsSteps(eps)
	}
	if workload {
		h.int(-1)
	} else {
		h.int(1)
	}
	h.int(int64(len(views)))
	for i, v := range views {
		h.int(int64(v.Dims))
		for _, k := range v.Dims.Dims() {
			h.int(int64(v.Up[k]))
		}
		if q.Weights != nil {
			h.float(q.Weights[i])
		}
	}
	h.int(int64(split))
	h.postProcessing(q)
	work, err := spec.SplitWork(s)
	if err != nil {
		return nil, badInput("%s: %v", field, err)
	}
	var vplan *release.ViewPlan
	// Refuse what the release would refuse (duplicates, two hierarchies at
	// coarser levels, a budget too small for the noise, views integer
	// rounding cannot make add up), from the request and the policy alone,
	// once the query is affordable: the plan solves the split.
	prepare := func(ctx context.Context) error {
		var err error
		if vplan, err = release.PlanViewsContext(ctx, s, spec); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if split == release.SplitOptimal {
				eq := spec
				eq.Split = release.SplitEqual
				if _, e2 := release.PlanViewsContext(ctx, s, eq); e2 == nil {
					return badInput("split: %v", err)
				}
			}
			return badInput("%s: %v", field, err)
		}
		if q.Integer && !public {
			if err := checkRoundViews(ctx, s, spec, d); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return badInput("integer: %v", err)
			}
		}
		return nil
	}
	return &plan{hash: h.sum(), uniform: charge, prepare: prepare, work: splitCells(work),
		compute: releaseViewsAnswer(d, &vplan, !workload, q.Integer, guarantee)}, nil
}

// checkRoundViews refuses, before any data is read, views that integer
// rounding cannot make add up (a level with no published view to round
// it from): it rounds all-zero tables of the same views, which depends on
// the views and the invariants' levels only.
func checkRoundViews(ctx context.Context, s *domain.Schema, spec release.ViewSpec, d *dataset) error {
	tables := map[domain.View][]float64{}
	for _, v := range spec.Views {
		if !d.viewPublic(v) {
			tables[v] = make([]float64, s.ViewSize(v))
		}
	}
	exact := map[domain.View][]float64{}
	for _, e := range spec.Exact {
		exact[e] = make([]float64, s.ViewSize(e))
	}
	_, err := integer.RoundViews(ctx, s, tables, exact, noise.NewSeeded(1))
	return err
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

// releaseViewsAnswer returns the computation of an answer released as
// views from its plan (*planned, set by the preparation): the release,
// then integer rounding if asked for.
func releaseViewsAnswer(d *dataset, planned **release.ViewPlan, single, integer bool, guarantee string) func(context.Context, *noise.Rand) (any, error) {
	s := d.schema
	return func(ctx context.Context, r *noise.Rand) (any, error) {
		vplan := *planned
		if vplan == nil {
			return nil, errors.New("release views: computed before it was planned")
		}
		counts, err := d.viewCounts(vplan.Needs())
		if err != nil {
			return nil, err
		}
		w, err := vplan.ReleaseFrom(ctx, counts, r)
		if err != nil {
			return nil, fmt.Errorf("release views: %w", err)
		}
		if integer {
			if err := w.RoundIntegers(ctx, r.Split()); err != nil {
				return nil, fmt.Errorf("integer views: %w", err)
			}
		}
		tables := make([]viewTable, len(w.Tables))
		for i, t := range w.Tables {
			tables[i] = viewTableOf(s, t)
		}
		meta := w.Metadata()
		if single {
			return viewAnswer{viewTable: tables[0], Privacy: meta, Guarantee: guarantee}, nil
		}
		return viewsAnswer{Tables: tables, Privacy: meta, Guarantee: guarantee}, nil
	}
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
		m := t.MOE90
		if t.MOE90s != nil {
			m = t.MOE90s[c]
		}
		if t.Integer {
			m++
		}
		vt.MOE90s[c] = m
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
