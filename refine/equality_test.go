package refine

import (
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/knowdp/knowdp/noise"
)

// randomEqualities draws m constraints over n answers, each on a random
// subset of `width` answers (all n when width >= n).
func randomEqualities(r *noise.Rand, n, m, width int) []Equality {
	eqs := make([]Equality, m)
	for k := range eqs {
		perm := make([]int, n)
		for i := range perm {
			perm[i] = i
		}
		for i := n - 1; i > 0; i-- {
			j := int(r.Uint64N(uint64(i + 1)))
			perm[i], perm[j] = perm[j], perm[i]
		}
		w := min(width, n)
		eqs[k] = Equality{Index: perm[:w], Coef: randVec(r, w, -2, 2), Value: unif(r, -10, 10)}
	}
	return eqs
}

func TestLeastSquaresMatchesDenseSolvers(t *testing.T) {
	r := noise.NewSeeded(1)
	for _, tc := range []struct {
		name     string
		n, m, w  int
		wantKind string
	}{
		{"one dense constraint", 9, 1, 9, "plane"},
		{"dense", 12, 5, 12, "qr"},
		{"square", 6, 6, 6, "qr"},
		{"sparse overlapping", 40, 8, 6, ""},
		{"sparse disjoint-ish", 200, 10, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 20 {
				eqs := randomEqualities(r, tc.n, tc.m, tc.w)
				e, err := NewEqualities(tc.n, eqs)
				if err != nil {
					t.Fatal(err)
				}
				if tc.wantKind != "" && kindOf(e.comps[0]) != tc.wantKind {
					t.Fatalf("component solved by %s, want %s", kindOf(e.comps[0]), tc.wantKind)
				}
				y := randVec(r, tc.n, -50, 50)
				got := make([]float64, tc.n)
				if err := e.Refine(got, y); err != nil {
					t.Fatal(err)
				}
				want := denseLS(t, y, eqs)
				if d := maxAbsDiff(got, want); d > 1e-9 {
					t.Fatalf("QR refinement differs from the dense KKT solve by %g", d)
				}
				// Theorem 3's formula with an explicit inverse, as printed.
				b := e.Matrix()
				var btb, inv, p mat.Dense
				btb.Mul(b.T(), b)
				if err := inv.Inverse(&btb); err != nil {
					t.Fatal(err)
				}
				p.Product(b, &inv, b.T())
				var px, bc mat.VecDense
				px.MulVec(&p, mat.NewVecDense(tc.n, y))
				var invc mat.VecDense
				invc.MulVec(&inv, mat.NewVecDense(tc.m, e.Values()))
				bc.MulVec(b, &invc)
				for i := range y {
					if w := y[i] - px.AtVec(i) + bc.AtVec(i); math.Abs(w-got[i]) > 1e-8 {
						t.Fatalf("answer %d: %v, Theorem 3's formula gives %v", i, got[i], w)
					}
				}
				// In place gives the same.
				if err := e.Refine(y, y); err != nil || maxAbsDiff(y, got) != 0 {
					t.Fatalf("in-place refinement differs (%v)", err)
				}
			}
		})
	}
}

func kindOf(c component) string {
	switch {
	case c.coef != nil:
		return "plane"
	case c.tree != nil:
		return "tree"
	default:
		return "qr"
	}
}

