package audit

import (
	"math"
	"testing"
)

func TestClopperPearsonKnownValues(t *testing.T) {
	tests := []struct {
		k, n   int
		alpha  float64
		lo, hi float64
	}{
		// R: binom.test(5, 10)$conf.int
		{5, 10, 0.025, 0.1870860, 0.8129140},
		// R: binom.test(1, 2)$conf.int
		{1, 2, 0.025, 0.01257912, 0.98742088},
		// k = 0 and k = n have closed forms: hi = 1 - alpha^(1/n), lo = alpha^(1/n).
		{0, 10, 0.05, 0, 1 - math.Pow(0.05, 0.1)},
		{10, 10, 0.05, math.Pow(0.05, 0.1), 1},
	}
	for _, tc := range tests {
		lo, hi, err := ClopperPearson(tc.k, tc.n, tc.alpha)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(lo-tc.lo) > 1e-6*math.Max(tc.lo, 1e-3) || math.Abs(hi-tc.hi) > 1e-6*math.Max(tc.hi, 1e-3) {
			t.Errorf("ClopperPearson(%d, %d, %v) = [%.8g, %.8g], want [%.8g, %.8g]", tc.k, tc.n, tc.alpha, lo, hi, tc.lo, tc.hi)
		}
	}
}

// TestClopperPearsonInvertsTheBinomial checks the bounds against their
// definition, solved by bisection on exact binomial tail sums: lo is the p
// with P(X >= k) = alpha, hi the p with P(X <= k) = alpha.
func TestClopperPearsonInvertsTheBinomial(t *testing.T) {
	const alpha = 0.025
	tail := func(k, n int, p float64, upper bool) float64 {
		var s float64
		for j := 0; j <= n; j++ {
			if (upper && j >= k) || (!upper && j <= k) {
				s += math.Exp(lchoose(n, j) + float64(j)*math.Log(p) + float64(n-j)*math.Log1p(-p))
			}
		}
		return s
	}
	solve := func(f func(p float64) float64) float64 { // f(p) = alpha, f increasing
		a, b := 0.0, 1.0
		for range 100 {
			m := (a + b) / 2
			if f(m) < alpha {
				a = m
			} else {
				b = m
			}
		}
		return (a + b) / 2
	}
	for _, tc := range [][2]int{{3, 2000}, {17, 50}, {49, 50}, {1, 1}, {600, 1000}} {
		k, n := tc[0], tc[1]
		wantLo := solve(func(p float64) float64 { return tail(k, n, p, true) })
		// P(X <= k) falls with p: solve 2 alpha - P(X <= k) = alpha.
		wantHi := solve(func(p float64) float64 { return 2*alpha - tail(k, n, p, false) })
		lo, hi, err := ClopperPearson(k, n, alpha)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(lo-wantLo) > 1e-9*wantLo || (k < n && math.Abs(hi-wantHi) > 1e-9*wantHi) {
			t.Errorf("ClopperPearson(%d, %d) = [%.10g, %.10g], want [%.10g, %.10g]", k, n, lo, hi, wantLo, wantHi)
		}
	}
}

// TestClopperPearsonCoverage sums the binomial probabilities of the
// outcomes whose bound misses p: at most alpha for every p, exactly.
func TestClopperPearsonCoverage(t *testing.T) {
	const alpha = 0.05
	for _, n := range []int{1, 7, 40, 300} {
		for _, p := range []float64{0.001, 0.05, 0.3, 0.5, 0.77, 0.999} {
			var missLo, missHi float64
			for k := 0; k <= n; k++ {
				lo, hi, err := ClopperPearson(k, n, alpha)
				if err != nil {
					t.Fatal(err)
				}
				pk := math.Exp(lchoose(n, k) + float64(k)*math.Log(p) + float64(n-k)*math.Log1p(-p))
				if lo > p {
					missLo += pk
				}
				if hi < p {
					missHi += pk
				}
			}
			if missLo > alpha || missHi > alpha {
				t.Errorf("n=%d p=%v: P(lo > p) = %v, P(hi < p) = %v, want <= %v", n, p, missLo, missHi, alpha)
			}
		}
	}
}

func TestClopperPearsonErrors(t *testing.T) {
	for _, tc := range []struct {
		k, n  int
		alpha float64
	}{{0, 0, 0.05}, {-1, 5, 0.05}, {6, 5, 0.05}, {1, 5, 0}, {1, 5, 0.5}, {1, 5, math.NaN()}} {
		if _, _, err := ClopperPearson(tc.k, tc.n, tc.alpha); err == nil {
			t.Errorf("ClopperPearson(%d, %d, %v): no error", tc.k, tc.n, tc.alpha)
		}
	}
}
