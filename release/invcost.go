package release

// What each invariant costs: publishing a view exactly fixes the residuals
// under it (no error there) but changes the neighbours every measurement
// is calibrated to (larger sensitivities), so an invariant can lower the
// error of some tables and raise that of others. With Spec.InvariantCosts
// the plan is made again without each invariant in turn, and without any,
// with the same strategy, objective and budget, and each table states its
// variance in each case (sidecar.TableMetadata.WithoutInvariants): the error with
// and without it, from the mechanism alone.

import (
	"fmt"
	"slices"

	"github.com/knowdp/knowdp/sidecar"
)

// invariantCosts plans spec again without each invariant and without any,
// and returns each table's costs.
func invariantCosts(p *Plan) ([][]sidecar.InvariantCost, error) {
	spec, s := p.spec, p.schema
	if len(spec.Exact) == 0 {
		return nil, nil
	}
	if p.cross != nil {
		return nil, fmt.Errorf("release: what each invariant costs is not computed across two or more hierarchies (their errors are known only from the estimate)")
	}
	var variants [][]int // the invariants left out
	for i := range spec.Exact {
		variants = append(variants, []int{i})
	}
	if len(spec.Exact) > 1 {
		all := make([]int, len(spec.Exact))
		for i := range all {
			all[i] = i
		}
		variants = append(variants, all)
	}
	out := make([][]sidecar.InvariantCost, len(spec.Tables))
	for _, left := range variants {
		alt := spec
		alt.InvariantCosts = false
		alt.Exact = nil
		var names [][]string
		for i, e := range spec.Exact {
			if slices.Contains(left, i) {
				names = append(names, nonNil(s.ViewNames(e)))
				continue
			}
			alt.Exact = append(alt.Exact, e)
		}
		q, err := NewPlan(s, alt)
		for i := range spec.Tables {
			c := sidecar.InvariantCost{Without: names}
			if err != nil {
				c.Note = "cannot be planned without them: " + err.Error()
			} else if t, ok := q.plannedTable(i); ok {
				c.Variance, c.MOE90 = t.Variance, t.MOE90
			} else {
				c.Note = "the plan without them states no error before the data"
			}
			out[i] = append(out[i], c)
		}
	}
	return out, nil
}

// plannedTable returns table i of the plan as planned (its variance and
// margin known before any data), where the engine knows them.
func (p *Plan) plannedTable(i int) (Table, bool) {
	switch {
	case p.ranges != nil:
		return p.ranges.tables[i], true
	case p.flat != nil:
		return p.flat.Release.Tables[i], true
	case p.views != nil && p.views.flat != nil:
		return p.views.flat.Release.Tables[i], true
	case p.views != nil && p.views.p != nil:
		return p.views.p.tables[i], true
	}
	return Table{}, false
}
