package gls

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/knowdp/knowdp/query"
)

// prefixProblem: an ordered dimension of 1,000 values crossed with 4,
// measured by prefix sums along the first, the grand total exact.
func prefixProblem() (Problem, [][]float64, [][]float64) {
	const n = 1000
	rng := rand.New(rand.NewPCG(1, 1))
	p := Problem{
		Shape:        []int{n, 4},
		Measurements: []Measurement{{Term: query.Term{query.NewPrefix(n), query.NewIdentity(4)}, Variance: 1}},
		Invariants:   []Invariant{{Term: query.Term{query.NewTotal(n), query.NewTotal(4)}}},
	}
	z := make([]float64, n*4)
	for i := range z {
		z[i] = rng.NormFloat64() * 10
	}
	return p, [][]float64{z}, [][]float64{{3}}
}

func benchPrefix(b *testing.B, denseMax int) {
	p, meas, inv := prefixProblem()
	pl, err := newPlan(p, Options{}, denseMax)
	if err != nil {
		b.Fatal(err)
	}
	var it int
	for b.Loop() {
		est, err := pl.Solve(context.Background(), meas, inv)
		if err != nil {
			b.Fatal(err)
		}
		it = est.Certificate.Iterations
	}
	b.ReportMetric(float64(it), "iterations")
}

// BenchmarkPrefixExplicit and BenchmarkPrefixHaar: one estimate on
// prefixProblem with the dimension of 1,000 given an explicit basis (the
// default) or its Haar basis.
func BenchmarkPrefixExplicit(b *testing.B) { benchPrefix(b, defaultDenseMax) }
func BenchmarkPrefixHaar(b *testing.B)     { benchPrefix(b, 1) }

// BenchmarkPrefixPlan: the set-up of the explicit basis of 1,000 values.
func BenchmarkPrefixPlan(b *testing.B) {
	p, _, _ := prefixProblem()
	for b.Loop() {
		if _, err := NewPlan(p, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
