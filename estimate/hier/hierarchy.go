package hier

import (
	"fmt"
	"sync"
)

// Hierarchy is a validated hierarchy of groups over the leaves of one
// dimension: level 0 holds the leaves, levels 1..L-1 coarser groups, and
// level L the root, the one node that is the total over the hierarchy.
//
// Internally the nodes of every level are renumbered so that the children
// of each node are contiguous and every level follows the order of the
// level above; the exported methods use the caller's numbering.
type Hierarchy struct {
	nodes  []int     // nodes per level 0..L; nodes[L] = 1
	off    []int     // off[k]: internal global index of the first node of level k; off[L+1] = total
	pos    [][]int32 // pos[k][i]: internal index within level k of the caller's node i
	ext    [][]int32 // ext[k][p]: the caller's index of internal node p (inverse of pos)
	cstart [][]int32 // cstart[k] (k >= 1): children of internal node p are internal level-(k-1) nodes cstart[k][p] .. cstart[k][p+1]-1
	parent [][]int32 // parent[k] (k < L): the caller's index of the parent of the caller's node i

	classOnce sync.Once
	cls       *classes // see Classes
}

// maxLevels bounds the number of levels (levels are kept in bit masks).
const maxLevels = 63

// NewHierarchy validates and returns the hierarchy whose level k has
// sizes[k] nodes (level 0 the leaves), in which parents[k][i] is the index at
// level k+1 of the group that contains node i of level k, for k = 0 ..
// len(sizes)-2. The root (level len(sizes)) is added: it is the parent of
// every node of the last given level. Every node of every level must have
// at least one child.
func NewHierarchy(sizes []int, parents [][]int32) (*Hierarchy, error) {
	if len(sizes) == 0 {
		return nil, fmt.Errorf("hier: a hierarchy needs at least the leaf level")
	}
	if len(sizes) >= maxLevels {
		return nil, fmt.Errorf("hier: %d levels, at most %d allowed", len(sizes)+1, maxLevels)
	}
	if len(parents) != len(sizes)-1 {
		return nil, fmt.Errorf("hier: %d levels below the root need %d parent maps, got %d", len(sizes), len(sizes)-1, len(parents))
	}
	L := len(sizes)
	h := &Hierarchy{nodes: append(append([]int(nil), sizes...), 1)}
	for k, n := range sizes {
		if n < 1 {
			return nil, fmt.Errorf("hier: level %d has %d nodes", k, n)
		}
	}
	// Parent maps of the caller, the last one to the root.
	h.parent = make([][]int32, L)
	for k := range L {
		if k == L-1 {
			h.parent[k] = make([]int32, sizes[k])
			continue
		}
		par := parents[k]
		if len(par) != sizes[k] {
			return nil, fmt.Errorf("hier: parent map of level %d has %d entries, the level has %d nodes", k, len(par), sizes[k])
		}
		seen := make([]bool, sizes[k+1])
		for i, p := range par {
			if p < 0 || int(p) >= sizes[k+1] {
				return nil, fmt.Errorf("hier: node %d of level %d has parent %d, level %d has %d nodes", i, k, p, k+1, sizes[k+1])
			}
			seen[p] = true
		}
		for g, ok := range seen {
			if !ok {
				return nil, fmt.Errorf("hier: group %d of level %d is empty", g, k+1)
			}
		}
		h.parent[k] = append([]int32(nil), par...)
	}
	// Internal order, top down: the children of each node in the order of
	// the level above, each group's children in the caller's order.
	h.pos = make([][]int32, L+1)
	h.ext = make([][]int32, L+1)
	h.cstart = make([][]int32, L+1)
	h.ext[L] = []int32{0}
	h.pos[L] = []int32{0}
	for k := L - 1; k >= 0; k-- {
		n, np := h.nodes[k], h.nodes[k+1]
		count := make([]int32, np+1)
		for _, p := range h.parent[k] {
			count[p+1]++
		}
		for q := range np {
			count[q+1] += count[q]
		}
		byParent := make([]int32, n)
		fill := append([]int32(nil), count[:np]...)
		for i, p := range h.parent[k] {
			byParent[fill[p]] = int32(i)
			fill[p]++
		}
		ext := make([]int32, 0, n)
		cs := make([]int32, np+1)
		for p, q := range h.ext[k+1] {
			cs[p] = int32(len(ext))
			ext = append(ext, byParent[count[q]:count[q+1]]...)
		}
		cs[np] = int32(n)
		h.ext[k] = ext
		h.cstart[k+1] = cs
		pos := make([]int32, n)
		for p, i := range ext {
			pos[i] = int32(p)
		}
		h.pos[k] = pos
	}
	h.off = make([]int, L+2)
	for k := range L + 1 {
		h.off[k+1] = h.off[k] + h.nodes[k]
	}
	return h, nil
}

// Levels returns the number of levels, the root included: the levels are
// 0 (the leaves) to Levels()-1 (the root).
func (h *Hierarchy) Levels() int { return len(h.nodes) }

// RootLevel returns the level of the root, Levels()-1.
func (h *Hierarchy) RootLevel() int { return len(h.nodes) - 1 }

// Nodes returns the number of nodes of a level (1 for the root level).
func (h *Hierarchy) Nodes(level int) int { return h.nodes[level] }

// Parent returns the index at level+1 of the group containing node i of
// level, or -1 for the root.
func (h *Hierarchy) Parent(level, i int) int {
	if level == h.RootLevel() {
		return -1
	}
	return int(h.parent[level][i])
}

// Ancestor returns the index at level to of the node at that level that
// contains node i of level from (to >= from).
func (h *Hierarchy) Ancestor(from, i, to int) int {
	for k := from; k < to; k++ {
		i = int(h.parent[k][i])
	}
	return i
}

// total returns the number of nodes of all levels.
func (h *Hierarchy) total() int { return h.off[len(h.off)-1] }

// global returns the internal global index of the caller's node i of level k.
func (h *Hierarchy) global(k, i int) int { return h.off[k] + int(h.pos[k][i]) }

// levelOf returns the level of the internal global node g.
func (h *Hierarchy) levelOf(g int) int {
	k := 0
	for g >= h.off[k+1] {
		k++
	}
	return k
}

// shapes returns the node classes and sibling groups, computing them once.
func (h *Hierarchy) shapes() *classes {
	h.classOnce.Do(h.computeClasses)
	return h.cls
}
