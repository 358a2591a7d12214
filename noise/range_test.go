package noise

import (
	"math"
	"testing"
)

// largeCountCases are counts no real table reaches, at the parameters of
// issue 19: every one must come back as itself plus the noise, never
// clamped. eps 4096 and rho 2^20 are the largest that package privacy
// accepts (MaxEpsilon, MaxRho); 2^900 and 2^1000 are the largest (powers of
// two) that NewLaplace and NewGaussian accept for sensitivity 1.
var largeCountCases = []struct {
	name  string
	count float64
	sens  float64 // L1 for Laplace, L2 for Gaussian
	eps   float64 // Laplace when > 0
	rho   float64 // Gaussian when > 0
}{
	{"grand total 20,000,000 at eps 100", 20_000_000, 1, 100, 0},
	{"cell 2,147,483,000 at eps 1.1", 2_147_483_000, 1, 1.1, 0},
	{"cell 2,147,483,000 at eps 1.1, sensitivity 2", 2_147_483_000, 2, 1.1, 0},
	{"population 330,000,000 at eps 10", 330_000_000, 1, 10, 0},
	{"2^53 at eps 1", 0x1p53, 1, 1, 0},
	{"2^53 at eps 4096 (privacy.MaxEpsilon)", 0x1p53, 1, 4096, 0},
	{"2^53 at eps 2^900 (largest NewLaplace accepts)", 0x1p53, 1, 0x1p900, 0},
	{"2^53-1 at eps 100, sensitivity 8", 0x1p53 - 1, 8, 100, 0},
	{"Gaussian: 20,000,000 at rho 5000", 20_000_000, 1, 0, 5000},
	{"Gaussian: 2,147,483,000 at rho 0.605", 2_147_483_000, 1, 0, 0.605},
	{"Gaussian: 330,000,000 at rho 50", 330_000_000, 1, 0, 50},
	{"Gaussian: 2^53 at rho 2^20 (privacy.MaxRho)", 0x1p53, 1, 0, 0x1p20},
	{"Gaussian: 2^53 at rho 2^1000 (near the largest finite)", 0x1p53, 1, 0, 0x1p1000},
	{"Gaussian: 2^53 at L2 sensitivity sqrt 2, rho 2^20", 0x1p53, math.Sqrt2, 0, 0x1p20},
}

// gridMech is what the large-count tests need of Laplace and Gaussian.
type gridMech struct {
	add    func(r *Rand, x float64) (float64, error)
	addTo  func(r *Rand, xs []float64) error
	sample func(r *Rand) int64
	grid   float64
	spread float64 // noise scale (Laplace) or sigma (Gaussian)
}

func newGridMech(t *testing.T, sens, eps, rho float64) gridMech {
	t.Helper()
	if eps > 0 {
		l, err := NewLaplace(sens, eps)
		if err != nil {
			t.Fatalf("NewLaplace(%v, %v): %v", sens, eps, err)
		}
		return gridMech{l.Add, l.AddTo, l.Dist().Sample, l.Grid(), l.Scale()}
	}
	g, err := NewGaussian(sens, rho)
	if err != nil {
		t.Fatalf("NewGaussian(%v, %v): %v", sens, rho, err)
	}
	return gridMech{g.Add, g.AddTo, g.Dist().Sample, g.Grid(), g.Sigma()}
}

// TestLargeCountsNotClamped releases each count of largeCountCases alone
// (Add) and in a vector (AddTo) and checks that the answer is the count
// plus the grid noise drawn from the same seed, rounded once to float64:
// x + Grid*Z is exact in Grid*Z (|Z| < 2^53 here), so float64 addition
// gives the float64 nearest to the exact noisy value. Before issue 19 the
// counts were clamped at 2^51 grid steps (16,777,216 at eps 100, 2^30 at
// eps 1.1).
func TestLargeCountsNotClamped(t *testing.T) {
	for _, tc := range largeCountCases {
		t.Run(tc.name, func(t *testing.T) {
			m := newGridMech(t, tc.sens, tc.eps, tc.rho)
			const n = 64
			xs := make([]float64, n)
			for i := range xs {
				xs[i] = tc.count
			}
			if err := m.addTo(NewSeeded(7), xs); err != nil {
				t.Fatal(err)
			}
			vec := NewSeeded(7) // AddTo draws one sample per element, in order
			for seed := range uint64(n) {
				got, err := m.add(NewSeeded(seed), tc.count)
				if err != nil {
					t.Fatal(err)
				}
				want := tc.count + m.grid*float64(m.sample(NewSeeded(seed)))
				if got != want {
					t.Fatalf("seed %d: Add(%.0f) = %.17g, want %.17g (count + grid noise)", seed, tc.count, got, want)
				}
				// Far inside 60 noise scales (probability e^-60 per draw),
				// give or take the float64 spacing at the count.
				ulp := math.Nextafter(tc.count, math.Inf(1)) - tc.count
				if math.Abs(got-tc.count) > 60*m.spread+ulp {
					t.Fatalf("seed %d: Add(%.0f) = %.17g is %g from the count, noise scale %g", seed, tc.count, got, got-tc.count, m.spread)
				}
				if wantVec := tc.count + m.grid*float64(m.sample(vec)); xs[seed] != wantVec {
					t.Fatalf("AddTo element %d = %.17g, want %.17g", seed, xs[seed], wantVec)
				}
			}
		})
	}
}

