package noise

import (
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// valueTable holds inputs a query might hand a mechanism, including values
// no count reaches: none of them may make a mechanism fail, since whether
// it fails would be a fact about the data.
var valueTable = []float64{
	0, 1, -1, 0.3, 5e-324, -5e-324, 1e15, 0x1p31, 0x1p51, 0x1p60, -0x1p60, 1e300, -1e300,
	math.MaxFloat64, -math.MaxFloat64, math.Inf(1), math.Inf(-1), math.NaN(),
}

// TestNoErrorDependsOnValue runs every grid mechanism on every value of
// valueTable, alone (Add) and in a vector (AddTo): no error, every output a
// finite grid multiple, and only values beyond Range() clamped, to
// ±Range(), so that the output for +Inf is distributed as the output for
// Range(); Range() itself is min(2^1000 Grid, 2^1000) and at least MinRange.
func TestNoErrorDependsOnValue(t *testing.T) {
	type mech struct {
		name string
		add  func(r *Rand, x float64) (float64, error)
		to   func(r *Rand, xs []float64) error
		grid float64
		rng  float64
	}
	var mechs []mech
	for _, p := range []struct{ s, e float64 }{{1, 1}, {1, 1e-3}, {1e-270, 1}, {minGridParam, 1}, {1, 1 / minGridParam}, {1e290, 1}, {2, 0.5}} {
		l, err := NewLaplace(p.s, p.e)
		if err != nil {
			t.Fatalf("NewLaplace(%v, %v): %v", p.s, p.e, err)
		}
		mechs = append(mechs, mech{"Laplace", l.Add, l.AddTo, l.Grid(), l.Range()})
	}
	for _, b := range []float64{1e-6, 1, 1e200, maxGridParam} {
		l, err := NewLaplaceScale(b, b)
		if err != nil {
			t.Fatalf("NewLaplaceScale(%v, %v): %v", b, b, err)
		}
		mechs = append(mechs, mech{"LaplaceScale", l.Add, l.AddTo, l.Grid(), l.Range()})
	}
	for _, m := range mechs {
		if want := min(0x1p1000*m.grid, 0x1p1000); m.rng != want || m.rng < MinRange {
			t.Errorf("%s grid %g: Range() = %g, want %g and at least MinRange", m.name, m.grid, m.rng, want)
		}
		xs := append([]float64(nil), valueTable...)
		if err := m.to(NewSeeded(1), xs); err != nil {
			t.Fatalf("%s grid %g: AddTo: %v", m.name, m.grid, err)
		}
		for i, x := range valueTable {
			y, err := m.add(NewSeeded(uint64(i)), x)
			if err != nil {
				t.Fatalf("%s grid %g: Add(%v): %v", m.name, m.grid, x, err)
			}
			for _, out := range []float64{y, xs[i]} {
				k := out / m.grid
				if math.IsInf(out, 0) || math.IsNaN(out) || k != math.Trunc(k) {
					t.Fatalf("%s grid %g: input %v gave %v, not a finite grid multiple", m.name, m.grid, x, out)
				}
			}
			// Clamping: the same seed gives the same output as the clamp.
			want := x
			switch {
			case x != x:
				want = 0
			case math.Abs(x) > m.rng:
				want = math.Copysign(m.rng, x)
			}
			if yc, _ := m.add(NewSeeded(uint64(i)), want); yc != y {
				t.Errorf("%s grid %g: Add(%v) = %v, but Add(%v) = %v with the same seed", m.name, m.grid, x, y, want, yc)
			}
		}
	}
}

func TestLaplaceRejectsOutOfRangeGrid(t *testing.T) {
	for _, tc := range []struct {
		make func() (Laplace, error)
		name string
	}{
		{func() (Laplace, error) { return NewLaplace(1e-303, 1) }, "sensitivity"},
		{func() (Laplace, error) { return NewLaplace(1e-272, 1) }, "sensitivity"},
		{func() (Laplace, error) { return NewLaplace(1, 1e303) }, "sensitivity/epsilon"},
		{func() (Laplace, error) { return NewLaplace(1, 1e272) }, "sensitivity/epsilon"},
		{func() (Laplace, error) { return NewLaplace(1e300, 1) }, "sensitivity"},
		{func() (Laplace, error) { return NewLaplaceScale(1e-303, 1) }, "Laplace scale"},
		{func() (Laplace, error) { return NewLaplaceScale(1e-272, 1) }, "Laplace scale"},
		{func() (Laplace, error) { return NewLaplaceScale(1, 1e-305) }, "Laplace resolution"},
		{func() (Laplace, error) { return NewLaplaceScale(1e299, 1) }, "Laplace scale"},
		{func() (Laplace, error) { return NewLaplace(1, 1e-9) }, "epsilon is too small"},
	} {
		_, err := tc.make()
		if err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("got %v, want an error naming %q", err, tc.name)
		}
	}
	// The smallest accepted parameters still give exact grid outputs.
	l, err := NewLaplace(minGridParam, 1)
	if err != nil {
		t.Fatal(err)
	}
	if g := l.Grid(); g < 0x1p-1022 {
		t.Errorf("grid %g is subnormal", g)
	}
	y, _ := l.Add(NewSeeded(1), 3*minGridParam)
	if k := y / l.Grid(); k != math.Trunc(k) || math.Abs(k-3*0x1p21) > 200*0x1p21 {
		t.Errorf("output %v is %v grid steps from the input's %v", y, k, 3*0x1p21)
	}
}

