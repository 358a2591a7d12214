package release

// What the optimal split minimises, and targets of accuracy.
//
// ObjectiveTotal is the weighted sum of every cell's error variance,
// Σ_T w_T Σ_{c∈T} Var ŷ_c: the expected total squared error of every
// published number, HDMM's and ResidualPlanner's objective, the default
// for tables at the finest levels. It puts the budget where the cells are:
// a fine table of 3,000 cells weighs 60 times a coarse one of 50.
// ObjectiveMean weighs each table by its mean cell variance instead (w_T /
// |T| per cell): every table counts the same whatever its size, the
// default across the levels of a hierarchy (ObjectiveAuto), where the
// total would give the finest level nearly all the budget (84% to the 842
// places of data/us-geo.schema.json below regions, divisions and states,
// the regions' margins 2.5 times the spine split's; docs/hierarchy.md). ObjectiveMax minimises the largest weighted cell
// variance of any table, max_T w_T Var ŷ_T (Gaussian noise, tables at the
// finest levels): for every weighting λ of the tables (a point of the
// simplex), the least λ-weighted sum of the w_T Var ŷ_T is at most the
// least maximum, so the best of those lower bounds (the dual, concave in
// λ) certifies the split; exponentiated-gradient ascent on λ, each step a
// certified convex split, gives the split (the best maximum seen) and the
// bound (the best lower bound seen): plan.SolveMax.
//
// Targets (Spec.TargetMOE90): a margin of error per table, met with the
// least budget. For Gaussian noise every variance is proportional to
// 1/rho at fixed fractions of it, so the least rho that meets every target
// is the max objective with weights (1.645/t_T)² at rho = 1, its split
// the max objective's; for Laplace noise every margin is proportional to
// 1/eps, and the split minimises the sum of the tables' mean variances
// weighted by 1/t_T² before eps is scaled to the least that meets every
// target at that split. Spec's budget is then a cap.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate/resbasis"
	"github.com/knowdp/knowdp/moe"
	splitplan "github.com/knowdp/knowdp/plan"
	"github.com/knowdp/knowdp/privacy"
)

// Objective says what the optimal split minimises.
type Objective int

const (
	// ObjectiveAuto (the zero value) is ObjectiveMean for tables at the
	// levels of a hierarchy, whose sizes differ by orders of magnitude (4
	// regions, 3,000 counties: summing over cells would give the finest
	// level nearly all the budget), and ObjectiveTotal otherwise.
	ObjectiveAuto Objective = iota
	// ObjectiveTotal minimises the weighted sum of every cell's error
	// variance (each table's weight times the sum over its cells).
	ObjectiveTotal
	// ObjectiveMean minimises the weighted sum of each table's mean cell
	// variance: every table counts the same whatever its number of cells.
	ObjectiveMean
	// ObjectiveMax minimises the largest weighted cell variance of any
	// table (Gaussian noise, tables at the finest levels).
	ObjectiveMax
)

// String returns "auto", "total", "mean" or "max".
func (o Objective) String() string {
	switch o {
	case ObjectiveAuto:
		return "auto"
	case ObjectiveTotal:
		return "total"
	case ObjectiveMean:
		return "mean"
	case ObjectiveMax:
		return "max"
	}
	return fmt.Sprintf("Objective(%d)", int(o))
}

// ParseObjective parses "auto", "total", "mean" or "max".
func ParseObjective(name string) (Objective, error) {
	switch name {
	case "auto":
		return ObjectiveAuto, nil
	case "total":
		return ObjectiveTotal, nil
	case "mean":
		return ObjectiveMean, nil
	case "max":
		return ObjectiveMax, nil
	}
	return 0, fmt.Errorf("objective %q: want auto, total, mean or max", name)
}

// describe says what the objective is, for the sidecar.
func (o Objective) describe() string {
	switch o {
	case ObjectiveMean:
		return "the weighted sum of each table's mean cell variance (each table counts the same whatever its size)"
	case ObjectiveMax:
		return "the largest weighted cell variance of any table"
	}
	return "the weighted sum of every cell's (every query's) error variance: the expected total squared error"
}

