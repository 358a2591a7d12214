package refine

import (
	"testing"

	"github.com/knowdp/knowdp/noise"
)

func reportRate(b *testing.B, items int, unit string) {
	b.ReportMetric(float64(items)*float64(b.N)/b.Elapsed().Seconds(), unit+"/s")
}

// denseConstraints returns m constraints that each involve all n answers:
// the O(n m²) path.
func denseConstraints(n, m int) []Equality {
	r := noise.NewSeeded(1)
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	eqs := make([]Equality, m)
	for k := range eqs {
		eqs[k] = Equality{Index: all, Coef: randVec(r, n, -1, 1), Value: unif(r, -1, 1)}
	}
	return eqs
}

func BenchmarkEqualitiesFactor(b *testing.B) {
	const n, m = 1_000_000, 10
	eqs := denseConstraints(n, m)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewEqualities(n, eqs); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, n, "answers")
}

func BenchmarkEqualitiesRefine(b *testing.B) {
	const n, m = 1_000_000, 10
	e, err := NewEqualities(n, denseConstraints(n, m))
	if err != nil {
		b.Fatal(err)
	}
	x := randVec(noise.NewSeeded(2), n, -100, 100)
	dst := make([]float64, n)
	b.ReportAllocs()
	for b.Loop() {
		if err := e.Refine(dst, x); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, n, "answers")
}

// BenchmarkSumsOfParts: 10^6 answers in 10^5 groups of ten, each summing to
// a known total (10^5 constraints, matrix-free).
func BenchmarkSumsOfParts(b *testing.B) {
	const n, group = 1_000_000, 10
	var eqs []Equality
	coef := make([]float64, group)
	for i := range coef {
		coef[i] = 1
	}
	for g := 0; g < n; g += group {
		idx := make([]int, group)
		for i := range idx {
			idx[i] = g + i
		}
		eqs = append(eqs, Equality{Index: idx, Coef: coef, Value: 50})
	}
	e, err := NewEqualities(n, eqs)
	if err != nil {
		b.Fatal(err)
	}
	x := randVec(noise.NewSeeded(3), n, 0, 10)
	dst := make([]float64, n)
	b.ReportAllocs()
	for b.Loop() {
		if err := e.Refine(dst, x); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, n, "answers")
}

// BenchmarkHierarchy: a binary tree over 2^20 leaves (2^21 − 1 nodes).
func BenchmarkHierarchy(b *testing.B) {
	h, err := CompleteTree(2, 21)
	if err != nil {
		b.Fatal(err)
	}
	x := randVec(noise.NewSeeded(4), h.Len(), 0, 100)
	dst := make([]float64, h.Len())
	b.ReportAllocs()
	for b.Loop() {
		if err := h.Refine(dst, x); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, h.Len(), "nodes")
}

// BenchmarkIsotonic: 10^7 noisy values of an increasing trend.
func BenchmarkIsotonic(b *testing.B) {
	const n = 10_000_000
	r := noise.NewSeeded(5)
	x := make([]float64, n)
	for i := range x {
		x[i] = float64(i)*1e-5 + unif(r, -20, 20)
	}
	dst := make([]float64, n)
	b.ReportAllocs()
	for b.Loop() {
		if err := Isotonic(dst, x); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, n, "values")
}
