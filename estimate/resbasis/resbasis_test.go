package resbasis

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/knowdp/knowdp/domain"
	"gonum.org/v1/gonum/mat"
)

// cells returns the cells of cuboid c over sizes.
func cells(sizes []int, c domain.Cuboid) int {
	n := 1
	for _, d := range c.Dims() {
		n *= sizes[d]
	}
	return n
}

// marginalMatrix is the dense matrix of the marginal on c: row-major over
// c's dimensions (the lowest dimension slowest), columns the base cells.
func marginalMatrix(sizes []int, c domain.Cuboid) *mat.Dense {
	base := cells(sizes, domain.Base(len(sizes)))
	m := mat.NewDense(cells(sizes, c), base, nil)
	idx := make([]int, len(sizes))
	for col := range base {
		rem := col
		for d := len(sizes) - 1; d >= 0; d-- {
			idx[d] = rem % sizes[d]
			rem /= sizes[d]
		}
		row := 0
		for _, d := range c.Dims() {
			row = row*sizes[d] + idx[d]
		}
		m.Set(row, col, 1)
	}
	return m
}

// centring is ⊗_{d∈c} (I - J/n_d), the projection of a table on c onto its
// c-residual.
func centring(sizes []int, c domain.Cuboid) *mat.Dense {
	out := mat.NewDense(1, 1, []float64{1})
	for _, d := range c.Dims() {
		n := sizes[d]
		k := mat.NewDense(n, n, nil)
		for i := range n {
			for j := range n {
				v := -1 / float64(n)
				if i == j {
					v++
				}
				k.Set(i, j, v)
			}
		}
		var next mat.Dense
		next.Kronecker(out, k)
		out = &next
	}
	return out
}

// denseSolve solves min Σ_j (1/v_j)||A_j y - z_j||² subject to B y = e
// through the pseudo-inverse of its KKT system, and returns the map G from
// A^T W z (and e) to y, with H = A^T W A: the estimate is G (A^T W z; e)
// and its covariance G_11 H G_11^T.
type denseLS struct {
	n    int
	a    []*mat.Dense // each measurement's rows, scaled by 1/v
	meas []Measurement
	h    *mat.Dense // A^T W A
	rhs  *mat.VecDense
	kkt  *mat.Dense
	pinv *mat.Dense
}

func newDenseLS(sizes []int, exact []Marginal, meas []Measurement, noisy [][]float64) *denseLS {
	n := cells(sizes, domain.Base(len(sizes)))
	h := mat.NewDense(n, n, nil)
	atwz := mat.NewVecDense(n, nil)
	var scaled []*mat.Dense
	for k, m := range meas {
		a := marginalMatrix(sizes, m.Cuboid)
		if m.Residual {
			var ca mat.Dense
			ca.Mul(centring(sizes, m.Cuboid), a)
			a = &ca
		}
		aw := mat.DenseCopyOf(a)
		aw.Scale(1/m.Variance, aw)
		scaled = append(scaled, aw)
		var ata mat.Dense
		ata.Mul(a.T(), a)
		ata.Scale(1/m.Variance, &ata)
		h.Add(h, &ata)
		var atz mat.VecDense
		atz.MulVec(a.T(), mat.NewVecDense(len(noisy[k]), noisy[k]))
		atwz.AddScaledVec(atwz, 1/m.Variance, &atz)
	}
	rows := 0
	for _, e := range exact {
		rows += len(e.Counts)
	}
	kkt := mat.NewDense(n+rows, n+rows, nil)
	kkt.Slice(0, n, 0, n).(*mat.Dense).Copy(h)
	rhs := mat.NewVecDense(n+rows, nil)
	for i := range n {
		rhs.SetVec(i, atwz.AtVec(i))
	}
	off := n
	for _, e := range exact {
		b := marginalMatrix(sizes, e.Cuboid)
		r := len(e.Counts)
		kkt.Slice(off, off+r, 0, n).(*mat.Dense).Copy(b)
		kkt.Slice(0, n, off, off+r).(*mat.Dense).Copy(b.T())
		for i, x := range e.Counts {
			rhs.SetVec(off+i, x)
		}
		off += r
	}
	var svd mat.SVD
	if !svd.Factorize(kkt, mat.SVDFull) {
		panic("svd failed")
	}
	s := svd.Values(nil)
	var u, v mat.Dense
	svd.UTo(&u)
	svd.VTo(&v)
	inv := mat.NewDense(len(s), len(s), nil)
	for i, x := range s {
		if x > 1e-9*s[0] {
			inv.Set(i, i, 1/x)
		}
	}
	var p mat.Dense
	p.Mul(&v, inv)
	p.Mul(&p, u.T())
	return &denseLS{n: n, a: scaled, meas: meas, h: h, rhs: rhs, kkt: kkt, pinv: &p}
}

