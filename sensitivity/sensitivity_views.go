package sensitivity

// Generic sensitivity under exact views at any level of hierarchical
// dimensions (docs/sensitivity.md, "Exact views at coarser levels", has
// the proofs). The neighbours are those of sensitivity.go: two tables with
// the same exact view counts that differ by a Graver element of the
// constraint matrix, one row per cell of each exact view (the base cells
// rolling up to it).
//
// Every level of one dimension is a partition of its leaves, and the
// levels form a chain (each is a coarsening of the next finer one), so two
// levels are ordered by their number of groups and equal when those are.
// A view is normalised to that partition per dimension (a level of one
// group is dropped, a level equal to a finer one is replaced by it), so
// that "v is a roll-up of w" is exactly "every cell of w lies in one cell
// of v". Then:
//
//   - Views that are roll-ups of another exact view are dropped, and a
//     release that is a roll-up of an exact view is public: 0.
//   - One exact view: the Graver basis is e_a - e_b for base cells a, b of
//     one cell of the view; 2 (L2 sqrt 2) for every release that is not
//     public.
//   - Two exact views V1, V2 (neither a roll-up of the other): per
//     dimension, A are those where V1 is strictly finer, B where V2 is, E
//     where they are equal. The constraint matrix is the incidence matrix
//     of a bipartite multigraph (V1 cells and V2 cells, a base cell an
//     edge), whose Graver basis is its set of cycles with alternating ±1.
//     Its components are the cells K of the common coarsening (per
//     dimension the coarser level), each a complete bipartite multigraph
//     between n1(K) = prod_{i in A} (groups of V1's level in K_i) V1 cells
//     and n2(K) likewise over B. n1 depends on K only through A and n2
//     only through B, so the longest cycle has
//     2 L = 2 min(N1, N2) edges, N1 = prod_{i in A} F_i with F_i the
//     largest number of V1-level groups inside one V2-level group of
//     dimension i (N2 likewise), and parallel edges only add 2-cycles.
//     The base's L1 sensitivity is 2L, its L2 sqrt(2L).
//   - A release R under two views: 2L (L1 and L2 squared) when R is at
//     least as fine as V1 on A and as V2 on B (distinct edges of a cycle
//     land in distinct cells of R); 2L in L1 when R is strictly finer than
//     V1 = V2 on a dimension of E (the positive edges can be put in one of
//     its groups and the negative ones in another). Otherwise cells of
//     each view that R does not split fall into classes (their groups of
//     R), and a cycle through l cells of each side cancels in at least
//     max(0, 2 a1 - l - g2, 2 a2 - l - g1) pairs, a the least largest
//     class and g the most free (split) cells among l cells of a side in
//     one component: the largest 2l - 2 * that over l (and 2 from two rows
//     of one cell when R splits one) bounds L1, and is exact when R is at
//     least as fine as one of the views on its side (a cycle attains it).
//     Squared L2 is at most m times L1, m the most edges of one sign a
//     cell of R can receive, and equal to L1 when m = 1. Where only a
//     bound is known and the domain is tiny (at most 24 base cells), the
//     brute force gives the exact value.
//   - Three or more: the brute force on tiny domains, else ErrNoClosedForm.
//
// Flat views (every dimension at its finest level) give exactly what
// GenericSensitivity and GenericL2Sensitivity give.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/knowdp/knowdp/domain"
)

