package estimate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/tensor"
	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/noise"
)

// denseConsistent solves min ||y - x|| s.t. A y = c with the Moore-Penrose
// pseudo-inverse: y = x + A^+ (c - A x).
func denseConsistent(t *testing.T, s *domain.Schema, over domain.Cuboid, x []float64, inv []Invariant) []float64 {
	t.Helper()
	var blocks []*mat.Dense
	var rhs []float64
	for _, v := range inv {
		k := v.Cuboid & over
		blocks = append(blocks, testkit.MarginalMatrix(s, over, k))
		// The invariant's margin on k, from the invariant's own cells.
		mk := testkit.MarginalMatrix(s, v.Cuboid, k)
		var ck mat.VecDense
		ck.MulVec(mk, mat.NewVecDense(len(v.Counts), v.Counts))
		rhs = append(rhs, ck.RawVector().Data...)
	}
	n := len(x)
	rows := len(rhs)
	a := mat.NewDense(rows, n, nil)
	r := 0
	for _, b := range blocks {
		br, _ := b.Dims()
		a.Slice(r, r+br, 0, n).(*mat.Dense).Copy(b)
		r += br
	}
	return testkit.PinvProject(t, a, rhs, x)
}

func TestConsistentMatchesDenseLeastSquares(t *testing.T) {
	r := noise.NewSeeded(1)
	for _, tc := range []struct {
		sizes []int
		exact [][]int // dimensions of each exact cuboid
		over  []int   // released cuboid; nil = base
	}{
		{sizes: []int{3, 4}, exact: [][]int{{0}}},
		{sizes: []int{3, 4}, exact: [][]int{{0}, {1}}},
		{sizes: []int{2, 3, 4}, exact: [][]int{{0, 1}, {1, 2}}},
		{sizes: []int{2, 3, 4}, exact: [][]int{{0}, {1}, {2}}},
		{sizes: []int{2, 3, 4}, exact: [][]int{{0, 1}, {1, 2}, {0, 2}}},
		{sizes: []int{3, 4, 2, 5}, exact: [][]int{{0, 1}, {1, 2}, {2, 3}, {0, 3}}},
		{sizes: []int{3, 4, 2, 5}, exact: [][]int{{0, 1, 2}, {1, 3}, {}, {0}}},
		{sizes: []int{3, 4, 2, 5}, exact: [][]int{{0, 1}, {1, 2, 3}}, over: []int{0, 1, 3}},
		{sizes: []int{4, 3, 3}, exact: [][]int{{0, 2}, {1}}, over: []int{0, 1}},
		{sizes: []int{2, 2, 2, 2}, exact: [][]int{{0, 1, 2, 3}}},
	} {
		s := testkit.TestSchema(t, tc.sizes...)
		over := domain.Base(len(tc.sizes))
		if tc.over != nil {
			over = testkit.CuboidOf(tc.over)
		}
		for trial := range 3 {
			truth := &cube.Cube{Schema: s, Counts: testkit.RandomTable(r, s.Cells())}
			var exact []domain.Cuboid
			for _, e := range tc.exact {
				exact = append(exact, testkit.CuboidOf(e))
			}
			inv := invariantsOf(truth, exact)
			x := testkit.Noisy(r, truth.Project(over), 3)
			want := denseConsistent(t, s, over, x, inv)
			got := append([]float64(nil), x...)
			if err := Consistent(s, over, got, inv); err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if math.Abs(got[i]-want[i]) > 1e-9 {
					t.Fatalf("%v exact %v over %v trial %d: cell %d = %v, dense LS %v", tc.sizes, tc.exact, tc.over, trial, i, got[i], want[i])
				}
			}
			// And the invariants hold.
			for _, v := range inv {
				k := v.Cuboid & over
				a := make([]float64, s.CuboidSize(k))
				b := make([]float64, len(a))
				tensor.Project(tensor.SubSizes(s.Sizes(), over), tensor.Reindex(k, over), got, a)
				tensor.Project(tensor.SubSizes(s.Sizes(), v.Cuboid), tensor.Reindex(k, v.Cuboid), v.Counts, b)
				for i := range a {
					if math.Abs(a[i]-b[i]) > 1e-9 {
						t.Fatalf("invariant %s violated at %d: %v vs %v", s.Format(v.Cuboid), i, a[i], b[i])
					}
				}
			}
		}
	}
}

