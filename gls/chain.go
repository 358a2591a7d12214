package gls

import (
	"math"
	"slices"
)

// chain is a sequence of nested partitions of one dimension, from the
// identity (level 0) to the total (level L), seen as a tree: the nodes of
// level ℓ are the groups of its partition, each the union of its children
// at level ℓ-1.
type chain struct {
	n  int
	lv []level
}

// level is one partition of a chain.
type level struct {
	part   partition
	size   []int   // values per node
	parent []int32 // per node, its node at the next level (nil at the top)
	cstart []int32 // per node, its first child in child (levels >= 1)
	child  []int32 // the nodes of the level below, grouped by parent
}

func (c *chain) top() int { return len(c.lv) - 1 }

// levelOf returns the level whose partition equals p, or -1.
func (c *chain) levelOf(p partition) int {
	for l, lv := range c.lv {
		if samePartition(lv.part, p) {
			return l
		}
	}
	return -1
}

// children returns the children of node h of level l >= 1.
func (c *chain) children(l, h int) []int32 {
	lv := &c.lv[l]
	return lv.child[lv.cstart[h]:lv.cstart[h+1]]
}

// newChain orders parts (with the identity and the total added) from
// finest to coarsest. When two of them are not nested it returns their
// indices in parts (-1 for the added identity or total, which are nested
// with everything).
func newChain(n int, parts []partition) (*chain, [2]int, bool) {
	type cand struct {
		p   partition
		src int
	}
	id := make([]int32, n)
	for i := range id {
		id[i] = int32(i)
	}
	cands := []cand{{partition{id, n}, -1}}
	for i, p := range parts {
		cands = append(cands, cand{p, i})
	}
	cands = append(cands, cand{partition{make([]int32, n), 1}, -1})
	slices.SortStableFunc(cands, func(a, b cand) int { return b.p.groups - a.p.groups })
	var kept []cand
	for _, cd := range cands {
		if len(kept) > 0 {
			last := kept[len(kept)-1]
			if !refines(last.p, cd.p) {
				return nil, [2]int{last.src, cd.src}, false
			}
			if last.p.groups == cd.p.groups {
				continue // the same partition
			}
		}
		kept = append(kept, cd)
	}
	c := &chain{n: n, lv: make([]level, len(kept))}
	for l, cd := range kept {
		c.lv[l] = level{part: cd.p, size: cd.p.sizes()}
	}
	for l := 0; l+1 < len(c.lv); l++ {
		lo, hi := &c.lv[l], &c.lv[l+1]
		lo.parent = make([]int32, lo.part.groups)
		for x, g := range lo.part.of {
			lo.parent[g] = hi.part.of[x]
		}
		hi.cstart = make([]int32, hi.part.groups+1)
		for _, p := range lo.parent {
			hi.cstart[p+1]++
		}
		for h := range hi.part.groups {
			hi.cstart[h+1] += hi.cstart[h]
		}
		hi.child = make([]int32, lo.part.groups)
		fill := slices.Clone(hi.cstart[:hi.part.groups])
		for g, p := range lo.parent {
			hi.child[fill[p]] = int32(g)
			fill[p]++
		}
	}
	return c, [2]int{}, true
}

// haar is the orthonormal basis of R^n a chain defines: the constant, and
// for every node h with children c_1..c_k the k-1 contrasts
//
//	f_i ∝ mean over c_1..c_{i-1} - mean over c_i,  i = 2..k
//
// (weighted Helmert contrasts of the children). The contrasts of the nodes
// of level m span the functions constant on the groups of level m-1 that
// sum to zero on every group of level m: atom m-1. Coefficient 0 is the
// constant (atom L); then come the nodes of level L, L-1, ..., 1, each
// with its k-1 contrasts. A transform costs O(values + nodes).
type haar struct {
	c     *chain
	off   [][]int32 // off[m][h]: the first coefficient of node h of level m >= 1
	a, b  []float64 // coefficient k of f_i: a on c_1..c_{i-1}, -b on c_i
	atom  []int     // atom of each coefficient
	noff  []int     // offset of each level's nodes in a scratch array
	nodes int       // scratch length
}

