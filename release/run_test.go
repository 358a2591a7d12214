package release

// The tests release through the one path users run, NewPlan then Plan.Run:
// these helpers turn an engine's spec (what a test states) into a Spec and
// the counts it needs, so that a test checks what the dispatch does with it.

import (
	"context"
	"errors"
	"slices"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
)

// viewsOf returns the views of cuboids at their finest levels (nil for nil).
func viewsOf(cs []domain.Cuboid) []domain.View {
	if cs == nil {
		return nil
	}
	out := make([]domain.View, len(cs))
	for i, c := range cs {
		out[i] = domain.ViewOf(c)
	}
	return out
}

// spec returns the Spec that plans the flat workload ws.
func (ws workloadSpec) spec() Spec {
	return Spec{Tables: viewsOf(ws.Cuboids), Weights: ws.Weights, Exact: viewsOf(ws.Exact), Measure: viewsOf(ws.Measure),
		Objective: ws.Objective, Mechanism: ws.Mechanism, Epsilon: ws.Epsilon, Rho: ws.Rho, Delta: ws.Delta,
		Split: ws.Split, Strategy: ws.Strategy, Sensitivity: ws.Sensitivity, KeepMeasurements: ws.KeepMeasurements,
		DomainsFromData: ws.DomainsFromData}
}

// spec returns the Spec that plans the release of views vs.
func (vs viewSpec) spec() Spec {
	return Spec{Tables: vs.Views, Weights: vs.Weights, Exact: vs.Exact, Mechanism: vs.Mechanism, Epsilon: vs.Epsilon,
		Rho: vs.Rho, Delta: vs.Delta, Split: vs.Split, Sensitivity: vs.Sensitivity, DomainsFromData: vs.DomainsFromData,
		KeepMeasurements: vs.KeepMeasurements}
}

// spec returns the Spec that plans the release of one cuboid cs.
func (cs cuboidSpec) spec() Spec {
	return Spec{Tables: []domain.View{domain.ViewOf(cs.Cuboid)}, Exact: viewsOf(cs.Exact), Mechanism: cs.Mechanism,
		Epsilon: cs.Epsilon, Rho: cs.Rho, Delta: cs.Delta, Sensitivity: cs.Sensitivity, DomainsFromData: cs.DomainsFromData,
		NonNegative: cs.NonNegative && !cs.Integer, Integer: cs.Integer, Tol: cs.Tol, KeepMeasurements: cs.keepNoisy}
}

// flatCounts returns the counts of cuboids as the counts of their views.
func flatCounts(exact map[domain.Cuboid][]float64) map[domain.View][]float64 {
	out := make(map[domain.View][]float64, len(exact))
	for c, x := range exact {
		out[domain.ViewOf(c)] = x
	}
	return out
}

// runSpec plans spec and runs the plan on the counts of the views it needs,
// projected from c.
func runSpec(ctx context.Context, c *cube.Cube, spec Spec, r *noise.Rand) (*Release, error) {
	p, err := NewPlanContext(ctx, c.Schema, spec)
	if err != nil {
		return nil, err
	}
	counts, err := c.ProjectViews(p.Needs())
	if err != nil {
		return nil, err
	}
	return p.Run(ctx, counts, r)
}

// runWorkload releases the flat workload ws from the exact counts of
// cuboids, through NewPlan and Run.
func runWorkload(ctx context.Context, s *domain.Schema, exact map[domain.Cuboid][]float64, ws workloadSpec, r *noise.Rand) (*Release, error) {
	p, err := NewPlanContext(ctx, s, ws.spec())
	if err != nil {
		return nil, err
	}
	return p.Run(ctx, flatCounts(exact), r)
}

// runWorkloadCube releases the flat workload ws from the cube c, through
// NewPlan and Run.
func runWorkloadCube(ctx context.Context, c *cube.Cube, ws workloadSpec, r *noise.Rand) (*Release, error) {
	return runSpec(ctx, c, ws.spec(), r)
}

// runViews releases the views vs from their counts, through NewPlan and Run.
func runViews(ctx context.Context, s *domain.Schema, counts map[domain.View][]float64, vs viewSpec, r *noise.Rand) (*Release, error) {
	p, err := NewPlanContext(ctx, s, vs.spec())
	if err != nil {
		return nil, err
	}
	return p.Run(ctx, counts, r)
}

// needsOf returns the views a plan of spec needs counted.
func needsOf(s *domain.Schema, spec Spec) ([]domain.View, error) {
	p, err := NewPlan(s, spec)
	if err != nil {
		return nil, err
	}
	return p.Needs(), nil
}

// errNotOneCuboid says the dispatch did not plan a spec of one cuboid as
// the release of that cuboid itself.
var errNotOneCuboid = errors.New("release test: the plan does not measure the one table itself")

// runCube releases the one cuboid cs from the cube c through NewPlan and
// Run, and returns it as the cuboid release the plan describes
// (Plan.Cuboid) with Run's counts, invariants and post-processing.
func runCube(ctx context.Context, c *cube.Cube, cs cuboidSpec, r *noise.Rand) (*CuboidRelease, error) {
	p, err := NewPlanContext(ctx, c.Schema, cs.spec())
	if err != nil {
		return nil, err
	}
	rel := p.Cuboid()
	if rel == nil {
		return nil, errNotOneCuboid
	}
	counts, err := c.ProjectViews(p.Needs())
	if err != nil {
		return nil, err
	}
	w, err := p.Run(ctx, counts, r)
	if err != nil {
		return nil, err
	}
	t := w.Tables[0]
	rel.Counts, rel.Invariants, rel.Seeded = t.Counts, slices.Clone(w.Invariants), w.Seeded
	rel.NonNegativeResidual = t.NonNegativeResidual
	rel.IntegerExact, rel.IntegerMethod, rel.IntegerMaxDeviation = t.IntegerExact, t.IntegerMethod, t.IntegerMaxDeviation
	if w.noisy != nil && len(w.noisy) == 1 {
		rel.noisy = w.noisy[0]
	}
	return rel, nil
}

// flatNeeds returns the cuboids a plan of the flat workload ws needs
// counted.
func flatNeeds(s *domain.Schema, ws workloadSpec) ([]domain.Cuboid, error) {
	vs, err := needsOf(s, ws.spec())
	if err != nil {
		return nil, err
	}
	out := make([]domain.Cuboid, len(vs))
	for i, v := range vs {
		out[i] = v.Dims
	}
	return out, nil
}