// TestLaplaceLossExact pins Loss to ceil(d/Grid) grid steps, checks that
// real inputs within d round at most that far apart and that the bound is
// attained, and that NewLaplace's calibration is tight.
func TestLaplaceLossExact(t *testing.T) {
	l, err := NewLaplace(1, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	g, ts := l.Grid(), l.Dist().Scale()
	for _, tc := range []struct{ d, steps float64 }{
		{0, 0}, {g, 1}, {1, 0x1p20}, {3 * g, 3}, {2.5 * g, 3}, {g / 4, 1}, {-2 * g, 2}, {1 + g/2, 0x1p20 + 1},
	} {
		if got, want := l.Loss(tc.d), tc.steps/ts; got != want {
			t.Errorf("Loss(%v grid steps) = %v, want %v", tc.d/g, got, want)
		}
	}
	if got := l.Loss(1); got > 0.5 || got < 0.5*(1-1e-11) {
		t.Errorf("Loss(sensitivity) = %v, want 0.5 to 1e-11", got)
	}
	r := NewSeeded(4)
	for range 20000 {
		d := float64(r.Uint64N(40)) * g / 8 // multiples of grid/8, on and off the grid
		x := (float64(r.Uint64()>>11)*0x1p-53 - 0.5) * 64 * g
		y := x + d*float64(r.Uint64()>>11)*0x1p-53
		if steps := math.Abs(float64(roundHalfUp(y/g) - roundHalfUp(x/g))); steps > math.Ceil(d/g) {
			t.Fatalf("inputs %v and %v within %v rounded %v steps apart > ceil %v", x, y, d, steps, math.Ceil(d/g))
		}
	}
	// Attained: on the grid for multiples of it, otherwise just below a
	// rounding boundary and d above it (all sums exact).
	for _, tc := range []struct{ x, d float64 }{
		{0, g}, {5 * g, 7 * g}, {g/2 - g*0x1p-30, 2.5 * g}, {g/2 - g*0x1p-30, 0.25 * g},
	} {
		y := tc.x + tc.d
		if steps := float64(roundHalfUp(y/g) - roundHalfUp(tc.x/g)); y-tc.x != tc.d || steps != math.Ceil(tc.d/g) {
			t.Errorf("pair %v, %v (d = %v steps) is %v steps apart, want %v", tc.x/g, y/g, tc.d/g, steps, math.Ceil(tc.d/g))
		}
	}
	for _, p := range []struct{ s, e float64 }{{1, 1}, {0.37, 3}, {6, 1e-3}, {1e-200, 1e-4}, {3, 7}} {
		l, err := NewLaplace(p.s, p.e)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.Loss(p.s); got > p.e*(1-0x1p-41) || got < p.e*(1-1e-11) {
			t.Errorf("NewLaplace(%v, %v): Loss(sensitivity) = %v", p.s, p.e, got)
		}
	}
}

// TestCategoricalSubnormalWeights samples weights whose sum is subnormal,
// which the fast path mishandled before they were rescaled.
func TestCategoricalSubnormalWeights(t *testing.T) {
	const n = 100_000
	for _, w := range [][]float64{
		{5e-324, 5e-324},
		{5e-324, 1e-323},
		{5e-324, 0, 1.5e-323, 0x1p-1030},
		{0x1p-1060, 0x1p-1000}, // scaling up keeps the tiny weight exact
	} {
		c, err := NewCategorical(w)
		if err != nil {
			t.Fatal(err)
		}
		var total float64
		for _, x := range w {
			total += math.Ldexp(x, 1074)
		}
		r := NewSeeded(19)
		counts := make([]int, len(w))
		for range n {
			counts[c.Sample(r)]++
		}
		var stat float64
		df := -1
		for i, x := range w {
			p := math.Ldexp(x, 1074) / total
			if got := c.Prob(i); math.Abs(got-p) > 1e-15 {
				t.Errorf("%v: Prob(%d) = %v, want %v", w, i, got, p)
			}
			if p == 0 {
				if counts[i] != 0 {
					t.Errorf("%v: zero weight %d drawn", w, i)
				}
				continue
			}
			e := p * n
			if e < 5 {
				continue
			}
			stat += (float64(counts[i]) - e) * (float64(counts[i]) - e) / e
			df++
		}
		if df == 0 {
			continue // one category carries all but 2^-60 of the mass
		}
		if crit := (distuv.ChiSquared{K: float64(df)}).Quantile(1 - 1e-4); stat > crit {
			t.Errorf("%v: chi-square %.1f > %.1f; counts %v", w, stat, crit, counts)
		}
	}
}
