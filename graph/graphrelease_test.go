package graph

import (
	"context"
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
)

func TestGraphPairOrder(t *testing.T) {
	for _, directed := range []bool{false, true} {
		for n := 1; n <= 7; n++ {
			g := &GraphRelease{Vertices: n, Directed: directed}
			var want [][2]int
			if directed {
				want, _ = directedRows(n, nil, nil)
			} else {
				want, _ = undirectedRows(n, nil)
			}
			if len(want) != Pairs(n, directed) {
				t.Fatalf("n=%d directed=%v: Pairs = %d, want %d", n, directed, Pairs(n, directed), len(want))
			}
			for i, p := range want {
				if k := pairIndex(n, p[0], p[1], directed); k != i {
					t.Errorf("n=%d directed=%v: pairIndex%v = %d, want %d", n, directed, p, k, i)
				}
				if u, v := g.Pair(i); u != p[0] || v != p[1] {
					t.Errorf("n=%d directed=%v: Pair(%d) = (%d, %d), want %v", n, directed, i, u, v, p)
				}
			}
		}
	}
}

// randomGraph returns the edges of a random simple graph with about half of
// the pairs present.
func randomGraph(r *noise.Rand, n int, directed bool) [][2]int {
	var edges [][2]int
	for u := range n {
		for v := range n {
			if u == v || (!directed && v < u) {
				continue
			}
			if r.Uint64N(2) == 1 {
				edges = append(edges, [2]int{u, v})
			}
		}
	}
	return edges
}

// TestReleaseGraphMatchesDenseProjection checks the conjugate-gradient
// projection against a dense least-squares solve (pseudo-inverse), including
// directed graphs with every degree known, where B^T B is singular.
func TestReleaseGraphMatchesDenseProjection(t *testing.T) {
	r := noise.NewSeeded(3)
	eps, _ := privacy.NewEpsilon(1)
	cases := []struct {
		n        int
		directed bool
		out, in  []int
	}{
		{5, false, []int{0, 2}, nil},
		{6, false, firstN(6), nil},
		{7, false, []int{6}, nil},
		{3, false, []int{0, 1}, nil},
		{5, true, []int{0, 1}, []int{1, 3}},
		{4, true, firstN(4), firstN(4)},
		{6, true, []int{2}, nil},
		{6, true, nil, []int{0, 5}},
		{8, true, firstN(8), []int{0, 1, 2}},
	}
	for _, tc := range cases {
		for trial := range 3 {
			edges := randomGraph(r, tc.n, tc.directed)
			spec := GraphSpec{Vertices: tc.n, Directed: tc.directed, KnownOut: tc.out, KnownIn: tc.in, Epsilon: eps}
			// Draw the same noise twice: once through the release, once to
			// build the dense problem.
			g, err := ReleaseGraph(context.Background(), edges, spec, noise.NewSeeded(uint64(100+trial)))
			if err != nil {
				t.Fatal(err)
			}
			if g.Sensitivity == 0 {
				continue
			}
			lap, _ := noise.NewLaplace(float64(g.Sensitivity), eps.Float64())
			z := make([]float64, Pairs(tc.n, tc.directed))
			for _, e := range edges {
				z[pairIndex(tc.n, e[0], e[1], tc.directed)] = 1
			}
			truth := append([]float64(nil), z...)
			if err := lap.AddTo(noise.NewSeeded(uint64(100+trial)), z); err != nil {
				t.Fatal(err)
			}
			var rows [][]int
			if tc.directed {
				_, rows = directedRows(tc.n, uniq(tc.out), uniq(tc.in))
			} else {
				_, rows = undirectedRows(tc.n, uniq(tc.out))
			}
			a := mat.NewDense(len(rows), len(z), nil)
			rhs := make([]float64, len(rows))
			for i, row := range rows {
				for _, p := range row {
					a.Set(i, p, 1)
					rhs[i] += truth[p]
				}
			}
			want := testkit.PinvProject(t, a, rhs, z)
			for i := range want {
				if d := math.Abs(g.Values[i] - want[i]); d > 1e-9*math.Max(1, math.Abs(want[i])) {
					u, v := g.Pair(i)
					t.Fatalf("n=%d directed=%v known=%v/%v trial %d: pair (%d,%d) = %v, dense solve %v",
						tc.n, tc.directed, tc.out, tc.in, trial, u, v, g.Values[i], want[i])
				}
			}
			if g.Iterations > 10 {
				t.Errorf("n=%d directed=%v known=%v/%v: %d conjugate-gradient steps; B^T B has at most seven distinct eigenvalues", tc.n, tc.directed, tc.out, tc.in, g.Iterations)
			}
			if g.Residual > 1e-9 {
				t.Errorf("n=%d directed=%v: degree residual %g", tc.n, tc.directed, g.Residual)
			}
		}
	}
}

