package gls

import (
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"

	"github.com/knowdp/knowdp/query"
)

// denseTerm returns the Kronecker product of the term's factors, formed
// explicitly from each factor's dense matrix.
func denseTerm(t query.Term) *mat.Dense {
	cur := mat.NewDense(1, 1, []float64{1})
	for _, f := range t {
		fm := mat.NewDense(f.Rows(), f.N, f.Dense())
		var k mat.Dense
		k.Kronecker(cur, fm)
		cur = &k
	}
	return cur
}

// stack returns the rows of the matrices one under the other.
func stack(cols int, ms ...*mat.Dense) *mat.Dense {
	rows := 0
	for _, m := range ms {
		r, _ := m.Dims()
		rows += r
	}
	if rows == 0 {
		return nil
	}
	out := mat.NewDense(rows, cols, nil)
	r0 := 0
	for _, m := range ms {
		r, _ := m.Dims()
		if r == 0 {
			continue
		}
		out.Slice(r0, r0+r, 0, cols).(*mat.Dense).Copy(m)
		r0 += r
	}
	return out
}

// pinv returns the pseudo-inverse of a by its SVD, and a's rank.
func pinv(a mat.Matrix) (*mat.Dense, int) { return pinvAbove(a, 0) }

// pinvAbove is pinv treating singular values <= floor as zero.
func pinvAbove(a mat.Matrix, floor float64) (*mat.Dense, int) {
	r, c := a.Dims()
	var svd mat.SVD
	if !svd.Factorize(a, mat.SVDFull) {
		panic("svd")
	}
	vals := svd.Values(nil)
	rank := rankOf(vals, r, c)
	for rank > 0 && vals[rank-1] <= floor {
		rank--
	}
	var u, v mat.Dense
	svd.UTo(&u)
	svd.VTo(&v)
	out := mat.NewDense(c, r, nil)
	for k := range rank {
		var o mat.Dense
		o.Outer(1/vals[k], v.ColView(k), u.ColView(k))
		out.Add(out, &o)
	}
	return out, rank
}

func rankOfDense(a mat.Matrix) int {
	if a == nil {
		return 0
	}
	_, r := pinv(a)
	return r
}

// denseGLS solves the constrained problem by the null-space method: x_p =
// E^+ e, Z an orthonormal basis of E's null space, x = x_p + Z (Z^T N
// Z)^+ Z^T (b - N x_p). It returns x and the linear map H (cells x
// stacked measurement rows) with x = H z + (a constant).
type denseGLS struct {
	x *mat.VecDense
	h *mat.Dense
	m *mat.Dense // the stacked measurement terms
	v []float64  // per stacked row, its noise variance
	// me is the stacked measurements and invariants, for rank checks.
	me *mat.Dense
}

