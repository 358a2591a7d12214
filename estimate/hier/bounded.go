package hier

import (
	"container/heap"
	"math"
	"slices"
)

// The bounded law. For a cell of node i, the adjoint of the tree estimator
// is non-zero on the chain of i's ancestors and, below it, flows into each
// subtree hanging off the chain (the children of the chain's nodes) only
// through the upward pass: the coefficient of the observation of a node k
// in the subtree of c is zb_c ∂z_c/∂y_k, where zb_c is the adjoint reaching
// c. So a subtree is a block whose error variance is known without
// expanding it, (Σ_T scale_T² π_T zb_{T,c}² Var z_{T,c}), and whose largest
// coefficient is bounded by Σ_T |zb_{T,c}| max_k |∂z_{T,c}/∂y_k| times the
// largest weight of a measurement. Expanding blocks best-first by that
// bound yields the largest coefficients first; the blocks left unexpanded
// contribute their variance to Law.Dropped.

// lawItem is a node of the hierarchy with the adjoint reaching it for every
// residual of the view; a block (recurse) stands for its whole subtree, a
// chain node for its own observation only. A block stands for mult
// siblings of the same shape, whose terms are alike. The children of a
// chain node off the chain share one adjoint: they start as one group,
// whose variance and bound come from sums and maxima over the node's
// children made by the solve, and become blocks only if the group is
// expanded.
type lawItem struct {
	node    int       // internal global index
	level   int       // its level
	zb      []float64 // per residual of the view
	recurse bool
	bound   float64
	mult    int64 // the number of nodes of the same shape and adjoint it stands for
	// A group stands for the children of node off the chain (skip, the
	// chain's child, or -1): it has no terms of its own, and expands into
	// one block per shape of them.
	group bool
	skip  int
}

type itemHeap []*lawItem