func TestProjectMatchesDefinition(t *testing.T) {
	r := noise.NewSeeded(2)
	s := testkit.TestSchema(t, 3, 2, 4, 2)
	x := testkit.RandomTable(r, s.Cells())
	c := &cube.Cube{Schema: s, Counts: x}
	for keep := domain.Cuboid(0); keep <= domain.Base(4); keep++ {
		got := c.Project(keep)
		var want mat.VecDense
		want.MulVec(testkit.MarginalMatrix(s, domain.Base(4), keep), mat.NewVecDense(len(x), x))
		for i := range got {
			if got[i] != want.AtVec(i) {
				t.Fatalf("project onto %s: cell %d = %v, want %v", s.Format(keep), i, got[i], want.AtVec(i))
			}
		}
	}
}

func TestConsistentRejectsInconsistentInvariants(t *testing.T) {
	s := testkit.TestSchema(t, 2, 3, 2)
	a := Invariant{Cuboid: testkit.CuboidOf([]int{0, 1}), Counts: []float64{1, 2, 3, 4, 5, 6}} // d1 margin 5, 7, 9
	b := Invariant{Cuboid: testkit.CuboidOf([]int{1, 2}), Counts: []float64{5, 0, 7, 0, 9, 1}} // d1 margin 5, 7, 10
	x := make([]float64, s.Cells())
	for i := range x {
		x[i] = float64(i)
	}
	before := append([]float64(nil), x...)
	err := Consistent(s, domain.Base(3), x, []Invariant{a, b})
	if !errors.Is(err, ErrInconsistent) || !strings.Contains(err.Error(), "d1=v2") || !strings.Contains(err.Error(), "9 vs 10") {
		t.Fatalf("error %v does not report the disagreeing cell", err)
	}
	for i := range x {
		if x[i] != before[i] {
			t.Fatal("x changed on error")
		}
	}
	totals := []Invariant{{Cuboid: 0, Counts: []float64{21}}, {Cuboid: testkit.CuboidOf([]int{0}), Counts: []float64{10, 10}}}
	if err := Consistent(s, domain.Base(3), x, totals); !errors.Is(err, ErrInconsistent) || !strings.Contains(err.Error(), "grand total") {
		t.Errorf("grand total mismatch: %v", err)
	}
}

func TestConsistentRejectsBadInput(t *testing.T) {
	s := testkit.TestSchema(t, 2, 2)
	x := make([]float64, 4)
	for _, tc := range []struct {
		name string
		over domain.Cuboid
		x    []float64
		inv  []Invariant
		want string
	}{
		{"short x", domain.Base(2), make([]float64, 3), nil, "has 4 cells, got 3"},
		{"cuboid beyond schema", domain.Base(2), x, []Invariant{{Cuboid: 1 << 5, Counts: []float64{1}}}, "beyond the schema"},
		{"wrong length", domain.Base(2), x, []Invariant{{Cuboid: 1, Counts: []float64{1}}}, "has 2 cells, got 1"},
		{"NaN count", domain.Base(2), x, []Invariant{{Cuboid: 1, Counts: []float64{1, math.NaN()}}}, "d0=v1"},
		{"negative count", domain.Base(2), x, []Invariant{{Cuboid: 1, Counts: []float64{-1, 2}}}, "non-negative"},
	} {
		if err := Consistent(s, tc.over, tc.x, tc.inv); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}
}

