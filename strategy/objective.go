package strategy

// The exact objective. With G = Σ_k A_kᵀA_k / v_k (the precision of the
// GLS estimate) and a workload term W_T of weight w_T, the term's expected
// total squared error is w_T tr(W_T G⁺ W_Tᵀ) = w_T tr(W_TᵀW_T G⁺). All the
// matrices are sums of Kronecker products, so per dimension we look for
// one orthonormal basis in which every strategy factor's Gram FᵀF is
// diagonal: the constants and the contrasts (two "classes" of vectors) for
// identity, total and residual factors; otherwise the eigenvectors of a
// generic combination of the Grams, grouped by their eigenvalues under every
// factor, when the Grams commute. On a product of one class per dimension
// (a tuple) G is then a multiple of the identity, λ_τ = Σ_k Π_i λ_{k,i,τ_i}
// / v_k, and the workload contributes the trace of its Gram over the
// tuple's subspace, b_τ = Σ_T w_T Π_i tr(W_{T,i}ᵀW_{T,i} P_{τ_i}), so
//
//	objective = Σ_τ b_τ / λ_τ  (infinite if some b_τ > 0 has λ_τ = 0).
//
// A dimension whose strategy Grams do not commute is kept whole ("dense"):
// on a tuple G is then a small dense matrix over the dense dimensions, and
// the term is tr(B_τ G_τ⁺), computed from its eigendecomposition.

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/knowdp/knowdp/query"
)

var errEigen = errors.New("strategy: eigendecomposition failed")

// maxDense bounds the product of the sizes of the dense dimensions.
const maxDense = 2048

// maxTuples bounds the tuples the objective enumerates.
const maxTuples = 1 << 24

// dimBasis is the common eigenbasis of a dimension's strategy factors.
type dimBasis struct {
	n int
	// dense: no common basis; grams holds each distinct factor's Gram.
	dense bool
	grams [][]float64
	// analytic: classes 0 (constants) and 1 (contrasts).
	analytic bool
	// vecs[c] lists the orthonormal vectors of class c (eigen classes).
	vecs [][][]float64
	// lam[f][c] is distinct factor f's eigenvalue on class c.
	lam [][]float64
}

func (b *dimBasis) classes() int {
	if b.dense {
		return 1
	}
	if b.analytic {
		return 2
	}
	return len(b.vecs)
}

// coef returns tr(FᵀF P_c) for every class c of the basis (the Gram itself
// for a dense dimension).
func (b *dimBasis) coef(f query.Factor) []float64 {
	switch {
	case b.dense:
		return gram(f)
	case b.analytic:
		t0, t1 := splitTraces(f)
		return []float64{t0, t1}
	}
	g := gram(f)
	out := make([]float64, len(b.vecs))
	for c, vs := range b.vecs {
		for _, u := range vs {
			out[c] += quad(g, u)
		}
	}
	return out
}

// quad returns uᵀ G u for a row-major n×n G.
func quad(g, u []float64) float64 {
	n := len(u)
	var s float64
	for j, a := range u {
		if a == 0 {
			continue
		}
		row := g[j*n : (j+1)*n]
		var r float64
		for k, v := range row {
			r += v * u[k]
		}
		s += a * r
	}
	return s
}

// newDimBasis finds the common eigenbasis of the distinct factors fs of
// one dimension of size n.
func newDimBasis(n int, fs []query.Factor) *dimBasis {
	b := &dimBasis{n: n}
	analytic := true
	for _, f := range fs {
		if _, _, ok := marginalKind(f); !ok {
			analytic = false
		}
	}
	if analytic {
		b.analytic = true
		for _, f := range fs {
			c0, c1, _ := marginalKind(f)
			b.lam = append(b.lam, []float64{c0, c1})
		}
		return b
	}
	grams := make([][]float64, len(fs))
	for i, f := range fs {
		grams[i] = gram(f)
	}
	if vecs, lam, ok := jointEigen(n, grams); ok {
		b.vecs, b.lam = vecs, lam
		return b
	}
	b.dense, b.grams = true, grams
	return b
}

