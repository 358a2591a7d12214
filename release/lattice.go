package release

// The lattice strategy (Laplace noise): marginals anywhere in the lattice
// of cuboids, above or below the requested ones, as package strategy's
// search chooses them (HDMM's OPT_M family and more). The search works on
// the same objective as the split (the weighted total variance of the
// tables in the residual basis), with each candidate cuboid calibrated to
// its generic sensitivity under the invariants and the residuals the
// invariants fix left out; the split among the cuboids it chooses is then
// solved again by the certified solver from the search's shares, so the
// plan states a certificate for its split as every plan does.

import (
	"context"
	"fmt"
	"slices"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate/resbasis"
	"github.com/knowdp/knowdp/query"
	"github.com/knowdp/knowdp/strategy"
)

// latticeMaxWork caps the lattice search's work (package plan's unit, about
// 1.5 ns each on a 2-core development machine): about 6 s. The searches of
// issue 32's workloads on the arrests schema (eight dimensions, every
// cuboid a candidate) end by themselves at 0.5e9 to 1.9e9 units.
const latticeMaxWork = 4e9

// planLattice plans the lattice strategy for spec (Laplace noise, the
// optimal split), given its requested plan req. It returns nil when the
// search finds nothing to measure.
func planLattice(ctx context.Context, s *domain.Schema, spec workloadSpec, req *workloadPlan) (*workloadPlan, error) {
	// The tables in the order of their cuboids: the search's starting
	// points, hence its result, do not depend on the order of the request.
	weights := map[domain.Cuboid]float64{}
	var cubs []domain.Cuboid
	for _, t := range req.tables {
		if t.Public {
			continue
		}
		if _, ok := weights[t.Cuboid]; !ok {
			cubs = append(cubs, t.Cuboid)
		}
		weights[t.Cuboid] += t.Weight
	}
	slices.Sort(cubs)
	var w query.Workload
	for _, c := range cubs {
		w = append(w, query.Weighted{Term: marginalTerm(req.sizes, c), Weight: weights[c]})
	}
	if len(w) == 0 {
		return nil, nil
	}
	probe := &workloadPlan{s: s, exact: req.exact}
	sens := func(t query.Term) (l1, l2 float64, err error) {
		c, ok := cuboidOfTerm(t)
		if !ok {
			return 0, 0, fmt.Errorf("release: internal: the lattice search asked for a term that is not a cuboid")
		}
		x, err := probe.sensitivity(c, spec.Sensitivity)
		if err != nil {
			return 0, 0, err
		}
		return float64(x.Value), float64(x.Value), nil
	}
	known := func(a uint64) bool {
		r, ok := req.basis.Res[domain.Cuboid(a)]
		return ok && r.Status == resbasis.Fixed
	}
	st, err := strategy.Optimize(ctx, req.sizes, w, strategy.Laplace, spec.Epsilon.Float64(), strategy.Options{Sensitivity: sens, Known: known, MaxWork: latticeMaxWork})
	if err != nil {
		return nil, err
	}
	var measure []domain.Cuboid
	var start []float64
	for _, m := range st.Measurements {
		c, ok := cuboidOfTerm(m.Term)
		if !ok {
			return nil, fmt.Errorf("release: internal: the lattice search measured a term that is not a cuboid (%s)", st.Family)
		}
		measure, start = append(measure, c), append(start, m.Share)
	}
	if len(measure) == 0 {
		return nil, nil
	}
	lat := spec
	lat.Strategy, lat.Measure = MeasureRequested, measure
	p, err := planMeasured(ctx, s, lat, start)
	if err != nil {
		return nil, err
	}
	p.strategy = MeasureLattice
	p.latticeCands = st.Candidates
	if p.cert != nil {
		p.cert.Work += st.Work // the search is part of finding the split
	}
	return p, nil
}

// cuboidOfTerm returns the cuboid a term of identities and totals is.
func cuboidOfTerm(t query.Term) (domain.Cuboid, bool) {
	var c domain.Cuboid
	for i, f := range t {
		switch f.Kind {
		case query.Identity:
			c |= 1 << i
		case query.Total:
		default:
			return 0, false
		}
	}
	return c, true
}

// latticeCuboids returns the cuboids of the lattice (strategy.LatticeCuboids,
// pruned on large schemas) that can be measured: a computable, positive
// sensitivity under the invariants.
func (p *workloadPlan) latticeCuboids(override int) []domain.Cuboid {
	order := 0
	for _, t := range p.tables {
		order = max(order, t.Cuboid.Len())
	}
	probe := &workloadPlan{s: p.s, exact: p.exact}
	var out []domain.Cuboid
	for _, c := range strategy.LatticeCuboids(p.sizes, order, 0) {
		if sens, err := probe.sensitivity(domain.Cuboid(c), override); err == nil && sens.Value > 0 {
			out = append(out, domain.Cuboid(c))
		}
	}
	return out
}
