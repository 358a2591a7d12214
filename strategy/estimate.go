package strategy

// The GLS estimate in the residual basis. When every measured factor is an
// identity, a total or Helmert contrasts, the precision G = Σ_k A_kᵀA_k/v_k
// is λ_A on each residual subspace P_A = Q_A Q_Aᵀ, with the orthonormal
// basis Q_A = ⊗_{i∈A} H_iᵀ ⊗_{i∉A} 1/sqrt(n_i) (H_i the Helmert rows), so
// the estimate x̂ = G⁺ Σ_k A_kᵀ z_k / v_k has the coordinates
//
//	c_A = Q_Aᵀ x̂ = (1/λ_A) Σ_k (1/v_k) (⊗_i Q_{A,i}ᵀ F_{k,i}ᵀ) z_k,
//
// one small table per residual (Π_{i∈A}(n_i - 1) values), and a workload
// term's answers are W x̂ = Σ_A (⊗_i W_i Q_{A,i}) c_A. Per dimension the
// maps are tiny matrices (Q_iᵀ Fᵀ is Hᵀ-free: H Iᵀ = H, H 1 = 0, H Hᵀ = I,
// 1ᵀ/√n Iᵀ = 1ᵀ/√n, 1ᵀ/√n 1 = √n, 1ᵀ/√n Hᵀ = 0), applied axis by axis:
// the domain itself is never formed, as in ResidualPlanner's reconstruction.

import (
	"errors"
	"fmt"
	"math"

	"github.com/knowdp/knowdp/query"
)

// Estimate returns the GLS estimate of every workload term's answers
// (row-major over the term's factors' rows, as query.Term.Apply orders
// them) from the noisy answers of the measurements (answers[k] for ms[k],
// in the same order). Every measured factor must be an identity, a total
// or a residual (the strategies of the residual and marginal families); the
// workload's factors may be anything. It fails, wrapping ErrNotEstimable,
// when a workload query is not estimable from the measurements.
func Estimate(shape []int, w query.Workload, ms []Measurement, answers [][]float64) ([][]float64, error) {
	if err := checkShape(shape); err != nil {
		return nil, err
	}
	if err := w.Check(shape); err != nil {
		return nil, fmt.Errorf("strategy: workload: %w", err)
	}
	if len(answers) != len(ms) {
		return nil, fmt.Errorf("strategy: %d answer vectors for %d measurements", len(answers), len(ms))
	}
	if len(ms) == 0 {
		return nil, errors.New("strategy: no measurements")
	}
	for k, m := range ms {
		if err := checkTerm(shape, m.Term, fmt.Sprintf("measurement %d", k+1)); err != nil {
			return nil, err
		}
		for i, f := range m.Term {
			if _, _, ok := marginalKind(f); !ok {
				return nil, fmt.Errorf("strategy: measurement %d: factor %d is %v: the estimate takes identity, total and residual factors", k+1, i+1, f.Kind)
			}
		}
		if !(m.Variance > 0) || math.IsInf(m.Variance, 0) {
			return nil, fmt.Errorf("strategy: measurement %d: variance must be finite and > 0, got %v", k+1, m.Variance)
		}
		if len(answers[k]) != m.Term.Rows() {
			return nil, fmt.Errorf("strategy: measurement %d has %d queries, got %d answers", k+1, m.Term.Rows(), len(answers[k]))
		}
		for r, v := range answers[k] {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("strategy: measurement %d, answer %d is %v", k+1, r+1, v)
			}
		}
	}
	l, err := newLattice(shape, w, nil)
	if err != nil {
		return nil, err
	}
	// Coordinates of every residual the workload needs.
	coords := make([][]float64, len(l.sets))
	for p, a := range l.sets {
		var lam float64
		var sum []float64
		for k, m := range ms {
			prec := 1 / m.Variance
			for i, f := range m.Term {
				c0, c1, _ := marginalKind(f)
				if a&(1<<i) != 0 {
					prec *= c1
				} else {
					prec *= c0
				}
			}
			if prec == 0 {
				continue
			}
			lam += prec
			t := make(query.Term, len(shape))
			for i, f := range m.Term {
				t[i] = toResidualCoords(f, a&(1<<i) != 0)
			}
			y := t.Apply(answers[k])
			if sum == nil {
				sum = make([]float64, len(y))
			}
			for j, v := range y {
				sum[j] += v / m.Variance
			}
		}
		if lam == 0 {
			return nil, fmt.Errorf("residual %s: %w", setString(a), ErrNotEstimable)
		}
		for j := range sum {
			sum[j] /= lam
		}
		coords[p] = sum
	}
	out := make([][]float64, len(w))
	for ti, wt := range w {
		ans := make([]float64, wt.Term.Rows())
		for _, sh := range l.perTerm[ti] {
			a := l.sets[sh.set]
			t := make(query.Term, len(shape))
			for i, f := range wt.Term {
				t[i] = fromResidualCoords(f, a&(1<<i) != 0)
			}
			for j, v := range t.Apply(coords[sh.set]) {
				ans[j] += v
			}
		}
		out[ti] = ans
	}
	return out, nil
}

// toResidualCoords returns Q_iᵀ Fᵀ for a measured factor F: from its rows
// to the dimension's coordinates on the contrasts (n-1 of them, the
// Helmert basis) or on the constant (one, 1/sqrt(n)).
func toResidualCoords(f query.Factor, contrast bool) query.Factor {
	n := f.N
	var m []float64
	var rows int
	switch {
	case contrast && f.Kind == query.Identity:
		// H: the Helmert rows themselves.
		rows, m = n-1, query.NewResidual(n).Dense()
	case contrast && f.Kind == query.Residual:
		rows, m = n-1, identity(n-1)
	case contrast:
		// A total has no contrast.
		rows, m = n-1, make([]float64, n-1)
	case f.Kind == query.Identity:
		rows, m = 1, constRow(n, 1/math.Sqrt(float64(n)))
	case f.Kind == query.Total:
		rows, m = 1, []float64{math.Sqrt(float64(n))}
	default:
		rows, m = 1, make([]float64, n-1)
	}
	g, err := query.NewMatrix(rows, f.Rows(), m)
	if err != nil {
		panic(err)
	}
	return g
}

// fromResidualCoords returns W_i Q_i for a workload factor: from the
// dimension's coordinates to the factor's queries.
func fromResidualCoords(f query.Factor, contrast bool) query.Factor {
	n := f.N
	if contrast {
		// W Hᵀ: apply W to each Helmert row.
		h := query.NewResidual(n).Dense()
		rows := f.Rows()
		m := make([]float64, rows*(n-1))
		y := make([]float64, rows)
		for c := range n - 1 {
			f.Apply(h[c*n:(c+1)*n], y)
			for r, v := range y {
				m[r*(n-1)+c] = v
			}
		}
		g, err := query.NewMatrix(rows, n-1, m)
		if err != nil {
			panic(err)
		}
		return g
	}
	y := make([]float64, f.Rows())
	f.Apply(constRow(n, 1/math.Sqrt(float64(n))), y)
	g, err := query.NewMatrix(f.Rows(), 1, y)
	if err != nil {
		panic(err)
	}
	return g
}

func identity(n int) []float64 {
	m := make([]float64, n*n)
	for i := range n {
		m[i*n+i] = 1
	}
	return m
}

func constRow(n int, v float64) []float64 {
	m := make([]float64, n)
	for i := range m {
		m[i] = v
	}
	return m
}
