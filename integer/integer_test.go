package integer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate"
	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/noise"
)

// integerCase is a table shape and the dimensions of its margins.
type integerCase struct {
	name    string
	sizes   []int
	margins [][]int
	tu      bool // at most two maximal margins: exact rounding guaranteed
}

var integerCases = []integerCase{
	{"none", []int{3, 4}, nil, true},
	{"grand total", []int{3, 4}, [][]int{{}}, true},
	{"one margin", []int{3, 4}, [][]int{{0}}, true},
	{"nested", []int{3, 2, 4}, [][]int{{0}, {0, 1}}, true},
	{"two 1-D of 2-D", []int{4, 5}, [][]int{{0}, {1}}, true},
	{"two 1-D of 3-D", []int{3, 4, 2}, [][]int{{0}, {2}}, true},
	{"two chains", []int{3, 4, 2}, [][]int{{1}, {0, 1}, {2}, {}}, true},
	{"two 2-D of 3-D", []int{3, 4, 3}, [][]int{{0, 1}, {1, 2}}, true},
	{"two 2-D of 4-D", []int{2, 3, 2, 3}, [][]int{{0, 1}, {1, 2}}, true},
	{"whole table", []int{2, 3}, [][]int{{0, 1}, {0}}, true},
	{"three 1-D of 3-D", []int{3, 4, 3}, [][]int{{0}, {1}, {2}}, false},
	{"three 2-D of 3-D", []int{3, 3, 4}, [][]int{{0, 1}, {1, 2}, {0, 2}}, false},
}

// marginsOf returns the margins of an integer table on the given
// dimensions, computed from the definition (marginalMatrix), not project.
func marginsOf(s *domain.Schema, over domain.Cuboid, table []float64, dims [][]int) []Margin {
	out := make([]Margin, len(dims))
	for i, d := range dims {
		k := testkit.CuboidOf(d)
		var v mat.VecDense
		v.MulVec(testkit.MarginalMatrix(s, over, k), mat.NewVecDense(len(table), table))
		out[i] = Margin{Dims: k, Targets: append([]float64(nil), v.RawVector().Data...)}
	}
	return out
}

// trueDeviation is the largest |marginal - target| of y on m, from the
// definition.
func trueDeviation(s *domain.Schema, over domain.Cuboid, y []float64, m Margin) float64 {
	var v mat.VecDense
	v.MulVec(testkit.MarginalMatrix(s, over, m.Dims), mat.NewVecDense(len(y), y))
	var d float64
	for k, got := range v.RawVector().Data {
		d = max(d, math.Abs(got-m.Targets[k]))
	}
	return d
}

// consistentNonNegative returns a real table >= 0 whose margins on dims are
// those of an integer table (to float rounding): the least-squares
// projection of a perturbed table with cells of at least 3, redrawn until
// no cell is negative.
func consistentNonNegative(t *testing.T, r *noise.Rand, s *domain.Schema, over domain.Cuboid, dims [][]int) ([]float64, []Margin) {
	t.Helper()
	for range 100 {
		truth := make([]float64, s.CuboidSize(over))
		for i := range truth {
			truth[i] = float64(3 + r.Uint64N(15))
		}
		ms := marginsOf(s, over, truth, dims)
		x := testkit.Noisy(r, truth, 1.5)
		inv := make([]estimate.Invariant, len(ms))
		for i, m := range ms {
			inv[i] = estimate.Invariant{Cuboid: m.Dims, Counts: m.Targets}
		}
		if err := estimate.Consistent(s, over, x, inv); err != nil {
			t.Fatal(err)
		}
		ok := true
		for _, v := range x {
			ok = ok && v >= 0
		}
		if ok {
			return x, ms
		}
	}
	t.Fatal("no non-negative consistent table in 100 draws")
	return nil, nil
}

