package moe

import (
	"math"
	"testing"

	"github.com/knowdp/knowdp/noise"
)

// The exact margin of one grid Laplace variable is the smallest grid
// multiple with P(|noise| <= m) >= 0.9, by summing the distribution.
func TestLaplaceMOE90IsExact(t *testing.T) {
	for _, tc := range []struct{ sens, eps float64 }{{1, 1}, {2, 0.1}, {4, 3}} {
		lap, err := noise.NewLaplace(tc.sens, tc.eps)
		if err != nil {
			t.Fatal(err)
		}
		got := Laplace90(lap)
		k := int64(math.Round(got / lap.Grid()))
		cdf := lap.Dist().Prob(0) // P(|Z| <= k), summed
		for z := int64(1); z <= k; z++ {
			cdf += 2 * lap.Dist().Prob(z)
		}
		if cdf < 0.9 {
			t.Errorf("sens %v eps %v: P(|Z| <= %d) = %v < 0.9", tc.sens, tc.eps, k, cdf)
		}
		if c := cdf - 2*lap.Dist().Prob(k); c >= 0.9 {
			t.Errorf("sens %v eps %v: %d is not the smallest (P(|Z| <= %d) = %v)", tc.sens, tc.eps, k, k-1, c)
		}
		// And it is the continuous Laplace quantile b ln 10 to the grid.
		if want := lap.Scale() * math.Ln10; math.Abs(got-want) > 2*lap.Grid() {
			t.Errorf("sens %v eps %v: %v, b ln 10 = %v", tc.sens, tc.eps, got, want)
		}
	}
}

// The Gil-Pelaez quantile against laws with closed forms and a seeded
// simulation.
func TestQuantile90(t *testing.T) {
	// One Laplace(b): b ln 10.
	if got, want := Quantile90([]Term{{Scale: 3, Count: 1}}), 3*math.Ln10; math.Abs(got-want) > 1e-5*want {
		t.Errorf("one Laplace: %v, want %v", got, want)
	}
	// Two iid Laplace(b): P(|S| > m) = exp(-m/b)(1 + m/(2b)).
	lo, hi := 0.0, 10.0
	for range 100 {
		m := (lo + hi) / 2
		if math.Exp(-m)*(1+m/2) > 0.1 {
			lo = m
		} else {
			hi = m
		}
	}
	if got := Quantile90([]Term{{Scale: 1, Count: 2}}); math.Abs(got-lo) > 1e-5*lo {
		t.Errorf("two Laplace: %v, want %v", got, lo)
	}
	if got := Quantile90([]Term{{Scale: 1, Count: 1}, {Scale: -1, Count: 1}}); math.Abs(got-lo) > 1e-5*lo {
		t.Errorf("Laplace minus Laplace: %v, want %v", got, lo)
	}
	// Many: nearly normal, 1.6449 σ (the fourth cumulant moves it by
	// about 1e-3 for 400 terms).
	if got, want := Quantile90([]Term{{Scale: 1, Count: 400}}), 1.6448536*math.Sqrt(800); math.Abs(got-want) > 2e-3*want {
		t.Errorf("400 Laplace: %v, normal %v", got, want)
	}
	// A mixture, by simulation: 1e5 draws, so the coverage of the computed
	// margin is 0.9 within 4 standard errors (4 * 9.5e-4).
	terms := []Term{{Scale: 1, Count: 1}, {Scale: 0.4, Count: 4}, {Scale: -0.15, Count: 10}}
	m := Quantile90(terms)
	r := noise.NewSeeded(21)
	lap := func() float64 { // continuous Laplace(1) as a difference of exponentials
		u := func() float64 { return (float64(r.Uint64()>>11) + 0.5) / (1 << 53) }
		return math.Log(u()) - math.Log(u())
	}
	const draws = 100000
	in := 0
	for range draws {
		var e float64
		for _, tm := range terms {
			for range int(tm.Count) {
				e += tm.Scale * lap()
			}
		}
		if math.Abs(e) <= m {
			in++
		}
	}
	if cov := float64(in) / draws; math.Abs(cov-0.9) > 4*math.Sqrt(0.09/draws) {
		t.Errorf("mixture: coverage %v of margin %v", cov, m)
	}
}

