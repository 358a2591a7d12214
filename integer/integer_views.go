package integer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate"
	"github.com/knowdp/knowdp/internal/tensor"
	"github.com/knowdp/knowdp/noise"
)

// Integer tables for views along a hierarchy, top-down.
//
// The published views and the invariants are grouped by the level at which
// they hold the one hierarchical dimension h (the views without h form the
// root level). Each level is rounded as one detail table D = (h at the
// level, G), G a set of flat dimensions that every view of the level rolls
// up from; every published view of the level is then the roll-up of the
// integer D, so it adds up exactly to every other view of the level. The
// coarsest level is rounded as one table; below it, the children of each
// node of the level above are rounded on their own, as a small flat table
// whose margins are the parent's integer counts (summed over the children)
// and the invariants (per child). Those two margins make a transportation
// problem (totally unimodular), so an exact integer table always exists and
// RoundInteger finds one by unbiased dependent rounding. The children of
// different parents share no cell and no margin: they are rounded in
// parallel. See docs/integer.md, "Views along a hierarchy".

// RoundViews turns mutually consistent real estimates of views into
// non-negative integer tables, keyed as tables is, such that
//
//   - every published view equals, exactly, the roll-up of every published
//     view it is a roll-up of (children add up to their parents), and more
//     generally any two published views agree exactly on the cells they
//     have in common;
//   - every invariant holds exactly: each published view agrees with each
//     exact view on their common roll-up;
//   - rounding is unbiased: the expected integer table is the non-negative
//     estimate (the input itself when it is non-negative), wherever every
//     problem has at most two maximal margins (see below) and the
//     estimate's children could be moved linearly onto their parent's
//     integer counts without a negative cell; the result's Method says
//     where either failed.
//
// tables holds the estimates of the published views (row-major over each
// view's dimensions at its levels), as one least-squares estimate gives
// them: they must agree with each other and with the invariants on every
// common roll-up (to 1e-6 relative; otherwise RoundViews refuses, naming
// the views and the cell). They may have negative cells. exact holds the
// invariants: views whose counts are public, non-negative whole numbers;
// an exact view may also be published. At most one dimension may stand
// at a coarser level than its values in these views: that is the
// hierarchy h the rounding follows (when none does, h is the one
// hierarchical dimension the views use, if there is exactly one, else there
// is a single level).
//
// The levels of h that carry views are processed from the root down. A
// level's detail view D = (h at the level, G) has as flat dimensions G
// those of the level's published views, plus those that views above and
// below it share with the level's exact views or with each other (the
// running-intersection property, without which roll-ups across levels would
// not be kept). D's estimate is the roll-up of a published view (D itself
// or a finer one); if there is none, RoundViews refuses and names the view
// to add to the workload. If D is a roll-up of an exact view it is that
// view's roll-up, without rounding. Otherwise, per parent node of the level
// above (one problem for the coarsest level), the children's estimate is
// made non-negative (least squares, as in RoundInteger) subject to the
// parent's non-negative estimate and the invariants, moved onto the
// parent's integer counts by the change of least Σ d²/z that keeps every
// invariant (linear in the parent's rounding error, so of mean zero; cells
// at 0 stay at 0; if it would make a cell negative, the least-squares step
// of RoundInteger takes its place, and Method counts those problems), and
// rounded with RoundInteger under
// the margins (a) the parent's integer table on the flat dimensions it
// shares with D and (b) every invariant at or below the level, per child.
// Parents are processed by GOMAXPROCS workers; each gets its own generator,
// split from r in a fixed order, so a seeded r gives the same tables however
// the work is scheduled.
//
// For each view, Counts are the integer table; Exact reports that every
// relation above holds for the view, MaxDeviation is the largest absolute
// difference found in any of them (checked on the final tables, never
// assumed); Method says how the view's table was made, including how many
// per-parent problems had three or more crossing margins (then an exact
// table need not exist and RoundInteger's local search leaves the
// deviation reported here); NonNegativeResidual is the largest KKT residual
// of the non-negative step. Deviations is nil.
//
// Errors are for invalid input only (sizes, levels, non-finite values,
// invariants that disagree, estimates that disagree, a level that cannot
// be rounded as one table), and for a cancelled context.
func RoundViews(ctx context.Context, s *domain.Schema, tables map[domain.View][]float64, exact map[domain.View][]float64, r *noise.Rand) (map[domain.View]IntegerResult, error) {
	if r == nil {
		return nil, errors.New("integer views: no random source")
	}
	return topDown(ctx, s, tables, exact, r, false)
}

// NonNegativeViews is RoundViews without the rounding: it returns, for every
// published view, the non-negative least-squares table made level by level
// from the root down (each parent's children made non-negative subject to
// the parent's non-negative table and to the invariants), so that every
// published view adds up to every view it rolls up to, and keeps every
// invariant, to floating-point rounding (MaxDeviation reports what is
// left). It draws no randomness.
func NonNegativeViews(ctx context.Context, s *domain.Schema, tables map[domain.View][]float64, exact map[domain.View][]float64) (map[domain.View]IntegerResult, error) {
	return topDown(ctx, s, tables, exact, nil, true)
}

