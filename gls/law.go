package gls

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/knowdp/knowdp/query"
)

// Law is the error of one estimated query row as a linear combination of
// the measurements' independent noise: error = Σ_j Coefs[j] · e_j, where
// e_j is measurement j's noise vector (row-major over its term's rows).
type Law struct {
	Coefs [][]float64
	// Variance is Σ_j v_j ||Coefs[j]||².
	Variance float64
	// Certificate is the solve's: the coefficients are w_j M_j g for g
	// solving P N P g = P q to that residual.
	Certificate Certificate
}

// rowVec returns row r of f explicitly.
func rowVec(f query.Factor, r int) []float64 {
	n := f.N
	v := make([]float64, n)
	switch f.Kind {
	case query.Identity:
		v[r] = 1
	case query.Total:
		for i := range v {
			v[i] = 1
		}
	case query.RollUp:
		for x, g := range f.Group {
			if int(g) == r {
				v[x] = 1
			}
		}
	case query.Prefix:
		for i := 0; i <= r; i++ {
			v[i] = 1
		}
	case query.Ranges:
		i := 0
		for r >= n-i {
			r -= n - i
			i++
		}
		for k := i; k <= i+r; k++ {
			v[k] = 1
		}
	case query.Residual:
		k := r + 1
		c := math.Sqrt(float64(k) * float64(k+1))
		for i := range k {
			v[i] = 1 / c
		}
		v[k] = -float64(k) / c
	case query.Matrix:
		copy(v, f.M[r*n:(r+1)*n])
	}
	return v
}

// rowsShape returns the factors' row counts.
func rowsShape(t query.Term) []int {
	s := make([]int, len(t))
	for d, f := range t {
		s[d] = f.Rows()
	}
	return s
}

// solveLaw returns g solving P N P g = P q, and g^T N g = Σ_j w_j ||M_j
// g||², the variance of the estimate of q.
func (pl *Plan) solveLaw(ctx context.Context, q []float64, w *work) ([]float64, float64, Certificate, error) {
	rhs := append([]float64(nil), q...)
	sweep(rhs, pl.inv, nil, &w.kron)
	g := make([]float64, pl.cells)
	cert, err := pl.pcg(ctx, rhs, g, norm2(q), w)
	if err != nil {
		return nil, 0, cert, err
	}
	var v float64
	for _, m := range pl.meas {
		y := w.kron.apply(m.term, g, false)
		v += m.w * dot(y, y)
	}
	return g, v, cert, nil
}

// Law returns the error law of row `row` of query q: one solve of the
// normal equations (the cost of an estimate) and one product per
// measurement.
func (pl *Plan) Law(ctx context.Context, q, row int) (Law, error) {
	if q < 0 || q >= len(pl.queries) {
		return Law{}, fmt.Errorf("gls: query %d out of range (%d queries)", q, len(pl.queries))
	}
	t := pl.queries[q]
	if row < 0 || row >= t.Rows() {
		return Law{}, fmt.Errorf("gls: row %d of %s out of range (%d rows)", row, pl.prob.queryName(q), t.Rows())
	}
	idx := unflat(row, rowsShape(t))
	vs := make([][]float64, len(t))
	for d, f := range t {
		vs[d] = rowVec(f, idx[d])
	}
	g, v, cert, err := pl.solveLaw(ctx, kron(1, vs), pl.newWork())
	if err != nil {
		return Law{}, err
	}
	law := Law{Variance: v, Certificate: cert}
	for _, m := range pl.meas {
		c := m.term.Apply(g)
		for i := range c {
			c[i] *= m.w
		}
		law.Coefs = append(law.Coefs, c)
	}
	return law, nil
}

// Variances are the error variances of every row of a query.
type Variances struct {
	// Values holds the variance of each row (row-major over the term's
	// rows).
	Values []float64
	// Solves is the number of solves it took: one per class of rows
	// sharing their variance by symmetry (or per pair of basis vectors of
	// an exchangeable dimension).
	Solves int
	// Certificate has the most iterations and the largest residual of the
	// solves.
	Certificate Certificate
}

// weighted is a row's share of an evaluated vector.
type weighted struct {
	id int
	w  float64
}

