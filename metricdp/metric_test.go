package metricdp

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/knowdp/knowdp/noise"
)

func TestValidateRejects(t *testing.T) {
	inf := math.Inf(1)
	cases := []struct {
		name string
		d    [][]float64
		want string
	}{
		{"one element", [][]float64{{0}}, "at least 2"},
		{"diagonal", [][]float64{{1, 1}, {1, 0}}, "want 0"},
		{"asymmetric", [][]float64{{0, 1}, {2, 0}}, "not symmetric"},
		{"zero distance", [][]float64{{0, 0}, {0, 0}}, "> 0"},
		{"negative", [][]float64{{0, -1}, {-1, 0}}, "> 0"},
		{"NaN", [][]float64{{0, math.NaN()}, {math.NaN(), 0}}, "NaN"},
		{"triangle", [][]float64{{0, 1, 5}, {1, 0, 1}, {5, 1, 0}}, "triangle inequality fails"},
		{"triangle with inf", [][]float64{{0, 1, inf}, {1, 0, 1}, {inf, 1, 0}}, "triangle inequality fails"},
		{"ragged", [][]float64{{0, 1}, {1}}, "row 1 has 1 entries"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewDense(bg, c.d)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("NewDense error %v, want one containing %q", err, c.want)
			}
		})
	}
	var te *TriangleError
	_, err := NewDense(bg, cases[6].d)
	if !errors.As(err, &te) || te.IJ != 5 || te.IK+te.KJ != 2 {
		t.Fatalf("triangle error %#v", te)
	}
}