// GenericSensitivityViews is GenericSensitivity for views: the L1 generic
// sensitivity of releasing view release when the views exact are public
// exactly, any of them at coarser levels of hierarchical dimensions. The
// value is exact for no or one exact view, and for two except where the
// Rule begins "upper bound" (a release coarser than each exact view on
// some dimension where that view is the finer); bounds, and three or more
// exact views, are brute-forced on domains of at most 24 base cells;
// otherwise three or more fail with an error wrapping ErrNoClosedForm.
// When every view is flat it returns what GenericSensitivity returns.
func GenericSensitivityViews(s *domain.Schema, exact []domain.View, release domain.View) (Sensitivity, error) {
	if s == nil {
		return Sensitivity{}, errors.New("generic sensitivity: nil schema")
	}
	if cs, rel, ok := flatViews(exact, release); ok {
		return GenericSensitivity(s, cs, rel)
	}
	q, rel, err := reduceViews(s, exact, release)
	if err != nil {
		return Sensitivity{}, err
	}
	if cs, rc, ok := flatViews(q, rel); ok {
		return GenericSensitivity(s, cs, rc)
	}
	f := viewClosedForm(s, q, rel)
	if f.err != nil {
		return Sensitivity{}, f.err
	}
	if f.ok && f.l1Exact {
		return Sensitivity{f.l1, f.l1Rule}, nil
	}
	what := viewsWhat(s, q, rel)
	w, berr := autoBruteViews(s, q, rel, what)
	switch {
	case berr == nil:
		return Sensitivity{w.Value, fmt.Sprintf("brute force: %s, Graver basis of %d elements", what, w.Basis)}, nil
	case !errors.Is(berr, ErrNoClosedForm):
		return Sensitivity{}, berr
	case f.ok:
		return Sensitivity{f.l1, f.l1Rule}, nil
	}
	return Sensitivity{}, berr
}

// GenericL2SensitivityViews is GenericL2Sensitivity for views: the L2
// generic sensitivity of releasing view release when the views exact are
// public exactly. It is exact for no or one exact view, for two when no
// cell of the release can receive two rows of one sign of a move and the
// L1 value is exact (the release at least as fine as each exact view on
// the dimensions where that view is the finer, among others), and by
// brute force on domains of at most 24 base cells; otherwise, for two
// exact views, an upper bound (the Rule begins "upper bound"); for three
// or more the error wraps ErrNoClosedForm. When every view is flat it
// returns what GenericL2Sensitivity returns.
func GenericL2SensitivityViews(s *domain.Schema, exact []domain.View, release domain.View) (L2Sensitivity, error) {
	if s == nil {
		return L2Sensitivity{}, errors.New("generic L2 sensitivity: nil schema")
	}
	if cs, rel, ok := flatViews(exact, release); ok {
		return GenericL2Sensitivity(s, cs, rel)
	}
	q, rel, err := reduceViews(s, exact, release)
	if err != nil {
		return L2Sensitivity{}, err
	}
	if cs, rc, ok := flatViews(q, rel); ok {
		return GenericL2Sensitivity(s, cs, rc)
	}
	f := viewClosedForm(s, q, rel)
	if f.err != nil {
		return L2Sensitivity{}, f.err
	}
	if f.ok && f.l2Exact {
		return l2(f.l2, f.l2Rule), nil
	}
	what := viewsWhat(s, q, rel)
	w, berr := autoBruteViews(s, q, rel, what)
	switch {
	case berr == nil:
		return l2(w.L2Squared, fmt.Sprintf("brute force: %s, Graver basis of %d elements", what, w.Basis)), nil
	case !errors.Is(berr, ErrNoClosedForm):
		return L2Sensitivity{}, berr
	case f.ok:
		// A bound: exact by a larger brute force where the domain is small
		// (bound_brute.go).
		if v, ok, err := bruteBoundViews(s, q, rel, what); err != nil || ok {
			return v, err
		}
		return l2(f.l2, f.l2Rule), nil
	}
	return L2Sensitivity{}, fmt.Errorf("L2 generic sensitivity: %w", berr)
}

