package strategy

// Gaussian noise on the residual lattice: ResidualPlanner's strategy.
//
// Measuring R_A (Helmert contrasts on A, total elsewhere) with variance v_A
// per query gives the residual A the precision (N/|A|)/v_A and nothing
// else, so the objective is Σ_A b_A v_A |A| / N. Its cost is rho_A =
// L2_A² / (2 v_A) (zCDP), with L2_A² = Π_{i∈A}(1 - 1/n_i) for add/remove
// neighbours. With k_A = b_A |A| / N and s_A = L2_A² / 2, minimising
// Σ_A k_A v_A subject to Σ_A s_A / v_A = rho gives (Cauchy-Schwarz, or
// Lagrange)
//
//	v_A = sqrt(s_A / k_A) Σ_B sqrt(k_B s_B) / rho,   objective (Σ_A sqrt(k_A s_A))² / rho,
//
// ResidualPlanner's closed form. With add/remove sensitivities it equals
// the SVD bound (Σ σ_i)² / (2 rho N) (bound.go): no strategy does better.

import (
	"fmt"
	"math"
)

// residualSens returns the sensitivities of the residual measurement R_A of
// every residual of the lattice (add/remove, or the caller's).
func residualSens(l *lattice, opt Options) (l1, l2 []float64, err error) {
	l1 = make([]float64, len(l.sets))
	l2 = make([]float64, len(l.sets))
	for p, a := range l.sets {
		l1[p], l2[p], err = opt.sens(residualTerm(l.shape, a))
		if err != nil {
			return nil, nil, err
		}
		if !(l2[p] > 0) {
			return nil, nil, fmt.Errorf("strategy: residual %s has L2 sensitivity %v: it needs no noise, and is not planned here", setString(a), l2[p])
		}
	}
	return l1, l2, nil
}

// gaussianSum returns ResidualPlanner's closed form for weights k: the
// variances and the objective.
func gaussianSum(k, s []float64, rho float64) (v []float64, obj float64) {
	var h float64
	for p := range k {
		h += math.Sqrt(k[p] * s[p])
	}
	v = make([]float64, len(k))
	for p := range k {
		if k[p] > 0 {
			v[p] = math.Sqrt(s[p]/k[p]) * h / rho
		} else {
			v[p] = math.Inf(1)
		}
	}
	return v, h * h / rho
}

// residualStrategy measures every residual of the lattice with Gaussian
// noise, minimising the weighted sum of variances.
func residualStrategy(l *lattice, rho float64, opt Options) (*Strategy, error) {
	l1, l2, err := residualSens(l, opt)
	if err != nil {
		return nil, err
	}
	k := make([]float64, len(l.sets))
	s := make([]float64, len(l.sets))
	for p, a := range l.sets {
		k[p] = l.b[p] * l.size(a) / l.cells
		s[p] = l2[p] * l2[p] / 2
	}
	v, obj := gaussianSum(k, s, rho)
	st := &Strategy{Mechanism: Gaussian, Budget: rho, Objective: obj,
		Family: "residuals (ResidualPlanner): one measurement per residual the workload needs, closed-form variances"}
	st.Measurements = residualMeasurements(l, v, s, l1, l2, rho)
	st.FamilyBound = Bound{Value: obj, Over: "the strategies of the family searched (residual measurements)",
		Method: "closed form (Cauchy-Schwarz): the optimum of the family, exactly"}
	return st, nil
}

func residualMeasurements(l *lattice, v, s, l1, l2 []float64, rho float64) []Measurement {
	var ms []Measurement
	for p, a := range l.sets {
		if math.IsInf(v[p], 1) {
			continue
		}
		ms = append(ms, Measurement{
			Term:     residualTerm(l.shape, a),
			Share:    s[p] / v[p] / rho,
			Variance: v[p],
			L1:       l1[p],
			L2:       l2[p],
		})
	}
	return ms
}

