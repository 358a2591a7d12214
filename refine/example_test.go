package refine_test

import (
	"context"
	"fmt"
	"strings"

	"gonum.org/v1/gonum/mat"

	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/refine"
)

// The paper's running example: noisy counts of grades A-F, of passing
// students p and of all students t. Two constraints hold by definition;
// the analyst also knows that mu_A + mu_B = 80 on this data set.
func ExampleEqualities_Refine() {
	names := []string{"A", "B", "C", "D", "F", "p", "t"}
	noisy := []float64{33.1, 41.7, 38.2, 21.4, 9.6, 141.3, 148.9}
	eqs, err := refine.NewEqualities(7, []refine.Equality{
		{Label: "passing", Index: []int{0, 1, 2, 3, 5}, Coef: []float64{1, 1, 1, 1, -1}, Public: true},
		{Label: "total", Index: []int{4, 5, 6}, Coef: []float64{1, 1, -1}, Public: true},
		{Label: "AB", Index: []int{0, 1}, Coef: []float64{1, 1}, Value: 80},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	refined := make([]float64, 7)
	if err := eqs.Refine(refined, noisy); err != nil {
		fmt.Println(err)
		return
	}
	for i, name := range names {
		fmt.Printf("%s %6.2f -> %6.2f\n", name, noisy[i], refined[i])
	}
	fmt.Println("keeps eps:", eqs.Public())
	// Output:
	// A  33.10 ->  35.70
	// B  41.70 ->  44.30
	// C  38.20 ->  38.59
	// D  21.40 ->  21.79
	// F   9.60 ->   9.06
	// p 141.30 -> 140.38
	// t 148.90 -> 149.44
	// keeps eps: false
}

// Example 1 of the paper: refining x̂_1 = (x_1 − x_2 + c)/2 with a sum c
// that moves with the data doubles the privacy loss of x̂_1.
func ExampleLinear_Loss() {
	eqs, _ := refine.NewEqualities(2, []refine.Equality{{Index: []int{0, 1}, Coef: []float64{1, 1}, Value: 10}})
	ls, _ := refine.LeastSquares(eqs)
	w := refine.Workload{Queries: mat.NewDense(2, 2, []float64{1, 0, 0, 1}), Universe: []string{"u1", "u2"}}
	eps := 1.0
	loss, _ := ls.Loss(w, []int{0}, 1/eps)
	fmt.Printf("rho = %.3g eps (worst: %s)\n", loss.Rho/eps, loss.Worst)
	all, _ := ls.Loss(w, nil, 1/eps)
	fmt.Println("releasing both reveals c:", all.Distinguishable)
	// Output:
	// rho = 2 eps (worst: add or remove a record of type "u1")
	// releasing both reveals c: true
}

func ExampleLinear_Calibrate() {
	eqs, _ := refine.NewEqualities(2, []refine.Equality{{Index: []int{0, 1}, Coef: []float64{1, 1}, Value: 10}})
	ls, _ := refine.LeastSquares(eqs)
	w := refine.Workload{Queries: mat.NewDense(2, 2, []float64{1, 0, 0, 1})}
	eps, _ := privacy.NewEpsilon(1)
	lap, loss, err := ls.Calibrate(w, []int{0}, eps)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("effective sensitivity %.3g, Laplace scale %.6f, loss %.6f <= eps\n", loss.Sensitivity, lap.Scale(), lap.Loss(loss.Sensitivity))
	// Output:
	// effective sensitivity 2, Laplace scale 2.000000, loss 1.000000 <= eps
}

// A histogram of four bins under a binary tree of sums (Hay et al. 2010).
func ExampleCompleteTree() {
	tree, _ := refine.CompleteTree(2, 3) // nodes: total, two halves, four bins
	noisy := []float64{100, 52, 45, 30, 24, 20, 27}
	refined := make([]float64, tree.Len())
	_ = tree.Refine(refined, noisy)
	fmt.Printf("%.2f\n", refined)
	// Output:
	// [99.29 53.14 46.14 29.57 23.57 19.57 26.57]
}

func ExampleIsotonic() {
	noisy := []float64{3, 1, 2, 7, 5, 9}
	sorted := make([]float64, len(noisy))
	_ = refine.Isotonic(sorted, noisy)
	fmt.Println(sorted)
	// Output:
	// [2 2 2 6 6 9]
}

// Non-negative counts that must sum to a public total of 10.
func ExampleRefiner() {
	r, err := refine.NewRefiner(3, refine.Knowledge{
		Equalities: []refine.Equality{{Index: []int{0, 1, 2}, Coef: []float64{1, 1, 1}, Value: 10, Public: true}},
		Lower:      []float64{0, 0, 0},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	refined := make([]float64, 3)
	if err := r.Refine(context.Background(), refined, []float64{-2, 5, 9}); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%.4f keeps eps: %v\n", refined, r.PostProcessing())
	// Output:
	// [0.0000 3.0000 7.0000] keeps eps: true
}

// The variance of each refined grade, as a fraction of the noisy one, is
// the diagonal of A = I − B(BᵀB)⁻¹Bᵀ: the variance reduction of Theorem 3.
func ExampleLeastSquares() {
	names := []string{"A", "B", "C", "D", "F", "p", "t"}
	definitional := []refine.Equality{
		{Label: "passing", Index: []int{0, 1, 2, 3, 5}, Coef: []float64{1, 1, 1, 1, -1}, Public: true},
		{Label: "total", Index: []int{4, 5, 6}, Coef: []float64{1, 1, -1}, Public: true},
	}
	withAB := append(definitional[:2:2], refine.Equality{Label: "AB", Index: []int{0, 1}, Coef: []float64{1, 1}, Value: 80})
	for _, eqs := range [][]refine.Equality{definitional, withAB} {
		e, _ := refine.NewEqualities(7, eqs)
		ls, _ := refine.LeastSquares(e)
		var cols []string
		for i, name := range names {
			cols = append(cols, fmt.Sprintf("%s %.1f%%", name, 100*(1-ls.A().At(i, i))))
		}
		fmt.Println(strings.Join(cols, "  "))
	}
	// Output:
	// A 21.4%  B 21.4%  C 21.4%  D 21.4%  F 35.7%  p 42.9%  t 35.7%
	// A 50.0%  B 50.0%  C 37.5%  D 37.5%  F 37.5%  p 50.0%  t 37.5%
}