// jointEigen diagonalises commuting symmetric matrices: the eigenvectors of
// a generic combination, grouped by their eigenvalues under every matrix.
// It fails when the matrices do not commute (the eigenvectors then leave
// some matrix not diagonal).
func jointEigen(n int, grams [][]float64) (vecs [][][]float64, lam [][]float64, ok bool) {
	scale := make([]float64, len(grams))
	comb := mat.NewSymDense(n, nil)
	for k, g := range grams {
		var fro float64
		for _, v := range g {
			fro += v * v
		}
		scale[k] = math.Sqrt(fro)
		if scale[k] == 0 {
			continue
		}
		// Fixed irrational weights: a coincidence of eigenvalues between
		// classes would need an exact relation between them.
		wk := (1 + math.Mod(float64(k+1)*0.6180339887498949, 1)) / scale[k]
		for i := range n {
			for j := i; j < n; j++ {
				comb.SetSym(i, j, comb.At(i, j)+wk*g[i*n+j])
			}
		}
	}
	var es mat.EigenSym
	if !es.Factorize(comb, true) {
		return nil, nil, false
	}
	var ev mat.Dense
	es.VectorsTo(&ev)
	type vec struct {
		u   []float64
		sig []float64
	}
	all := make([]vec, n)
	tmp := make([]float64, n)
	for c := range n {
		u := make([]float64, n)
		for i := range n {
			u[i] = ev.At(i, c)
		}
		sig := make([]float64, len(grams))
		for k, g := range grams {
			// G u must be sig_k u: the off-diagonal mass of uᵀ G (the
			// residual of G u - (uᵀGu) u) says whether G is diagonal.
			for i := range n {
				var s float64
				for j := range n {
					s += g[i*n+j] * u[j]
				}
				tmp[i] = s
			}
			var lam, res float64
			for i := range n {
				lam += u[i] * tmp[i]
			}
			for i := range n {
				d := tmp[i] - lam*u[i]
				res += d * d
			}
			if math.Sqrt(res) > 1e-9*max(scale[k], 1) {
				return nil, nil, false
			}
			sig[k] = lam
		}
		all[c] = vec{u, sig}
	}
	// Group by signature.
	same := func(a, b []float64) bool {
		for k := range a {
			if math.Abs(a[k]-b[k]) > 1e-9*max(scale[k], 1) {
				return false
			}
		}
		return true
	}
	var sigs [][]float64
	for _, v := range all {
		c := -1
		for i, s := range sigs {
			if same(s, v.sig) {
				c = i
				break
			}
		}
		if c < 0 {
			c = len(sigs)
			sigs = append(sigs, v.sig)
			vecs = append(vecs, nil)
		}
		vecs[c] = append(vecs[c], v.u)
	}
	lam = make([][]float64, len(grams))
	for k := range grams {
		lam[k] = make([]float64, len(sigs))
		for c, s := range sigs {
			// Eigenvalues that are zero up to rounding are zero: a
			// factor that does not see a class gives it no precision.
			if math.Abs(s[k]) > 1e-11*max(scale[k], 1) {
				lam[k][c] = s[k]
			}
		}
	}
	return vecs, lam, true
}

// system is a strategy decomposed for the objective.
type system struct {
	shape  []int
	basis  []*dimBasis
	factor [][]int // factor[k][i]: measurement k's distinct factor on dim i
	prec   []float64
	diag   []int // the dimensions with classes
	dense  []int // the dimensions kept whole
	nDense int
}

func checkShape(shape []int) error {
	if len(shape) == 0 {
		return errors.New("strategy: a domain of no dimensions")
	}
	if len(shape) > 64 {
		return fmt.Errorf("strategy: %d dimensions, at most 64", len(shape))
	}
	for i, n := range shape {
		if n < 1 {
			return fmt.Errorf("strategy: dimension %d has %d values", i+1, n)
		}
	}
	return nil
}

