package graph

// Generic sensitivity of publishing a graph whose degrees are partly public
// (paper 3, Section 5, Lemma 5.1). A graph is a table V1 x V2 with a row per
// edge; graphs are simple (no loops, no multiple edges, so counts are 0 or
// 1) and neighbours add or remove one edge. With the degrees of some
// vertices public, two graphs G_a, G_b with the same public degrees are
// worst-case induced neighbours when no nonempty proper subset of the edge
// additions and removals turning G_a into G_b keeps the public degrees: the
// difference G_b - G_a is a Graver element of the degree constraints with
// entries in {0, ±1}, and the sensitivity is the largest number of edges of
// such an element.
//
// Lemma 5.1 claims min{n+1, |V|} (undirected, n known degrees) and
// min{2 min{n1, n2} + 1, 2|V|} (directed). Both are wrong in places; see
// UndirectedGraphSensitivity and DirectedGraphSensitivity for the exact
// values and graph_test.go for the counter-examples, checked against the
// brute-force Graver engine.

import (
	"fmt"
	"slices"

	"github.com/knowdp/knowdp/sensitivity"
)

// UndirectedGraphSensitivity returns the generic sensitivity of publishing
// a simple undirected graph on vertices vertices (numbered from 0) when the
// degrees of the vertices in known are public.
//
// The value depends only on n = len(known) and m = vertices - n. Merge the
// vertices of unknown degree into one unconstrained "ground" vertex. A
// primitive {0,±1} move is an alternating trail (at each known vertex as
// many added as removed edges) that is closed, or runs from the ground to
// the ground, or is a single edge between two unknown vertices. Primitivity
// forces its shape (proof sketch): (1) two edge-disjoint alternating trails
// would each be moves, so it is one trail, meeting the ground only at its
// ends; (2) between two visits of a known vertex lies a closed sub-walk,
// which is itself a move unless its length is odd, so no known vertex is
// visited three times (two consecutive odd gaps make an even one); (3) if
// the two pieces at a twice-visited vertex v shared another vertex u, a
// path from v to u in one piece and the one from u back to v in the other
// would form a move, so every twice-visited vertex is a cut vertex in
// exactly two blocks, every block is a cycle, a cut vertex has both its
// edges in each block of the same sign, and a block without the ground with
// k cut vertices has length ≡ k (mod 2) (signs alternate except at cut
// vertices). Counting edges (one per visit of a known vertex, plus one for a
// trail from the ground) and minimising the known vertices a tree of b
// blocks needs (triangles hanging from triangles, one 4-cycle when parity
// demands, the ground's cycle as short as 2 edges when m >= 2) gives:
//
//   - closed trails: max over b >= 1 of n' + b - 1, with n' in {n, n-1},
//     n' ≡ b - 1 (mod 2) and n' >= 2b+1 (b even) or 2b+2 (b odd);
//   - trails from the ground (m >= 1): n + 1 + t, with t the largest number
//     of blocks besides the ground's such that the known vertices needed,
//     base + 2t (t odd) or 2t + 2 (t even >= 2), with base = 1 if m >= 2 and
//     2 if m = 1, are at most n (t = 0 needs n >= base);
//   - an edge between two unknown vertices: 1 (m >= 2).
//
// The constructions are primitive (each leaf triangle is all-or-nothing,
// and the sinks propagate that to the whole trail), so the value is exact;
// it matches the Graver basis for every n on up to 7 vertices and up to 6
// known degrees on 8 (graph_test.go: tests and BenchmarkGraphBruteForce). Lemma 5.1(i)'s min{n+1, |V|} is wrong: with |V| = 3 and every
// degree known the graph is determined (0, not 3); with |V| = 5 and every
// degree known two triangles sharing a vertex, with alternating signs, are
// a primitive move of 6 edges; with degrees of a, b, c known and u, u'
// unknown the trail u-a-b-c-a-u' is a primitive move of 5 edges (n+1 = 4).
func UndirectedGraphSensitivity(vertices int, known []int) (sensitivity.Sensitivity, error) {
	set, err := vertexSet(vertices, known, "known degrees")
	if err != nil {
		return sensitivity.Sensitivity{}, err
	}
	n := len(set)
	m := vertices - n
	s := sensitivity.Sensitivity{Value: 0, Rule: "determined: the known degrees fix the graph"}
	take := func(v int, rule string) {
		if v > s.Value {
			s = sensitivity.Sensitivity{Value: v, Rule: rule}
		}
	}
	if m >= 2 {
		take(1, "an edge between two vertices of unknown degree")
	}
	take(closedTrail(n), "a closed alternating trail through known vertices")
	if m >= 1 {
		take(groundTrail(n, m), "an alternating trail between vertices of unknown degree")
	}
	s.Rule = fmt.Sprintf("undirected graph, %d of %d degrees known: %s (Lemma 5.1(i) says %d)",
		n, vertices, s.Rule, min(n+1, vertices))
	return s, nil
}