// topDown is RoundViews, or NonNegativeViews when nonneg is set.
func topDown(ctx context.Context, s *domain.Schema, tables map[domain.View][]float64, exact map[domain.View][]float64, r *noise.Rand, nonneg bool) (map[domain.View]IntegerResult, error) {
	what := "integer views"
	if nonneg {
		what = "non-negative views"
	}
	in, err := ivCollect(s, tables, exact)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if len(in.pub) == 0 {
		return map[domain.View]IntegerResult{}, nil
	}
	p, err := ivPlanViews(s, in)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	p.nonneg = nonneg
	if err := ivCheckAgreement(ctx, s, in); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := p.prepare(s, in); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	for i := range p.levels {
		if err := p.roundLevel(ctx, s, i, r); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
	}
	return p.results(ctx, s, in)
}

// ivInputs are RoundViews's arguments, validated, with normalised views.
type ivInputs struct {
	pub, exact []domain.View               // sorted by FormatView
	x, e       map[domain.View][]float64   // estimates; exact counts
	key        map[domain.View]domain.View // normalised published view -> caller's key
}

func ivCollect(s *domain.Schema, tables, exact map[domain.View][]float64) (*ivInputs, error) {
	in := &ivInputs{x: map[domain.View][]float64{}, e: map[domain.View][]float64{}, key: map[domain.View]domain.View{}}
	for v, x := range tables {
		if err := s.CheckView(v); err != nil {
			return nil, err
		}
		n := v.Normal()
		if _, dup := in.x[n]; dup {
			return nil, fmt.Errorf("view %s is given twice", s.FormatView(n))
		}
		if want := s.ViewSize(n); len(x) != want {
			return nil, fmt.Errorf("view %s has %d cells, got %d values", s.FormatView(n), want, len(x))
		}
		for k, c := range x {
			if math.IsNaN(c) || math.IsInf(c, 0) {
				return nil, fmt.Errorf("view %s, %s: value %v is not finite", s.FormatView(n), ivCellLabel(s, n, k), c)
			}
		}
		in.x[n], in.key[n] = x, v
		in.pub = append(in.pub, n)
	}
	for v, x := range exact {
		if err := s.CheckView(v); err != nil {
			return nil, fmt.Errorf("exact %w", err)
		}
		n := v.Normal()
		if _, dup := in.e[n]; dup {
			return nil, fmt.Errorf("exact view %s is given twice", s.FormatView(n))
		}
		if want := s.ViewSize(n); len(x) != want {
			return nil, fmt.Errorf("exact view %s has %d cells, got %d counts", s.FormatView(n), want, len(x))
		}
		for k, c := range x {
			if !(c >= 0 && c <= maxExactInt && c == math.Trunc(c)) {
				return nil, fmt.Errorf("exact view %s, %s: count %v is not a non-negative whole number (at most 2^53)", s.FormatView(n), ivCellLabel(s, n, k), c)
			}
		}
		in.e[n] = x
		in.exact = append(in.exact, n)
	}
	byName := func(a, b domain.View) int { return strings.Compare(s.FormatView(a), s.FormatView(b)) }
	slices.SortFunc(in.pub, byName)
	slices.SortFunc(in.exact, byName)
	return in, nil
}

// ivCellLabel formats cell k of view v as "geo=s1, sex=F", or "the grand
// total".
func ivCellLabel(s *domain.Schema, v domain.View, k int) string {
	dims := v.Dims.Dims()
	if len(dims) == 0 {
		return "the grand total"
	}
	parts := make([]string, len(dims))
	for j := len(dims) - 1; j >= 0; j-- {
		vals := s.LevelValues(dims[j], int(v.Up[dims[j]]))
		parts[j] = s.Dim(dims[j]).Name + "=" + vals[k%len(vals)]
		k /= len(vals)
	}
	return "cell " + strings.Join(parts, ", ")
}

// ivMeet returns the finest view that is a roll-up of both v and w: their
// common dimensions, each at the coarser of its two levels.
func ivMeet(v, w domain.View) domain.View {
	m := domain.View{Dims: v.Dims & w.Dims}
	for _, i := range m.Dims.Dims() {
		m.Up[i] = max(v.Up[i], w.Up[i])
	}
	return m
}

// ivRollups are the roll-ups of one table (view from, counts x) to the
// views that it is compared on, each computed from the smallest roll-up
// already made that it is a roll-up of: a national table is read once or
// twice, not once per comparison.
type ivRollups struct {
	s    *domain.Schema
	from domain.View
	x    []float64
	have []ivRolled
}

type ivRolled struct {
	v domain.View
	x []float64
}

func newRollups(s *domain.Schema, from domain.View, x []float64) *ivRollups {
	return &ivRollups{s: s, from: from, x: x}
}

// prepare computes the roll-ups to every view of to, the largest first, so
// that the smaller ones come from them.
func (r *ivRollups) prepare(to []domain.View) error {
	to = slices.Clone(to)
	slices.SortStableFunc(to, func(a, b domain.View) int { return r.s.ViewSize(b) - r.s.ViewSize(a) })
	for _, m := range to {
		if _, err := r.to(m); err != nil {
			return err
		}
	}
	return nil
}

