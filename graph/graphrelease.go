package graph

// Releasing a graph whose degrees are partly public (paper 3, Section 5),
// made consistent with those degrees by least squares.
//
// The paper's Section 6.2, which should say how, is empty. The derivation:
// a simple graph on V vertices is a vector x of edge indicators, one per
// vertex pair (u < v for an undirected graph, u != v for a directed one).
// The known degrees are linear equalities B^T x = d, one column of B per
// known degree holding a 1 at every pair that counts towards it (for an
// undirected graph the pairs at the vertex, for a directed one its out- or
// in-arcs). The release adds grid Laplace noise of scale S/eps to every
// pair, S being the generic sensitivity of the known degrees (the corrected
// Lemma 5.1, UndirectedGraphSensitivity and DirectedGraphSensitivity), and
// replaces the noisy vector z by its least-squares projection onto
// {y : B^T y = d}:
//
//	y = z + B w,  (B^T B) w = d - B^T z.
//
// B^T B is small (one row per known degree) and structured: for an
// undirected graph it is (V-2) I + J over the known vertices; for a directed
// one it pairs out- and in-degrees through J - E (E marks vertices whose
// out- and in-degree are both known). Its eigenvalues take at most a handful
// of distinct values, so conjugate gradients, with each product computed as
// B^T(B w) in one pass over the pairs, converge in a few iterations; when
// every degree of a directed graph is known, B^T B is singular but the
// right-hand side lies in its range (public degrees of a real graph are
// consistent), and conjugate gradients from zero find the minimum-norm w,
// which gives the same projection. As with cuboids, the projection is
// unbiased (E y = x, because B^T x = d) and does not increase any pair's
// variance, and because the degrees are the same for every pair of induced
// neighbours it is post-processing: the release is eps-differentially
// private with respect to worst-case induced neighbours (graphs with the same
// known degrees that differ by a primitive set of edge additions and
// removals).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/sensitivity"
)

// GraphSpec says which graph release to make.
type GraphSpec struct {
	// Vertices is the number of vertices, numbered 0 to Vertices-1; it is
	// public, like a schema's domain.
	Vertices int
	// Directed selects a directed graph (arcs u -> v, u != v) instead of an
	// undirected one (edges {u, v}).
	Directed bool
	// KnownOut lists the vertices whose degree (out-degree, when Directed)
	// is public and published exactly; KnownIn the vertices whose in-degree
	// is public (Directed only).
	KnownOut, KnownIn []int
	// Epsilon is the privacy loss with respect to the worst-case induced
	// neighbours of the known degrees.
	Epsilon privacy.Epsilon
}

// MaxGraphPairs bounds the vertex pairs of a graph release (2^26 pairs,
// 512 MiB of float64 values): about 11,600 vertices undirected, 8,200
// directed.
const MaxGraphPairs = 1 << 26

// GraphRelease is a noisy graph made consistent with its public degrees,
// with its privacy story.
type GraphRelease struct {
	Vertices int
	Directed bool
	// Values holds one estimate per vertex pair, in the order of Pair.
	Values []float64
	// KnownOut and KnownIn are the public degrees, published exactly:
	// vertex -> degree.
	KnownOut, KnownIn map[int]int
	Epsilon           float64
	// Sensitivity is the generic sensitivity of the known degrees and
	// SensitivityRule the result it comes from.
	Sensitivity     int
	SensitivityRule string
	// Scale and Grid are those of the grid Laplace noise on each pair (0 if
	// the degrees determine the graph and nothing was noised).
	Scale, Grid float64
	// Iterations is the number of conjugate-gradient steps the consistency
	// took and Residual the largest |B^T y - d| it left.
	Iterations int
	Residual   float64
	Seeded     bool
}

// Pairs returns the number of vertex pairs of a graph on v vertices.
func Pairs(v int, directed bool) int {
	if directed {
		return v * (v - 1)
	}
	return v * (v - 1) / 2
}