// BruteForceViewSensitivity is BruteForceSensitivity for views: the L1 and
// squared L2 generic sensitivity of releasing view release when the views
// exact are public exactly, from the Graver basis of the constraints (one
// row per cell of each exact view: the base cells rolling up to it). The
// base cuboid has at most MaxGraverCells cells and the basis at most 2^18
// elements (beyond either the error wraps ErrTooLarge); it stops with
// ctx.Err() when ctx is done.
func BruteForceViewSensitivity(ctx context.Context, s *domain.Schema, exact []domain.View, release domain.View) (Witness, error) {
	if s == nil {
		return Witness{}, errors.New("brute force: nil schema")
	}
	if err := checkViews(s, exact, release); err != nil {
		return Witness{}, err
	}
	return bruteForceViews(ctx, s, exact, release, graverLimits{elements: defaultMaxGraver})
}

// flatViews returns the cuboids of the views when every one stands at its
// finest levels.
func flatViews(exact []domain.View, release domain.View) ([]domain.Cuboid, domain.Cuboid, bool) {
	if !release.Flat() {
		return nil, 0, false
	}
	cs := make([]domain.Cuboid, len(exact))
	for i, v := range exact {
		if !v.Flat() {
			return nil, 0, false
		}
		cs[i] = v.Dims
	}
	return cs, release.Dims, true
}

func checkViews(s *domain.Schema, exact []domain.View, release domain.View) error {
	if err := s.CheckView(release); err != nil {
		return fmt.Errorf("released view: %w", err)
	}
	for i, v := range exact {
		if err := s.CheckView(v); err != nil {
			return fmt.Errorf("exact view %d: %w", i+1, err)
		}
	}
	return nil
}

// reduceViews validates the views and returns the maximal normalised exact
// views (sorted) and the normalised release.
func reduceViews(s *domain.Schema, exact []domain.View, release domain.View) ([]domain.View, domain.View, error) {
	if err := checkViews(s, exact, release); err != nil {
		return nil, domain.View{}, err
	}
	var q []domain.View
	for _, v := range exact {
		q = append(q, normalView(s, v))
	}
	slices.SortFunc(q, compareViews)
	q = slices.Compact(q)
	var out []domain.View
	for i, v := range q {
		if !slices.ContainsFunc(q, func(w domain.View) bool { return w != q[i] && v.RollUpOf(w) }) {
			out = append(out, v)
		}
	}
	return out, normalView(s, release), nil
}

func compareViews(a, b domain.View) int {
	if a.Dims != b.Dims {
		if a.Dims < b.Dims {
			return -1
		}
		return 1
	}
	return slices.Compare(a.Up[:], b.Up[:])
}

// normalView is v with every dimension at the finest level that has the
// same groups, and without the dimensions whose level has one group: then
// v.RollUpOf(w) holds exactly when every cell of w lies in one cell of v.
// (The levels of a dimension form a chain of partitions of its leaves,
// each coarser than the next, so a coarser level with as many groups is
// the same partition.)
func normalView(s *domain.Schema, v domain.View) domain.View {
	var out domain.View
	for _, i := range v.Dims.Dims() {
		up := int(v.Up[i])
		n := s.LevelSize(i, up)
		if n <= 1 {
			continue
		}
		for up > 0 && s.LevelSize(i, up-1) == n {
			up--
		}
		out.Dims |= 1 << i
		out.Up[i] = uint8(up)
	}
	return out
}

// viewLevel is the level of dimension i in v, -1 when v does not have it
// (the level of one group).
func viewLevel(v domain.View, i int) int {
	if !v.Dims.Has(i) {
		return -1
	}
	return int(v.Up[i])
}

// levelGroups is the number of groups of level lv (-1: one group) of
// dimension i.
func levelGroups(s *domain.Schema, i, lv int) int {
	if lv < 0 {
		return 1
	}
	return s.LevelSize(i, lv)
}

