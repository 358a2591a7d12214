package refine

import (
	"fmt"
	"math"
)

// rankTol is the relative size below which a constraint counts as a linear
// combination of the ones before it: after removing its projection on their
// span, less than rankTol of its norm remains. Constraints that close to
// dependent make the refinement amplify rounding errors by 1/rankTol or
// more, so they are rejected rather than used.
const rankTol = 1e-10

// householder is a thin QR factorisation B = Q R of a dense n×m block of
// constraint columns (n >= m), with Q kept as m Householder reflectors
// H_k = I - tau_k v_k v_kᵀ. It costs O(n m²) to build and O(n m) to apply,
// and never forms BᵀB, whose condition number is the square of B's.
type householder struct {
	n, m int
	// cols[k][k:] holds v_k (with v_k[0] = x_k - alpha_k); cols[k][:k] holds
	// the above-diagonal part of column k of R.
	cols [][]float64
	tau  []float64
	diag []float64 // R's diagonal
}

// dependentError reports a constraint that is a linear combination of
// earlier ones. alpha holds the combination.
type dependentError struct {
	k     int
	alpha []float64
}

func (e *dependentError) Error() string {
	return fmt.Sprintf("constraint %d is a linear combination of the earlier ones", e.k)
}

// factor computes the QR factorisation of the columns in place (they are
// overwritten). It fails with a *dependentError when a column is, to within
// rankTol, in the span of the columns before it.
func factor(cols [][]float64) (*householder, error) {
	m := len(cols)
	n := len(cols[0])
	h := &householder{n: n, m: m, cols: cols, tau: make([]float64, m), diag: make([]float64, m)}
	for k := range m {
		col := cols[k]
		orig := norm2(col)
		x := col[k:]
		nx := norm2(x)
		if !(nx > rankTol*orig) { // also catches k >= n, where x is empty
			return nil, &dependentError{k: k, alpha: h.combination(k)}
		}
		alpha := -math.Copysign(nx, x[0])
		h.tau[k] = 1 / (nx * (nx + math.Abs(x[0])))
		x[0] -= alpha
		h.diag[k] = alpha
		for j := k + 1; j < m; j++ {
			h.reflect(k, cols[j][k:])
		}
	}
	return h, nil
}

// combination solves R[:k,:k] alpha = R[:k,k]: the coefficients that
// express column k (after reflection by H_0..H_{k-1}) through the earlier
// columns.
func (h *householder) combination(k int) []float64 {
	alpha := make([]float64, k)
	col := h.cols[k]
	for i := k - 1; i >= 0; i-- {
		s := col[i]
		for j := i + 1; j < k; j++ {
			s -= h.cols[j][i] * alpha[j]
		}
		alpha[i] = s / h.diag[i]
	}
	return alpha
}

// reflect applies H_k to y, which holds rows k..n-1.
func (h *householder) reflect(k int, y []float64) {
	v := h.cols[k][k:]
	s := dot(v, y) * h.tau[k]
	axpy(-s, v, y)
}

// project overwrites y (length n) with the least-squares refinement of y
// under the constraints Bᵀ x = c: x = Q [R⁻ᵀc; (Qᵀy)[m:]], the point of the
// affine set closest to y.
func (h *householder) project(y, c []float64) {
	for k := range h.m {
		h.reflect(k, y[k:])
	}
	// Forward substitution Rᵀ w = c; R[j][i] for j < i is cols[i][j].
	for i := range h.m {
		s := c[i]
		col := h.cols[i]
		for j := range i {
			s -= col[j] * y[j]
		}
		y[i] = s / h.diag[i]
	}
	for k := h.m - 1; k >= 0; k-- {
		h.reflect(k, y[k:])
	}
}

func dot(a, b []float64) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func axpy(alpha float64, x, y []float64) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] += alpha * v
	}
}

// norm2 is the Euclidean norm. The plain sum of squares is used when it
// is safely inside the float64 range; otherwise the vector is rescaled so
// that the result neither overflows nor underflows.
func norm2(x []float64) float64 {
	if s := dot(x, x); s > 0x1p-900 && s < 0x1p900 {
		return math.Sqrt(s)
	}
	var scale float64
	for _, v := range x {
		scale = max(scale, math.Abs(v))
	}
	if scale == 0 || math.IsInf(scale, 0) {
		return scale
	}
	inv := 1 / scale
	var s float64
	for _, v := range x {
		t := v * inv
		s += t * t
	}
	return scale * math.Sqrt(s)
}
