package moe

import (
	"fmt"
	"math"
	"testing"

	"gonum.org/v1/gonum/integrate/quad"
)

// coverageOf returns P(|E| <= m) for E = Σ c Σ_n Laplace(1) by Gil-Pelaez,
// on panels of a quarter standard deviation cut where the tail is below
// 1e-11: a finer quadrature than Law.Margin's.
func coverageOf(terms []Term, m float64) float64 {
	var sigma2 float64
	for _, t := range terms {
		sigma2 += 2 * t.Count * t.Scale * t.Scale
	}
	logPhi := func(t float64) float64 {
		var l float64
		for _, tm := range terms {
			l -= tm.Count * math.Log1p(tm.Scale*tm.Scale*t*t)
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
				r += tm.Count * tm.Scale * tm.Scale * lo * lo / (1 + tm.Scale*tm.Scale*lo*lo)
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
	e := Law{Terms: []Term{{Scale: 1, Count: 1}}, NormalVariance: 2, NormalMaxScale: 1}.Margin(WideRule())
	m, cov := e.MOE90, e.CoverageErr
	if got := 1 - math.Exp(-m)*(1+m/2); math.Abs(got-0.9) > cov+1e-6 {
		t.Errorf("Laplace + Laplace as normal: coverage %v, stated 0.9 ± %v", got, cov)
	}
	if cov < 1e-3 {
		t.Errorf("Laplace + Laplace as normal: bound %v, but the true coverage is %v", cov, 1-math.Exp(-m)*(1+m/2))
	}
	for _, tc := range []struct {
		kept    []Term
		dropped Term    // n iid Laplace(c), left out
		maxCov  float64 // the bound must be at most this
	}{
		{[]Term{{Scale: 1, Count: 1}}, Term{Scale: 0.5, Count: 2}, 0.05},
		{[]Term{{Scale: 1, Count: 1}}, Term{Scale: 0.2, Count: 30}, 0.005},
		{[]Term{{Scale: 1, Count: 1}, {Scale: 0.3, Count: 5}}, Term{Scale: 0.05, Count: 1000}, 1e-3},
		{[]Term{{Scale: 2, Count: 1}, {Scale: 0.5, Count: 3}}, Term{Scale: 0.4, Count: 8}, 0.02},
		{[]Term{{Scale: 0.1, Count: 1}}, Term{Scale: 1, Count: 3}, 0.2}, // D dominates
	} {
		d := tc.dropped
		vd := 2 * d.Count * d.Scale * d.Scale
		e := Law{Terms: tc.kept, NormalVariance: vd, NormalMaxScale: d.Scale}.Margin(WideRule())
		m, cov := e.MOE90, e.CoverageErr
		got := coverageOf(append(append([]Term(nil), tc.kept...), d), m)
		name := fmt.Sprintf("%v + %v iid Laplace(%v) as normal", tc.kept, d.Count, d.Scale)
		if math.Abs(got-0.9) > cov+1e-6 {
			t.Errorf("%s: coverage %v, stated 0.9 ± %v", name, got, cov)
		}
		if cov > tc.maxCov {
			t.Errorf("%s: bound %v > %v (true coverage %v)", name, cov, tc.maxCov, got)
		}
		t.Logf("%s: margin %v, coverage %.6f, bound %.2g", name, m, got, cov)
	}
	// No left-out part: no bound, and the margin is Quantile90's.
	terms := []Term{{Scale: 1, Count: 1}, {Scale: 0.4, Count: 4}}
	if e := (Law{Terms: terms}).Margin(NarrowRule()); e.CoverageErr != 0 || e.MOE90 != Quantile90(terms) {
		t.Errorf("nothing left out: margin %v bound %v, Quantile90 %v", e.MOE90, e.CoverageErr, Quantile90(terms))
	}
}
