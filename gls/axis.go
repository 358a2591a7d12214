package gls

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/knowdp/knowdp/query"
)

// defaultDenseMax is the largest dimension given an explicit (dense)
// basis when one is needed: its transforms cost n per cell, its set-up
// O(n³) (about a second at 1,024).
const defaultDenseMax = 1024

// smallDense is the size up to which a dimension gets an explicit basis
// even when the Haar basis would do.
const smallDense = 16

// maxAtoms bounds the atoms of one dimension (they are bit sets).
const maxAtoms = 64

// axis is what the plan knows about one dimension of the reduced domain:
// an orthogonal decomposition of R^n into atoms such that the row space of
// every measurement and invariant factor along it is a sum of atoms, and
// an orthonormal basis adapted to the atoms (each basis vector lies in one
// atom).
type axis struct {
	n int
	// chain is the measurements' and invariants' partitions along the
	// dimension when they are nested, nil otherwise.
	chain *chain
	// The basis: the chain's Haar basis (haar != nil), or explicit (u, n x
	// n row-major, column k the k-th basis vector).
	haar *haar
	u    []float64
	// sq caches the chain's sums of squared sizes (Haar basis only).
	sq      [][][]float64
	atomOf  []int // atom of each basis vector
	atomDim []int
	// atomDesc describes each atom for error messages.
	atomDesc []string
}

// conflict is a failure to build an axis: factor i (and factor k, when
// >= 0) of the list passed to newAxis, and why.
type conflict struct {
	i, k int
	why  string
}

func (c *conflict) Error() string { return c.why }

// newAxis builds the axis of a dimension of size n from the factors along
// it of the measurements (the first len(omega)) and the invariants;
// omega[j] scales measurement j's Gram in the weighted sum whose
// eigenvectors, within each atom, form an explicit basis.
func newAxis(n int, facs []query.Factor, omega []float64, denseMax int) (*axis, error) {
	ax := &axis{n: n}
	var parts []partition
	var src []int
	for i, f := range facs {
		if p, ok := partOf(f); ok {
			parts = append(parts, p)
			src = append(src, i)
		}
	}
	ch, pair, nested := newChain(n, parts)
	// An explicit basis costs n per cell and transform; a Haar basis a few
	// operations. The explicit one is needed when the measurements'
	// factors are not all diagonal or nearly so in the chain's Haar basis
	// (prefix, ranges and given matrices), and cheap on small dimensions,
	// where its rotation to the Grams' eigenvectors is worth having.
	needExplicit := !nested
	for _, f := range facs[:len(omega)] {
		switch f.Kind {
		case query.Prefix, query.Ranges, query.Matrix:
			needExplicit = true
		}
	}
	explicit := n <= denseMax && (needExplicit || n <= min(denseMax, smallDense))
	if nested {
		ax.chain = ch
	} else if !explicit {
		c := &conflict{i: -1, k: -1, why: "their partitions are not nested"}
		if pair[0] >= 0 {
			c.i = src[pair[0]]
		}
		if pair[1] >= 0 {
			c.k = src[pair[1]]
		}
		return nil, c
	}
	if !explicit {
		ax.haar = newHaar(ch)
		ax.sq = ax.haar.sumSq()
		L := ch.top()
		if L+1 > maxAtoms {
			return nil, &conflict{i: -1, k: -1, why: fmt.Sprintf("%d nested levels, at most %d", L+1, maxAtoms)}
		}
		ax.atomOf = ax.haar.atom
		ax.atomDim = make([]int, L+1)
		ax.atomDesc = make([]string, L+1)
		for l := range L {
			ax.atomDim[l] = ch.lv[l].part.groups - ch.lv[l+1].part.groups
			what := "groups"
			if l == 0 {
				what = "values"
			}
			ax.atomDesc[l] = fmt.Sprintf("the differences among its %d %s within each of %d groups", ch.lv[l].part.groups, what, ch.lv[l+1].part.groups)
		}
		ax.atomDim[L] = 1
		ax.atomDesc[L] = "its total"
		return ax, nil
	}
	return ax, ax.buildDense(facs, omega)
}

