package hier

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// randomHierarchy returns level sizes and parent maps for a random
// hierarchy with the given level sizes (every group non-empty, unequal
// group sizes).
func randomHierarchy(rng *rand.Rand, sizes []int) [][]int32 {
	parents := make([][]int32, len(sizes)-1)
	for k := range parents {
		n, np := sizes[k], sizes[k+1]
		par := make([]int32, n)
		perm := rng.Perm(n)
		for i, x := range perm {
			if i < np {
				par[x] = int32(i)
			} else {
				par[x] = int32(rng.IntN(np))
			}
		}
		parents[k] = par
	}
	return parents
}

// dense is the dense form of a problem: unknowns are the base cells
// (leaf, every flat dimension), row-major with the leaf first.
type dense struct {
	p     *Problem
	nx    int
	fcell int // cells of all flat dimensions
}

func newDense(p *Problem) *dense {
	fc := 1
	for _, n := range p.FlatSizes {
		fc *= n
	}
	return &dense{p: p, nx: p.Hierarchy.Nodes(0) * fc, fcell: fc}
}

// marginal returns the matrix of the view's marginal operator.
func (d *dense) marginal(v View) *mat.Dense {
	p := d.p
	h := p.Hierarchy
	all := Flat(1<<len(p.FlatSizes) - 1)
	cm := cellMap(p.FlatSizes, all.dims(), v.Flat.dims())
	cells := p.cells(v.Flat)
	m := mat.NewDense(h.Nodes(v.Level)*cells, d.nx, nil)
	for l := range h.Nodes(0) {
		a := h.Ancestor(0, l, v.Level)
		for f := range d.fcell {
			m.Set(a*cells+int(cm[f]), l*d.fcell+f, 1)
		}
	}
	return m
}

// pinv returns the Moore-Penrose pseudo-inverse of m, treating singular
// values below 1e-10 times max(sv[0], floor) as zero.
func pinv(m *mat.Dense, floor float64) *mat.Dense {
	r, c := m.Dims()
	var svd mat.SVD
	if !svd.Factorize(m, mat.SVDThin) {
		panic("svd")
	}
	var u, v mat.Dense
	svd.UTo(&u)
	svd.VTo(&v)
	sv := svd.Values(nil)
	out := mat.NewDense(c, r, nil)
	if len(sv) == 0 || sv[0] == 0 {
		return out
	}
	tol := 1e-10 * max(sv[0], floor)
	for k, s := range sv {
		if s <= tol {
			continue
		}
		for i := range c {
			vi := v.At(i, k) / s
			for j := range r {
				out.Set(i, j, out.At(i, j)+vi*u.At(j, k))
			}
		}
	}
	return out
}

// nullSpace returns an orthonormal basis of the null space of m (columns).
func nullSpace(m *mat.Dense) *mat.Dense {
	_, c := m.Dims()
	var svd mat.SVD
	if !svd.Factorize(m, mat.SVDFull) {
		panic("svd")
	}
	var v mat.Dense
	svd.VTo(&v)
	sv := svd.Values(nil)
	rank := 0
	for _, s := range sv {
		if s > 1e-10*sv[0] {
			rank++
		}
	}
	if rank == c {
		return nil
	}
	return mat.DenseCopyOf(v.Slice(0, c, rank, c))
}

// stack returns the rows of the views' marginals, with the measurement of
// each row.
func (d *dense) stack(js []int) (*mat.Dense, []float64, []int) {
	var rows [][]float64
	var vals []float64
	var which []int
	for _, j := range js {
		m := d.p.Measurements[j]
		mm := d.marginal(View{m.Flat, m.Level})
		r, _ := mm.Dims()
		for i := range r {
			rows = append(rows, mat.Row(nil, i, mm))
			vals = append(vals, m.Values[i])
			which = append(which, j)
		}
	}
	if len(rows) == 0 {
		return nil, nil, nil
	}
	out := mat.NewDense(len(rows), d.nx, nil)
	for i, r := range rows {
		out.SetRow(i, r)
	}
	return out, vals, which
}