// TestTheorem61 checks by Monte Carlo that the consistent estimate is
// unbiased and that each cell's variance is 2b^2 times the diagonal of the
// projection onto the invariants' null space: below 2b^2 (Theorem 6.1).
func TestTheorem61(t *testing.T) {
	const trials = 20000
	s := testkit.TestSchema(t, 3, 4, 2)
	truth := &cube.Cube{Schema: s, Counts: testkit.RandomTable(noise.NewSeeded(3), s.Cells())}
	inv := invariantsOf(truth, []domain.Cuboid{testkit.CuboidOf([]int{0, 1}), testkit.CuboidOf([]int{1, 2})})
	l, _ := noise.NewLaplace(2, 1) // b = 2
	r := noise.NewSeeded(4)
	n := s.Cells()
	sum := make([]float64, n)
	sumSq := make([]float64, n)
	x := make([]float64, n)
	for range trials {
		copy(x, truth.Counts)
		l.AddTo(r, x)
		if err := Consistent(s, domain.Base(3), x, inv); err != nil {
			t.Fatal(err)
		}
		for i, v := range x {
			d := v - truth.Counts[i]
			sum[i] += d
			sumSq[i] += d * d
		}
	}
	// Diagonal of I - A^+ A: variance factor of each cell.
	factor := nullProjectionDiagonal(t, s, inv)
	v0 := l.Variance()
	for i := range n {
		want := v0 * factor[i]
		if want >= v0 {
			t.Fatalf("cell %d: no variance reduction predicted (%v)", i, factor[i])
		}
		mean := sum[i] / trials
		if math.Abs(mean) > 5*math.Sqrt(want/trials) {
			t.Errorf("cell %d: bias %v exceeds 5 standard errors %v", i, mean, 5*math.Sqrt(want/trials))
		}
		// The estimate is a linear combination of Laplace variables; its
		// fourth moment is at most 6 v^2 (kurtosis of Laplace), so the
		// sample variance has standard error <= sqrt(5/trials) v.
		got := sumSq[i] / trials
		if math.Abs(got-want) > 5*math.Sqrt(5.0/trials)*want {
			t.Errorf("cell %d: variance %v, want %v", i, got, want)
		}
	}
}

func nullProjectionDiagonal(t *testing.T, s *domain.Schema, inv []Invariant) []float64 {
	n := s.Cells()
	diag := make([]float64, n)
	for i := range n {
		e := make([]float64, n)
		e[i] = 1
		// (I - A^+A) e_i is the consistent estimate of e_i with zero
		// invariants.
		zero := make([]Invariant, len(inv))
		for k, v := range inv {
			zero[k] = Invariant{Cuboid: v.Cuboid, Counts: make([]float64, len(v.Counts))}
		}
		y := denseConsistent(t, s, domain.Base(s.NumDims()), e, zero)
		diag[i] = y[i]
	}
	return diag
}

// bruteNonNegative solves min ||y - x|| s.t. invariants, y >= 0 by trying
// every set of cells fixed at zero (exact for tiny arrays).
func bruteNonNegative(t *testing.T, s *domain.Schema, x []float64, inv []Invariant) []float64 {
	n := len(x)
	best := math.Inf(1)
	var bestY []float64
	for zero := range 1 << n {
		// Fix the zero cells with extra exact "cells": implement by solving
		// the equality-constrained problem on the free cells through a
		// large penalty-free dense solve: add rows e_j^T y = 0.
		y := denseWithZeros(t, s, x, inv, zero)
		if y == nil {
			continue
		}
		ok := true
		var d float64
		for i, v := range y {
			if v < -1e-9 {
				ok = false
				break
			}
			d += (v - x[i]) * (v - x[i])
		}
		if ok && d < best-1e-12 {
			best, bestY = d, y
		}
	}
	return bestY
}

func denseWithZeros(t *testing.T, s *domain.Schema, x []float64, inv []Invariant, zero int) []float64 {
	n := len(x)
	var rows [][]float64
	var rhs []float64
	for _, v := range inv {
		m := testkit.MarginalMatrix(s, domain.Base(s.NumDims()), v.Cuboid)
		r, _ := m.Dims()
		for i := range r {
			rows = append(rows, mat.Row(nil, i, m))
			rhs = append(rhs, v.Counts[i])
		}
	}
	for j := range n {
		if zero&(1<<j) != 0 {
			row := make([]float64, n)
			row[j] = 1
			rows = append(rows, row)
			rhs = append(rhs, 0)
		}
	}
	a := mat.NewDense(len(rows), n, nil)
	for i, row := range rows {
		a.SetRow(i, row)
	}
	y := testkit.PinvProject(t, a, rhs, x)
	// Infeasible if the constraints are not met (zeros incompatible).
	var chk mat.VecDense
	chk.MulVec(a, mat.NewVecDense(n, y))
	for i := range rhs {
		if math.Abs(chk.AtVec(i)-rhs[i]) > 1e-8 {
			return nil
		}
	}
	return y
}