// buildDense splits R^n into the atoms of the algebra the factors' row
// space projectors generate (they must commute), then rotates each atom's
// basis to the eigenvectors of Σ_j omega_j F_j^T F_j compressed to it.
// Splitting an atom U by a row space with orthonormal basis B costs one
// eigendecomposition of the small X X^T, X = B^T U, and one QR.
func (ax *axis) buildDense(facs []query.Factor, omega []float64) error {
	n := ax.n
	atoms := []*mat.Dense{nil} // nil stands for the identity
	dimOf := func(u *mat.Dense) int {
		if u == nil {
			return n
		}
		_, k := u.Dims()
		return k
	}
	for i, f := range facs {
		b := rowBasis(f)
		if b == nil {
			continue // full column rank: every atom lies in its row space
		}
		_, r := b.Dims()
		var next []*mat.Dense
		for _, u := range atoms {
			k := dimOf(u)
			var x mat.Dense
			if u == nil {
				x.CloneFrom(b.T())
			} else {
				x.Mul(b.T(), u)
			}
			var s mat.Dense
			s.Mul(&x, x.T())
			vals, w, err := eigSym(&s)
			if err != nil {
				return &conflict{i: i, k: -1, why: err.Error()}
			}
			var ones []int
			for t, v := range vals {
				switch {
				case v > 1-1e-8:
					ones = append(ones, t)
				case v < 1e-8:
				default:
					return &conflict{i: i, k: -1, why: "its row space does not commute with the other measurements' and invariants' row spaces (no common orthogonal decomposition)"}
				}
			}
			r1 := len(ones)
			if r1 == 0 || r1 == k {
				next = append(next, u)
				continue
			}
			// The atom's part in the row space (or its complement) is
			// spanned by X^T w for the unit eigenvalues; a full QR gives
			// it and its complement orthonormal bases.
			w1 := mat.NewDense(r, r1, nil)
			for a, t := range ones {
				w1.SetCol(a, mat.Col(nil, t, w))
			}
			var y mat.Dense
			y.Mul(x.T(), w1)
			var qr mat.QR
			qr.Factorize(&y)
			var q mat.Dense
			qr.QTo(&q)
			for _, part := range []mat.Matrix{q.Slice(0, k, 0, r1), q.Slice(0, k, r1, k)} {
				var nu mat.Dense
				if u == nil {
					nu.CloneFrom(part)
				} else {
					nu.Mul(u, part)
				}
				next = append(next, &nu)
			}
		}
		atoms = next
	}
	if len(atoms) > maxAtoms {
		return &conflict{i: -1, k: -1, why: fmt.Sprintf("%d atoms, at most %d", len(atoms), maxAtoms)}
	}
	g := mat.NewDense(n, n, nil)
	for j, w := range omega {
		if w > 0 {
			g.Add(g, scaled(w, mat.NewDense(n, n, gramDense(facs[j]))))
		}
	}
	ax.u = make([]float64, n*n)
	ax.atomOf = make([]int, n)
	ax.atomDim = make([]int, len(atoms))
	ax.atomDesc = make([]string, len(atoms))
	col := 0
	for a, u := range atoms {
		k := dimOf(u)
		var c mat.Dense
		if u == nil {
			c.CloneFrom(g)
		} else {
			var gu mat.Dense
			gu.Mul(g, u)
			c.Mul(u.T(), &gu)
		}
		_, vecs, err := eigSym(&c)
		if err != nil {
			return &conflict{i: -1, k: -1, why: err.Error()}
		}
		rot := vecs
		if u != nil {
			rot = new(mat.Dense)
			rot.Mul(u, vecs)
		}
		for t := range k {
			for x := range n {
				ax.u[x*n+col] = rot.At(x, t)
			}
			ax.atomOf[col] = a
			col++
		}
		ax.atomDim[a] = k
		// Its share of the constant says whether it is the total, part
		// of the contrasts, or neither.
		var c1 float64
		for t := col - k; t < col; t++ {
			var s float64
			for x := range n {
				s += ax.u[x*n+t]
			}
			c1 += s * s / float64(n)
		}
		switch {
		case k == 1 && c1 > 0.5:
			ax.atomDesc[a] = "its total"
		case c1 < 0.5 && k == n-1:
			ax.atomDesc[a] = "the differences among its values"
		case c1 < 0.5:
			ax.atomDesc[a] = fmt.Sprintf("a %d-dimensional part of the differences among its values", k)
		default:
			ax.atomDesc[a] = fmt.Sprintf("a %d-dimensional part of its values", k)
		}
	}
	return nil
}