// maxVarianceStrategy minimises the largest per-query variance of a
// workload term under Gaussian residual measurements (ResidualPlanner's
// max-variance objective).
//
// The problem is convex: with u_A = 1/v_A, minimise max_T Σ_A c_{TA} / u_A
// subject to Σ_A s_A u_A = rho, c_{TA} = b_{T,A} |A| / (N rows_T). For any
// weights μ on the terms (a point of the simplex), the weighted sum of the
// terms' variances is at most their maximum, and its minimum is the closed
// form above with k_A(μ) = Σ_T μ_T c_{TA}: so D(μ) = (Σ_A sqrt(k_A(μ) s_A))²
// / rho is a lower bound of the optimum, for every μ. Maximising D (sqrt D
// is concave in μ) by exponentiated-gradient ascent, whose gradient is
// proportional to the terms' variances at the closed form's v(μ), gives
// both the strategy (the best v(μ) seen, by its maximum) and the proved
// lower bound (the best D(μ) seen); the gap is their distance.
func maxVarianceStrategy(l *lattice, rho float64, opt Options) (*Strategy, error) {
	for t, m := range l.marginal {
		if !m {
			return nil, fmt.Errorf("strategy: the max-variance objective needs cuboid workload terms (identity or total factors), term %d is not", t+1)
		}
	}
	l1, l2, err := residualSens(l, opt)
	if err != nil {
		return nil, err
	}
	nT, nA := len(l.perTerm), len(l.sets)
	s := make([]float64, nA)
	for p := range s {
		s[p] = l2[p] * l2[p] / 2
	}
	type coef struct {
		set int
		c   float64
	}
	c := make([][]coef, nT)
	for t, shares := range l.perTerm {
		for _, sh := range shares {
			c[t] = append(c[t], coef{sh.set, sh.b * l.size(l.sets[sh.set]) / (l.cells * l.rows[t])})
		}
	}
	mu := make([]float64, nT)
	for t := range mu {
		mu[t] = 1 / float64(nT)
	}
	k := make([]float64, nA)
	vars := make([]float64, nT)
	eval := func(mu []float64) (v []float64, lower, upper float64) {
		clear(k)
		for t, cs := range c {
			for _, x := range cs {
				k[x.set] += mu[t] * x.c
			}
		}
		v, lower = gaussianSum(k, s, rho)
		upper = 0
		for t, cs := range c {
			var sum float64
			for _, x := range cs {
				sum += x.c * v[x.set]
			}
			vars[t] = sum
			upper = max(upper, sum)
		}
		return v, lower, upper
	}
	bestV, lower, upper := eval(mu)
	bestLower, bestUpper := lower, upper
	step := 1.0
	next := make([]float64, nT)
	const tol = 1e-7
	iters := 0
	for ; iters < 100000 && bestUpper-bestLower > tol*bestUpper; iters++ {
		// Multiplicative step on μ along the variances (the gradient of
		// D up to a positive factor), scaled by the current maximum.
		var z float64
		for t := range mu {
			next[t] = mu[t] * math.Exp(step*(vars[t]/upper-1))
			z += next[t]
		}
		for t := range next {
			next[t] /= z
		}
		cur := append([]float64(nil), vars...)
		v, lo, up := eval(next)
		if lo >= lower {
			copy(mu, next)
			lower, upper = lo, up
			step *= 1.5
		} else {
			copy(vars, cur)
			step /= 4
			if step < 1e-12 {
				break
			}
		}
		if up < bestUpper {
			bestUpper, bestV = up, v
		}
		bestLower = max(bestLower, lo)
	}
	st := &Strategy{Mechanism: Gaussian, Budget: rho, Objective: bestUpper,
		Family: "residuals (ResidualPlanner), max-variance objective"}
	st.Measurements = residualMeasurements(l, bestV, s, l1, l2, rho)
	st.FamilyBound = Bound{Value: bestLower, Over: "the strategies of the family searched (residual measurements)",
		Method: fmt.Sprintf("Lagrangian dual: a weighted sum of the terms' variances, minimised in closed form (%d dual steps)", iters)}
	return st, nil
}
