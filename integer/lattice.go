package integer

// Post-processing across several hierarchies (geography crossed with age
// bands, say): integer or non-negative tables at levels of two or more
// hierarchical dimensions that add up to each other on every common
// roll-up and keep the invariants.
//
// The tables come from one least-squares estimate, completed into one
// detail table x: every hierarchical dimension at the finest level any
// table or invariant uses, every flat dimension any of them uses. Along
// each hierarchical dimension h the levels that tables and invariants use
// (the root, "all of h", when some table sums h out) form a chain
// l_0 > l_1 > ... from coarse to fine. A point of the lattice picks one
// level of each chain; its table T(p) is the roll-up of x to those levels,
// with every flat dimension. The points are processed coarse to fine (by
// the sum of their chain positions), so that when p is processed the point
// one step coarser along each h, p - e_h, is done. T(p) must add up to
// each T(p - e_h) and to the invariants at p; these constraints split into
// blocks, one per choice of a parent node for each h not at its coarsest
// level, and within a block each T(p - e_h) is a margin on every block
// dimension but h. With at most two such margins (two hierarchies) the
// block is a transportation problem and RoundInteger finds an exact
// integer table; with more, or an invariant besides two parents, an exact
// one need not exist and the deviation left is reported. By induction every
// T(p) adds up exactly to every coarser point's table, so any two
// published tables (roll-ups of their points' tables over flat dimensions)
// agree on every common roll-up.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate"
	"github.com/knowdp/knowdp/noise"
)

// RoundLattice turns the completed estimate x of the detail view (row-major
// over detail's dimensions at its levels; it may have negative cells) into
// non-negative integer tables of every published view, top-down through
// the lattice of the hierarchies' levels (see the file comment), keeping
// every invariant of exact. Each published view must be a roll-up of
// detail; every view of exact must be too. Parents' blocks are rounded in
// parallel, each from its own generator split from r in a fixed order, so a
// seeded r gives the same tables however the work is scheduled.
func RoundLattice(ctx context.Context, s *domain.Schema, detail domain.View, x []float64, published []domain.View, exact map[domain.View][]float64, r *noise.Rand) (map[domain.View]IntegerResult, error) {
	if r == nil {
		return nil, errors.New("integer lattice: no random source")
	}
	return lattice(ctx, s, detail, x, published, exact, r)
}

// NonNegativeLattice is RoundLattice without the rounding: every published
// view's non-negative least-squares table, made top-down through the
// lattice, adding up to the others and keeping the invariants to
// floating-point rounding. It draws no randomness.
func NonNegativeLattice(ctx context.Context, s *domain.Schema, detail domain.View, x []float64, published []domain.View, exact map[domain.View][]float64) (map[domain.View]IntegerResult, error) {
	return lattice(ctx, s, detail, x, published, exact, nil)
}

// chain is one hierarchical dimension's levels used, coarsest first; root
// marks the level "absent" (the dimension summed out).
type chain struct {
	d      int
	levels []int // View.Up values, coarsest first; -1 for the root
}

const rootLevel = -1

