package release

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/knowdp/knowdp/estimate/resbasis"
	"github.com/knowdp/knowdp/privacy"
)

// residualPlannerOptimum is the least weighted total variance of any
// Gaussian strategy that measures residuals (ResidualPlanner, Xiao et al.
// 2023) for a workload without invariants, at total rho: measuring the
// A-residual with precision W_A costs rho_A = π_A |A| W_A / 2 (its squared
// L2 sensitivity under add/remove is π_A |A| / N), so minimising
// Σ_A a_A / W_A subject to Σ_A rho_A = rho gives, by Cauchy-Schwarz,
//
//	(Σ_A sqrt(a_A π_A |A| / 2))² / rho,
//
// ResidualPlanner's closed form for the sum of variances. A marginal C
// measured with share rho_C gives every A ⊆ C the precision 2 rho_C / |C|,
// which the residual measurements give at the same total cost
// (Σ_{A⊆C} π_A |A| = |C|), so this bounds every marginal strategy below.
func residualPlannerOptimum(p *workloadPlan, rho float64) float64 {
	var sum float64
	for a, r := range p.basis.Res {
		if r.Status == resbasis.Free && r.Weight > 0 {
			sum += math.Sqrt(r.Weight * p.basis.Pi(a) * float64(p.s.CuboidSize(a)) / 2)
		}
	}
	return sum * sum / rho
}

// TestArrestsSplitComparison compares, on the all-two-way workload of the
// arrests data (28 cuboids), with the invariants {year} and {colour,sex}
// and without, the weighted total variance of: separate releases, the
// equal split, the requested cuboids with the optimal split, and the
// marginals the split chooses; for Gaussian noise without invariants, also
// ResidualPlanner's optimum, which bounds every marginal strategy below.
// The table is docs/release.md's.
func TestArrestsSplitComparison(t *testing.T) {
	if testing.Short() {
		t.Skip("plans a 36-measurement non-convex split several times")
	}
	s, base := arrestsWorkload(t)
	rho1, err := privacy.NewRho(1)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-44s %12s %12s %12s %12s\n", "weighted total variance Σ|C| Var", "Lap inv", "Lap no inv", "Gauss inv", "Gauss no inv")
	rows := map[string][4]float64{}
	order := []string{"separate releases, eps/m each", "equal split + LS", "requested + optimal split", "marginals + optimal split", "ResidualPlanner optimum (residuals)"}
	gaps := map[string][4]float64{}
	for col := range 4 {
		spec := base
		if col%2 == 1 {
			spec.Exact = nil
		}
		if col >= 2 {
			spec.Mechanism, spec.Epsilon, spec.Rho, spec.Delta = MechanismGaussian, privacy.Epsilon{}, rho1, 1e-6
		}
		objective := func(sp workloadSpec) (float64, *workloadPlan) {
			start := time.Now()
			p, err := planWorkload(s, sp)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("col %d strategy %v split %v: %d measurements, planned in %v", col, sp.Strategy, sp.Split, len(p.meas), time.Since(start))
			return p.objValue, p
		}
		set := func(row string, v float64, p *workloadPlan) {
			r := rows[row]
			r[col] = v
			rows[row] = r
			if p != nil && p.cert != nil {
				g := gaps[row]
				g[col] = p.cert.Gap
				gaps[row] = g
			}
		}
		if col < 2 {
			// Separate releases: Σ|C| RMSE² from ExpectedRMSE.
			rmse, err := expectedRMSE(s, spec, StrategySeparate)
			if err != nil {
				t.Fatal(err)
			}
			var sep float64
			for i, c := range spec.Cuboids {
				sep += float64(s.CuboidSize(c)) * rmse[i] * rmse[i]
			}
			set(order[0], sep, nil)
		}
		sp := spec
		sp.Split = SplitEqual
		eq, _ := objective(sp)
		set(order[1], eq, nil)
		req, preq := objective(spec)
		set(order[2], req, preq)
		sp = spec
		sp.Strategy = MeasureMarginals
		marg, pm := objective(sp)
		set(order[3], marg, pm)
		var names []string
		for _, m := range pm.meas {
			names = append(names, s.Format(m.c))
		}
		t.Logf("col %d marginals measured (%d): %s", col, len(names), strings.Join(names, " "))
		if col == 3 {
			rp := residualPlannerOptimum(pm, 1)
			set(order[4], rp, nil)
			if rp > marg*(1+1e-9) || rp > req*(1+1e-9) {
				t.Errorf("ResidualPlanner's optimum %v above a marginal strategy's (%v, %v)", rp, req, marg)
			}
		}
		if !(marg <= req*(1+1e-7)) || !(req < eq) {
			t.Errorf("column %d: marginals %v, requested %v, equal %v", col, marg, req, eq)
		}
	}
	for _, row := range order {
		fmt.Fprintf(&b, "%-44s", row)
		for col := range 4 {
			if v := rows[row][col]; v > 0 {
				fmt.Fprintf(&b, " %12.5g", v)
			} else {
				fmt.Fprintf(&b, " %12s", "")
			}
		}
		b.WriteString("\n")
		if g, ok := gaps[row]; ok {
			fmt.Fprintf(&b, "%-44s", "  optimality gap")
			for col := range 4 {
				fmt.Fprintf(&b, " %12.2g", g[col])
			}
			b.WriteString("\n")
		}
	}
	t.Logf("all two-way cuboids of the arrests data, eps = 1 (Laplace) or rho = 1 (Gaussian), invariants {year}, {colour,sex} or none:\n%s", b.String())
}