func TestEqualitiesFastPaths(t *testing.T) {
	e, err := NewEqualities(7, gradeEqualities(false))
	if err != nil {
		t.Fatal(err)
	}
	if len(e.comps) != 1 || kindOf(e.comps[0]) != "tree" {
		t.Fatalf("grades definitional constraints: %d components, first %s; want one tree", len(e.comps), kindOf(e.comps[0]))
	}
	e, err = NewEqualities(7, gradeEqualities(true))
	if err != nil {
		t.Fatal(err)
	}
	if kindOf(e.comps[0]) != "qr" {
		t.Fatalf("with mu_A + mu_B = 80: %s, want qr", kindOf(e.comps[0]))
	}
	// Two disjoint sums of parts and an untouched answer.
	parts := []Equality{
		{Index: []int{0, 1, 2}, Coef: []float64{1, 1, -1}},
		{Index: []int{3, 4}, Coef: []float64{1, 1}, Value: 10, Public: true},
	}
	e, err = NewEqualities(6, parts)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.comps) != 2 || kindOf(e.comps[0]) != "plane" || kindOf(e.comps[1]) != "plane" {
		t.Fatalf("sums of parts: want two matrix-free components")
	}
	y := []float64{1, 2, 4, 3, 3, 9}
	got := make([]float64, 6)
	if err := e.Refine(got, y); err != nil {
		t.Fatal(err)
	}
	// 1+2-4 = -1 spread as -1/3 * (1, 1, -1); 3+3-10 = -4 spread as -2 each.
	want := []float64{1 + 1.0/3, 2 + 1.0/3, 4 - 1.0/3, 5, 5, 9}
	if d := maxAbsDiff(got, want); d > 1e-12 {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestTheorem3UnbiasedWithPredictedVariance(t *testing.T) {
	e, err := NewEqualities(7, gradeEqualities(true))
	if err != nil {
		t.Fatal(err)
	}
	const sigma, runs = 3.0, 40_000
	lap, err := noise.NewLaplaceScale(sigma, 1)
	if err != nil {
		t.Fatal(err)
	}
	m := projector(e)
	r := noise.NewSeeded(7)
	var sum, sumSq, sum4 [7]float64
	x := make([]float64, 7)
	for range runs {
		copy(x, gradeTruth)
		if err := lap.AddTo(r, x); err != nil {
			t.Fatal(err)
		}
		if err := e.Refine(x, x); err != nil {
			t.Fatal(err)
		}
		for i, v := range x {
			d := v - gradeTruth[i]
			sum[i] += d
			sumSq[i] += d * d
			sum4[i] += d * d * d * d
		}
	}
	for i := range 7 {
		want := lap.Variance() * m.At(i, i)
		mean, v := sum[i]/runs, sumSq[i]/runs
		if se := math.Sqrt(want / runs); math.Abs(mean) > 5*se {
			t.Errorf("%s: mean error %v, more than 5 standard errors (%v): biased", gradeNames[i], mean, se)
		}
		if se := math.Sqrt((sum4[i]/runs - v*v) / runs); math.Abs(v-want) > 5*se {
			t.Errorf("%s: variance %v, want 2 sigma^2 M_ii = %v (5 SE = %v)", gradeNames[i], v, want, 5*se)
		}
	}
}

// projector returns M = I − B(BᵀB)⁻¹Bᵀ.
func projector(e *Equalities) *mat.Dense {
	b := e.Matrix()
	var btb, inv, p mat.Dense
	btb.Mul(b.T(), b)
	_ = inv.Inverse(&btb)
	p.Product(b, &inv, b.T())
	n, _ := b.Dims()
	p.Scale(-1, &p)
	for i := range n {
		p.Set(i, i, p.At(i, i)+1)
	}
	return &p
}

func TestTheorem3MinimumVariance(t *testing.T) {
	r := noise.NewSeeded(3)
	for trial := range 200 {
		n, m := 2+int(r.Uint64N(7)), 1
		m += int(r.Uint64N(uint64(n - 1)))
		eqs := randomEqualities(r, n, m, n)
		e, err := NewEqualities(n, eqs)
		if err != nil {
			t.Fatal(err)
		}
		mm := projector(e)
		// Every linear unbiased refinement has A = I − D Bᵀ (and h = 0);
		// draw D at random.
		d := mat.NewDense(n, m, randVec(r, n*m, -1, 1))
		var a mat.Dense
		a.Mul(d, e.Matrix().T())
		a.Scale(-1, &a)
		for i := range n {
			a.Set(i, i, a.At(i, i)+1)
		}
		lin, err := NewLinear(&a, d, nil, e)
		if err != nil {
			t.Fatal(err)
		}
		if !lin.Unbiased() {
			t.Fatal("A = I − D Bᵀ should be unbiased")
		}
		var aat mat.Dense
		aat.Mul(&a, a.T())
		for i := range n {
			if aat.At(i, i) < mm.At(i, i)-1e-9 {
				t.Fatalf("trial %d: answer %d has variance factor %v below least squares' %v", trial, i, aat.At(i, i), mm.At(i, i))
			}
		}
	}
}

func TestEqualitiesRejectBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		eqs  []Equality
		want string
	}{
		{"no answers", 0, []Equality{{Index: []int{0}, Coef: []float64{1}}}, "must be positive"},
		{"no constraints", 3, nil, "no equality"},
		{"index out of range", 3, []Equality{{Label: "s", Index: []int{0, 3}, Coef: []float64{1, 1}}}, `"s": answer index 3 is outside 0..2`},
		{"negative index", 3, []Equality{{Index: []int{-1}, Coef: []float64{1}}}, "#0: answer index -1"},
		{"repeated answer", 3, []Equality{{Index: []int{1, 1}, Coef: []float64{1, 2}}}, "names answer 1 twice"},
		{"NaN coefficient", 3, []Equality{{Index: []int{0, 1}, Coef: []float64{1, math.NaN()}}}, "coefficient of answer 1 is NaN"},
		{"infinite value", 3, []Equality{{Index: []int{0}, Coef: []float64{1}, Value: math.Inf(1)}}, "value is +Inf"},
		{"length mismatch", 3, []Equality{{Index: []int{0, 1}, Coef: []float64{1}}}, "2 indices and 1 coefficients"},
		{"all zero", 3, []Equality{{Index: []int{0, 1}, Coef: []float64{0, 0}}}, "no nonzero coefficient"},
		{"redundant", 3, []Equality{
			{Label: "a", Index: []int{0, 1}, Coef: []float64{1, 1}, Value: 2},
			{Label: "b", Index: []int{1, 2}, Coef: []float64{1, 1}, Value: 3},
			{Label: "c", Index: []int{0, 1, 2}, Coef: []float64{2, 4, 2}, Value: 10},
		}, `"c" is redundant: its left-hand side is 2 × "a" + 2 × "b"`},
		{"inconsistent", 3, []Equality{
			{Label: "a", Index: []int{0, 1}, Coef: []float64{1, 1}, Value: 2},
			{Label: "b", Index: []int{0, 1}, Coef: []float64{-3, -3}, Value: 5},
		}, `inconsistent: the left-hand side of "b" is -3 × "a", which implies value -6, but it says 5`},
		{"more constraints than answers", 2, []Equality{
			{Index: []int{0, 1}, Coef: []float64{1, 1}},
			{Index: []int{0, 1}, Coef: []float64{1, -1}},
			{Index: []int{0, 1}, Coef: []float64{1, 2}, Value: 1},
		}, "#2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewEqualities(tc.n, tc.eqs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestRefineRejectsBadVectors(t *testing.T) {
	e, err := NewEqualities(3, []Equality{{Index: []int{0, 1, 2}, Coef: []float64{1, 1, 1}, Value: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		dst, x []float64
		want   string
	}{
		{"short x", make([]float64, 3), []float64{1, 2}, "2 noisy answers, want 3"},
		{"short dst", make([]float64, 2), []float64{1, 2, 3}, "room for 2 answers"},
		{"NaN", make([]float64, 3), []float64{1, math.NaN(), 3}, "noisy answer 1 is NaN"},
		{"Inf", make([]float64, 3), []float64{1, 2, math.Inf(-1)}, "noisy answer 2 is -Inf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := e.Refine(tc.dst, tc.x); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestLeastSquaresIsStable: with nearly parallel constraints (condition
// number about 1e7), forming BᵀB would square it to 1e14 and keep about
// two digits; the Householder QR keeps the refinement accurate to about
// cond(B) × 1e-16. The exact
// answer is known by construction: y = x* + B w with Bᵀx* = c projects to
// x*.
func TestLeastSquaresIsStable(t *testing.T) {
	r := noise.NewSeeded(41)
	const n = 50
	b1 := randVec(r, n, 1, 2)
	b2 := append([]float64(nil), b1...)
	b2[7] += 1e-6
	b3 := randVec(r, n, -1, 1)
	xstar := randVec(r, n, -10, 10)
	var eqs []Equality
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	for _, b := range [][]float64{b1, b2, b3} {
		eqs = append(eqs, Equality{Index: all, Coef: b, Value: dot(b, xstar)})
	}
	e, err := NewEqualities(n, eqs)
	if err != nil {
		t.Fatal(err)
	}
	y := append([]float64(nil), xstar...)
	for k, b := range [][]float64{b1, b2, b3} {
		axpy(float64(k+1)*3, b, y)
	}
	got := make([]float64, n)
	if err := e.Refine(got, y); err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(got, xstar); d > 1e-7 {
		t.Errorf("QR refinement is off by %g with cond(B) ≈ 1e7", d)
	}
	// For comparison, Theorem 3's formula with (BᵀB)⁻¹.
	b := e.Matrix()
	var btb, inv mat.Dense
	btb.Mul(b.T(), b)
	if err := inv.Inverse(&btb); err == nil {
		var btx, lam, corr mat.VecDense
		btx.MulVec(b.T(), mat.NewVecDense(n, y))
		btx.SubVec(&btx, mat.NewVecDense(3, e.Values()))
		lam.MulVec(&inv, &btx)
		corr.MulVec(b, &lam)
		naive := make([]float64, n)
		for i := range naive {
			naive[i] = y[i] - corr.AtVec(i)
		}
		t.Logf("error with QR %.2g, with (BᵀB)⁻¹ %.2g", maxAbsDiff(got, xstar), maxAbsDiff(naive, xstar))
	}
}
