package audit

import (
	"testing"

	"github.com/knowdp/knowdp/noise"
)

func BenchmarkSample(b *testing.B) {
	lap, err := noise.NewLaplace(1, 1)
	if err != nil {
		b.Fatal(err)
	}
	x := func(r *noise.Rand) (float64, error) { return lap.Add(r, 0) }
	x2 := func(r *noise.Rand) (float64, error) { return lap.Add(r, 1) }
	const n = 100000
	r := noise.NewSeeded(1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Sample(bg, r, x, x2, 1, SampleConfig{Samples: n}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(2*n*b.N)/b.Elapsed().Seconds(), "outputs/s")
}

func BenchmarkClopperPearson(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ClopperPearson(1234, 100000, 0.025); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkExactGrid(b *testing.B) {
	lap, err := noise.NewLaplace(1, 1)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := exactGrid(lap, []float64{0}, []float64{1}, 1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/lap.Grid()/b.Elapsed().Seconds(), "outputs/s")
}

func BenchmarkTextbookCanProduce(b *testing.B) {
	r := noise.NewSeeded(1)
	ys := make([]float64, 1024)
	for i := range ys {
		ys[i] = textbookLaplace(r, 0, 1)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		textbookCanProduce(ys[i%len(ys)], 1, 1)
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "checks/s")
}