// pairIndex returns the position of pair (u, v) in the release order:
// lexicographic in (u, v) with u < v (undirected) or u != v (directed).
func pairIndex(n, u, v int, directed bool) int {
	if directed {
		i := u*(n-1) + v
		if v > u {
			i--
		}
		return i
	}
	if u > v {
		u, v = v, u
	}
	// Pairs before row u: sum_{a<u} (n-1-a).
	return u*(2*n-u-1)/2 + (v - u - 1)
}

// Pair returns the vertices of pair i (the inverse of the release order).
func (g *GraphRelease) Pair(i int) (u, v int) {
	n := g.Vertices
	if g.Directed {
		u, v = i/(n-1), i%(n-1)
		if v >= u {
			v++
		}
		return u, v
	}
	for u = 0; i >= n-1-u; u++ {
		i -= n - 1 - u
	}
	return u, u + 1 + i
}

// ReleaseGraph releases the graph with the given edges (pairs of vertices;
// for an undirected graph (u, v) and (v, u) are the same edge). The edges
// are the private data: a vertex outside [0, Vertices), a loop or a repeated
// edge is an error naming the edge's position, like a value outside a
// schema's domain. The known degrees are computed from the edges and
// published exactly.
func ReleaseGraph(ctx context.Context, edges [][2]int, spec GraphSpec, r *noise.Rand) (*GraphRelease, error) {
	n := spec.Vertices
	if n < 1 {
		return nil, fmt.Errorf("graph release: %d vertices; at least 1 is needed", n)
	}
	if p := Pairs(n, spec.Directed); n > 1<<16 || p > MaxGraphPairs {
		return nil, fmt.Errorf("graph release: %d vertices make more than %d vertex pairs", n, MaxGraphPairs)
	}
	eps := spec.Epsilon.Float64()
	if !(eps > 0) {
		return nil, errors.New("graph release: epsilon must be set (> 0)")
	}
	if !spec.Directed && len(spec.KnownIn) > 0 {
		return nil, errors.New("graph release: known in-degrees need a directed graph; list an undirected graph's known degrees as out-degrees")
	}
	var sens sensitivity.Sensitivity
	var err error
	if spec.Directed {
		sens, err = DirectedGraphSensitivity(n, spec.KnownOut, spec.KnownIn)
	} else {
		sens, err = UndirectedGraphSensitivity(n, spec.KnownOut)
	}
	if err != nil {
		return nil, fmt.Errorf("graph release: %w", err)
	}
	x := make([]float64, Pairs(n, spec.Directed))
	for i, e := range edges {
		u, v := e[0], e[1]
		if u < 0 || u >= n || v < 0 || v >= n {
			return nil, fmt.Errorf("graph release: edge %d (%d, %d): vertex outside [0, %d)", i+1, u, v, n)
		}
		if u == v {
			return nil, fmt.Errorf("graph release: edge %d (%d, %d) is a loop; graphs are simple", i+1, u, v)
		}
		k := pairIndex(n, u, v, spec.Directed)
		if x[k] != 0 {
			return nil, fmt.Errorf("graph release: edge %d (%d, %d) repeats an earlier edge; graphs are simple", i+1, u, v)
		}
		x[k] = 1
	}
	g := &GraphRelease{
		Vertices:        n,
		Directed:        spec.Directed,
		Values:          x,
		Epsilon:         eps,
		Sensitivity:     sens.Value,
		SensitivityRule: sens.Rule,
		Seeded:          r.Seeded(),
	}
	cons := g.constraints(spec.KnownOut, spec.KnownIn)
	g.KnownOut, g.KnownIn = map[int]int{}, map[int]int{}
	for _, c := range cons {
		m := g.KnownOut
		if c.in {
			m = g.KnownIn
		}
		m[c.vertex] = int(c.target)
	}
	if sens.Value == 0 {
		return g, nil // determined by the public degrees
	}
	lap, err := noise.NewLaplace(float64(sens.Value), eps)
	if err != nil {
		return nil, fmt.Errorf("graph release: %w", err)
	}
	g.Scale, g.Grid = lap.Scale(), lap.Grid()
	if err := noise.AddParallel(ctx, lap, r, g.Values); err != nil {
		return nil, fmt.Errorf("graph release: %w", err)
	}
	g.Iterations, g.Residual = g.project(ctx, cons)
	return g, ctx.Err()
}

