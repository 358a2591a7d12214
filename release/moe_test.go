package release

import (
	"context"
	"math"
	"testing"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/testkit"
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
		got := laplaceMOE90(lap)
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
	if got, want := quantile90([]lawTerm{{c: 3, n: 1}}), 3*math.Ln10; math.Abs(got-want) > 1e-5*want {
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
	if got := quantile90([]lawTerm{{c: 1, n: 2}}); math.Abs(got-lo) > 1e-5*lo {
		t.Errorf("two Laplace: %v, want %v", got, lo)
	}
	if got := quantile90([]lawTerm{{c: 1, n: 1}, {c: -1, n: 1}}); math.Abs(got-lo) > 1e-5*lo {
		t.Errorf("Laplace minus Laplace: %v, want %v", got, lo)
	}
	// Many: nearly normal, 1.6449 σ (the fourth cumulant moves it by
	// about 1e-3 for 400 terms).
	if got, want := quantile90([]lawTerm{{c: 1, n: 400}}), 1.6448536*math.Sqrt(800); math.Abs(got-want) > 2e-3*want {
		t.Errorf("400 Laplace: %v, normal %v", got, want)
	}
	// A mixture, by simulation: 1e5 draws, so the coverage of the computed
	// margin is 0.9 within 4 standard errors (4 * 9.5e-4).
	terms := []lawTerm{{c: 1, n: 1}, {c: 0.4, n: 4}, {c: -0.15, n: 10}}
	m := quantile90(terms)
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
			for range int(tm.n) {
				e += tm.c * lap()
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

// coverage returns the fraction of released cells within their margin of
// error of the truth, over n seeded releases.
func coverage(t *testing.T, n int, release func(r *noise.Rand) (got, truth [][]float64, moe []float64)) float64 {
	t.Helper()
	r := noise.NewSeeded(31)
	in, all := 0, 0
	for range n {
		got, truth, moe := release(noise.NewSeeded(r.Uint64()))
		for i := range got {
			for k := range got[i] {
				all++
				if math.Abs(got[i][k]-truth[i][k]) <= moe[i] {
					in++
				}
			}
		}
	}
	return float64(in) / float64(all)
}

// TestMOE90Coverage: over many seeded releases, 90% ± 1.5% of released
// cells lie within their margin of error, for one cuboid alone (exact
// discrete margin), one cuboid with invariants (Release.MOE90), and a
// workload of overlapping cuboids with invariants.
func TestMOE90Coverage(t *testing.T) {
	s := testkit.TestSchema(t, 3, 4, 2)
	c := &cube.Cube{Schema: s, Counts: testkit.RandomTable(noise.NewSeeded(2), s.Cells())}
	ctx := context.Background()
	workload := func(spec workloadSpec) func(r *noise.Rand) ([][]float64, [][]float64, []float64) {
		needs, err := spec.Needs(s)
		if err != nil {
			t.Fatal(err)
		}
		exact := map[domain.Cuboid][]float64{}
		for _, n := range needs {
			exact[n] = c.Project(n)
		}
		return func(r *noise.Rand) (got, truth [][]float64, moe []float64) {
			rel, err := releaseWorkload(ctx, s, exact, spec, r)
			if err != nil {
				t.Fatal(err)
			}
			for _, tb := range rel.Tables {
				if tb.Public {
					continue
				}
				got = append(got, tb.Counts)
				truth = append(truth, c.Project(tb.Cuboid))
				moe = append(moe, tb.MOE90)
			}
			return got, truth, moe
		}
	}
	for _, tc := range []struct {
		name string
		n    int
		rel  func(r *noise.Rand) ([][]float64, [][]float64, []float64)
	}{
		{"one cuboid", 800, workload(workloadSpec{Epsilon: eps(t, 0.5), Cuboids: []domain.Cuboid{0b011}})},
		{"workload", 300, workload(workloadSpec{Epsilon: eps(t, 1), Exact: []domain.Cuboid{0b001}, Cuboids: []domain.Cuboid{0b011, 0b110, 0b101, 0b010}})},
		{"invariants", 800, func(r *noise.Rand) ([][]float64, [][]float64, []float64) {
			rel, err := releaseCube(ctx, c, cuboidSpec{Epsilon: eps(t, 0.5), Exact: []domain.Cuboid{0b011, 0b110}, Cuboid: domain.Base(3)}, r)
			if err != nil {
				t.Fatal(err)
			}
			return [][]float64{rel.Counts}, [][]float64{c.Counts}, []float64{rel.MOE90}
		}},
	} {
		cov := coverage(t, tc.n, tc.rel)
		t.Logf("%s: coverage %.4f", tc.name, cov)
		if math.Abs(cov-0.9) > 0.015 {
			t.Errorf("%s: coverage %v, want 0.9 ± 0.015", tc.name, cov)
		}
	}
}

// Release.MOE90 is the workload's margin for the same single measurement,
// 0 for a public cuboid; a non-negative release keeps the least-squares
// estimate's margin, an integer release adds 1 in its moe90 column.
func TestReleaseMOE90(t *testing.T) {
	s := testkit.TestSchema(t, 3, 4, 2)
	c := &cube.Cube{Schema: s, Counts: testkit.RandomTable(noise.NewSeeded(2), s.Cells())}
	ctx := context.Background()
	exact := []domain.Cuboid{0b001, 0b110}
	rel, err := releaseCube(ctx, c, cuboidSpec{Epsilon: eps(t, 0.8), Exact: exact, Cuboid: 0b011}, noise.NewSeeded(1))
	if err != nil {
		t.Fatal(err)
	}
	got := rel.MOE90
	w, err := releaseWorkloadCube(ctx, c, workloadSpec{Epsilon: eps(t, 0.8), Exact: exact, Cuboids: []domain.Cuboid{0b011}}, noise.NewSeeded(1))
	if err != nil {
		t.Fatal(err)
	}
	if want := w.Tables[0].MOE90; got != want || got <= 0 {
		t.Errorf("Release.MOE90 %v, workload %v", got, want)
	}
	// Alone, the margin is the exact one of the grid Laplace noise.
	alone, _ := releaseCube(ctx, c, cuboidSpec{Epsilon: eps(t, 0.8), Cuboid: 0b011}, noise.NewSeeded(1))
	lap, _ := noise.NewLaplace(1, 0.8)
	if m := alone.MOE90; m != laplaceMOE90(lap) {
		t.Errorf("alone: %v, want %v", m, laplaceMOE90(lap))
	}
	pub, _ := releaseCube(ctx, c, cuboidSpec{Epsilon: eps(t, 0.8), Exact: exact, Cuboid: 0b100}, noise.NewSeeded(1))
	if m := pub.MOE90; m != 0 {
		t.Errorf("public: %v", m)
	}
	nn, _ := releaseCube(ctx, c, cuboidSpec{Epsilon: eps(t, 0.8), Exact: exact, Cuboid: 0b011, NonNegative: true}, noise.NewSeeded(1))
	if nn.MOE90 != got || nn.CellMOE90() != got {
		t.Errorf("non-negative: %v (column %v), want the least-squares margin %v", nn.MOE90, nn.CellMOE90(), got)
	}
	in, err := releaseCube(ctx, c, cuboidSpec{Epsilon: eps(t, 0.8), Exact: exact, Cuboid: 0b011, Integer: true}, noise.NewSeeded(1))
	if err != nil {
		t.Fatal(err)
	}
	if in.CellMOE90() != got+1 || !in.NonNegative {
		t.Errorf("integer: column %v, want %v + 1; nonneg %v", in.CellMOE90(), got, in.NonNegative)
	}
}