func identity(n int) *mat.Dense {
	m := mat.NewDense(n, n, nil)
	for i := range n {
		m.Set(i, i, 1)
	}
	return m
}

func scaled(w float64, m *mat.Dense) *mat.Dense {
	m.Scale(w, m)
	return m
}

// eigSym returns the eigenvalues (ascending) and eigenvectors of the
// symmetric part of c.
func eigSym(c *mat.Dense) ([]float64, *mat.Dense, error) {
	k, _ := c.Dims()
	s := mat.NewSymDense(k, nil)
	for i := range k {
		for j := i; j < k; j++ {
			s.SetSym(i, j, (c.At(i, j)+c.At(j, i))/2)
		}
	}
	var e mat.EigenSym
	if !e.Factorize(s, true) {
		return nil, nil, fmt.Errorf("an eigendecomposition of order %d failed", k)
	}
	var v mat.Dense
	e.VectorsTo(&v)
	return e.Values(nil), &v, nil
}

// rowBasis returns an orthonormal basis (columns) of F's row space, or of
// its orthogonal complement, whichever is known to be smaller (splitting
// by either gives the same atoms), or nil when the row space is all of
// R^n.
func rowBasis(f query.Factor) *mat.Dense {
	n := f.N
	switch f.Kind {
	case query.Identity, query.Prefix, query.Ranges:
		return nil
	case query.Total, query.Residual:
		b := mat.NewDense(n, 1, nil)
		for x := range n {
			b.Set(x, 0, 1/math.Sqrt(float64(n)))
		}
		return b
	case query.RollUp:
		p, _ := partOf(f)
		size := p.sizes()
		b := mat.NewDense(n, p.groups, nil)
		for x, g := range p.of {
			b.Set(x, int(g), 1/math.Sqrt(float64(size[g])))
		}
		return b
	}
	// A given matrix: its right singular vectors.
	m := mat.NewDense(f.Rows(), n, f.M)
	var svd mat.SVD
	if !svd.Factorize(m, mat.SVDFull) {
		panic("gls: SVD failed")
	}
	r := rankOf(svd.Values(nil), f.Rows(), n)
	if r == n {
		return nil
	}
	var v mat.Dense
	svd.VTo(&v)
	if r == 0 {
		return identity(n) // the zero matrix: the complement is everything
	}
	if r <= n/2 {
		return mat.DenseCopyOf(v.Slice(0, n, 0, r))
	}
	return mat.DenseCopyOf(v.Slice(0, n, r, n))
}

// rankOf counts the singular values above the usual tolerance.
func rankOf(vals []float64, rows, cols int) int {
	if len(vals) == 0 {
		return 0
	}
	tol := float64(max(rows, cols)) * vals[0] * 1e-12
	r := 0
	for _, v := range vals {
		if v > tol {
			r++
		}
	}
	return r
}

// matrixRank returns the rank of a Matrix factor.
func matrixRank(f query.Factor) int {
	var svd mat.SVD
	if !svd.Factorize(mat.NewDense(f.Rows(), f.N, f.M), mat.SVDNone) {
		panic("gls: SVD failed")
	}
	return rankOf(svd.Values(nil), f.Rows(), f.N)
}

// diag returns u_k^T F^T F u_k for every basis vector u_k: F's Gram in the
// axis basis, kept on its diagonal. It costs O(n) per basis vector for
// factors of the chain and residuals, O(n²) per vector in an explicit
// basis, and O(n + qform) per vector otherwise.
func (ax *axis) diag(f query.Factor) []float64 {
	n := ax.n
	if ax.haar != nil {
		if p, ok := partOf(f); ok {
			if l := ax.chain.levelOf(p); l >= 0 {
				return ax.haar.partDiag(l, ax.sq)
			}
		}
		out := make([]float64, n)
		if f.Kind == query.Residual {
			for k := 1; k < n; k++ {
				out[k] = 1
			}
			return out
		}
		for k := range n {
			out[k] = qform(f, ax.haar.vector(k))
		}
		return out
	}
	u := mat.NewDense(n, n, ax.u)
	var gu mat.Dense
	gu.Mul(mat.NewDense(n, n, gramDense(f)), u)
	out := make([]float64, n)
	for a := range n {
		ua, ga := ax.u[a*n:(a+1)*n], gu.RawRowView(a)
		for k, v := range ua {
			out[k] += v * ga[k]
		}
	}
	for k, v := range out {
		out[k] = max(v, 0)
	}
	return out
}