// maxFanOut is the largest number of groups of level fine that lie in one
// group of level coarse (a coarsening of fine) of dimension i.
func maxFanOut(s *domain.Schema, i, fine, coarse int) int {
	seen := map[[2]int]bool{}
	count := map[int]int{}
	best := 1
	for leaf := range s.Size(i) {
		f, c := 0, 0
		if fine >= 0 {
			f = s.Ancestor(i, fine, leaf)
		}
		if coarse >= 0 {
			c = s.Ancestor(i, coarse, leaf)
		}
		if !seen[[2]int{f, c}] {
			seen[[2]int{f, c}] = true
			count[c]++
			best = max(best, count[c])
		}
	}
	return best
}

// viewForm is the closed form of the file comment for maximal normalised
// exact views q and a normalised release: L1 and squared L2 values, each
// exact or an upper bound. ok is false when there is none (three or more
// views).
type viewForm struct {
	err     error
	ok      bool
	l1      int
	l1Exact bool
	l1Rule  string
	l2      int
	l2Exact bool
	l2Rule  string
}

func exactForm(l1, l2 int, rule string) viewForm {
	return viewForm{ok: true, l1: l1, l1Exact: true, l1Rule: rule, l2: l2, l2Exact: true, l2Rule: rule}
}

func viewClosedForm(s *domain.Schema, q []domain.View, rel domain.View) viewForm {
	if len(q) == 0 {
		return exactForm(1, 1, "no background knowledge: neighbours add or remove one row")
	}
	for _, v := range q {
		if rel.RollUpOf(v) {
			return exactForm(0, 0, fmt.Sprintf("public: %s is a roll-up of exact view %s", s.FormatView(rel), s.FormatView(v)))
		}
	}
	switch len(q) {
	case 1:
		// rel is not a roll-up of q[0]: some cell of q[0] has base cells
		// in two cells of rel.
		return exactForm(2, 2, fmt.Sprintf("one exact view %s: moves of one row within a cell of it", s.FormatView(q[0])))
	case 2:
		return twoViews(s, q[0], q[1], rel)
	}
	return viewForm{}
}

