package integer

import (
	"context"
	"math"
	"testing"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/noise"
)

func crossedSchema(t testing.TB) *domain.Schema { return testkit.Crossed(t) }

func view(t testing.TB, s *domain.Schema, x string) domain.View {
	t.Helper()
	v, err := s.ParseView(x)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// crossedCase is an integer truth, the state totals of it, and a real
// estimate of the detail table that keeps them (noise with zero sum in
// every state, some cells negative).
func crossedCase(t testing.TB, s *domain.Schema, r *noise.Rand) (detail domain.View, x []float64, exact map[domain.View][]float64) {
	detail = view(t, s, "geo,sex,age")
	n := s.ViewSize(detail)
	truth := make([]float64, n)
	for i := range truth {
		truth[i] = float64(r.Uint64() % 4)
	}
	state := view(t, s, "geo:state")
	totals, err := s.RollUp(detail, truth, state)
	if err != nil {
		t.Fatal(err)
	}
	x = make([]float64, n)
	noiseSum := make([]float64, len(totals))
	counts := make([]float64, len(totals))
	stateOf := func(cell int) int { return s.Ancestor(0, 1, cell/(2*8)) }
	for i := range x {
		e := float64(int64(r.Uint64()%2001)-1000) / 400
		x[i] = truth[i] + e
		noiseSum[stateOf(i)] += e
		counts[stateOf(i)]++
	}
	for i := range x {
		x[i] -= noiseSum[stateOf(i)] / counts[stateOf(i)]
	}
	return detail, x, map[domain.View][]float64{state: totals}
}

func TestRoundLatticeCrossing(t *testing.T) {
	s := crossedSchema(t)
	r := noise.NewSeeded(3)
	detail, x, exact := crossedCase(t, s, r)
	published := []domain.View{view(t, s, "geo:state,sex,age:band"), view(t, s, "geo,age:broad"), view(t, s, "geo:region,age"), view(t, s, "sex")}
	res, err := RoundLattice(context.Background(), s, detail, x, published, exact, noise.NewSeeded(5))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range published {
		got := res[v]
		if !got.Exact || got.MaxDeviation != 0 {
			t.Errorf("%s: exact %v, deviation %v (%s)", s.FormatView(v), got.Exact, got.MaxDeviation, got.Method)
		}
		for i, c := range got.Counts {
			if c < 0 || c != math.Round(c) {
				t.Fatalf("%s: cell %d is %v", s.FormatView(v), i, c)
			}
		}
		// Every published table keeps the state totals (where it has the
		// states) and agrees with every other on their common roll-up.
		for _, w := range published {
			m := ivMeet(v, w)
			a, err := s.RollUp(v, got.Counts, m)
			if err != nil {
				t.Fatal(err)
			}
			b, err := s.RollUp(w, res[w].Counts, m)
			if err != nil {
				t.Fatal(err)
			}
			for i := range a {
				if a[i] != b[i] {
					t.Fatalf("%s and %s disagree on %s cell %d: %v vs %v", s.FormatView(v), s.FormatView(w), s.FormatView(m), i, a[i], b[i])
				}
			}
		}
	}
	states, err := s.RollUp(published[0], res[published[0]].Counts, view(t, s, "geo:state"))
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range states {
		if c != exact[view(t, s, "geo:state")][i] {
			t.Errorf("state %d: %v, invariant %v", i, c, exact[view(t, s, "geo:state")][i])
		}
	}
}

// Rounding adds no bias where the estimate is far from zero: over many
// seeds the mean of each published cell is the estimate's roll-up, within
// 4.5 standard errors (a rounded cell varies by at most 1, so its standard
// error is at most 0.5/sqrt(runs); 4.5 of them leave a chance of about
// 1e-5 per cell of a false alarm).
func TestRoundLatticeUnbiased(t *testing.T) {
	s := crossedSchema(t)
	detail := view(t, s, "geo,sex,age")
	n := s.ViewSize(detail)
	r := noise.NewSeeded(11)
	x := make([]float64, n)
	for i := range x {
		x[i] = 20 + float64(r.Uint64()%1000)/100
	}
	state := view(t, s, "geo:state")
	totals, err := s.RollUp(detail, x, state)
	if err != nil {
		t.Fatal(err)
	}
	// Whole-number state totals: move each state's estimate onto its
	// rounded total evenly.
	perState := make([]float64, len(totals))
	for i := range x {
		perState[s.Ancestor(0, 1, i/16)]++
	}
	for i := range x {
		st := s.Ancestor(0, 1, i/16)
		x[i] += (math.Round(totals[st]) - totals[st]) / perState[st]
	}
	for i := range totals {
		totals[i] = math.Round(totals[i])
	}
	exact := map[domain.View][]float64{state: totals}
	published := []domain.View{view(t, s, "geo:state,sex,age:band"), view(t, s, "geo,age:broad")}
	const runs = 400
	sums := map[domain.View][]float64{}
	for run := range runs {
		res, err := RoundLattice(context.Background(), s, detail, x, published, exact, noise.NewSeeded(uint64(100+run)))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range published {
			if sums[v] == nil {
				sums[v] = make([]float64, len(res[v].Counts))
			}
			for i, c := range res[v].Counts {
				sums[v][i] += c
			}
		}
	}
	se := 0.5 / math.Sqrt(runs)
	for _, v := range published {
		want, err := s.RollUp(detail, x, v)
		if err != nil {
			t.Fatal(err)
		}
		for i, sum := range sums[v] {
			if d := math.Abs(sum/runs - want[i]); d > 4.5*se*math.Max(1, math.Sqrt(float64(s.ViewSize(detail)/len(want)))) {
				t.Errorf("%s cell %d: mean %v, estimate %v", s.FormatView(v), i, sum/runs, want[i])
			}
		}
	}
}

func TestNonNegativeLattice(t *testing.T) {
	s := crossedSchema(t)
	detail, x, exact := crossedCase(t, s, noise.NewSeeded(7))
	published := []domain.View{view(t, s, "geo:state,sex,age:band"), view(t, s, "geo,age:broad"), view(t, s, "geo:region,age")}
	res, err := NonNegativeLattice(context.Background(), s, detail, x, published, exact)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range published {
		got := res[v]
		if got.MaxDeviation > 1e-9 {
			t.Errorf("%s: deviation %v", s.FormatView(v), got.MaxDeviation)
		}
		for i, c := range got.Counts {
			if c < -1e-6 {
				t.Fatalf("%s: cell %d is %v", s.FormatView(v), i, c)
			}
		}
	}
}
