package metricdp

import (
	"context"
	"math"
	"testing"

	"github.com/knowdp/knowdp/noise"
)

var bg = context.Background()

// uniform returns a float64 uniform in [0, 1).
func uniform(r *noise.Rand) float64 { return float64(r.Uint64()>>11) / (1 << 53) }

// randomGridPoints returns n distinct points of {0..side-1}^2.
func randomGridPoints(r *noise.Rand, n, side int) [][]float64 {
	seen := map[[2]int]bool{}
	var pts [][]float64
	for len(pts) < n {
		p := [2]int{int(r.Uint64N(uint64(side))), int(r.Uint64N(uint64(side)))}
		if seen[p] {
			continue
		}
		seen[p] = true
		pts = append(pts, []float64{float64(p[0]), float64(p[1])})
	}
	return pts
}

// randomQueries returns k queries over n elements with coefficients uniform
// in [0,1) or, if binary, in {0,1}.
func randomQueries(t testing.TB, r *noise.Rand, k, n int, binary bool) *Queries {
	t.Helper()
	rows := make([][]float64, k)
	for l := range rows {
		rows[l] = make([]float64, n)
		for i := range rows[l] {
			if binary {
				rows[l][i] = float64(r.Uint64N(2))
			} else {
				rows[l][i] = uniform(r)
			}
		}
	}
	q, err := NewQueries(rows)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// randomMetrics returns a few metrics of different kinds on n elements.
func randomMetrics(t testing.TB, r *noise.Rand, n int) map[string]Metric {
	t.Helper()
	out := map[string]Metric{}
	e, err := NewEuclidean(randomGridPoints(r, n, 12), 0.3+uniform(r))
	if err != nil {
		t.Fatal(err)
	}
	out["euclidean"] = e
	var edges []Edge
	for i := 1; i < n; i++ {
		edges = append(edges, Edge{int(r.Uint64N(uint64(i))), i, 0.1 + uniform(r)})
	}
	for range n {
		a, b := int(r.Uint64N(uint64(n))), int(r.Uint64N(uint64(n)))
		if a != b {
			edges = append(edges, Edge{a, b, 0.1 + 2*uniform(r)})
		}
	}
	g, err := NewGraph(bg, n, edges)
	if err != nil {
		t.Fatal(err)
	}
	out["graph"] = g
	th, err := NewThreshold(bg, e, 2.5*e.scale, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	out["threshold"] = th
	// Arbitrary budgets closed into a metric.
	d := make([][]float64, n)
	for i := range d {
		d[i] = make([]float64, n)
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			d[i][j] = 0.05 + 3*uniform(r)
			d[j][i] = d[i][j]
		}
	}
	raw, err := denseFromRows(d)
	if err != nil {
		t.Fatal(err)
	}
	cl, _, err := Closure(bg, raw)
	if err != nil {
		t.Fatal(err)
	}
	out["closure"] = cl
	return out
}

func near(a, b, rel float64) bool {
	if a == b {
		return true
	}
	return math.Abs(a-b) <= rel*math.Max(math.Abs(a), math.Abs(b))
}