// twoViews is the closed form for two exact views, neither a roll-up of the
// other, and a release that is a roll-up of neither.
func twoViews(s *domain.Schema, v1, v2, rel domain.View) viewForm {
	n1, n2 := 1, 1           // N1, N2
	m1, m2 := 1, 1           // the most edges of one sign in a cell of rel, per side
	inj1, inj2 := true, true // rel at least as fine as v1 on A, as v2 on B
	freeE := false           // rel strictly finer than v1 = v2 on a dimension of E
	split := false           // rel strictly finer than the common refinement somewhere
	var sideA, sideB []sideDim
	var join domain.View // the common coarsening
	for i := range s.NumDims() {
		p, q, r := viewLevel(v1, i), viewLevel(v2, i), viewLevel(rel, i)
		gp, gq, gr := levelGroups(s, i, p), levelGroups(s, i, q), levelGroups(s, i, r)
		split = split || gr > max(gp, gq)
		switch {
		case gp > gq: // A: v1 finer
			n1 = satMul(n1, maxFanOut(s, i, p, q))
			sideA = append(sideA, sideDim{i: i, fine: p, coarse: q, rel: r})
			if gr < gp {
				inj1 = false
				w := q // the finer of r and q
				if gr > gq {
					w = r
				}
				m1 = satMul(m1, maxFanOut(s, i, p, w))
			}
		case gq > gp: // B: v2 finer
			n2 = satMul(n2, maxFanOut(s, i, q, p))
			sideB = append(sideB, sideDim{i: i, fine: q, coarse: p, rel: r})
			if gr < gq {
				inj2 = false
				w := p
				if gr > gp {
					w = r
				}
				m2 = satMul(m2, maxFanOut(s, i, q, w))
			}
		default: // E
			freeE = freeE || gr > gp
		}
		c := p
		if gq < gp {
			c = q
		}
		if c >= 0 && levelGroups(s, i, c) > 1 {
			join.Dims |= 1 << i
			join.Up[i] = uint8(c)
		}
	}
	ell := min(n1, n2)
	pair := fmt.Sprintf("exact views %s and %s", s.FormatView(v1), s.FormatView(v2))
	if ell == satLimit {
		return viewForm{err: fmt.Errorf("%s: the generic sensitivity 2*min(%d, %d) is above %d", pair, n1, n2, 2*satLimit)}
	}
	cycles := fmt.Sprintf("alternating cycles within a cell of %s, 2*min(%d, %d)", s.FormatView(join), n1, n2)
	base := 2 * ell
	f := viewForm{ok: true, l1: base, l2: base}
	if inj1 && inj2 {
		f.l1Exact, f.l2Exact = true, true
		f.l1Rule = fmt.Sprintf("%s: %s; %s separates the cells of every cycle", pair, cycles, s.FormatView(rel))
		f.l2Rule = f.l1Rule
		return f
	}
	m := min(m1, m2, ell)
	switch {
	case freeE:
		f.l1Exact = true
		f.l1Rule = fmt.Sprintf("%s: %s; %s splits a cell of a dimension on which both stand at the same level, which separates the signs",
			pair, cycles, s.FormatView(rel))
	case ell > cycleWork:
		// Some component has more cells than sideStats would enumerate.
	default:
		a1, g1, ok1 := sideStats(s, sideA, ell, cycleWork)
		a2, g2, ok2 := sideStats(s, sideB, ell, cycleWork)
		if !ok1 || !ok2 {
			break
		}
		v, l, c := cycleBound(a1, g1, a2, g2, ell, split)
		f.l1 = v
		var why string
		switch {
		case l == 0:
			why = fmt.Sprintf("%s cancels every longer cycle; a cycle of two rows in one cell of both changes it by 2", s.FormatView(rel))
		default:
			why = fmt.Sprintf("in %s, a cycle through %d cells of each cancels in at least %d pairs: 2*%d - 2*%d", s.FormatView(rel), l, c, l, c)
		}
		if inj1 || inj2 {
			f.l1Exact = true
			f.l1Rule = fmt.Sprintf("%s: %s; %s (exact: %s separates the cells of one view)", pair, cycles, why, s.FormatView(rel))
		} else {
			f.l1Rule = fmt.Sprintf("upper bound: %s: %s; %s", pair, cycles, why)
		}
	}
	if f.l1Rule == "" {
		f.l1Rule = fmt.Sprintf("upper bound: %s: %s (the base's value; %s may cancel part of a cycle)", pair, cycles, s.FormatView(rel))
	}
	// Every entry of the release's change is at most m in absolute value,
	// so its squared L2 norm is at most m times its L1 norm, and equal to
	// it when m = 1.
	switch {
	case m == 1 && f.l1Exact:
		f.l2, f.l2Exact = f.l1, true
		f.l2Rule = fmt.Sprintf("%s; no two rows of one sign share a cell of %s, so the squared L2 norm is the L1 norm", f.l1Rule, s.FormatView(rel))
	case f.l1 < base:
		f.l2 = m * f.l1
		f.l2Rule = fmt.Sprintf("upper bound: at most %d rows of one sign in a cell of %s, times the L1 sensitivity %d (%s)", m, s.FormatView(rel), f.l1, f.l1Rule)
	default:
		f.l2 = satMul(base, m)
		f.l2Rule = fmt.Sprintf("upper bound: %s: %s, with at most %d rows of one sign in a cell of %s, 2*%d*%d",
			pair, cycles, m, s.FormatView(rel), ell, m)
	}
	return f
}

// cycleWork bounds the cells sideStats enumerates per side.
const cycleWork = 1 << 20

func viewsWhat(s *domain.Schema, q []domain.View, rel domain.View) string {
	names := make([]string, len(q))
	for i, v := range q {
		names[i] = s.FormatView(v)
	}
	return fmt.Sprintf("exact views %s, release %s", strings.Join(names, ", "), s.FormatView(rel))
}