func TestRoundIntegerKeepsMargins(t *testing.T) {
	r := noise.NewSeeded(11)
	for _, tc := range integerCases {
		t.Run(tc.name, func(t *testing.T) {
			s := testkit.TestSchema(t, tc.sizes...)
			over := domain.Base(len(tc.sizes))
			for trial := range 20 {
				truth := make([]float64, s.Cells())
				for i := range truth {
					// Many small counts, so that the noisy estimate has
					// negative cells and non-negativity binds.
					truth[i] = float64(r.Uint64N(4) * r.Uint64N(6))
				}
				ms := marginsOf(s, over, truth, tc.margins)
				x := testkit.Noisy(r, truth, 2)
				res, err := RoundInteger(context.Background(), s, over, x, ms, r)
				if err != nil {
					t.Fatal(err)
				}
				for i, v := range res.Counts {
					if v < 0 || v != math.Trunc(v) {
						t.Fatalf("trial %d: cell %d = %v, not a non-negative integer", trial, i, v)
					}
				}
				var worst float64
				for i, m := range ms {
					want := trueDeviation(s, over, res.Counts, m)
					if res.Deviations[i] != want {
						t.Errorf("trial %d: margin %s reported deviation %v, true %v", trial, s.Format(m.Dims), res.Deviations[i], want)
					}
					worst = max(worst, want)
				}
				if res.MaxDeviation != worst || res.Exact != (worst == 0) {
					t.Errorf("trial %d: MaxDeviation %v Exact %v, true deviation %v", trial, res.MaxDeviation, res.Exact, worst)
				}
				if tc.tu && !res.Exact {
					t.Errorf("trial %d: margins %v are totally unimodular but the rounding missed by %v (%s)", trial, tc.margins, worst, res.Method)
				}
				if !tc.tu {
					// The two margins with the most cells are kept exactly.
					max := maximalMargins(s, ms)
					for _, m := range max[:2] {
						if d := trueDeviation(s, over, res.Counts, m); d != 0 {
							t.Errorf("trial %d: first two margins must be exact, %s is off by %v", trial, s.Format(m.Dims), d)
						}
					}
				}
			}
		})
	}
}

// In the totally unimodular cases every cell goes to the floor or the
// ceiling of its value.
func TestRoundIntegerFloorOrCeiling(t *testing.T) {
	r := noise.NewSeeded(12)
	for _, tc := range integerCases {
		if !tc.tu {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			s := testkit.TestSchema(t, tc.sizes...)
			over := domain.Base(len(tc.sizes))
			for trial := range 20 {
				x, ms := consistentNonNegative(t, r, s, over, tc.margins)
				res, err := RoundInteger(context.Background(), s, over, x, ms, r)
				if err != nil {
					t.Fatal(err)
				}
				for i, v := range res.Counts {
					lo, hi := math.Floor(x[i]+1e-9), math.Ceil(x[i]-1e-9)
					if v != lo && v != hi {
						t.Fatalf("trial %d: cell %d: %v rounded to %v", trial, i, x[i], v)
					}
				}
				if !res.Exact {
					t.Fatalf("trial %d: not exact: %s", trial, res.Method)
				}
			}
		})
	}
}

// Over many seeded roundings the mean of every cell is its value: the
// rounding adds no bias. A cell rounded to its floor or ceiling has
// variance f(1-f), f its fractional part; the tolerance is 5 standard
// errors of the mean.
func TestRoundIntegerUnbiased(t *testing.T) {
	const n = 3000
	r := noise.NewSeeded(13)
	for _, tc := range integerCases {
		if !tc.tu {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			s := testkit.TestSchema(t, tc.sizes...)
			over := domain.Base(len(tc.sizes))
			x, ms := consistentNonNegative(t, r, s, over, tc.margins)
			mean := make([]float64, len(x))
			for range n {
				res, err := RoundInteger(context.Background(), s, over, x, ms, r)
				if err != nil {
					t.Fatal(err)
				}
				for i, v := range res.Counts {
					mean[i] += v / n
				}
			}
			for i := range x {
				f := x[i] - math.Floor(x[i])
				se := math.Sqrt(f * (1 - f) / n)
				if d := math.Abs(mean[i] - x[i]); d > 5*se+1e-6 {
					t.Errorf("cell %d: mean of %d roundings %v, value %v (%.1f standard errors)", i, n, mean[i], x[i], d/se)
				}
			}
		})
	}
}