func lattice(ctx context.Context, s *domain.Schema, detail domain.View, x []float64, published []domain.View, exact map[domain.View][]float64, r *noise.Rand) (map[domain.View]IntegerResult, error) {
	what := "integer lattice"
	if r == nil {
		what = "non-negative lattice"
	}
	if want := s.ViewSize(detail); len(x) != want {
		return nil, fmt.Errorf("%s: the detail table %s has %d cells, got %d values", what, s.FormatView(detail), want, len(x))
	}
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%s: cell %d of the detail table is %v", what, i, v)
		}
	}
	exactViews := make([]domain.View, 0, len(exact))
	for v := range exact {
		exactViews = append(exactViews, v)
	}
	slices.SortFunc(exactViews, func(a, b domain.View) int { return strings.Compare(s.FormatView(a), s.FormatView(b)) })
	for _, v := range slices.Concat(published, exactViews) {
		if !v.RollUpOf(detail) {
			return nil, fmt.Errorf("%s: %s is not a roll-up of the detail table %s", what, s.FormatView(v), s.FormatView(detail))
		}
	}
	for _, v := range exactViews {
		for i, c := range exact[v] {
			if !(c >= 0) || c != math.Round(c) {
				return nil, fmt.Errorf("%s: exact view %s: cell %d is %v, not a non-negative whole number", what, s.FormatView(v), i, c)
			}
		}
	}
	// The chains: every hierarchical dimension of the detail table, with
	// the levels the views use.
	var chains []chain
	flat := domain.Cuboid(0)
	for _, d := range detail.Dims.Dims() {
		if s.NumLevels(d) <= 1 {
			flat |= 1 << d
			continue
		}
		used := map[int]bool{}
		for _, v := range slices.Concat(published, exactViews) {
			if v.Dims.Has(d) {
				used[int(v.Up[d])] = true
			} else {
				used[rootLevel] = true
			}
		}
		c := chain{d: d}
		for l := range used {
			c.levels = append(c.levels, l)
		}
		// Coarsest first: the root, then higher View.Up.
		coarseness := func(l int) int {
			if l == rootLevel {
				return s.NumLevels(d)
			}
			return l
		}
		slices.SortFunc(c.levels, func(a, b int) int { return cmp.Compare(coarseness(b), coarseness(a)) })
		if len(c.levels) == 1 {
			flat |= 1 << d // one level: crossed like a flat dimension
			continue
		}
		chains = append(chains, c)
	}
	lat := &latticePlan{s: s, detail: detail, x: x, chains: chains, flat: flat, exact: exact, exactViews: exactViews}
	points := lat.points()
	tables := make(map[string][]float64, len(points))
	stats := make(map[string]*latticeStats, len(points))
	for _, p := range points {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var rp *noise.Rand
		if r != nil {
			rp = r.Split()
		}
		t, st, err := lat.solvePoint(ctx, p, tables, rp)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", what, s.FormatView(lat.view(p)), err)
		}
		tables[key(p)], stats[key(p)] = t, st
	}
	// Every published view from its point's table.
	counts := make(map[domain.View][]float64, len(published))
	point := make(map[domain.View][]int, len(published))
	for _, v := range published {
		p := lat.pointOf(v)
		pv := lat.view(p)
		c := tables[key(p)]
		if pv != v {
			var err error
			if c, err = s.RollUp(pv, c, v); err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
		}
		counts[v], point[v] = c, p
	}
	dev := map[domain.View]float64{}
	for i, a := range published {
		for _, b := range published[i+1:] {
			_, d, _, _, _, err := ivAgreement(s, a, counts[a], b, counts[b], false)
			if err != nil {
				return nil, err
			}
			dev[a], dev[b] = max(dev[a], d), max(dev[b], d)
		}
		for _, b := range exactViews {
			_, d, _, _, _, err := ivAgreement(s, a, counts[a], b, exact[b], false)
			if err != nil {
				return nil, err
			}
			dev[a] = max(dev[a], d)
		}
	}
	out := make(map[domain.View]IntegerResult, len(published))
	for _, v := range published {
		st := stats[key(point[v])]
		out[v] = IntegerResult{
			Counts:              counts[v],
			MaxDeviation:        dev[v],
			Exact:               dev[v] == 0,
			Method:              lat.method(point[v], st, r == nil),
			NonNegativeResidual: st.residual,
		}
	}
	return out, nil
}

// latticePlan is the walk's fixed data.
type latticePlan struct {
	s          *domain.Schema
	detail     domain.View
	x          []float64
	chains     []chain
	flat       domain.Cuboid
	exact      map[domain.View][]float64
	exactViews []domain.View
}

// latticeStats says how a point's table was made.
type latticeStats struct {
	blocks, margins, inexact int
	maxDev, residual         float64
}

func key(p []int) string { return fmt.Sprint(p) }

// points lists the lattice's points, coarse to fine.
func (l *latticePlan) points() [][]int {
	out := [][]int{make([]int, len(l.chains))}
	for i, c := range l.chains {
		var next [][]int
		for _, p := range out {
			for k := range c.levels {
				q := slices.Clone(p)
				q[i] = k
				next = append(next, q)
			}
		}
		out = next
	}
	sum := func(p []int) int {
		t := 0
		for _, k := range p {
			t += k
		}
		return t
	}
	slices.SortStableFunc(out, func(a, b []int) int { return cmp.Compare(sum(a), sum(b)) })
	return out
}

// view returns the table of point p: each chain at its level, every flat
// dimension.
func (l *latticePlan) view(p []int) domain.View {
	v := domain.View{Dims: l.flat}
	for _, d := range l.flat.Dims() {
		v.Up[d] = l.detail.Up[d]
	}
	for i, c := range l.chains {
		if lv := c.levels[p[i]]; lv != rootLevel {
			v.Dims |= 1 << c.d
			v.Up[c.d] = uint8(lv)
		}
	}
	return v
}

