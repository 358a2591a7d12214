package treesplit

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/knowdp/knowdp/estimate/hier"
)

// starTree is a root with n leaves: levels 0 (the leaves) and 1 (the root).
func starTree(t *testing.T, n int) *hier.ShapeTree {
	t.Helper()
	h, err := hier.NewHierarchy([]int{n}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h.ShapeTree()
}

// starProblem measures the n leaves (measurement 0) and the root
// (measurement 1) of a star and weighs the leaves' variances by a and the
// root's by b; exact fixes the root.
func starProblem(t *testing.T, n int, gaussian, exact bool, a, b float64) Problem {
	return Problem{
		Tree:     starTree(t, n),
		Gaussian: gaussian,
		Unit:     []float64{1, 2},
		Residuals: []Residual{{
			Weight: 1,
			Exact:  []bool{false, exact},
			Obs:    [][]Obs{{{Measurement: 0, Cells: 1}}, {{Measurement: 1, Cells: 1}}},
			Coef:   []float64{a, b},
		}},
	}
}

// starDense is the same objective by the dense posterior covariance
// Σ = (λ0 I + λ1 1 1ᵀ)^-1 of the n leaves: a leaf's variance
// (1/λ0)(1 - λ1/(λ0 + nλ1)), the root's n/(λ0 + nλ1); with the root exact,
// the projection of (λ0 I)^-1 onto 1ᵀx = 0: (1/λ0)(1 - 1/n) and 0.
func starDense(n int, l0, l1 float64, exact bool, a, b float64) float64 {
	fn := float64(n)
	if exact {
		return a * fn * (1 - 1/fn) / l0
	}
	return a*fn*(1-l1/(l0+fn*l1))/l0 + b*fn/(l0+fn*l1)
}

// TestEvalStar pins F and its complex-step gradient to the dense
// computation (the gradient to central differences of it).
func TestEvalStar(t *testing.T) {
	for _, tc := range []struct {
		n               int
		gaussian, exact bool
		a, b            float64
		x               []float64
	}{
		{3, true, false, 1, 0, []float64{0.5, 0.5}},
		{3, true, false, 0, 1, []float64{0.2, 0.8}},
		{5, false, false, 1, 2, []float64{0.7, 0.3}},
		{4, false, true, 1, 1, []float64{0.6, 0.4}},
		{2, true, false, 0.3, 5, []float64{0.9, 0.1}},
	} {
		o := New(starProblem(t, tc.n, tc.gaussian, tc.exact, tc.a, tc.b))
		dense := func(x []float64) float64 {
			p0, p1 := x[0], x[1]
			if !tc.gaussian {
				p0, p1 = p0*p0, p1*p1
			}
			return starDense(tc.n, o.Unit[0]*p0, o.Unit[1]*p1, tc.exact, tc.a, tc.b)
		}
		grad := make([]float64, 2)
		got, err := o.Eval(tc.x, !tc.gaussian, grad)
		if err != nil {
			t.Fatal(err)
		}
		if want := dense(tc.x); math.Abs(got-want) > 1e-12*want {
			t.Errorf("%+v: F %v, dense %v", tc, got, want)
		}
		for j := range tc.x {
			const h = 1e-6
			up, down := append([]float64(nil), tc.x...), append([]float64(nil), tc.x...)
			up[j] += h
			down[j] -= h
			want := (dense(up) - dense(down)) / (2 * h)
			if math.Abs(grad[j]-want) > 1e-6*math.Max(1, math.Abs(want)) {
				t.Errorf("%+v: ∂F/∂x%d %v, differences %v", tc, j, grad[j], want)
			}
		}
	}
}

// TestSolveStar checks the split and its certificate against a fine grid
// of the simplex: the bound is below every point, and the split is within
// the solver's tolerance of the best of them.
func TestSolveStar(t *testing.T) {
	for _, tc := range []struct {
		n        int
		gaussian bool
		a, b     float64
	}{
		{3, true, 1, 1},
		{3, false, 1, 1},
		{8, true, 1, 0.1},
		{8, false, 1, 0.1},
		{2, false, 0.01, 1},
	} {
		o := New(starProblem(t, tc.n, tc.gaussian, false, tc.a, tc.b))
		sol, err := o.Solve(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if f, _ := New(o.Problem).Eval(sol.X, !tc.gaussian, nil); math.Abs(f-sol.Value) > 1e-12*f {
			t.Errorf("%+v: Value %v, F(X) %v", tc, sol.Value, f)
		}
		if got := (sol.Value - sol.Bound) / sol.Value; math.Abs(got-sol.Gap) > 1e-9 {
			t.Errorf("%+v: Gap %v, (Value - Bound)/Value %v", tc, sol.Gap, got)
		}
		best := math.Inf(1)
		const steps = 20000
		for i := range steps + 1 {
			x0 := float64(i) / steps
			f, err := New(o.Problem).Eval([]float64{x0, 1 - x0}, !tc.gaussian, nil)
			if err != nil {
				continue // a vertex may leave the leaves undetermined
			}
			if f < sol.Bound*(1-1e-9) {
				t.Errorf("%+v: F(%v) = %v below the bound %v", tc, x0, f, sol.Bound)
			}
			best = min(best, f)
		}
		// The grid's spacing moves its minimum by O(1/steps²) relative.
		if sol.Value > best*(1+1e-6) {
			t.Errorf("%+v: split %v gives %v, the grid %v", tc, sol.X, sol.Value, best)
		}
		if tc.gaussian && !sol.Global {
			t.Errorf("%+v: Gaussian split not certified global (gap %v)", tc, sol.Gap)
		}
		if sol.Work <= 0 || sol.Work > o.WorkBound() {
			t.Errorf("%+v: work %v outside (0, %v]", tc, sol.Work, o.WorkBound())
		}
	}
}

// TestUndetermined: a weighted level nobody observes has no estimate.
func TestUndetermined(t *testing.T) {
	p := starProblem(t, 3, true, false, 1, 1)
	p.Residuals[0].Obs = [][]Obs{nil, nil}
	if _, err := New(p).Eval([]float64{0.5, 0.5}, false, nil); !errors.Is(err, ErrUndetermined) {
		t.Errorf("got %v, want ErrUndetermined", err)
	}
	if _, err := New(Problem{Unit: []float64{1}}).Eval([]float64{1}, false, nil); err == nil {
		t.Error("a problem without a tree evaluated")
	}
}

// TestSolveDense against a system with a known solution.
func TestSolveDense(t *testing.T) {
	a := [][]float64{{0, 2, 1, 7}, {1, 1, 1, 6}, {2, 0, 3, 11}}
	z, ok := solveDense(a)
	if !ok {
		t.Fatal("singular")
	}
	for i, want := range []float64{1, 2, 3} {
		if math.Abs(z[i]-want) > 1e-12 {
			t.Errorf("z = %v, want [1 2 3]", z)
			break
		}
	}
	if _, ok := solveDense([][]float64{{1, 2, 1}, {2, 4, 2}}); ok {
		t.Error("a singular system solved")
	}
}
