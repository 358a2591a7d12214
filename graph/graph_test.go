package graph

import (
	"context"
	"fmt"
	"math/bits"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/sensitivity"
)

// undirectedRows returns the edges {i,j} (i < j) of the complete graph on
// n vertices and, for each known vertex, the row of its incident edges.
func undirectedRows(n int, known []int) (edges [][2]int, rows [][]int) {
	for i := range n {
		for j := i + 1; j < n; j++ {
			edges = append(edges, [2]int{i, j})
		}
	}
	for _, v := range known {
		var r []int
		for e, ed := range edges {
			if ed[0] == v || ed[1] == v {
				r = append(r, e)
			}
		}
		rows = append(rows, r)
	}
	return edges, rows
}

// directedRows returns the arcs v->u (v != u) and the rows of the known
// out-degrees and in-degrees.
func directedRows(n int, out, in []int) (arcs [][2]int, rows [][]int) {
	for v := range n {
		for u := range n {
			if u != v {
				arcs = append(arcs, [2]int{v, u})
			}
		}
	}
	for _, side := range []struct {
		end  int
		list []int
	}{{0, out}, {1, in}} {
		for _, v := range side.list {
			var r []int
			for e, a := range arcs {
				if a[side.end] == v {
					r = append(r, e)
				}
			}
			rows = append(rows, r)
		}
	}
	return arcs, rows
}

// maxSimpleMove is the brute-force graph sensitivity: the largest Graver
// element with entries in {0,±1} (the difference of two simple graphs).
func maxSimpleMove(t testing.TB, cells int, rows [][]int) int {
	t.Helper()
	if cells == 0 {
		return 0
	}
	basis, err := sensitivity.GraverBasis(context.Background(), cells, rows)
	if err != nil {
		t.Fatal(err)
	}
	best := 0
	for _, g := range basis {
		if testkit.L1(g) > best && !strings.ContainsAny(testkit.Canonical(g), "23456789") {
			best = testkit.L1(g)
		}
	}
	return best
}

func firstN(n int) []int {
	v := make([]int, n)
	for i := range v {
		v[i] = i
	}
	return v
}

// TestUndirectedGraphMatchesBruteForce compares the formula with the Graver
// basis for every number of known degrees on up to 6 vertices, and up to 5
// known degrees on 7 (by symmetry only the number matters; the heavier
// cases are in BenchmarkGraphBruteForce).
func TestUndirectedGraphMatchesBruteForce(t *testing.T) {
	for n := 1; n <= 7; n++ {
		for k := 0; k <= n; k++ {
			if n == 7 && k > 5 {
				continue
			}
			edges, rows := undirectedRows(n, firstN(k))
			want := maxSimpleMove(t, len(edges), rows)
			got, err := UndirectedGraphSensitivity(n, firstN(k))
			if err != nil {
				t.Fatal(err)
			}
			if got.Value != want {
				t.Errorf("|V|=%d, %d known degrees: %d (%s), brute force %d", n, k, got.Value, got.Rule, want)
			}
		}
	}
}

// directedShapes calls f with every way of knowing out- and in-degrees on
// n vertices up to symmetry: c vertices with both known, a with the
// out-degree only, b with the in-degree only.
func directedShapes(n int, f func(out, in []int, a, b, c int)) {
	for a := 0; a <= n; a++ {
		for b := 0; a+b <= n; b++ {
			for c := 0; a+b+c <= n; c++ {
				var out, in []int
				for v := range c {
					out, in = append(out, v), append(in, v)
				}
				for v := c; v < c+a; v++ {
					out = append(out, v)
				}
				for v := c + a; v < c+a+b; v++ {
					in = append(in, v)
				}
				f(out, in, a, b, c)
			}
		}
	}
}

func TestDirectedGraphMatchesBruteForce(t *testing.T) {
	for n := 1; n <= 5; n++ {
		directedShapes(n, func(out, in []int, a, b, c int) {
			arcs, rows := directedRows(n, out, in)
			want := maxSimpleMove(t, len(arcs), rows)
			got, err := DirectedGraphSensitivity(n, out, in)
			if err != nil {
				t.Fatal(err)
			}
			if got.Value != want {
				t.Errorf("|V|=%d, out-only %d, in-only %d, both %d: %d (%s), brute force %d", n, a, b, c, got.Value, got.Rule, want)
			}
		})
	}
}