func solveDense(p Problem, meas, inv [][]float64) *denseGLS {
	cells := 1
	for _, n := range p.Shape {
		cells *= n
	}
	var ms []*mat.Dense
	var zs, vs []float64
	for j, m := range p.Measurements {
		ms = append(ms, denseTerm(m.Term))
		zs = append(zs, meas[j]...)
		for range m.Term.Rows() {
			vs = append(vs, m.Variance)
		}
	}
	var es []*mat.Dense
	var ev []float64
	for i, e := range p.Invariants {
		es = append(es, denseTerm(e.Term))
		ev = append(ev, inv[i]...)
	}
	M := stack(cells, ms...)
	E := stack(cells, es...)
	// Z and x_p.
	xp := mat.NewVecDense(cells, nil)
	var Z *mat.Dense
	if E == nil {
		Z = identity(cells)
	} else {
		ep, rank := pinv(E)
		xp.MulVec(ep, mat.NewVecDense(len(ev), ev))
		var svd mat.SVD
		svd.Factorize(E, mat.SVDFull)
		var v mat.Dense
		svd.VTo(&v)
		Z = mat.DenseCopyOf(v.Slice(0, cells, rank, cells))
	}
	_, nz := Z.Dims()
	out := &denseGLS{x: xp, v: vs, m: M}
	out.me = stack(cells, append(append([]*mat.Dense(nil), ms...), es...)...)
	if M == nil || nz == 0 {
		out.h = mat.NewDense(cells, max(len(zs), 1), nil)
		return out
	}
	// W M, N = M^T W M.
	rows, _ := M.Dims()
	wm := mat.DenseCopyOf(M)
	for r := range rows {
		row := wm.RawRowView(r)
		for c := range row {
			row[c] /= vs[r]
		}
	}
	var n, zn, h0 mat.Dense
	n.Mul(M.T(), wm)
	zn.Mul(Z.T(), &n)
	var hz mat.Dense
	hz.Mul(&zn, Z)
	hp, _ := pinvAbove(&hz, 1e-10*mat.Norm(&n, 2))
	// H = Z hp Z^T M^T W.
	h0.Mul(Z, hp)
	var h1 mat.Dense
	h1.Mul(&h0, Z.T())
	out.h = new(mat.Dense)
	out.h.Mul(&h1, wm.T())
	// x = x_p + H (z - M x_p).
	mxp := mat.NewVecDense(rows, nil)
	mxp.MulVec(M, xp)
	dz := mat.NewVecDense(rows, nil)
	dz.SubVec(mat.NewVecDense(rows, zs), mxp)
	hx := mat.NewVecDense(cells, nil)
	hx.MulVec(out.h, dz)
	out.x = mat.NewVecDense(cells, nil)
	out.x.AddVec(xp, hx)
	return out
}

// determinedDense reports whether every row of t is in the row space of
// the measurements and invariants.
func (g *denseGLS) determinedDense(t query.Term) bool {
	q := denseTerm(t)
	_, cells := q.Dims()
	if g.me == nil {
		return mat.Norm(q, 2) == 0
	}
	return rankOfDense(stack(cells, g.me, q)) == rankOfDense(g.me)
}

// lawDense returns the coefficients of row q's error on the stacked noise
// (q^T H) and its variance.
func (g *denseGLS) lawDense(q []float64) ([]float64, float64) {
	_, rows := g.h.Dims()
	c := mat.NewVecDense(rows, nil)
	c.MulVec(g.h.T(), mat.NewVecDense(len(q), q))
	var v float64
	out := make([]float64, rows)
	for r := range rows {
		out[r] = c.AtVec(r)
		if r < len(g.v) {
			v += out[r] * out[r] * g.v[r]
		}
	}
	return out, v
}

// randomChain returns nested partitions of n values, finest first (none
// the identity or the total), with unequal group sizes.
func randomChain(rng *rand.Rand, n, levels int) []partition {
	var out []partition
	cur := make([]int32, n)
	for i := range cur {
		cur[i] = int32(i)
	}
	groups := n
	for range levels {
		if groups <= 2 {
			break
		}
		// Merge runs of consecutive groups of random lengths.
		ng := 2 + rng.IntN(groups-2)
		cuts := rng.Perm(groups - 1)[:ng-1]
		isCut := make([]bool, groups)
		for _, c := range cuts {
			isCut[c+1] = true
		}
		img := make([]int32, groups)
		k := int32(0)
		for g := range groups {
			if g > 0 && isCut[g] {
				k++
			}
			img[g] = k
		}
		// Shuffle the group numbers, so rows are not in value order.
		perm := rng.Perm(int(k) + 1)
		next := make([]int32, n)
		for x, g := range cur {
			next[x] = int32(perm[img[g]])
		}
		cur, groups = next, int(k)+1
		out = append(out, partition{cur, groups})
	}
	return out
}

// randomProblem draws a problem over shape with hierarchies of random
// depth, every factor kind among the measurements, invariants at several
// levels, and random answers (the invariants' consistent).
type randomSetup struct {
	p          Problem
	meas, inv  [][]float64
	chains     [][]partition
	candidates []query.Term
}