// meanWeights returns the weights of spec's tables for ObjectiveMean: each
// table's weight divided by its number of cells (or queries).
func meanWeights(s *domain.Schema, spec Spec) []float64 {
	out := make([]float64, len(spec.Tables))
	for i, v := range spec.Tables {
		w := 1.0
		if spec.Weights != nil {
			w = spec.Weights[i]
		}
		n := s.ViewSize(v)
		if spec.Queries != nil && spec.Queries[i].Kind != QueryCells {
			n = TableTerm(s, v, spec.Queries[i]).Rows()
		}
		out[i] = w / float64(n)
	}
	return out
}

// tableVariance returns the cell variance of every non-public table at
// the precisions W of a split (resbasis.Basis.CellVariance's formula), and
// each one's weighted value w_T Var_T.
func (p *workloadPlan) tableVariances(w map[domain.Cuboid]float64) []float64 {
	out := make([]float64, len(p.tables))
	for i, t := range p.tables {
		if t.Public {
			continue
		}
		out[i] = p.basis.CellVarianceAt(t.Cuboid, w)
	}
	return out
}

// minimaxFractions solves ObjectiveMax for Gaussian noise (package
// comment; splitplan.SolveMax) and records its certificate.
func (p *workloadPlan) minimaxFractions(ctx context.Context) ([]float64, error) {
	o := p.objective()
	keys := make([]domain.Cuboid, 0, len(p.basis.Res))
	for a, r := range p.basis.Res {
		if r.Status == resbasis.Free && r.Weight > 0 {
			keys = append(keys, a)
		}
	}
	slices.Sort(keys) // the order of objective()'s terms
	if len(keys) == 0 {
		return p.optimalFractions(ctx)
	}
	mp := splitplan.MaxProblem{Covers: o.Covers, Coef: o.C}
	for _, t := range p.tables {
		if t.Public {
			continue
		}
		size := float64(p.s.CuboidSize(t.Cuboid))
		var terms []splitplan.TableTerm
		for j, r := range keys {
			if r&^t.Cuboid == 0 {
				terms = append(terms, splitplan.TableTerm{Term: j, Coef: t.Weight * p.basis.Pi(r) * float64(p.s.CuboidSize(r)) / (size * size)})
			}
		}
		mp.Tables = append(mp.Tables, terms)
	}
	res, err := splitplan.SolveMax(ctx, mp)
	if err != nil {
		return nil, fmt.Errorf("workload: max-variance split: %w", err)
	}
	p.cert = &SplitCertificate{Bound: res.Bound, Gap: res.Gap, Global: res.Global, Work: res.Work, Method: res.Method}
	return res.X, nil
}

// maxObjective returns max_T w_T Var_T at the plan's shares (the tables'
// variances must be set).
func (p *workloadPlan) maxObjective() float64 {
	worst := 0.0
	for _, t := range p.tables {
		if !t.Public {
			worst = max(worst, t.Weight*t.Variance)
		}
	}
	return worst
}

