package integer

import (
	"context"
	"math"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/tensor"
	"github.com/knowdp/knowdp/noise"
)

// Integer rounding on a transportation network.
//
// The cells of a cuboid constrained by two margins A and B are the edges of
// a bipartite multigraph: one node per cell of A, one per cell of B, and
// cell c an edge between the A-cell and the B-cell it projects onto (cells
// that differ only in dimensions outside A ∪ B are parallel edges). A table
// is a flow on that graph and its margins are the sums at the nodes. The
// node-edge incidence matrix of a bipartite graph is totally unimodular, so
// the polytope {y : floor(z) <= y <= ceil(z), margins of y = margins of z}
// has integral vertices whenever the margins of z are integers: z itself is
// in it, hence so is an integer table. The dependent rounding below finds
// one at random with E[y] = z.

// fixedOne is 1 in the fixed-point representation of the fractional parts
// that the rounding works on: exact integer arithmetic, so that no push
// ever leaves a node sum off by a rounding error. Quantising a fraction to
// 2^-32 moves its expectation by at most 2^-33.
const fixedOne = int64(1) << 32

// network is the bipartite multigraph of a cuboid under two margins.
type network struct {
	nA, nB int
	a, b   []int32 // per cell: its node in A (0..nA-1) and in B (0..nB-1)
}

// cellGroups returns, for every cell of the row-major array with the given
// sizes, the index of the cell of its marginal on keep.
func cellGroups(sizes []int, keep domain.Cuboid) []int32 {
	n := 1
	for _, s := range sizes {
		n *= s
	}
	out := make([]int32, n)
	p := tensor.NewPlan(sizes, keep)
	in := p.Inner
	p.Walk(0, p.Blocks(), func(base, kept int) {
		dst := out[base : base+in]
		if p.InnerIn {
			for i := range dst {
				dst[i] = int32(kept + i)
			}
			return
		}
		for i := range dst {
			dst[i] = int32(kept)
		}
	})
	return out
}