// The dependent rounding alone, on node sums that are whole numbers, keeps
// every node sum and makes every edge integral.
func TestDependentRoundKeepsNodeSums(t *testing.T) {
	r := noise.NewSeeded(14)
	s := testkit.TestSchema(t, 5, 6, 3)
	over := domain.Base(3)
	for trial := range 50 {
		x, _ := consistentNonNegative(t, r, s, over, [][]int{{0, 1}, {1, 2}})
		g := &network{nA: 30, nB: 18, a: cellGroups(s.Sizes(), testkit.CuboidOf([]int{0, 1})), b: cellGroups(s.Sizes(), testkit.CuboidOf([]int{1, 2}))}
		w := make([]int64, len(x))
		f := make([]int64, len(x))
		for i, v := range x {
			f[i], w[i] = splitFixed(v)
		}
		sumA, sumB := make([]int64, g.nA), make([]int64, g.nB)
		for c := range w {
			sumA[g.a[c]] += w[c]
			sumB[g.b[c]] += w[c]
		}
		if err := dependentRound(context.Background(), g, w, r); err != nil {
			t.Fatal(err)
		}
		gotA, gotB := make([]int64, g.nA), make([]int64, g.nB)
		for c := range w {
			if w[c] != 0 && w[c] != fixedOne {
				t.Fatalf("trial %d: edge %d left fractional: %d", trial, c, w[c])
			}
			gotA[g.a[c]] += w[c]
			gotB[g.b[c]] += w[c]
		}
		// Node sums that were within 2^-20 of a whole number end on it;
		// the others (float noise never makes them) may not.
		for v := range sumA {
			if want := (sumA[v] + fixedOne/2) / fixedOne * fixedOne; iabs(sumA[v]-want) < fixedOne>>20 && gotA[v] != want {
				t.Errorf("trial %d: A node %d sum %d, want %d", trial, v, gotA[v], want)
			}
		}
		for v := range sumB {
			if want := (sumB[v] + fixedOne/2) / fixedOne * fixedOne; iabs(sumB[v]-want) < fixedOne>>20 && gotB[v] != want {
				t.Errorf("trial %d: B node %d sum %d, want %d", trial, v, gotB[v], want)
			}
		}
	}
}

// With fractional node sums (no exact margins), maximal paths occur; every
// edge still ends integral with its expectation kept, and every node sum at
// its floor or ceiling.
func TestDependentRoundPaths(t *testing.T) {
	const n = 4000
	r := noise.NewSeeded(15)
	s := testkit.TestSchema(t, 3, 4)
	g := &network{nA: 3, nB: 4, a: cellGroups(s.Sizes(), 1), b: cellGroups(s.Sizes(), 2)}
	frac := []float64{0.3, 0.55, 0.1, 0.9, 0.25, 0.5, 0.5, 0.05, 0.7, 0.35, 0.6, 0.2}
	mean := make([]float64, len(frac))
	for range n {
		w := make([]int64, len(frac))
		for i, f := range frac {
			w[i] = int64(f * float64(fixedOne))
		}
		if err := dependentRound(context.Background(), g, w, r); err != nil {
			t.Fatal(err)
		}
		for a := range 3 {
			var got, want float64
			for b := range 4 {
				got += float64(w[a*4+b] / fixedOne)
				want += frac[a*4+b]
			}
			if got != math.Floor(want) && got != math.Ceil(want) {
				t.Fatalf("row %d sums to %v, not the floor or ceiling of %v", a, got, want)
			}
		}
		for i := range w {
			if w[i] != 0 && w[i] != fixedOne {
				t.Fatalf("edge %d left fractional", i)
			}
			mean[i] += float64(w[i]/fixedOne) / n
		}
	}
	for i, f := range frac {
		if se := math.Sqrt(f * (1 - f) / n); math.Abs(mean[i]-f) > 5*se {
			t.Errorf("edge %d: mean %v, want %v", i, mean[i], f)
		}
	}
}