func checkTerm(shape []int, t query.Term, what string) error {
	if len(t) != len(shape) {
		return fmt.Errorf("strategy: %s has %d factors for %d dimensions", what, len(t), len(shape))
	}
	for d, f := range t {
		if f.N != shape[d] {
			return fmt.Errorf("strategy: %s: factor %d has %d columns, dimension %d has %d values", what, d+1, f.N, d+1, shape[d])
		}
		if f.Rows() < 1 {
			return fmt.Errorf("strategy: %s: factor %d (%v) has no rows", what, d+1, f.Kind)
		}
	}
	return nil
}

func newSystem(shape []int, ms []Measurement) (*system, error) {
	if len(ms) == 0 {
		return nil, errors.New("strategy: no measurements")
	}
	s := &system{shape: shape, factor: make([][]int, len(ms)), prec: make([]float64, len(ms))}
	for k, m := range ms {
		if err := checkTerm(shape, m.Term, fmt.Sprintf("measurement %d", k+1)); err != nil {
			return nil, err
		}
		if !(m.Variance > 0) || math.IsInf(m.Variance, 0) {
			return nil, fmt.Errorf("strategy: measurement %d: variance must be finite and > 0, got %v", k+1, m.Variance)
		}
		s.prec[k] = 1 / m.Variance
		s.factor[k] = make([]int, len(shape))
	}
	s.nDense = 1
	for i, n := range shape {
		var fs []query.Factor
		for k, m := range ms {
			j := slices.IndexFunc(fs, m.Term[i].Equal)
			if j < 0 {
				j = len(fs)
				fs = append(fs, m.Term[i])
			}
			s.factor[k][i] = j
		}
		b := newDimBasis(n, fs)
		s.basis = append(s.basis, b)
		if b.dense {
			s.dense = append(s.dense, i)
			s.nDense *= n
			if s.nDense > maxDense {
				return nil, fmt.Errorf("strategy: the measurements' factors on dimensions %v share no eigenbasis and span %d > %d cells: the exact objective is out of reach", s.dense, s.nDense, maxDense)
			}
		} else {
			s.diag = append(s.diag, i)
		}
	}
	return s, nil
}

// tuple is a product of one class per diagonal dimension, with the
// workload's coefficient on it (a matrix over the dense dimensions).
type tupleSet struct {
	keys  map[string]int
	cls   [][]int32
	coef  [][]float64 // per tuple: scalar (len 1) or nDense² matrix
	terms [][]int     // per tuple: the workload terms it involves
}

