package gls

import (
	"fmt"
)

// Preconditioner chooses how the conjugate gradients are preconditioned.
type Preconditioner int

const (
	// Kronecker (the default) is the exact inverse of a Kronecker
	// approximation of the normal matrix: every dimension's Grams are
	// replaced by their diagonals in the dimension's atom-adapted basis,
	// except along one hierarchy, the largest dimension whose
	// measurements are all partitions of its chain, which is solved
	// exactly by tree passes. It is exact when the other dimensions'
	// Grams are diagonal in their bases (for example identity, total and
	// equal-sized groups).
	Kronecker Preconditioner = iota
	// Jacobi divides by the normal matrix's diagonal.
	Jacobi
	// NoPreconditioner runs plain conjugate gradients.
	NoPreconditioner
)

// String names the preconditioner.
func (p Preconditioner) String() string {
	switch p {
	case Kronecker:
		return "kronecker"
	case Jacobi:
		return "jacobi"
	case NoPreconditioner:
		return "none"
	}
	return fmt.Sprintf("Preconditioner(%d)", int(p))
}

// kron returns the Kronecker product of the vectors, the first slowest.
func kron(scale float64, vs [][]float64) []float64 {
	cur := []float64{scale}
	for _, v := range vs {
		next := make([]float64, len(cur)*len(v))
		for i, a := range cur {
			if a == 0 {
				continue
			}
			row := next[i*len(v) : (i+1)*len(v)]
			for j, b := range v {
				row[j] = a * b
			}
		}
		cur = next
	}
	return cur
}

// precond is a preconditioner's set-up: C is symmetric, positive
// semi-definite, maps into the invariants' null space, and is positive on
// the range of P N P.
type precond struct {
	kind Preconditioner
	// Jacobi: the inverse diagonal of N (0 where N's diagonal is 0).
	invDiag []float64
	// Kronecker: the inverse of the approximate normal matrix in the
	// tensor basis (masked by the invariants), or, with a tree dimension
	// tree >= 0, per fibre along it the precision of each chain level and
	// the finest level an invariant fixes (-1 for none).
	invLam []float64
	tree   int
	prec   []float64
	lstar  []int
	fibres int
}

// mask returns 1 for the tensor-basis cells no invariant fixes, 0 for the
// others, over the dimensions dims (in order).
func (pl *Plan) mask(dims []int) []float64 {
	cells := 1
	for _, d := range dims {
		cells *= pl.shape[d]
	}
	m := make([]float64, cells)
	for i := range m {
		m[i] = 1
	}
	for i := range pl.inv {
		fixed := pl.fixedBy(i, dims)
		for c, v := range fixed {
			if v != 0 {
				m[c] = 0
			}
		}
	}
	return m
}

// fixedBy returns the indicator of the tensor-basis cells (over dims) in
// invariant i's row space.
func (pl *Plan) fixedBy(i int, dims []int) []float64 {
	vs := make([][]float64, len(dims))
	for t, d := range dims {
		ax := pl.axes[d]
		v := make([]float64, ax.n)
		for k, a := range ax.atomOf {
			if pl.invSup[i][d]&(1<<a) != 0 {
				v[k] = 1
			}
		}
		vs[t] = v
	}
	return kron(1, vs)
}

// lambda returns Σ_j w_j Π_{d∈dims} λ_{j,d} over the tensor basis of dims,
// for the measurements js.
func (pl *Plan) lambda(js []int, dims []int) []float64 {
	cells := 1
	for _, d := range dims {
		cells *= pl.shape[d]
	}
	out := make([]float64, cells)
	vs := make([][]float64, len(dims))
	for _, j := range js {
		for t, d := range dims {
			vs[t] = pl.lam[j][d]
		}
		for c, v := range kron(pl.meas[j].w, vs) {
			out[c] += v
		}
	}
	return out
}