// bruteClosest enumerates every non-negative integer table with the
// margins tA (rows) and tB (columns) of a nA x nB x k table (k parallel
// cells per row and column pair) and returns the least sum |y - p|.
func bruteClosest(p []float64, nA, nB, k int, tA, tB []int64) float64 {
	best := math.Inf(1)
	remA, remB := append([]int64(nil), tA...), append([]int64(nil), tB...)
	var rec func(c int, cost float64)
	rec = func(c int, cost float64) {
		if c == len(p) {
			for _, v := range remA {
				if v != 0 {
					return
				}
			}
			for _, v := range remB {
				if v != 0 {
					return
				}
			}
			best = min(best, cost)
			return
		}
		a, b := c/(nB*k), (c/k)%nB
		for v := range min(remA[a], remB[b]) + 1 {
			remA[a] -= v
			remB[b] -= v
			rec(c+1, cost+math.Abs(float64(v)-p[c]))
			remA[a] += v
			remB[b] += v
		}
	}
	rec(0, 0)
	return best
}

// The min-cost flow finds the integer table with the given margins closest
// to p in L1, against enumeration of all tables.
func TestClosestTableBruteForce(t *testing.T) {
	r := noise.NewSeeded(16)
	for _, sh := range [][3]int{{2, 2, 1}, {2, 3, 1}, {3, 3, 1}, {3, 4, 1}, {2, 2, 2}, {1, 3, 2}, {2, 3, 2}} {
		nA, nB, k := sh[0], sh[1], sh[2]
		s := testkit.TestSchema(t, nA, nB, k)
		g := &network{nA: nA, nB: nB, a: cellGroups(s.Sizes(), 1), b: cellGroups(s.Sizes(), 2)}
		for trial := range 15 {
			table := make([]float64, nA*nB*k)
			for i := range table {
				table[i] = float64(r.Uint64N(3))
			}
			tA, tB := make([]int64, nA), make([]int64, nB)
			for i, v := range table {
				tA[i/(nB*k)] += int64(v)
				tB[(i/k)%nB] += int64(v)
			}
			// p: anything, including negative values and values far from
			// any table with these margins; integers (as in the repair
			// after rounding) in every third trial.
			p := make([]float64, len(table))
			for i := range p {
				p[i] = float64(r.Uint64N(1000))/200 - 1
				if trial%3 == 0 {
					p[i] = float64(r.Uint64N(4))
				}
			}
			y, left, err := closestTable(context.Background(), g, p, tA, tB)
			if err != nil || left != 0 {
				t.Fatalf("%v: left %d, err %v", sh, left, err)
			}
			sa, sb := make([]int64, nA), make([]int64, nB)
			var cost float64
			for i, v := range y {
				if v < 0 {
					t.Fatalf("%v: negative cell", sh)
				}
				sa[i/(nB*k)] += v
				sb[(i/k)%nB] += v
				cost += math.Abs(float64(v) - p[i])
			}
			if fmt.Sprint(sa, sb) != fmt.Sprint(tA, tB) {
				t.Fatalf("%v: margins %v %v, want %v %v", sh, sa, sb, tA, tB)
			}
			if want := bruteClosest(p, nA, nB, k, tA, tB); math.Abs(cost-want) > 1e-9 {
				t.Errorf("%v trial %d: min-cost flow cost %v, brute force %v (p %v, margins %v %v)", sh, trial, cost, want, p, tA, tB)
			}
		}
	}
}

