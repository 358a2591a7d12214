package metricdp

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/noise"
)

// TestLaplacePerPairCondition checks, for every strategy, random metric and
// every pair (i, j), that the exact privacy loss of the released answers is
// within d(u_i, u_j), both as PairLoss computes it and from the rounded
// answers the mechanism actually perturbs on x and x - e_i + e_j.
func TestLaplacePerPairCondition(t *testing.T) {
	r := noise.NewSeeded(9)
	n := 16
	for name, m := range randomMetrics(t, r, n) {
		for _, s := range []Strategy{EqualShare, SameScale, Greedy, Optimal} {
			q := randomQueries(t, r, 3, n, s == Greedy)
			x := make([]int64, n)
			var total int64
			for i := range x {
				x[i] = 1 + int64(r.Uint64N(5))
				total += x[i]
			}
			lm, err := NewLaplace(bg, m, q, s, total)
			if err != nil {
				t.Fatalf("%s/%v: %v", name, s, err)
			}
			for i := range n {
				for j := range n {
					d := m.Dist(i, j)
					if i == j || math.IsInf(d, 1) {
						continue
					}
					if loss := lm.PairLoss(i, j); loss > d {
						t.Fatalf("%s/%v: PairLoss(%d,%d) = %v > d = %v", name, s, i, j, loss, d)
					}
					// Exact output ratio: the output for query l is
					// Grid*(round_l + Z) with Z discrete Laplace of scale T_l, so
					// the largest log ratio between x and x' is
					// sum_l |round_l - round'_l| / T_l.
					x2 := append([]int64(nil), x...)
					x2[i]--
					x2[j]++
					var logRatio float64
					for l := range q.Len() {
						g := lm.mech[l].Grid()
						k1 := exactDot(q, l, x, g) / g
						k2 := exactDot(q, l, x2, g) / g
						z := lm.mech[l].Dist()
						// Compare the probabilities of the same output directly.
						lr := math.Log(z.Prob(0) / z.Prob(int64(math.Abs(k1-k2))))
						if want := math.Abs(k1-k2) / z.Scale(); !near(lr, want, 1e-9) && lr < want {
							t.Fatalf("discrete Laplace log ratio %v, want %v", lr, want)
						}
						logRatio += math.Abs(k1-k2) / z.Scale()
					}
					if logRatio > d*(1+1e-12) {
						t.Fatalf("%s/%v: exact log ratio %v > d(%d,%d) = %v", name, s, logRatio, i, j, d)
					}
				}
			}
		}
	}
}

func TestLaplaceScalesAndRelease(t *testing.T) {
	m, _ := NewEuclidean([][]float64{{0}, {1}, {3}}, 1)
	q, _ := NewQueries([][]float64{{0, 1, 3}})
	lm, err := NewLaplace(bg, m, q, Optimal, 10)
	if err != nil {
		t.Fatal(err)
	}
	// Ideal scale 1, inflated by at most 2^-17 for the grid.
	if b := lm.Scales()[0]; b < 1 || b > 1+0x1p-17 {
		t.Fatalf("scale %v, want 1 (+ grid inflation)", b)
	}
	// Statistical check: mean and variance of the noise over many releases
	// within 5 standard errors.
	r := noise.NewSeeded(10)
	x := []int64{3, 3, 4} // answer 0*3 + 1*3 + 3*4 = 15
	const reps = 20000
	var sum, sum2 float64
	for range reps {
		v, err := lm.Release(r, x)
		if err != nil {
			t.Fatal(err)
		}
		e := v[0] - 15
		sum += e
		sum2 += e * e
	}
	variance := lm.Variances()[0]
	mean := sum / reps
	if se := math.Sqrt(variance / reps); math.Abs(mean) > 5*se {
		t.Errorf("noise mean %v, 5 SE = %v", mean, 5*se)
	}
	// Var of the squared noise for Laplace is 20 b^4: SE of the variance
	// estimate is sqrt(20 b^4 / reps).
	if got, se := sum2/reps, math.Sqrt(20/float64(reps)); math.Abs(got-variance) > 5*se {
		t.Errorf("noise variance %v, want %v (5 SE = %v)", got, variance, 5*se)
	}
}