// tuples enumerates the tuples on which a workload has weight, with its
// coefficients; perTerm keeps, per tuple, each term's share separately.
func (s *system) tuples(w query.Workload, perTerm bool) (*tupleSet, [][]float64, error) {
	ts := &tupleSet{keys: map[string]int{}}
	var share [][]float64 // share[tuple][j]: coefficient of term ts.terms[tuple][j] (scalar case)
	nd := s.nDense
	size := 1
	if len(s.dense) > 0 {
		size = nd * nd
	}
	for ti, wt := range w {
		// Per diagonal dimension: the classes with weight.
		cs := make([][]int32, len(s.diag))
		vs := make([][]float64, len(s.diag))
		count := 1
		for j, i := range s.diag {
			c := s.basis[i].coef(wt.Term[i])
			var tot float64
			for _, v := range c {
				tot += v
			}
			for cl, v := range c {
				if v > 1e-13*tot {
					cs[j] = append(cs[j], int32(cl))
					vs[j] = append(vs[j], v)
				}
			}
			count *= len(cs[j])
			if count == 0 {
				break
			}
			if count > maxTuples {
				return nil, nil, fmt.Errorf("strategy: workload term %d spans more than %d products of eigenspaces", ti+1, maxTuples)
			}
		}
		if count == 0 {
			continue
		}
		// The dense part: the Kronecker product of the term's Grams.
		var dm []float64
		if len(s.dense) > 0 {
			dm = []float64{1}
			dn := 1
			for _, i := range s.dense {
				g := gram(wt.Term[i])
				dm = kron(dm, dn, g, s.shape[i])
				dn *= s.shape[i]
			}
		}
		idx := make([]int, len(s.diag))
		key := make([]byte, 4*len(s.diag))
		tup := make([]int32, len(s.diag))
		for {
			c := wt.Weight
			for j := range s.diag {
				cl := cs[j][idx[j]]
				tup[j] = cl
				key[4*j], key[4*j+1], key[4*j+2], key[4*j+3] = byte(cl), byte(cl>>8), byte(cl>>16), byte(cl>>24)
				c *= vs[j][idx[j]]
			}
			p, ok := ts.keys[string(key)]
			if !ok {
				p = len(ts.cls)
				ts.keys[string(key)] = p
				ts.cls = append(ts.cls, slices.Clone(tup))
				ts.coef = append(ts.coef, make([]float64, size))
				ts.terms = append(ts.terms, nil)
				share = append(share, nil)
				if len(ts.cls) > maxTuples {
					return nil, nil, fmt.Errorf("strategy: the workload spans more than %d products of eigenspaces", maxTuples)
				}
			}
			if dm == nil {
				ts.coef[p][0] += c
			} else {
				for q, v := range dm {
					ts.coef[p][q] += c * v
				}
			}
			if perTerm {
				ts.terms[p] = append(ts.terms[p], ti)
				share[p] = append(share[p], c)
			}
			// Next index.
			j := len(s.diag) - 1
			for ; j >= 0; j-- {
				idx[j]++
				if idx[j] < len(cs[j]) {
					break
				}
				idx[j] = 0
			}
			if j < 0 {
				break
			}
		}
	}
	return ts, share, nil
}

// kron returns the Kronecker product of a (an×an) and b (bn×bn).
func kron(a []float64, an int, b []float64, bn int) []float64 {
	n := an * bn
	out := make([]float64, n*n)
	for i := range an {
		for j := range an {
			av := a[i*an+j]
			if av == 0 {
				continue
			}
			for k := range bn {
				for l := range bn {
					out[(i*bn+k)*n+j*bn+l] = av * b[k*bn+l]
				}
			}
		}
	}
	return out
}

// precision returns the strategy's precision on a tuple: a scalar, or the
// nDense² matrix over the dense dimensions.
func (s *system) precision(tup []int32) []float64 {
	if len(s.dense) == 0 {
		var l float64
		for k, p := range s.prec {
			v := p
			for j, i := range s.diag {
				v *= s.basis[i].lam[s.factor[k][i]][tup[j]]
				if v == 0 {
					break
				}
			}
			l += v
		}
		return []float64{l}
	}
	nd := s.nDense
	out := make([]float64, nd*nd)
	for k, p := range s.prec {
		v := p
		for j, i := range s.diag {
			v *= s.basis[i].lam[s.factor[k][i]][tup[j]]
		}
		if v == 0 {
			continue
		}
		m := []float64{1}
		mn := 1
		for _, i := range s.dense {
			m = kron(m, mn, s.basis[i].grams[s.factor[k][i]], s.shape[i])
			mn *= s.shape[i]
		}
		for q, x := range m {
			out[q] += v * x
		}
	}
	return out
}

