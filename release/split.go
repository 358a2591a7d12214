package release

// The optimal split of a workload's budget, and the choice of what to
// measure. The mathematics (and its certificate) is in package plan (imported as splitplan); this
// file turns a workload plan into a splitplan.Problem and back.

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate/resbasis"
	splitplan "github.com/knowdp/knowdp/plan"
	"github.com/knowdp/knowdp/sensitivity"
)

// MeasureStrategy says which cuboids a workload release adds noise to when
// Spec.Measure does not list them.
type MeasureStrategy int

const (
	// MeasureRequested measures the requested cuboids that no invariant
	// determines (the optimal split may leave some out).
	MeasureRequested MeasureStrategy = iota
	// MeasureMarginals lets the optimal split choose among every cuboid
	// under a requested one (the down-closure of the workload), each
	// calibrated to its own generic sensitivity under the invariants: a
	// smaller marginal that several requested tables share can be cheaper
	// to measure than the tables themselves.
	MeasureMarginals
	// MeasureBest plans every strategy that applies (requested, marginals,
	// and residuals for Gaussian noise or lattice for Laplace noise) and
	// keeps the one with the smallest weighted total variance (the earlier
	// on a tie).
	MeasureBest
	// MeasureResiduals (Gaussian noise) lets the optimal split choose among
	// the residuals of the workload (ResidualPlanner's measurements: the
	// Helmert contrasts of a cuboid, residual.go) and the marginals under
	// the requested cuboids, each calibrated to its own L2 sensitivity
	// under the invariants. Without invariants it reaches the least
	// expected error of every strategy of the matrix mechanism on a
	// marginal workload (ResidualPlanner's closed form, which meets the SVD
	// bound).
	MeasureResiduals
	// MeasureLattice (Laplace noise) measures marginals anywhere in the
	// lattice of cuboids, above or below the requested ones, chosen with
	// their shares by package strategy's search (HDMM's OPT_M family and
	// more), each calibrated to its generic sensitivity under the
	// invariants; the split among the chosen cuboids is then certified.
	MeasureLattice
)

// String returns "requested", "marginals" or "best".
func (ms MeasureStrategy) String() string {
	switch ms {
	case MeasureRequested:
		return "requested"
	case MeasureMarginals:
		return "marginals"
	case MeasureBest:
		return "best"
	case MeasureResiduals:
		return "residuals"
	case MeasureLattice:
		return "lattice"
	}
	return fmt.Sprintf("MeasureStrategy(%d)", int(ms))
}

// ParseMeasureStrategy parses "requested", "marginals", "residuals",
// "lattice" or "best".
func ParseMeasureStrategy(name string) (MeasureStrategy, error) {
	switch name {
	case "requested":
		return MeasureRequested, nil
	case "marginals":
		return MeasureMarginals, nil
	case "best":
		return MeasureBest, nil
	case "residuals":
		return MeasureResiduals, nil
	case "lattice":
		return MeasureLattice, nil
	}
	return 0, fmt.Errorf("strategy %q: want requested, marginals, residuals (Gaussian noise), lattice (Laplace noise) or best", name)
}

// SplitCertificate is what the optimal split proves about itself.
type SplitCertificate struct {
	// Bound is a proved lower bound of the weighted total variance over
	// every split of the budget among the candidate measurements, and Gap
	// is (objective - Bound) / objective.
	Bound, Gap float64
	// Global is true when Gap is within the solver's tolerance (1e-6).
	Global bool
	// Method says how the split was found and the bound proved.
	Method string
	// Over says which splits Bound bounds: the candidates of the families
	// searched, not every strategy (Release.LowerBound is that).
	Over string
	// Work is what finding it took, in plan.Result.Work's unit (summed
	// over the problems solved; for views across a hierarchy, the node
	// visits of the variance passes converted to it). It stays within
	// SplitWork, but for the evaluations of the step during which a search
	// reaches it.
	Work float64
}

