package refine

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// maxDense bounds the number of answers of the dense representations
// (Linear, and the privacy analysis built on it): they cost O(n²) memory
// and O(n³) time. Refining needs no dense matrix: use Equalities.
const maxDense = 2048

// Linear is a general linear refinement (Definition 7 of the paper),
//
//	x̂ = A x + D c + h,
//
// of n noisy answers x under m equalities Bᵀ mu = c: A is n×n, D is n×m
// and h has n entries. It is a dense representation for analysis (Loss,
// Calibrate, Theorem2); Equalities.Refine computes the least-squares
// refinement without it.
type Linear struct {
	n, m int
	a, d *mat.Dense
	h    []float64
	eqs  *Equalities
	b    *mat.Dense
}

// NewLinear validates a linear refinement: A must be n×n, D n×m and h of
// length n (nil means zero) for the n answers and m constraints of eqs,
// and every entry finite. It copies its arguments. The refinement need
// not be constrained or unbiased (the appendix's example is neither): see
// Constrained, Unbiased and CheckTheorem2.
func NewLinear(a, d *mat.Dense, h []float64, eqs *Equalities) (*Linear, error) {
	if eqs == nil {
		return nil, errors.New("refine: linear refinement needs its equalities")
	}
	n, m := eqs.n, len(eqs.eqs)
	if n > maxDense {
		return nil, fmt.Errorf("refine: %d answers is more than the %d a dense linear refinement supports", n, maxDense)
	}
	if r, c := a.Dims(); r != n || c != n {
		return nil, fmt.Errorf("refine: A is %d×%d, want %d×%d (one row and column per answer)", r, c, n, n)
	}
	if r, c := d.Dims(); r != n || c != m {
		return nil, fmt.Errorf("refine: D is %d×%d, want %d×%d (one row per answer, one column per constraint)", r, c, n, m)
	}
	if h == nil {
		h = make([]float64, n)
	}
	if len(h) != n {
		return nil, fmt.Errorf("refine: h has %d entries, want %d", len(h), n)
	}
	for _, in := range []struct {
		name string
		x    mat.Matrix
	}{{"A", a}, {"D", d}, {"h", mat.NewVecDense(n, h)}} {
		name, x := in.name, in.x
		r, c := x.Dims()
		for i := range r {
			for j := range c {
				if v := x.At(i, j); math.IsNaN(v) || math.IsInf(v, 0) {
					return nil, fmt.Errorf("refine: %s[%d,%d] is %v; entries must be finite", name, i, j, v)
				}
			}
		}
	}
	return &Linear{n: n, m: m, a: mat.DenseCopyOf(a), d: mat.DenseCopyOf(d), h: append([]float64(nil), h...), eqs: eqs, b: eqs.Matrix()}, nil
}

// LeastSquares returns the least-squares refinement of Theorem 3 as a
// Linear: A = I − B(BᵀB)⁻¹Bᵀ, D = B(BᵀB)⁻¹, h = 0, computed from a QR
// factorisation B = QR as A = I − QQᵀ and D = Q R⁻ᵀ.
func LeastSquares(eqs *Equalities) (*Linear, error) {
	n, m := eqs.n, len(eqs.eqs)
	if n > maxDense {
		return nil, fmt.Errorf("refine: %d answers is more than the %d a dense linear refinement supports", n, maxDense)
	}
	b := eqs.Matrix()
	var qr mat.QR
	qr.Factorize(b)
	var q, r mat.Dense
	qr.QTo(&q)
	qr.RTo(&r)
	q1 := q.Slice(0, n, 0, m)
	r1 := r.Slice(0, m, 0, m)
	a := mat.NewDense(n, n, nil)
	a.Mul(q1, q1.T())
	a.Scale(-1, a)
	for i := range n {
		a.Set(i, i, a.At(i, i)+1)
	}
	// D = Q1 R⁻ᵀ, i.e. R Dᵀ = Q1ᵀ.
	var dt mat.Dense
	if err := dt.Solve(r1, q1.T()); err != nil {
		return nil, fmt.Errorf("refine: least squares: %w", err)
	}
	d := mat.DenseCopyOf(dt.T())
	return &Linear{n: n, m: m, a: a, d: d, h: make([]float64, n), eqs: eqs, b: b}, nil
}

// Len returns the number of answers n.
func (l *Linear) Len() int { return l.n }

// A returns the matrix applied to the noisy answers.
func (l *Linear) A() mat.Matrix { return l.a }

// D returns the matrix applied to the constants c.
func (l *Linear) D() mat.Matrix { return l.d }

// H returns the constant shift h.
func (l *Linear) H() []float64 { return l.h }

// Equalities returns the constraints the refinement uses.
func (l *Linear) Equalities() *Equalities { return l.eqs }

// Apply writes A x + D c + h to dst, with c the constraints' values.
func (l *Linear) Apply(dst, x []float64) error {
	if err := checkVectors(l.n, dst, x); err != nil {
		return err
	}
	out := mat.NewVecDense(l.n, nil)
	out.MulVec(l.a, mat.NewVecDense(l.n, append([]float64(nil), x...)))
	var dc mat.VecDense
	dc.MulVec(l.d, mat.NewVecDense(l.m, l.eqs.Values()))
	out.AddVec(out, &dc)
	for i := range dst {
		dst[i] = out.AtVec(i) + l.h[i]
	}
	return nil
}

// tolerance for the structural checks, relative to the entries' size.
func (l *Linear) tol() float64 {
	s := 1.0
	for _, m := range []*mat.Dense{l.a, l.d, l.b} {
		s = max(s, mat.Norm(m, math.Inf(1)))
	}
	return 1e-9 * s * s
}

