package gls

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/knowdp/knowdp/query"
)

// census is the shape of a census table set: geography region(4) >
// state(51) > county(3,000) crossed with age broad(3) > 5-year(18) >
// single years(86) and sex(2), measuring state x 5-year x sex, county x
// broad and region x single year, with state totals exact.
type census struct {
	p         Problem
	meas, inv [][]float64
}

func newCensus(seed uint64) *census {
	rng := rand.New(rand.NewPCG(seed, 1))
	// Counties per state: unequal (1 to ~250, as in the US), 3,000 in all.
	const states, counties = 51, 3000
	w := make([]float64, states)
	var sum float64
	for s := range w {
		w[s] = math.Exp(rng.NormFloat64())
		sum += w[s]
	}
	per := make([]int, states)
	left := counties - states
	for s := range per {
		per[s] = 1 + int(float64(left)*w[s]/sum)
	}
	tot := 0
	for _, n := range per {
		tot += n
	}
	for s := 0; tot < counties; s = (s + 1) % states {
		per[s]++
		tot++
	}
	county := make([]int32, 0, counties) // county -> state
	for s, n := range per {
		for range n {
			county = append(county, int32(s))
		}
	}
	region := make([]int32, states) // state -> region: 9, 12, 17, 13 states
	for s := range region {
		switch {
		case s < 9:
			region[s] = 0
		case s < 21:
			region[s] = 1
		case s < 38:
			region[s] = 2
		default:
			region[s] = 3
		}
	}
	countyRegion := make([]int32, counties)
	for c, s := range county {
		countyRegion[c] = region[s]
	}
	// Ages 0..85+ in 5-year bands (the last 85+), bands in 0-19, 20-64, 65+.
	band := make([]int32, 86)
	broad := make([]int32, 86)
	for a := range band {
		band[a] = int32(min(a/5, 17))
		switch {
		case a < 20:
			broad[a] = 0
		case a < 65:
			broad[a] = 1
		default:
			broad[a] = 2
		}
	}
	ru := func(g []int32) query.Factor {
		f, err := query.NewRollUp(g)
		if err != nil {
			panic(err)
		}
		return f
	}
	gState, gRegion, aBand, aBroad := ru(county), ru(countyRegion), ru(band), ru(broad)
	I, T := query.NewIdentity, query.NewTotal
	shape := []int{counties, 86, 2}
	c := &census{p: Problem{Shape: shape}}
	truth := make([]float64, counties*86*2)
	for i := range truth {
		truth[i] = float64(rng.IntN(40))
	}
	for _, m := range []struct {
		name string
		t    query.Term
		v    float64
	}{
		{"state x 5-year x sex", query.Term{gState, aBand, I(2)}, 2},
		{"county x broad", query.Term{I(counties), aBroad, T(2)}, 4},
		{"region x single year", query.Term{gRegion, I(86), T(2)}, 1},
	} {
		c.p.Measurements = append(c.p.Measurements, Measurement{Name: m.name, Term: m.t, Variance: m.v})
		z := m.t.Apply(truth)
		for r := range z {
			z[r] += rng.NormFloat64() * math.Sqrt(m.v)
		}
		c.meas = append(c.meas, z)
	}
	st := query.Term{gState, T(86), T(2)}
	c.p.Invariants = []Invariant{{Name: "state totals", Term: st}}
	c.inv = [][]float64{st.Apply(truth)}
	c.p.Queries = []Query{
		{Name: "state x 5-year x sex", Term: query.Term{gState, aBand, I(2)}},
		{Name: "county x broad", Term: query.Term{I(counties), aBroad, T(2)}},
		{Name: "region x single year", Term: query.Term{gRegion, I(86), T(2)}},
		{Name: "state x broad x sex", Term: query.Term{gState, aBroad, I(2)}},
		{Name: "region x broad", Term: query.Term{gRegion, aBroad, T(2)}},
	}
	return c
}

