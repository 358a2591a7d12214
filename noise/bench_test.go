package noise

import (
	"math"
	"strconv"
	"testing"
	"time"
)

// BenchmarkUint64 is the generator's cost for one 64-bit word, the unit the
// samplers' targets are stated in: compare it with BenchmarkDiscreteLaplace
// from the same run.
func BenchmarkUint64(b *testing.B) {
	r := NewRand()
	var s uint64
	for b.Loop() {
		s += r.Uint64()
	}
	sink = float64(s)
}

func BenchmarkDiscreteLaplace(b *testing.B) {
	for _, scale := range []float64{1, 2.5, 1000, 1 << 20, 1 << 30, 0x1p40} {
		b.Run("scale="+fmtScale(scale), func(b *testing.B) {
			d, _ := NewDiscreteLaplace(scale)
			r := NewRand()
			var s int64
			for b.Loop() {
				s += d.Sample(r)
			}
			sink = float64(s)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Msamples/s")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/wordNanos(), "words")
		})
	}
}

// wordNanos times the generator on 2^22 words, outside any benchmark
// timer, so that samplers can report their cost in words measured in the
// same run (the "words" metric; on a loaded machine it is noisy too).
func wordNanos() float64 {
	r := NewRand()
	var s uint64
	start := time.Now()
	for range 1 << 22 {
		s += r.Uint64()
	}
	sink = float64(s)
	return float64(time.Since(start).Nanoseconds()) / (1 << 22)
}

// BenchmarkLaplaceAddTo noises a vector of counts, as a cube release does.
func BenchmarkLaplaceAddTo(b *testing.B) {
	l, _ := NewLaplace(2, 1)
	xs := make([]float64, 1<<16)
	r := NewRand()
	b.SetBytes(int64(8 * len(xs)))
	for b.Loop() {
		if err := l.AddTo(r, xs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*float64(len(xs))/b.Elapsed().Seconds()/1e6, "Msamples/s")
}

func BenchmarkChoose(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run("n="+strconv.Itoa(n), func(b *testing.B) {
			logw := make([]float64, n)
			for i := range logw {
				logw[i] = -math.Mod(float64(i)*0.37, 3)
			}
			r := NewRand()
			for b.Loop() {
				i, _ := Choose(r, logw)
				sink = float64(i)
			}
		})
	}
}

func BenchmarkCategorical(b *testing.B) {
	w := make([]float64, 1_000_000)
	for i := range w {
		w[i] = 1 + math.Sin(float64(i))
	}
	c, _ := NewCategorical(w)
	r := NewRand()
	for b.Loop() {
		sink = float64(c.Sample(r))
	}
}

var sink float64

func fmtScale(x float64) string {
	if e := math.Log2(x); x >= 1<<20 && e == math.Trunc(e) {
		return "2^" + strconv.Itoa(int(e))
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

func BenchmarkDiscreteGaussian(b *testing.B) {
	for _, sigma := range []float64{1, 1000, 1 << 20, 1 << 30} {
		b.Run("sigma="+fmtScale(sigma), func(b *testing.B) {
			g, _ := NewDiscreteGaussian(sigma)
			r := NewRand()
			var s int64
			for b.Loop() {
				s += g.Sample(r)
			}
			sink = float64(s)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Msamples/s")
		})
	}
}

// BenchmarkGaussianAddTo noises a vector of counts with the grid discrete
// Gaussian, as a zCDP release would.
func BenchmarkGaussianAddTo(b *testing.B) {
	g, _ := NewGaussian(1, 0.5)
	xs := make([]float64, 1<<16)
	r := NewRand()
	b.SetBytes(int64(8 * len(xs)))
	for b.Loop() {
		if err := g.AddTo(r, xs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*float64(len(xs))/b.Elapsed().Seconds()/1e6, "Msamples/s")
}

// BenchmarkNewDiscreteLaplace is the cost of a sampler's tables, paid once
// per scale.
func BenchmarkNewDiscreteLaplace(b *testing.B) {
	for _, scale := range []float64{1, 1000, 1 << 20, 0x1p40} {
		b.Run("scale="+fmtScale(scale), func(b *testing.B) {
			for b.Loop() {
				d, _ := NewDiscreteLaplace(scale)
				sink = d.Scale()
			}
		})
	}
}
