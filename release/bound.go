package release

import (
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/query"
	"github.com/knowdp/knowdp/sidecar"
	"github.com/knowdp/knowdp/strategy"
)

// lowerBound returns the SVD bound of the matrix mechanism (Li and Miklau)
// on the plan's objective: the least weighted total variance of any
// strategy with the plan's noise and budget, for add/remove neighbours
// (no invariant). Nil where it does not apply (invariants, or no
// measurement) or cannot be computed.
func (p *workloadPlan) lowerBound() *sidecar.Bound {
	if len(p.exact) > 0 || len(p.meas) == 0 {
		return nil
	}
	var w query.Workload
	for _, t := range p.tables {
		w = append(w, query.Weighted{Term: marginalTerm(p.sizes, t.Cuboid), Weight: t.Weight})
	}
	mech, budget := strategy.Laplace, p.budget.Float64()
	if p.mech == MechanismGaussian {
		mech, budget = strategy.Gaussian, p.rho.Float64()
	}
	b, err := strategy.SVDBound(p.sizes, w, mech, budget)
	if err != nil || !(b.Value > 0) {
		return nil
	}
	return &sidecar.Bound{Value: b.Value, Over: b.Over, Method: b.Method}
}

// marginalTerm returns the cuboid c as a query term: identity on its
// dimensions, total elsewhere.
func marginalTerm(sizes []int, c domain.Cuboid) query.Term {
	return query.Marginal(sizes, c.Has)
}