// longestCycleDirected is an independent exact computation for directed
// graphs: the longest cycle of the multigraph H (see
// DirectedGraphSensitivity) by dynamic programming over vertex subsets,
// built from the arcs themselves rather than from counts.
func longestCycleDirected(n int, out, in []int) int {
	isOut, isIn := make([]bool, n), make([]bool, n)
	for _, v := range out {
		isOut[v] = true
	}
	for _, v := range in {
		isIn[v] = true
	}
	// Node 0 is the ground; out-copies and in-copies follow.
	node := map[[2]int]int{} // (side, vertex) -> node
	for _, v := range out {
		node[[2]int{0, v}] = len(node) + 1
	}
	for _, v := range in {
		node[[2]int{1, v}] = len(node) + 1
	}
	size := len(node) + 1
	mult := make([][]int, size)
	for i := range mult {
		mult[i] = make([]int, size)
	}
	loops := 0
	for v := range n {
		for u := range n {
			if u == v {
				continue
			}
			x, y := 0, 0
			if isOut[v] {
				x = node[[2]int{0, v}]
			}
			if isIn[u] {
				y = node[[2]int{1, u}]
			}
			if x == 0 && y == 0 {
				loops++
				continue
			}
			mult[x][y]++
			mult[y][x]++
		}
	}
	best := min(loops, 1)
	for x := range size {
		for y := range size {
			if mult[x][y] >= 2 {
				best = max(best, 2)
			}
		}
	}
	// reach[mask] has bit v when a path from the lowest node of mask
	// through exactly mask ends at v.
	reach := make([]uint32, 1<<size)
	for s := range size {
		reach[1<<s] = 1 << s
	}
	for mask := 1; mask < 1<<size; mask++ {
		s := bits.TrailingZeros32(uint32(mask))
		for m := reach[mask]; m != 0; m &= m - 1 {
			v := bits.TrailingZeros32(m)
			if bits.OnesCount32(uint32(mask)) >= 3 && mult[v][s] > 0 {
				best = max(best, bits.OnesCount32(uint32(mask)))
			}
			for w := s + 1; w < size; w++ {
				if mask&(1<<w) == 0 && mult[v][w] > 0 {
					reach[mask|1<<w] |= 1 << w
				}
			}
		}
	}
	return best
}

// TestDirectedGraphMatchesLongestCycle checks the formula (min(p,q) >= 3)
// and the reduced search (min(p,q) <= 2) against the longest cycle of the
// full graph for every configuration on up to 6 vertices; the longest-cycle
// computation is itself checked against the Graver basis in
// TestLongestCycleMatchesBruteForce.
func TestDirectedGraphMatchesLongestCycle(t *testing.T) {
	for n := 1; n <= 6; n++ {
		directedShapes(n, func(out, in []int, a, b, c int) {
			want := longestCycleDirected(n, out, in)
			got, err := DirectedGraphSensitivity(n, out, in)
			if err != nil {
				t.Fatal(err)
			}
			if got.Value != want {
				t.Errorf("|V|=%d, out-only %d, in-only %d, both %d: %d (%s), longest cycle %d", n, a, b, c, got.Value, got.Rule, want)
			}
		})
	}
}

func TestLongestCycleMatchesBruteForce(t *testing.T) {
	for n := 1; n <= 4; n++ {
		directedShapes(n, func(out, in []int, a, b, c int) {
			arcs, rows := directedRows(n, out, in)
			if got, want := longestCycleDirected(n, out, in), maxSimpleMove(t, len(arcs), rows); got != want {
				t.Errorf("|V|=%d, out-only %d, in-only %d, both %d: longest cycle %d, brute force %d", n, a, b, c, got, want)
			}
		})
	}
}