// to returns the roll-up to m.
func (r *ivRollups) to(m domain.View) ([]float64, error) {
	if m == r.from {
		return r.x, nil
	}
	src, sv := r.x, r.from
	for _, h := range r.have {
		if h.v == m {
			return h.x, nil
		}
		if m.RollUpOf(h.v) && r.s.ViewSize(h.v) < r.s.ViewSize(sv) {
			src, sv = h.x, h.v
		}
	}
	y, err := r.s.RollUp(sv, src, m)
	if err != nil {
		return nil, err
	}
	r.have = append(r.have, ivRolled{m, y})
	return y, nil
}

// ivAgreement compares the roll-ups of a and b to their meet: it returns
// the meet, the largest absolute difference, the cell where it is and the
// two values there. With rel, the difference is relative: the largest
// |a-b| / max(1, |a|, |b|).
func ivAgreement(a, b *ivRollups, rel bool) (domain.View, float64, int, float64, float64, error) {
	m := ivMeet(a.from, b.from)
	pa, err := a.to(m)
	if err != nil {
		return m, 0, 0, 0, 0, err
	}
	pb, err := b.to(m)
	if err != nil {
		return m, 0, 0, 0, 0, err
	}
	worst, at := 0.0, 0
	for k := range pa {
		d := math.Abs(pa[k] - pb[k])
		if rel {
			d /= max(1, math.Abs(pa[k]), math.Abs(pb[k]))
		}
		if d > worst {
			worst, at = d, k
		}
	}
	return m, worst, at, pa[at], pb[at], nil
}

// ivRollupsOf makes the roll-ups of every table of vs (counts in x) and
// prepares each for its meets with vs and with others.
func ivRollupsOf(ctx context.Context, s *domain.Schema, vs []domain.View, x map[domain.View][]float64, others []domain.View) (map[domain.View]*ivRollups, error) {
	rs := make([]*ivRollups, len(vs))
	err := ivParallel(ctx, len(vs), func(_ context.Context, i int) error {
		a := vs[i]
		r := newRollups(s, a, x[a])
		var meets []domain.View
		for _, b := range append(slices.Clone(vs), others...) {
			if b != a {
				meets = append(meets, ivMeet(a, b))
			}
		}
		rs[i] = r
		return r.prepare(meets)
	})
	if err != nil {
		return nil, err
	}
	out := make(map[domain.View]*ivRollups, len(vs))
	for i, a := range vs {
		out[a] = rs[i]
	}
	return out, nil
}

// ivTol is how far (relative) the estimates may disagree with each
// other and with the invariants on a common roll-up.
const ivTol = 1e-6

// ivCheckAgreement refuses invariants that disagree and estimates that
// disagree with each other or with the invariants.
func ivCheckAgreement(ctx context.Context, s *domain.Schema, in *ivInputs) error {
	ex, err := ivRollupsOf(ctx, s, in.exact, in.e, in.pub)
	if err != nil {
		return err
	}
	pub, err := ivRollupsOf(ctx, s, in.pub, in.x, in.exact)
	if err != nil {
		return err
	}
	for i, a := range in.exact {
		for _, b := range in.exact[i+1:] {
			m, d, k, va, vb, err := ivAgreement(ex[a], ex[b], false)
			if err != nil {
				return err
			}
			if d != 0 {
				return fmt.Errorf("%w: exact views %s and %s disagree on %s, %s: %v vs %v",
					estimate.ErrInconsistent, s.FormatView(a), s.FormatView(b), s.FormatView(m), ivCellLabel(s, m, k), va, vb)
			}
		}
	}
	for i, a := range in.pub {
		for _, b := range in.pub[i+1:] {
			m, d, k, va, vb, err := ivAgreement(pub[a], pub[b], true)
			if err != nil {
				return err
			}
			if d > ivTol {
				return fmt.Errorf("the estimates of %s and %s disagree on %s, %s: %v vs %v; RoundViews needs mutually consistent estimates (one least-squares estimate of all the views)",
					s.FormatView(a), s.FormatView(b), s.FormatView(m), ivCellLabel(s, m, k), va, vb)
			}
		}
		for _, b := range in.exact {
			m, d, k, va, vb, err := ivAgreement(pub[a], ex[b], true)
			if err != nil {
				return err
			}
			if d > ivTol {
				return fmt.Errorf("the estimate of %s disagrees with the exact view %s on %s, %s: %v vs %v; RoundViews needs estimates that keep the invariants",
					s.FormatView(a), s.FormatView(b), s.FormatView(m), ivCellLabel(s, m, k), va, vb)
			}
		}
	}
	return nil
}

// ivPlan is the sequence of levels RoundViews rounds, coarsest first.
type ivPlan struct {
	// nonneg stops after the non-negative step: NonNegativeViews.
	nonneg  bool
	h       int // the hierarchical dimension followed; -1 if none
	rootKey int // the key of the root level (views without h)
	levels  []*ivLevel
}