// Constrained reports whether the refinement is constrained
// (Definition 4): Bᵀ x̂ = c for every x, that is BᵀA = 0, BᵀD = I and
// Bᵀh = 0.
func (l *Linear) Constrained() bool {
	var ba, bd mat.Dense
	ba.Mul(l.b.T(), l.a)
	bd.Mul(l.b.T(), l.d)
	for i := range l.m {
		bd.Set(i, i, bd.At(i, i)-1)
	}
	var bh mat.VecDense
	bh.MulVec(l.b.T(), mat.NewVecDense(l.n, l.h))
	tol := l.tol()
	return mat.Norm(&ba, math.Inf(1)) <= tol && mat.Norm(&bd, math.Inf(1)) <= tol && mat.Norm(&bh, math.Inf(1)) <= tol
}

// Unbiased reports whether E x̂ = mu whenever Bᵀ mu = c (Definition 3):
// A + D Bᵀ = I and h = 0 (the proof of Theorem 3).
func (l *Linear) Unbiased() bool {
	var g mat.Dense
	g.Mul(l.d, l.b.T())
	g.Add(&g, l.a)
	for i := range l.n {
		g.Set(i, i, g.At(i, i)-1)
	}
	tol := l.tol()
	return mat.Norm(&g, math.Inf(1)) <= tol && mat.Norm(mat.NewVecDense(l.n, l.h), math.Inf(1)) <= tol
}

// rank returns the numerical rank of x.
func rank(x mat.Matrix) int {
	var svd mat.SVD
	if !svd.Factorize(x, mat.SVDNone) {
		return -1
	}
	s := svd.Values(nil)
	r := 0
	for _, v := range s {
		if v > rankTol*s[0] {
			r++
		}
	}
	return r
}

// CheckTheorem2 reports whether the hypotheses of Theorem 2 hold: rank(B)
// = m (NewEqualities guarantees it), rank(A) = n − m and the refinement is
// constrained. The appendix's refinement fails it (A has full rank); Loss
// needs none of these.
func (l *Linear) CheckTheorem2() error {
	if r := rank(l.a); r != l.n-l.m {
		return fmt.Errorf("refine: Theorem 2 needs rank(A) = n − m = %d, but rank(A) = %d", l.n-l.m, r)
	}
	if !l.Constrained() {
		return errors.New("refine: Theorem 2 needs a constrained refinement (BᵀA = 0, BᵀD = I, Bᵀh = 0)")
	}
	return nil
}

// Theorem2 evaluates Theorem 2's privacy-loss numerator for neighbours
// whose true answers differ by delta = mu − mu' (so that c − c' = Bᵀ delta):
//
//	corrected = ‖A* D (c − c') + (mu − mu')‖₁,  printed = ‖A* D (c − c') − (mu − mu')‖₁,
//
// with A* = V diag(Σ₁⁻¹, I) Uᵀ from the SVD A = U Σ Vᵀ; rho = value/sigma.
// The paper prints the minus sign, which is wrong (Example 1: printed 1,
// corrected 2, the density ratio tends to e^(2 eps)).
//
// The corrected value bounds the privacy loss of the whole refined vector
// (and of every subset of it) when D(c − c') lies in the range of A: then
// the two databases' refinements live on the same affine set. When it does
// not (the least-squares refinement under a constraint whose constant moves
// with the data), the whole vectors are told apart with certainty, the
// null-space part of A* is not unique (for symmetric A we take the natural
// U₂ = V₂, which makes A* = I for least squares), and the value is not a
// bound for subsets either: Loss computes the exact loss. It fails for a
// non-symmetric rank-deficient A in that case.
func (l *Linear) Theorem2(delta []float64) (corrected, printed float64, err error) {
	if len(delta) != l.n {
		return 0, 0, fmt.Errorf("refine: delta has %d entries, want %d", len(delta), l.n)
	}
	dv := mat.NewVecDense(l.n, append([]float64(nil), delta...))
	var dc, ddc mat.VecDense
	dc.MulVec(l.b.T(), dv)
	ddc.MulVec(l.d, &dc)
	var svd mat.SVD
	if !svd.Factorize(l.a, mat.SVDFull) {
		return 0, 0, errors.New("refine: SVD of A failed")
	}
	var u, v mat.Dense
	svd.UTo(&u)
	svd.VTo(&v)
	s := svd.Values(nil)
	r := 0
	for _, x := range s {
		if x > rankTol*s[0] {
			r++
		}
	}
	// A* D(c-c') = V1 Σ1⁻¹ U1ᵀ y + V2 U2ᵀ y with y = D(c-c').
	y := ddc.RawVector().Data
	out := make([]float64, l.n)
	for k := range l.n {
		uk := mat.Col(nil, k, &u)
		coef := dot(uk, y)
		if k < r {
			coef /= s[k]
		}
		vk := mat.Col(nil, k, &v)
		if k >= r {
			// Null-space part: pair U2 with V2. For a symmetric A both
			// span the same space; use V2 on both sides.
			if !symmetric(l.a, l.tol()) {
				if math.Abs(coef) > 1e-9*max(1, norm2(y)) {
					return 0, 0, errors.New("refine: Theorem 2 is undefined here: D(c − c') is outside the range of the non-symmetric A, so A* depends on the choice of null-space bases")
				}
				continue
			}
			coef = dot(vk, y)
		}
		axpy(coef, vk, out)
	}
	for i, x := range out {
		corrected += math.Abs(x + delta[i])
		printed += math.Abs(x - delta[i])
	}
	return corrected, printed, nil
}

func symmetric(a *mat.Dense, tol float64) bool {
	n, _ := a.Dims()
	for i := range n {
		for j := range i {
			if math.Abs(a.At(i, j)-a.At(j, i)) > tol {
				return false
			}
		}
	}
	return true
}