func TestValidateAcceptsInfiniteAndMetrics(t *testing.T) {
	inf := math.Inf(1)
	if _, err := NewDense(bg, [][]float64{{0, 1, inf}, {1, 0, inf}, {inf, inf, 0}}); err != nil {
		t.Fatal(err)
	}
	r := noise.NewSeeded(1)
	for name, m := range randomMetrics(t, r, 14) {
		if err := Validate(bg, m); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestClosureIsShortestPaths(t *testing.T) {
	// Budgets 0-1: 1, 1-2: 1, 0-2: 5 (broken); closure lowers 0-2 to 2.
	raw, _ := denseFromRows([][]float64{{0, 1, 5}, {1, 0, 1}, {5, 1, 0}})
	c, lowered, err := Closure(bg, raw)
	if err != nil {
		t.Fatal(err)
	}
	if c.Dist(0, 2) != 2 || c.Dist(2, 0) != 2 || lowered != 1 {
		t.Fatalf("closure d(0,2) = %v, lowered %d; want 2, 1", c.Dist(0, 2), lowered)
	}
	// Random budgets: the closure is a metric, never above the budgets, and
	// equals the brute-force minimum over all paths of up to n-1 hops.
	r := noise.NewSeeded(2)
	n := 7
	d := make([][]float64, n)
	for i := range d {
		d[i] = make([]float64, n)
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			d[i][j] = 0.1 + 5*uniform(r)
			d[j][i] = d[i][j]
		}
	}
	raw, _ = denseFromRows(d)
	c, _, err = Closure(bg, raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(bg, c); err != nil {
		t.Fatal(err)
	}
	// Bellman-Ford style relaxation as the independent check.
	for s := range n {
		best := append([]float64(nil), d[s]...)
		for range n {
			for u := range n {
				for v := range n {
					best[v] = math.Min(best[v], best[u]+d[u][v])
				}
			}
		}
		for v := range n {
			if !near(best[v], c.Dist(s, v), 1e-12) {
				t.Fatalf("closure d(%d,%d) = %v, shortest path %v", s, v, c.Dist(s, v), best[v])
			}
		}
	}
	if _, _, err := Closure(bg, &Dense{n: 2, d: []float64{0, 1, 2, 0}}); err == nil {
		t.Fatal("asymmetric budgets accepted")
	}
}

func TestGreatCircle(t *testing.T) {
	// One degree of arc is 2 pi R / 360 km.
	g, err := NewGreatCircle([]float64{0, 0, 90, 51.5074}, []float64{0, 1, 0, -0.1278}, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	deg := 2 * math.Pi * EarthRadiusKm / 360
	if km := g.KmBetween(0, 1); !near(km, deg, 1e-12) {
		t.Errorf("1 degree = %v km, want %v", km, deg)
	}
	if km := g.KmBetween(0, 2); !near(km, 90*deg, 1e-12) {
		t.Errorf("equator to pole = %v km, want %v", km, 90*deg)
	}
	if d := g.Dist(0, 1); !near(d, 0.01*deg, 1e-12) {
		t.Errorf("d = %v, want %v", d, 0.01*deg)
	}
	if err := Validate(bg, g); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		lat, lon []float64
		eps      float64
		want     string
	}{
		{[]float64{0, 91}, []float64{0, 0}, 1, "latitude"},
		{[]float64{0, 1}, []float64{0, 181}, 1, "longitude"},
		{[]float64{0, 1}, []float64{0, math.NaN()}, 1, "longitude"},
		{[]float64{0, 0}, []float64{180, -180}, 1, "same coordinates"},
		{[]float64{0, 1}, []float64{0}, 1, "latitudes"},
		{[]float64{0, 1}, []float64{0, 0}, 0, "per km"},
		{[]float64{90, 90}, []float64{0, 10}, 1, "pole"},
	} {
		if _, err := NewGreatCircle(c.lat, c.lon, c.eps); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewGreatCircle(%v, %v, %v) error %v, want %q", c.lat, c.lon, c.eps, err, c.want)
		}
	}
}

func TestEuclideanDatesLInf(t *testing.T) {
	e, err := NewEuclidean([][]float64{{0, 0}, {3, 4}, {6, 8}}, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if e.Dist(0, 1) != 2.5 || e.Dist(0, 2) != 5 {
		t.Errorf("Euclidean distances %v, %v; want 2.5, 5", e.Dist(0, 1), e.Dist(0, 2))
	}
	day := func(s string) time.Time { v, _ := time.Parse(time.DateOnly, s); return v }
	dm, err := NewDates([]time.Time{day("2000-01-01"), day("2000-03-01"), day("2001-01-01")}, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	// 2000 is a leap year: Jan 31 + Feb 29 = 60 days; the year has 366.
	if !near(dm.Dist(0, 1), 6, 1e-15) || !near(dm.Dist(0, 2), 36.6, 1e-15) {
		t.Errorf("date distances %v, %v; want 6, 36.6", dm.Dist(0, 1), dm.Dist(0, 2))
	}
	l, err := NewLInf([][]float64{{1, 2, 3}, {1, 5, 2}, {0, 0, 0}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if l.Dist(0, 1) != 6 || l.Dist(1, 2) != 10 {
		t.Errorf("L-inf distances %v, %v; want 6, 10", l.Dist(0, 1), l.Dist(1, 2))
	}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"dup", second(NewEuclidean([][]float64{{1, 2}, {1, 2}}, 1)), "coincide"},
		{"nan", second(NewEuclidean([][]float64{{1, math.NaN()}, {1, 2}}, 1)), "NaN"},
		{"dim", second(NewEuclidean([][]float64{{1, 2}, {1}}, 1)), "coordinates"},
		{"scale", second(NewEuclidean([][]float64{{1}, {2}}, math.Inf(1))), "scale"},
		{"one", second(NewEuclidean([][]float64{{1}}, 1)), "at least 2"},
		{"same date", second(NewDates([]time.Time{day("2001-02-03"), day("2001-02-03").Add(time.Hour)}, 1)), "coincide"},
		{"series", second(NewLInf([][]float64{{1, 2}, {1, 2}}, 1)), "equal"},
		{"series len", second(NewLInf([][]float64{{1, 2}, {1}}, 1)), "values"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, c.err, c.want)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func TestGraphShortestPaths(t *testing.T) {
	// 0 -1- 1 -1- 2, 0 -5- 2, 3 isolated.
	g, err := NewGraph(bg, 4, []Edge{{0, 1, 1}, {1, 2, 1}, {0, 2, 5}})
	if err != nil {
		t.Fatal(err)
	}
	if g.Dist(0, 2) != 2 || g.Dist(2, 0) != 2 || !math.IsInf(g.Dist(0, 3), 1) {
		t.Fatalf("graph distances %v %v", g.Dist(0, 2), g.Dist(0, 3))
	}
	for _, c := range []struct {
		edges []Edge
		want  string
	}{
		{[]Edge{{0, 4, 1}}, "outside"},
		{[]Edge{{1, 1, 1}}, "loop"},
		{[]Edge{{0, 1, 0}}, "weight"},
		{[]Edge{{0, 1, math.NaN()}}, "weight"},
	} {
		if _, err := NewGraph(bg, 4, c.edges); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewGraph(%v) error %v, want %q", c.edges, err, c.want)
		}
	}
	if _, err := NewGraph(bg, MaxDense+1, nil); err == nil {
		t.Error("oversized graph accepted")
	}
}

func TestThresholdMetrics(t *testing.T) {
	// Points on a line at 0, 1, 2, 3.5, 10 with theta = 1.5: hops 0-1-2-3,
	// 4 unreachable.
	base, _ := NewEuclidean([][]float64{{0}, {1}, {2}, {3.5}, {10}}, 1)
	th, err := NewThreshold(bg, base, 1.5, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]float64{
		{0, 0.5, 1, 1.5, math.Inf(1)},
		{0.5, 0, 0.5, 1, math.Inf(1)},
	}
	for i, row := range want {
		for j, w := range row {
			if th.Dist(i, j) != w {
				t.Errorf("threshold d(%d,%d) = %v, want %v", i, j, th.Dist(i, j), w)
			}
		}
	}
	sm, err := NewSmoothThreshold(base, 1.5, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if sm.Dist(0, 1) != 0.5 || sm.Dist(0, 2) != 0.5*2/1.5 || sm.Dist(0, 4) != 0.5*10/1.5 {
		t.Errorf("smooth distances %v %v %v", sm.Dist(0, 1), sm.Dist(0, 2), sm.Dist(0, 4))
	}
	// On random points, both are metrics and smooth <= closed threshold.
	r := noise.NewSeeded(3)
	pts, _ := NewEuclidean(randomGridPoints(r, 30, 10), 1)
	for _, theta := range []float64{1, 1.5, 3} {
		th, err := NewThreshold(bg, pts, theta, 0.7)
		if err != nil {
			t.Fatal(err)
		}
		sm, _ := NewSmoothThreshold(pts, theta, 0.7)
		for _, m := range []Metric{th, sm} {
			if err := Validate(bg, m); err != nil {
				t.Fatalf("theta %v: %v", theta, err)
			}
		}
		for i := range 30 {
			for j := range 30 {
				if sm.Dist(i, j) > th.Dist(i, j)*(1+1e-12) {
					t.Fatalf("smooth %v > threshold %v at (%d,%d)", sm.Dist(i, j), th.Dist(i, j), i, j)
				}
			}
		}
	}
	if _, err := NewThreshold(bg, base, 0, 1); err == nil {
		t.Error("theta 0 accepted")
	}
	if _, err := NewSmoothThreshold(base, 1, math.NaN()); err == nil {
		t.Error("eps NaN accepted")
	}
}

// exampleOne is the paper's Example 1: Gender {M, F}, Native {Y, N}, Age
// {A, B}; Native = Y is sensitive with budget eps, every other value has
// budget epsOther.
func exampleOne(t *testing.T, eps, epsOther float64) *AttributeMetric {
	t.Helper()
	attrs := []Attribute{
		{Name: "gender", Values: []string{"M", "F"}, Budgets: []float64{epsOther, epsOther}},
		{Name: "native", Values: []string{"Y", "N"}, Budgets: []float64{eps, epsOther}},
		{Name: "age", Values: []string{"A", "B"}, Budgets: []float64{epsOther, epsOther}},
	}
	m, err := NewAttributeMetric(attrs, FullProduct(attrs))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestAttributeMetric(t *testing.T) {
	m := exampleOne(t, 0.1, 1)
	if m.Len() != 8 {
		t.Fatalf("universe %d, want 8", m.Len())
	}
	// Elements in the paper's order MYA, MYB, MNA, MNB, FYA, FYB, FNA, FNB.
	// MYA-MNA differ in native only: min(0.1, 1) = 0.1. MYA-FNB differ in
	// all three: 1 + 0.1 + 1.
	if d := m.Dist(0, 2); d != 0.1 {
		t.Errorf("d(MYA, MNA) = %v, want 0.1", d)
	}
	if d := m.Dist(0, 7); !near(d, 2.1, 1e-15) {
		t.Errorf("d(MYA, FNB) = %v, want 2.1", d)
	}
	if err := Validate(bg, m); err != nil {
		t.Fatal(err)
	}
	// Three values with budgets 0.1, 1, 2: min breaks the triangle
	// inequality (d(b,c) = 1 > d(b,a) + d(a,c) = 0.2); the closure caps at
	// 2 * 0.1.
	attrs := []Attribute{{Name: "x", Values: []string{"a", "b", "c"}, Budgets: []float64{0.1, 1, 2}}}
	m3, err := NewAttributeMetric(attrs, FullProduct(attrs))
	if err != nil {
		t.Fatal(err)
	}
	if m3.Dist(1, 2) != 0.2 || m3.Dist(0, 1) != 0.1 {
		t.Errorf("closed attribute distances %v, %v; want 0.2, 0.1", m3.Dist(1, 2), m3.Dist(0, 1))
	}
	// Random budgets on random multi-valued attributes: always a metric.
	r := noise.NewSeeded(4)
	var as []Attribute
	for a := range 3 {
		var at Attribute
		at.Name = string(rune('p' + a))
		for v := range 2 + a {
			at.Values = append(at.Values, string(rune('a'+v)))
			at.Budgets = append(at.Budgets, 0.05+uniform(r))
		}
		as = append(as, at)
	}
	mr, err := NewAttributeMetric(as, FullProduct(as))
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(bg, mr); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		attrs []Attribute
		rows  [][]int
		want  string
	}{
		{nil, nil, "no attributes"},
		{[]Attribute{{Name: "x", Values: []string{"a"}, Budgets: nil}}, [][]int{{0}, {0}}, "budgets"},
		{[]Attribute{{Name: "x", Values: []string{"a", "b"}, Budgets: []float64{0, 1}}}, [][]int{{0}, {1}}, "budget"},
		{[]Attribute{{Name: "x", Values: []string{"a", "b"}, Budgets: []float64{1, 1}}}, [][]int{{0}, {2}}, "out of range"},
		{[]Attribute{{Name: "x", Values: []string{"a", "b"}, Budgets: []float64{1, 1}}}, [][]int{{0}, {0}}, "same attribute values"},
	} {
		if _, err := NewAttributeMetric(c.attrs, c.rows); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewAttributeMetric error %v, want %q", err, c.want)
		}
	}
}