// closedTrail is the most edges of a primitive closed alternating trail in
// the complete graph on n known vertices.
func closedTrail(n int) int {
	best := 0
	for _, used := range []int{n, n - 1} {
		if used < 4 {
			continue
		}
		// b ≡ used+1 (mod 2) blocks, needing 2b+1 (b even) or 2b+2 (b odd)
		// vertices.
		var b int
		if used%2 == 1 {
			b = largestWithParity((used-1)/2, 0)
		} else {
			b = largestWithParity((used-2)/2, 1)
		}
		if b >= 1 {
			best = max(best, used+b-1)
		}
	}
	return best
}

// groundTrail is the most edges of a primitive alternating trail from the
// ground to the ground, with n known and m >= 1 unknown vertices.
func groundTrail(n, m int) int {
	base := 2
	if m >= 2 {
		base = 1
	}
	if n < base {
		return 0
	}
	t := 0
	if n-base >= 2 {
		t = max(t, largestWithParity((n-base)/2, 1))
	}
	if n >= 6 {
		t = max(t, largestWithParity((n-2)/2, 0))
	}
	return n + 1 + t
}

// largestWithParity returns the largest x <= limit with x ≡ parity (mod 2),
// or -1 if limit < parity.
func largestWithParity(limit, parity int) int {
	if limit < parity {
		return -1
	}
	if limit%2 != parity {
		limit--
	}
	return limit
}

// DirectedGraphSensitivity returns the generic sensitivity of publishing a
// simple directed graph on vertices vertices (numbered from 0) when the
// out-degrees of the vertices in knownOut and the in-degrees of those in
// knownIn are public.
//
// The constraint matrix is the incidence matrix of a bipartite graph (an
// edge v->u joins the out-copy of v to the in-copy of u), so it is totally
// unimodular and its Graver elements are its circuits, all in {0,±1}.
// Merging the copies of unknown degree into one ground vertex g, circuits
// are the cycles of the graph H on the p = |knownOut| out-copies, the
// q = |knownIn| in-copies and g: out-copy v and in-copy u are adjacent
// unless u = v, and g is joined to every known copy that has an edge to an
// unknown copy. With k = min(p, q) >= 3 the longest cycle is the largest of
// 2k (a cycle through k copies on each side: K_{k,k} minus a matching is
// Hamiltonian for k >= 3), 2k+1 (from g through k copies on each side back
// to g, when both sides have a copy adjacent to g), and 2q+2 when p > q and
// two out-copies are adjacent to g (2p+2 symmetrically). These are upper
// bounds because a cycle alternates sides, so it uses at most k copies of
// the smaller side, k+1 only if it passes g. They are reached: every copy
// has at most one non-neighbour (its own other copy), so placing the copies
// of one side into the gaps between those of the other is a bipartite
// matching in which each copy misses at most two gaps, which Hall's theorem
// provides once there are 3 gaps or more (the case of 2 gaps is covered by
// the exhaustive checks below). For k <= 2 the longest cycle is found by
// exhaustive search on H reduced to at most 3 vertices of each kind, which
// keeps every cycle (they have at most 3 copies a side). graph_test.go
// checks the value against an independent longest-cycle search for every
// configuration on up to 7 vertices and against the Graver basis on up to
// 6 (BenchmarkGraphBruteForce has the slower ones).
//
// Lemma 5.1(ii)'s min{2 min{n1,n2}+1, 2|V|} is wrong when n1 != n2: with one
// known out-degree and nothing else, replacing one out-edge of that vertex
// by another is a primitive move of 2 edges (the lemma says 1), and in
// general a path from g through the q in-copies and q+1 out-copies back to
// g has 2q+2 edges. It is also wrong for |V| = 2 with every degree known
// (the graph is determined: 0, not 4).
func DirectedGraphSensitivity(vertices int, knownOut, knownIn []int) (sensitivity.Sensitivity, error) {
	out, err := vertexSet(vertices, knownOut, "known out-degrees")
	if err != nil {
		return sensitivity.Sensitivity{}, err
	}
	in, err := vertexSet(vertices, knownIn, "known in-degrees")
	if err != nil {
		return sensitivity.Sensitivity{}, err
	}
	p, q, both := len(out), len(in), 0
	for i, j := 0, 0; i < p && j < q; {
		switch {
		case out[i] < in[j]:
			i++
		case out[i] > in[j]:
			j++
		default:
			both++
			i++
			j++
		}
	}
	d := directedShape{outOnly: p - both, inOnly: q - both, both: both, free: vertices - p - q + both}
	v, rule := d.longestCycle()
	return sensitivity.Sensitivity{Value: v, Rule: fmt.Sprintf("directed graph, %d out-degrees and %d in-degrees of %d vertices known: %s (Lemma 5.1(ii) says %d)",
		p, q, vertices, rule, min(2*min(p, q)+1, 2*vertices))}, nil
}

// directedShape counts the vertices by what is known of them: the
// sensitivity depends on nothing else.
type directedShape struct {
	outOnly, inOnly, both, free int
}

