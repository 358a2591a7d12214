package server

import (
	"context"
	"errors"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/release"
	"github.com/knowdp/knowdp/sensitivity"
)

// maxWorkloadCuboids bounds the cuboids of one workload query.
const maxWorkloadCuboids = 64

// workloadAnswer is the answer to a cuboid query with several cuboids.
type workloadAnswer struct {
	Tables  []workloadTable  `json:"tables"`
	Privacy release.Metadata `json:"privacy"`
	// Guarantee is set when the policy's sensitivity is a claim knowdp
	// cannot check.
	Guarantee string `json:"guarantee,omitempty"`
}

type workloadTable struct {
	Dimensions []string  `json:"dimensions"`
	Counts     []float64 `json:"counts"`
	MOE90      float64   `json:"moe90"`
}

// planWorkload validates a workload query ("cuboids" instead of "cuboid").
// Everything it decides comes from the request, the schema and the policy.
// It charges the whole epsilon (the shares spent add up to at most it), or
// nothing when every cuboid is public.
func planWorkload(d *dataset, q QueryRequest, eps privacy.Epsilon) (*plan, error) {
	s := d.schema
	spec, public, err := workloadCuboids(d, q)
	if err != nil {
		return nil, err
	}
	spec.Epsilon = eps
	guarantee := ""
	if spec.Sensitivity > 0 {
		guarantee = conditionalGuarantee
	}
	charge := epsSteps(eps)
	h := newHasher("cuboid", eps)
	if public {
		charge = 0
		h = newHasher("cuboid", privacy.Epsilon{})
	}
	h.workload(spec, q)
	p := &plan{hash: h.sum(), uniform: charge}
	// Refuse what the release would refuse (duplicates, an epsilon too
	// small for the noise), from the request alone, once the query is
	// affordable: the plan solves the split.
	if p.prepare, p.compute, p.work, err = planWorkloadRelease(d, s, spec, q, guarantee); err != nil {
		return nil, err
	}
	return p, nil
}

// planWorkloadRelease returns the preparation of a workload answer, which
// plans the release under the request's context (an error of the plan is
// the analyst's input error), its computation from that plan, and the
// bound of the preparation's work, in base cells of planning.
func planWorkloadRelease(d *dataset, s *domain.Schema, spec release.WorkloadSpec, q QueryRequest, guarantee string) (func(context.Context) error, func(context.Context, *noise.Rand) (any, error), int, error) {
	spec.KeepMeasurements = true
	work, err := spec.SplitWork(s)
	if err != nil {
		return nil, nil, 0, badInput("cuboids: %v", err)
	}
	var wp *release.WorkloadPlan
	prepare := func(ctx context.Context) error {
		var err error
		if wp, err = release.PlanWorkloadContext(ctx, s, spec, false); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return badInput("cuboids: %v", err)
		}
		return nil
	}
	return prepare, releaseWorkload(d, &wp, q, guarantee), splitCells(work), nil
}

// workloadCuboids validates the cuboids, weights, split and post-processing
// of a workload query and returns its spec without a budget, and whether
// every cuboid is public. A cuboid without a generic sensitivity takes the
// curator's claim (spec.Sensitivity; the guarantee is then conditional).
func workloadCuboids(d *dataset, q QueryRequest) (release.WorkloadSpec, bool, error) {
	s := d.schema
	var spec release.WorkloadSpec
	if q.Cuboid != nil {
		return spec, false, badInput("cuboid and cuboids exclude each other")
	}
	if len(q.Cuboids) == 0 || len(q.Cuboids) > maxWorkloadCuboids {
		return spec, false, badInput("cuboids: give 1 to %d cuboids, got %d", maxWorkloadCuboids, len(q.Cuboids))
	}
	if q.Weights != nil && len(q.Weights) != len(q.Cuboids) {
		return spec, false, badInput("weights: %d weights for %d cuboids", len(q.Weights), len(q.Cuboids))
	}
	if q.NonNeg && q.Integer {
		return spec, false, badInput("nonneg and integer exclude each other (integer counts are non-negative)")
	}
	split, err := release.ParseSplit(q.Split)
	if q.Split == "" {
		split, err = release.SplitOptimal, nil
	}
	if err != nil {
		return spec, false, badInput("split: %v", err)
	}
	spec = release.WorkloadSpec{Exact: d.exact, Weights: q.Weights, Split: split}
	gaussian := q.Mechanism == "gaussian"
	cells, public := 0, true
	for i, names := range q.Cuboids {
		cb, err := s.CuboidOf(names...)
		if err != nil {
			return spec, false, badInput("cuboids[%d]: %v", i, err)
		}
		if cells += s.CuboidSize(cb); cells > maxAnswerCells {
			return spec, false, badInput("cuboids: more than %d cells in all", maxAnswerCells)
		}
		spec.Cuboids = append(spec.Cuboids, cb)
		sens, err := sensitivity.GenericSensitivity(s, d.exact, cb)
		switch {
		case err == nil:
			public = public && sens.Value == 0
		case errors.Is(err, sensitivity.ErrNoClosedForm) && d.policy.Sensitivity > 0 && !gaussian:
			public, spec.Sensitivity = false, d.policy.Sensitivity
		default:
			return spec, false, badInput("cuboids[%d]: %v", i, err)
		}
	}
	return spec, public, nil
}

// releaseWorkload returns the computation of a workload answer from its
// plan (*wp, set by the preparation): the release, then the
// post-processing the query asks for.
func releaseWorkload(d *dataset, wp **release.WorkloadPlan, q QueryRequest, guarantee string) func(context.Context, *noise.Rand) (any, error) {
	s := d.schema
	return func(ctx context.Context, r *noise.Rand) (any, error) {
		if *wp == nil {
			return nil, errors.New("workload: computed before it was planned")
		}
		needs := (*wp).Needs()
		exact := make(map[domain.Cuboid][]float64, len(needs))
		for _, c := range needs {
			exact[c] = d.cube.Project(c)
		}
		w, err := (*wp).ReleaseFrom(ctx, exact, r)
		if err != nil {
			return nil, err
		}
		// The measurements before post-processing, kept with the answer.
		rec, err := workloadMeasurements(d, w, guarantee)
		if err != nil {
			return nil, err
		}
		switch {
		case q.Integer:
			err = w.RoundIntegers(ctx, r.Split())
		case q.NonNeg:
			err = w.MakeNonNegative(ctx, 0)
		}
		if err != nil {
			return nil, err
		}
		ans := workloadAnswer{Privacy: w.Metadata(), Guarantee: guarantee}
		for _, t := range w.Tables {
			names := s.Names(t.Cuboid)
			if names == nil {
				names = []string{}
			}
			ans.Tables = append(ans.Tables, workloadTable{Dimensions: names, Counts: t.Counts, MOE90: t.CellMOE90()})
		}
		if rec == nil {
			return ans, nil
		}
		return measuredAnswer{answer: ans, record: rec}, nil
	}
}