// problem returns the split problem of the objective.
func problemOf(o resbasis.Objective) splitplan.Problem {
	pr := splitplan.Problem{Weights: o.A, Covers: o.Covers, Coef: o.C, Power: 2}
	if o.Power == 1 {
		pr.Power = 1
	}
	return pr
}

// optimalFractions minimises the objective on the simplex with splitplan.Solve
// (certified: see SplitCertificate) and records the certificate in the
// plan. Measurements with no share have fraction 0. It fails when ctx ends
// first or when the objective's arithmetic is not finite (weights that
// span too many orders of magnitude), never with a split that is not one.
func (p *workloadPlan) optimalFractions(ctx context.Context) ([]float64, error) {
	o := p.objective()
	k := len(o.C)
	if len(o.A) == 0 {
		equal := make([]float64, k)
		for i := range equal {
			equal[i] = 1 / float64(k)
		}
		return equal, nil // every table is public: nothing to optimise
	}
	for i, a := range o.A {
		if !(a > 0) || math.IsInf(a, 0) {
			return nil, fmt.Errorf("workload: optimal split: the weighted variance of residual %d is %v (the weights are too large or too small to sum)", i, a)
		}
	}
	if k == 1 {
		// One measurement takes the whole budget: the only point of the
		// simplex is the optimum, exactly.
		v := o.Value([]float64{1})
		p.cert = &SplitCertificate{Bound: v, Gap: 0, Global: true, Method: "one measurement: it takes the whole budget"}
		return []float64{1}, nil
	}
	var starts [][]float64
	if p.start != nil {
		starts = append(starts, p.start)
	}
	res, err := splitplan.Solve(ctx, problemOf(o), splitplan.Options{Starts: starts})
	if err != nil {
		// planWorkload checked the rest of what Solve checks (every needed
		// residual is covered, shares are positive).
		return nil, fmt.Errorf("workload: optimal split: %w", err)
	}
	p.cert = &SplitCertificate{Bound: res.Bound, Gap: res.Gap, Global: res.Global, Method: res.Method, Work: res.Work}
	return res.X, nil
}

// finishObjective sets the objective at the shares actually given (whole
// accounting steps) and the gap to the split's lower bound. It fails when
// the objective is not finite (weights so large that the weighted
// variance overflows): the release would state it.
func (p *workloadPlan) finishObjective() error {
	if len(p.meas) == 0 {
		return nil
	}
	o := p.objective()
	x := make([]float64, len(p.meas))
	for k, m := range p.meas {
		if p.mech == MechanismGaussian {
			x[k] = m.rhoShare.Float64() / p.rho.Float64()
		} else {
			x[k] = m.share.Float64() / p.budget.Float64()
		}
	}
	// The split's model at the shares given: the noise actually drawn has
	// the calibrated variance, a hair above the model where the grid or a
	// residual measurement's rounding costs something (about 2e-6 at most,
	// which the tables' variances include).
	p.objValue = o.Value(x)
	if p.maxVar {
		p.objValue = p.maxObjective()
	}
	if math.IsNaN(p.objValue) || math.IsInf(p.objValue, 0) {
		return fmt.Errorf("workload: the weighted total variance is %v (weights too large)", p.objValue)
	}
	if p.cert != nil && p.objValue > 0 {
		p.cert.Bound = min(p.cert.Bound, p.objValue)
		p.cert.Gap = (p.objValue - p.cert.Bound) / p.objValue
	}
	return nil
}