func uniq(v []int) []int {
	seen := map[int]bool{}
	var out []int
	for _, x := range v {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// TestReleaseGraphUnbiased checks by Monte Carlo that the consistent
// estimates are unbiased and no noisier than the raw noise (Theorem 6.1's
// argument for the degree projection).
func TestReleaseGraphUnbiased(t *testing.T) {
	const n, runs = 6, 4000
	eps, _ := privacy.NewEpsilon(1)
	edges := [][2]int{{0, 1}, {0, 2}, {1, 3}, {2, 3}, {3, 4}, {4, 5}}
	spec := GraphSpec{Vertices: n, KnownOut: []int{0, 3, 4}, Epsilon: eps}
	r := noise.NewSeeded(7)
	pairs := Pairs(n, false)
	sum, sq := make([]float64, pairs), make([]float64, pairs)
	var scale float64
	for range runs {
		g, err := ReleaseGraph(context.Background(), edges, spec, r.Split())
		if err != nil {
			t.Fatal(err)
		}
		scale = g.Scale
		for i, v := range g.Values {
			sum[i] += v
			sq[i] += v * v
		}
	}
	truth := make([]float64, pairs)
	for _, e := range edges {
		truth[pairIndex(n, e[0], e[1], false)] = 1
	}
	rawVar := 2 * scale * scale
	for i := range truth {
		mean := sum[i] / runs
		v := sq[i]/runs - mean*mean
		se := math.Sqrt(v / runs)
		if math.Abs(mean-truth[i]) > 5*se {
			u, w := (&GraphRelease{Vertices: n}).Pair(i)
			t.Errorf("pair (%d,%d): mean %v, truth %v (5 SE = %v)", u, w, mean, truth[i], 5*se)
		}
		// The sample variance of 4000 draws is within 15% of the truth
		// with overwhelming probability (Laplace kurtosis 6: SE of the
		// variance ~ sqrt(5/runs) = 3.5% relative).
		if v > 1.15*rawVar {
			t.Errorf("pair %d: variance %v above the raw noise's %v", i, v, rawVar)
		}
	}
}

func TestReleaseGraphSensitivityIsTheGraverMaximum(t *testing.T) {
	eps, _ := privacy.NewEpsilon(0.5)
	for _, tc := range []struct {
		n        int
		directed bool
		out, in  []int
	}{
		{5, false, firstN(3), nil},
		{5, false, firstN(5), nil},
		{4, true, []int{0}, nil},
		{4, true, []int{0, 1}, []int{2, 3}},
	} {
		g, err := ReleaseGraph(context.Background(), nil, GraphSpec{Vertices: tc.n, Directed: tc.directed, KnownOut: tc.out, KnownIn: tc.in, Epsilon: eps}, noise.NewSeeded(1))
		if err != nil {
			t.Fatal(err)
		}
		var rows [][]int
		if tc.directed {
			_, rows = directedRows(tc.n, tc.out, tc.in)
		} else {
			_, rows = undirectedRows(tc.n, tc.out)
		}
		if want := maxSimpleMove(t, Pairs(tc.n, tc.directed), rows); g.Sensitivity != want {
			t.Errorf("%+v: sensitivity %d, brute force %d", tc, g.Sensitivity, want)
		}
		// The noise keeps eps for inputs that differ by the sensitivity.
		lap, _ := noise.NewLaplace(float64(g.Sensitivity), eps.Float64())
		if g.Scale != lap.Scale() || lap.Loss(float64(g.Sensitivity)) > eps.Float64() {
			t.Errorf("%+v: scale %v, loss %v > eps %v", tc, g.Scale, lap.Loss(float64(g.Sensitivity)), eps)
		}
		m := g.Metadata()
		if !m.Seeded || m.Private {
			t.Errorf("seeded release: metadata seeded=%v private=%v", m.Seeded, m.Private)
		}
	}
}

func TestReleaseGraphDetermined(t *testing.T) {
	eps, _ := privacy.NewEpsilon(1)
	edges := [][2]int{{0, 1}, {1, 2}}
	g, err := ReleaseGraph(context.Background(), edges, GraphSpec{Vertices: 3, KnownOut: firstN(3), Epsilon: eps}, noise.NewRand())
	if err != nil {
		t.Fatal(err)
	}
	if g.Sensitivity != 0 || g.Scale != 0 {
		t.Fatalf("all degrees of 3 vertices known: sensitivity %d, scale %v; want 0 (determined)", g.Sensitivity, g.Scale)
	}
	want := []float64{1, 0, 1} // pairs (0,1), (0,2), (1,2)
	for i, v := range want {
		if g.Values[i] != v {
			t.Errorf("pair %d = %v, want %v", i, g.Values[i], v)
		}
	}
	if m := g.Metadata(); !strings.HasPrefix(m.Mechanism, "none") || !m.Private {
		t.Errorf("metadata %+v", m)
	}
}

func TestReleaseGraphErrors(t *testing.T) {
	eps, _ := privacy.NewEpsilon(1)
	ok := GraphSpec{Vertices: 4, Epsilon: eps}
	for _, tc := range []struct {
		name  string
		edges [][2]int
		spec  GraphSpec
		want  string
	}{
		{"no vertices", nil, GraphSpec{Epsilon: eps}, "0 vertices"},
		{"no epsilon", nil, GraphSpec{Vertices: 3}, "epsilon"},
		{"vertex out of range", [][2]int{{0, 1}, {2, 4}}, ok, "edge 2 (2, 4): vertex outside [0, 4)"},
		{"loop", [][2]int{{1, 1}}, ok, "edge 1 (1, 1) is a loop"},
		{"repeated undirected", [][2]int{{0, 1}, {1, 0}}, ok, "edge 2 (1, 0) repeats"},
		{"in-degrees undirected", nil, GraphSpec{Vertices: 4, KnownIn: []int{1}, Epsilon: eps}, "need a directed graph"},
		{"known vertex out of range", nil, GraphSpec{Vertices: 4, KnownOut: []int{9}, Epsilon: eps}, "vertex 9"},
		{"too many vertices", nil, GraphSpec{Vertices: 1 << 20, Epsilon: eps}, "vertex pairs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReleaseGraph(context.Background(), tc.edges, tc.spec, noise.NewSeeded(1))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
	// A directed graph may have both (0,1) and (1,0).
	if _, err := ReleaseGraph(context.Background(), [][2]int{{0, 1}, {1, 0}}, GraphSpec{Vertices: 2, Directed: true, Epsilon: eps}, noise.NewSeeded(1)); err != nil {
		t.Fatal(err)
	}
}