// TestMeanAbs pins the expected absolute error Law.Margin returns
// against closed forms (one Laplace(b) has E|X| = b; a normal of variance
// s² has s·sqrt(2/π); two equal Laplace(b) have E|X| = 3b/2) and, where
// there is none, against the same integral on a much finer quadrature.
func TestMeanAbs(t *testing.T) {
	for _, tc := range []struct {
		terms []Term
		vd    float64
		want  float64
	}{
		{[]Term{{Scale: 2, Count: 1}}, 0, 2},
		{[]Term{{Scale: 1, Count: 2}}, 0, 1.5},
		// 10^5 small Laplace terms of total variance 1: nearly normal
		// (the fourth cumulant moves E|E| by about 1e-6), against the
		// finer quadrature.
		{[]Term{{Scale: math.Sqrt(1.0 / 200000), Count: 100000}}, 0, 0},
		// A normal part alone: E|N(0, 4)| = 2 sqrt(2/π).
		{nil, 4, 2 * math.Sqrt(2/math.Pi)},
		// Laplace(1) + N(0, 1): E_l[σ sqrt(2/π) exp(-l²/2σ²) + l (1 - 2Φ(-l/σ))]
		// over the Laplace density, integrated independently (numpy,
		// trapezoids of 5e-5 on [-60, 60]).
		{[]Term{{Scale: 1, Count: 1}}, 1, 1.3210411447431925},
		{[]Term{{Scale: 0.5, Count: 3}, {Scale: 2, Count: 1}}, 0.3, 0},
	} {
		want := tc.want
		if want == 0 {
			// No closed form: the same integral on a much finer
			// quadrature (meanAbsRef).
			want = meanAbsRef(tc.terms, tc.vd)
		} else if ref := meanAbsRef(tc.terms, tc.vd); math.Abs(ref-want) > 1e-9*want {
			t.Fatalf("%+v + N(0, %v): the reference quadrature gives %v, the closed form %v", tc.terms, tc.vd, ref, want)
		}
		for _, rule := range []Rule{WideRule(), NarrowRule()} {
			if got := (Law{Terms: tc.terms, NormalVariance: tc.vd}).Margin(rule).MeanAbs; math.Abs(got-want) > 2e-7*want {
				t.Errorf("%+v + N(0, %v), panels of %v: %v, want %v", tc.terms, tc.vd, rule.Width(), got, want)
			}
		}
	}
}

// meanAbsRef is E|E| = (2/π) ∫_0^∞ (1 - φ(t))/t² dt in t = tan θ on
// 400 panels of the 5-point Gauss-Legendre rule over [0, π/2].
func meanAbsRef(terms []Term, vd float64) float64 {
	f := func(theta float64) float64 {
		s := math.Sin(theta)
		if s < 1e-6 {
			var v float64
			for _, t := range terms {
				v += 2 * t.Count * t.Scale * t.Scale
			}
			return (v + vd) / 2
		}
		u := math.Tan(theta)
		l := -vd * u * u / 2
		for _, t := range terms {
			l -= t.Count * math.Log1p(t.Scale*t.Scale*u*u)
		}
		return -math.Expm1(l) / (s * s)
	}
	x := [5]float64{0, 0.5384693101056831, -0.5384693101056831, 0.9061798459386640, -0.9061798459386640}
	w := [5]float64{0.5688888888888889, 0.4786286704993665, 0.4786286704993665, 0.2369268850561891, 0.2369268850561891}
	const panels = 400
	var sum float64
	for k := range panels {
		a := float64(k) * math.Pi / 2 / panels
		h, m := math.Pi/4/panels, a+math.Pi/4/panels
		for i := range x {
			sum += h * w[i] * f(m+h*x[i])
		}
	}
	return 2 / math.Pi * sum
}
