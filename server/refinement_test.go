package server

import (
	"context"
	"math"
	"net/http"
	"testing"

	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
)

func yearColourCells() []LinearQuery {
	var qs []LinearQuery
	for _, y := range []string{"1997", "1998", "1999", "2000", "2001", "2002"} {
		for _, c := range []string{"Black", "White"} {
			qs = append(qs, countQuery(1, map[string][]string{"year": {y}, "colour": {c}}))
		}
	}
	return qs
}

// TestRefinementEqualities checks the equalities the invariants imply on a
// set of answers: how many there are, and that each holds on the true
// answers.
func TestRefinementEqualities(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerArrests("arrests", 1, []string{"year"}, []string{"colour"})
	d := s.srv.sets["arrests"]
	for _, tc := range []struct {
		name    string
		queries []LinearQuery
		want    int
	}{
		// 6 year sums and 2 colour sums, one of them redundant (both
		// add up to the total).
		{"year x colour cells", yearColourCells(), 7},
		{"two cells of one year", []LinearQuery{
			countQuery(1, map[string][]string{"year": {"1997"}, "colour": {"Black"}}),
			countQuery(1, map[string][]string{"year": {"1997"}, "colour": {"White"}}),
		}, 1},
		{"colours directly", []LinearQuery{
			countQuery(1, map[string][]string{"colour": {"Black"}}),
			countQuery(2, map[string][]string{"colour": {"White"}}),
		}, 2},
		{"nothing implied", []LinearQuery{
			countQuery(1, map[string][]string{"sex": {"Female"}}),
			countQuery(1, map[string][]string{"year": {"1997"}, "sex": {"Male"}}),
		}, 0},
		{"total through a difference", []LinearQuery{
			countQuery(1, map[string][]string{"year": {"1997", "1998"}}),
			{Terms: []Term{{}, {Where: map[string][]string{"year": {"1997"}}, Coef: numberPtr(-1)}}},
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows, err := expandQueries(d.schema, tc.queries, "queries")
			if err != nil {
				t.Fatal(err)
			}
			r, err := newInvariantRefiner(context.Background(), d, rows)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.constraints(); got != tc.want {
				t.Fatalf("%d equalities, want %d", got, tc.want)
			}
			if r.eqs == nil {
				return
			}
			mu := make([]float64, len(rows))
			for i, row := range rows {
				mu[i] = float64(row.dot(d.cube.Counts))
			}
			for _, eq := range r.eqs.Constraints() {
				var sum float64
				for j, i := range eq.Index {
					sum += eq.Coef[j] * mu[i]
				}
				if math.Abs(sum-eq.Value) > 1e-9*float64(d.total) {
					t.Fatalf("%s: %v on the true answers, value %v", eq.Label, sum, eq.Value)
				}
			}
		})
	}
}

// TestRefinementVariance checks Theorem 3 of paper 1 on the server's refined
// answers: the least-squares refinement onto the q equalities the invariants
// imply is unbiased and cuts the expected squared error of k answers with
// equal noise variance v from k v to (k - q) v. For the 12 cells of
// {year, colour} under {year} and {colour}, q = 7: from 12 v to 5 v. The
// tolerance is 5 standard errors of the mean over the draws.
func TestRefinementVariance(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerArrests("arrests", 1, []string{"year"}, []string{"colour"})
	d := s.srv.sets["arrests"]
	eps, _ := privacy.NewEpsilon(1)
	p, err := planQuery(context.Background(), d, QueryRequest{Kind: "linear", Epsilon: 1, Refine: true, Queries: yearColourCells()})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	rows, _ := expandQueries(d.schema, yearColourCells(), "q")
	mu := make([]float64, len(rows))
	for i, row := range rows {
		mu[i] = float64(row.dot(d.cube.Counts))
	}
	dl, _ := noise.NewDiscreteLaplace(linearScale(int64(d.sens.Value), 1, eps))
	v := dl.Variance()
	r := noise.NewSeeded(7)
	const draws = 2000
	var noisySSE, refinedSSE, bias []float64
	bias = make([]float64, len(mu))
	for range draws {
		out, err := p.compute(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		a := out.(linearAnswer)
		var sn, sr float64
		for i := range mu {
			sn += sq(float64(a.Noisy[i]) - mu[i])
			sr += sq(a.Answers[i] - mu[i])
			bias[i] += a.Answers[i] - mu[i]
		}
		noisySSE = append(noisySSE, sn)
		refinedSSE = append(refinedSSE, sr)
	}
	for _, tc := range []struct {
		name string
		sse  []float64
		want float64
	}{{"noisy", noisySSE, 12 * v}, {"refined", refinedSSE, 5 * v}} {
		m, se := meanSE(tc.sse)
		if math.Abs(m-tc.want) > 5*se {
			t.Errorf("%s: mean squared error %.1f, want %.1f (5 SE = %.1f)", tc.name, m, tc.want, 5*se)
		}
	}
	// Unbiased: each cell's mean error is within 5 SE (sd <= sqrt(v)).
	for i, b := range bias {
		if math.Abs(b/draws) > 5*math.Sqrt(v/draws) {
			t.Errorf("cell %d: mean error %v", i, b/draws)
		}
	}
	// Through the API the refined answers satisfy the invariants exactly.
	_, key := s.analyst("r")
	st, resp, raw := s.ask("arrests", key, map[string]any{"kind": "linear", "epsilon": 1, "refine": true, "queries": yearColourCells()}, "")
	if st != http.StatusCreated {
		t.Fatalf("status %d: %s", st, raw)
	}
	var ans linearAnswer
	mustUnmarshal(t, resp.Answer, &ans)
	years := d.inv[0].Counts
	for y := range 6 {
		if got := ans.Answers[2*y] + ans.Answers[2*y+1]; math.Abs(got-years[y]) > 1e-6 {
			t.Errorf("year %d: refined cells add up to %v, the invariant is %v", y, got, years[y])
		}
	}
	if ans.Privacy.Constraints != 7 || len(ans.Noisy) != 12 {
		t.Fatalf("privacy %+v", ans.Privacy)
	}
}

func sq(x float64) float64 { return x * x }

func meanSE(x []float64) (mean, se float64) {
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	var ss float64
	for _, v := range x {
		ss += sq(v - mean)
	}
	return mean, math.Sqrt(ss / float64(len(x)-1) / float64(len(x)))
}
