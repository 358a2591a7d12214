package refine

import (
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/knowdp/knowdp/noise"
)

func TestLeastSquaresLinearAgreesWithRefine(t *testing.T) {
	r := noise.NewSeeded(21)
	for range 50 {
		n := 2 + int(r.Uint64N(8))
		m := 1 + int(r.Uint64N(uint64(n-1)))
		eqs, err := NewEqualities(n, randomEqualities(r, n, m, n))
		if err != nil {
			t.Fatal(err)
		}
		lin, err := LeastSquares(eqs)
		if err != nil {
			t.Fatal(err)
		}
		if !lin.Constrained() || !lin.Unbiased() {
			t.Fatalf("least squares: constrained %v, unbiased %v; want both", lin.Constrained(), lin.Unbiased())
		}
		if err := lin.CheckTheorem2(); err != nil {
			t.Fatalf("least squares should meet Theorem 2's hypotheses: %v", err)
		}
		y := randVec(r, n, -10, 10)
		a, b := make([]float64, n), make([]float64, n)
		if err := lin.Apply(a, y); err != nil {
			t.Fatal(err)
		}
		if err := eqs.Refine(b, y); err != nil {
			t.Fatal(err)
		}
		if d := maxAbsDiff(a, b); d > 1e-9 {
			t.Fatalf("Apply and Refine differ by %g", d)
		}
	}
}

// appendix returns the appendix's refinement for a given k: the knowledge
// k mu_1 − mu_2 = c, and x̂_1 = (x_1 + x_2 + c)/(k+1), x̂_2 = x_2.
func appendix(t *testing.T, k float64) *Linear {
	t.Helper()
	eqs, err := NewEqualities(2, []Equality{{Label: "k mu1 = mu2", Index: []int{0, 1}, Coef: []float64{k, -1}, Value: k}})
	if err != nil {
		t.Fatal(err)
	}
	a := mat.NewDense(2, 2, []float64{1 / (k + 1), 1 / (k + 1), 0, 1})
	d := mat.NewDense(2, 1, []float64{1 / (k + 1), 0})
	lin, err := NewLinear(a, d, nil, eqs)
	if err != nil {
		t.Fatal(err)
	}
	return lin
}

func TestAppendixRefinementFailsTheorem2Hypotheses(t *testing.T) {
	lin := appendix(t, 3)
	if lin.Constrained() {
		t.Error("the appendix refinement does not satisfy k x̂_1 − x̂_2 = c; Constrained says it does")
	}
	if err := lin.CheckTheorem2(); err == nil || !strings.Contains(err.Error(), "rank(A) = 2") {
		t.Errorf("CheckTheorem2: %v, want a rank(A) = 2 complaint", err)
	}
	// It is unbiased on databases that satisfy the constraint.
	if !lin.Unbiased() {
		t.Error("the appendix refinement is unbiased given k mu_1 − mu_2 = c")
	}
	x := []float64{5, 7}
	got := make([]float64, 2)
	if err := lin.Apply(got, x); err != nil {
		t.Fatal(err)
	}
	if want := []float64{(5 + 7 + 3) / 4.0, 7}; maxAbsDiff(got, want) > 1e-12 {
		t.Errorf("Apply = %v, want %v", got, want)
	}
}

func TestNewLinearRejectsBadInput(t *testing.T) {
	eqs, _ := NewEqualities(2, []Equality{{Index: []int{0, 1}, Coef: []float64{1, 1}}})
	good := mat.NewDense(2, 2, []float64{0.5, -0.5, -0.5, 0.5})
	col := mat.NewDense(2, 1, []float64{0.5, 0.5})
	for _, tc := range []struct {
		name string
		a, d *mat.Dense
		h    []float64
		eqs  *Equalities
		want string
	}{
		{"no equalities", good, col, nil, nil, "needs its equalities"},
		{"A shape", mat.NewDense(2, 3, nil), col, nil, eqs, "A is 2×3, want 2×2"},
		{"D shape", good, mat.NewDense(2, 2, nil), nil, eqs, "D is 2×2, want 2×1"},
		{"h length", good, col, []float64{1}, eqs, "h has 1 entries, want 2"},
		{"NaN", mat.NewDense(2, 2, []float64{0.5, math.NaN(), -0.5, 0.5}), col, nil, eqs, "A[0,1] is NaN"},
		{"Inf h", good, col, []float64{0, math.Inf(1)}, eqs, "h[1,0] is +Inf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewLinear(tc.a, tc.d, tc.h, tc.eqs); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}