func TestConsistentNonNegativeMatchesBruteForce(t *testing.T) {
	r := noise.NewSeeded(5)
	// The brute force solves 2^cells dense problems: keep the shapes small.
	for _, tc := range []struct {
		sizes  []int
		exact  [][]int
		trials int
	}{
		{[]int{3, 3}, [][]int{{0}, {1}}, 4},
		{[]int{2, 2, 3}, [][]int{{0, 1}, {2}}, 1},
		{[]int{2, 5}, [][]int{{0}}, 4},
		{[]int{2, 2, 2}, [][]int{{0, 1}, {1, 2}}, 4},
	} {
		s := testkit.TestSchema(t, tc.sizes...)
		var exact []domain.Cuboid
		for _, e := range tc.exact {
			exact = append(exact, testkit.CuboidOf(e))
		}
		for trial := range tc.trials {
			truth := &cube.Cube{Schema: s, Counts: make([]float64, s.Cells())}
			for i := range truth.Counts {
				truth.Counts[i] = float64(r.Uint64N(3)) // small counts: noise pushes many below 0
			}
			inv := invariantsOf(truth, exact)
			x := testkit.Noisy(r, truth.Counts, 2)
			want := bruteNonNegative(t, s, x, inv)
			got := append([]float64(nil), x...)
			if _, err := ConsistentNonNegative(context.Background(), s, domain.Base(len(tc.sizes)), got, inv, NonNegative{Tol: 1e-9, MaxIter: 200000}); err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if math.Abs(got[i]-want[i]) > 1e-6 {
					t.Fatalf("%v %v trial %d: cell %d = %v, brute force %v\n got %v\nwant %v", tc.sizes, tc.exact, trial, i, got[i], want[i], got, want)
				}
			}
		}
	}
}

func TestConsistentNonNegativeFailsWithoutNonNegativeTable(t *testing.T) {
	// Two-way margins of a 2x2x2 table that agree pairwise but admit no
	// non-negative table: A = B, B = C, A != C in every row.
	s := testkit.TestSchema(t, 2, 2, 2)
	diag := []float64{1, 0, 0, 1}
	anti := []float64{0, 1, 1, 0}
	inv := []Invariant{
		{Cuboid: testkit.CuboidOf([]int{0, 1}), Counts: diag},
		{Cuboid: testkit.CuboidOf([]int{1, 2}), Counts: diag},
		{Cuboid: testkit.CuboidOf([]int{0, 2}), Counts: anti},
	}
	x := make([]float64, 8)
	// A signed table exists, so plain consistency succeeds.
	if err := Consistent(s, domain.Base(3), append([]float64(nil), x...), inv); err != nil {
		t.Fatalf("signed consistency: %v", err)
	}
	_, err := ConsistentNonNegative(context.Background(), s, domain.Base(3), x, inv, NonNegative{MaxIter: 500})
	if err == nil || !strings.Contains(err.Error(), "no non-negative table") {
		t.Fatalf("error %v", err)
	}
	for _, v := range x {
		if v != 0 {
			t.Fatal("x changed on failure")
		}
	}
	if _, err := ConsistentNonNegative(context.Background(), s, domain.Base(3), x, inv, NonNegative{Tol: math.NaN()}); err == nil {
		t.Error("NaN tolerance accepted")
	}
}

// sweepConsistent is the consistency step as one projection per constraint
// (one pass to sum and one to add each), the implementation the two-pass
// projector replaced: kept as the oracle it must match.
func sweepConsistent(sizes []int, x []float64, cons []constraint) {
	for _, c := range cons {
		sum := make([]float64, len(c.target))
		tensor.Project(sizes, c.keep, x, sum)
		for i := range sum {
			sum[i] = (c.target[i] - sum[i]) / c.deg
		}
		tensor.BroadcastAdd(sizes, c.keep, x, sum)
	}
}