// solution returns the least-squares y.
func (d *denseLS) solution() []float64 {
	var sol mat.VecDense
	sol.MulVec(d.pinv, d.rhs)
	// The system is consistent: check the pseudo-inverse solved it.
	var res mat.VecDense
	res.MulVec(d.kkt, &sol)
	res.SubVec(&res, d.rhs)
	if r := mat.Norm(&res, math.Inf(1)); r > 1e-8*(1+mat.Norm(d.rhs, math.Inf(1))) {
		panic("inconsistent KKT system")
	}
	return sol.RawVector().Data[:d.n]
}

// covariance returns the covariance of the estimate of table c.
func (d *denseLS) covariance(sizes []int, c domain.Cuboid) *mat.Dense {
	g := d.pinv.Slice(0, d.n, 0, d.n)
	var mg, mh, cov mat.Dense
	mg.Mul(marginalMatrix(sizes, c), g)
	mh.Mul(&mg, d.h)
	cov.Mul(&mh, mg.T())
	return &cov
}

// law returns the error of cell 0 of table c as the non-zero coefficients
// of every measurement's noise variables, counted: measurement k ->
// coefficient (to 1e-9) -> how many variables.
func (d *denseLS) law(sizes []int, c domain.Cuboid) map[int]map[float64]float64 {
	g := d.pinv.Slice(0, d.n, 0, d.n)
	var row mat.Dense
	row.Mul(marginalMatrix(sizes, c).Slice(0, 1, 0, d.n), g)
	out := map[int]map[float64]float64{}
	for k, a := range d.a {
		var coef mat.Dense
		coef.Mul(&row, a.T())
		for _, x := range coef.RawRowView(0) {
			if math.Abs(x) > 1e-10 {
				if out[k] == nil {
					out[k] = map[float64]float64{}
				}
				out[k][math.Round(x*1e9)/1e9]++
			}
		}
	}
	return out
}

// coords returns the coordinates, over every dimension, of cell j of a
// table on c (dimensions outside c are 0).
func coords(sizes []int, c domain.Cuboid, j int) []int {
	idx := make([]int, len(sizes))
	dims := c.Dims()
	for i := len(dims) - 1; i >= 0; i-- {
		idx[dims[i]] = j % sizes[dims[i]]
		j /= sizes[dims[i]]
	}
	return idx
}

// cellIndex returns the index, in a table on m ⊆ c, of the cell cell j of
// a table on c falls in.
func cellIndex(sizes []int, c, m domain.Cuboid, j int) int {
	idx := coords(sizes, c, j)
	k := 0
	for _, d := range m.Dims() {
		k = k*sizes[d] + idx[d]
	}
	return k
}

// subMarginal returns the marginal on m ⊆ c of counts x on c.
func subMarginal(sizes []int, c, m domain.Cuboid, x []float64) []float64 {
	out := make([]float64, cells(sizes, m))
	for j, v := range x {
		out[cellIndex(sizes, c, m, j)] += v
	}
	return out
}

// project returns the marginal on c of the base table y.
func project(sizes []int, c domain.Cuboid, y []float64) []float64 {
	var out mat.VecDense
	out.MulVec(marginalMatrix(sizes, c), mat.NewVecDense(len(y), y))
	return out.RawVector().Data
}

