package integer

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate"
	"github.com/knowdp/knowdp/noise"
)

// TestProjectSimplex compares the projection onto the simplex with the
// least-squares point of Dykstra's iteration (estimate.SolveNonNegative, the
// general path's non-negative step) on random columns with negative cells.
func TestProjectSimplex(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		n := 1 + rng.IntN(40)
		v := make([]float64, n)
		for i := range v {
			v[i] = 6*rng.Float64() - 2.5
		}
		target := 5 * rng.Float64()
		if trial%10 == 0 {
			target = 0
		}
		got := append([]float64(nil), v...)
		projectSimplex(got, target, make([]float64, n))
		values := make([]string, n)
		for i := range values {
			values[i] = string(rune('a'+i%26)) + string(rune('a'+i/26))
		}
		s, err := domain.NewSchema([]domain.Dimension{{Name: "child", Values: values}})
		if err != nil {
			t.Fatal(err)
		}
		want, err := estimate.SolveNonNegative(context.Background(), s, 1, v,
			[]estimate.Invariant{{Cuboid: 0, Counts: []float64{target}}}, estimate.NonNegative{Tol: 1e-12, MaxIter: 100000})
		if err != nil {
			t.Fatal(err)
		}
		var sum float64
		for i, y := range got {
			if y < 0 {
				t.Fatalf("trial %d: cell %d is %v", trial, i, y)
			}
			sum += y
			if math.Abs(y-want.Y[i]) > 1e-9 {
				t.Fatalf("trial %d (n %d, t %v): cell %d is %v, Dykstra %v", trial, n, target, i, y, want.Y[i])
			}
		}
		if math.Abs(sum-target) > 1e-12*max(1, target) {
			t.Fatalf("trial %d: sum %v, want %v", trial, sum, target)
		}
	}
}

// TestRoundColumn checks the column's dependent rounding: every cell at its
// floor or ceiling, the column adding up to its target exactly, and each
// cell's mean over many draws its input (within 5 standard errors of the
// draws' count).
func TestRoundColumn(t *testing.T) {
	for _, z := range [][]float64{
		{0.5, 0.5},
		{0.3, 1.2, 2.5, 0, 4.0, 0.7, 0.3},
		{0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1},
		{3, 4, 5},
		{0.999999999999, 1e-12, 2}, // nearly whole: the quantised fractions
	} {
		var total float64
		for _, v := range z {
			total += v
		}
		target := int64(math.Round(total))
		r := noise.NewSeeded(7)
		const runs = 20000
		sum := make([]float64, len(z))
		y := make([]int64, len(z))
		for range runs {
			roundColumn(z, target, r, y)
			var s int64
			for i, v := range y {
				if float64(v) != math.Floor(z[i]) && float64(v) != math.Ceil(z[i]) {
					t.Fatalf("%v: cell %d rounded to %d", z, i, v)
				}
				s += v
				sum[i] += float64(v)
			}
			if s != target {
				t.Fatalf("%v: sum %d, want %d", z, s, target)
			}
		}
		for i, v := range z {
			f := v - math.Floor(v)
			se := math.Sqrt(f * (1 - f) / runs)
			if mean := sum[i] / runs; math.Abs(mean-v) > 5*se+1e-9 {
				t.Errorf("%v: cell %d mean %v, want %v (se %v)", z, i, mean, v, se)
			}
		}
	}
	// Fractions whose quantised sum is off by a unit's worth are brought
	// back to the target.
	z := []float64{1.0 / 3, 1.0 / 3, 1.0/3 + 1e-11}
	y := make([]int64, 3)
	roundColumn(z, 1, noise.NewSeeded(1), y)
	if y[0]+y[1]+y[2] != 1 {
		t.Fatalf("%v: rounded to %v", z, y)
	}
}