// TestRangeCoversCounts pins Range() = min(2^1000 Grid, 2^1000) >= MinRange
// >= 2^53 for the mechanisms of largeCountCases and at the extremes of the
// accepted parameters, and that Round moves no integer up to 2^53 (for
// grids up to 1) nor anything up to Range() that is on the grid.
func TestRangeCoversCounts(t *testing.T) {
	if MinRange < 0x1p53 {
		t.Fatalf("MinRange %g is below 2^53", MinRange)
	}
	type ranged struct {
		name         string
		grid, rng    float64
		round        func(float64) float64
		integersKept bool
	}
	var ms []ranged
	for _, tc := range largeCountCases {
		if tc.eps > 0 {
			l, err := NewLaplace(tc.sens, tc.eps)
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, ranged{tc.name, l.Grid(), l.Range(), l.Round, true})
		} else {
			g, err := NewGaussian(tc.sens, tc.rho)
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, ranged{tc.name, g.Grid(), g.Range(), g.Round, true})
		}
	}
	for _, p := range []struct{ b, res float64 }{{minGridParam, minGridParam}, {1, 1}, {maxGridParam, maxGridParam}} {
		l, err := NewLaplaceScale(p.b, p.res)
		if err != nil {
			t.Fatalf("NewLaplaceScale(%g, %g): %v", p.b, p.res, err)
		}
		ms = append(ms, ranged{"LaplaceScale", l.Grid(), l.Range(), l.Round, l.Grid() <= 1})
		g, err := NewGaussianSigma(p.b, p.res)
		if err != nil {
			t.Fatalf("NewGaussianSigma(%g, %g): %v", p.b, p.res, err)
		}
		ms = append(ms, ranged{"GaussianSigma", g.Grid(), g.Range(), g.Round, g.Grid() <= 1})
	}
	for _, m := range ms {
		if want := min(0x1p1000*m.grid, 0x1p1000); m.rng != want || m.rng < MinRange {
			t.Errorf("%s: grid %g: Range() = %g, want %g and at least MinRange", m.name, m.grid, m.rng, want)
		}
		xs := []float64{m.rng, -m.rng, m.rng - m.grid, 0x1p80, 0x1p60}
		if m.integersKept {
			xs = append(xs, 0x1p53, 0x1p53-1, 2_147_483_000, 330_000_000, 20_000_000, 1)
		}
		for _, x := range xs {
			if k := x / m.grid; math.Abs(x) > m.rng || k != math.Trunc(k) {
				continue // clamped, or off the grid
			}
			if got := m.round(x); got != x {
				t.Errorf("%s: grid %g: Round(%g) = %g, moved", m.name, m.grid, x, got)
			}
		}
		if got := m.round(math.Inf(1)); got != m.rng {
			t.Errorf("%s: Round(+Inf) = %g, want Range() %g", m.name, got, m.rng)
		}
		if got := m.round(math.Nextafter(m.rng, math.Inf(1)) * 2); got != m.rng {
			t.Errorf("%s: Round(beyond Range) = %g, want Range() %g", m.name, got, m.rng)
		}
	}
}

