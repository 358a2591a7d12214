package release

import (
	"context"
	"math"
	"testing"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate"
	"github.com/knowdp/knowdp/integer"
	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/noise"
)

// biasStats is the mean error (estimate - truth) of an estimate on the
// cells whose true count is 0 and on those whose true count is >= 50.
type biasStats struct {
	zero, large float64
}

// pipeline is one run of noisy release -> least squares -> non-negative
// -> integer on a synthetic table.
type pipeline struct {
	zeros, large        int // cells in each group
	ls, nonneg, integer biasStats
	negative            int // cells of the least-squares estimate below 0
	exact               bool
	sensitivity         int
}

// runPipeline draws rows synthetic rows over a table with the given domain
// sizes, each dimension's value with probability proportional to 1/(j+1)
// (so that most cells are small and a few large), releases the base cuboid
// with Laplace noise under the exact cuboids, and measures the bias of the
// least-squares, non-negative and integer estimates.
func runPipeline(t testing.TB, seed uint64, sizes []int, rows int, exact []domain.Cuboid, epsilon float64) pipeline {
	t.Helper()
	ctx := context.Background()
	s := testkit.TestSchema(t, sizes...)
	r := noise.NewSeeded(seed)
	c, err := cube.New(s, cube.DefaultCellLimit)
	if err != nil {
		t.Fatal(err)
	}
	cats := make([]*noise.Categorical, s.NumDims())
	for d := range cats {
		w := make([]float64, s.Size(d))
		for j := range w {
			w[j] = 1 / float64(j+1)
		}
		if cats[d], err = noise.NewCategorical(w); err != nil {
			t.Fatal(err)
		}
	}
	for range rows {
		cell := 0
		for d := range cats {
			cell += cats[d].Sample(r) * s.Stride(d)
		}
		c.Counts[cell]++
	}
	base := domain.Base(s.NumDims())
	rel, err := runCube(ctx, c, cuboidSpec{Epsilon: eps(t, epsilon), Exact: exact, Cuboid: base}, r)
	if err != nil {
		t.Fatal(err)
	}
	z := append([]float64(nil), rel.Counts...)
	if _, err := estimate.ConsistentNonNegative(ctx, s, base, z, rel.Invariants, estimate.NonNegative{}); err != nil {
		t.Fatal(err)
	}
	margins := make([]integer.Margin, len(rel.Invariants))
	for i, v := range rel.Invariants {
		margins[i] = integer.Margin{Dims: v.Cuboid, Targets: v.Counts}
	}
	res, err := integer.RoundInteger(ctx, s, base, z, margins, r)
	if err != nil {
		t.Fatal(err)
	}
	p := pipeline{exact: res.Exact, sensitivity: rel.Sensitivity}
	for i, truth := range c.Counts {
		if rel.Counts[i] < 0 {
			p.negative++
		}
		switch {
		case truth == 0:
			p.zeros++
			p.ls.zero += rel.Counts[i] - truth
			p.nonneg.zero += z[i] - truth
			p.integer.zero += res.Counts[i] - truth
		case truth >= 50:
			p.large++
			p.ls.large += rel.Counts[i] - truth
			p.nonneg.large += z[i] - truth
			p.integer.large += res.Counts[i] - truth
		}
	}
	for _, b := range []*biasStats{&p.ls, &p.nonneg, &p.integer} {
		b.zero /= float64(p.zeros)
		b.large /= float64(p.large)
	}
	return p
}

