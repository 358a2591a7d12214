package refine

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
)

// unif returns a uniform float in [lo, hi) (test randomness, not noise).
func unif(r *noise.Rand, lo, hi float64) float64 {
	return lo + (hi-lo)*float64(r.Uint64()>>11)*0x1p-53
}

func randVec(r *noise.Rand, n int, lo, hi float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = unif(r, lo, hi)
	}
	return v
}

func maxAbsDiff(a, b []float64) float64 {
	var d float64
	for i := range a {
		d = max(d, math.Abs(a[i]-b[i]))
	}
	return d
}

// kkt solves min ‖x − y‖² subject to E x = f and G_S x = h_S for the rows S
// of G, by the dense KKT system [I Rᵀ; R 0][x; λ] = [y; r] with R = [E; G_S].
// It reports false when the system is singular (dependent rows).
func kkt(y []float64, e *mat.Dense, f []float64, g *mat.Dense, h []float64, s []int) (x, lambda []float64, ok bool) {
	n := len(y)
	var rows [][]float64
	var rhs []float64
	if e != nil {
		me, _ := e.Dims()
		for i := range me {
			rows = append(rows, mat.Row(nil, i, e))
			rhs = append(rhs, f[i])
		}
	}
	for _, i := range s {
		rows = append(rows, mat.Row(nil, i, g))
		rhs = append(rhs, h[i])
	}
	k := len(rows)
	a := mat.NewDense(n+k, n+k, nil)
	b := mat.NewVecDense(n+k, nil)
	for i := range n {
		a.Set(i, i, 1)
		b.SetVec(i, y[i])
	}
	for r, row := range rows {
		for j, v := range row {
			a.Set(n+r, j, v)
			a.Set(j, n+r, v)
		}
		b.SetVec(n+r, rhs[r])
	}
	var svd mat.SVD
	svd.Factorize(a, mat.SVDNone)
	sv := svd.Values(nil)
	if sv[len(sv)-1] < 1e-10*sv[0] {
		return nil, nil, false
	}
	var sol mat.VecDense
	if err := sol.SolveVec(a, b); err != nil {
		return nil, nil, false
	}
	d := sol.RawVector().Data
	return d[:n], d[n:], true
}

// bruteProject is the generic solver of the tests: the projection of y
// onto {x : E x = f, G x <= h}, found by trying every set of active
// inequalities and keeping the one that satisfies the KKT conditions
// (feasible, multipliers of the active inequalities non-negative). The
// projection is unique, so the first KKT point is it. len(h) <= 14.
func bruteProject(t *testing.T, y []float64, e *mat.Dense, f []float64, g *mat.Dense, h []float64) []float64 {
	t.Helper()
	me := 0
	if e != nil {
		me, _ = e.Dims()
	}
	mi := len(h)
	for mask := 0; mask < 1<<mi; mask++ {
		var s []int
		for i := range mi {
			if mask&(1<<i) != 0 {
				s = append(s, i)
			}
		}
		x, lambda, ok := kkt(y, e, f, g, h, s)
		if !ok {
			continue
		}
		feasible := true
		for i := range mi {
			if mat.Dot(mat.NewVecDense(len(x), mat.Row(nil, i, g)), mat.NewVecDense(len(x), x)) > h[i]+1e-9 {
				feasible = false
				break
			}
		}
		for _, l := range lambda[me:] {
			if l < -1e-9 {
				feasible = false
			}
		}
		if feasible {
			return x
		}
	}
	t.Fatal("brute-force KKT found no solution (infeasible instance?)")
	return nil
}

// denseLS is the least-squares refinement under Bᵀx = c by the dense KKT
// system (no inequalities).
func denseLS(t *testing.T, y []float64, eqs []Equality) []float64 {
	t.Helper()
	n := len(y)
	e := mat.NewDense(len(eqs), n, nil)
	f := make([]float64, len(eqs))
	for k, eq := range eqs {
		for j, i := range eq.Index {
			e.Set(k, i, eq.Coef[j])
		}
		f[k] = eq.Value
	}
	x, _, ok := kkt(y, e, f, nil, nil, nil)
	if !ok {
		t.Fatal("dense KKT system is singular")
	}
	return x
}

// grades is the paper's running example: answers A, B, C, D, F, passing p
// and total t, with two constraints that hold by definition and one that
// is specific to the data set.
var gradeNames = []string{"A", "B", "C", "D", "F", "p", "t"}

func gradeEqualities(withAB bool) []Equality {
	eqs := []Equality{
		{Label: "passing", Index: []int{0, 1, 2, 3, 5}, Coef: []float64{1, 1, 1, 1, -1}, Public: true},
		{Label: "total", Index: []int{4, 5, 6}, Coef: []float64{1, 1, -1}, Public: true},
	}
	if withAB {
		eqs = append(eqs, Equality{Label: "AB", Index: []int{0, 1}, Coef: []float64{1, 1}, Value: 80})
	}
	return eqs
}

// gradeWorkload is the grades query matrix over the universe of grades:
// a student's record counts in its grade, in p if it passes and in t.
func gradeWorkload() Workload {
	w := mat.NewDense(7, 5, nil)
	for g := range 5 {
		w.Set(g, g, 1)
		if g < 4 {
			w.Set(5, g, 1)
		}
		w.Set(6, g, 1)
	}
	return Workload{Queries: w, Universe: []string{"A", "B", "C", "D", "F"}}
}

// gradeTruth is a database consistent with mu_A + mu_B = 80.
var gradeTruth = []float64{30, 50, 40, 20, 10, 140, 150}

// mustEps returns eps as a validated privacy.Epsilon.
func mustEps(t testing.TB, eps float64) privacy.Epsilon {
	t.Helper()
	e, err := privacy.NewEpsilon(eps)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