// precisions returns every free residual's W_A.
func precisions(b *Basis) map[domain.Cuboid]float64 {
	w := map[domain.Cuboid]float64{}
	for a, r := range b.Res {
		w[a] = r.Precision
	}
	return w
}

type denseCase struct {
	name   string
	sizes  []int
	exact  []domain.Cuboid
	tables []domain.Cuboid
	meas   []Measurement
}

func denseCases() []denseCase {
	return []denseCase{
		{"one marginal", []int{3, 4}, nil, []domain.Cuboid{0b11}, []Measurement{{Cuboid: 0b11, Variance: 2}}},
		{"overlapping marginals", []int{3, 2, 4}, nil, []domain.Cuboid{0b011, 0b110, 0b101, 0b001},
			[]Measurement{{Cuboid: 0b011, Variance: 1.5}, {Cuboid: 0b110, Variance: 0.7}, {Cuboid: 0b101, Variance: 3}}},
		{"invariants", []int{3, 2, 4}, []domain.Cuboid{0b001, 0b100}, []domain.Cuboid{0b011, 0b110, 0b101, 0b100},
			[]Measurement{{Cuboid: 0b011, Variance: 1.5}, {Cuboid: 0b110, Variance: 0.7}, {Cuboid: 0b111, Variance: 9}}},
		{"a trivial dimension", []int{3, 1, 4}, []domain.Cuboid{0b010}, []domain.Cuboid{0b011, 0b110, 0b111},
			[]Measurement{{Cuboid: 0b111, Variance: 2}, {Cuboid: 0b110, Variance: 0.5}}},
		{"residual measurements", []int{3, 2, 4}, []domain.Cuboid{0}, []domain.Cuboid{0b011, 0b101, 0b001},
			[]Measurement{{Cuboid: 0b011, Residual: true, Variance: 1.2}, {Cuboid: 0b001, Residual: true, Variance: 0.4},
				{Cuboid: 0b010, Residual: true, Variance: 2}, {Cuboid: 0b101, Variance: 5}, {Cuboid: 0b100, Residual: true, Variance: 0.9}}},
	}
}

