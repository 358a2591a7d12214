package strategy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/knowdp/knowdp/query"
)

// TestEstimateAgainstDense: the residual-basis estimate equals W G⁺ Σ_k
// A_kᵀ z_k / v_k computed densely, for random marginal-type strategies and
// any workload factors.
func TestEstimateAgainstDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	checked := 0
	for trial := range 200 {
		d := 1 + rng.IntN(3)
		shape := make([]int, d)
		cells := 1
		for i := range shape {
			shape[i] = 1 + rng.IntN(4)
			cells *= shape[i]
		}
		var ms []Measurement
		for range 1 + rng.IntN(4) {
			tt := make(query.Term, d)
			for i, n := range shape {
				switch rng.IntN(3) {
				case 0:
					tt[i] = query.NewIdentity(n)
				case 1:
					tt[i] = query.NewTotal(n)
				default:
					if n > 1 {
						tt[i] = query.NewResidual(n)
					} else {
						tt[i] = query.NewIdentity(n)
					}
				}
			}
			ms = append(ms, Measurement{Term: tt, Variance: 0.3 + 2*rng.Float64()})
		}
		var w query.Workload
		for range 1 + rng.IntN(3) {
			tt := make(query.Term, d)
			for i, n := range shape {
				tt[i] = randomFactor(rng, n, true)
			}
			w = append(w, query.Weighted{Term: tt, Weight: 1})
		}
		answers := make([][]float64, len(ms))
		rhs := mat.NewVecDense(cells, nil)
		for k, m := range ms {
			answers[k] = make([]float64, m.Term.Rows())
			for r := range answers[k] {
				answers[k][r] = 10 * rng.NormFloat64()
			}
			a := denseTerm(m.Term)
			var v mat.VecDense
			v.MulVec(a.T(), mat.NewVecDense(len(answers[k]), answers[k]))
			rhs.AddScaledVec(rhs, 1/m.Variance, &v)
		}
		_, ok := denseObjective(shape, w, ms)
		got, err := Estimate(shape, w, ms, answers)
		if !ok {
			if !errors.Is(err, ErrNotEstimable) {
				t.Errorf("trial %d: not estimable, got %v", trial, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		// Dense GLS: x̂ = G⁺ rhs.
		g := mat.NewDense(cells, cells, nil)
		for _, m := range ms {
			a := denseTerm(m.Term)
			var ata mat.Dense
			ata.Mul(a.T(), a)
			ata.Scale(1/m.Variance, &ata)
			g.Add(g, &ata)
		}
		var svd mat.SVD
		if !svd.Factorize(g, mat.SVDFull) {
			t.Fatal("svd")
		}
		var xhat mat.VecDense
		svd.SolveVecTo(&xhat, rhs, svd.Rank(1e-10))
		for ti, wt := range w {
			want := wt.Term.Apply(xhat.RawVector().Data)
			for r := range want {
				if math.Abs(got[ti][r]-want[r]) > 1e-8*max(1, math.Abs(want[r])) {
					t.Fatalf("trial %d term %d row %d: %v, dense %v", trial, ti, r, got[ti][r], want[r])
				}
			}
		}
		checked++
	}
	if checked < 80 {
		t.Errorf("only %d estimable trials", checked)
	}
}

func TestEstimateErrors(t *testing.T) {
	shape := []int{2, 3}
	w := kway(shape, 1)
	m := Measurement{Term: marginalTerm(shape, 3), Variance: 1}
	if _, err := Estimate(shape, w, []Measurement{m}, [][]float64{{1, 2}}); err == nil {
		t.Error("short answers accepted")
	}
	h := Measurement{Term: query.Term{hierarchy(2, 2), query.NewIdentity(3)}, Variance: 1}
	if _, err := Estimate(shape, w, []Measurement{h}, [][]float64{make([]float64, 9)}); err == nil {
		t.Error("a matrix factor accepted")
	}
}

// ExampleOptimize plans the two-way tables of a 2 x 3 x 4 domain with
// Gaussian noise at rho = 1: ResidualPlanner's residual measurements,
// which meet the SVD bound, so no strategy does better (ResidualPlanner
// itself gives 25.425210506576157 here).
func ExampleOptimize() {
	shape := []int{2, 3, 4}
	var w query.Workload
	for _, keep := range [][]int{{0, 1}, {0, 2}, {1, 2}} {
		w = append(w, query.Weighted{Term: query.Marginal(shape, func(d int) bool {
			return d == keep[0] || d == keep[1]
		}), Weight: 1})
	}
	st, err := Optimize(context.Background(), shape, w, Gaussian, 1, Options{})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d residual measurements, expected total squared error %.4f\n", len(st.Measurements), st.Objective)
	fmt.Printf("lower bound over every Gaussian strategy: %.4f\n", st.LowerBound.Value)
	// Output:
	// 7 residual measurements, expected total squared error 25.4252
	// lower bound over every Gaussian strategy: 25.4252
}

// ExampleObjective: on a 2 x 3 table measured cell by cell with noise of
// variance 1, the two one-way tables' cells sum 3 and 2 cells, so their
// total squared error is 2·3 + 3·2 = 12.
func ExampleObjective() {
	shape := []int{2, 3}
	w := query.Workload{
		{Term: query.Term{query.NewIdentity(2), query.NewTotal(3)}, Weight: 1},
		{Term: query.Term{query.NewTotal(2), query.NewIdentity(3)}, Weight: 1},
	}
	cells := Measurement{Term: query.Term{query.NewIdentity(2), query.NewIdentity(3)}, Variance: 1}
	f, err := Objective(shape, w, []Measurement{cells})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%.6f\n", f)
	// Output: 12.000000
}
