package prior

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/knowdp/knowdp/noise"
)

var benchSizes = []int{1e3, 1e4, 1e5, 1e6}

func benchPrior(b *testing.B, n int) *Discrete {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	vals := make([]float64, n)
	probs := make([]float64, n)
	var s float64
	for i := range vals {
		vals[i] = float64(i) + rng.Float64()/2 // distinct, few ties
		probs[i] = rng.Float64()
		s += probs[i]
	}
	for i := range probs {
		probs[i] /= s
	}
	p, err := NewNumeric("x", vals, probs)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// Building the refined distribution: Algorithm 1 on R support points.
func BenchmarkRefineDiscrete(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("R=%d", n), func(b *testing.B) {
			p := benchPrior(b, n)
			m := mustNew(b, p, Config{Kind: Statistical, Epsilon: mustEps(b, 1)})
			truth := Point{float64(n) / 3}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Refine(truth); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "points/s")
		})
	}
}

// Sampling a refined distribution (the first draw also builds the sampler).
func BenchmarkSampleDiscrete(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("R=%d", n), func(b *testing.B) {
			p := benchPrior(b, n)
			m := mustNew(b, p, Config{Kind: Individual, Epsilon: mustEps(b, 1)})
			q := mustRefine(b, m, Point{float64(n) / 3}).(*Discrete)
			r := noise.NewSeeded(1)
			q.SampleIndex(r)
			b.ReportAllocs()
			for b.Loop() {
				q.SampleIndex(r)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}

func benchPiecewise(b *testing.B, n int) *Piecewise {
	b.Helper()
	rng := rand.New(rand.NewPCG(2, uint64(n)))
	ps := make([]Piece, n)
	var s float64
	for i := range ps {
		ps[i] = Piece{Lo: float64(i), Hi: float64(i) + 1, Density: rng.Float64()}
		s += ps[i].Density
	}
	for i := range ps {
		ps[i].Density /= s
	}
	p, err := NewPiecewise("x", ps)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

func BenchmarkRefinePiecewise(b *testing.B) {
	for _, n := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("pieces=%d", n), func(b *testing.B) {
			p := benchPiecewise(b, n)
			m := mustNew(b, p, Config{Kind: Individual, Epsilon: mustEps(b, 1), Delta: mustDelta(b, 0.01)})
			truth := Point{float64(n) / 3}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Refine(truth); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "pieces/s")
		})
	}
}

func BenchmarkSamplePiecewise(b *testing.B) {
	p := benchPiecewise(b, 100)
	m := mustNew(b, p, Config{Kind: Individual, Epsilon: mustEps(b, 1)})
	q := mustRefine(b, m, Point{33.3}).(*Piecewise)
	r := noise.NewSeeded(1)
	q.SampleCell(r)
	b.ReportAllocs()
	for b.Loop() {
		q.CellValue(q.SampleCell(r))
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "samples/s")
}
