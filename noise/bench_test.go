package noise

import (
	"math"
	"testing"
)

func BenchmarkDiscreteLaplace(b *testing.B) {
	for _, scale := range []float64{1, 1 << 20} {
		b.Run(fmtScale(scale), func(b *testing.B) {
			d, _ := NewDiscreteLaplace(scale)
			r := NewRand()
			var s int64
			for b.Loop() {
				s += d.Sample(r)
			}
			sink = float64(s)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Msamples/s")
		})
	}
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
		b.Run(fmtScale(float64(n)), func(b *testing.B) {
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
	switch {
	case x >= 1<<20:
		return "2^20"
	default:
		return "n=" + itoa(int(x))
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
