package release

// The optimal split for views across a hierarchy: the problem, built from
// the plan's tables and measurements, is solved by plan/treesplit (whose
// package comment gives the objective and the certificate).

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/plan/treesplit"
	"github.com/knowdp/knowdp/sensitivity"
)

// viewObjective returns the split problem of the plan's views as an
// objective in the measurements' shares (package comment of
// plan/treesplit).
func (p *viewPlan) viewObjective() (*treesplit.Objective, error) {
	s, h := p.s, p.h
	L := s.NumLevels(h)
	l, err := newHierLayout(s, h)
	if err != nil {
		return nil, err
	}
	o := treesplit.Problem{Tree: l.tree.ShapeTree(), Gaussian: p.mech == MechanismGaussian}
	flat := func(v domain.View) domain.Cuboid { return (v.Dims &^ (1 << h)) &^ sensitivity.TrivialDims(s) }
	size := func(c domain.Cuboid) float64 { return float64(s.CuboidSize(c)) }
	var ts []domain.Cuboid
	for _, t := range p.tables {
		if t.Public {
			continue
		}
		st := flat(t.View)
		for a := st; ; a = (a - 1) & st {
			if !slices.Contains(ts, a) {
				ts = append(ts, a)
			}
			if a == 0 {
				break
			}
		}
	}
	for _, m := range p.meas {
		if o.Gaussian {
			o.Unit = append(o.Unit, 2*p.rho.Float64()/(m.l2.Value*m.l2.Value))
		} else {
			e := p.budget.Float64() / float64(m.sens)
			o.Unit = append(o.Unit, e*e/2)
		}
	}
	for _, a := range ts {
		r := treesplit.Residual{Weight: 1, Exact: make([]bool, L+1), Obs: make([][]treesplit.Obs, L+1), Coef: make([]float64, L+1)}
		for _, d := range a.Dims() {
			r.Weight *= 1 - 1/float64(s.Size(d))
		}
		for _, e := range p.exact {
			if a.AncestorOf(flat(e)) {
				r.Exact[p.level(e)] = true
			}
		}
		for j, m := range p.meas {
			if sj := flat(m.v); a.AncestorOf(sj) {
				l := p.level(m.v)
				r.Obs[l] = append(r.Obs[l], treesplit.Obs{Measurement: j, Cells: size(sj &^ a)})
			}
		}
		for _, t := range p.tables {
			if st := flat(t.View); !t.Public && a.AncestorOf(st) {
				sc := size(st &^ a)
				r.Coef[p.level(t.View)] += t.Weight * size(st) / (sc * sc)
			}
		}
		o.Residuals = append(o.Residuals, r)
	}
	return treesplit.New(o), nil
}

// finite reports whether v is neither infinite nor NaN.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// optimalFractions chooses the shares that minimise the weighted total
// variance, with treesplit's certificate. It fails with ctx's error when
// ctx ends first, and when the objective is not finite.
func (p *viewPlan) optimalFractions(ctx context.Context) ([]float64, error) {
	x, err := p.optimalFractionsCtx(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("release: optimal split: %w", ctx.Err())
		}
		return nil, err
	}
	var sum float64
	for _, v := range x {
		if !(v >= 0) || !finite(v) {
			return nil, fmt.Errorf("release: optimal split: %w", treesplit.ErrNotFinite)
		}
		sum += v
	}
	if math.Abs(sum-1) > 1e-9 || !finite(p.objective) || p.cert == nil || !finite(p.cert.Bound) || !finite(p.cert.Gap) {
		return nil, fmt.Errorf("release: optimal split: %w", treesplit.ErrNotFinite)
	}
	return x, nil
}

// optimalFractionsCtx is optimalFractions without the final checks; the
// spine split is one of the starts of the Laplace searches.
func (p *viewPlan) optimalFractionsCtx(ctx context.Context) ([]float64, error) {
	o, err := p.viewObjective()
	if err != nil {
		return nil, fmt.Errorf("release: optimal split: %w", err)
	}
	spine, err := p.spineFractions()
	if err != nil {
		spine = nil
	}
	sol, err := o.Solve(ctx, spine)
	if err != nil {
		return nil, fmt.Errorf("release: optimal split: %w", err)
	}
	p.cert = &SplitCertificate{Bound: sol.Bound, Gap: sol.Gap, Global: sol.Global, Work: sol.Work, Method: sol.Method}
	p.objective = sol.Value
	return sol.X, nil
}
