package plan

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
)

// MaxProblem is the max-variance split problem (Gaussian shares, p = 1):
// minimise over the simplex the largest of the tables' variances,
//
//	G(x) = max_i V_i(x),  V_i(x) = Σ_{(j, b) ∈ Tables[i]} b / W_j(x),
//	W_j(x) = Σ_{k ∈ Covers[j]} Coef[k] x_k.
//
// For every weighting λ of the tables (a point of the simplex), the least
// λ-weighted sum Σ_i λ_i V_i is a convex split Problem (weights a_j =
// Σ_i λ_i b_ij) whose minimum is at most min G, so the best of those lower
// bounds (the dual, concave in λ) certifies the split. SolveMax ascends
// the dual by exponentiated-gradient steps on λ, each a certified convex
// split (Solve): the split is the best maximum seen, the bound the best
// lower bound seen.
type MaxProblem struct {
	// Covers lists, per term, the measurements whose precision it sums.
	Covers [][]int
	// Coef holds c_k > 0, one per measurement.
	Coef []float64
	// Tables lists, per table, the terms of its variance (every term of
	// every table, each b > 0); a table may have none (variance 0).
	Tables [][]TableTerm
}

// TableTerm is one term b / W_j(x) of a table's variance.
type TableTerm struct {
	// Term is the index j of the term (of MaxProblem.Covers).
	Term int
	// Coef is b.
	Coef float64
}

// MaxResult is a max-variance split with its certificate.
type MaxResult struct {
	// X is the split; Objective is G(X), the largest table variance.
	X         []float64
	Objective float64
	// Bound is the best dual value, a proved lower bound of min G, and Gap
	// is (Objective - Bound) / Objective; Global is Gap ≤ 1e-6.
	Bound, Gap float64
	Global     bool
	// Splits is the number of convex splits solved, Work their work
	// (Result.Work's unit).
	Splits int
	Work   float64
	// Method says how X was found and the bound proved.
	Method string
}

// SolveMax solves the max-variance split problem (MaxProblem's comment).
// The errors are Solve's, and its refusal of a problem without a term.
func SolveMax(ctx context.Context, mp MaxProblem) (MaxResult, error) {
	if len(mp.Tables) == 0 || len(mp.Covers) == 0 {
		return MaxResult{}, errors.New("plan: a max-variance problem needs tables and terms")
	}
	n := len(mp.Tables)
	lambda := make([]float64, n)
	for i := range lambda {
		lambda[i] = 1 / float64(n)
	}
	// The terms' weights for a weighting of the tables.
	weights := func(lambda []float64) []float64 {
		a := make([]float64, len(mp.Covers))
		for i, terms := range mp.Tables {
			for _, t := range terms {
				a[t.Term] += lambda[i] * t.Coef
			}
		}
		return a
	}
	evaluate := func(x []float64) ([]float64, float64) {
		w := make([]float64, len(mp.Covers))
		for j, cov := range mp.Covers {
			for _, k := range cov {
				w[j] += mp.Coef[k] * x[k]
			}
		}
		vars := make([]float64, n)
		worst := 0.0
		for i, terms := range mp.Tables {
			for _, t := range terms {
				vars[i] += t.Coef / w[t.Term]
			}
			worst = max(worst, vars[i])
		}
		return vars, worst
	}
	var best []float64
	bestUpper, lower := math.Inf(1), 0.0
	var work float64
	solve := func(lambda []float64) (vars []float64, upper, lo float64, err error) {
		pr := Problem{Weights: weights(lambda), Covers: mp.Covers, Coef: mp.Coef, Power: 1}
		var starts [][]float64
		if best != nil {
			starts = append(starts, best)
		}
		res, err := Solve(ctx, pr, Options{Starts: starts})
		if err != nil {
			return nil, 0, 0, err
		}
		work += res.Work
		vars, upper = evaluate(res.X)
		if upper < bestUpper {
			best, bestUpper = res.X, upper
		}
		lower = max(lower, res.Bound)
		return vars, upper, res.Bound, nil
	}
	accVars, accUpper, accLower, err := solve(lambda)
	if err != nil {
		return MaxResult{}, err
	}
	step := 1.0
	iters := 1
	for ; iters < 200 && bestUpper-lower > 1e-6*bestUpper; iters++ {
		// Exponentiated gradient from the accepted weights: the gradient
		// of the dual is the tables' variances at its minimiser.
		next := slices.Clone(lambda)
		var z float64
		for i := range next {
			next[i] = lambda[i] * math.Exp(step*(accVars[i]/accUpper-1))
			z += next[i]
		}
		for i := range next {
			next[i] /= z
		}
		vars, upper, lo, err := solve(next)
		if err != nil {
			return MaxResult{}, err
		}
		if lo >= accLower {
			lambda, accVars, accUpper, accLower = next, vars, upper, lo
			step *= 1.5
		} else if step /= 4; step < 1e-9 {
			break
		}
	}
	gap := (bestUpper - lower) / bestUpper
	return MaxResult{X: best, Objective: bestUpper, Bound: lower, Gap: gap, Global: gap <= 1e-6, Splits: iters, Work: work,
		Method: fmt.Sprintf("max-variance objective: Lagrangian dual over the tables' weights (%d certified convex splits); the bound is the best dual value", iters)}, nil
}