// ivLevel is one level of h and the detail table rounded at it.
type ivLevel struct {
	key   int           // h's level (View.Up) or rootKey
	root  bool          // the views without h
	flat  domain.Cuboid // G: the detail view's flat dimensions
	d     domain.View   // the detail view: h at key (unless root), G
	pub   []domain.View // published views at this level
	inv   []domain.View // exact views at this level
	below []domain.View // exact views at or below this level: their margins
	det   domain.View   // an exact view d is a roll-up of (if determined)
	isDet bool
	src   domain.View // the published view d's estimate is rolled up from

	est, nn, y []float64 // d's estimate, non-negative estimate, integer table
	marg       []ivMargin
	// columns: every problem of the level is one problem per column
	// (solveColumns).
	columns bool

	// What happened, over the level's problems.
	problems, fallbacks, repaired, crossing, inexact, dropped int
	maxDev, residual                                          float64
	aNames, bNames                                            string
}

// ivMargin is an invariant rolled up to this level and to G: a margin
// child ∪ flat on every per-parent problem.
type ivMargin struct {
	view   domain.View
	flat   domain.Cuboid
	counts []float64
}

// ivPlanViews chooses h, groups the views by level, computes each level's
// detail view and where its estimate comes from, or explains why a level
// cannot be rounded as one table.
func ivPlanViews(s *domain.Schema, in *ivInputs) (*ivPlan, error) {
	all := append(slices.Clone(in.pub), in.exact...)
	h := -1
	for _, v := range all {
		for _, i := range v.Dims.Dims() {
			if v.Up[i] == 0 || i == h {
				continue
			}
			if h >= 0 {
				return nil, fmt.Errorf("the views put both %q and %q at coarser levels; integer views follow one hierarchical dimension", s.Dim(h).Name, s.Dim(i).Name)
			}
			h = i
		}
	}
	if h < 0 {
		var used domain.Cuboid
		for _, v := range all {
			used |= v.Dims
		}
		for _, i := range used.Dims() {
			if s.Hierarchical(i) {
				if h >= 0 {
					h = -1
					break
				}
				h = i
			}
		}
	}
	p := &ivPlan{h: h}
	hBit := domain.Cuboid(0)
	if h >= 0 {
		p.rootKey = s.NumLevels(h)
		hBit = 1 << h
	}
	keyOf := func(v domain.View) int {
		if h >= 0 && v.Dims.Has(h) {
			return int(v.Up[h])
		}
		return p.rootKey
	}
	byKey := map[int]*ivLevel{}
	level := func(k int) *ivLevel {
		lv := byKey[k]
		if lv == nil {
			lv = &ivLevel{key: k, root: k == p.rootKey}
			byKey[k] = lv
			p.levels = append(p.levels, lv)
		}
		return lv
	}
	for _, v := range in.pub {
		lv := level(keyOf(v))
		lv.pub = append(lv.pub, v)
		lv.flat |= v.Dims &^ hBit
	}
	for _, v := range in.exact {
		lv := level(keyOf(v))
		lv.inv = append(lv.inv, v)
	}
	slices.SortFunc(p.levels, func(a, b *ivLevel) int { return b.key - a.key })
	// Running intersection: a flat set at level i (its G, or an exact
	// view's dimensions) meets the G of a finer level k only in dimensions
	// that every level in between carries (i included), so that the
	// roll-ups between them pass through each level's table.
	L := p.levels
	for changed := true; changed; {
		changed = false
		for i := range L {
			sets := []domain.Cuboid{L[i].flat}
			for _, e := range L[i].inv {
				sets = append(sets, e.Dims&^hBit)
			}
			for k := i + 1; k < len(L); k++ {
				for _, set := range sets {
					add := set & L[k].flat
					for m := i; m < k; m++ {
						if add&^L[m].flat != 0 {
							L[m].flat |= add
							changed = true
						}
					}
				}
			}
		}
	}
	for i, lv := range L {
		lv.d = domain.View{Dims: lv.flat}
		if !lv.root {
			lv.d.Dims |= hBit
			lv.d.Up[h] = uint8(lv.key)
		}
		for _, e := range in.exact {
			if keyOf(e) <= lv.key {
				lv.below = append(lv.below, e)
			}
		}
		best := -1
		for _, e := range in.exact {
			if lv.d.RollUpOf(e) && (best < 0 || s.ViewSize(e) < best) {
				lv.det, lv.isDet, best = e, true, s.ViewSize(e)
			}
		}
		if lv.isDet {
			continue
		}
		best = -1
		for _, w := range in.pub {
			if lv.d.RollUpOf(w) && (best < 0 || s.ViewSize(w) < best) {
				lv.src, best = w, s.ViewSize(w)
			}
		}
		if best < 0 {
			return nil, p.refusal(s, i)
		}
	}
	return p, nil
}