// dependentRound rounds the fractional parts w (fixed point, 0..fixedOne)
// of the cells to 0 or fixedOne, in place, so that every expectation is
// kept: E[result] = w. It is the dependent rounding of Gandhi, Khuller,
// Parthasarathy and Srinivasan (J. ACM 2006) on the network: while some edge
// is fractional, take a cycle of fractional edges, or a maximal path when
// there is no cycle, label its edges alternately + and -, and with
// probability beta/(alpha+beta) add alpha to the + edges and subtract it
// from the - edges, otherwise subtract beta from the + edges and add it to
// the - edges; alpha and beta are the largest steps that keep every edge in
// [0, 1], so each push makes at least one edge integral and the expected
// change of every edge is beta*alpha - alpha*beta = 0. A cycle keeps the sum
// at every node it visits; a maximal path changes the sums only at its two
// ends, nodes with a single fractional edge whose sum therefore ends at its
// floor or ceiling. When the node sums are whole numbers (exact margins) no
// node has exactly one fractional edge, so only cycles occur and every
// margin is kept exactly.
func dependentRound(ctx context.Context, g *network, w []int64, r *noise.Rand) error {
	nodes := g.nA + g.nB
	// Adjacency lists of the fractional edges, with O(1) removal.
	start := make([]int32, nodes+1)
	for c := range w {
		if w[c] > 0 && w[c] < fixedOne {
			start[g.a[c]+1]++
			start[int(g.b[c])+g.nA+1]++
		}
	}
	for v := range nodes {
		start[v+1] += start[v]
	}
	deg := make([]int32, nodes)
	adj := make([]int32, start[nodes])
	pos := make([][2]int32, len(w)) // position of the edge in its A and B lists
	for c := range w {
		if w[c] > 0 && w[c] < fixedOne {
			u, v := g.a[c], g.b[c]+int32(g.nA)
			pos[c] = [2]int32{deg[u], deg[v]}
			adj[start[u]+deg[u]] = int32(c)
			adj[start[v]+deg[v]] = int32(c)
			deg[u]++
			deg[v]++
		}
	}
	remove := func(c int32) {
		for side, v := range [2]int32{g.a[c], g.b[c] + int32(g.nA)} {
			i := pos[c][side]
			last := adj[start[v]+deg[v]-1]
			adj[start[v]+i] = last
			pos[last][side] = i // v is on the same side of every edge it has
			deg[v]--
		}
	}
	other := func(c, v int32) int32 {
		if g.a[c] == v {
			return g.b[c] + int32(g.nA)
		}
		return g.a[c]
	}
	next := func(v, except int32) int32 {
		for i := range min(deg[v], 2) {
			if c := adj[start[v]+i]; c != except {
				return c
			}
		}
		return -1
	}
	var pushes int
	push := func(edges []int32) error {
		pushes++
		if pushes%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		alpha, beta := fixedOne, fixedOne
		for i, c := range edges {
			up, down := fixedOne-w[c], w[c]
			if i%2 == 1 {
				up, down = down, up
			}
			alpha, beta = min(alpha, up), min(beta, down)
		}
		step := -beta
		if int64(r.Uint64N(uint64(alpha+beta))) < beta {
			step = alpha
		}
		for i, c := range edges {
			if i%2 == 0 {
				w[c] += step
			} else {
				w[c] -= step
			}
		}
		for _, c := range edges {
			if w[c] == 0 || w[c] == fixedOne {
				remove(c)
			}
		}
		return nil
	}
	onStack := make([]int32, nodes)
	for i := range onStack {
		onStack[i] = -1
	}
	var vs, es []int32
	clear := func() {
		for _, v := range vs {
			onStack[v] = -1
		}
		vs, es = vs[:0], es[:0]
	}
	for v0 := range int32(nodes) {
		for deg[v0] > 0 {
			// A walk from v0 along fractional edges until it closes a cycle
			// or, started from a node of degree 1, reaches another one.
			clear()
			vs = append(vs, v0)
			onStack[v0] = 0
			fromEnd := deg[v0] == 1
			for {
				u := vs[len(vs)-1]
				in := int32(-1)
				if len(es) > 0 {
					in = es[len(es)-1]
				}
				c := next(u, in)
				if c < 0 {
					if in < 0 {
						break // back at the start, which has no edge left
					}
					if fromEnd {
						if err := push(es); err != nil {
							return err
						}
						break
					}
					// u has a single fractional edge: walk again from it, so
					// that a path found is maximal.
					clear()
					vs = append(vs, u)
					onStack[u] = 0
					fromEnd = true
					continue
				}
				x := other(c, u)
				if k := onStack[x]; k >= 0 {
					es = append(es, c)
					if err := push(es[k:]); err != nil {
						return err
					}
					// The walk before x was not on the cycle and is still
					// fractional: go on from x.
					for _, v := range vs[k+1:] {
						onStack[v] = -1
					}
					vs, es = vs[:k+1], es[:k]
					continue
				}
				onStack[x] = int32(len(vs))
				vs = append(vs, x)
				es = append(es, c)
			}
		}
	}
	clear()
	return nil
}

// closestTable returns the integer table y >= 0 with the given margins on
// the network that minimises sum_c |y_c - p_c|, by successive shortest
// paths: start from the cell-wise minimiser (p rounded, at least 0), whose
// residual network has no negative cycle, and move one unit at a time along
// a cheapest path from a node with too much flow to one with too little
// (Bellman-Ford with a queue, since reverse arcs cost less than nothing).
// Each step keeps the residual network free of negative cycles, so the end
// point is optimal (Ahuja, Magnanti and Orlin, Network Flows, ch. 9 and
// 14: convex separable costs with integer breakpoints). It returns the
// table and the number of units it could not place: 0 whenever the margins
// admit a non-negative integer table, which is always the case for
// consistent non-negative integer targets (see RoundInteger).
func closestTable(ctx context.Context, g *network, p []float64, tA, tB []int64) ([]int64, int64, error) {
	y := make([]int64, len(p))
	for c, v := range p {
		y[c] = max(0, int64(math.Round(v)))
	}
	n, err := repairTable(ctx, g, p, y, tA, tB)
	return y, n, err
}

