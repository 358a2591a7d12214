package hier

import (
	"encoding/binary"
	"slices"
)

// Classes of nodes. An automorphism of a hierarchy permutes the children of
// its groups so that the tree maps onto itself; it maps every level onto
// itself. Every measurement is a whole level's table with the same variance
// on every node, so an automorphism maps the problem onto itself, and two
// nodes it exchanges have the same error law (up to a permutation of the
// noise variables). Two nodes of a level are exchanged by some automorphism
// iff their subtrees have the same shape and their parents are exchanged by
// some automorphism: canonical subtree shapes bottom-up (the sorted multiset
// of the children's shapes, as in the AHU isomorphism test), then classes
// top-down as pairs (parent's class, shape). A national geography has many
// such repeats (the tracts of a county, counties of a state with as many
// tracts), so one law per class serves them all.

// classes are a hierarchy's node classes, computed once, and the children
// of every node grouped by shape: children of one node with the same shape
// are exchanged by an automorphism that fixes everything outside their
// subtrees, so they contribute alike to every error law that reaches them
// through their parent.
type classes struct {
	class [][]int32 // per level, per node (the caller's numbering): its class
	reps  [][]int   // per level, per class: its lowest-numbered node
	// Children of the internal global node g, by shape: groups
	// gstart[g] .. gstart[g+1]-1, each a representative child (internal
	// global index) and the number of children of its shape.
	gstart []int32
	grep   []int32
	gmult  []int32
	shape  []int32 // per internal global node: its shape (numbered within its level)
	tree   *ShapeTree
}

// ShapeTree is a hierarchy up to its automorphisms: the shapes of the
// subtrees of each level, what each is made of, and the classes of nodes
// (Classes) with their shapes and parents. A quantity computed bottom-up
// from the subtrees (one value per shape) and then top-down from the
// parents (one value per class) is computed for every node at the cost of
// one node per shape and per class: for a national geography a few
// thousand instead of 10^5.
type ShapeTree struct {
	// Kids[k][s], for k >= 1, are the shapes (of level k-1) of the
	// children of a node of shape s of level k, and how many of each, in
	// increasing order of shape.
	Kids [][][]ShapeCount
	// Classes[k][c] describes class c of level k (numbered as Classes
	// numbers them): the shape of its nodes, the class of their parents
	// (at level k+1; -1 for the root) and its number of nodes.
	Classes [][]ClassInfo
}

// ShapeCount is a number of children of one shape.
type ShapeCount struct {
	Shape, Count int
}

// ClassInfo describes one class of nodes.
type ClassInfo struct {
	Shape, Parent, Nodes int
}

// ShapeTree returns the hierarchy's shape tree. It is shared: the caller
// must not modify it.
func (h *Hierarchy) ShapeTree() *ShapeTree {
	return h.shapes().tree
}

// Classes returns, for every node of level (the caller's numbering), its
// class, and for every class its lowest-numbered node. Two nodes are in
// one class exactly when an automorphism of the hierarchy (a permutation of
// each group's children that maps the tree onto itself) maps one onto the
// other; every quantity of a Problem that depends on a node only through
// the tree, in particular the error law of its cells in any view, is then
// the same for both. Classes are numbered in the order of their first
// node. The slices are shared: the caller must not modify them.
func (h *Hierarchy) Classes(level int) (class []int32, reps []int) {
	h.classOnce.Do(h.computeClasses)
	return h.cls.class[level], h.cls.reps[level]
}

