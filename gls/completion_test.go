package gls

import (
	"context"
	"math"
	"testing"

	"github.com/knowdp/knowdp/query"
)

// A completion is a finer table than anything determined, whose roll-ups
// are the determined answers: here geography x age crossed at coarse
// levels, where the finest table (county x single year) is not determined.
func TestCompletionRollsUpToAnswers(t *testing.T) {
	county, age := 6, 6
	state, err := query.NewRollUp([]int32{0, 0, 0, 1, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	band, err := query.NewRollUp([]int32{0, 0, 1, 1, 2, 2})
	if err != nil {
		t.Fatal(err)
	}
	I, T := query.NewIdentity, query.NewTotal
	stateBand := query.Term{state, band}
	countyTotal := query.Term{I(county), T(age)}
	totalAge := query.Term{T(county), I(age)}
	p := Problem{
		Shape: []int{county, age},
		Measurements: []Measurement{
			{Term: stateBand, Variance: 1},
			{Term: countyTotal, Variance: 2},
			{Term: totalAge, Variance: 3},
		},
		Invariants: []Invariant{{Term: query.Term{state, T(age)}}},
		Queries:    []Query{{Term: stateBand}, {Term: countyTotal}, {Term: totalAge}},
	}
	plan, err := NewPlan(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	meas := [][]float64{{10, 12, 9, 11, 8, 13}, {5, 7, 6, 4, 9, 8}, {3, 6, 9, 12, 8, 2}}
	est, err := plan.Solve(context.Background(), meas, [][]float64{{30, 31}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := est.Answer(query.Term{I(county), I(age)}); err == nil {
		t.Fatal("county x single year is determined")
	}
	full, err := est.Completion(query.Term{I(county), I(age)})
	if err != nil {
		t.Fatal(err)
	}
	for q, qq := range p.Queries {
		got := qq.Term.Apply(full)
		for i, w := range est.Answers[q] {
			if math.Abs(got[i]-w) > 1e-8*math.Max(1, math.Abs(w)) {
				t.Fatalf("query %d row %d: the completion rolls up to %v, the answer is %v", q, i, got[i], w)
			}
		}
	}
}
