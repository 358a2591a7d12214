package hier

import (
	"context"
	"math/rand/v2"
	"testing"
)

// nationalProblem builds a geography of 100,000 leaves in 3,000 groups in
// 50 groups in 4 groups (unequal group sizes), crossed with flat
// dimensions of sizes 2 and 18; it measures {0}, {1} and {0,1} at each of
// the four levels below the root (variance 1 to 4) and publishes the
// level-2 totals exactly.
func nationalProblem(b testing.TB) (Problem, []View) {
	return synthProblem(b, rand.New(rand.NewPCG(1, 2)), []int{100000, 3000, 50, 4}, []int{2, 18})
}

// synthProblem builds a hierarchy with the given level sizes crossed with
// two flat dimensions of the given sizes, random counts, the tables {0},
// {1} and {0,1} of every level below the root measured with noise of
// variance 1, 4 and 16, and the level-2 totals exact; the queries are every
// measured table, the totals of every level and the grand total.
func synthProblem(b testing.TB, rng *rand.Rand, sizes, flat []int) (Problem, []View) {
	h, err := NewHierarchy(sizes, randomHierarchy(rng, sizes))
	if err != nil {
		b.Fatal(err)
	}
	p := Problem{Hierarchy: h, FlatSizes: flat}
	nf := flat[0] * flat[1]
	// The base counts per leaf and flat cell, rolled up level by level.
	base := make([][]float64, len(sizes))
	base[0] = make([]float64, sizes[0]*nf)
	for i := range base[0] {
		base[0][i] = float64(rng.IntN(20))
	}
	for k := 1; k < len(sizes); k++ {
		base[k] = make([]float64, sizes[k]*nf)
		for i := range sizes[k-1] {
			par := h.Parent(k-1, i)
			for c := range nf {
				base[k][par*nf+c] += base[k-1][i*nf+c]
			}
		}
	}
	var queries []View
	for k := range sizes {
		n := sizes[k]
		for f, v := range []float64{1, 2, 4} {
			fl := Flat(f + 1) // {0}, {1}, {0,1}
			cells := p.cells(fl)
			cm := cellMap(flat, []int{0, 1}, fl.dims())
			vals := make([]float64, n*cells)
			for i := range n {
				for c := range nf {
					vals[i*cells+int(cm[c])] += base[k][i*nf+c]
				}
			}
			for i := range vals {
				vals[i] += rng.NormFloat64() * v
			}
			p.Measurements = append(p.Measurements, Measurement{Flat: fl, Level: k, Values: vals, Variance: v * v})
			queries = append(queries, View{fl, k})
		}
		queries = append(queries, View{0, k})
	}
	totals := make([]float64, sizes[2])
	for i := range sizes[2] {
		for c := range nf {
			totals[i] += base[2][i*nf+c]
		}
	}
	p.Measurements = append(p.Measurements, Measurement{Flat: 0, Level: 2, Values: totals})
	queries = append(queries, View{0, len(sizes)})
	return p, queries
}

// BenchmarkSolveNational solves nationalProblem for its 17 query tables
// (3.9 million cells) from 15 measured tables (4.1 million cells).
func BenchmarkSolveNational(b *testing.B) {
	p, queries := nationalProblem(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Solve(context.Background(), p, queries); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLawNational computes the error law of one leaf's cells of the
// leaf-level {0,1} table: in full, bounded to 64 terms, and its variance
// alone.
func BenchmarkLawNational(b *testing.B) {
	p, queries := nationalProblem(b)
	sol, err := Solve(context.Background(), p, queries)
	if err != nil {
		b.Fatal(err)
	}
	q := 2 // View{{0,1}, 0}
	for _, bc := range []struct {
		name string
		run  func(node int) error
	}{
		{"full", func(node int) error { _, err := sol.Law(q, node, LawOptions{}); return err }},
		{"max64", func(node int) error { _, err := sol.Law(q, node, LawOptions{MaxTerms: 64}); return err }},
		{"variance", func(node int) error { _, err := sol.Variance(q, node); return err }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			node := 0
			for b.Loop() {
				if err := bc.run(node); err != nil {
					b.Fatal(err)
				}
				node = (node + 7919) % p.Hierarchy.Nodes(0)
			}
		})
	}
}

// BenchmarkTableLawsNational computes the bounded error laws (6 terms, as
// release keeps) of every class of nodes of every query table of
// nationalProblem, and their variances alone.
func BenchmarkTableLawsNational(b *testing.B) {
	p, queries := nationalProblem(b)
	sol, err := Solve(context.Background(), p, queries)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("laws", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for q := range queries {
				if _, _, err := sol.TableLaws(ctx, q, LawOptions{MaxTerms: 6}); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("variances", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for q := range queries {
				if _, _, err := sol.TableVariances(ctx, q); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