// repairTable moves y, in place, to the closest table (in sum |y - p|) with
// margins tA, tB, assuming y is a cell-wise minimiser of that cost or
// already the optimum for its own margins. It returns the number of units
// it could not place.
func repairTable(ctx context.Context, g *network, p []float64, y []int64, tA, tB []int64) (int64, error) {
	nodes := g.nA + g.nB
	need := make([]int64, nodes) // > 0: must send out (A) / receive (B) more
	setNeed := func() {
		copy(need, tA)
		copy(need[g.nA:], tB)
		for c, v := range y {
			need[g.a[c]] -= v
			need[g.nA+int(g.b[c])] -= v
		}
	}
	setNeed()
	// Sources have units to send in the residual network: an A-node that
	// must send more, or a B-node that receives too much (it sends back
	// along reverse arcs). Sinks are the opposite.
	supply := func(v int) int64 {
		if v < g.nA {
			return need[v]
		}
		return -need[v]
	}
	// Arcs: cell c forward (a -> b, y_c + 1) and backward (b -> a, y_c - 1).
	start := make([]int32, nodes+1)
	for c := range y {
		start[g.a[c]+1]++
		start[int(g.b[c])+g.nA+1]++
	}
	for v := range nodes {
		start[v+1] += start[v]
	}
	adj := make([]int32, start[nodes])
	fill := append([]int32(nil), start[:nodes]...)
	for c := range y {
		adj[fill[g.a[c]]] = int32(c)
		fill[g.a[c]]++
		adj[fill[int(g.b[c])+g.nA]] = int32(c)
		fill[int(g.b[c])+g.nA]++
	}
	cost := func(c int, v int64) float64 { return math.Abs(float64(v) - p[c]) }
	dist := make([]float64, nodes)
	via := make([]int32, nodes) // arc into the node: cell, negated-1 for backward
	inQueue := make([]bool, nodes)
	var queue []int32
	var unplaced int64
	const eps = 1e-12
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		queue = queue[:0]
		anySource := false
		for v := range nodes {
			dist[v] = math.Inf(1)
			via[v] = math.MinInt32
			inQueue[v] = false
			if supply(v) > 0 {
				dist[v] = 0
				queue = append(queue, int32(v))
				inQueue[v] = true
				anySource = true
			}
		}
		if !anySource {
			break
		}
		// Bellman-Ford dequeues each node at most nodes times when there is
		// no negative cycle; the bound only guards against a cycle made of
		// floating-point error in the costs.
		for pops := 0; len(queue) > 0 && pops <= nodes*(nodes+1); pops++ {
			u := queue[0]
			queue = queue[1:]
			inQueue[u] = false
			for _, c := range adj[start[u]:start[u+1]] {
				var x int32
				var d float64
				var arc int32
				if int(u) < g.nA { // forward: increase y_c
					x = g.b[c] + int32(g.nA)
					d = cost(int(c), y[c]+1) - cost(int(c), y[c])
					arc = c
				} else { // backward: decrease y_c
					if y[c] == 0 {
						continue
					}
					x = g.a[c]
					d = cost(int(c), y[c]-1) - cost(int(c), y[c])
					arc = -c - 1
				}
				if nd := dist[u] + d; nd < dist[x]-eps {
					dist[x] = nd
					via[x] = arc
					if !inQueue[x] {
						inQueue[x] = true
						queue = append(queue, x)
					}
				}
			}
		}
		best := -1
		for v := range nodes {
			if supply(v) < 0 && !math.IsInf(dist[v], 1) && (best < 0 || dist[v] < dist[best]) {
				best = v
			}
		}
		if best < 0 {
			// No sink is reachable: count what is left (never for
			// consistent targets in the two-margin case).
			for v := range nodes {
				if s := supply(v); s > 0 {
					unplaced += s
				}
			}
			break
		}
		// Move one unit along the path back to its source.
		v := int32(best)
		for via[v] != math.MinInt32 {
			arc := via[v]
			if arc >= 0 {
				y[arc]++
				v = g.a[arc]
			} else {
				c := -arc - 1
				y[c]--
				v = g.b[c] + int32(g.nA)
			}
		}
		setNeed()
	}
	return unplaced, nil
}