// refusal explains why level i cannot be rounded as one table.
func (p *ivPlan) refusal(s *domain.Schema, i int) error {
	lv := p.levels[i]
	where := "at the root (without " + s.Dim(max(p.h, 0)).Name + ")"
	if p.h < 0 {
		where = "together"
	} else if !lv.root {
		where = fmt.Sprintf("at level %q of %s", p.levelName(s, lv.key), s.Dim(p.h).Name)
	}
	names := func(vs []domain.View) string {
		out := make([]string, len(vs))
		for k, v := range vs {
			out[k] = s.FormatView(v)
		}
		return strings.Join(out, ", ")
	}
	var pubFlat domain.Cuboid
	nested := false
	hBit := domain.Cuboid(0)
	if p.h >= 0 {
		hBit = 1 << p.h
	}
	for _, v := range lv.pub {
		pubFlat |= v.Dims &^ hBit
	}
	for _, v := range lv.pub {
		nested = nested || v.Dims&^hBit == pubFlat
	}
	var why string
	switch {
	case len(lv.pub) == 0:
		why = fmt.Sprintf("the exact views %s %s must be carried down as the detail table %s, so that the views above and below add up exactly through them", names(lv.inv), where, s.FormatView(lv.d))
	case !nested:
		why = fmt.Sprintf("the published views %s %s are not nested (no one of them has the dimensions of all the others), so the children of each parent must be rounded as their common detail table %s", names(lv.pub), where, s.FormatView(lv.d))
	default:
		why = fmt.Sprintf("the published views %s %s must be rounded as the detail table %s", names(lv.pub), where, s.FormatView(lv.d))
	}
	if extra := lv.flat &^ pubFlat; extra != 0 && len(lv.pub) > 0 {
		why += fmt.Sprintf(", which also carries %s, shared with exact or published views above and below, so that they add up exactly through this level", s.Format(extra))
	}
	return fmt.Errorf("cannot round the views %s: %s, and no published view rolls up to it; add %s (or a finer view that rolls up to it) to the workload",
		where, why, s.FormatView(lv.d))
}

func (p *ivPlan) levelName(s *domain.Schema, key int) string {
	if key == p.rootKey {
		return "root"
	}
	names := s.Levels(p.h)
	if names == nil {
		return s.Dim(p.h).Name
	}
	return names[len(names)-1-key]
}

// prepare computes every level's estimate (or its exact table) and the
// invariants rolled up to it.
func (p *ivPlan) prepare(s *domain.Schema, in *ivInputs) error {
	for _, lv := range p.levels {
		var err error
		if lv.isDet {
			if lv.y, err = s.RollUp(lv.det, in.e[lv.det], lv.d); err != nil {
				return err
			}
			lv.est, lv.nn = lv.y, lv.y
			continue
		}
		if lv.src == lv.d {
			lv.est = in.x[lv.src]
		} else if lv.est, err = s.RollUp(lv.src, in.x[lv.src], lv.d); err != nil {
			return err
		}
		for _, e := range lv.below {
			m := ivMargin{flat: e.Dims & lv.flat}
			m.view = domain.View{Dims: m.flat}
			if !lv.root {
				m.view.Dims |= 1 << p.h
				m.view.Up[p.h] = uint8(lv.key)
			}
			if slices.ContainsFunc(lv.marg, func(o ivMargin) bool { return o.view == m.view }) {
				continue
			}
			if m.counts, err = s.RollUp(e, in.e[e], m.view); err != nil {
				return err
			}
			lv.marg = append(lv.marg, m)
		}
	}
	return nil
}

// split returns, for a view of this plan's levels, the product of the sizes
// of its dimensions before h, the size of h, and the product of the sizes
// after h; a view without h is one block (1, 1, size).
func (p *ivPlan) split(s *domain.Schema, v domain.View) (outer, n, inner int) {
	if p.h < 0 || !v.Dims.Has(p.h) {
		return 1, 1, s.ViewSize(v)
	}
	outer, inner = 1, 1
	for _, i := range v.Dims.Dims() {
		sz := s.LevelSize(i, int(v.Up[i]))
		switch {
		case i < p.h:
			outer *= sz
		case i == p.h:
			n = sz
		default:
			inner *= sz
		}
	}
	return outer, n, inner
}

// ivGather copies the cells of the values ch of h (laid out as outer, n,
// inner) into dst, laid out as outer, len(ch), inner.
func ivGather(dst, src []float64, outer, n, inner int, ch []int32) {
	for o := range outer {
		for j, c := range ch {
			copy(dst[(o*len(ch)+j)*inner:][:inner], src[(o*n+int(c))*inner:][:inner])
		}
	}
}

// ivScatter is ivGather's inverse.
func ivScatter(dst, src []float64, outer, n, inner int, ch []int32) {
	for o := range outer {
		for j, c := range ch {
			copy(dst[(o*n+int(c))*inner:][:inner], src[(o*len(ch)+j)*inner:][:inner])
		}
	}
}

// groups returns the per-parent groups of level i: the values of h at the
// level under each value of the level above (one group of all of them for
// the coarsest level, one group {0} for the root).
func (p *ivPlan) groups(s *domain.Schema, i int) [][]int32 {
	lv := p.levels[i]
	if lv.root {
		return [][]int32{{0}}
	}
	n := s.LevelSize(p.h, lv.key)
	if i == 0 || p.levels[i-1].root {
		all := make([]int32, n)
		for v := range all {
			all[v] = int32(v)
		}
		return [][]int32{all}
	}
	par := p.levels[i-1]
	out := make([][]int32, s.LevelSize(p.h, par.key))
	for v := range n {
		q := s.LevelAncestor(p.h, lv.key, par.key, v)
		out[q] = append(out[q], int32(v))
	}
	return out
}

// ivStats is what one per-parent problem reports.
type ivStats struct {
	fallback, repaired, crossing, dropped bool
	exact                                 bool
	maxDev, residual                      float64
}

