package strategy

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/knowdp/knowdp/query"
)

// Optimize chooses a strategy for the workload w over a domain of the given
// shape, for the mechanism at the budget (epsilon for Laplace noise, rho for
// Gaussian noise), with no invariants: the measurements, their shares of the
// budget and their noise, minimising the expected total squared error of
// the workload's queries under the GLS estimate (or, with
// Options.MaxVariance, the largest weighted per-query variance).
//
// Families searched (the best is returned; Strategy.Family names it):
//
//   - Gaussian: residual measurements with closed-form variances
//     (ResidualPlanner), for any workload factors;
//   - Laplace: marginals anywhere in the lattice with shares of epsilon;
//   - when a workload factor is not an identity or a total (prefix, ranges,
//     roll-ups, matrices): also one Kronecker product of per-dimension
//     factors (hierarchical intervals, p-Identity, identity, total), and
//     for several terms a union of such products, one per term.
//
// The returned Objective is recomputed by Objective from the measurements
// themselves. LowerBound is the SVD bound over every strategy of the
// mechanism (absent when Options.Sensitivity replaces the add/remove
// sensitivities); FamilyBound is a bound within the family, where one is
// certified.
func Optimize(ctx context.Context, shape []int, w query.Workload, mech Mechanism, budget float64, opt Options) (*Strategy, error) {
	if err := checkShape(shape); err != nil {
		return nil, err
	}
	if err := checkBudget(mech, budget); err != nil {
		return nil, err
	}
	if len(w) == 0 {
		return nil, errors.New("strategy: an empty workload")
	}
	if err := w.Check(shape); err != nil {
		return nil, fmt.Errorf("strategy: workload: %w", err)
	}
	if opt.MaxVariance && mech != Gaussian {
		return nil, errors.New("strategy: the max-variance objective is planned for Gaussian noise only")
	}
	l, err := newLattice(shape, w, opt.Known)
	if err != nil {
		return nil, err
	}
	marginal := true
	for _, t := range w {
		for _, f := range t.Term {
			if _, _, ok := marginalKind(f); !ok {
				marginal = false
			}
		}
	}
	var cands []*Strategy
	switch {
	case opt.MaxVariance:
		st, err := maxVarianceStrategy(l, budget, opt)
		if err != nil {
			return nil, err
		}
		if opt.Sensitivity == nil {
			// With add/remove sensitivities each dual value is the
			// closed-form optimum of a weighted sum of the workload's
			// variances, which is the SVD bound of that weighted
			// workload: a bound over every strategy.
			st.LowerBound = st.FamilyBound
			st.LowerBound.Over = "every strategy of the matrix mechanism with Gaussian noise at this rho (add/remove neighbours), GLS estimate"
			st.LowerBound.Method += "; each dual value is the SVD bound of a weighted sum of the workload's terms"
		}
		return st, nil
	case mech == Gaussian:
		st, err := residualStrategy(l, budget, opt)
		if err != nil {
			return nil, err
		}
		cands = append(cands, st)
	default:
		st, err := laplaceLattice(ctx, l, budget, opt)
		if err != nil {
			return nil, err
		}
		cands = append(cands, st)
	}
	if !marginal && opt.Known == nil {
		st, err := kronStrategy(ctx, shape, w, mech, budget, opt)
		switch {
		case err == nil:
			cands = append(cands, st)
		case ctx.Err() != nil:
			return nil, ctx.Err()
		}
		if len(w) > 1 {
			st, err := unionStrategy(ctx, shape, w, mech, budget, opt)
			switch {
			case err == nil:
				cands = append(cands, st)
			case ctx.Err() != nil:
				return nil, ctx.Err()
			}
		}
	}
	var best *Strategy
	for _, st := range cands {
		per, err := termErrors(shape, w, st.Measurements, opt.Known)
		var obj float64
		for _, v := range per {
			obj += v
		}
		if err != nil {
			return nil, fmt.Errorf("strategy: %s: %w", st.Family, err)
		}
		if d := math.Abs(obj - st.Objective); d > 1e-7*obj {
			return nil, fmt.Errorf("strategy: internal: %s: planned objective %v, exact %v", st.Family, st.Objective, obj)
		}
		st.Objective = obj
		if best == nil || obj < best.Objective {
			best = st
		}
	}
	if best != cands[0] {
		// The family bound of another family says nothing of this one.
		best.FamilyBound = Bound{}
	}
	if best.FamilyBound.Over == "" {
		best.FamilyBound = Bound{Over: "none: the family is searched by local optimisation, without a certificate"}
	}
	if opt.Sensitivity == nil {
		b, err := SVDBound(shape, w, mech, budget)
		if err != nil {
			return nil, err
		}
		best.LowerBound = b
	} else {
		best.LowerBound = Bound{Over: "none: the SVD bound holds for add/remove sensitivities, and Options.Sensitivity replaces them"}
	}
	return best, nil
}