// TestEstimateIsDenseLeastSquares: the estimate and the cell variances
// equal those of the dense constrained least-squares solve (gonum, the
// KKT system's pseudo-inverse) on small schemas.
func TestEstimateIsDenseLeastSquares(t *testing.T) {
	for _, tc := range denseCases() {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			base := make([]float64, cells(tc.sizes, domain.Base(len(tc.sizes))))
			for i := range base {
				base[i] = float64(rng.IntN(20))
			}
			inv := make([]Marginal, len(tc.exact))
			for i, e := range tc.exact {
				inv[i] = Marginal{Cuboid: e, Counts: project(tc.sizes, e, base)}
			}
			noisy := make([][]float64, len(tc.meas))
			for k, m := range tc.meas {
				z := project(tc.sizes, m.Cuboid, base)
				for i := range z {
					z[i] += rng.NormFloat64() * math.Sqrt(m.Variance)
				}
				if m.Residual {
					var cz mat.VecDense
					cz.MulVec(centring(tc.sizes, m.Cuboid), mat.NewVecDense(len(z), z))
					z = cz.RawVector().Data
				}
				noisy[k] = z
			}
			d := newDenseLS(tc.sizes, inv, tc.meas, noisy)
			y := d.solution()

			tables := make([]Table, len(tc.tables))
			for i, c := range tc.tables {
				tables[i] = Table{Cuboid: c, Weight: 1}
			}
			b := New(tc.sizes, tc.exact, tables, tc.meas)
			b.Cover(tc.meas)
			copies := make([][]float64, len(noisy))
			for k := range noisy {
				copies[k] = append([]float64(nil), noisy[k]...)
			}
			got := b.Estimate(tc.tables, inv, copies)
			for i, c := range tc.tables {
				want := project(tc.sizes, c, y)
				if len(got[i]) != len(want) {
					t.Fatalf("table %v: %d cells, want %d", c, len(got[i]), len(want))
				}
				for j := range want {
					if math.Abs(got[i][j]-want[j]) > 1e-8*(1+math.Abs(want[j])) {
						t.Errorf("table %v cell %d: %v, dense %v", c, j, got[i][j], want[j])
					}
				}
				cov := d.covariance(tc.sizes, c)
				v := b.CellVariance(c)
				if b.Determined(c) {
					v = 0
				}
				for j := range want {
					if dv := cov.At(j, j); math.Abs(dv-v) > 1e-8*(1+v) {
						t.Errorf("table %v cell %d: variance %v, dense %v", c, j, v, dv)
					}
				}
				if at := b.CellVarianceAt(c, precisions(b)); math.Abs(at-b.CellVariance(c)) > 1e-12*(1+v) {
					t.Errorf("table %v: variance at the basis's precisions %v, CellVariance %v", c, at, b.CellVariance(c))
				}
				// The terms sum to the same estimate.
				sources := make([]Marginal, 0, len(inv)+len(noisy))
				sources = append(sources, inv...)
				for k, m := range tc.meas {
					sources = append(sources, Marginal{Cuboid: m.Cuboid, Counts: noisy[k]})
				}
				fromTerms := make([]float64, len(want))
				for _, term := range b.Terms(c) {
					src := sources[term.Source]
					if term.Margin&^(c&src.Cuboid) != 0 {
						t.Fatalf("table %v: term margin %v outside the table and source %v", c, term.Margin, src.Cuboid)
					}
					m := subMarginal(tc.sizes, src.Cuboid, term.Margin, src.Counts)
					for j := range fromTerms {
						fromTerms[j] += term.Coef * m[cellIndex(tc.sizes, c, term.Margin, j)]
					}
				}
				for j := range want {
					if math.Abs(fromTerms[j]-got[i][j]) > 1e-8*(1+math.Abs(want[j])) {
						t.Errorf("table %v cell %d: terms give %v, Estimate %v", c, j, fromTerms[j], got[i][j])
					}
				}
				if b.Determined(c) || slices.ContainsFunc(tc.meas, func(m Measurement) bool { return m.Residual }) {
					continue
				}
				got := map[int]map[float64]float64{}
				var kmax float64
				for _, term := range b.CellLaw(c) {
					kmax = max(kmax, math.Abs(term.Coef))
				}
				for _, term := range b.CellLaw(c) {
					if math.Abs(term.Coef) > 1e-12*kmax && term.Count > 0 {
						if got[term.K] == nil {
							got[term.K] = map[float64]float64{}
						}
						got[term.K][math.Round(term.Coef*1e9)/1e9] += term.Count
					}
				}
				if want := d.law(tc.sizes, c); !reflect.DeepEqual(got, want) {
					t.Errorf("table %v: law %v, dense %v", c, got, want)
				}
			}
		})
	}
}

// TestObjectiveIsTotalVariance: with C_k = 1/(v_k |C_k|) and every
// fraction 1, the objective is Σ_C w_C |C| Var ŷ_C, and its gradient
// matches central differences.
func TestObjectiveIsTotalVariance(t *testing.T) {
	tc := denseCases()[2]
	weights := []float64{1, 2.5, 0.3, 4}
	tables := make([]Table, len(tc.tables))
	for i, c := range tc.tables {
		tables[i] = Table{Cuboid: c, Weight: weights[i]}
	}
	b := New(tc.sizes, tc.exact, tables, tc.meas)
	b.Cover(tc.meas)
	c := make([]float64, len(tc.meas))
	for k, m := range tc.meas {
		c[k] = 1 / (m.Variance * float64(cells(tc.sizes, m.Cuboid)))
	}
	var want float64
	for i, tb := range tables {
		if !b.Determined(tb.Cuboid) {
			want += weights[i] * float64(cells(tc.sizes, tb.Cuboid)) * b.CellVariance(tb.Cuboid)
		}
	}
	for _, power := range []float64{1, 2} {
		o := b.NewObjective(c, power)
		x := []float64{1, 1, 1}
		if got := o.Value(x); math.Abs(got-want) > 1e-12*want {
			t.Errorf("power %v: objective %v, total variance %v", power, got, want)
		}
		x = []float64{0.2, 0.5, 0.3}
		g := make([]float64, len(x))
		o.Gradient(x, g)
		const h = 1e-6
		for k := range x {
			up, dn := append([]float64(nil), x...), append([]float64(nil), x...)
			up[k] += h
			dn[k] -= h
			if fd := (o.Value(up) - o.Value(dn)) / (2 * h); math.Abs(fd-g[k]) > 1e-6*math.Abs(fd) {
				t.Errorf("power %v: gradient %d %v, central difference %v", power, k, g[k], fd)
			}
		}
	}
}