// degreeConstraint is one known degree: the pairs that count towards it sum
// to target.
type degreeConstraint struct {
	vertex int
	in     bool
	target float64
}

// constraints returns the known degrees with their true values (computed
// from g.Values, which holds the edge indicators when it is called).
func (g *GraphRelease) constraints(out, in []int) []degreeConstraint {
	var cons []degreeConstraint
	add := func(list []int, isIn bool) {
		seen := map[int]bool{}
		sorted := slices.Clone(list)
		slices.Sort(sorted)
		for _, v := range sorted {
			if seen[v] {
				continue
			}
			seen[v] = true
			c := degreeConstraint{vertex: v, in: isIn}
			g.eachPairOf(c, func(k int) { c.target += g.Values[k] })
			cons = append(cons, c)
		}
	}
	add(out, false)
	add(in, true)
	return cons
}

// eachPairOf calls fn with the index of every pair counting towards c.
func (g *GraphRelease) eachPairOf(c degreeConstraint, fn func(k int)) {
	n := g.Vertices
	for w := 0; w < n; w++ {
		if w == c.vertex {
			continue
		}
		switch {
		case !g.Directed:
			fn(pairIndex(n, c.vertex, w, false))
		case c.in:
			fn(pairIndex(n, w, c.vertex, true))
		default:
			fn(pairIndex(n, c.vertex, w, true))
		}
	}
}

// project replaces g.Values by its least-squares projection onto the known
// degrees, by conjugate gradients on (B^T B) w = d - B^T z. It returns the
// iterations used and the largest constraint residual left.
func (g *GraphRelease) project(ctx context.Context, cons []degreeConstraint) (int, float64) {
	k := len(cons)
	if k == 0 {
		return 0, 0
	}
	bt := func(y []float64, out []float64) { // out = B^T y
		for i, c := range cons {
			var s float64
			g.eachPairOf(c, func(p int) { s += y[p] })
			out[i] = s
		}
	}
	tmp := make([]float64, len(g.Values))
	gram := func(w, out []float64) { // out = B^T B w
		clear(tmp)
		for i, c := range cons {
			wi := w[i]
			g.eachPairOf(c, func(p int) { tmp[p] += wi })
		}
		bt(tmp, out)
	}
	b := make([]float64, k)
	bt(g.Values, b)
	for i, c := range cons {
		b[i] = c.target - b[i]
	}
	w := make([]float64, k)
	res := slices.Clone(b)
	dir := slices.Clone(b)
	q := make([]float64, k)
	rr := dot(res, res)
	// The number of steps depends on z only through rounding; z is the
	// noisy measurement, so the time taken is post-processing of a private
	// quantity and reveals nothing more. Stopping at convergence matters:
	// when B^T B is singular, steps taken on rounding noise grow w along
	// its null space, which B maps to zero but not in floating point.
	tol := 1e-26 * (dot(b, b) + 1)
	iters := 0
	for ; iters < graphCGSteps && rr > tol; iters++ {
		if ctx.Err() != nil {
			return iters, math.Inf(1)
		}
		gram(dir, q)
		den := dot(dir, q)
		if !(den > 0) {
			break
		}
		alpha := rr / den
		for i := range w {
			w[i] += alpha * dir[i]
			res[i] -= alpha * q[i]
		}
		next := dot(res, res)
		beta := next / rr
		rr = next
		for i := range dir {
			dir[i] = res[i] + beta*dir[i]
		}
	}
	for i, c := range cons {
		wi := w[i]
		g.eachPairOf(c, func(p int) { g.Values[p] += wi })
	}
	bt(g.Values, b)
	worst := 0.0
	for i, c := range cons {
		worst = max(worst, math.Abs(b[i]-c.target))
	}
	return iters, worst
}

