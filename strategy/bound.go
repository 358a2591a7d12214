package strategy

// The SVD bound of the matrix mechanism (Li and Miklau, VLDB 2012 and
// 2013), with knowdp's constants.
//
// A strategy A (all measurements stacked, each row divided by its noise's
// standard deviation so that the noise is iid) answered with Gaussian noise
// calibrated to its L2 sensitivity Δ2 (the largest column norm, for add /
// remove neighbours) at rho-zCDP has noise variance Δ2² / (2 rho) per row
// and GLS error
//
//	E(A) = Δ2² tr(Wᵀ D W (AᵀA)⁺) / (2 rho),
//
// with D the workload weights. Composing several Gaussian measurements with
// shares of rho is such a stacked A (its squared sensitivity is at most the
// sum of theirs), so E bounds them too. Now Δ2² = max_j ‖a_j‖² ≥ tr(AᵀA)/N
// (the mean of the N columns' squared norms), and for X = AᵀA ⪰ 0 with
// the workload in its range, tr(X) tr(G X⁺) ≥ (tr G^{1/2})² (Cauchy-Schwarz
// in the trace inner product: tr G^{1/2} = tr(X^{1/2} X^{+1/2} G^{1/2}) ≤
// ‖X^{1/2}‖_F ‖X^{+1/2} G^{1/2}‖_F), with G = Wᵀ D W, tr G^{1/2} = Σ_i σ_i,
// the singular values of D^{1/2} W. So every Gaussian strategy has
//
//	E ≥ (Σ_i σ_i)² / (2 rho N).
//
// For Laplace noise at epsilon, variance 2 (Δ1/eps)² and Δ1 ≥ Δ2 (the L1
// norm of a column is at least its L2 norm), so E ≥ 2 (Σ_i σ_i)² / (eps²
// N). Both hold for add/remove neighbours only: with other sensitivities
// (Options.Sensitivity) no bound is stated.
//
// The Gaussian bound is attained when the optimal X ∝ G^{1/2} has a
// constant diagonal: for marginal workloads (every permutation of a
// dimension's values preserves G, and acts transitively on the cells), where
// ResidualPlanner's strategy attains it.

import (
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/knowdp/knowdp/query"
)

// SingularSum returns Σ_i σ_i(D^{1/2} W), the sum of the singular values of
// the weighted workload matrix (its trace norm): tr((Σ_T w_T W_TᵀW_T)^{1/2}).
func SingularSum(shape []int, w query.Workload) (float64, error) {
	if err := checkShape(shape); err != nil {
		return 0, err
	}
	if err := w.Check(shape); err != nil {
		return 0, err
	}
	ms := make([]Measurement, len(w))
	for i, t := range w {
		ms[i] = Measurement{Term: t.Term, Variance: 1 / t.Weight}
	}
	s, err := newSystem(shape, ms)
	if err != nil {
		return 0, err
	}
	ts, _, err := s.tuples(w, false)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, tup := range ts.cls {
		mult := 1.0
		for j, i := range s.diag {
			b := s.basis[i]
			switch {
			case b.analytic && tup[j] == 0:
			case b.analytic:
				mult *= float64(b.n - 1)
			default:
				mult *= float64(len(b.vecs[tup[j]]))
			}
		}
		p := s.precision(tup)
		if len(s.dense) == 0 {
			sum += mult * math.Sqrt(max(p[0], 0))
			continue
		}
		n := s.nDense
		sym := mat.NewSymDense(n, nil)
		for i := range n {
			for j := i; j < n; j++ {
				sym.SetSym(i, j, (p[i*n+j]+p[j*n+i])/2)
			}
		}
		var es mat.EigenSym
		if !es.Factorize(sym, false) {
			return 0, errEigen
		}
		for _, v := range es.Values(nil) {
			sum += mult * math.Sqrt(max(v, 0))
		}
	}
	return sum, nil
}

// SVDBound returns the lower bound over every strategy of the matrix
// mechanism with the given noise (add/remove neighbours): (Σσ)²/(2 rho N)
// for Gaussian noise at rho-zCDP, 2 (Σσ)²/(eps² N) for Laplace noise at
// epsilon (package comment of bound.go).
func SVDBound(shape []int, w query.Workload, mech Mechanism, budget float64) (Bound, error) {
	if err := checkBudget(mech, budget); err != nil {
		return Bound{}, err
	}
	s, err := SingularSum(shape, w)
	if err != nil {
		return Bound{}, err
	}
	cells := 1.0
	for _, n := range shape {
		cells *= float64(n)
	}
	b := Bound{Method: "SVD bound of the matrix mechanism (Li and Miklau): (Σ σ_i(W))² / (2 rho N)"}
	if mech == Gaussian {
		b.Value = s * s / (2 * budget * cells)
		b.Over = "every strategy of the matrix mechanism with Gaussian noise at this rho (add/remove neighbours), GLS estimate"
	} else {
		b.Value = 2 * s * s / (budget * budget * cells)
		b.Method = "SVD bound of the matrix mechanism (Li and Miklau): 2 (Σ σ_i(W))² / (eps² N), as L1 ≥ L2 sensitivity"
		b.Over = "every strategy of the matrix mechanism with Laplace noise at this epsilon (add/remove neighbours), GLS estimate"
	}
	return b, nil
}
