package refine

import (
	"errors"
	"fmt"
	"math"
)

// Hierarchy is a forest of answers in which every internal node is, by
// definition, the sum of its children: a histogram and its coarser
// aggregates (the hierarchical histograms of Hay et al. 2010, the paper's
// reference [3]), or the grades example's total = passing + F,
// passing = A + B + C + D.
//
// Its Refine is the least-squares refinement under the constraints
// "node = sum of children" in two linear passes, without any matrix: the
// b-ary tree algorithm of Hay et al. generalised to any fan-out. Bottom-up,
// each node combines its own noisy answer with the sum of its children's
// estimates, weighted by inverse variance; top-down, each parent's final
// value is split among its children in proportion to their variances.
// For a complete b-ary tree this is exactly Hay et al.'s z[v] and h̄[v].
type Hierarchy struct {
	n int
	// Nodes are kept in breadth-first order ("positions"): the children of
	// the node at position p occupy positions first[p] .. end[p]-1, all
	// after p.
	order []int32 // node at each position
	first []int32 // position of the first child
	end   []int32 // one past the position of the last child
	roots int     // positions 0..roots-1 hold the roots
}

// maxHierarchy bounds the number of nodes (positions are int32).
const maxHierarchy = math.MaxInt32

// NewHierarchy builds a hierarchy from each node's parent: parent[i] is the
// node whose value is the sum of node i and its siblings, or -1 for a root.
// Every node with children must have at least two (a single child would
// just repeat its parent).
func NewHierarchy(parent []int) (*Hierarchy, error) {
	n := len(parent)
	if n == 0 {
		return nil, errors.New("refine: hierarchy has no nodes")
	}
	if n > maxHierarchy {
		return nil, fmt.Errorf("refine: hierarchy has %d nodes, more than the limit %d", n, maxHierarchy)
	}
	count := make([]int32, n+1)
	for i, p := range parent {
		if p < -1 || p >= n {
			return nil, fmt.Errorf("refine: hierarchy: parent[%d] = %d is not a node (want -1 or 0..%d)", i, p, n-1)
		}
		if p == i {
			return nil, fmt.Errorf("refine: hierarchy: node %d is its own parent", i)
		}
		if p >= 0 {
			count[p]++
		}
	}
	for i, c := range count[:n] {
		if c == 1 {
			return nil, fmt.Errorf("refine: hierarchy: node %d has a single child; an internal node needs at least two", i)
		}
	}
	// Children lists in CSR form, grouped by parent.
	start := make([]int32, n+1)
	for i := range n {
		start[i+1] = start[i] + count[i]
	}
	kids := make([]int32, start[n])
	fill := make([]int32, n)
	copy(fill, start[:n])
	roots := 0
	for i, p := range parent {
		if p < 0 {
			roots++
			continue
		}
		kids[fill[p]] = int32(i)
		fill[p]++
	}
	if roots == 0 {
		return nil, errors.New("refine: hierarchy has no root (the parent links form a cycle)")
	}
	h := &Hierarchy{n: n, order: make([]int32, 0, n), first: make([]int32, n), end: make([]int32, n), roots: roots}
	for i, p := range parent {
		if p < 0 {
			h.order = append(h.order, int32(i))
		}
	}
	for pos := 0; pos < len(h.order); pos++ {
		v := h.order[pos]
		h.first[pos] = int32(len(h.order))
		h.order = append(h.order, kids[start[v]:start[v+1]]...)
		h.end[pos] = int32(len(h.order))
	}
	if len(h.order) != n {
		return nil, fmt.Errorf("refine: hierarchy: %d nodes are not reachable from a root (their parent links form a cycle)", n-len(h.order))
	}
	return h, nil
}