// TestLemma51CounterExamples documents where Lemma 5.1 is wrong, each with
// a move checked from the definition and the value from the brute force.
func TestLemma51CounterExamples(t *testing.T) {
	type arc = [2]int
	tests := []struct {
		name     string
		vertices int
		directed bool
		known    []int // undirected
		out, in  []int // directed
		move     map[arc]int
		lemma    int
		want     int
	}{
		{
			name: "undirected |V|=3, all degrees known: determined", vertices: 3, known: []int{0, 1, 2},
			lemma: 3, want: 0,
		},
		{
			name: "undirected |V|=5, all known: two triangles sharing vertex 0", vertices: 5, known: []int{0, 1, 2, 3, 4},
			move:  map[arc]int{{0, 1}: 1, {1, 2}: -1, {0, 2}: 1, {0, 3}: -1, {3, 4}: 1, {0, 4}: -1},
			lemma: 5, want: 6,
		},
		{
			name: "undirected, a=0,b=1,c=2 known, u=3,u'=4 not: trail u-a-b-c-a-u'", vertices: 5, known: []int{0, 1, 2},
			move:  map[arc]int{{0, 3}: 1, {0, 1}: -1, {1, 2}: 1, {0, 2}: -1, {0, 4}: 1},
			lemma: 4, want: 5,
		},
		{
			name: "undirected |V|=6, 4 known: triangle 0-1-2 hanging at 0 on the trail 4-0-3-5", vertices: 6, known: []int{0, 1, 2, 3},
			move:  map[arc]int{{0, 4}: 1, {0, 1}: -1, {1, 2}: 1, {0, 2}: -1, {0, 3}: 1, {3, 5}: -1},
			lemma: 5, want: 6,
		},
		{
			name: "directed |V|=3, one known out-degree: substitute an out-edge", vertices: 3, directed: true, out: []int{0},
			move:  map[arc]int{{0, 1}: 1, {0, 2}: -1},
			lemma: 1, want: 2,
		},
		{
			name: "directed |V|=2, all known: determined", vertices: 2, directed: true, out: []int{0, 1}, in: []int{0, 1},
			lemma: 4, want: 0,
		},
		{
			name: "directed |V|=5, 5 out- and 4 in-degrees known: 2q+2", vertices: 5, directed: true,
			out: []int{0, 1, 2, 3, 4}, in: []int{0, 1, 2, 3},
			lemma: 9, want: 10,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cells [][2]int
			var rows [][]int
			var got sensitivity.Sensitivity
			var err error
			if tc.directed {
				cells, rows = directedRows(tc.vertices, tc.out, tc.in)
				got, err = DirectedGraphSensitivity(tc.vertices, tc.out, tc.in)
			} else {
				cells, rows = undirectedRows(tc.vertices, tc.known)
				got, err = UndirectedGraphSensitivity(tc.vertices, tc.known)
			}
			if err != nil {
				t.Fatal(err)
			}
			if brute := maxSimpleMove(t, len(cells), rows); brute != tc.want {
				t.Fatalf("brute force %d, want %d", brute, tc.want)
			}
			if got.Value != tc.want {
				t.Errorf("got %d (%s), want %d", got.Value, got.Rule, tc.want)
			}
			if !strings.Contains(got.Rule, fmt.Sprintf("Lemma 5.1(%s) says %d", map[bool]string{false: "i", true: "ii"}[tc.directed], tc.lemma)) {
				t.Errorf("rule %q does not record the lemma's %d", got.Rule, tc.lemma)
			}
			if tc.move == nil {
				return
			}
			index := map[[2]int]int{}
			for i, c := range cells {
				index[c] = i
			}
			move := map[int]int{}
			for a, v := range tc.move {
				i, ok := index[a]
				if !ok {
					t.Fatalf("edge %v is not in the graph", a)
				}
				move[i] = v
			}
			if len(move) != tc.want || !testkit.IsPrimitiveMove(t, rows, move) {
				t.Errorf("move %v is not a primitive move of %d edges", tc.move, tc.want)
			}
		})
	}
}

// TestGraphSensitivityLarge pins the formulas at sizes no brute force
// reaches to values worked out by hand from the constructions.
func TestGraphSensitivityLarge(t *testing.T) {
	tests := []struct {
		name     string
		got      func() (sensitivity.Sensitivity, error)
		want     int
		lemmaSay int
	}{
		// 7 known among 9: one triangle at the cut vertex of g-v-g, two
		// triangles hanging from it: 2 + 3*3 = 11 edges.
		{"undirected 7 of 9", func() (sensitivity.Sensitivity, error) { return UndirectedGraphSensitivity(9, firstN(7)) }, 11, 8},
		// All 9 known: a triangle with three triangles hanging, 12 edges.
		{"undirected 9 of 9", func() (sensitivity.Sensitivity, error) { return UndirectedGraphSensitivity(9, firstN(9)) }, 12, 9},
		// n = 2s+1 known with s odd, m >= 2: n + 1 + s.
		{"undirected 1001 of 2000", func() (sensitivity.Sensitivity, error) { return UndirectedGraphSensitivity(2000, firstN(1001)) }, 1001 + 1 + 499, 1002},
		{"directed 100 out, 60 in of 200", func() (sensitivity.Sensitivity, error) {
			return DirectedGraphSensitivity(200, firstN(100), firstN(60))
		}, 122, 121},
		{"directed 50 out, 50 in (same vertices) of 50", func() (sensitivity.Sensitivity, error) {
			return DirectedGraphSensitivity(50, firstN(50), firstN(50))
		}, 100, 100},
		{"directed 50 out, 50 in (same) of 51", func() (sensitivity.Sensitivity, error) {
			return DirectedGraphSensitivity(51, firstN(50), firstN(50))
		}, 101, 101},
	}
	for _, tc := range tests {
		got, err := tc.got()
		if err != nil {
			t.Fatal(err)
		}
		if got.Value != tc.want {
			t.Errorf("%s: %d (%s), want %d", tc.name, got.Value, got.Rule, tc.want)
		}
		if !strings.Contains(got.Rule, fmt.Sprintf("says %d)", tc.lemmaSay)) {
			t.Errorf("%s: rule %q does not record the lemma's %d", tc.name, got.Rule, tc.lemmaSay)
		}
	}
}

