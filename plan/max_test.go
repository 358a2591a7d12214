package plan

import (
	"context"
	"math"
	"testing"
)

// TestSolveMax checks the max-variance split against a grid of the simplex
// (two and three measurements): the bound is below the largest variance
// everywhere, the split within the certified gap of the grid's best, and
// with one table the problem is Solve's.
func TestSolveMax(t *testing.T) {
	for _, tc := range []struct {
		name string
		mp   MaxProblem
	}{
		{"two tables, two measurements", MaxProblem{
			Covers: [][]int{{0}, {0, 1}, {1}},
			Coef:   []float64{1, 2},
			Tables: [][]TableTerm{{{0, 1}, {1, 0.5}}, {{1, 0.5}, {2, 3}}},
		}},
		{"three tables, three measurements", MaxProblem{
			Covers: [][]int{{0, 2}, {1, 2}, {2}, {0}},
			Coef:   []float64{1, 0.5, 0.25},
			Tables: [][]TableTerm{{{0, 2}, {3, 1}}, {{1, 1}, {2, 0.2}}, {{2, 4}}, nil},
		}},
	} {
		res, err := SolveMax(context.Background(), tc.mp)
		if err != nil {
			t.Fatal(err)
		}
		g := func(x []float64) float64 {
			worst := 0.0
			for _, terms := range tc.mp.Tables {
				var v float64
				for _, tt := range terms {
					var w float64
					for _, k := range tc.mp.Covers[tt.Term] {
						w += tc.mp.Coef[k] * x[k]
					}
					v += tt.Coef / w
				}
				worst = max(worst, v)
			}
			return worst
		}
		if got := g(res.X); math.Abs(got-res.Objective) > 1e-12*got {
			t.Errorf("%s: Objective %v, G(X) %v", tc.name, res.Objective, got)
		}
		if !res.Global || res.Gap > 1e-6 {
			t.Errorf("%s: gap %v not certified", tc.name, res.Gap)
		}
		best := math.Inf(1)
		const steps = 400
		k := len(tc.mp.Coef)
		for i := 0; i <= steps; i++ {
			for j := 0; i+j <= steps; j++ {
				x := []float64{float64(i) / steps, float64(j) / steps}
				if k == 2 {
					if i+j != steps {
						continue
					}
				} else {
					x = append(x, float64(steps-i-j)/steps)
				}
				v := g(x)
				if math.IsNaN(v) || math.IsInf(v, 0) {
					continue
				}
				if v < res.Bound*(1-1e-9) {
					t.Fatalf("%s: G(%v) = %v below the bound %v", tc.name, x, v, res.Bound)
				}
				best = min(best, v)
			}
		}
		// The grid's best is within its spacing of the optimum, which the
		// split is within the gap of.
		if res.Objective > best*(1+1e-6) {
			t.Errorf("%s: split %v gives %v, the grid %v", tc.name, res.X, res.Objective, best)
		}
	}
	// One table: the convex split of its terms.
	mp := MaxProblem{Covers: [][]int{{0}, {0, 1}, {1}}, Coef: []float64{1, 3}, Tables: [][]TableTerm{{{0, 2}, {1, 1}, {2, 5}}}}
	res, err := SolveMax(context.Background(), mp)
	if err != nil {
		t.Fatal(err)
	}
	one, err := Solve(context.Background(), Problem{Weights: []float64{2, 1, 5}, Covers: mp.Covers, Coef: mp.Coef, Power: 1}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(res.Objective-one.Objective) > 1e-6*one.Objective {
		t.Errorf("one table: %v, Solve %v", res.Objective, one.Objective)
	}
	if _, err := SolveMax(context.Background(), MaxProblem{}); err == nil {
		t.Error("an empty problem solved")
	}
}