// When z's margins are off (here by up to 0.45 at some nodes, far more than
// floating-point error), the rounding can end a margin off by one; the
// repair then restores every margin exactly.
func TestRoundOnNetworkRepairs(t *testing.T) {
	r := noise.NewSeeded(18)
	s := testkit.TestSchema(t, 4, 5)
	over := domain.Base(2)
	g := &network{nA: 4, nB: 5, a: cellGroups(s.Sizes(), 1), b: cellGroups(s.Sizes(), 2)}
	repaired := 0
	for trial := range 300 {
		x, ms := consistentNonNegative(t, r, s, over, [][]int{{0}, {1}})
		// Floating-point noise of 1e-9 on every cell: exact margins all
		// the same.
		jit := append([]float64(nil), x...)
		for i := range jit {
			jit[i] = max(0, jit[i]+(float64(r.Uint64N(2001))-1000)*1e-12)
		}
		y, _, err := roundOnNetwork(context.Background(), g, jit, wholeTargets(ms[0].Targets), wholeTargets(ms[1].Targets), r)
		if err != nil {
			t.Fatal(err)
		}
		if !marginsHold(g, y, wholeTargets(ms[0].Targets), wholeTargets(ms[1].Targets)) {
			t.Fatalf("trial %d: margins not kept under floating-point noise", trial)
		}
		// Move mass between cells of different rows and columns: the
		// margins no longer hold for x.
		x[0] += 0.45
		x[len(x)-1] = max(0, x[len(x)-1]-0.2)
		y, moved, err := roundOnNetwork(context.Background(), g, x, wholeTargets(ms[0].Targets), wholeTargets(ms[1].Targets), r)
		if err != nil {
			t.Fatal(err)
		}
		if !marginsHold(g, y, wholeTargets(ms[0].Targets), wholeTargets(ms[1].Targets)) {
			t.Fatalf("trial %d: margins not restored (moved %d)", trial, moved)
		}
		if moved > 0 {
			repaired++
		}
		for _, v := range y {
			if v < 0 {
				t.Fatalf("trial %d: negative cell", trial)
			}
		}
	}
	if repaired == 0 {
		t.Error("the repair was never needed: the test does not exercise it")
	}
	t.Logf("%d of 300 roundings repaired", repaired)
}

// The local search keeps the first two margins and every cell >= 0, and
// never increases the deviation of the others.
func TestLocalSearch(t *testing.T) {
	r := noise.NewSeeded(17)
	for _, tc := range []struct {
		sizes   []int
		margins [][]int
	}{
		{[]int{3, 4, 3}, [][]int{{0}, {1}, {2}}},
		{[]int{3, 3, 4}, [][]int{{0, 1}, {1, 2}, {0, 2}}},
		{[]int{2, 3, 2, 2}, [][]int{{0, 1}, {1, 2}, {0, 3}, {2, 3}}},
	} {
		s := testkit.TestSchema(t, tc.sizes...)
		over := domain.Base(len(tc.sizes))
		exact := 0
		for trial := range 30 {
			truth := make([]float64, s.Cells())
			for i := range truth {
				truth[i] = float64(r.Uint64N(4))
			}
			ms := maximalMargins(s, marginsOf(s, over, truth, tc.margins))
			// A table exact on the first two margins: the closest to a
			// perturbed truth.
			g := &network{nA: s.CuboidSize(ms[0].Dims), nB: s.CuboidSize(ms[1].Dims),
				a: cellGroups(s.Sizes(), ms[0].Dims), b: cellGroups(s.Sizes(), ms[1].Dims)}
			y, _, err := closestTable(context.Background(), g, testkit.Noisy(r, truth, 2), wholeTargets(ms[0].Targets), wholeTargets(ms[1].Targets))
			if err != nil {
				t.Fatal(err)
			}
			total := func() float64 {
				yf := make([]float64, len(y))
				for i, v := range y {
					yf[i] = float64(v)
				}
				var d float64
				for _, m := range ms[2:] {
					var v mat.VecDense
					v.MulVec(testkit.MarginalMatrix(s, over, m.Dims), mat.NewVecDense(len(yf), yf))
					for k, got := range v.RawVector().Data {
						d += math.Abs(got - m.Targets[k])
					}
				}
				for _, m := range ms[:2] {
					if dev := trueDeviation(s, over, yf, m); dev != 0 {
						t.Fatalf("%v: margin %s off by %v", tc.margins, s.Format(m.Dims), dev)
					}
				}
				return d
			}
			before := total()
			moves, err := localSearch(context.Background(), s, over, y, ms[0].Dims, ms[1].Dims, ms[2:])
			if err != nil {
				t.Fatal(err)
			}
			after := total()
			for _, v := range y {
				if v < 0 {
					t.Fatalf("%v: negative cell after local search", tc.margins)
				}
			}
			if after > before || (moves > 0) != (after < before) {
				t.Errorf("%v trial %d: total deviation %v -> %v with %d moves", tc.margins, trial, before, after, moves)
			}
			if after == 0 {
				exact++
			}
		}
		t.Logf("%v: %d of 30 tables exact on every margin after local search", tc.margins, exact)
	}
}