// TestAddStepsRoundsTheExactSum checks that the output in grid steps is the
// exact k + z rounded once to float64 (ties to even), including for samples
// beyond 2^53, which float64(z) alone would round first.
func TestAddStepsRoundsTheExactSum(t *testing.T) {
	for _, tc := range []struct {
		k    float64
		z    int64
		want float64
	}{
		{0, 0, 0},
		{5, -7, -2},
		{0x1p53 - 1, 1, 0x1p53},
		{0x1p53, 1, 0x1p53},       // 2^53+1: tie, to even 2^53
		{0x1p53, 3, 0x1p53 + 4},   // 2^53+3: tie, to even 2^53+4
		{0x1p53 + 2, -1, 0x1p53},  // 2^53+1 again
		{0x1p80, 1 << 20, 0x1p80}, // below half the spacing 2^28
		{0x1p80, 1<<27 + 1, 0x1p80 + 0x1p28},
		{1, 1<<53 + 1, 0x1p53 + 2}, // float64(z) would give 2^53, then 2^53+1 rounds to 2^53
		{-0x1p53, 1<<53 + 1, 1},    // float64(z) would give 0
		{3, -(1<<53 + 1), -0x1p53 + 2},
		{0x1p1000, math.MaxInt64, 0x1p1000}, // the exact sum rounds back
		{-0x1p60, math.MinInt64 + 1, math.Ldexp(-(1<<3 + 1), 60)},
	} {
		if got := addSteps(tc.k, tc.z); got != tc.want {
			t.Errorf("addSteps(%g, %d) = %.17g, want %.17g", tc.k, tc.z, got, tc.want)
		}
	}
}

// TestRoundHalfUpLarge checks roundHalfUp beyond 2^52, where every float64
// is an integer, and just below, where halves still exist.
func TestRoundHalfUpLarge(t *testing.T) {
	for _, tc := range []struct{ v, want float64 }{
		{0x1p51 + 0.5, 0x1p51 + 1},
		{-0x1p51 - 0.5, -0x1p51},
		{0x1p52 - 0.5, 0x1p52},
		{0x1p52 + 1, 0x1p52 + 1},
		{0x1p53, 0x1p53},
		{0x1p80, 0x1p80},
		{-0x1p1000, -0x1p1000},
	} {
		if got := roundHalfUp(tc.v); got != tc.want {
			t.Errorf("roundHalfUp(%.17g) = %.17g, want %.17g", tc.v, got, tc.want)
		}
	}
}

// TestLossBeyondExactOutputs computes, exactly, the output distribution of
// a grid mechanism whose noisy values pass 2^53 grid steps, where the output
// is the noisy value rounded to float64, and checks that neighbouring
// inputs d apart still have log-ratios at most Loss(d): the rounding is a
// function of the noisy value alone (post-processing). The mechanism has a
// small scale in steps, so that the rounding merges a large share of its
// mass; the public constructors never make one that small.
func TestLossBeyondExactOutputs(t *testing.T) {
	geo, err := NewDiscreteLaplace(2)
	if err != nil {
		t.Fatal(err)
	}
	l := Laplace{grid: 1, limit: stepLimit(1), geo: geo}
	const window = 200 // P(|Z| > 200) = e^-100: negligible against the ratios
	dist := func(x float64) map[float64]float64 {
		p := map[float64]float64{}
		k := l.Round(x)
		for z := int64(-window); z <= window; z++ {
			p[addSteps(k, z)*l.grid] += geo.Prob(z)
		}
		return p
	}
	for _, tc := range []struct{ x, d float64 }{
		{0x1p53 - 3, 1}, {0x1p53 - 1, 1}, {0x1p53, 2}, {0x1p53 - 2, 2}, {0x1p53 - 100, 3}, {0x1p54, 4},
	} {
		if tc.x+tc.d-tc.x != tc.d {
			t.Fatalf("inputs %.0f and %.0f + %v are not both float64", tc.x, tc.x, tc.d)
		}
		p, q := dist(tc.x), dist(tc.x+tc.d)
		var worst float64
		merged := false
		for o, po := range p {
			qo := q[o]
			if po < 1e-30 || qo < 1e-30 {
				continue // the window's edges
			}
			worst = max(worst, math.Abs(math.Log(po/qo)))
			merged = merged || o > 0x1p53
		}
		if !merged {
			t.Fatalf("x %.0f: no output beyond 2^53: the test does not test rounding", tc.x)
		}
		if bound := l.Loss(tc.d); worst > bound*(1+1e-9) {
			t.Errorf("x %.0f, d %v: log-ratio %v > Loss %v", tc.x, tc.d, worst, bound)
		}
	}
}
