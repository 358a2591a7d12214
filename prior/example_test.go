package prior_test

import (
	"fmt"

	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/prior"
	"github.com/knowdp/knowdp/privacy"
)

// Section 6.1 of the paper: a sensitive Boolean attribute that is 1 with
// prior probability 0.01, released for one individual with eps = 1.
func Example() {
	p, _ := prior.NewNumeric("B", []float64{0, 1}, []float64{0.99, 0.01})
	eps, _ := privacy.NewEpsilon(1)
	m, _ := prior.New(p, prior.Config{Kind: prior.Individual, Epsilon: eps})
	for _, b := range []float64{0, 1} {
		q, _ := m.Refine(prior.Point{b})
		fmt.Printf("B = %v: P(response = 1) = %.6f\n", b, q.(*prior.Discrete).Prob(1))
	}
	// Draw the response for an individual whose B is 0 (seeded: NOT private).
	r := noise.NewSeeded(1)
	x, _ := m.Respond(r, prior.Point{0})
	fmt.Println("response:", p.Format(x))
	// Output:
	// B = 0: P(response = 1) = 0.003679
	// B = 1: P(response = 1) = 0.027183
	// response: 0
}

// Table 5, eps = 1: a uniform prior on [0, 1] refined around f(D) = 0.5.
func ExampleMechanism_Refine() {
	u, _ := prior.Uniform("f", 0, 1)
	eps, _ := privacy.NewEpsilon(1)
	m, _ := prior.New(u, prior.Config{Kind: prior.Individual, Epsilon: eps})
	q, _ := m.Refine(prior.Point{0.5})
	for _, pc := range q.(*prior.Piecewise).Pieces() {
		fmt.Printf("[%.3f, %.3f] density %.4f\n", pc.Lo, pc.Hi, pc.Density)
	}
	fmt.Printf("size(U_u) = %.3f, variance %.3f\n", m.PU(), q.(*prior.Piecewise).Variance())
	// Output:
	// [0.000, 0.366] density 0.3679
	// [0.366, 0.634] density 2.7183
	// [0.634, 1.000] density 0.3679
	// size(U_u) = 0.269, variance 0.034
}

// The employed/benefits example of Section 7: a joint prior that gives the
// impossible combination zero mass never returns it.
func ExampleParse() {
	p, _ := prior.Parse([]byte(`{
	  "components": [{"name": "employed", "level": "nominal", "categories": ["No", "Yes"]},
	                 {"name": "benefits", "level": "nominal", "categories": ["No", "Yes"]}],
	  "joint": [{"value": ["No", "No"], "probability": 0.1}, {"value": ["No", "Yes"], "probability": 0.3},
	            {"value": ["Yes", "No"], "probability": 0.6}, {"value": ["Yes", "Yes"], "probability": 0}]}`), nil)
	d, _ := prior.Combine(p.Components(), prior.L1, nil)
	eps, _ := privacy.NewEpsilon(1)
	m, _ := prior.New(p, prior.Config{Kind: prior.Individual, Epsilon: eps, Distance: d})
	q, _ := m.Refine(prior.Point{1, 0}) // employed, no benefits
	for i := range q.(*prior.Discrete).Len() {
		fmt.Printf("%s %.4f\n", p.Format(q.(*prior.Discrete).Point(i)), q.(*prior.Discrete).Prob(i))
	}
	// Output:
	// (No, No) 0.0368
	// (No, Yes) 0.1104
	// (Yes, No) 0.8528
	// (Yes, Yes) 0.0000
}

// How many of the 15 dyadic range counts over an 8-cell histogram each
// protocol answers with eps = 1. Every cell lies in 4 of the ranges.
// Protocol 1 adds Laplace noise with lambda = 4/eps, so the stacked
// sensitivity 4 fits; Protocol 2 refines a prior about each count with
// eps_i = eps/4, the same per-query guarantee, and sums the eps_i unless the
// queries declare which cells (disjoint groups of individuals) they cover.
func Example_protocols() {
	hist := []float64{4, 8, 15, 16, 23, 42, 7, 5}
	var ranges [][2]int // [lo, hi) of each dyadic range, coarse to fine
	for width := 8; width >= 1; width /= 2 {
		for lo := 0; lo < 8; lo += width {
			ranges = append(ranges, [2]int{lo, lo + width})
		}
	}
	eps, _ := privacy.NewEpsilon(1)
	quarter, _ := privacy.NewEpsilon(0.25)
	r := noise.NewSeeded(1) // NOT private: reproducible output

	p1, _ := prior.NewLaplaceSession(hist, eps, 4/eps.Float64())
	p2, _ := prior.NewRefinementSession(privacy.Pure(eps))
	p2scoped, _ := prior.NewRefinementSession(privacy.Pure(eps))
	// The analyst's prior for every count: uniform on 0..130.
	counts := make([]float64, 131)
	probs := make([]float64, 131)
	for i := range counts {
		counts[i], probs[i] = float64(i), 1.0/131
	}
	pr, _ := prior.NewNumeric("count", counts, probs)
	m, _ := prior.New(pr, prior.Config{Kind: prior.Statistical, Epsilon: quarter})

	for _, rg := range ranges {
		q := make([]float64, len(hist))
		var truth float64
		var cells []string
		for j := rg[0]; j < rg[1]; j++ {
			q[j], truth = 1, truth+hist[j]
			cells = append(cells, fmt.Sprint("cell", j))
		}
		p1.Answer(r, q)
		p2.Answer(r, m, prior.Point{truth})
		p2scoped.Answer(r, m, prior.Point{truth}, cells...)
	}
	fmt.Println("Protocol 1 (Laplace, sensitivity of the stack):", p1.Answered())
	fmt.Println("Protocol 2 (refinement, sum of eps):", p2.Answered())
	fmt.Println("Protocol 2 with disjoint scopes (Proposition 3):", p2scoped.Answered())
	// Output:
	// Protocol 1 (Laplace, sensitivity of the stack): 15
	// Protocol 2 (refinement, sum of eps): 4
	// Protocol 2 with disjoint scopes (Proposition 3): 15
}