// rowClasses splits the rows of the query factor f along dimension d into
// classes of equal variance, returning the vectors to evaluate and, per
// row, its variance as a combination of theirs (per dimension; the
// combinations multiply across dimensions).
//
//   - A dimension is exchangeable when every measurement and invariant
//     factor along it is identity, total or residual: every permutation
//     of its values fixes their Grams and projectors, so the solution's
//     inverse acts on it as A ⊗ J/n + B ⊗ (I - J/n) (Schur's lemma: the
//     constants and the contrasts are the permutation representation's
//     two irreducible parts), and the variance of row v is
//     (Σv)²/n · V(1/√n) plus (||v||² - (Σv)²/n) · V(u) for any unit
//     contrast u. Rows with equal
//     (Σv)², ||v||² share their variance; beyond two such classes the two
//     basis vectors are evaluated instead.
//   - Along a chain of nested partitions, with the query's partition
//     nested in it and every measurement factor a level or a residual,
//     the permutations preserving every level (the chain's tree
//     automorphisms) fix everything: rows are classed by the orbit of
//     their node (same parent orbit, isomorphic subtree).
//   - Otherwise each row is its own class.
func (pl *Plan) rowClasses(f query.Factor, d int) ([][]float64, [][]weighted) {
	n := pl.shape[d]
	R := f.Rows()
	rows := make([][]weighted, R)
	exch, sym := true, true
	for _, m := range pl.meas {
		switch m.term[d].Kind {
		case query.Identity, query.Total, query.Residual:
		case query.RollUp:
			exch = false
		default:
			exch, sym = false, false
		}
	}
	for _, it := range pl.inv {
		if k := it.term[d].Kind; k != query.Identity && k != query.Total {
			exch = false
		}
	}
	if exch && n > 1 {
		type key [2]float64
		id := map[key]int{}
		var vecs [][]float64
		sc := make([][2]float64, R)
		for r := range R {
			v := rowVec(f, r)
			var s, ss float64
			for _, x := range v {
				s += x
				ss += x * x
			}
			sc[r] = [2]float64{s * s / float64(n), max(ss-s*s/float64(n), 0)}
			k := key{roundSig(sc[r][0]), roundSig(sc[r][1])}
			c, ok := id[k]
			if !ok {
				c = len(vecs)
				id[k] = c
				vecs = append(vecs, v)
			}
			rows[r] = []weighted{{c, 1}}
		}
		if len(vecs) <= 2 {
			return vecs, rows
		}
		u0 := make([]float64, n)
		for i := range u0 {
			u0[i] = 1 / math.Sqrt(float64(n))
		}
		u1 := make([]float64, n)
		u1[0], u1[1] = 1/math.Sqrt2, -1/math.Sqrt2
		for r := range R {
			rows[r] = rows[r][:0]
			if sc[r][0] > 0 {
				rows[r] = append(rows[r], weighted{0, sc[r][0]})
			}
			if sc[r][1] > 0 {
				rows[r] = append(rows[r], weighted{1, sc[r][1]})
			}
		}
		return [][]float64{u0, u1}, rows
	}
	ch := pl.axes[d].chain
	fp, isPart := partOf(f)
	if sym && ch != nil && isPart {
		parts := make([]partition, 0, len(ch.lv)+1)
		for _, lv := range ch.lv {
			parts = append(parts, lv.part)
		}
		parts = append(parts, fp)
		if full, _, ok := newChain(n, parts); ok {
			orb := orbits(full)
			l := full.levelOf(fp)
			id := map[int]int{}
			var vecs [][]float64
			for x, g := range fp.of {
				if rows[g] != nil {
					continue
				}
				o := orb[l][full.lv[l].part.of[x]]
				c, ok := id[o]
				if !ok {
					c = len(vecs)
					id[o] = c
					vecs = append(vecs, rowVec(f, int(g)))
				}
				rows[g] = []weighted{{c, 1}}
			}
			return vecs, rows
		}
	}
	vecs := make([][]float64, R)
	for r := range R {
		vecs[r] = rowVec(f, r)
		rows[r] = []weighted{{r, 1}}
	}
	return vecs, rows
}

// orbits returns, per level and node, the orbit of the node under the
// automorphisms of the chain's tree: nodes are equivalent when their
// parents are and their subtrees are isomorphic (then some automorphism
// maps one parent to the other, and one more swaps the two subtrees).
func orbits(ch *chain) [][]int {
	L := ch.top()
	shape := make([][]int, L+1)
	shape[0] = make([]int, ch.lv[0].part.groups)
	for l := 1; l <= L; l++ {
		ids := map[string]int{}
		shape[l] = make([]int, ch.lv[l].part.groups)
		var kids []int
		for h := range shape[l] {
			kids = kids[:0]
			for _, c := range ch.children(l, h) {
				kids = append(kids, shape[l-1][c])
			}
			slices.Sort(kids)
			var b strings.Builder
			for _, k := range kids {
				b.WriteString(strconv.Itoa(k))
				b.WriteByte(',')
			}
			k, ok := ids[b.String()]
			if !ok {
				k = len(ids)
				ids[b.String()] = k
			}
			shape[l][h] = k
		}
	}
	orb := make([][]int, L+1)
	orb[L] = []int{0}
	for l := L - 1; l >= 0; l-- {
		ids := map[[2]int]int{}
		orb[l] = make([]int, ch.lv[l].part.groups)
		for g, p := range ch.lv[l].parent {
			k := [2]int{orb[l+1][p], shape[l][g]}
			o, ok := ids[k]
			if !ok {
				o = len(ids)
				ids[k] = o
			}
			orb[l][g] = o
		}
	}
	return orb
}