// denseGLS is the dense estimate: x̂ = x0 + G (z - A x0) over the noisy
// rows, with G = N pinv(W A N) W, N the null space of the exact rows,
// x0 = pinv(E) e, W = diag(1/sqrt(v)).
type denseGLS struct {
	xhat   *mat.VecDense
	g      *mat.Dense // nx × noisy rows: noise coefficients of x̂
	which  []int      // measurement of each noisy row
	row    []int      // row index within its measurement
	nullAE *mat.Dense // null space of all rows (estimability)
}

func (d *dense) solve() *denseGLS {
	p := d.p
	var ex, no []int
	for j, m := range p.Measurements {
		if m.Variance == 0 {
			ex = append(ex, j)
		} else {
			no = append(no, j)
		}
	}
	out := &denseGLS{}
	x0 := mat.NewVecDense(d.nx, nil)
	var N *mat.Dense
	E, e, _ := d.stack(ex)
	if E != nil {
		x0.MulVec(pinv(E, 1), mat.NewVecDense(len(e), e))
		N = nullSpace(E)
	} else {
		N = mat.NewDense(d.nx, d.nx, nil)
		for i := range d.nx {
			N.Set(i, i, 1)
		}
	}
	A, z, which := d.stack(no)
	out.which = which
	xhat := mat.VecDenseCopyOf(x0)
	if A != nil && N != nil {
		nr, _ := A.Dims()
		_, nn := N.Dims()
		W := make([]float64, nr)
		for i, j := range which {
			W[i] = 1 / math.Sqrt(p.Measurements[j].Variance)
		}
		out.row = make([]int, nr)
		for i := range nr {
			if i > 0 && which[i] == which[i-1] {
				out.row[i] = out.row[i-1] + 1
			}
		}
		var AN mat.Dense
		AN.Mul(A, N)
		B := mat.NewDense(nr, nn, nil)
		for i := range nr {
			for k := range nn {
				B.Set(i, k, AN.At(i, k)*W[i])
			}
		}
		var G mat.Dense
		G.Mul(N, pinv(B, 1))
		for i := range d.nx {
			for k := range nr {
				G.Set(i, k, G.At(i, k)*W[k])
			}
		}
		out.g = &G
		var ax mat.VecDense
		ax.MulVec(A, x0)
		res := mat.NewVecDense(nr, nil)
		for i := range nr {
			res.SetVec(i, z[i]-ax.AtVec(i))
		}
		var dx mat.VecDense
		dx.MulVec(&G, res)
		xhat.AddVec(xhat, &dx)
	}
	out.xhat = xhat
	all := append(append([]int(nil), ex...), no...)
	S, _, _ := d.stack(all)
	if S != nil {
		out.nullAE = nullSpace(S)
	} else {
		out.nullAE = mat.NewDense(d.nx, d.nx, nil)
		for i := range d.nx {
			out.nullAE.Set(i, i, 1)
		}
	}
	return out
}

// estimable reports whether every row of m is in the row space of the
// measurements.
func (g *denseGLS) estimable(m *mat.Dense) bool {
	if g.nullAE == nil {
		return true
	}
	var prod mat.Dense
	prod.Mul(m, g.nullAE)
	r, c := prod.Dims()
	for i := range r {
		for k := range c {
			if math.Abs(prod.At(i, k)) > 1e-8 {
				return false
			}
		}
	}
	return true
}

func TestDenseHelpers(t *testing.T) {
	// pinv of a rank-1 matrix, and null space dimensions.
	m := mat.NewDense(2, 2, []float64{1, 1, 1, 1})
	pi := pinv(m, 0)
	for i := range 2 {
		for j := range 2 {
			if math.Abs(pi.At(i, j)-0.25) > 1e-12 {
				t.Fatalf("pinv %v", mat.Formatted(pi))
			}
		}
	}
	if n := nullSpace(m); n == nil {
		t.Fatal("no null space")
	} else if _, c := n.Dims(); c != 1 {
		t.Fatalf("null space of dimension %d", c)
	}
}