func (pl *Plan) newPrecond(kind Preconditioner) {
	pre := &precond{kind: kind, tree: -1}
	pl.pre = pre
	D := len(pl.shape)
	switch kind {
	case NoPreconditioner:
		return
	case Jacobi:
		pre.invDiag = make([]float64, pl.cells)
		vs := make([][]float64, D)
		for _, m := range pl.meas {
			for d, f := range m.term {
				vs[d] = colSq(f)
			}
			for c, v := range kron(m.w, vs) {
				pre.invDiag[c] += v
			}
		}
		for c, v := range pre.invDiag {
			if v > 0 {
				pre.invDiag[c] = 1 / v
			}
		}
		return
	}
	// The tree dimension: the largest whose measurement factors are all
	// levels of its chain.
	best := -1
	for d, ax := range pl.axes {
		if ax.chain == nil || ax.n < 2 || (best >= 0 && ax.n <= pl.axes[best].n) {
			continue
		}
		ok := true
		for _, m := range pl.meas {
			p, isPart := partOf(m.term[d])
			if !isPart || ax.chain.levelOf(p) < 0 {
				ok = false
				break
			}
		}
		if ok {
			best = d
		}
	}
	all := make([]int, len(pl.meas))
	for j := range all {
		all[j] = j
	}
	if best < 0 {
		dims := make([]int, D)
		for d := range dims {
			dims[d] = d
		}
		lam := pl.lambda(all, dims)
		mask := pl.mask(dims)
		pre.invLam = make([]float64, pl.cells)
		for c, l := range lam {
			if l > 0 && mask[c] != 0 {
				pre.invLam[c] = 1 / l
			}
		}
		return
	}
	pre.tree = best
	ch := pl.axes[best].chain
	L := ch.top()
	var others []int
	for d := range D {
		if d != best {
			others = append(others, d)
		}
	}
	pre.fibres = pl.cells / pl.shape[best]
	pre.prec = make([]float64, pre.fibres*(L+1))
	for j, m := range pl.meas {
		p, _ := partOf(m.term[best])
		l := ch.levelOf(p)
		for f, v := range pl.lambda([]int{j}, others) {
			pre.prec[f*(L+1)+l] += v
		}
	}
	pre.lstar = make([]int, pre.fibres)
	for f := range pre.lstar {
		pre.lstar[f] = -1
	}
	for i, it := range pl.inv {
		l := ch.levelOf(it.parts[best])
		for f, v := range pl.fixedBy(i, others) {
			if v != 0 && (pre.lstar[f] < 0 || l < pre.lstar[f]) {
				pre.lstar[f] = l
			}
		}
	}
}

// work is one solver's scratch.
type work struct {
	kron   kronWork
	t, buf []float64
	// tree passes: per node of every level, α, β and φ; the fibre.
	alpha, beta, phi, fib, out []float64
}

func (pl *Plan) newWork() *work {
	w := &work{t: make([]float64, pl.cells)}
	n := 0
	for _, ax := range pl.axes {
		n = max(n, ax.bufLen(pl.cells))
	}
	w.buf = make([]float64, n)
	if pl.pre != nil && pl.pre.tree >= 0 {
		ch := pl.axes[pl.pre.tree].chain
		nodes := 0
		for _, lv := range ch.lv {
			nodes += lv.part.groups
		}
		w.alpha, w.beta, w.phi = make([]float64, nodes), make([]float64, nodes), make([]float64, nodes)
		w.fib, w.out = make([]float64, ch.n), make([]float64, ch.n)
	}
	return w
}

// apply sets out = C r for r in the invariants' null space.
func (pl *Plan) applyPrecond(r, out []float64, w *work) {
	pre := pl.pre
	switch pre.kind {
	case NoPreconditioner:
		copy(out, r)
		return
	case Jacobi:
		for c, v := range r {
			out[c] = v * pre.invDiag[c]
		}
		sweep(out, pl.inv, nil, &w.kron)
		return
	}
	copy(out, r)
	for d, ax := range pl.axes {
		if d != pre.tree {
			ax.transform(out, pl.shape, d, false, w.buf)
		}
	}
	if pre.tree < 0 {
		for c, v := range pre.invLam {
			out[c] *= v
		}
	} else {
		pl.treeSolveAll(out, w)
	}
	for d, ax := range pl.axes {
		if d != pre.tree {
			ax.transform(out, pl.shape, d, true, w.buf)
		}
	}
}

