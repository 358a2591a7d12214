package metricdp

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/noise"
)

func TestScaleHandExample(t *testing.T) {
	// Points 0, 1, 3 on a line; q = (0, 1, 3): |dq|/d is 1 for every pair.
	m, _ := NewEuclidean([][]float64{{0}, {1}, {3}}, 1)
	b, err := Scale(bg, m, []float64{0, 1, 3})
	if err != nil || b != 1 {
		t.Fatalf("Scale = %v, %v; want 1", b, err)
	}
	q, _ := NewQueries([][]float64{{0, 1, 3}})
	eps, base, err := Baseline(bg, m, q)
	if err != nil || eps != 1 || base != 3 {
		t.Fatalf("Baseline = %v, %v, %v; want 1, 3", eps, base, err)
	}
	per, geo := Improvement(base, []float64{b})
	if per[0] != 3 || !near(geo, 3, 1e-15) {
		t.Fatalf("improvement %v %v, want 3", per, geo)
	}
	// q = (0, 3, 0): the close pair (0,1) sees 3, b = 3, no improvement.
	if b, _ := Scale(bg, m, []float64{0, 3, 0}); b != 3 {
		t.Fatalf("Scale = %v, want 3", b)
	}
}

func TestScaleExampleOne(t *testing.T) {
	// Example 1: the Native=Y query and its complement both need scale
	// 1/eps; a gender query needs only 1/epsOther, and none with epsOther =
	// +Inf ("noiseless answers to the non-sensitive queries").
	eps, other := 0.1, 2.0
	m := exampleOne(t, eps, other)
	yes := []float64{1, 1, 0, 0, 1, 1, 0, 0} // MYA MYB MNA MNB FYA FYB FNA FNB
	no := []float64{0, 0, 1, 1, 0, 0, 1, 1}
	male := []float64{1, 1, 1, 1, 0, 0, 0, 0}
	for _, c := range []struct {
		name string
		q    []float64
		want float64
	}{{"Y", yes, 1 / eps}, {"N", no, 1 / eps}, {"M", male, 1 / other}} {
		if b, err := Scale(bg, m, c.q); err != nil || !near(b, c.want, 1e-15) {
			t.Errorf("%s: scale %v, %v; want %v", c.name, b, err, c.want)
		}
	}
	free := exampleOne(t, eps, math.Inf(1))
	if b, err := Scale(bg, free, male); err != nil || b != 0 {
		t.Errorf("gender query with unlimited budget: scale %v, %v; want 0", b, err)
	}
	// The paper's warning: with max instead of min the Y query gets only
	// 1/epsOther, so the sensitive value is not protected.
	d := make([][]float64, 8)
	for i := range d {
		d[i] = make([]float64, 8)
		for j := range d[i] {
			for a := range 3 {
				if bit(i, a) != bit(j, a) {
					e := other
					if a == 1 && (bit(i, a) == 0 || bit(j, a) == 0) {
						e = math.Max(eps, other) // max(eps_Y, eps_N)
					}
					d[i][j] += e
				}
			}
		}
	}
	maxMetric, err := NewDense(bg, d)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := Scale(bg, maxMetric, yes); !near(b, 1/other, 1e-15) {
		t.Errorf("max metric Y scale %v, want %v", b, 1/other)
	}
}

// bit returns the value index of attribute a (0 gender, 1 native, 2 age) of
// element i of Example 1's full product.
func bit(i, a int) int { return (i >> (2 - a)) & 1 }

func TestStandaloneScalesMatchBruteForce(t *testing.T) {
	r := noise.NewSeeded(5)
	for name, m := range randomMetrics(t, r, 90) {
		q := randomQueries(t, r, 3, 90, false)
		got, err := StandaloneScales(bg, m, q)
		if err != nil {
			t.Fatal(err)
		}
		for l := range 3 {
			var want float64
			for i := range 90 {
				for j := range 90 {
					if i != j && !math.IsInf(m.Dist(i, j), 1) {
						want = math.Max(want, math.Abs(q.Coef(l, i)-q.Coef(l, j))/m.Dist(i, j))
					}
				}
			}
			single, err := Scale(bg, m, q.Row(l))
			if err != nil {
				t.Fatal(err)
			}
			if !near(got[l], want, 1e-15) || !near(single, want, 1e-15) {
				t.Errorf("%s query %d: scales %v (k queries), %v (one), brute force %v", name, l, got[l], single, want)
			}
		}
	}
}

type badMetric struct{ Metric }

func (b badMetric) Dist(i, j int) float64 {
	if i != j && i+j == 1 {
		return 0
	}
	return b.Metric.Dist(i, j)
}

func TestScaleErrors(t *testing.T) {
	m, _ := NewEuclidean([][]float64{{0}, {1}, {3}}, 1)
	var zd *ZeroDistanceError
	if _, err := Scale(bg, badMetric{m}, []float64{0, 1, 2}); !errors.As(err, &zd) || zd.I != 0 || zd.J != 1 {
		t.Errorf("zero distance: %v", err)
	}
	// A query that does not tell the zero-distance pair apart is fine.
	if b, err := Scale(bg, badMetric{m}, []float64{1, 1, 2}); err != nil || b != 0.5 {
		t.Errorf("Scale = %v, %v; want 0.5", b, err)
	}
	for _, c := range []struct {
		q    []float64
		want string
	}{
		{[]float64{0, 1}, "2 coefficients"},
		{[]float64{0, math.NaN(), 1}, "NaN"},
		{[]float64{0}, "at least 2"},
	} {
		if _, err := Scale(bg, m, c.q); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Scale(%v) error %v, want %q", c.q, err, c.want)
		}
	}
	if _, err := NewQueries([][]float64{{1, 2}, {1}}); err == nil {
		t.Error("ragged queries accepted")
	}
	if _, err := NewQueries(nil); err == nil {
		t.Error("no queries accepted")
	}
}

func TestBaselineMultiQuery(t *testing.T) {
	// Baseline uses the L1 sensitivity over all pairs and eps = min d.
	m, _ := NewEuclidean([][]float64{{0}, {2}, {5}}, 0.5) // min d = 1
	q, _ := NewQueries([][]float64{{0, 1, 0}, {0, 0, 2}})
	eps, b, err := Baseline(bg, m, q)
	// L1: pair (0,1) 1, (0,2) 2, (1,2) 1+2 = 3.
	if err != nil || eps != 1 || b != 3 {
		t.Fatalf("Baseline = %v, %v, %v; want 1, 3", eps, b, err)
	}
	per, geo := Improvement(3, []float64{1, 3})
	if per[0] != 3 || per[1] != 1 || !near(geo, math.Sqrt(3), 1e-15) {
		t.Fatalf("Improvement = %v, %v", per, geo)
	}
	if _, g := Improvement(3, []float64{0, 1}); !math.IsInf(g, 1) {
		t.Fatalf("noiseless query: geo mean %v, want +Inf", g)
	}
}
