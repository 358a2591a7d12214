package prior

import (
	"math"
	"testing"

	"github.com/knowdp/knowdp/noise"
)

// within checks an observed count against its expectation with a tolerance
// of 5 standard errors, so the seeded tests never flake.
func within(t *testing.T, what string, count, n int, p float64) {
	t.Helper()
	se := math.Sqrt(float64(n) * p * (1 - p))
	if d := math.Abs(float64(count) - float64(n)*p); d > 5*se+1e-9 {
		t.Errorf("%s: %d of %d, expected %.1f (5 SE = %.1f)", what, count, n, float64(n)*p, 5*se)
	}
}

func TestSampleDiscrete(t *testing.T) {
	c := Component{Name: "g", Level: Ordinal, Categories: []string{"A", "B", "C", "D", "E"}}
	p, _ := NewCategorical(c, []float64{0.1, 0.2, 0.3, 0.25, 0.15})
	m := mustNew(t, p, Config{Kind: Individual, Epsilon: mustEps(t, 1), Delta: mustDelta(t, 0.05)})
	q := mustRefine(t, m, Point{1}).(*Discrete)
	r := noise.NewSeeded(3)
	const n = 100000
	counts := make([]int, q.Len())
	for range n {
		counts[q.SampleIndex(r)]++
	}
	for i, k := range counts {
		within(t, c.Categories[i], k, n, q.Prob(i))
	}
	if x := q.Sample(r); len(x) != 1 || x[0] != math.Trunc(x[0]) {
		t.Errorf("Sample returned %v", x)
	}
}

func TestSamplePiecewise(t *testing.T) {
	p, err := NewPiecewise("x", []Piece{{0, 0.3, 2}, {0.5, 1, 0.8}})
	if err != nil {
		t.Fatal(err)
	}
	m := mustNew(t, p, Config{Kind: Statistical, Epsilon: mustEps(t, 1.5), Delta: mustDelta(t, 0.2)})
	q := mustRefine(t, m, Point{0.38}).(*Piecewise)
	at, atomMass := q.Atom()
	if at != 0.3 { // 0.38 lies in the gap; 0.3 is the nearer support point
		t.Fatalf("atom at %v, want 0.3", at)
	}
	r := noise.NewSeeded(4)
	const n = 100000
	pieces := q.Pieces()
	counts := make([]int, len(pieces))
	atomCell := math.Floor(at / q.Grid())
	var atomCount int
	for range n {
		j := q.SampleCell(r)
		x := q.CellValue(j)
		if !(x >= 0 && x <= 0.3 || x >= 0.5 && x <= 1) {
			t.Fatalf("response %v outside the support", x)
		}
		if float64(j) == atomCell {
			atomCount++
			continue
		}
		for k, pc := range pieces {
			if float64(j)*q.Grid() >= pc.Lo && float64(j)*q.Grid() < pc.Hi {
				counts[k]++
			}
		}
	}
	within(t, "atom", atomCount, n, atomMass)
	for k, pc := range pieces {
		within(t, "piece", counts[k], n, pc.Density*(pc.Hi-pc.Lo))
	}
}

// Cells are drawn in proportion to their overlap with the piece; the
// response is the cell's centre, moved into the support.
func TestGridCells(t *testing.T) {
	u, _ := Uniform("x", 0, 1)
	if u.Grid() != 0x1p-40 {
		t.Errorf("grid for [0, 1] = %v, want 2^-40", u.Grid())
	}
	far, _ := Uniform("x", 1e6, 1e6+1)
	if far.Grid() != 0x1p-33 { // 2^-52 of 2^19, the float64 resolution there
		t.Errorf("grid for [1e6, 1e6+1] = %v, want 2^-33", far.Grid())
	}
	p, _ := NewPiecewise("x", []Piece{{0.3, 0.7, 2.5}})
	p.sampler()
	cs := p.cells[0]
	h := p.Grid()
	if cs.first != int64(math.Floor(0.3/h)) || cs.last != int64(math.Ceil(0.7/h))-1 {
		t.Errorf("cells %d..%d", cs.first, cs.last)
	}
	left, right := float64(cs.first+1)*h-0.3, 0.7-float64(cs.last)*h
	interior := float64(cs.last-cs.first-1) * h
	tot := left + interior + right
	for k, want := range []float64{left / tot, interior / tot, right / tot} {
		if math.Abs(cs.parts.Prob(k)-want) > 1e-15 {
			t.Errorf("part %d: probability %v, want %v", k, cs.parts.Prob(k), want)
		}
	}
	centre := (float64(cs.first) + 0.5) * h
	if v := p.CellValue(cs.first); v != max(centre, 0.3) {
		t.Errorf("first cell's response %v, want max(centre %v, 0.3)", v, centre)
	}
	if v := p.CellValue(cs.first - 3); v != 0.3 {
		t.Errorf("a cell below the support answers %v, want its edge 0.3", v)
	}
	if v := p.CellValue(cs.first + 5); v != (float64(cs.first+5)+0.5)*h {
		t.Errorf("interior cell's response %v is not its centre", v)
	}
	gap, _ := NewPiecewise("x", []Piece{{0, 1, 0.5}, {1, 2, 0}, {2, 3, 0.5}})
	for _, c := range []struct{ x, want float64 }{{1.2, 1}, {1.8, 2}, {1.5, 1}, {-1, 0}, {9, 3}, {2.5, 2.5}} {
		if got := gap.nearestSupport(c.x); got != c.want {
			t.Errorf("nearestSupport(%v) = %v, want %v", c.x, got, c.want)
		}
	}
}

func TestMeanVarianceMass(t *testing.T) {
	p, _ := NewPiecewise("x", []Piece{{0, 1, 0.25}, {2, 3, 0.75}})
	// Mean 0.25*0.5 + 0.75*2.5 = 2; E[x^2] = 0.25/3 + 0.75*19/3 = 4.833..
	if math.Abs(p.Mean()-2) > 1e-15 || math.Abs(p.Variance()-(0.25/3+0.75*19/3-4)) > 1e-12 {
		t.Errorf("mean %v, variance %v", p.Mean(), p.Variance())
	}
	if got := p.Mass(0.5, 2.5); math.Abs(got-0.5) > 1e-15 {
		t.Errorf("Mass(0.5, 2.5) = %v", got)
	}
	d, _ := NewNumeric("x", []float64{1, 3}, []float64{0.25, 0.75})
	if d.Mean() != 2.5 {
		t.Errorf("discrete mean %v", d.Mean())
	}
}