// computeClasses computes the shapes bottom-up and the classes top-down.
func (h *Hierarchy) computeClasses() {
	L := h.RootLevel()
	// shape[k][i]: canonical shape of the subtree of the caller's node i of
	// level k; shapes of different levels are numbered apart.
	shape := make([][]int32, L+1)
	shape[0] = make([]int32, h.nodes[0])
	var kids []int32
	var key []byte
	for k := 1; k <= L; k++ {
		ids := map[string]int32{}
		shape[k] = make([]int32, h.nodes[k])
		for i := range h.nodes[k] {
			p := h.pos[k][i]
			kids = kids[:0]
			for c := h.cstart[k][p]; c < h.cstart[k][p+1]; c++ {
				kids = append(kids, shape[k-1][h.ext[k-1][c]])
			}
			slices.Sort(kids)
			key = key[:0]
			for _, s := range kids {
				key = binary.LittleEndian.AppendUint32(key, uint32(s))
			}
			id, ok := ids[string(key)]
			if !ok {
				id = int32(len(ids))
				ids[string(key)] = id
			}
			shape[k][i] = id
		}
	}
	c := &classes{class: make([][]int32, L+1), reps: make([][]int, L+1)}
	N := h.total()
	c.shape = make([]int32, N)
	for k := range L + 1 {
		for i, sh := range shape[k] {
			c.shape[h.global(k, i)] = sh
		}
	}
	// Sibling groups, in the order of each shape's first child.
	c.gstart = make([]int32, N+1)
	first := map[int32]int{}
	for g := range N {
		c.gstart[g] = int32(len(c.grep))
		k := h.levelOf(g)
		if k == 0 {
			continue
		}
		clear(first)
		p := g - h.off[k]
		base := h.off[k-1]
		for ch := base + int(h.cstart[k][p]); ch < base+int(h.cstart[k][p+1]); ch++ {
			if at, ok := first[c.shape[ch]]; ok {
				c.gmult[at]++
				continue
			}
			first[c.shape[ch]] = len(c.grep)
			c.grep = append(c.grep, int32(ch))
			c.gmult = append(c.gmult, 1)
		}
	}
	c.gstart[N] = int32(len(c.grep))
	c.class[L] = []int32{0}
	c.reps[L] = []int{0}
	for k := L - 1; k >= 0; k-- {
		ids := map[[2]int32]int32{}
		c.class[k] = make([]int32, h.nodes[k])
		for i := range h.nodes[k] {
			key := [2]int32{c.class[k+1][h.parent[k][i]], shape[k][i]}
			id, ok := ids[key]
			if !ok {
				id = int32(len(ids))
				ids[key] = id
				c.reps[k] = append(c.reps[k], i)
			}
			c.class[k][i] = id
		}
	}
	c.tree = shapeTree(h, shape, c)
	h.cls = c
}

// shapeTree builds the ShapeTree from the shapes per level (the caller's
// numbering) and the classes.
func shapeTree(h *Hierarchy, shape [][]int32, c *classes) *ShapeTree {
	L := h.RootLevel()
	t := &ShapeTree{Kids: make([][][]ShapeCount, L+1), Classes: make([][]ClassInfo, L+1)}
	for k := range L + 1 {
		n := 0
		for _, s := range shape[k] {
			n = max(n, int(s)+1)
		}
		if k >= 1 {
			t.Kids[k] = make([][]ShapeCount, n)
			done := make([]bool, n)
			for i, s := range shape[k] {
				if done[s] {
					continue
				}
				done[s] = true
				g := h.global(k, i)
				for x := c.gstart[g]; x < c.gstart[g+1]; x++ {
					t.Kids[k][s] = append(t.Kids[k][s], ShapeCount{Shape: int(c.shape[c.grep[x]]), Count: int(c.gmult[x])})
				}
				slices.SortFunc(t.Kids[k][s], func(a, b ShapeCount) int { return a.Shape - b.Shape })
			}
		}
		t.Classes[k] = make([]ClassInfo, len(c.reps[k]))
		for ci, rep := range c.reps[k] {
			par := -1
			if k < L {
				par = int(c.class[k+1][h.parent[k][rep]])
			}
			t.Classes[k][ci] = ClassInfo{Shape: int(shape[k][rep]), Parent: par}
		}
		for _, ci := range c.class[k] {
			t.Classes[k][ci].Nodes++
		}
	}
	return t
}