func randomFactor(rng *rand.Rand, n int, chain []partition, kinds []query.Kind) query.Factor {
	switch kinds[rng.IntN(len(kinds))] {
	case query.Identity:
		return query.NewIdentity(n)
	case query.Total:
		return query.NewTotal(n)
	case query.RollUp:
		if len(chain) == 0 {
			return query.NewIdentity(n)
		}
		p := chain[rng.IntN(len(chain))]
		f, err := query.NewRollUp(p.of)
		if err != nil {
			panic(err)
		}
		return f
	case query.Prefix:
		return query.NewPrefix(n)
	case query.Ranges:
		return query.NewRanges(n)
	case query.Residual:
		if n < 2 {
			return query.NewTotal(n)
		}
		return query.NewResidual(n)
	case query.Matrix:
		rows := n + rng.IntN(2)
		m := make([]float64, rows*n)
		for i := range m {
			m[i] = rng.NormFloat64()
		}
		f, err := query.NewMatrix(rows, n, m)
		if err != nil {
			panic(err)
		}
		return f
	}
	panic("kind")
}

var allKinds = []query.Kind{query.Identity, query.Total, query.RollUp, query.Prefix, query.Ranges, query.Residual, query.Matrix}
var partKinds = []query.Kind{query.Identity, query.Total, query.RollUp}

func newRandomSetup(rng *rand.Rand, shape []int, nMeas, nInv int) *randomSetup {
	s := &randomSetup{p: Problem{Shape: shape}}
	D := len(shape)
	s.chains = make([][]partition, D)
	ordered := make([]bool, D)
	for d, n := range shape {
		s.chains[d] = randomChain(rng, n, 1+rng.IntN(3))
		ordered[d] = rng.IntN(2) == 0
	}
	cells := 1
	for _, n := range shape {
		cells *= n
	}
	truth := make([]float64, cells)
	for i := range truth {
		truth[i] = float64(rng.IntN(20))
	}
	for j := range nMeas {
		t := make(query.Term, D)
		for d, n := range shape {
			kinds := partKinds
			if ordered[d] {
				kinds = allKinds
			}
			t[d] = randomFactor(rng, n, s.chains[d], kinds)
		}
		v := 0.5 + rng.Float64()*3
		s.p.Measurements = append(s.p.Measurements, Measurement{Term: t, Variance: v})
		z := t.Apply(truth)
		for r := range z {
			z[r] += rng.NormFloat64() * math.Sqrt(v)
		}
		s.meas = append(s.meas, z)
		_ = j
	}
	for range nInv {
		t := make(query.Term, D)
		for d, n := range shape {
			t[d] = randomFactor(rng, n, s.chains[d], []query.Kind{query.Total, query.Total, query.RollUp})
		}
		s.p.Invariants = append(s.p.Invariants, Invariant{Term: t})
		s.inv = append(s.inv, t.Apply(truth))
	}
	// Candidate queries: every measured term, coarser roll-ups of them,
	// and random terms of every kind.
	for _, m := range s.p.Measurements {
		s.candidates = append(s.candidates, m.Term)
	}
	for range 6 {
		t := make(query.Term, D)
		for d, n := range shape {
			t[d] = randomFactor(rng, n, s.chains[d], allKinds)
		}
		s.candidates = append(s.candidates, t)
	}
	for range 6 {
		t := make(query.Term, D)
		for d, n := range shape {
			t[d] = randomFactor(rng, n, s.chains[d], []query.Kind{query.Total, query.Total, query.RollUp, query.Identity})
		}
		s.candidates = append(s.candidates, t)
	}
	return s
}

func maxAbs(v []float64) float64 {
	var m float64
	for _, x := range v {
		m = max(m, math.Abs(x))
	}
	return m
}