// A cuboid of one cell (the grand total) rounds to its target.
func TestRoundIntegerGrandTotal(t *testing.T) {
	s := testkit.TestSchema(t, 2, 3)
	for _, x := range []float64{6.3, -2, 7, 40} {
		res, err := RoundInteger(context.Background(), s, 0, []float64{x}, []Margin{{Dims: 0, Targets: []float64{7}}}, noise.NewSeeded(1))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Counts) != 1 || res.Counts[0] != 7 || !res.Exact {
			t.Errorf("x = %v: %v, exact %v", x, res.Counts, res.Exact)
		}
	}
}

// A cancelled context stops the rounding with the context's error.
func TestRoundIntegerCancelled(t *testing.T) {
	s := testkit.TestSchema(t, 4, 5)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	x := make([]float64, 20)
	ms := []Margin{{Dims: 1, Targets: []float64{0, 0, 0, 0}}}
	if _, err := RoundInteger(ctx, s, domain.Base(2), x, ms, noise.NewSeeded(1)); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

func TestRoundIntegerErrors(t *testing.T) {
	s := testkit.TestSchema(t, 2, 3)
	ctx := context.Background()
	r := noise.NewSeeded(1)
	x := []float64{1, 2, 3, 4, 5, 6}
	run := func(c domain.Cuboid, x []float64, ms ...Margin) func() error {
		return func() error {
			_, err := RoundInteger(ctx, s, c, x, ms, r)
			return err
		}
	}
	testkit.CheckErrors(t, []testkit.ErrorCase{
		{Name: "cuboid", Run: run(8, x), Words: "beyond the schema"},
		{Name: "size", Run: run(3, x[:5]), Words: "has 6 cells, got 5 values"},
		{Name: "nan", Run: run(3, []float64{1, 2, math.NaN(), 4, 5, 6}), Words: "cell d0=v0, d1=v2: value NaN"},
		{Name: "outside", Run: run(1, x[:2], Margin{Dims: 2, Targets: []float64{1, 1, 1}}), Words: "margin 1 has dimensions outside the cuboid {d0}"},
		{Name: "targets", Run: run(3, x, Margin{Dims: 1, Targets: []float64{1}}), Words: "margin 1 {d0} has 2 cells, got 1 targets"},
		{Name: "fraction", Run: run(3, x, Margin{Dims: 2, Targets: []float64{1, 2.5, 3}}), Words: "margin 1 {d1}, cell d1=v1: target 2.5 is not a non-negative whole number"},
		{Name: "negative", Run: run(3, x, Margin{Dims: 1, Targets: []float64{-1, 3}}), Words: "cell d0=v0: target -1"},
		{Name: "disagree", Run: run(3, x, Margin{Dims: 1, Targets: []float64{3, 4}}, Margin{Dims: 3, Targets: []float64{1, 1, 1, 1, 1, 3}}),
			Is: estimate.ErrInconsistent, Words: "margins 1 {d0} and 2 {d0,d1} disagree on cell d0=v1: 4 vs 5"},
		{Name: "total", Run: run(3, x, Margin{Dims: 1, Targets: []float64{3, 4}}, Margin{Dims: 2, Targets: []float64{1, 1, 1}}),
			Is: estimate.ErrInconsistent, Words: "disagree on the grand total: 7 vs 3"},
	})
}

// BenchmarkRoundInteger rounds a non-negative table that already keeps two
// margins (so the least-squares step is one sweep) of 10^5 and 10^6 cells.
func BenchmarkRoundInteger(b *testing.B) {
	for _, dims := range []int{5, 6} {
		sizes := make([]int, dims)
		for i := range sizes {
			sizes[i] = 10
		}
		s := testkit.TestSchema(b, sizes...)
		over := domain.Base(dims)
		r := noise.NewSeeded(1)
		truth := make([]float64, s.Cells())
		for i := range truth {
			truth[i] = float64(10 + r.Uint64N(20))
		}
		c := &cube.Cube{Schema: s, Counts: truth}
		inv := invariantsOf(c, []domain.Cuboid{testkit.CuboidOf([]int{0, 1, 2}), testkit.CuboidOf([]int{2, 3})})
		x := testkit.Noisy(r, truth, 0.5)
		if err := estimate.Consistent(s, over, x, inv); err != nil {
			b.Fatal(err)
		}
		margins := []Margin{{inv[0].Cuboid, inv[0].Counts}, {inv[1].Cuboid, inv[1].Counts}}
		b.Run(fmt.Sprintf("1e%d", dims), func(b *testing.B) {
			for b.Loop() {
				res, err := RoundInteger(context.Background(), s, over, x, margins, r)
				if err != nil || !res.Exact {
					b.Fatal(err, res.Method)
				}
			}
		})
	}
}

// On a cuboid other than the base, the invariants' margins are their
// counts summed onto the dimensions they share with it, and the rounding
// keeps them.
func TestInvariantMarginsOnCuboid(t *testing.T) {
	r := noise.NewSeeded(19)
	s := testkit.TestSchema(t, 3, 4, 2, 3)
	over := testkit.CuboidOf([]int{0, 2, 3})
	for trial := range 10 {
		truth := &cube.Cube{Schema: s, Counts: testkit.RandomTable(r, s.Cells())}
		exact := []domain.Cuboid{testkit.CuboidOf([]int{0, 1}), testkit.CuboidOf([]int{1, 2, 3}), testkit.CuboidOf([]int{1})}
		ms, err := InvariantMargins(s, over, invariantsOf(truth, exact))
		if err != nil {
			t.Fatal(err)
		}
		table := truth.Project(over)
		want := marginsOf(s, over, table, [][]int{{0}, {2, 3}, {}})
		for i := range ms {
			if ms[i].Dims != want[i].Dims || fmt.Sprint(ms[i].Targets) != fmt.Sprint(want[i].Targets) {
				t.Fatalf("margin %d: %s %v, want %s %v", i, s.Format(ms[i].Dims), ms[i].Targets, s.Format(want[i].Dims), want[i].Targets)
			}
		}
		res, err := RoundInteger(context.Background(), s, over, testkit.Noisy(r, table, 3), ms, r)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Exact {
			t.Errorf("trial %d: %s", trial, res.Method)
		}
		for i, m := range ms {
			if d := trueDeviation(s, over, res.Counts, m); d != 0 || res.Deviations[i] != 0 {
				t.Errorf("trial %d: margin %s off by %v (reported %v)", trial, s.Format(m.Dims), d, res.Deviations[i])
			}
		}
	}
	testkit.CheckErrors(t, []testkit.ErrorCase{
		{Name: "cuboid", Run: func() error { _, err := InvariantMargins(s, 16, nil); return err }, Words: "beyond the schema"},
		{Name: "invariant", Run: func() error {
			_, err := InvariantMargins(s, over, []estimate.Invariant{{Cuboid: 32, Counts: []float64{1}}})
			return err
		}, Words: "exact cuboid 0x20 has dimensions beyond"},
		{Name: "counts", Run: func() error {
			_, err := InvariantMargins(s, over, []estimate.Invariant{{Cuboid: 1, Counts: []float64{1}}})
			return err
		}, Words: "exact cuboid {d0} has 3 cells, got 1 counts"},
	})
}

// invariantsOf returns the exact counts of the given cuboids of c.
func invariantsOf(c *cube.Cube, exact []domain.Cuboid) []estimate.Invariant {
	inv := make([]estimate.Invariant, len(exact))
	for i, e := range exact {
		inv[i] = estimate.Invariant{Cuboid: e, Counts: c.Project(e)}
	}
	return inv
}