// TestClosedForm pins the closed form on two measurements with one
// residual each (weights 1 and 8, coefficients 1): x ∝ (1, 8^(1/3)) =
// (1, 2) for Laplace noise, x ∝ (1, √8) for Gaussian noise.
func TestClosedForm(t *testing.T) {
	for _, tc := range []struct {
		power float64
		want  []float64
	}{
		{2, []float64{1.0 / 3, 2.0 / 3}},
		{1, []float64{1 / (1 + 2*math.Sqrt2), 2 * math.Sqrt2 / (1 + 2*math.Sqrt2)}},
	} {
		o := Objective{A: []float64{1, 8}, Covers: [][]int{{0}, {1}}, C: []float64{1, 1}, Power: tc.power}
		got := o.ClosedForm()
		for k := range got {
			if math.Abs(got[k]-tc.want[k]) > 1e-15 {
				t.Errorf("power %v: %v, want %v", tc.power, got, tc.want)
			}
		}
		// It is the optimum on the simplex: no nearby point does better.
		f := o.Value(got)
		for _, e := range []float64{-1e-3, 1e-3} {
			if v := o.Value([]float64{got[0] + e, got[1] - e}); v < f {
				t.Errorf("power %v: %v beats the closed form's %v", tc.power, v, f)
			}
		}
	}
}

// TestClassify: statuses, sources, covers and weights on a small case,
// computed by hand.
func TestClassify(t *testing.T) {
	sizes := []int{3, 1, 4}
	// Tables {d0,d1} (weight 2) and {d2}; invariant {d0}; measurement of
	// {d0,d1,d2}.
	b := New(sizes, []domain.Cuboid{0b001}, []Table{{Cuboid: 0b011, Weight: 2}, {Cuboid: 0b100, Weight: 1}},
		[]Measurement{{Cuboid: 0b111, Variance: 1}})
	for _, tc := range []struct {
		a      domain.Cuboid
		status Status
		source int
		weight float64
	}{
		{0b000, Fixed, 0, 0},
		{0b001, Fixed, 0, 0},
		{0b100, Free, -1, 3.0 / 4},
		{0b010, Zero, -1, 0},
		{0b101, Zero, -1, 0}, // never a table's: classified when the measurement informs it
	} {
		r := b.Res[tc.a]
		if tc.a == 0b010 {
			if r != nil {
				t.Errorf("residual %b over a trivial dimension is listed", tc.a)
			}
			continue
		}
		if tc.a == 0b101 {
			if r == nil || r.Status != Free || r.Weight != 0 || len(r.Covers) != 1 {
				t.Errorf("residual %b: %+v, want free, weight 0, covered once", tc.a, r)
			}
			continue
		}
		if r == nil || r.Status != tc.status || r.Source != tc.source || math.Abs(r.Weight-tc.weight) > 1e-15 {
			t.Errorf("residual %b: %+v, want status %v source %d weight %v", tc.a, r, tc.status, tc.source, tc.weight)
		}
	}
	if !b.Determined(0b011) || b.Determined(0b100) {
		t.Errorf("determined: {d0,d1} %v (want true), {d2} %v (want false)", b.Determined(0b011), b.Determined(0b100))
	}
}
