package refine

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/knowdp/knowdp/noise"
)

// inequalities writes the chains and bounds of k as rows of G x <= h.
func inequalities(n int, k Knowledge) (*mat.Dense, []float64) {
	var rows [][]float64
	var h []float64
	for _, c := range k.Order {
		for t := 1; t < len(c); t++ {
			row := make([]float64, n)
			row[c[t-1]], row[c[t]] = 1, -1
			rows, h = append(rows, row), append(h, 0)
		}
	}
	for i := range n {
		if k.Lower != nil && !math.IsInf(k.Lower[i], -1) {
			row := make([]float64, n)
			row[i] = -1
			rows, h = append(rows, row), append(h, -k.Lower[i])
		}
		if k.Upper != nil && !math.IsInf(k.Upper[i], 1) {
			row := make([]float64, n)
			row[i] = 1
			rows, h = append(rows, row), append(h, k.Upper[i])
		}
	}
	if len(rows) == 0 {
		return nil, nil
	}
	g := mat.NewDense(len(rows), n, nil)
	for r, row := range rows {
		g.SetRow(r, row)
	}
	return g, h
}

func equalityRows(n int, eqs []Equality) (*mat.Dense, []float64) {
	if len(eqs) == 0 {
		return nil, nil
	}
	e := mat.NewDense(len(eqs), n, nil)
	f := make([]float64, len(eqs))
	for k, eq := range eqs {
		for j, i := range eq.Index {
			e.Set(k, i, eq.Coef[j])
		}
		f[k] = eq.Value
	}
	return e, f
}

func TestIsotonicMatchesBruteForce(t *testing.T) {
	r := noise.NewSeeded(11)
	for range 300 {
		n := 1 + int(r.Uint64N(9))
		x := randVec(r, n, -5, 5)
		if r.Uint64N(3) == 0 { // ties
			for i := range x {
				x[i] = math.Round(x[i])
			}
		}
		got := make([]float64, n)
		if err := Isotonic(got, x); err != nil {
			t.Fatal(err)
		}
		chain := make([]int, n)
		for i := range chain {
			chain[i] = i
		}
		want := x
		if n > 1 {
			g, h := inequalities(n, Knowledge{Order: [][]int{chain}})
			want = bruteProject(t, x, nil, nil, g, h)
		}
		if d := maxAbsDiff(got, want); d > 1e-9 {
			t.Fatalf("isotonic(%v) = %v, brute force %v", x, got, want)
		}
	}
}

func TestIsotonicLarge(t *testing.T) {
	r := noise.NewSeeded(12)
	const n = 100_000
	x := make([]float64, n)
	for i := range x {
		x[i] = float64(i)/1000 + unif(r, -30, 30)
	}
	got := make([]float64, n)
	if err := Isotonic(got, x); err != nil {
		t.Fatal(err)
	}
	// Non-decreasing, and each constant run's mean equals the mean of x on
	// it (pooling preserves sums), and the optimality condition of
	// isotonic regression: within a run, partial sums of x − fit from the
	// run's start are >= 0... checked on every run's prefix.
	for i := 1; i < n; i++ {
		if got[i] < got[i-1] {
			t.Fatalf("not non-decreasing at %d", i)
		}
	}
	for start := 0; start < n; {
		end := start + 1
		for end < n && got[end] == got[start] {
			end++
		}
		var s, prefix float64
		for i := start; i < end; i++ {
			s += x[i] - got[i]
			prefix = s
			if prefix < -1e-6*float64(end-start) {
				// A run whose prefix lies below its mean would have split.
				t.Fatalf("run [%d,%d): prefix sum of x − fit is %v < 0", start, end, prefix)
			}
		}
		if math.Abs(s) > 1e-6*float64(end-start) {
			t.Fatalf("run [%d,%d): x − fit sums to %v", start, end, s)
		}
		start = end
	}
}

// randomKnowledge draws constraints that some vector x0 satisfies.
func randomKnowledge(r *noise.Rand, n int, withEq, withOrder, overlapping, withRanges bool) Knowledge {
	x0 := randVec(r, n, -5, 5)
	var k Knowledge
	if withOrder {
		perm := make([]int, n)
		for i := range perm {
			perm[i] = i
		}
		for i := n - 1; i > 0; i-- {
			j := int(r.Uint64N(uint64(i + 1)))
			perm[i], perm[j] = perm[j], perm[i]
		}
		cut := 2 + int(r.Uint64N(uint64(n-1)))
		k.Order = append(k.Order, slices.Clone(perm[:cut]))
		if overlapping {
			// A second chain through the first chain's first answer.
			k.Order = append(k.Order, []int{perm[0], perm[n-1]})
		} else if n-cut >= 2 {
			k.Order = append(k.Order, slices.Clone(perm[cut:]))
		}
		// Make x0 satisfy the chains: sort x0 along each chain in turn
		// (for the overlapping case, fix the second chain afterwards).
		for _, c := range k.Order {
			vals := make([]float64, len(c))
			for t, i := range c {
				vals[t] = x0[i]
			}
			slices.Sort(vals)
			for t, i := range c {
				x0[i] = vals[t]
			}
		}
		if overlapping {
			c0 := k.Order[0]
			x0[perm[n-1]] = max(x0[perm[n-1]], x0[c0[0]])
			for t := 1; t < len(c0); t++ {
				x0[c0[t]] = max(x0[c0[t]], x0[c0[t-1]])
			}
		}
	}
	if withRanges {
		k.Lower, k.Upper = make([]float64, n), make([]float64, n)
		for i := range n {
			k.Lower[i], k.Upper[i] = math.Inf(-1), math.Inf(1)
			if r.Uint64N(2) == 0 {
				k.Lower[i] = x0[i] - unif(r, 0, 2)
			}
			if r.Uint64N(2) == 0 {
				k.Upper[i] = x0[i] + unif(r, 0, 2)
			}
		}
	}
	if withEq {
		m := 1 + int(r.Uint64N(2))
		for _, eq := range randomEqualities(r, n, m, n) {
			eq.Value = 0
			for j, i := range eq.Index {
				eq.Value += eq.Coef[j] * x0[i]
			}
			k.Equalities = append(k.Equalities, eq)
		}
	}
	return k
}