func newHaar(c *chain) *haar {
	L := c.top()
	h := &haar{c: c, off: make([][]int32, L+1), a: make([]float64, c.n), b: make([]float64, c.n), atom: make([]int, c.n)}
	h.atom[0] = L
	k := 1
	for m := L; m >= 1; m-- {
		lv := &c.lv[m]
		h.off[m] = make([]int32, lv.part.groups)
		below := c.lv[m-1].size
		for g := range lv.part.groups {
			h.off[m][g] = int32(k)
			var S float64
			for t, ch := range c.children(m, g) {
				s := float64(below[ch])
				if t > 0 {
					norm := math.Sqrt(1/S + 1/s)
					h.a[k], h.b[k] = 1/(S*norm), 1/(s*norm)
					h.atom[k] = m - 1
					k++
				}
				S += s
			}
		}
	}
	h.noff = make([]int, L+2)
	for l := 1; l <= L; l++ {
		h.noff[l+1] = h.noff[l] + c.lv[l].part.groups
	}
	h.nodes = h.noff[L+1]
	return h
}

// level returns the node sums of level l in the scratch s (level 0 is x
// itself).
func (h *haar) level(s []float64, x []float64, l int) []float64 {
	if l == 0 {
		return x
	}
	return s[h.noff[l]:h.noff[l+1]]
}

// forward sets c to the coefficients of x; s is scratch of h.nodes.
func (h *haar) forward(x, c, s []float64) {
	ch := h.c
	L := ch.top()
	for l := 1; l <= L; l++ {
		cur, below := h.level(s, x, l), h.level(s, x, l-1)
		clear(cur)
		for g, p := range ch.lv[l-1].parent {
			cur[p] += below[g]
		}
	}
	c[0] = h.level(s, x, L)[0] / math.Sqrt(float64(ch.n))
	for m := L; m >= 1; m-- {
		below := h.level(s, x, m-1)
		for g, k0 := range h.off[m] {
			k := int(k0)
			var P float64
			for t, child := range ch.children(m, g) {
				v := below[child]
				if t > 0 {
					c[k] = h.a[k]*P - h.b[k]*v
					k++
				}
				P += v
			}
		}
	}
}

// inverse sets x to the function with coefficients c; s is scratch.
func (h *haar) inverse(c, x, s []float64) {
	ch := h.c
	L := ch.top()
	h.level(s, x, L)[0] = c[0] / math.Sqrt(float64(ch.n))
	for m := L; m >= 1; m-- {
		cur, below := h.level(s, x, m), h.level(s, x, m-1)
		for g, k0 := range h.off[m] {
			kids := ch.children(m, g)
			var acc float64
			for t := len(kids) - 1; t >= 0; t-- {
				d := acc
				if t > 0 {
					k := int(k0) + t - 1
					d -= h.b[k] * c[k]
					acc += h.a[k] * c[k]
				}
				below[kids[t]] = cur[g] + d
			}
		}
	}
}

// vector returns basis vector k explicitly.
func (h *haar) vector(k int) []float64 {
	c := make([]float64, h.c.n)
	c[k] = 1
	x := make([]float64, h.c.n)
	h.inverse(c, x, make([]float64, h.nodes))
	return x
}

// sumSq returns, per level l and node g of a level >= l, Σ |u|² over the
// nodes u of level l inside g: the diagonal of a level-l rollup's Gram on
// functions constant on g's children. Indexed [l][level][node].
func (h *haar) sumSq() [][][]float64 {
	ch := h.c
	L := ch.top()
	out := make([][][]float64, L+1)
	for l := range L + 1 {
		out[l] = make([][]float64, L+1)
		cur := make([]float64, ch.lv[l].part.groups)
		for g, s := range ch.lv[l].size {
			cur[g] = float64(s) * float64(s)
		}
		out[l][l] = cur
		for m := l + 1; m <= L; m++ {
			next := make([]float64, ch.lv[m].part.groups)
			for g, p := range ch.lv[m-1].parent {
				next[p] += cur[g]
			}
			out[l][m], cur = next, next
		}
	}
	return out
}

// partDiag returns u_k^T R^T R u_k for every basis vector u_k, R the
// rollup onto level l: zero on the contrasts of nodes at levels <= l, and
// on the contrasts of a node h at level m > l, with u = a on children
// c_1..c_{i-1} and -b on c_i, a² Σ_{t<i} Q(c_t) + b² Q(c_i) where Q(c) is
// the sum of the squared sizes of c's level-l nodes.
func (h *haar) partDiag(l int, sq [][][]float64) []float64 {
	ch := h.c
	L := ch.top()
	out := make([]float64, ch.n)
	out[0] = sq[l][L][0] / float64(ch.n)
	for m := L; m > l; m-- {
		q := sq[l][m-1]
		for g, k0 := range h.off[m] {
			k := int(k0)
			var P float64
			for t, child := range ch.children(m, g) {
				if t > 0 {
					out[k] = h.a[k]*h.a[k]*P + h.b[k]*h.b[k]*q[child]
					k++
				}
				P += q[child]
			}
		}
	}
	return out
}