// treeSolveAll replaces each fibre along the tree dimension by the exact
// solution of its one-dimensional problem.
func (pl *Plan) treeSolveAll(t []float64, w *work) {
	pre := pl.pre
	d := pre.tree
	n := pl.shape[d]
	inner := 1
	for _, s := range pl.shape[d+1:] {
		inner *= s
	}
	L := pl.axes[d].chain.top()
	for f := range pre.fibres {
		o, i := f/inner, f%inner
		blk := t[o*n*inner:]
		for k := range n {
			w.fib[k] = blk[k*inner+i]
		}
		pl.treeSolve(w.fib, w.out, pre.prec[f*(L+1):(f+1)*(L+1)], pre.lstar[f], w)
		for k := range n {
			blk[k*inner+i] = w.out[k]
		}
	}
}

// treeSolve sets u to the minimiser of ½ u^T M u - r^T u over the u with
// zero sums on the groups of level lstar (none when lstar < 0), M =
// Σ_l prec[l] R_l^T R_l (R_0 = I, R_l the rollup onto level l), restricted
// to the range of M (the functions constant on the groups of the lowest
// level with a positive precision; r is averaged onto it). It is exact
// Gaussian elimination on the tree (package doc): upward, each node's sum
// is s = α - β φ(parent), with φ the sum of prec times sums over the node
// and its ancestors; downward, φ and s from the root.
func (pl *Plan) treeSolve(r, u, prec []float64, lstar int, w *work) {
	ch := pl.axes[pl.pre.tree].chain
	L := ch.top()
	lmin := -1
	for l, p := range prec {
		if p > 0 {
			lmin = l
			break
		}
	}
	if lmin < 0 || (lstar >= 0 && lstar <= lmin) {
		clear(u)
		return
	}
	hi := L
	if lstar >= 0 {
		hi = lstar
	}
	// Node storage: level l's nodes at off(l).
	off := func(l int) int {
		o := 0
		for m := range l {
			o += ch.lv[m].part.groups
		}
		return o
	}
	al, be, ph := w.alpha, w.beta, w.phi
	// Sums of r at level lmin.
	base := off(lmin)
	nb := ch.lv[lmin].part.groups
	clear(al[base : base+nb])
	for x, g := range ch.lv[lmin].part.of {
		al[base+int(g)] += r[x]
	}
	b := prec[lmin]
	for g := range nb {
		al[base+g] /= float64(ch.lv[lmin].size[g]) * b
		be[base+g] = 1 / b
	}
	for l := lmin + 1; l <= hi; l++ {
		o, ob := off(l), off(l-1)
		bl := prec[l]
		for h := range ch.lv[l].part.groups {
			var A, B float64
			for _, c := range ch.children(l, h) {
				A += al[ob+int(c)]
				B += be[ob+int(c)]
			}
			if l == lstar {
				al[o+h], be[o+h] = A, B
				continue
			}
			den := 1 + B*bl
			al[o+h], be[o+h] = A/den, B/den
		}
	}
	// Downward: ph holds φ; at the base, the sums s.
	for l := hi; l >= lmin; l-- {
		o := off(l)
		var po int
		if l < L {
			po = off(l + 1)
		}
		for g := range ch.lv[l].part.groups {
			var fp float64
			if l < L && l != lstar {
				fp = ph[po+int(ch.lv[l].parent[g])]
			}
			if l == lstar {
				ph[o+g] = al[o+g] / be[o+g]
				continue
			}
			s := al[o+g] - be[o+g]*fp
			if l == lmin {
				ph[o+g] = s
				continue
			}
			ph[o+g] = prec[l]*s + fp
		}
	}
	for x, g := range ch.lv[lmin].part.of {
		u[x] = ph[base+int(g)] / float64(ch.lv[lmin].size[g])
	}
}