func (h itemHeap) Len() int           { return len(h) }
func (h itemHeap) Less(i, j int) bool { return h[i].bound > h[j].bound }
func (h itemHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *itemHeap) Push(x any)        { *h = append(*h, x.(*lawItem)) }
func (h *itemHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// viewLaw holds what the laws of one view need per residual T ⊆ S.
type viewLaw struct {
	s     *Solution
	v     View
	ts    []Flat
	res   []*resid
	scale []float64 // 1/Π_{d∈S\T} n_d
	pi    []float64 // Π_{d∈T} (1 - 1/n_d): the variance of a centred column cell
	rho   []float64 // Π_{d∈T} max(1/n_d, 1 - 1/n_d): the largest centring coefficient
	amax  []float64 // the largest weight of a noisy measurement in a combined observation
	sdmax float64   // the largest standard deviation of a noisy measurement's cell
	meas  [][]lawMeas
}

// lawMeas is a noisy measurement seen from a view: its common dimensions,
// the pattern of each residual within them and its weight.
type lawMeas struct {
	j      int
	common []int
	pat    []int     // per residual of the view
	coef   []float64 // per residual: α_{T,j} scale_T (0 when T ⊄ S_j)
	count  []int64   // per pattern
}

func (s *Solution) viewLaw(q int) *viewLaw {
	p := s.p
	v := s.queries[q]
	sv := p.nontrivial(v.Flat)
	vl := &viewLaw{s: s, v: v, meas: make([][]lawMeas, p.Hierarchy.Levels())}
	for t := range subsets(sv) {
		r := s.res[t]
		vl.ts = append(vl.ts, t)
		vl.res = append(vl.res, r)
		vl.scale = append(vl.scale, 1/float64(p.cells(v.Flat&^t)))
		pi, rho := 1.0, 1.0
		for _, n := range r.plan.sizes {
			pi *= 1 - 1/float64(n)
			rho *= max(1/float64(n), 1-1/float64(n))
		}
		vl.pi = append(vl.pi, pi)
		vl.rho = append(vl.rho, rho)
		var am float64
		for j, m := range p.Measurements {
			if m.Variance != 0 {
				am = max(am, r.plan.alpha[j])
			}
		}
		vl.amax = append(vl.amax, am)
	}
	for j, m := range p.Measurements {
		if m.Variance == 0 {
			continue
		}
		vl.sdmax = max(vl.sdmax, math.Sqrt(m.Variance))
		lm := lawMeas{j: j, common: (sv & m.Flat).dims()}
		used := false
		for ti, t := range vl.ts {
			pat := 0
			for b, d := range lm.common {
				if t.Has(d) {
					pat |= 1 << b
				}
			}
			c := vl.res[ti].plan.alpha[j] * vl.scale[ti]
			used = used || c != 0
			lm.pat = append(lm.pat, pat)
			lm.coef = append(lm.coef, c)
		}
		if !used {
			continue
		}
		outside := int64(p.cells(m.Flat &^ sv))
		for pat := range 1 << len(lm.common) {
			n := outside
			for b, d := range lm.common {
				if pat&(1<<b) == 0 {
					n *= int64(p.FlatSizes[d] - 1)
				}
			}
			lm.count = append(lm.count, n)
		}
		vl.meas[m.Level] = append(vl.meas[m.Level], lm)
	}
	return vl
}

// items returns the chain of node gi (internal global index at the view's
// level) and the blocks hanging off it, with the adjoint reaching each.
func (vl *viewLaw) items(gi int) []*lawItem {
	h := vl.s.p.Hierarchy
	L := h.RootLevel()
	nt := len(vl.ts)
	// The chain, from the node up to the root, and the level of each.
	chain := make([]int, 1, L+1-vl.v.Level)
	levels := make([]int, 1, L+1-vl.v.Level)
	chain[0], levels[0] = gi, vl.v.Level
	for k := vl.v.Level; k < L; k++ {
		par := h.parent[k][h.ext[k][chain[len(chain)-1]-h.off[k]]]
		chain = append(chain, h.off[k+1]+int(h.pos[k+1][par]))
		levels = append(levels, k+1)
	}
	// The chain's nodes, and for each chain node above the leaves the
	// group of its children off the chain (all children of a node get the
	// same adjoint): one allocation for the items and one for their
	// adjoints.
	n := 2 * len(chain)
	slab := make([]lawItem, 0, n)
	zbs := make([]float64, n*nt)
	item := func(it lawItem) *lawItem {
		i := len(slab)
		it.zb = zbs[i*nt : (i+1)*nt : (i+1)*nt]
		slab = append(slab, it)
		return &slab[i]
	}
	out := make([]*lawItem, 0, n)
	chainItem := make([]*lawItem, len(chain))
	group := make([]*lawItem, len(chain))
	for t := range chain {
		chainItem[t] = item(lawItem{node: chain[t], level: levels[t], mult: 1})
		out = append(out, chainItem[t])
	}
	for t := range chain {
		if levels[t] == 0 {
			continue
		}
		skip := -1
		if t > 0 {
			skip = chain[t-1]
		}
		group[t] = item(lawItem{node: chain[t], level: levels[t], group: true, skip: skip, mult: 1})
		out = append(out, group[t])
	}
	fb := make([]float64, len(chain))
	zd := make([]float64, len(chain)) // the downward adjoint of chain nodes' z
	for ti, r := range vl.res {
		// Reverse of the downward pass, up the chain.
		clear(zd)
		fb[0] = 1
		for t := 1; t < len(chain); t++ {
			sg := r.g[chain[t-1]] * fb[t-1]
			fb[t] = sg
			zd[t-1] += fb[t-1] - sg
			group[t].zb[ti] = -sg
		}
		top := len(chain) - 1
		zd[top] += fb[top]
		// Reverse of the upward pass, down the chain.
		var above float64 // b_parent zb_parent
		for t := top; t >= 0; t-- {
			zb := zd[t] + above
			chainItem[t].zb[ti] = zb
			bz := r.b[chain[t]] * zb
			if group[t] != nil {
				group[t].zb[ti] += bz
			}
			above = bz
		}
	}
	for _, it := range out {
		it.bound = vl.bound(it)
	}
	return out
}

// bound bounds |K| over the terms of an item: for a group, over the
// terms of every child of its node (the one on the chain included, which
// only makes the bound larger).
func (vl *viewLaw) bound(it *lawItem) float64 {
	var b float64
	for ti, r := range vl.res {
		u := math.Abs(r.a[it.node])
		switch {
		case it.group:
			u = r.cumax[it.node]
		case it.recurse:
			u = r.umax[it.node]
		}
		b += math.Abs(it.zb[ti]) * u * vl.amax[ti] * vl.scale[ti] * vl.rho[ti]
	}
	return b
}

// variance returns the variance of the error terms of an item.
func (vl *viewLaw) variance(it *lawItem) float64 {
	var v float64
	for ti, r := range vl.res {
		var vz float64
		switch {
		case it.group:
			// Every child's subtree but the chain's: the children's sum
			// less that one.
			vz = r.cvz[it.node]
			if it.skip >= 0 {
				vz = max(0, vz-r.vz[it.skip])
			}
		case it.recurse:
			vz = r.vz[it.node]
		default:
			if s2 := r.plan.sigma2[it.level]; r.a[it.node] != 0 && s2 > 0 && !math.IsInf(s2, 1) {
				vz = r.a[it.node] * r.a[it.node] * s2
			}
		}
		sc := vl.scale[ti] * it.zb[ti]
		v += sc * sc * vl.pi[ti] * vz
	}
	return v * float64(it.mult)
}

// expand appends the terms of an item's own node to terms and returns the
// blocks of its children when the item is a block.
func (vl *viewLaw) expand(it *lawItem, terms []Term, g []float64) ([]Term, []*lawItem, []float64) {
	h := vl.s.p.Hierarchy
	if it.group {
		return terms, vl.groupBlocks(it), g
	}
	for _, lm := range vl.meas[it.level] {
		P := 1 << len(lm.common)
		g = slices.Grow(g[:0], P)[:P]
		clear(g)
		nz := false
		for ti, r := range vl.res {
			if c := lm.coef[ti]; c != 0 {
				l := r.a[it.node] * it.zb[ti]
				g[lm.pat[ti]] = l * c
				nz = nz || l != 0
			}
		}
		if !nz {
			continue
		}
		butterfly(g, lm.common, vl.s.p.FlatSizes)
		for pat, k := range g {
			if k != 0 && lm.count[pat] != 0 {
				terms = append(terms, Term{Measurement: lm.j, Coef: k, Count: lm.count[pat] * it.mult})
			}
		}
	}
	if !it.recurse || it.level == 0 {
		return terms, nil, g
	}
	k := it.level
	var kids []*lawItem
	reaches := false
	for ti, r := range vl.res {
		reaches = reaches || r.b[it.node]*it.zb[ti] != 0
	}
	if !reaches {
		return terms, nil, g
	}
	cls := h.shapes()
	g0, g1 := int(cls.gstart[it.node]), int(cls.gstart[it.node+1])
	nt := len(vl.res)
	// One allocation for the children and one for their adjoints.
	slab := make([]lawItem, g1-g0)
	zbs := make([]float64, (g1-g0)*nt)
	kids = make([]*lawItem, g1-g0)
	for i := range slab {
		kid := &slab[i]
		*kid = lawItem{node: int(cls.grep[g0+i]), level: k - 1, zb: zbs[i*nt : (i+1)*nt], recurse: true, mult: it.mult * int64(cls.gmult[g0+i])}
		for ti, r := range vl.res {
			kid.zb[ti] = r.b[it.node] * it.zb[ti]
		}
		kid.bound = vl.bound(kid)
		kids[i] = kid
	}
	return terms, kids, g
}

// groupBlocks returns the blocks of a group: the children of its node off
// the chain, one block per shape (those of one shape have the same terms),
// each with the group's adjoint.
func (vl *viewLaw) groupBlocks(it *lawItem) []*lawItem {
	cls := vl.s.p.Hierarchy.shapes()
	g0, g1 := int(cls.gstart[it.node]), int(cls.gstart[it.node+1])
	slab := make([]lawItem, 0, g1-g0)
	kids := make([]*lawItem, 0, g1-g0)
	for x := g0; x < g1; x++ {
		rep, m := int(cls.grep[x]), int64(cls.gmult[x])
		if it.skip >= 0 && cls.shape[rep] == cls.shape[it.skip] {
			m--
		}
		if m == 0 {
			continue
		}
		slab = append(slab, lawItem{node: rep, level: it.level - 1, zb: it.zb, recurse: true, mult: it.mult * m})
		kid := &slab[len(slab)-1]
		kid.bound = vl.bound(kid)
		kids = append(kids, kid)
	}
	return kids
}

// butterfly turns g[T] (T a pattern over common) into
// K[p] = Σ_T g[T] Π_{d∈T} (δ_d(p) - 1/n_d).
func butterfly(g []float64, common []int, sizes []int) {
	for b, d := range common {
		inv := 1 / float64(sizes[d])
		bit := 1 << b
		for pat := range g {
			if pat&bit != 0 {
				continue
			}
			a0, a1 := g[pat], g[pat|bit]
			g[pat], g[pat|bit] = a0-a1*inv, a0+a1*(1-inv)
		}
	}
}

// Variance returns the variance of the error of every cell of node `node`
// of the q-th query's table. It costs O(Σ_{T⊆S} depth × fan-out) — the
// chain of the node's ancestors and their children — not a pass over the
// hierarchy.
func (s *Solution) Variance(q, node int) (float64, error) {
	if err := s.checkCell(q, node); err != nil {
		return 0, err
	}
	return s.viewLaw(q).nodeVariance(node), nil
}

// nodeVariance is Variance for a node of the view's level.
func (vl *viewLaw) nodeVariance(node int) float64 {
	var total float64
	for _, it := range vl.items(vl.s.p.Hierarchy.global(vl.v.Level, node)) {
		total += vl.variance(it)
	}
	return total
}

// blockLaw computes a law by expanding the blocks: all of them when
// maxTerms <= 0, otherwise best-first by bound, returning at most maxTerms
// terms: the largest |K|, each with its full count.
func (s *Solution) blockLaw(q, node, maxTerms int) (Law, error) {
	if err := s.checkCell(q, node); err != nil {
		return Law{}, err
	}
	return s.viewLaw(q).law(node, maxTerms), nil
}

// law is blockLaw for a node of the view's level.
func (vl *viewLaw) law(node, maxTerms int) Law {
	s := vl.s
	var law Law
	items := vl.items(s.p.Hierarchy.global(vl.v.Level, node))
	for _, it := range items {
		law.Variance += vl.variance(it)
	}
	var terms []Term
	var g []float64
	if maxTerms <= 0 {
		for len(items) > 0 {
			it := items[len(items)-1]
			items = items[:len(items)-1]
			var kids []*lawItem
			terms, kids, g = vl.expand(it, terms, g)
			items = append(items, kids...)
		}
		law.Terms, _, _ = mergeTerms(terms, s.p)
		return law
	}
	hp := itemHeap(items)
	heap.Init(&hp)
	// top holds the maxTerms largest distinct terms found so far, by |K|
	// (a min-heap), each identified by its measurement and K rounded to
	// about 9 significant digits. Expansion stops when maxTerms distinct
	// terms are strictly larger than every unexpanded block's bound, so
	// that each kept term has its full count. A term is compared with top
	// alone: one no larger than top's smallest never enters it later
	// (top's smallest only grows), and neither does its copy.
	top := &termHeap{}
	var stop float64   // the largest bound of an unexpanded block
	var pruned float64 // the largest standard deviation of a term left out on the way
	for hp.Len() > 0 {
		it := hp[0]
		if top.Len() >= maxTerms && (*top)[0].a > it.bound*(1+1e-9) {
			stop = it.bound
			break
		}
		heap.Pop(&hp)
		n0 := len(terms)
		var kids []*lawItem
		terms, kids, g = vl.expand(it, terms, g)
		kept := terms[:n0]
		for _, t := range terms[n0:] {
			e := topTerm{j: t.Measurement, k: roundBits(t.Coef), a: math.Abs(t.Coef)}
			if top.Len() >= maxTerms && e.a*(1+1e-9) < (*top)[0].a {
				// Smaller than every term that can be kept, and than
				// their copies: left out now.
				pruned = max(pruned, e.a*math.Sqrt(s.p.Measurements[t.Measurement].Variance))
				continue
			}
			kept = append(kept, t)
			if top.Len() >= maxTerms && e.a <= (*top)[0].a {
				continue
			}
			if slices.ContainsFunc(*top, func(x topTerm) bool { return x.j == e.j && x.k == e.k }) {
				continue
			}
			if top.Len() < maxTerms {
				heap.Push(top, e)
			} else {
				(*top)[0] = e
				heap.Fix(top, 0)
			}
		}
		terms = kept
		for _, k := range kids {
			heap.Push(&hp, k)
		}
	}
	merged, _, noiseMax := mergeTerms(terms, s.p)
	// Every noise variable left out: those of the unexpanded blocks (each
	// |K| at most stop), rounding noise, and the terms cut below.
	law.DroppedMax = max(stop*vl.sdmax, noiseMax, pruned)
	cut := func(t Term) {
		law.DroppedMax = max(law.DroppedMax, math.Abs(t.Coef)*math.Sqrt(s.p.Measurements[t.Measurement].Variance))
	}
	if len(merged) > maxTerms {
		for _, t := range merged[maxTerms:] {
			cut(t)
		}
		merged = merged[:maxTerms]
	}
	// A term no larger than an unexpanded block's bound may miss part of
	// its count (rare: only when coefficients within 1e-12 of each other
	// were counted as distinct above); leave it out.
	for len(merged) > 0 && math.Abs(merged[len(merged)-1].Coef) <= stop*(1+1e-9) {
		cut(merged[len(merged)-1])
		merged = merged[:len(merged)-1]
	}
	var kept float64
	for _, t := range merged {
		kept += t.Coef * t.Coef * float64(t.Count) * s.p.Measurements[t.Measurement].Variance
	}
	law.Dropped = max(0, law.Variance-kept)
	if law.Dropped == 0 {
		law.DroppedMax = 0
	}
	law.Terms = merged
	return law
}

// topTerm is a distinct term of a bounded law: its measurement, its rounded
// coefficient and |K|.
type topTerm struct {
	j int
	k uint64
	a float64
}

type termHeap []topTerm

func (h termHeap) Len() int           { return len(h) }
func (h termHeap) Less(i, j int) bool { return h[i].a < h[j].a }
func (h termHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *termHeap) Push(x any)        { *h = append(*h, x.(topTerm)) }
func (h *termHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// roundBits rounds x to 30 bits of mantissa (about 9 significant digits),
// as an identity for coefficients equal up to rounding.
func roundBits(x float64) uint64 {
	if x == 0 {
		return 0 // and -0
	}
	return (math.Float64bits(x) + 1<<21) >> 22
}