// graphCGSteps bounds the conjugate-gradient steps of the degree
// projection; B^T B has at most seven distinct eigenvalues (two for an
// undirected graph), so exact arithmetic would need no more than seven.
const graphCGSteps = 32

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// WriteCSV writes one row per vertex pair: "u,v,edge", the estimate of the
// pair's edge indicator (1 for an edge, 0 for none) in full (FormatExact),
// so that the degrees read back from the file keep the known degrees.
func (g *GraphRelease) WriteCSV(w io.Writer) error {
	buf := []byte("u,v,edge\n")
	for i, val := range g.Values {
		u, v := g.Pair(i)
		buf = strconv.AppendInt(buf, int64(u), 10)
		buf = append(buf, ',')
		buf = strconv.AppendInt(buf, int64(v), 10)
		buf = append(buf, ',')
		buf = append(buf, domain.FormatExact(val)...)
		buf = append(buf, '\n')
		if len(buf) > 1<<16 {
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	_, err := w.Write(buf)
	return err
}

// GraphMetadata is the privacy story of a graph release, as written beside
// it.
type GraphMetadata struct {
	Mechanism       string         `json:"mechanism"`
	Epsilon         float64        `json:"epsilon"`
	Neighbours      string         `json:"neighbours"`
	Sensitivity     int            `json:"sensitivity"`
	SensitivityRule string         `json:"sensitivity_rule"`
	Scale           float64        `json:"scale"`
	Grid            float64        `json:"grid"`
	Vertices        int            `json:"vertices"`
	Directed        bool           `json:"directed"`
	KnownDegrees    map[string]int `json:"known_degrees,omitempty"`
	KnownOut        map[string]int `json:"known_out_degrees,omitempty"`
	KnownIn         map[string]int `json:"known_in_degrees,omitempty"`
	Iterations      int            `json:"consistency_iterations"`
	Residual        float64        `json:"consistency_residual"`
	Seeded          bool           `json:"seeded"`
	Private         bool           `json:"private"`
	// Guarantee is privacy.GuaranteeUnconditional, or privacy.GuaranteeNone for a seeded
	// run; ReleasedExactly is true when the known degrees determine the
	// graph, so the released values are the true edges.
	Guarantee       string `json:"guarantee"`
	ReleasedExactly bool   `json:"released_exactly"`
}

// Metadata returns the release's privacy story.
func (g *GraphRelease) Metadata() GraphMetadata {
	m := GraphMetadata{
		Mechanism:       "Laplace noise on a power-of-two grid (exact discrete Laplace) on every vertex pair, then least-squares consistency with the known degrees",
		Epsilon:         g.Epsilon,
		Neighbours:      "worst-case induced neighbours given the known degrees (simple graphs with the same known degrees that differ by a minimal set of added and removed edges)",
		Sensitivity:     g.Sensitivity,
		SensitivityRule: g.SensitivityRule,
		Scale:           g.Scale,
		Grid:            g.Grid,
		Vertices:        g.Vertices,
		Directed:        g.Directed,
		Iterations:      g.Iterations,
		Residual:        g.Residual,
		Seeded:          g.Seeded,
		Private:         !g.Seeded,
		Guarantee:       privacy.GuaranteeUnconditional,
		ReleasedExactly: g.Sensitivity == 0,
	}
	if g.Seeded {
		m.Guarantee = privacy.GuaranteeNone
	}
	if len(g.KnownOut)+len(g.KnownIn) == 0 {
		m.Neighbours = "add or remove one edge"
	}
	if g.Sensitivity == 0 {
		m.Mechanism = "none: the known degrees determine the graph, which is public"
	}
	keys := func(in map[int]int) map[string]int {
		if len(in) == 0 {
			return nil
		}
		out := make(map[string]int, len(in))
		for v, d := range in {
			out[strconv.Itoa(v)] = d
		}
		return out
	}
	if g.Directed {
		m.KnownOut, m.KnownIn = keys(g.KnownOut), keys(g.KnownIn)
	} else {
		m.KnownDegrees = keys(g.KnownOut)
	}
	return m
}
