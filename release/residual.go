package release

// Residual measurements (ResidualPlanner's strategy for Gaussian noise): the
// noise, calibration and exact rounding of the Helmert contrasts are
// package contrast's; here, which residuals a plan measures.

import (
	"fmt"
	"strings"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/query"
	"github.com/knowdp/knowdp/sensitivity"
)

// residualTerm returns R_A over the schema's domain: Helmert contrasts on
// A's dimensions, totals elsewhere.
func residualTerm(sizes []int, a domain.Cuboid) query.Term {
	t := make(query.Term, len(sizes))
	for i, n := range sizes {
		if a.Has(i) {
			t[i] = query.NewResidual(n)
		} else {
			t[i] = query.NewTotal(n)
		}
	}
	return t
}

// addResiduals adds a residual measurement of every cuboid of as (none of
// whose dimensions has one value), each calibrated to the L2 sensitivity of
// its Helmert contrasts under the invariants; those the invariants
// determine are left out.
func (p *workloadPlan) addResiduals(as []domain.Cuboid) error {
	trivial := sensitivity.TrivialDims(p.s)
	for _, a := range as {
		if a&trivial != 0 || a == 0 {
			return fmt.Errorf("release: internal: residual %s has a dimension of one value or none", p.s.Format(a))
		}
		l2, err := sensitivity.TermL2Sensitivity(p.s, p.exact, residualTerm(p.sizes, a))
		if err != nil {
			return fmt.Errorf("release: residual %s: %w", p.s.Format(a), err)
		}
		if l2.Value == 0 {
			continue
		}
		rule := l2.Rule
		if !l2.Exact && !strings.HasPrefix(rule, "upper bound") {
			rule = "upper bound: " + rule
		}
		p.meas = append(p.meas, measurement{c: a, resid: true, l2: l2.Value, l2rule: rule})
	}
	return nil
}

// hasResiduals reports whether a residual was measured.
func (w *Release) hasResiduals() bool {
	for _, m := range w.Measurements {
		if m.Residual {
			return true
		}
	}
	return false
}