// downClosure returns the cuboids a MeasureMarginals plan may measure: the
// requested cuboids that are not public, then every cuboid under one (its
// dimensions of size 1 left out), each once, in a fixed order.
func (p *workloadPlan) downClosure() []domain.Cuboid {
	trivial := sensitivity.TrivialDims(p.s)
	seen := map[domain.Cuboid]bool{}
	var out []domain.Cuboid
	for _, t := range p.tables {
		if !t.Public && !seen[t.Cuboid&^trivial] {
			seen[t.Cuboid&^trivial] = true
			out = append(out, t.Cuboid)
		}
	}
	var subs []domain.Cuboid
	for _, t := range p.tables {
		for a := range p.basis.Subsets(t.Cuboid) {
			if !seen[a] {
				seen[a] = true
				subs = append(subs, a)
			}
		}
	}
	// Larger cuboids first, then by their bits: a stable, readable order.
	slices.SortFunc(subs, func(a, b domain.Cuboid) int {
		if na, nb := len(a.Dims()), len(b.Dims()); na != nb {
			return nb - na
		}
		return cmpFloat(float64(a), float64(b))
	})
	return append(out, subs...)
}

// SplitWork returns the most work the optimal split of this release can
// take (plan.WorkBound's unit, for each split problem it solves), from the
// schema and the spec alone, without solving it: 0 when the split is not
// the optimal one or nothing is measured. Planning stops its solver there.
// Its errors are the plan's that come before the split.
func (spec workloadSpec) SplitWork(s *domain.Schema) (float64, error) {
	if spec.Split != SplitOptimal {
		return 0, nil
	}
	req := spec
	req.Strategy = MeasureRequested
	if spec.Strategy != MeasureRequested {
		req.Measure = nil
	}
	p1, err := measuredPlan(s, req, nil)
	if err != nil {
		return 0, err
	}
	work := p1.splitWork(false)
	if spec.Strategy == MeasureRequested {
		return work, nil
	}
	// The marginals plan, started from the requested one's split: its
	// candidates are the down-closure's cuboids that can be measured.
	var cands []domain.Cuboid
	probe := &workloadPlan{s: s, exact: p1.exact}
	for _, c := range p1.downClosure() {
		if sens, err := probe.sensitivity(c, spec.Sensitivity); err == nil && sens.Value > 0 {
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		return work, nil
	}
	best := spec.Strategy == MeasureBest
	if best || spec.Strategy == MeasureMarginals {
		marg := req
		marg.Measure = cands
		p2, err := measuredPlan(s, marg, make([]float64, len(cands)))
		if err != nil {
			return 0, err
		}
		work += p2.splitWork(true)
	}
	lattice := p1.latticeCuboids(spec.Sensitivity)
	switch {
	case spec.Mechanism == MechanismGaussian && (best || spec.Strategy == MeasureResiduals):
		// The residuals alone, and under invariants with the lattice.
		res := req
		res.residuals = p1.freeResiduals()
		if r := p1.basis.Res[0]; r != nil && r.Status == resbasis.Free && r.Weight > 0 {
			res.Measure = []domain.Cuboid{0}
		}
		p3, err := measuredPlan(s, res, nil)
		if err != nil {
			return 0, err
		}
		work += p3.splitWork(false)
		if len(p1.exact) > 0 {
			res.Measure = lattice
			p3b, err := measuredPlan(s, res, nil)
			if err != nil {
				return 0, err
			}
			work += p3b.splitWork(false)
		}
	case spec.Mechanism != MechanismGaussian && spec.Strategy == MeasureBest && p1.oneMarginal():
		// No search (planStrategy: the table itself is optimal).
	case spec.Mechanism != MechanismGaussian && (best || spec.Strategy == MeasureLattice):
		// The lattice search, capped, then the split among the cuboids it
		// chooses, a subset of the lattice: bounded by the split among
		// the whole lattice.
		work += latticeMaxWork
		if len(lattice) > 0 {
			lat := req
			lat.Measure = lattice
			p4, err := measuredPlan(s, lat, make([]float64, len(lattice)))
			if err != nil {
				return 0, err
			}
			work += p4.splitWork(true)
		}
	}
	return work, nil
}

// splitWork is plan.WorkBound of the plan's split problem, solved with a
// start (the options optimalFractions gives Solve) or without.
func (p *workloadPlan) splitWork(start bool) float64 {
	o := p.objective()
	if len(o.A) == 0 {
		return 0
	}
	var opt splitplan.Options
	if start {
		opt.Starts = make([][]float64, 1)
	}
	return splitplan.WorkBound(problemOf(o).Shape(), opt)
}

// planStrategy plans a release whose strategy chooses the measurements:
// the requested plan, then each family the strategy asks for (MeasureBest:
// every family that applies to the mechanism),
//
//   - marginals: the down-closure's cuboids that have a computable,
//     positive sensitivity, started from the requested plan's split;
//   - residuals (Gaussian noise): those marginals and every free residual
//     of the workload (residual.go), a convex split solved to its
//     certificate;
//   - lattice (Laplace noise): the marginals package strategy chooses in
//     the whole lattice (lattice.go), the split among them certified;
//
// and returns the named one, or for MeasureBest the one with the least
// objective (the earlier on a tie within 1e-9).
func planStrategy(ctx context.Context, s *domain.Schema, spec workloadSpec) (*workloadPlan, error) {
	req := spec
	req.Strategy = MeasureRequested
	p1, err := planWorkloadCtx(ctx, s, req)
	if err != nil {
		return nil, err
	}
	var cands []domain.Cuboid
	probe := &workloadPlan{s: s, exact: p1.exact} // sensitivity may mark it conditional; p1 stays as it is
	for _, c := range p1.downClosure() {
		if sens, err := probe.sensitivity(c, spec.Sensitivity); err == nil && sens.Value > 0 {
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		return p1, nil // every table is public: nothing to measure
	}
	start := make([]float64, len(cands))
	for k, c := range cands {
		for _, m := range p1.meas {
			if m.c == c {
				if p1.mech == MechanismGaussian {
					start[k] = m.rhoShare.Float64() / p1.rho.Float64()
				} else {
					start[k] = m.share.Float64() / p1.budget.Float64()
				}
			}
		}
	}
	gaussian := spec.Mechanism == MechanismGaussian
	plans := []*workloadPlan{p1}
	if spec.Strategy == MeasureMarginals || spec.Strategy == MeasureBest {
		marg := req
		marg.Measure = cands
		p2, err := planMeasured(ctx, s, marg, start)
		if err != nil {
			return nil, fmt.Errorf("release: strategy %v: %w", spec.Strategy, err)
		}
		p2.strategy = MeasureMarginals
		plans = append(plans, p2)
	}
	if gaussian && (spec.Strategy == MeasureResiduals || spec.Strategy == MeasureBest) {
		// The residuals alone (the grand total, the empty residual, as a
		// cuboid): ResidualPlanner's strategy. Under invariants the
		// sensitivities differ from one measurement to another, and the
		// marginals join the candidates (the split is convex: one
		// certified optimum over all of them).
		res := req
		res.Measure, res.residuals = nil, p1.freeResiduals()
		if r := p1.basis.Res[0]; r != nil && r.Status == resbasis.Free && r.Weight > 0 {
			res.Measure = []domain.Cuboid{0}
		}
		p3, err := planMeasured(ctx, s, res, nil)
		if err != nil {
			return nil, fmt.Errorf("release: strategy %v: %w", MeasureResiduals, err)
		}
		p3.strategy = MeasureResiduals
		if len(p1.exact) > 0 {
			// Under invariants a cuboid above the requested ones can have
			// a smaller L2 sensitivity than the ones under them (it holds
			// every dimension the invariants' moves change): the whole
			// lattice joins the candidates.
			res.Measure = p1.latticeCuboids(spec.Sensitivity)
			p3b, err := planMeasured(ctx, s, res, nil)
			if err != nil {
				return nil, fmt.Errorf("release: strategy %v: %w", MeasureResiduals, err)
			}
			p3b.strategy = MeasureResiduals
			if p3b.objValue < p3.objValue*(1-1e-9) {
				p3 = p3b
			}
		}
		plans = append(plans, p3)
	}
	// One marginal without invariants under Laplace noise is best measured
	// as it is, among all strategies, not only the lattice's (oneMarginal):
	// the search would find nothing better, at a cost the analyst waits for.
	if !gaussian && (spec.Strategy == MeasureLattice || spec.Strategy == MeasureBest && !p1.oneMarginal()) {
		p4, err := planLattice(ctx, s, req, p1)
		if err != nil {
			return nil, fmt.Errorf("release: strategy %v: %w", MeasureLattice, err)
		}
		if p4 != nil {
			plans = append(plans, p4)
		}
	}
	best := plans[len(plans)-1]
	if spec.Strategy == MeasureBest {
		best = p1
		for _, p := range plans[1:] {
			if p.objValue < best.objValue*(1-1e-9) {
				best = p
			}
		}
	}
	// Each plan is within its gap of the best split among its own
	// candidates; the least of their bounds is a bound over every split
	// among the candidates of any family searched.
	if best.cert != nil && best.objValue > 0 {
		c := *best.cert
		c.Work = 0
		var over []string
		for _, p := range plans {
			if p.cert == nil {
				continue
			}
			c.Work += p.cert.Work
			c.Bound = min(c.Bound, p.cert.Bound)
			over = append(over, p.family())
		}
		c.Bound = min(c.Bound, best.objValue)
		c.Gap = (best.objValue - c.Bound) / best.objValue
		c.Global = c.Gap <= 1e-6
		c.Over = "every split of the budget among the candidate measurements of each family searched (" + strings.Join(over, "; ") + ")"
		best.cert = &c
	}
	return best, nil
}

// oneMarginal reports whether the plan asks for one private table and no
// invariants. Under Laplace noise such a table is best measured directly,
// by any strategy: if a strategy A answers the marginal M (m groups of
// cells, M = XA), then A' = A Mᵀ D⁻¹ (D the group sizes) answers the
// identity on m cells with the same X, and each column of A' averages
// columns of A, so its L1 sensitivity is at most A's; the identity on m
// cells costs at least m·2/ε² under any strategy (sens² ≥ ‖A'‖²_F/m and
// ‖A'⁺‖²_F ≥ Σ 1/σ², whose product is at least m by Cauchy-Schwarz),
// which is what measuring M directly costs.
func (p *workloadPlan) oneMarginal() bool {
	if len(p.exact) > 0 {
		return false
	}
	n := 0
	for _, t := range p.tables {
		if !t.Public {
			n++
		}
	}
	return n == 1
}

// freeResiduals returns the free residuals the tables need (weight > 0),
// in a fixed order.
func (p *workloadPlan) freeResiduals() []domain.Cuboid {
	var out []domain.Cuboid
	for a, r := range p.basis.Res {
		if r.Status == resbasis.Free && r.Weight > 0 && a != 0 {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}

// family names the candidates a plan's split was chosen among.
func (p *workloadPlan) family() string {
	var cub, res int
	for _, m := range p.meas {
		if m.resid {
			res++
		} else {
			cub++
		}
	}
	switch p.strategy {
	case MeasureMarginals:
		return fmt.Sprintf("marginals: %d cuboids under the requested ones", p.ncands)
	case MeasureResiduals:
		if cub > 1 {
			return fmt.Sprintf("residuals: %d candidates, the workload's residuals and the cuboids under the requested ones", p.ncands)
		}
		return fmt.Sprintf("residuals: %d candidates, the workload's residuals", p.ncands)
	case MeasureLattice:
		return fmt.Sprintf("lattice: the %d cuboids package strategy chose among %d of the lattice", p.ncands, p.latticeCands)
	}
	return fmt.Sprintf("requested: %d cuboids", p.ncands)
}