// TestConsistentMatchesSweep compares the two-pass projector with the
// one-projection-per-invariant sweep on shapes that exercise the plan: inner
// runs kept by some invariants and dropped by others, several kept ones,
// runs split for parallel parts, nested, disjoint and empty intersections,
// an invariant covering the release (the table is known), trailing
// dimensions no invariant keeps, and arrays large enough to be split over
// parts.
func TestConsistentMatchesSweep(t *testing.T) {
	r := noise.NewSeeded(7)
	for _, tc := range []struct {
		sizes []int
		exact [][]int
		over  []int // nil = base
	}{
		{sizes: []int{5}, exact: [][]int{{}}},
		{sizes: []int{5}, exact: [][]int{{0}}},
		{sizes: []int{3, 4}, exact: [][]int{{1}}},
		{sizes: []int{3, 4}, exact: [][]int{{0}, {1}}},
		{sizes: []int{2, 3, 4, 5}, exact: [][]int{{0, 1}, {1, 2}, {2, 3}, {0, 3}}},
		{sizes: []int{2, 3, 4, 5}, exact: [][]int{{3}, {2, 3}, {0, 3}}},
		{sizes: []int{2, 3, 4, 5}, exact: [][]int{{0, 1, 2}, {1, 3}, {0, 2, 3}, {}}},
		{sizes: []int{4, 3, 5, 2}, exact: [][]int{{0, 2}, {1, 3}}, over: []int{0, 1, 2}},
		{sizes: []int{3, 3, 3, 3, 3}, exact: [][]int{{0, 1, 2}, {2, 3}, {0, 4}, {4}}},
		{sizes: []int{2, 2, 2}, exact: [][]int{{0, 1, 2}, {0}}},
		// 2^16 cells and more: split into parts run on several goroutines.
		{sizes: []int{10, 10, 10, 10, 7}, exact: [][]int{{0, 1, 2}, {2, 3}, {0, 4}}},
		{sizes: []int{8, 8, 8, 8, 8, 2}, exact: [][]int{{0, 1, 2}, {2, 3}, {0, 4}, {5}}},
		{sizes: []int{4, 4, 4, 4, 4, 4, 4, 4}, exact: [][]int{{7}, {6, 7}, {1, 7}}},
		{sizes: []int{300, 300}, exact: [][]int{{}, {0}}},
		// A tail of dimensions no invariant keeps, with a head of 10^5
		// cells split into parts too.
		{sizes: []int{10, 10, 10, 10, 10, 4}, exact: [][]int{{0, 1, 2}, {2, 3}, {0, 4}}},
		{sizes: []int{3, 4, 5, 6}, exact: [][]int{{0}, {1}}},
		// A dimension no invariant keeps before one they keep: the
		// marginal on the union of the invariants first, small and large.
		{sizes: []int{3, 5, 4, 2}, exact: [][]int{{0, 3}, {2, 3}, {0, 2}}},
		{sizes: []int{8, 8, 8, 8, 8, 2}, exact: [][]int{{0, 5}, {1, 2, 5}, {0, 3}}},
		{sizes: []int{4, 4, 4, 4, 4, 4, 4, 4}, exact: [][]int{{7}, {6, 7}, {0, 7}, {1, 2, 3}}},
		{sizes: []int{6, 4, 40, 40}, exact: [][]int{{0, 2}, {2, 3}, {0, 3}}},
		{sizes: []int{70, 4, 40, 40}, exact: [][]int{{0, 2}, {2, 3}, {0, 3}}},
		{sizes: []int{4, 10, 3, 3}, exact: [][]int{{2}, {3}}},
	} {
		s := testkit.TestSchema(t, tc.sizes...)
		over := domain.Base(len(tc.sizes))
		if tc.over != nil {
			over = testkit.CuboidOf(tc.over)
		}
		var exact []domain.Cuboid
		for _, e := range tc.exact {
			exact = append(exact, testkit.CuboidOf(e))
		}
		truth := &cube.Cube{Schema: s, Counts: testkit.RandomTable(r, s.Cells())}
		inv := invariantsOf(truth, exact)
		x := testkit.Noisy(r, truth.Project(over), 3)
		want := append([]float64(nil), x...)
		cons, err := Constraints(s, over, want, inv)
		if err != nil {
			t.Fatal(err)
		}
		sweepConsistent(s.SubSizesOf(over), want, cons)
		var first []float64
		for _, procs := range []int{1, 2, 3} {
			got := append([]float64(nil), x...)
			old := runtime.GOMAXPROCS(procs)
			err := Consistent(s, over, got, inv)
			runtime.GOMAXPROCS(old)
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if math.Abs(got[i]-want[i]) > 1e-12*max(1, math.Abs(want[i])) {
					t.Fatalf("%v exact %v over %v GOMAXPROCS %d: cell %d = %v, sweep %v", tc.sizes, tc.exact, tc.over, procs, i, got[i], want[i])
				}
			}
			if first == nil {
				first = got // later runs must agree bit for bit
				continue
			}
			for i := range got {
				if got[i] != first[i] {
					t.Fatalf("%v exact %v: GOMAXPROCS %d changes cell %d: %v vs %v", tc.sizes, tc.exact, procs, i, got[i], first[i])
				}
			}
		}
	}
}