// CompleteTree returns the complete tree with the given branching factor
// and number of levels (levels = 1 is a single node), with nodes numbered
// in level order: the root is 0 and the children of node i are
// b*i+1 .. b*i+b. A histogram of b^(levels-1) bins is the last level.
func CompleteTree(branching, levels int) (*Hierarchy, error) {
	if branching < 2 {
		return nil, fmt.Errorf("refine: branching factor must be at least 2, got %d", branching)
	}
	if levels < 1 {
		return nil, fmt.Errorf("refine: a tree needs at least one level, got %d", levels)
	}
	n, width := 0, 1
	for l := range levels {
		if width > maxHierarchy-n {
			return nil, fmt.Errorf("refine: a %d-ary tree with %d levels has more than %d nodes", branching, levels, maxHierarchy)
		}
		n += width
		if l+1 < levels {
			if width > maxHierarchy/branching {
				return nil, fmt.Errorf("refine: a %d-ary tree with %d levels has more than %d nodes", branching, levels, maxHierarchy)
			}
			width *= branching
		}
	}
	parent := make([]int, n)
	parent[0] = -1
	for i := 1; i < n; i++ {
		parent[i] = (i - 1) / branching
	}
	return NewHierarchy(parent)
}

// Len returns the number of nodes.
func (h *Hierarchy) Len() int { return h.n }

// Equalities returns the hierarchy's constraints, one per internal node:
// the sum of its children minus the node is 0. They hold by definition, so
// they are public.
func (h *Hierarchy) Equalities() []Equality {
	var eqs []Equality
	for pos, v := range h.order {
		f, e := h.first[pos], h.end[pos]
		if f == e {
			continue
		}
		eq := Equality{Label: fmt.Sprintf("node %d", v), Index: []int{int(v)}, Coef: []float64{-1}, Public: true}
		for _, c := range h.order[f:e] {
			eq.Index = append(eq.Index, int(c))
			eq.Coef = append(eq.Coef, 1)
		}
		eqs = append(eqs, eq)
	}
	return eqs
}

// Refine writes to dst the least-squares refinement of the noisy node
// values x: the consistent values (every internal node equal to the sum of
// its children) closest to x in Euclidean distance. It costs O(n) time and
// allocates 2n floats. dst may be x.
func (h *Hierarchy) Refine(dst, x []float64) error {
	if err := checkVectors(h.n, dst, x); err != nil {
		return err
	}
	z := make([]float64, h.n) // estimate of each subtree total from its own subtree
	s := make([]float64, h.n) // its variance, in units of one answer's variance
	h.refine(dst, x, z, s)
	return nil
}

func (h *Hierarchy) refine(dst, x, z, s []float64) {
	order, first, end := h.order, h.first, h.end
	// Bottom-up (reverse breadth-first order visits children first): combine
	// the node's own answer (variance 1) with the sum of its children's
	// estimates (variance S) by inverse-variance weighting.
	for p := h.n - 1; p >= 0; p-- {
		xv := x[order[p]]
		f, e := first[p], end[p]
		if f == e {
			z[p], s[p] = xv, 1
			continue
		}
		var zs, ss float64
		for c := f; c < e; c++ {
			zs += z[c]
			ss += s[c]
		}
		z[p] = (ss*xv + zs) / (ss + 1)
		s[p] = ss / (ss + 1)
	}
	// Top-down: roots keep their estimates; a parent's final value minus the
	// sum of its children's estimates is shared among them in proportion to
	// their variances. z is overwritten by the final values (positions of a
	// parent are always before its children's).
	for p := range h.n {
		f, e := first[p], end[p]
		if f == e {
			continue
		}
		var zs, ss float64
		for c := f; c < e; c++ {
			zs += z[c]
			ss += s[c]
		}
		k := (z[p] - zs) / ss
		for c := f; c < e; c++ {
			z[c] += k * s[c]
		}
	}
	for p, v := range order {
		dst[v] = z[p]
	}
}

// checkVectors validates the lengths of dst and x and that x is finite.
func checkVectors(n int, dst, x []float64) error {
	if len(x) != n {
		return fmt.Errorf("refine: %d noisy answers, want %d", len(x), n)
	}
	if len(dst) != n {
		return fmt.Errorf("refine: output has room for %d answers, want %d", len(dst), n)
	}
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("refine: noisy answer %d is %v; answers must be finite", i, v)
		}
	}
	return nil
}