// autoBruteViews is autoBrute for views.
func autoBruteViews(s *domain.Schema, exact []domain.View, release domain.View, what string) (Witness, error) {
	if s.Cells() < 0 || s.Cells() > autoBruteCells {
		return Witness{}, fmt.Errorf("%s on %d base cells (brute force stops at "+autoBruteMessage+"): %w",
			what, s.Cells(), autoBruteCells, autoBruteGraver, autoBruteWork, ErrNoClosedForm)
	}
	lim := graverLimits{elements: autoBruteGraver, work: autoBruteWork}
	w, err := bruteForceViews(context.Background(), s, exact, release, lim)
	if errors.Is(err, ErrTooLarge) {
		return Witness{}, fmt.Errorf("%s (brute force stops at "+autoBruteMessage+"): %w",
			what, autoBruteCells, autoBruteGraver, autoBruteWork, ErrNoClosedForm)
	}
	return w, err
}

// viewCellOf maps every base cell to its cell of view v (row-major over
// v's dimensions at their levels).
func viewCellOf(s *domain.Schema, v domain.View) []int {
	n := s.Cells()
	out := make([]int, n)
	dims := v.Dims.Dims()
	for a := range n {
		x := 0
		for _, i := range dims {
			up := int(v.Up[i])
			x = x*s.LevelSize(i, up) + s.Ancestor(i, up, a/s.Stride(i)%s.Size(i))
		}
		out[a] = x
	}
	return out
}

func bruteForceViews(ctx context.Context, s *domain.Schema, exact []domain.View, release domain.View, lim graverLimits) (Witness, error) {
	n := s.Cells()
	if n < 0 || n > MaxGraverCells {
		return Witness{}, fmt.Errorf("brute force: the base cuboid has more than %d cells: %w", MaxGraverCells, ErrTooLarge)
	}
	var rows [][]int
	for _, v := range exact {
		cell := viewCellOf(s, v)
		r := make([][]int, s.ViewSize(v))
		for a, x := range cell {
			r[x] = append(r[x], a)
		}
		rows = append(rows, r...)
	}
	basis, err := graverBasis(ctx, n, rows, lim)
	if err != nil {
		return Witness{}, err
	}
	return worstMove(basis, viewCellOf(s, release), s.ViewSize(release)), nil
}

// sideDim is a dimension on which one exact view (level fine) is strictly
// finer than the other (level coarse); rel is the release's level.
type sideDim struct{ i, fine, coarse, rel int }

// blockClasses describes the groups of level fine inside one group of
// level coarse: the sizes of the classes of the groups that the release
// does not split (grouped by their group at the release's level when that
// is coarser, else one class each), and how many groups the release
// splits (free: their rows can be put in different cells of the release).
type blockClasses struct {
	classes []int
	free    int
}

func sideBlocks(s *domain.Schema, d sideDim) []blockClasses {
	gf, gr := levelGroups(s, d.i, d.fine), levelGroups(s, d.i, d.rel)
	type group struct {
		coarse, rel int
		split       bool
	}
	groups := map[int]*group{} // by group of level fine
	var order []int
	anc := func(lv, leaf int) int {
		if lv < 0 {
			return 0
		}
		return s.Ancestor(d.i, lv, leaf)
	}
	for leaf := range s.Size(d.i) {
		f, r := anc(d.fine, leaf), anc(d.rel, leaf)
		g, ok := groups[f]
		if !ok {
			g = &group{coarse: anc(d.coarse, leaf), rel: r}
			groups[f] = g
			order = append(order, f)
		} else if g.rel != r {
			g.split = true
		}
	}
	out := make([]blockClasses, levelGroups(s, d.i, d.coarse))
	byRel := map[[2]int]int{} // (coarse block, rel group) -> class index
	for _, f := range order {
		g := groups[f]
		b := &out[g.coarse]
		switch {
		case gr > gf && g.split:
			b.free++
		case gr < gf:
			k, ok := byRel[[2]int{g.coarse, g.rel}]
			if !ok {
				k = len(b.classes)
				byRel[[2]int{g.coarse, g.rel}] = k
				b.classes = append(b.classes, 0)
			}
			b.classes[k]++
		default:
			b.classes = append(b.classes, 1)
		}
	}
	return out
}