func TestLaplaceRejectsNonPrivateScales(t *testing.T) {
	m, _ := NewEuclidean([][]float64{{0}, {1}, {3}}, 1)
	q, _ := NewQueries([][]float64{{0, 1, 3}})
	var pe *PairError
	if _, err := NewLaplaceScales(bg, m, q, []float64{0.9}, 5); !errors.As(err, &pe) {
		t.Fatalf("scale 0.9 accepted (need 1): %v", err)
	}
	for _, c := range []struct {
		scales []float64
		n      int64
		want   string
	}{
		{[]float64{1, 1}, 5, "2 scales"},
		{[]float64{math.NaN()}, 5, "scale NaN"},
		{[]float64{-1}, 5, "scale -1"},
		{[]float64{0}, 5, "not d_X-private"},
		{[]float64{2}, -1, "records"},
		{[]float64{2}, 1 << 62, "do not fit"},
	} {
		if _, err := NewLaplaceScales(bg, m, q, c.scales, c.n); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewLaplaceScales(%v, %d) error %v, want %q", c.scales, c.n, err, c.want)
		}
	}
	lm, err := NewLaplaceScales(bg, m, q, []float64{2}, 5)
	if err != nil {
		t.Fatal(err)
	}
	r := noise.NewSeeded(1)
	for _, c := range []struct {
		x    []int64
		want string
	}{
		{[]int64{1, 2}, "2 cells"},
		{[]int64{1, -1, 5}, "cell 1 is -1"},
		{[]int64{1, 1, 1}, "3 records"},
	} {
		if _, err := lm.Release(r, c.x); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Release(%v) error %v, want %q", c.x, err, c.want)
		}
	}
	other, _ := NewEuclidean([][]float64{{0}, {1}}, 1)
	if _, err := NewLaplace(bg, other, q, Optimal, 5); err == nil {
		t.Error("universe size mismatch accepted")
	}
}

func TestExactDot(t *testing.T) {
	r := noise.NewSeeded(11)
	for trial := range 200 {
		n := 1 + int(r.Uint64N(20))
		row := make([]float64, n)
		x := make([]int64, n)
		for i := range row {
			row[i] = (uniform(r) - 0.3) * math.Ldexp(1, int(r.Uint64N(40))-20)
			x[i] = int64(r.Uint64N(1000))
		}
		rows := [][]float64{row}
		if n == 1 {
			rows[0] = append(rows[0], 0)
			x = append(x, 0)
		}
		q, _ := NewQueries(rows)
		exact := new(big.Rat)
		for i, c := range rows[0] {
			term := new(big.Rat).SetFloat64(c)
			exact.Add(exact, term.Mul(term, new(big.Rat).SetInt64(x[i])))
		}
		want, _ := exact.Float64()
		if got := exactDot(q, 0, x, 0); got != want {
			t.Fatalf("trial %d: exactDot %v, want %v", trial, got, want)
		}
		// Huge counts exercise the 192-bit accumulators' carries.
		huge := make([]int64, len(x))
		hugeSum := new(big.Rat)
		for i := range huge {
			huge[i] = int64(r.Uint64N(1 << 62))
			term := new(big.Rat).SetFloat64(rows[0][i])
			hugeSum.Add(hugeSum, term.Mul(term, new(big.Rat).SetInt64(huge[i])))
		}
		if got, want := exactDot(q, 0, huge, 0), must(hugeSum.Float64()); got != want {
			t.Fatalf("trial %d: exactDot with huge counts %v, want %v", trial, got, want)
		}
		g := math.Ldexp(1, int(r.Uint64N(30))-25)
		// round half up of exact/g, via big.Rat.
		v := new(big.Rat).Quo(exact, new(big.Rat).SetFloat64(g))
		v.Add(v, big.NewRat(1, 2))
		fl := new(big.Int).Div(v.Num(), v.Denom()) // Euclidean division floors for positive denominators
		wantG := float64(fl.Int64()) * g
		if got := exactDot(q, 0, x, g); got != wantG {
			t.Fatalf("trial %d grid %v: exactDot %v, want %v", trial, g, got, wantG)
		}
	}
}

func ExampleNewLaplace() {
	// Three places on a line at 0, 1 and 3 km, with budget 1 per km: places
	// far apart are easy to tell apart, close ones are not.
	m, _ := NewEuclidean([][]float64{{0}, {1}, {3}}, 1)
	q, _ := NewQueries([][]float64{{0, 1, 3}}) // e.g. distance to the first place
	lm, _ := NewLaplace(bg, m, q, Optimal, 10)
	_, base, _ := Baseline(bg, m, q)
	fmt.Printf("d_X scale %.4f, eps-DP scale %.4f\n", lm.Scales()[0], base)
	out, _ := lm.Release(noise.NewSeeded(1), []int64{3, 3, 4}) // seeded: NOT private
	fmt.Println(len(out))
	// Output:
	// d_X scale 1.0000, eps-DP scale 3.0000
	// 1
}

func must(v float64, _ bool) float64 { return v }