func TestRefinerMatchesBruteForce(t *testing.T) {
	r := noise.NewSeeded(13)
	for _, tc := range []struct {
		name                                  string
		eq, order, overlapping, ranges, exact bool
	}{
		{"equalities", true, false, false, false, true},
		{"order", false, true, false, false, true},
		{"ranges", false, false, false, true, true},
		{"order and ranges", false, true, false, true, true},
		{"overlapping orders", false, true, true, false, false},
		{"overlapping orders and ranges", false, true, true, true, false},
		{"equalities and order", true, true, false, false, false},
		{"equalities and ranges", true, false, false, true, false},
		{"everything", true, true, false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for trial := range 40 {
				n := 3 + int(r.Uint64N(3))
				k := randomKnowledge(r, n, tc.eq, tc.order, tc.overlapping, tc.ranges)
				ref, err := NewRefiner(n, k)
				if err != nil {
					t.Fatal(err)
				}
				if ref.Exact() != tc.exact {
					t.Fatalf("Exact() = %v, want %v (%s)", ref.Exact(), tc.exact, ref.Method())
				}
				y := randVec(r, n, -8, 8)
				got := make([]float64, n)
				if err := ref.Refine(context.Background(), got, y); err != nil {
					t.Fatal(err)
				}
				e, f := equalityRows(n, k.Equalities)
				g, h := inequalities(n, k)
				var want []float64
				if g == nil {
					want, _, _ = kkt(y, e, f, nil, nil, nil)
				} else {
					want = bruteProject(t, y, e, f, g, h)
				}
				tol := 1e-9
				if !tc.exact {
					tol = 1e-6
				}
				if d := maxAbsDiff(got, want); d > tol {
					t.Fatalf("trial %d (%s): refinement %v, brute force %v (difference %g)", trial, ref.Method(), got, want, d)
				}
			}
		})
	}
}

func TestRefinerEqualitiesOnlyIsTheorem3(t *testing.T) {
	ref, err := NewRefiner(7, Knowledge{Equalities: gradeEqualities(true)})
	if err != nil {
		t.Fatal(err)
	}
	if ref.PostProcessing() {
		t.Error("mu_A + mu_B = 80 is data-dependent: not post-processing")
	}
	ref2, _ := NewRefiner(7, Knowledge{Equalities: gradeEqualities(false), Lower: make([]float64, 7)})
	if !ref2.PostProcessing() {
		t.Error("definitional constraints and non-negativity are post-processing")
	}
	y := []float64{33, 41, 38, 22, 9, 141, 148}
	got := make([]float64, 7)
	if err := ref.Refine(context.Background(), got, y); err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(got, denseLS(t, y, gradeEqualities(true))); d > 1e-9 {
		t.Fatalf("differs from dense least squares by %g", d)
	}
}

func TestRefinerRejectsBadInput(t *testing.T) {
	inf := math.Inf(1)
	names := []string{"a", "b", "c"}
	for _, tc := range []struct {
		name string
		k    Knowledge
		want string
	}{
		{"short chain", Knowledge{Order: [][]int{{1}}}, "order chain 0 has 1 answers"},
		{"chain index", Knowledge{Order: [][]int{{0, 5}}}, "answer index 5 is outside"},
		{"chain repeat", Knowledge{Order: [][]int{{0, 1, 0}}, Names: names}, `names answer "a" twice`},
		{"bound length", Knowledge{Lower: []float64{0}}, "lower bounds have length 1, want 3"},
		{"NaN bound", Knowledge{Upper: []float64{0, math.NaN(), 1}, Names: names}, `upper bound of answer "b" is NaN`},
		{"lower +Inf", Knowledge{Lower: []float64{0, inf, 1}}, "lower bound of answer 1 is +Inf"},
		{"crossed bounds", Knowledge{Lower: []float64{0, 5, 0}, Upper: []float64{1, 4, 1}, Names: names}, `answer "b" has lower bound 5 above its upper bound 4`},
		{"chain infeasible", Knowledge{Order: [][]int{{0, 1, 2}}, Lower: []float64{5, -inf, -inf}, Upper: []float64{inf, inf, 3}, Names: names},
			`order chain 0 cannot be satisfied: answer "a" must be at least 5`},
		{"names length", Knowledge{Names: []string{"a"}}, "1 answer names for 3 answers"},
		{"bad equality", Knowledge{Equalities: []Equality{{Index: []int{7}, Coef: []float64{1}}}}, "outside 0..2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewRefiner(3, tc.k); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	// Equalities and ranges that no vector satisfies: Dykstra cannot
	// converge, and says so.
	ref, err := NewRefiner(2, Knowledge{
		Equalities: []Equality{{Label: "AB", Index: []int{0, 1}, Coef: []float64{1, 1}, Value: 80}},
		Upper:      []float64{10, 10},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := ref.Refine(context.Background(), make([]float64, 2), []float64{3, 4}); err == nil || !strings.Contains(err.Error(), "inconsistent") {
		t.Fatalf("infeasible constraints: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ref.Refine(ctx, make([]float64, 2), []float64{3, 4}); err != context.Canceled {
		t.Fatalf("cancelled context: %v", err)
	}
}