// roundLevel rounds level i, parent by parent, in parallel.
func (p *ivPlan) roundLevel(ctx context.Context, s *domain.Schema, i int, r *noise.Rand) error {
	lv := p.levels[i]
	if lv.isDet {
		return nil
	}
	var par *ivLevel
	if i > 0 {
		par = p.levels[i-1]
	}
	groups := p.groups(s, i)
	rands := make([]*noise.Rand, len(groups))
	for q := range groups {
		if !p.nonneg {
			rands[q] = r.Split()
		}
	}
	lv.nn = make([]float64, len(lv.est))
	lv.y = make([]float64, len(lv.est))
	lv.columns = p.separable(lv, par)
	stats := make([]ivStats, len(groups))
	err := ivParallel(ctx, len(groups), func(ctx context.Context, q int) error {
		var err error
		stats[q], err = p.solve(ctx, s, lv, par, q, groups[q], rands[q])
		return err
	})
	if err != nil {
		return err
	}
	lv.problems = len(groups)
	for _, st := range stats {
		lv.fallbacks += ivB2i(st.fallback)
		lv.repaired += ivB2i(st.repaired)
		lv.crossing += ivB2i(st.crossing)
		lv.inexact += ivB2i(!st.exact)
		lv.dropped += ivB2i(st.dropped)
		lv.maxDev = max(lv.maxDev, st.maxDev)
		lv.residual = max(lv.residual, st.residual)
	}
	if par != nil {
		lv.aNames = s.Format(lv.flat & par.flat)
	}
	var b []string
	for _, m := range lv.marg {
		b = append(b, s.FormatView(m.view))
	}
	lv.bNames = strings.Join(b, ", ")
	return nil
}

func ivB2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// solve rounds the children ch of parent q of level lv (par is the level
// above, nil for the coarsest).
func (p *ivPlan) solve(ctx context.Context, s *domain.Schema, lv, par *ivLevel, q int, ch []int32, r *noise.Rand) (ivStats, error) {
	if lv.columns {
		return p.solveColumns(s, lv, par, q, ch, r), nil
	}
	var st ivStats
	// The problem's schema: d's dimensions in schema order, h restricted
	// to the children.
	dims := lv.d.Dims.Dims()
	tdims := make([]domain.Dimension, 0, max(len(dims), 1))
	for _, d := range dims {
		dim := domain.Dimension{Name: s.Dim(d).Name, Values: s.Dim(d).Values}
		if d == p.h && !lv.root {
			vals := s.LevelValues(d, lv.key)
			dim.Values = make([]string, len(ch))
			for j, c := range ch {
				dim.Values[j] = vals[c]
			}
		}
		tdims = append(tdims, dim)
	}
	if len(tdims) == 0 {
		tdims = append(tdims, domain.Dimension{Name: "total", Values: []string{"all"}})
	}
	ts, err := domain.NewSchema(tdims)
	if err != nil {
		return st, err
	}
	all := domain.Base(ts.NumDims())
	sizes := ts.Sizes()
	outer, n, inner := p.split(s, lv.d)
	x := make([]float64, outer*len(ch)*inner)
	ivGather(x, lv.est, outer, n, inner, ch)

	var (
		inv    []estimate.Invariant // real targets, for the non-negative step
		ms     []Margin             // integer targets, for the rounding
		aDims  domain.Cuboid
		tInt   []float64
		bList  []domain.Cuboid
		hasPar = par != nil
	)
	if hasPar {
		A := lv.flat & par.flat
		aDims = tensor.Reindex(A, lv.d.Dims)
		po, pn, pi := p.split(s, par.d)
		row := make([]float64, po*pi)
		psizes := tensor.SubSizes(s.Sizes(), par.flat)
		keep := tensor.Reindex(A, par.flat)
		nA := ts.CuboidSize(aDims)
		ivGather(row, par.nn, po, pn, pi, []int32{int32(q)})
		tReal := make([]float64, nA)
		tensor.Project(psizes, keep, row, tReal)
		ivGather(row, par.y, po, pn, pi, []int32{int32(q)})
		tInt = make([]float64, nA)
		tensor.Project(psizes, keep, row, tInt)
		inv = append(inv, estimate.Invariant{Cuboid: aDims, Counts: tReal})
		ms = append(ms, Margin{Dims: aDims, Targets: tInt})
	}
	childBit := domain.Cuboid(0)
	if !lv.root {
		childBit = tensor.Reindex(1<<p.h, lv.d.Dims)
	}
	for _, m := range lv.marg {
		bd := tensor.Reindex(m.flat, lv.d.Dims) | childBit
		mo, mn, mi := p.split(s, m.view)
		t := make([]float64, mo*len(ch)*mi)
		ivGather(t, m.counts, mo, mn, mi, ch)
		inv = append(inv, estimate.Invariant{Cuboid: bd, Counts: t})
		ms = append(ms, Margin{Dims: bd, Targets: t})
		bList = append(bList, bd)
	}

	// The non-negative estimate of the children, given the parent's.
	zh := x
	if !ivFeasible(sizes, x, inv) {
		nn, err := estimate.SolveNonNegative(ctx, ts, all, x, inv, estimate.NonNegative{Derived: true})
		if err != nil {
			return st, err
		}
		zh, st.residual = nn.Y, nn.Residual
	}
	ivScatter(lv.nn, zh, outer, n, inner, ch)
	if p.nonneg {
		ivScatter(lv.y, zh, outer, n, inner, ch)
		st.exact = true
		return st, nil
	}
	z := make([]float64, len(zh))
	for k, v := range zh {
		z[k] = max(v, 0)
	}
	// Moved onto the parent's integer counts.
	if hasPar {
		sum := make([]float64, len(tInt))
		tensor.Project(sizes, aDims, z, sum)
		delta := make([]float64, len(tInt))
		for k := range delta {
			delta[k] = tInt[k] - sum[k]
		}
		if !ivMove(sizes, aDims, bList, z, delta) {
			st.fallback = true
			for k, v := range zh {
				z[k] = max(v, 0)
			}
		}
	}
	res, err := RoundInteger(ctx, ts, all, z, ms, r)
	if err != nil && hasPar && errors.Is(err, estimate.ErrInconsistent) {
		// The parent's table missed an invariant (three or more crossing
		// margins there): keep the children adding up to the parent.
		st.dropped = true
		res, err = RoundInteger(ctx, ts, all, z, ms[:1], r)
	}
	if err != nil {
		return st, err
	}
	ivScatter(lv.y, res.Counts, outer, n, inner, ch)
	st.exact, st.maxDev = res.Exact, res.MaxDeviation
	st.residual = max(st.residual, res.NonNegativeResidual)
	st.repaired = strings.Contains(res.Method, "min-cost-flow repair")
	st.crossing = strings.Contains(res.Method, "cross the first two")
	return st, nil
}