func TestGraphSensitivityErrors(t *testing.T) {
	tests := []struct {
		name  string
		run   func() error
		words string
	}{
		{"no vertices", func() error { _, err := UndirectedGraphSensitivity(0, nil); return err }, "0 vertices"},
		{"negative vertex", func() error { _, err := UndirectedGraphSensitivity(3, []int{-1}); return err }, "vertex -1 is outside [0, 3)"},
		{"out of range out", func() error { _, err := DirectedGraphSensitivity(3, []int{3}, nil); return err }, "known out-degrees: vertex 3"},
		{"out of range in", func() error { _, err := DirectedGraphSensitivity(3, nil, []int{5}); return err }, "known in-degrees: vertex 5"},
	}
	for _, tc := range tests {
		err := tc.run()
		if err == nil || !strings.Contains(err.Error(), tc.words) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.words)
		}
	}
	// Listing a vertex twice is the same knowledge.
	a, _ := DirectedGraphSensitivity(6, []int{0, 1, 1}, []int{2, 2})
	b, _ := DirectedGraphSensitivity(6, []int{0, 1}, []int{2})
	if a != b {
		t.Errorf("duplicates change the answer: %v vs %v", a, b)
	}
}

func BenchmarkGraphSensitivity(b *testing.B) {
	known := firstN(500000)
	tests := []struct {
		name string
		run  func() (sensitivity.Sensitivity, error)
	}{
		{"undirected 500k of 1M", func() (sensitivity.Sensitivity, error) { return UndirectedGraphSensitivity(1000000, known) }},
		{"directed formula 500k,300k of 1M", func() (sensitivity.Sensitivity, error) {
			return DirectedGraphSensitivity(1000000, known, known[:300000])
		}},
		{"directed search 2,40 of 50", func() (sensitivity.Sensitivity, error) {
			return DirectedGraphSensitivity(50, firstN(2), firstN(40))
		}},
	}
	for _, tc := range tests {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := tc.run(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
		})
	}
}

// BenchmarkGraphBruteForce runs the brute-force checks too slow for the
// test suite: undirected graphs on 7 vertices with 6 or 7 known degrees and
// on 8 with 6, directed graphs on 6 vertices with at most 4 vertices of
// both degrees known, and the longest-cycle check on 7 vertices.
func BenchmarkGraphBruteForce(b *testing.B) {
	for b.Loop() {
		for _, c := range [][2]int{{7, 6}, {7, 7}, {8, 6}} {
			edges, rows := undirectedRows(c[0], firstN(c[1]))
			got, _ := UndirectedGraphSensitivity(c[0], firstN(c[1]))
			if want := maxSimpleMove(b, len(edges), rows); got.Value != want {
				b.Errorf("|V|=%d, %d known: %d, brute force %d", c[0], c[1], got.Value, want)
			}
		}
		directedShapes(6, func(out, in []int, a, bb, c int) {
			if c > 4 {
				return
			}
			arcs, rows := directedRows(6, out, in)
			got, _ := DirectedGraphSensitivity(6, out, in)
			if want := maxSimpleMove(b, len(arcs), rows); got.Value != want {
				b.Errorf("|V|=6, out-only %d, in-only %d, both %d: %d, brute force %d", a, bb, c, got.Value, want)
			}
		})
		directedShapes(7, func(out, in []int, a, bb, c int) {
			got, _ := DirectedGraphSensitivity(7, out, in)
			if want := longestCycleDirected(7, out, in); got.Value != want {
				b.Errorf("|V|=7, out-only %d, in-only %d, both %d: %d, longest cycle %d", a, bb, c, got.Value, want)
			}
		})
	}
}

// TestIsPrimitiveMoveRejects makes sure the definition check can fail: two
// disjoint substitutions of out-edges of a known vertex keep its degree,
// and so does each one alone.
func TestIsPrimitiveMoveRejects(t *testing.T) {
	arcs, rows := directedRows(5, []int{0}, nil)
	index := map[[2]int]int{}
	for i, a := range arcs {
		index[a] = i
	}
	move := map[int]int{index[[2]int{0, 1}]: 1, index[[2]int{0, 2}]: -1, index[[2]int{0, 3}]: 1, index[[2]int{0, 4}]: -1}
	if testkit.IsPrimitiveMove(t, rows, move) {
		t.Error("a sum of two moves passes as primitive")
	}
}
