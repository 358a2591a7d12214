package prior

import (
	"math"
	"strings"
	"testing"
)

func TestNewDiscreteErrors(t *testing.T) {
	num := []Component{{Name: "x", Level: Numeric}}
	nom := []Component{{Name: "n", Level: Nominal, Categories: []string{"a", "b"}}}
	for _, c := range []struct {
		name   string
		comps  []Component
		points []Point
		probs  []float64
		want   string
	}{
		{"no components", nil, []Point{{}}, []float64{1}, "at least one component"},
		{"no level", []Component{{Name: "x"}}, []Point{{0}}, []float64{1}, "no valid level"},
		{"numeric with categories", []Component{{Name: "x", Level: Numeric, Categories: []string{"a"}}}, []Point{{0}}, []float64{1}, "cannot have categories"},
		{"nominal without categories", []Component{{Name: "n", Level: Nominal}}, []Point{{0}}, []float64{1}, "needs its categories"},
		{"duplicate category", []Component{{Name: "n", Level: Nominal, Categories: []string{"a", "a"}}}, []Point{{0}}, []float64{1}, `category "a" twice`},
		{"duplicate component", []Component{{Name: "x", Level: Numeric}, {Name: "x", Level: Numeric}}, []Point{{0, 0}}, []float64{1}, `"x" appears twice`},
		{"empty support", num, nil, nil, "empty"},
		{"length mismatch", num, []Point{{0}, {1}}, []float64{1}, "2 points but 1 probabilities"},
		{"wrong dimension", num, []Point{{0, 1}}, []float64{1}, "point 0 has 2 coordinates"},
		{"NaN coordinate", num, []Point{{math.NaN()}}, []float64{1}, "not finite"},
		{"Inf coordinate", num, []Point{{math.Inf(1)}}, []float64{1}, "not finite"},
		{"bad category position", nom, []Point{{2}}, []float64{1}, "not the position of a category"},
		{"fractional category", nom, []Point{{0.5}}, []float64{1}, "not the position of a category"},
		{"duplicate point", num, []Point{{1}, {0}, {1}}, []float64{0.2, 0.3, 0.5}, "points 0 and 2 are both 1"},
		{"negative", num, []Point{{0}, {1}}, []float64{1.5, -0.5}, "probabilities[1] = -0.5"},
		{"NaN probability", num, []Point{{0}, {1}}, []float64{math.NaN(), 1}, "probabilities[0] = NaN"},
		{"sum below one", num, []Point{{0}, {1}}, []float64{0.5, 0.4}, "sum to 0.9"},
		{"all zero", num, []Point{{0}}, []float64{0}, "sum to 0"},
	} {
		_, err := NewDiscrete(c.comps, c.points, c.probs)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	// -0 and 0 are the same point.
	if _, err := NewNumeric("x", []float64{0, math.Copysign(0, -1)}, []float64{0.5, 0.5}); err == nil {
		t.Error("0 and -0 were accepted as different points")
	}
}

func TestNormalisation(t *testing.T) {
	p, err := NewNumeric("x", []float64{0, 1, 2}, []float64{0.3333333, 0.3333333, 0.3333333})
	if err != nil {
		t.Fatal(err)
	}
	if s := p.Prob(0) + p.Prob(1) + p.Prob(2); math.Abs(s-1) > 1e-15 {
		t.Errorf("normalised mass %v", s)
	}
	if _, err := NewNumeric("x", []float64{0, 1}, []float64{0.5, 0.500002}); err == nil {
		t.Error("a mass 2e-6 away from one was accepted")
	}
}

func TestNewPiecewiseErrors(t *testing.T) {
	for _, c := range []struct {
		name   string
		pieces []Piece
		want   string
	}{
		{"none", nil, "at least one piece"},
		{"empty interval", []Piece{{1, 1, 1}}, "lo 1 must be below hi 1"},
		{"reversed", []Piece{{1, 0, 1}}, "must be below"},
		{"NaN end", []Piece{{math.NaN(), 1, 1}}, "must be finite"},
		{"infinite end", []Piece{{0, math.Inf(1), 0}}, "must be finite"},
		{"negative density", []Piece{{0, 1, 2}, {1, 2, -1}}, "density -1"},
		{"overlap", []Piece{{0, 1, 0.5}, {0.5, 1.5, 0.5}}, "overlap"},
		{"mass", []Piece{{0, 1, 0.5}}, "sum to 0.5"},
		{"too wide", []Piece{{-1e308, 1e308, 0}, {0, 1, 1}}, "too wide"},
	} {
		_, err := NewPiecewise("x", c.pieces)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	// Pieces may come in any order and touch; gaps have density zero.
	p, err := NewPiecewise("x", []Piece{{2, 3, 0.5}, {0, 1, 0.25}, {1, 2, 0.25}})
	if err != nil {
		t.Fatal(err)
	}
	if ps := p.Pieces(); ps[0].Lo != 0 || ps[2].Hi != 3 || len(p.support) != 1 {
		t.Errorf("pieces %v, support %v", ps, p.support)
	}
}

func TestIndependent(t *testing.T) {
	a, _ := NewCategorical(Component{Name: "a", Level: Nominal, Categories: []string{"No", "Yes"}}, []float64{0.4, 0.6})
	b, _ := NewNumeric("b", []float64{0, 1, 2}, []float64{0.5, 0.3, 0.2})
	j, err := Independent(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if j.Len() != 6 || len(j.Components()) != 2 {
		t.Fatalf("product has %d points, %d components", j.Len(), len(j.Components()))
	}
	for i := range j.Len() {
		pt := j.Point(i)
		want := a.Prob(int(pt[0])) * b.Prob(int(pt[1]))
		if math.Abs(j.Prob(i)-want) > 1e-15 {
			t.Errorf("P%v = %v, want %v", pt, j.Prob(i), want)
		}
	}
	if got := j.Format(j.Point(5)); got != "(Yes, 2)" {
		t.Errorf("Format = %q", got)
	}
	if _, err := Independent(); err == nil {
		t.Error("no marginals accepted")
	}
	big, _ := NewNumeric("x", make1(5000), uniformProbs(5000))
	big2, _ := NewNumeric("y", make1(5000), uniformProbs(5000))
	if _, err := Independent(big, big2); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("a product of 25e6 points: %v", err)
	}
}

func make1(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(i)
	}
	return v
}

func uniformProbs(n int) []float64 {
	p := make([]float64, n)
	for i := range p {
		p[i] = 1 / float64(n)
	}
	return p
}

func TestComponentText(t *testing.T) {
	c := Component{Name: "g", Level: Ordinal, Categories: []string{"low", "mid", "high"}}
	if c.Coordinate("mid") != 1 || !math.IsNaN(c.Coordinate("other")) {
		t.Error("categorical Coordinate")
	}
	if c.Format(2) != "high" || c.Format(7) != "7" {
		t.Error("categorical Format")
	}
	n := Component{Name: "x", Level: Numeric}
	if n.Coordinate(" 2.5") != 2.5 || !math.IsNaN(n.Coordinate("NA")) || n.Format(0.25) != "0.25" {
		t.Error("numeric Coordinate/Format")
	}
	for _, l := range []Level{Numeric, Ordinal, Nominal} {
		if got, err := ParseLevel(l.String()); err != nil || got != l {
			t.Errorf("ParseLevel(%v) = %v, %v", l, got, err)
		}
	}
	if _, err := ParseLevel("interval"); err == nil {
		t.Error("ParseLevel accepted an unknown level")
	}
}

func TestDistances(t *testing.T) {
	comps := []Component{{Name: "x", Level: Numeric}, {Name: "n", Level: Nominal, Categories: []string{"a", "b"}}, {Name: "o", Level: Ordinal, Categories: []string{"1", "2", "3", "4"}}}
	a, b := Point{1, 0, 0}, Point{4, 1, 2} // component distances 3, 1, 2
	for _, c := range []struct {
		norm    Norm
		weights []float64
		want    float64
	}{
		{L1, nil, 6},
		{L2, nil, math.Sqrt(14)},
		{LInf, nil, 3},
		{L1, []float64{1, 2, 0.5}, 3 + 2 + 1},
		{L2, []float64{0, 3, 1}, math.Sqrt(9 + 4)},
		{LInf, []float64{0.5, 4, 1}, 4},
	} {
		d, err := Combine(comps, c.norm, c.weights)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.Between(a, b); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("%v: %v, want %v", d, got, c.want)
		}
	}
	// Table 1.
	for _, c := range []struct {
		d    Distance
		x, y float64
		want float64
	}{
		{Absolute(), 0.25, 1, 0.75},
		{OrdinalDistance(), 1, 3, 2},
		{NominalDistance(), 1, 3, 1},
		{NominalDistance(), 2, 2, 0},
		{ForComponent(comps[1]), 0, 1, 1},
		{ForComponent(comps[2]), 0, 3, 3},
	} {
		if got := c.d.Between(Point{c.x}, Point{c.y}); got != c.want {
			t.Errorf("%v(%v, %v) = %v, want %v", c.d, c.x, c.y, got, c.want)
		}
	}
	for _, c := range []struct {
		norm    Norm
		weights []float64
		want    string
	}{
		{Norm(9), nil, "unknown norm"},
		{L1, []float64{1}, "1 weights for 3 components"},
		{L1, []float64{1, -1, 1}, "weight 1 = -1"},
		{L2, []float64{1, math.NaN(), 1}, "weight 1 = NaN"},
	} {
		if _, err := Combine(comps, c.norm, c.weights); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Combine(%v, %v): %v, want %q", c.norm, c.weights, err, c.want)
		}
	}
	for _, s := range []string{"l1", "L2", "linf"} {
		if _, err := ParseNorm(s); err != nil {
			t.Error(err)
		}
	}
	if _, err := ParseNorm("l3"); err == nil {
		t.Error("ParseNorm accepted l3")
	}
	bad := Custom("", func(a, b Point) float64 { return math.NaN() })
	if bad.String() != "custom" || !math.IsInf(bad.Between(a, b), 1) {
		t.Error("a NaN custom distance should count as +Inf")
	}
}