// ivFeasible reports whether x is non-negative and meets every constraint,
// both to 1e-9 relative.
func ivFeasible(sizes []int, x []float64, inv []estimate.Invariant) bool {
	for _, v := range x {
		if v < -1e-9*max(1, math.Abs(v)) {
			return false
		}
	}
	for _, c := range inv {
		got := make([]float64, len(c.Counts))
		tensor.Project(sizes, c.Cuboid, x, got)
		for k, t := range c.Counts {
			if math.Abs(got[k]-t) > 1e-9*max(1, math.Abs(t)) {
				return false
			}
		}
	}
	return true
}

// ivParallel runs f(0..n-1) on GOMAXPROCS workers and returns the error of
// the lowest index that failed (the others stop early).
func ivParallel(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := range n {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := f(ctx, i); err != nil {
				return err
			}
		}
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next   atomic.Int64
		mu     sync.Mutex
		errAt  = n
		failed error
		wg     sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(ctx, i); err != nil {
					mu.Lock()
					if i < errAt {
						errAt, failed = i, err
					}
					mu.Unlock()
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	if failed != nil {
		return failed
	}
	return context.Cause(ctx)
}

// results rolls every published view up from its level's integer table,
// checks every relation on the final tables, and describes the method.
func (p *ivPlan) results(ctx context.Context, s *domain.Schema, in *ivInputs) (map[domain.View]IntegerResult, error) {
	counts := map[domain.View][]float64{}
	levelOf := map[domain.View]*ivLevel{}
	for _, lv := range p.levels {
		for _, v := range lv.pub {
			levelOf[v] = lv
			if v == lv.d {
				counts[v] = slices.Clone(lv.y)
				continue
			}
			c, err := s.RollUp(lv.d, lv.y, v)
			if err != nil {
				return nil, err
			}
			counts[v] = c
		}
	}
	ex, err := ivRollupsOf(ctx, s, in.exact, in.e, in.pub)
	if err != nil {
		return nil, err
	}
	pub, err := ivRollupsOf(ctx, s, in.pub, counts, in.exact)
	if err != nil {
		return nil, err
	}
	dev := map[domain.View]float64{}
	for i, a := range in.pub {
		for _, b := range in.pub[i+1:] {
			_, d, _, _, _, err := ivAgreement(pub[a], pub[b], false)
			if err != nil {
				return nil, err
			}
			dev[a], dev[b] = max(dev[a], d), max(dev[b], d)
		}
		for _, b := range in.exact {
			_, d, _, _, _, err := ivAgreement(pub[a], ex[b], false)
			if err != nil {
				return nil, err
			}
			dev[a] = max(dev[a], d)
		}
	}
	out := make(map[domain.View]IntegerResult, len(in.pub))
	for _, v := range in.pub {
		lv := levelOf[v]
		out[in.key[v]] = IntegerResult{
			Counts:              counts[v],
			MaxDeviation:        dev[v],
			Exact:               dev[v] == 0,
			Method:              p.method(s, lv, v),
			NonNegativeResidual: lv.residual,
		}
	}
	return out, nil
}

// method describes, for a view v of level lv, how its table was made.
func (p *ivPlan) method(s *domain.Schema, lv *ivLevel, v domain.View) string {
	var b strings.Builder
	if lv.isDet {
		fmt.Fprintf(&b, "the exact view %s rolled up to %s (determined by the invariants, no rounding)", s.FormatView(lv.det), s.FormatView(v))
		return b.String()
	}
	if v != lv.d {
		fmt.Fprintf(&b, "roll-up of the integer detail table %s; that table: ", s.FormatView(lv.d))
	}
	along := ""
	if p.h >= 0 {
		along = " along " + s.Dim(p.h).Name
	}
	step := "integer rounding"
	if p.nonneg {
		step = "non-negative least squares"
	}
	if lv.problems == 1 {
		fmt.Fprintf(&b, "top-down %s%s, as one table: ", step, along)
	} else {
		fmt.Fprintf(&b, "top-down %s%s, the children of each %s separately (%d problems, in parallel): ", step, along, p.levelName(s, p.parentKey(lv)), lv.problems)
	}
	if lv.columns {
		p.columnsMethod(&b, lv)
		return b.String()
	}
	b.WriteString("least-squares non-negative estimate")
	if p.nonneg {
		if lv.aNames != "" {
			b.WriteString(" given the parent's non-negative counts on " + lv.aNames)
		}
		if lv.bNames != "" {
			b.WriteString(" and the invariants' " + lv.bNames)
		}
		return b.String()
	}
	if lv.aNames != "" {
		b.WriteString(" given the parent's, moved onto the parent's integer counts by the least change in Σ d²/z that keeps the invariants (linear in the parent's rounding error, so of mean zero)")
	}
	b.WriteString(", then unbiased controlled rounding (dependent rounding on a transportation network")
	var ms []string
	if lv.aNames != "" {
		ms = append(ms, "the parent's counts on "+lv.aNames)
	}
	if lv.bNames != "" {
		ms = append(ms, "the invariants' "+lv.bNames)
	}
	if len(ms) > 0 {
		b.WriteString("; margins: " + strings.Join(ms, " and "))
	}
	b.WriteString(")")
	if lv.fallbacks > 0 {
		fmt.Fprintf(&b, "; in %d of %d problems the linear move would have made a cell negative, so the nearest non-negative table was rounded instead (not exactly unbiased there)", lv.fallbacks, lv.problems)
	}
	if lv.repaired > 0 {
		fmt.Fprintf(&b, "; in %d problems a min-cost-flow repair moved units where floating-point error left a margin off by one", lv.repaired)
	}
	if lv.crossing > 0 {
		fmt.Fprintf(&b, "; %d of %d problems have three or more crossing margins (no exact integer table need exist): %d are inexact, largest deviation %v", lv.crossing, lv.problems, lv.inexact, lv.maxDev)
	}
	if lv.dropped > 0 {
		fmt.Fprintf(&b, "; in %d problems the parent's table missed an invariant, so only the parent's counts were kept", lv.dropped)
	}
	return b.String()
}

// parentKey returns the key of the level above lv.
func (p *ivPlan) parentKey(lv *ivLevel) int {
	for i, l := range p.levels {
		if l == lv && i > 0 {
			return p.levels[i-1].key
		}
	}
	return p.rootKey
}

// ivMove adds to z >= 0 the change d of least Σ d²/z (cells at 0
// stay at 0) whose marginal on a is delta and whose marginals on every b
// are 0: d = z ⊙ (u_a + Σ v_b), found by alternating projections in that
// metric, which from d = 0 converge to it. It is linear in delta with
// weights that depend on z only. It reports false if a cell would become
// negative or the margins cannot be met without moving a cell at 0.
func ivMove(sizes []int, a domain.Cuboid, bs []domain.Cuboid, z, delta []float64) bool {
	scale := 0.0
	for _, d := range delta {
		scale = max(scale, math.Abs(d))
	}
	if scale == 0 {
		return true
	}
	type con struct {
		g                 []int32
		target, mass, got []float64
	}
	mk := func(c domain.Cuboid, target []float64) con {
		g := cellGroups(sizes, c)
		n := 1
		for _, x := range tensor.SubSizes(sizes, c) {
			n *= x
		}
		k := con{g: g, target: target, mass: make([]float64, n), got: make([]float64, n)}
		if k.target == nil {
			k.target = make([]float64, n)
		}
		for i, v := range z {
			k.mass[g[i]] += v
		}
		return k
	}
	cons := []con{mk(a, delta)}
	for _, b := range bs {
		cons = append(cons, mk(b, nil))
	}
	// The targets agree only to floating-point accuracy (delta sums to 0
	// within each cell of a ∩ b up to the rounding error of the sums that
	// made it): converge to well above that, well below a count.
	tol := 0.0
	for _, m := range cons[0].mass {
		tol = max(tol, m)
	}
	tol = 1e-9 * max(1, tol)
	if scale <= tol {
		return true
	}
	d := make([]float64, len(z))
	ok := false
	for it := 0; it < 500 && !ok; it++ {
		worst := 0.0
		for _, k := range cons {
			clear(k.got)
			for i, v := range d {
				k.got[k.g[i]] += v
			}
			for j := range k.got {
				r := k.target[j] - k.got[j]
				worst = max(worst, math.Abs(r))
				if k.mass[j] > 0 {
					k.got[j] = r / k.mass[j]
				} else {
					k.got[j] = 0
				}
			}
			for i, v := range z {
				d[i] += v * k.got[k.g[i]]
			}
		}
		ok = worst <= tol
	}
	if !ok {
		return false
	}
	for i, v := range z {
		w := v + d[i]
		if w < -1e-9*max(1, v) {
			return false
		}
		z[i] = max(w, 0)
	}
	return true
}