// support returns the atoms on which F's rows have energy (||F P_a||_F >
// 0, from the diagonal in the axis basis), and whether F's row space is
// exactly their sum.
func (ax *axis) support(f query.Factor, dg []float64) (uint64, bool) {
	e := make([]float64, len(ax.atomDim))
	var tot float64
	for k, v := range dg {
		e[ax.atomOf[k]] += v
		tot += v
	}
	var set uint64
	dim := 0
	for a, v := range e {
		if v > 1e-9*tot {
			set |= 1 << a
			dim += ax.atomDim[a]
		}
	}
	var rank int
	switch f.Kind {
	case query.Identity, query.Prefix, query.Ranges:
		rank = f.N
	case query.Total, query.RollUp:
		rank = f.Rows()
	case query.Residual:
		rank = f.N - 1
	case query.Matrix:
		rank = matrixRank(f)
	}
	return set, rank == dim
}

// transform replaces axis d of the tensor t (row-major of shape) by its
// coefficients in the axis basis (inv false) or back (inv true). buf
// needs len(t) for an explicit basis, 2n + the chain's nodes for Haar.
func (ax *axis) transform(t []float64, shape []int, d int, inv bool, buf []float64) {
	n := ax.n
	if n == 1 {
		return // the basis is (1)
	}
	outer, inner := 1, 1
	for _, s := range shape[:d] {
		outer *= s
	}
	for _, s := range shape[d+1:] {
		inner *= s
	}
	if ax.u != nil {
		u := blas64.General{Rows: n, Cols: n, Stride: n, Data: ax.u}
		if inner == 1 {
			// t is outer x n: coefficients are t U, values c U^T.
			x := blas64.General{Rows: outer, Cols: n, Stride: n, Data: t}
			y := blas64.General{Rows: outer, Cols: n, Stride: n, Data: buf[:len(t)]}
			tb := blas.NoTrans
			if inv {
				tb = blas.Trans
			}
			blas64.Gemm(blas.NoTrans, tb, 1, x, u, 0, y)
			copy(t, y.Data)
			return
		}
		ta := blas.Trans
		if inv {
			ta = blas.NoTrans
		}
		// One product U^T X with X = the tensor as n x (outer·inner):
		// small blocks would leave the matrix product starved.
		cols := outer * inner
		b := buf[:len(t)]
		if outer > 1 {
			for o := range outer {
				blk := t[o*n*inner : (o+1)*n*inner]
				for k := range n {
					copy(b[k*cols+o*inner:k*cols+(o+1)*inner], blk[k*inner:(k+1)*inner])
				}
			}
		} else {
			copy(b, t)
		}
		x := blas64.General{Rows: n, Cols: cols, Stride: cols, Data: b}
		y := blas64.General{Rows: n, Cols: cols, Stride: cols, Data: t}
		blas64.Gemm(ta, blas.NoTrans, 1, u, x, 0, y)
		if outer > 1 {
			copy(b, t)
			for o := range outer {
				blk := t[o*n*inner : (o+1)*n*inner]
				for k := range n {
					copy(blk[k*inner:(k+1)*inner], b[k*cols+o*inner:k*cols+(o+1)*inner])
				}
			}
		}
		return
	}
	in, out, s := buf[:n], buf[n:2*n], buf[2*n:2*n+ax.haar.nodes]
	for o := range outer {
		blk := t[o*n*inner : (o+1)*n*inner]
		for i := range inner {
			for k := range n {
				in[k] = blk[k*inner+i]
			}
			if inv {
				ax.haar.inverse(in, out, s)
			} else {
				ax.haar.forward(in, out, s)
			}
			for k := range n {
				blk[k*inner+i] = out[k]
			}
		}
	}
}

// bufLen returns the scratch transform needs for a tensor of the given
// number of cells.
func (ax *axis) bufLen(cells int) int {
	if ax.u != nil {
		return cells
	}
	if ax.haar == nil {
		return 0
	}
	return 2*ax.n + ax.haar.nodes
}