// TestConsistentMatchesSweepRandom compares the two-pass projector with the
// sweep on random shapes (1 to 5 dimensions of sizes 1 to 6), random
// invariants (1 to 5, possibly nested, repeated or empty) and random
// released cuboids.
func TestConsistentMatchesSweepRandom(t *testing.T) {
	r := noise.NewSeeded(8)
	for trial := range 400 {
		sizes := make([]int, 1+r.Uint64N(5))
		for i := range sizes {
			sizes[i] = 1 + int(r.Uint64N(6))
		}
		s := testkit.TestSchema(t, sizes...)
		base := uint64(domain.Base(len(sizes)))
		over := domain.Cuboid(r.Uint64N(base + 1))
		exact := make([]domain.Cuboid, 1+r.Uint64N(5))
		for i := range exact {
			exact[i] = domain.Cuboid(r.Uint64N(base + 1))
		}
		truth := &cube.Cube{Schema: s, Counts: testkit.RandomTable(r, s.Cells())}
		inv := invariantsOf(truth, exact)
		x := testkit.Noisy(r, truth.Project(over), 3)
		want := append([]float64(nil), x...)
		cons, err := Constraints(s, over, want, inv)
		if err != nil {
			t.Fatal(err)
		}
		sweepConsistent(s.SubSizesOf(over), want, cons)
		got := append([]float64(nil), x...)
		if err := Consistent(s, over, got, inv); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if math.Abs(got[i]-want[i]) > 1e-12*max(1, math.Abs(want[i])) {
				t.Fatalf("trial %d: %v exact %v over %v: cell %d = %v, sweep %v", trial, sizes, exact, over, i, got[i], want[i])
			}
		}
	}
}

// BenchmarkConsistent measures the consistency step: one read pass and one
// read-write pass whatever the number of exact cuboids (compare with
// BenchmarkMemoryFloor on the same shape, in the same run).
func BenchmarkConsistent(b *testing.B) {
	for _, sh := range testkit.BenchShapes {
		sizes := make([]int, sh.Dims)
		for i := range sizes {
			sizes[i] = 10
		}
		s := testkit.TestSchema(b, sizes...)
		x := make([]float64, s.Cells())
		r := noise.NewSeeded(1)
		for i := range x {
			x[i] = float64(r.Uint64N(4))
		}
		c := &cube.Cube{Schema: s, Counts: x}
		for _, k := range []int{1, 2, 4} {
			var exact []domain.Cuboid
			for _, e := range testkit.BenchExact[k] {
				exact = append(exact, testkit.CuboidOf(e))
			}
			inv := invariantsOf(c, exact)
			b.Run(fmt.Sprintf("cells=%s/exact=%d", sh.Name, k), func(b *testing.B) {
				b.SetBytes(int64(8 * len(x)))
				for b.Loop() {
					if err := Consistent(s, domain.Base(sh.Dims), x, inv); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(x))*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mcells/s")
			})
			// The former one-projection-per-invariant sweep (single
			// goroutine), for comparison.
			b.Run(fmt.Sprintf("cells=%s/exact=%d/sweep", sh.Name, k), func(b *testing.B) {
				cons, err := Constraints(s, domain.Base(sh.Dims), x, inv)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(8 * len(x)))
				for b.Loop() {
					sweepConsistent(s.Sizes(), x, cons)
				}
				b.ReportMetric(float64(len(x))*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mcells/s")
			})
		}
	}
}

// invariantsOf returns the exact counts of the given cuboids of c.
func invariantsOf(c *cube.Cube, exact []domain.Cuboid) []Invariant {
	inv := make([]Invariant, len(exact))
	for i, e := range exact {
		inv[i] = Invariant{Cuboid: e, Counts: c.Project(e)}
	}
	return inv
}