// planTargets plans a release whose tables have target margins of error:
// the least budget, at most spec's, that meets every target (package
// comment). p is the plan being built, returned with the engine that
// releases.
func planTargets(s *domain.Schema, spec Spec, p *Plan) (*Plan, error) {
	gaussian := spec.Mechanism == MechanismGaussian
	switch {
	case len(spec.TargetMOE90) != len(spec.Tables):
		return nil, fmt.Errorf("release: %d target margins of error for %d tables", len(spec.TargetMOE90), len(spec.Tables))
	case spec.Objective != ObjectiveAuto && spec.Objective != ObjectiveTotal:
		return nil, fmt.Errorf("release: targets of accuracy choose the objective (the largest weighted variance for Gaussian noise); leave the objective %v unset", spec.Objective)
	case slices.ContainsFunc(spec.Weights, func(w float64) bool { return w != 1 }):
		return nil, errors.New("release: targets of accuracy set the tables' weights; leave the weights unset")
	case len(coarseDims(spec)) > 0 || spec.Queries != nil:
		return nil, errors.New("release: targets of accuracy are planned for tables of cells at the finest levels of every dimension")
	case spec.Split != SplitOptimal && spec.Split != SplitAuto:
		return nil, fmt.Errorf("release: targets of accuracy take the optimal split, not %v", spec.Split)
	case spec.Integer:
		return nil, errors.New("release: targets of accuracy are margins of the least-squares estimate; integer rounding adds up to 1 to each (leave --integer out, or raise the targets by 1 and use --nonneg)")
	case gaussian && spec.Rho.IsZero():
		return nil, errors.New("release: with targets of accuracy, rho is the most the release may spend: set it")
	case !gaussian && spec.Epsilon.IsZero():
		return nil, errors.New("release: with targets of accuracy, epsilon is the most the release may spend: set it")
	}
	for i, t := range spec.TargetMOE90 {
		if !(t > 0) || math.IsInf(t, 0) {
			return nil, fmt.Errorf("release: the target margin of error of table %d (%s) must be finite and > 0, got %v", i+1, s.FormatView(spec.Tables[i]), t)
		}
	}
	try := spec
	try.TargetMOE90, try.Split = nil, SplitOptimal
	try.Weights = make([]float64, len(spec.Tables))
	for i, t := range spec.TargetMOE90 {
		if gaussian {
			// w_T Var_T <= 1 is moe90 = moe.Z95 sd <= t.
			try.Weights[i] = (moe.Z95 / t) * (moe.Z95 / t)
		} else {
			// The mean variance relative to the target's square.
			try.Weights[i] = 1 / (t * t * float64(s.ViewSize(spec.Tables[i])))
		}
	}
	try.Objective = ObjectiveTotal
	if gaussian {
		try.Objective = ObjectiveMax
	}
	// The margins at a unit budget; every margin is proportional to
	// 1/sqrt(rho) (Gaussian) or 1/eps (Laplace) at fixed fractions of it.
	unit := try
	var err error
	if gaussian {
		unit.Rho, err = privacy.NewRho(1)
	} else {
		unit.Epsilon, err = privacy.NewEpsilon(1)
	}
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	up, err := NewPlan(s, unit)
	if err != nil {
		return nil, err
	}
	worst := up.worstTarget(spec.TargetMOE90)
	need := worst * worst
	if !gaussian {
		need = worst
	}
	cap := spec.Epsilon.Float64()
	if gaussian {
		cap = spec.Rho.Float64()
	}
	for attempt := 0; attempt < 4; attempt++ {
		// A hair more for the grids and the rounding of shares to whole
		// accounting steps; raised again if a margin still misses.
		need *= 1 + 1e-6*math.Pow(16, float64(attempt))
		if need > cap {
			name := "epsilon"
			if gaussian {
				name = "rho"
			}
			return nil, fmt.Errorf("release: the targets of accuracy need %s %.6g, more than the budget %.6g; raise the budget or the targets (the tightest is table %s)", name, need, cap, s.FormatView(spec.Tables[up.tightest(spec.TargetMOE90)]))
		}
		final := try
		if gaussian {
			final.Rho, err = privacy.NewRho(need)
		} else {
			final.Epsilon, err = privacy.NewEpsilon(need)
		}
		if err != nil {
			return nil, fmt.Errorf("release: %w", err)
		}
		fp, err := NewPlan(s, final)
		if err != nil {
			return nil, err
		}
		if fp.worstTarget(spec.TargetMOE90) <= 1 {
			fp.spec = final
			fp.targets = slices.Clone(spec.TargetMOE90)
			if fp.flat != nil {
				for i := range fp.flat.Release.Tables {
					fp.flat.Release.Tables[i].TargetMOE90 = spec.TargetMOE90[i]
					fp.flat.p.tables[i].TargetMOE90 = spec.TargetMOE90[i]
				}
			}
			return fp, nil
		}
	}
	return nil, errors.New("release: internal: the planned budget does not meet the targets")
}

// worstTarget returns the largest ratio of a table's margin of error to
// its target in a flat plan.
func (p *Plan) worstTarget(targets []float64) float64 {
	worst := 0.0
	if p.flat == nil {
		return math.Inf(1)
	}
	for i, t := range p.flat.Release.Tables {
		worst = max(worst, t.MOE90/targets[i])
	}
	return worst
}

// tightest returns the table whose margin is furthest from its target.
func (p *Plan) tightest(targets []float64) int {
	best, at := -1.0, 0
	if p.flat == nil {
		return 0
	}
	for i, t := range p.flat.Release.Tables {
		if r := t.MOE90 / targets[i]; r > best {
			best, at = r, i
		}
	}
	return at
}