// The whole pipeline on a small synthetic table: least squares is unbiased,
// non-negativity biases true zeros upwards, and integer rounding adds no
// bias of its own. Each rounding error has mean 0 given the non-negative
// estimate and variance at most 1/4, and with one margin every two cells
// share the grand-total node of the network, so their roundings are
// negatively correlated (Gandhi et al. 2006, property P3): the variance of
// a mean over n cells is at most 1/(4n), and the tolerance is 5 * 0.5/sqrt(n).
func TestIntegerPipelineBias(t *testing.T) {
	const reps = 4
	var ls, nn, in biasStats
	var zeros, large int
	for seed := range uint64(reps) {
		p := runPipeline(t, 100+seed, []int{2, 6, 10, 18, 4}, 20000, []domain.Cuboid{testkit.CuboidOf([]int{0, 1})}, 1)
		if !p.exact {
			t.Fatal("the integer table misses the invariant")
		}
		for _, x := range []struct{ sum, add *biasStats }{{&ls, &p.ls}, {&nn, &p.nonneg}, {&in, &p.integer}} {
			x.sum.zero += x.add.zero * float64(p.zeros)
			x.sum.large += x.add.large * float64(p.large)
		}
		zeros += p.zeros
		large += p.large
	}
	for _, b := range []*biasStats{&ls, &nn, &in} {
		b.zero /= float64(zeros)
		b.large /= float64(large)
	}
	t.Logf("%d true zeros, %d cells >= 50: mean error LS %+.3f / %+.3f, non-negative %+.3f / %+.3f, integer %+.3f / %+.3f",
		zeros, large, ls.zero, ls.large, nn.zero, nn.large, in.zero, in.large)
	// Laplace noise of scale 2 (variance 8) on each cell; the projection
	// onto the margin subtracts each group's mean noise, which lowers every
	// variance and makes the covariances negative, so the standard error of
	// a mean over n cells is at most sqrt(8/n).
	if se := 2 * math.Sqrt(2/float64(zeros)); math.Abs(ls.zero) > 5*se {
		t.Errorf("least squares biased on true zeros: %v (5 SE = %v)", ls.zero, 5*se)
	}
	if nn.zero <= 0 {
		t.Errorf("non-negativity should bias true zeros upwards, got %v", nn.zero)
	}
	// Without invariants the non-negative estimate is the noisy count
	// clipped at 0, so on a true zero its mean is E[max(X, 0)] = b/2 for
	// Laplace noise X of scale b = 1, with variance E[max(X,0)^2] - b^2/4 =
	// b^2 - b^2/4.
	var clipped float64
	var n int
	for seed := range uint64(reps) {
		p := runPipeline(t, 300+seed, []int{2, 6, 10, 18, 4}, 20000, nil, 1)
		clipped += p.nonneg.zero * float64(p.zeros)
		n += p.zeros
		if math.Abs(p.integer.zero-p.nonneg.zero) > 5*0.5/math.Sqrt(float64(p.zeros)) {
			t.Errorf("no invariant, seed %d: independent rounding moved the mean error on zeros from %v to %v", seed, p.nonneg.zero, p.integer.zero)
		}
	}
	if se := math.Sqrt(0.75 / float64(n)); math.Abs(clipped/float64(n)-0.5) > 5*se {
		t.Errorf("no invariant: mean error on true zeros %v, want b/2 = 0.5 (5 SE = %v)", clipped/float64(n), 5*se)
	}
	for _, g := range []struct {
		name    string
		n       int
		nn, int float64
	}{{"true zeros", zeros, nn.zero, in.zero}, {"cells >= 50", large, nn.large, in.large}} {
		if tol := 5 * 0.5 / math.Sqrt(float64(g.n)); math.Abs(g.int-g.nn) > tol {
			t.Errorf("%s: integer rounding moved the mean error from %v to %v (tolerance %v)", g.name, g.nn, g.int, tol)
		}
	}
}

// BenchmarkIntegerPipelineBias measures the bias of the non-negative and
// integer releases on a synthetic 200,000-row, 43,200-cell table (eps = 1):
// one release per iteration, the mean errors reported as metrics.
func BenchmarkIntegerPipelineBias(b *testing.B) {
	for _, sc := range []struct {
		name  string
		exact [][]int
	}{
		{"no-invariant", nil},
		{"one-invariant", [][]int{{0, 1}}},
		{"two-invariants", [][]int{{0, 1}, {4}}},
	} {
		b.Run(sc.name, func(b *testing.B) {
			var exact []domain.Cuboid
			for _, e := range sc.exact {
				exact = append(exact, testkit.CuboidOf(e))
			}
			var sum pipeline
			runs := 0
			for b.Loop() {
				p := runPipeline(b, 200+uint64(runs), []int{2, 6, 10, 18, 20}, 200000, exact, 1)
				runs++
				sum.sensitivity = p.sensitivity
				sum.zeros += p.zeros
				sum.large += p.large
				sum.negative += p.negative
				for _, x := range []struct{ sum, add *biasStats }{{&sum.ls, &p.ls}, {&sum.nonneg, &p.nonneg}, {&sum.integer, &p.integer}} {
					x.sum.zero += x.add.zero * float64(p.zeros)
					x.sum.large += x.add.large * float64(p.large)
				}
			}
			// Means over every release run, weighted by the cells of each.
			b.ReportMetric(float64(sum.sensitivity), "sensitivity")
			b.ReportMetric(float64(sum.negative)/float64(43200*runs), "LS-negative-share")
			b.ReportMetric(float64(sum.zeros)/float64(runs), "true-zeros")
			b.ReportMetric(float64(sum.large)/float64(runs), "cells>=50")
			for _, m := range []struct {
				name string
				b    biasStats
			}{{"LS", sum.ls}, {"nonneg", sum.nonneg}, {"integer", sum.integer}} {
				b.ReportMetric(m.b.zero/float64(sum.zeros), m.name+"-zero-bias")
				b.ReportMetric(m.b.large/float64(sum.large), m.name+"-large-bias")
			}
		})
	}
}
