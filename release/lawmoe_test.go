package release

import (
	"fmt"
	"math"
	"testing"

	"gonum.org/v1/gonum/integrate/quad"
)

// coverageOf returns P(|E| <= m) for E = Σ c Σ_n Laplace(1) by Gil-Pelaez,
// on panels of a quarter standard deviation cut where the tail is below
// 1e-11: a finer quadrature than lawQuantile90's.
func coverageOf(terms []lawTerm, m float64) float64 {
	var sigma2 float64
	for _, t := range terms {
		sigma2 += 2 * t.n * t.c * t.c
	}
	logPhi := func(t float64) float64 {
		var l float64
		for _, tm := range terms {
			l -= tm.n * math.Log1p(tm.c*tm.c*t*t)
		}
		return l
	}
	nodes, weights := make([]float64, 12), make([]float64, 12)
	w := 0.25 / math.Sqrt(sigma2)
	quad.Legendre{}.FixedLocations(nodes, weights, 0, w)
	var sum float64
	for k := 0; ; k++ {
		lo := float64(k) * w
		if k > 0 {
			var r float64
			for _, tm := range terms {
				r += tm.n * tm.c * tm.c * lo * lo / (1 + tm.c*tm.c*lo*lo)
			}
			if math.Exp(logPhi(lo))/(2*r) < 1e-11 {
				break
			}
		}
		for i, v := range nodes {
			t := lo + v
			sum += weights[i] * math.Sin(m*t) / t * math.Exp(logPhi(t))
		}
	}
	return 2 / math.Pi * sum
}

// TestLawQuantileCoverageBound checks the stated coverage error of a margin
// whose smallest terms are taken as normal: for laws whose left-out part D
// is known term by term, the true coverage of the margin (D exact) is 0.9
// within the stated bound; the bound is small when D is many small terms
// and large when it is a few big ones.
func TestLawQuantileCoverageBound(t *testing.T) {
	// Two iid Laplace(1), one left out: P(|S| > m) = exp(-m)(1 + m/2).
	e := lawQuantile90([]lawTerm{{c: 1, n: 1}}, 2, 1, glWide())
	m, cov := e.moe, e.covErr
	if got := 1 - math.Exp(-m)*(1+m/2); math.Abs(got-0.9) > cov+1e-6 {
		t.Errorf("Laplace + Laplace as normal: coverage %v, stated 0.9 ± %v", got, cov)
	}
	if cov < 1e-3 {
		t.Errorf("Laplace + Laplace as normal: bound %v, but the true coverage is %v", cov, 1-math.Exp(-m)*(1+m/2))
	}
	for _, tc := range []struct {
		kept    []lawTerm
		dropped lawTerm // n iid Laplace(c), left out
		maxCov  float64 // the bound must be at most this
	}{
		{[]lawTerm{{c: 1, n: 1}}, lawTerm{c: 0.5, n: 2}, 0.05},
		{[]lawTerm{{c: 1, n: 1}}, lawTerm{c: 0.2, n: 30}, 0.005},
		{[]lawTerm{{c: 1, n: 1}, {c: 0.3, n: 5}}, lawTerm{c: 0.05, n: 1000}, 1e-3},
		{[]lawTerm{{c: 2, n: 1}, {c: 0.5, n: 3}}, lawTerm{c: 0.4, n: 8}, 0.02},
		{[]lawTerm{{c: 0.1, n: 1}}, lawTerm{c: 1, n: 3}, 0.2}, // D dominates
	} {
		d := tc.dropped
		vd := 2 * d.n * d.c * d.c
		e := lawQuantile90(tc.kept, vd, d.c, glWide())
		m, cov := e.moe, e.covErr
		got := coverageOf(append(append([]lawTerm(nil), tc.kept...), d), m)
		name := fmt.Sprintf("%v + %v iid Laplace(%v) as normal", tc.kept, d.n, d.c)
		if math.Abs(got-0.9) > cov+1e-6 {
			t.Errorf("%s: coverage %v, stated 0.9 ± %v", name, got, cov)
		}
		if cov > tc.maxCov {
			t.Errorf("%s: bound %v > %v (true coverage %v)", name, cov, tc.maxCov, got)
		}
		t.Logf("%s: margin %v, coverage %.6f, bound %.2g", name, m, got, cov)
	}
	// No left-out part: no bound, and the margin is quantile90's.
	terms := []lawTerm{{c: 1, n: 1}, {c: 0.4, n: 4}}
	if e := lawQuantile90(terms, 0, 0, glNarrow()); e.covErr != 0 || e.moe != quantile90(terms) {
		t.Errorf("nothing left out: margin %v bound %v, quantile90 %v", e.moe, e.covErr, quantile90(terms))
	}
}