// groundDegrees returns how many edges join g to an out-copy of a vertex
// of known out- and in-degree, of known out-degree only, and likewise for
// in-copies: the edges to copies of unknown degree, except the vertex's own.
func (d directedShape) groundDegrees() (outBoth, outOnly, inBoth, inOnly int) {
	a, b := d.outOnly+d.free, d.inOnly+d.free
	return a, a - 1, b, b - 1
}

func (d directedShape) longestCycle() (int, string) {
	p, q := d.outOnly+d.both, d.inOnly+d.both
	k := min(p, q)
	if k <= 2 {
		return d.search()
	}
	ob, oo, ib, io := d.groundDegrees()
	gOut := 0 // out-copies adjacent to g
	if ob >= 1 {
		gOut += d.both
	}
	if oo >= 1 {
		gOut += d.outOnly
	}
	gIn := 0
	if ib >= 1 {
		gIn += d.both
	}
	if io >= 1 {
		gIn += d.inOnly
	}
	best, rule := 2*k, "a cycle alternating between known out- and in-degrees"
	if gOut >= 1 && gIn >= 1 {
		best, rule = 2*k+1, "a path between unknown degrees through every known degree of the smaller side"
	}
	if p > q && gOut >= 2 {
		best, rule = 2*q+2, "a path between unknown in-degrees through every known in-degree"
	}
	if q > p && gIn >= 2 {
		best, rule = 2*p+2, "a path between unknown out-degrees through every known out-degree"
	}
	return best, rule
}

// search finds the longest cycle of H exhaustively when min(p, q) <= 2. A
// cycle then uses at most 3 copies of either side, so H is reduced to at
// most 3 vertices of known out-degree only and 3 of known in-degree only
// (the vertices of both are at most min(p, q)); vertices of a kind are
// interchangeable.
func (d directedShape) search() (int, string) {
	ob, oo, ib, io := d.groundDegrees()
	best, rule := 0, "determined: the known degrees fix the graph"
	take := func(v int, r string) {
		if v > best {
			best, rule = v, r
		}
	}
	if (d.inOnly+d.free)*(d.outOnly+d.free)-d.free >= 1 {
		take(1, "an edge between an unknown out-degree and an unknown in-degree")
	}
	// The known copies of H (g is implicit): out-copies, then in-copies;
	// two copies with the same id are the same vertex, ground counts the
	// edges to g.
	type copyOf struct {
		out    bool
		id     int
		ground int
	}
	var h []copyOf
	nb, no, ni := d.both, min(d.outOnly, 3), min(d.inOnly, 3)
	for i := range nb {
		h = append(h, copyOf{out: true, id: i, ground: ob})
	}
	for i := range no {
		h = append(h, copyOf{out: true, id: nb + i, ground: oo})
	}
	for i := range nb {
		h = append(h, copyOf{out: false, id: i, ground: ib})
	}
	for i := range ni {
		h = append(h, copyOf{out: false, id: nb + no + i, ground: io})
	}
	adj := func(x, y int) bool { return h[x].out != h[y].out && h[x].id != h[y].id }
	for x := range h {
		if h[x].ground >= 2 {
			take(2, "two edges of one known degree to unknown degrees")
		}
	}
	used := make([]bool, len(h))
	// Paths from g: g - x ... y - g.
	var fromGround func(y, length int)
	fromGround = func(y, length int) {
		if length >= 2 && h[y].ground >= 1 {
			take(length+1, "a path between unknown degrees through known degrees")
		}
		for z := range h {
			if !used[z] && adj(y, z) {
				used[z] = true
				fromGround(z, length+1)
				used[z] = false
			}
		}
	}
	for x := range h {
		if h[x].ground >= 1 {
			used[x] = true
			fromGround(x, 1)
			used[x] = false
		}
	}
	// Cycles avoiding g, from their first vertex in the order of h.
	var cycle func(start, y, length int)
	cycle = func(start, y, length int) {
		if length >= 4 && adj(y, start) {
			take(length, "a cycle alternating between known out- and in-degrees")
		}
		for z := start + 1; z < len(h); z++ {
			if !used[z] && adj(y, z) {
				used[z] = true
				cycle(start, z, length+1)
				used[z] = false
			}
		}
	}
	for x := range h {
		used[x] = true
		cycle(x, x, 1)
		used[x] = false
	}
	return best, rule
}

// maxGraphVertices keeps 2|V| and the like far from overflow.
const maxGraphVertices = 1 << 40

// vertexSet validates a list of vertices and returns its distinct
// vertices, sorted.
func vertexSet(vertices int, list []int, what string) ([]int, error) {
	if vertices < 1 || vertices > maxGraphVertices {
		return nil, fmt.Errorf("graph sensitivity: %d vertices; need between 1 and %d", vertices, maxGraphVertices)
	}
	for _, v := range list {
		if v < 0 || v >= vertices {
			return nil, fmt.Errorf("graph sensitivity: %s: vertex %d is outside [0, %d)", what, v, vertices)
		}
	}
	set := slices.Clone(list)
	slices.Sort(set)
	return slices.Compact(set), nil
}