// pointOf returns the point whose table v is a roll-up of over flat
// dimensions only.
func (l *latticePlan) pointOf(v domain.View) []int {
	p := make([]int, len(l.chains))
	for i, c := range l.chains {
		lv := rootLevel
		if v.Dims.Has(c.d) {
			lv = int(v.Up[c.d])
		}
		p[i] = slices.Index(c.levels, lv)
	}
	return p
}

// solvePoint makes the table of point p from the detail estimate, its
// parents' tables and the invariants at p, block by block.
func (l *latticePlan) solvePoint(ctx context.Context, p []int, done map[string][]float64, r *noise.Rand) ([]float64, *latticeStats, error) {
	s := l.s
	v := l.view(p)
	est, err := s.RollUp(l.detail, l.x, v)
	if err != nil {
		return nil, nil, err
	}
	dims := v.Dims.Dims()
	sizes := make([]int, len(dims))
	for k, d := range dims {
		sizes[k] = s.LevelSize(d, int(v.Up[d]))
	}
	// The constraints: each parent (one step coarser along a chain not at
	// its coarsest level), then the invariants at this point.
	type margin struct {
		view   domain.View
		counts []float64
		chain  int
	}
	var margins []margin
	for i := range l.chains {
		if p[i] == 0 {
			continue
		}
		q := slices.Clone(p)
		q[i]--
		margins = append(margins, margin{view: l.view(q), counts: done[key(q)], chain: i})
	}
	// An invariant E constrains T(p) through its common roll-up with it,
	// m; where m is a roll-up of a parent's table, the parent's margin
	// implies it. Otherwise m stands at this point's levels on each of its
	// dimensions (a level of E coarser than p's along a chain is itself a
	// chain level, at or above the parent's), so it is a margin of blocks.
	for _, e := range l.exactViews {
		m := meet(e, v)
		implied := false
		for _, pm := range margins {
			implied = implied || m.RollUpOf(pm.view)
		}
		if implied {
			continue
		}
		c := l.exact[e]
		if m != e {
			var err error
			if c, err = s.RollUp(e, c, m); err != nil {
				return nil, nil, err
			}
		}
		margins = append(margins, margin{view: m, counts: c, chain: -1})
	}
	// Blocks: cells grouped by their parent node along every chain not at
	// its coarsest level.
	strides := make([]int, len(dims))
	st := 1
	for k := len(dims) - 1; k >= 0; k-- {
		strides[k] = st
		st *= sizes[k]
	}
	parentLevel := map[int]int{} // position in dims -> the parent's View.Up (rootLevel: none)
	for i, c := range l.chains {
		if p[i] == 0 {
			continue
		}
		k := slices.Index(dims, c.d)
		parentLevel[k] = c.levels[p[i]-1]
	}
	blockOf := func(cell int) string {
		var b strings.Builder
		for k := range dims {
			pl, ok := parentLevel[k]
			if !ok {
				continue
			}
			a := cell / strides[k] % sizes[k]
			par := -1
			if pl != rootLevel {
				par = s.LevelAncestor(dims[k], int(v.Up[dims[k]]), pl, a)
			}
			fmt.Fprintf(&b, "%d,", par)
		}
		return b.String()
	}
	blocks := map[string][]int{}
	var order []string
	for c := range est {
		b := blockOf(c)
		if _, ok := blocks[b]; !ok {
			order = append(order, b)
		}
		blocks[b] = append(blocks[b], c)
	}
	rands := make([]*noise.Rand, len(order))
	for i := range rands {
		if r != nil {
			rands[i] = r.Split()
		}
	}
	out := make([]float64, len(est))
	res := make([]struct {
		exact    bool
		maxDev   float64
		residual float64
	}, len(order))
	err = ivParallel(ctx, len(order), func(ctx context.Context, bi int) error {
		cells := blocks[order[bi]]
		// The block's own dimensions: per dimension of v, the distinct
		// coordinates its cells take, in order.
		coords := make([][]int, len(dims))
		for k := range dims {
			seen := map[int]bool{}
			for _, c := range cells {
				a := c / strides[k] % sizes[k]
				if !seen[a] {
					seen[a] = true
					coords[k] = append(coords[k], a)
				}
			}
			slices.Sort(coords[k])
		}
		tdims := make([]domain.Dimension, len(dims))
		for k := range dims {
			vals := make([]string, len(coords[k]))
			for j := range vals {
				vals[j] = fmt.Sprint(coords[k][j])
			}
			tdims[k] = domain.Dimension{Name: fmt.Sprintf("d%d", k), Values: vals}
		}
		if len(tdims) == 0 {
			tdims = []domain.Dimension{{Name: "total", Values: []string{"all"}}}
		}
		ts, err := domain.NewSchema(tdims)
		if err != nil {
			return err
		}
		xb := make([]float64, len(cells))
		for j, c := range cells {
			xb[j] = est[c]
		}
		var ms []Margin
		var inv []estimate.Invariant
		for _, m := range margins {
			// The margin keeps every block dimension the constraint's
			// view has at this point's level; a parent's chain dimension
			// is one node within the block, so it is dropped.
			var keep domain.Cuboid
			for k, d := range dims {
				if !m.view.Dims.Has(d) || (m.chain >= 0 && l.chains[m.chain].d == d) {
					continue
				}
				keep |= 1 << k
			}
			mv := m.view
			mdims := mv.Dims.Dims()
			msizes := make([]int, len(mdims))
			mstrides := make([]int, len(mdims))
			ms1 := 1
			for k := len(mdims) - 1; k >= 0; k-- {
				msizes[k] = s.LevelSize(mdims[k], int(mv.Up[mdims[k]]))
				mstrides[k] = ms1
				ms1 *= msizes[k]
			}
			kdims := keep.Dims()
			ksizes := make([]int, len(kdims))
			nt := 1
			for j, k := range kdims {
				ksizes[j] = len(coords[k])
				nt *= ksizes[j]
			}
			targets := make([]float64, nt)
			filled := make([]bool, nt)
			for _, c := range cells {
				// The margin cell within the block, and the constraint's cell.
				ti := 0
				for jj, k := range kdims {
					a := c / strides[k] % sizes[k]
					ti = ti*ksizes[jj] + slices.Index(coords[k], a)
				}
				if filled[ti] {
					continue
				}
				mi := 0
				for mk, d := range mdims {
					k := slices.Index(dims, d)
					a := c / strides[k] % sizes[k]
					mi += s.LevelAncestor(d, int(v.Up[d]), int(mv.Up[d]), a) * mstrides[mk]
				}
				targets[ti], filled[ti] = m.counts[mi], true
			}
			ms = append(ms, Margin{Dims: keep, Targets: targets})
			inv = append(inv, estimate.Invariant{Cuboid: keep, Counts: targets})
		}
		all := domain.Base(ts.NumDims())
		if r == nil {
			nn, err := estimate.SolveNonNegative(ctx, ts, all, xb, inv, estimate.NonNegative{Derived: true})
			if err != nil {
				return err
			}
			for j, c := range cells {
				out[c] = nn.Y[j]
			}
			res[bi].exact, res[bi].residual = true, nn.Residual
			return nil
		}
		ir, err := RoundInteger(ctx, ts, all, xb, ms, rands[bi])
		if err != nil {
			return err
		}
		for j, c := range cells {
			out[c] = ir.Counts[j]
		}
		res[bi].exact, res[bi].maxDev, res[bi].residual = ir.Exact, ir.MaxDeviation, ir.NonNegativeResidual
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	stats := &latticeStats{blocks: len(order), margins: len(margins)}
	for _, x := range res {
		if !x.exact {
			stats.inexact++
		}
		stats.maxDev = max(stats.maxDev, x.maxDev)
		stats.residual = max(stats.residual, x.residual)
	}
	return out, stats, nil
}

// method describes how the table of point p was made.
func (l *latticePlan) method(p []int, st *latticeStats, nonneg bool) string {
	s := l.s
	var names []string
	for _, c := range l.chains {
		names = append(names, s.Dim(c.d).Name)
	}
	step := "integer rounding"
	if nonneg {
		step = "non-negative least squares"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "top-down %s through the lattice of the levels of %s (coarse to fine, one level of one hierarchy at a time): the table %s made from the one least-squares estimate completed to %s, ",
		step, strings.Join(names, " and "), s.FormatView(l.view(p)), s.FormatView(l.detail))
	fmt.Fprintf(&b, "in %d block(s), one per parent node of each hierarchy, each constrained by %d margin(s): the tables one level coarser and the invariants at these levels", st.blocks, st.margins)
	if nonneg {
		return b.String()
	}
	b.WriteString("; each block rounded by unbiased controlled rounding (dependent rounding on a transportation network where it has at most two margins)")
	if st.inexact > 0 {
		fmt.Fprintf(&b, "; %d block(s) have three or more crossing margins and no exact integer table was found: largest deviation %v", st.inexact, st.maxDev)
	}
	return b.String()
}

// meet returns the finest view both a and b roll up to.
func meet(a, b domain.View) domain.View {
	m := domain.View{Dims: a.Dims & b.Dims}
	for _, d := range m.Dims.Dims() {
		m.Up[d] = max(a.Up[d], b.Up[d])
	}
	return m
}