// sideCells enumerates the components' cells of one side: for every
// combination of coarse blocks of dims, visit gets the number of the
// view's cells in it, the sizes of their classes (cells the release does
// not split, grouped by the release's cell on these dimensions) and how
// many are free (split by the release). It gives up (false) beyond work
// cells in all.
func sideCells(s *domain.Schema, dims []sideDim, work int, visit func(n int, classes []int, free int)) bool {
	per := make([][]blockClasses, len(dims))
	for k, d := range dims {
		per[k] = sideBlocks(s, d)
	}
	spent := 0
	var rec func(k, n, nonfree int, classes []int) bool
	rec = func(k, n, nonfree int, classes []int) bool {
		if k == len(dims) {
			spent += n
			if spent > work {
				return false
			}
			visit(n, classes, n-nonfree)
			return true
		}
		for _, b := range per[k] {
			t := b.free
			var cs []int
			for _, c := range b.classes {
				t += c
				for _, x := range classes {
					cs = append(cs, x*c)
				}
			}
			if n*t > work || !rec(k+1, n*t, nonfree*(t-b.free), cs) {
				return false
			}
		}
		return true
	}
	return rec(0, 1, 1, []int{1})
}

// sideStats summarises one side's cells over the components (see
// docs/sensitivity.md): astar[l] is the least possible largest class among
// l cells of the side in one component, free[l] the most free cells among
// l cells in one component (-1 when no component has l cells), for
// l <= ell. It gives up (false) when the enumeration exceeds work.
func sideStats(s *domain.Schema, dims []sideDim, ell, work int) (astar, free []int, ok bool) {
	astar = make([]int, ell+1)
	free = make([]int, ell+1)
	for l := range astar {
		astar[l], free[l] = -1, -1
	}
	ok = sideCells(s, dims, work, func(n int, classes []int, nfree int) {
		slices.Sort(classes)
		// capacity(M) = nfree + sum over classes of min(c, M): the most
		// cells with no class above M. The least largest class among l
		// cells is the least M with capacity(M) >= l.
		capPrev, k := 0, 0
		for m := 1; capPrev < min(n, ell); m++ {
			for k < len(classes) && classes[k] < m {
				k++
			}
			capM := capPrev + len(classes) - k
			if m == 1 {
				capM += nfree
			}
			for l := capPrev + 1; l <= min(capM, ell); l++ {
				if astar[l] < 0 || m < astar[l] {
					astar[l] = m
				}
			}
			capPrev = capM
		}
		for l := 1; l <= min(n, ell); l++ {
			free[l] = max(free[l], min(l, nfree))
		}
	})
	return astar, free, ok
}

// cycleBound is the largest change of a release over the cycles of two
// exact views (docs/sensitivity.md): for each length 2l, at least
// max(0, 2a1 - l - g2, 2a2 - l - g1) pairs cancel, a1 and a2 the least
// largest classes and g1, g2 the most free cells of each side; the cycles
// of two rows give 2 when split. It is the exact value when one side's
// classes are single cells (a <= 1), else an upper bound.
func cycleBound(a1, g1, a2, g2 []int, ell int, split bool) (value, bestL, cancel int) {
	if split {
		value = 2
	}
	for l := 2; l <= ell; l++ {
		if a1[l] < 0 || a2[l] < 0 {
			continue
		}
		c := max(0, 2*a1[l]-l-g2[l], 2*a2[l]-l-g1[l])
		if v := 2*l - 2*c; v > value {
			value, bestL, cancel = v, l, c
		}
	}
	return value, bestL, cancel
}