// TestCensus solves the census shape and checks what the estimate must
// satisfy: the certificate, the invariants exactly, and the tables' mutual
// consistency (state x broad x sex summed over sex equals state x broad
// from county x broad summed over counties, and so on, since they come
// from one table).
func TestCensus(t *testing.T) {
	if testing.Short() {
		t.Skip("the census shape takes seconds")
	}
	c := newCensus(1)
	pl, err := NewPlan(c.p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	est, err := pl.Solve(context.Background(), c.meas, c.inv)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("certificate %+v", est.Certificate)
	st, err := est.Answer(c.p.Invariants[0].Term)
	if err != nil {
		t.Fatal(err)
	}
	for s, v := range st {
		if math.Abs(v-c.inv[0][s]) > 1e-8*math.Abs(c.inv[0][s]) {
			t.Fatalf("state %d: estimate %v, invariant %v", s, v, c.inv[0][s])
		}
	}
	// Region x broad from the two paths that reach it.
	rb := est.Answers[4]
	sbs := est.Answers[3] // state x broad x sex
	region := c.p.Queries[4].Term[0].Group
	stateOf := c.p.Queries[0].Term[0].Group
	fromStates := make([]float64, len(rb))
	for s := range 51 {
		var r int32
		for x, g := range stateOf {
			if int(g) == s {
				r = region[x]
				break
			}
		}
		for b := range 3 {
			fromStates[int(r)*3+b] += sbs[(s*3+b)*2] + sbs[(s*3+b)*2+1]
		}
	}
	for i := range rb {
		if math.Abs(rb[i]-fromStates[i]) > 1e-6*math.Abs(rb[i]) {
			t.Fatalf("region x broad cell %d: %v directly, %v from states", i, rb[i], fromStates[i])
		}
	}
}

func benchCensus(b *testing.B, pre Preconditioner) {
	c := newCensus(1)
	pl, err := NewPlan(c.p, Options{Preconditioner: pre})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var it int
	for b.Loop() {
		est, err := pl.Solve(context.Background(), c.meas, c.inv)
		if err != nil {
			b.Fatal(err)
		}
		it = est.Certificate.Iterations
	}
	b.ReportMetric(float64(it), "iterations")
}

// BenchmarkCensusSolve: one estimate of the census shape (516,000 cells,
// tolerance 1e-10) with each preconditioner.
func BenchmarkCensusSolveKronecker(b *testing.B) { benchCensus(b, Kronecker) }
func BenchmarkCensusSolveJacobi(b *testing.B)    { benchCensus(b, Jacobi) }

// BenchmarkCensusPlan: the structure-only set-up.
func BenchmarkCensusPlan(b *testing.B) {
	c := newCensus(1)
	for b.Loop() {
		if _, err := NewPlan(c.p, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCensusVariances: every row's variance of region x broad (12
// rows; no two regions or broad groups alike, so 12 solves).
func BenchmarkCensusVariances(b *testing.B) {
	c := newCensus(1)
	pl, err := NewPlan(c.p, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var v *Variances
	for b.Loop() {
		v, err = pl.Variances(context.Background(), 4)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(v.Solves), "solves")
	b.ReportMetric(float64(v.Certificate.Iterations), "iterations")
}

// TestCensusVarianceSolves: the variances of county x broad take one solve
// per orbit of counties (counties of states of the same size in the same
// region are alike; no two regions are) times the three broad groups (no
// two alike), instead of one per cell.
func TestCensusVarianceSolves(t *testing.T) {
	c := newCensus(1)
	pl, err := NewPlan(c.p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	stateOf := c.p.Queries[0].Term[0].Group
	regionOf := c.p.Queries[4].Term[0].Group
	size := map[int32]int{}
	region := map[int32]int32{}
	for x, s := range stateOf {
		size[s]++
		region[s] = regionOf[x]
	}
	kinds := map[[2]int]bool{}
	for s, n := range size {
		kinds[[2]int{int(region[s]), n}] = true
	}
	got, err := pl.VarianceSolves(1)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(kinds) * 3; got != want {
		t.Fatalf("county x broad: %d solves, want %d", got, want)
	}
	if rows := c.p.Queries[1].Term.Rows(); got >= rows/10 {
		t.Fatalf("%d solves for %d rows", got, rows)
	}
	t.Logf("county x broad: %d solves for %d cells", got, c.p.Queries[1].Term.Rows())
}