// traceInv returns tr(B P⁺) for symmetric B, P (n×n) with B's range in
// P's, or ErrNotEstimable.
func traceInv(b, p []float64, n int) (float64, error) {
	if n == 1 {
		if b[0] == 0 {
			return 0, nil
		}
		if !(p[0] > 0) {
			return 0, ErrNotEstimable
		}
		return b[0] / p[0], nil
	}
	sym := mat.NewSymDense(n, nil)
	var top float64
	for i := range n {
		for j := i; j < n; j++ {
			sym.SetSym(i, j, (p[i*n+j]+p[j*n+i])/2)
		}
		top = max(top, math.Abs(p[i*n+i]))
	}
	var es mat.EigenSym
	if !es.Factorize(sym, true) {
		return 0, errEigen
	}
	vals := es.Values(nil)
	var ev mat.Dense
	es.VectorsTo(&ev)
	var btop float64
	for i := range n {
		btop = max(btop, math.Abs(b[i*n+i]))
	}
	u := make([]float64, n)
	var s float64
	for c, l := range vals {
		for i := range n {
			u[i] = ev.At(i, c)
		}
		q := quad(b, u)
		if l <= 1e-10*top {
			if q > 1e-9*btop {
				return 0, ErrNotEstimable
			}
			continue
		}
		s += q / l
	}
	return s, nil
}

// Objective returns the expected total squared error of the workload's
// queries, Σ_T w_T tr(W_T G⁺ W_Tᵀ) with G = Σ_k A_kᵀA_k / v_k, under the
// GLS estimate from the measurements ms (their Term and Variance; shares
// and sensitivities are not used, so any sensitivity model fits). It fails,
// wrapping ErrNotEstimable, if a workload query is not a linear
// combination of the measured ones.
func Objective(shape []int, w query.Workload, ms []Measurement) (float64, error) {
	per, err := TermErrors(shape, w, ms)
	if err != nil {
		return 0, err
	}
	var f float64
	for _, v := range per {
		f += v
	}
	return f, nil
}

// TermErrors returns, per workload term, its weighted expected total
// squared error w_T tr(W_T G⁺ W_Tᵀ) (Objective is their sum).
func TermErrors(shape []int, w query.Workload, ms []Measurement) ([]float64, error) {
	return termErrors(shape, w, ms, nil)
}

// termErrors is TermErrors with the residuals known reports (sets of
// dimensions) known exactly: they contribute no error. Known residuals
// need the residual basis: every measured factor an identity, a total or
// Helmert contrasts.
func termErrors(shape []int, w query.Workload, ms []Measurement, known func(a uint64) bool) ([]float64, error) {
	if err := checkShape(shape); err != nil {
		return nil, err
	}
	if len(w) == 0 {
		return nil, errors.New("strategy: an empty workload")
	}
	if err := w.Check(shape); err != nil {
		return nil, fmt.Errorf("strategy: workload: %w", err)
	}
	s, err := newSystem(shape, ms)
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(w))
	if known != nil {
		for _, i := range s.diag {
			if !s.basis[i].analytic {
				return nil, errors.New("strategy: known residuals need identity, total or residual measurements")
			}
		}
		if len(s.dense) > 0 {
			return nil, errors.New("strategy: known residuals need identity, total or residual measurements")
		}
	}
	if len(s.dense) > 0 {
		// Per term: the dense traces are not separable, so enumerate the
		// tuples term by term.
		for ti := range w {
			ts, _, err := s.tuples(w[ti:ti+1], false)
			if err != nil {
				return nil, err
			}
			for p, tup := range ts.cls {
				v, err := traceInv(ts.coef[p], s.precision(tup), s.nDense)
				if err != nil {
					return nil, fmt.Errorf("workload term %d: %w", ti+1, err)
				}
				out[ti] += v
			}
		}
		return out, nil
	}
	ts, share, err := s.tuples(w, true)
	if err != nil {
		return nil, err
	}
	for p, tup := range ts.cls {
		if known != nil {
			var a uint64
			for j, i := range s.diag {
				if tup[j] == 1 {
					a |= 1 << i
				}
			}
			if known(a) {
				continue
			}
		}
		l := s.precision(tup)[0]
		if !(l > 0) {
			return nil, fmt.Errorf("workload term %d: %w", ts.terms[p][0]+1, ErrNotEstimable)
		}
		for j, ti := range ts.terms[p] {
			out[ti] += share[p][j] / l
		}
	}
	return out, nil
}