// roundSig rounds x to 12 significant digits, so that equal values
// computed along different paths compare equal.
func roundSig(x float64) float64 {
	if x == 0 {
		return 0
	}
	e := math.Floor(math.Log10(math.Abs(x)))
	s := math.Pow(10, 11-e)
	return math.Round(x*s) / s
}

// combo is a row's share of one evaluated tuple.
type combo struct {
	tuple int
	w     float64
}

// rowSplit is how Variances evaluates a query: the tuples of per-dimension
// vectors to solve for, and each row as a combination of them.
type rowSplit struct {
	vecs   [][][]float64 // per dimension, the vectors
	tuples [][]int       // per tuple, a vector index per dimension
	expand [][]combo     // per row
}

func (pl *Plan) classes(q int) (*rowSplit, error) {
	if q < 0 || q >= len(pl.queries) {
		return nil, fmt.Errorf("gls: query %d out of range (%d queries)", q, len(pl.queries))
	}
	t := pl.queries[q]
	D := len(t)
	c := &rowSplit{vecs: make([][][]float64, D)}
	rows := make([][][]weighted, D)
	for d, f := range t {
		c.vecs[d], rows[d] = pl.rowClasses(f, d)
	}
	R := t.Rows()
	rshape := rowsShape(t)
	tupleID := map[string]int{}
	c.expand = make([][]combo, R)
	key := make([]int, D)
	var rec func(d int, idx []int, w float64, out *[]combo)
	rec = func(d int, idx []int, w float64, out *[]combo) {
		if d == D {
			var b strings.Builder
			for _, k := range key {
				b.WriteString(strconv.Itoa(k))
				b.WriteByte(',')
			}
			id, ok := tupleID[b.String()]
			if !ok {
				id = len(c.tuples)
				tupleID[b.String()] = id
				c.tuples = append(c.tuples, slices.Clone(key))
			}
			*out = append(*out, combo{id, w})
			return
		}
		for _, x := range rows[d][idx[d]] {
			key[d] = x.id
			rec(d+1, idx, w*x.w, out)
		}
	}
	for r := range R {
		rec(0, unflat(r, rshape), 1, &c.expand[r])
	}
	return c, nil
}

// VarianceSolves returns the number of solves Variances(q) takes, each
// costing about as much as an estimate: the cost, stated before paying
// it.
func (pl *Plan) VarianceSolves(q int) (int, error) {
	c, err := pl.classes(q)
	if err != nil {
		return 0, err
	}
	return len(c.tuples), nil
}

// Variances returns the error variance of every row of query q. Rows are
// split into classes of equal variance by the symmetries of the
// measurements and invariants (Plan.rowClasses); each class costs one
// solve (as much as an estimate), run on Options.Workers goroutines, and
// every row is then a sum of at most 2^D products of class variances.
func (pl *Plan) Variances(ctx context.Context, q int) (*Variances, error) {
	c, err := pl.classes(q)
	if err != nil {
		return nil, err
	}
	tuples, expand, vecs, D := c.tuples, c.expand, c.vecs, len(c.vecs)
	vals := make([]float64, len(tuples))
	certs := make([]Certificate, len(tuples))
	errs := make([]error, len(tuples))
	workers := pl.opt.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(tuples))
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := pl.newWork()
			vs := make([][]float64, D)
			for i := range next {
				for d, k := range tuples[i] {
					vs[d] = vecs[d][k]
				}
				_, v, cert, err := pl.solveLaw(ctx, kron(1, vs), w)
				vals[i], certs[i], errs[i] = v, cert, err
			}
		}()
	}
	for i := range tuples {
		next <- i
	}
	close(next)
	wg.Wait()
	out := &Variances{Values: make([]float64, len(expand)), Solves: len(tuples), Certificate: Certificate{Tolerance: pl.opt.Tolerance}}
	for i, err := range errs {
		if err != nil {
			return nil, err
		}
		out.Certificate.Iterations = max(out.Certificate.Iterations, certs[i].Iterations)
		out.Certificate.Residual = max(out.Certificate.Residual, certs[i].Residual)
	}
	for r, cs := range expand {
		var v float64
		for _, c := range cs {
			v += c.w * vals[c.tuple]
		}
		out.Values[r] = v
	}
	return out, nil
}
