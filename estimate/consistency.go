package estimate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/tensor"
)

// Invariant is an exact cuboid: counts that are public and that a release
// must reproduce exactly. Counts are in the cuboid's row-major order.
type Invariant struct {
	Cuboid domain.Cuboid
	// View is the invariant's view when it stands at a coarser level of a
	// hierarchy (a release of tables at levels); zero otherwise.
	View   domain.View
	Counts []float64
}

// TableView returns the invariant's view: View, or the cuboid itself at its
// finest levels.
func (v Invariant) TableView() domain.View {
	if v.View.Dims != v.Cuboid {
		return domain.ViewOf(v.Cuboid)
	}
	return v.View
}

// constraint is an invariant re-expressed over the array being made
// consistent: the marginal of x onto keep must equal target.
type constraint struct {
	keep   domain.Cuboid // dimensions numbered within the array
	target []float64
	deg    float64 // cells of the array per cell of the marginal
}

// Consistent replaces x, the noisy counts of cuboid over (row-major over its
// dimensions), by the least-squares solution of
//
//	minimise ||y - x||_2  subject to  marginal of y on [Ci] ∩ [over] = ci for every invariant,
//
// the consistency step of paper 3 (Section 6, eqs. 2-7). Invariants that
// disagree are rejected with an error naming the cell where they differ,
// and x is left unchanged.
//
// On a product domain the projections onto the invariants' affine sets
// commute, so their product is the least-squares solution, and it expands
// by inclusion-exclusion into averages over intersections of the
// invariants' cuboids, each derivable from one invariant's marginal of x
// (docs/consistency.md). The work is one read pass computing every
// invariant's marginal of x at once and one read-write pass adding every
// correction, whatever the number of invariants; arrays of 2^16 cells or
// more are split over GOMAXPROCS goroutines. Beyond the invariants'
// marginals and corrections, the extra memory is at most half the array's
// size (per-part partial marginals and scratch arrays). The split into parts and the order of every sum
// depend only on the shapes, so the result is the same bit for bit
// whatever GOMAXPROCS is.
func Consistent(s *domain.Schema, over domain.Cuboid, x []float64, inv []Invariant) error {
	cons, err := Constraints(s, over, x, inv)
	if err != nil {
		return err
	}
	newProjector(s.SubSizesOf(over), cons).apply(x)
	return nil
}

// projector applies the least-squares correction for fixed constraints in
// two passes over x. With Q_K the averaging projector onto functions of K
// (Q_K z = broadcast(marginal_K z)/deg_K), the constraints' projections
// commute and
//
//	y = x - Π (x - x*),  Π = I - ∏_i (I - Q_{K_i}) = Σ_D b_D Q_D,
//
// for any x* meeting the constraints, where D runs over the distinct
// intersections of the K_i and b_D sums (-1)^{|S|+1} over the sets S of
// constraints whose cuboids intersect in D (computed by multiplying out
// the product one factor at a time, Q_D Q_E = Q_{D∩E}). Q_D (x* - x) needs
// only the targets' and x's marginals on D, both derivable from any
// constraint i with D ⊆ K_i; each term is folded into that constraint's
// correction array, so the second pass adds one value per constraint.
//
// When the constraints' cuboids leave out a dimension that comes before
// one they keep, the short runs that interleaving makes would cost a loop
// per run and per constraint. If the union U of their cuboids is at most a
// quarter of the array, the read pass then computes x's marginal on U (one
// cuboid, long runs) and the constraints' marginals from that, and the
// write pass gathers the corrections on U and adds them to x in one
// broadcast. U's marginal is never stored whole: the leading dimensions in
// U (the prefix) are cut into chunks, and each chunk of U's marginal lives
// in a small scratch array while both steps run on it. Parts split the
// prefix, so when U leaves out the first dimension this runs on one core.
type projector struct {
	cons  []constraint
	fixed int // a constraint that determines every cell, or -1
	terms []term
	// The union level, when union != 0: the plan from the array to U, the
	// cells of the prefix, and per prefix cell the blocks of uplan, the
	// blocks of mp and the cells of U; chunk prefix cells go in a scratch
	// array (one per part).
	union       domain.Cuboid
	uplan       tensor.Plan
	prefix      int
	ub, mb, cpp int
	chunk       int
	scratch     [][]float64
	// mp maps U's array (or x, without the union level) onto the
	// constraints.
	mp    *tensor.MultiPlan
	parts int
	// partial[q][i] are part q's sums of x onto constraint i;
	// partial[0] holds the totals after the reduction.
	partial [][][]float64
	corr    [][]float64
}

// term is b_D Q_D (x* - x) for one intersection D, computed within the
// array of its owner, a constraint whose cuboid contains D.
type term struct {
	owner  int
	whole  bool          // D is the owner's whole cuboid
	sub    domain.Cuboid // D, numbered within the owner's array
	sizes  []int         // sizes of the owner's array
	target []float64
	scale  float64 // b_D / deg_D
	buf    []float64
}

// Parallel work split: arrays below minParallelCells are done inline (the
// non-negative iteration calls apply thousands of times on small arrays);
// larger ones in at most maxParts parts, each with its own partial
// marginals, which cost at most half the array's size in all. The parts
// depend on the shapes only, never on GOMAXPROCS.
const (
	minParallelCells = 1 << 16
	maxParts         = 16
	// unionChunk is the target number of cells of U's marginal held at
	// once by one part (32 KiB).
	unionChunk = 1 << 12
)

func newProjector(sizes []int, cons []constraint) *projector {
	p := &projector{cons: cons, fixed: -1}
	full := domain.Base(len(sizes))
	n := 1
	for _, s := range sizes {
		n *= s
	}
	for i, c := range cons {
		if c.keep == full {
			p.fixed = i
			return p
		}
	}
	if len(cons) == 0 {
		return p
	}
	// Coefficients of ∏ (I - Q_{K_i}) = Σ_D a_D Q_D, with Q_full = I.
	coef := map[domain.Cuboid]int{full: 1}
	for _, c := range cons {
		next := make(map[domain.Cuboid]int, 2*len(coef))
		for d, a := range coef {
			next[d] += a
			next[d&c.keep] -= a
		}
		coef = next
	}
	ds := make([]domain.Cuboid, 0, len(coef))
	for d, a := range coef {
		if a != 0 && d != full {
			ds = append(ds, d)
		}
	}
	slices.Sort(ds) // a fixed order of the terms, for reproducible sums
	keeps := make([]domain.Cuboid, len(cons))
	marg := 0
	for i, c := range cons {
		keeps[i] = c.keep
		marg += len(c.target)
	}
	for _, d := range ds {
		owner := slices.IndexFunc(cons, func(c constraint) bool { return d.AncestorOf(c.keep) })
		c := cons[owner]
		t := term{owner: owner, whole: d == c.keep, sizes: tensor.SubSizes(sizes, c.keep)}
		t.sub = tensor.Reindex(d, c.keep)
		if t.whole {
			t.target = c.target
		} else {
			t.target = make([]float64, subCells(sizes, d))
			tensor.Project(t.sizes, t.sub, c.target, t.target)
			t.buf = make([]float64, len(t.target))
		}
		// b_D = -a_D; deg_D = cells of the array per cell of D.
		t.scale = -float64(coef[d]) * float64(len(t.target)) / float64(n)
		p.terms = append(p.terms, t)
	}
	var union domain.Cuboid
	for _, c := range keeps {
		union |= c
	}
	pre, prefix := 0, 1
	for pre < len(sizes) && union.Has(pre) {
		prefix *= sizes[pre]
		pre++
	}
	inner := sizes // the array the constraints' marginals are taken from
	minOuter := 0
	if uc := subCells(sizes, union); union&(union+1) != 0 && 4*uc <= n {
		// union&(union+1) != 0: a left-out dimension precedes a kept one
		// (otherwise the multiPlan's tail handles it in the same pass).
		p.union, p.prefix, p.cpp = union, prefix, uc/prefix
		p.uplan = tensor.NewPlan(sizes, union)
		inner = tensor.SubSizes(sizes, union)
		for i, c := range keeps {
			keeps[i] = tensor.Reindex(c, union)
		}
		minOuter = pre
	}
	p.parts = 1
	if n >= minParallelCells {
		p.parts = max(1, min(maxParts, n/(2*marg)))
	}
	if p.union != 0 {
		p.parts = min(p.parts, p.prefix)
	}
	p.mp = tensor.NewMultiPlan(inner, keeps, 4*p.parts, minOuter)
	p.parts = min(p.parts, p.mp.Blocks)
	if p.union != 0 {
		// mp's outer dimensions begin with the prefix (minOuter), so its
		// blocks, like uplan's, come in equal groups per prefix cell.
		p.ub, p.mb = p.uplan.Blocks()/p.prefix, p.mp.Blocks/p.prefix
		p.chunk = max(1, min(p.prefix, unionChunk/p.cpp))
		p.scratch = make([][]float64, p.parts)
		for q := range p.scratch {
			p.scratch[q] = make([]float64, p.chunk*p.cpp)
		}
	}
	p.partial = make([][][]float64, p.parts)
	for q := range p.partial {
		p.partial[q] = make([][]float64, len(cons))
		for i, c := range cons {
			p.partial[q][i] = make([]float64, len(c.target))
		}
	}
	p.corr = make([][]float64, len(cons))
	for i, c := range cons {
		p.corr[i] = make([]float64, len(c.target))
	}
	return p
}

// subCells is the number of cells of the sub-array keeping keep.
func subCells(sizes []int, keep domain.Cuboid) int {
	n := 1
	for i, s := range sizes {
		if keep.Has(i) {
			n *= s
		}
	}
	return n
}

// apply replaces x by its projection onto the constraints' affine set.
func (p *projector) apply(x []float64) {
	if p.fixed >= 0 {
		copy(x, p.cons[p.fixed].target)
		return
	}
	if len(p.cons) == 0 {
		return
	}
	if p.union != 0 {
		inParts(p.parts, p.prefix, func(q, a, b int) {
			for _, m := range p.partial[q] {
				clear(m)
			}
			for lo := a; lo < b; lo += p.chunk {
				hi := min(lo+p.chunk, b)
				u := p.scratch[q][:(hi-lo)*p.cpp]
				clear(u)
				p.uplan.Project(x, u, lo*p.ub, hi*p.ub, lo*p.cpp)
				p.mp.ProjectRange(u, lo*p.mb, hi*p.mb, p.partial[q])
			}
		})
	} else {
		span := p.mp.Inner * p.mp.Tail
		inParts(p.parts, p.mp.Blocks, func(q, from, to int) {
			for _, m := range p.partial[q] {
				clear(m)
			}
			p.mp.ProjectRange(x[from*span:], from, to, p.partial[q])
		})
	}
	marg := p.partial[0]
	for _, part := range p.partial[1:] {
		for i, m := range part {
			for c, v := range m {
				marg[i][c] += v
			}
		}
	}
	for _, c := range p.corr {
		clear(c)
	}
	for _, t := range p.terms {
		m, corr := marg[t.owner], p.corr[t.owner]
		if t.whole {
			for c, v := range m {
				corr[c] += t.scale * (t.target[c] - v)
			}
			continue
		}
		clear(t.buf)
		tensor.Project(t.sizes, t.sub, m, t.buf)
		for c, v := range t.buf {
			t.buf[c] = t.scale * (t.target[c] - v)
		}
		tensor.BroadcastAdd(t.sizes, t.sub, corr, t.buf)
	}
	if p.union == 0 {
		span := p.mp.Inner * p.mp.Tail
		inParts(p.parts, p.mp.Blocks, func(_, from, to int) {
			p.mp.BroadcastRange(x[from*span:], from, to, p.corr)
		})
		return
	}
	inParts(p.parts, p.prefix, func(q, a, b int) {
		for lo := a; lo < b; lo += p.chunk {
			hi := min(lo+p.chunk, b)
			u := p.scratch[q][:(hi-lo)*p.cpp]
			clear(u)
			p.mp.BroadcastRange(u, lo*p.mb, hi*p.mb, p.corr)
			p.uplan.BroadcastAdd(x, u, lo*p.ub, hi*p.ub, lo*p.cpp)
		}
	})
}

// inParts calls fn(q, from, to) for each of the parts q that cut [0, n)
// into ranges, on at most GOMAXPROCS goroutines.
func inParts(parts, n int, fn func(q, from, to int)) {
	if parts == 1 {
		fn(0, 0, n)
		return
	}
	workers := min(runtime.GOMAXPROCS(0), parts)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				q := int(next.Add(1)) - 1
				if q >= parts {
					return
				}
				fn(q, q*n/parts, (q+1)*n/parts)
			}
		})
	}
	wg.Wait()
}

// constraints validates the invariants and reduces them to the distinct,
// non-redundant constraints they put on cuboid over.
func Constraints(s *domain.Schema, over domain.Cuboid, x []float64, inv []Invariant) ([]constraint, error) {
	return constraintsOf(s, over, x, inv, true)
}

// constraintsOf is constraints; with signed false, counts may be negative:
// the invariants are then tables derived by post-processing (a workload's
// non-negative tables, negative by at most their tolerance), not data.
func constraintsOf(s *domain.Schema, over domain.Cuboid, x []float64, inv []Invariant, nonNegativeCounts bool) ([]constraint, error) {
	base := domain.Base(s.NumDims())
	if over&^base != 0 {
		return nil, fmt.Errorf("cuboid %#x has dimensions beyond the schema's %d", uint64(over), s.NumDims())
	}
	if want := s.CuboidSize(over); len(x) != want {
		return nil, fmt.Errorf("cuboid %s has %d cells, got %d values", s.Format(over), want, len(x))
	}
	if err := checkInvariants(s, inv, nonNegativeCounts); err != nil {
		return nil, err
	}
	var keepers []Invariant
	for i, v := range inv {
		if !implied(inv, over, i) {
			keepers = append(keepers, v)
		}
	}
	sizes := s.Sizes()
	cons := make([]constraint, 0, len(keepers))
	for _, v := range keepers {
		k := v.Cuboid & over
		target := make([]float64, s.CuboidSize(k))
		tensor.Project(tensor.SubSizes(sizes, v.Cuboid), tensor.Reindex(k, v.Cuboid), v.Counts, target)
		cons = append(cons, constraint{
			keep:   tensor.Reindex(k, over),
			target: target,
			deg:    float64(s.CuboidSize(over) / s.CuboidSize(k)),
		})
	}
	return cons, nil
}

// checkInvariants validates the invariants' cuboids, sizes and counts
// (finite, and non-negative unless nonNegativeCounts is false) and their
// agreement on common margins.
func checkInvariants(s *domain.Schema, inv []Invariant, nonNegativeCounts bool) error {
	base := domain.Base(s.NumDims())
	for _, v := range inv {
		if v.Cuboid&^base != 0 {
			return fmt.Errorf("exact cuboid %#x has dimensions beyond the schema's %d", uint64(v.Cuboid), s.NumDims())
		}
		if want := s.CuboidSize(v.Cuboid); len(v.Counts) != want {
			return fmt.Errorf("exact cuboid %s has %d cells, got %d counts", s.Format(v.Cuboid), want, len(v.Counts))
		}
		for i, c := range v.Counts {
			if math.IsNaN(c) || math.IsInf(c, 0) || (nonNegativeCounts && c < 0) {
				return fmt.Errorf("exact cuboid %s, cell %s: count %v must be finite and non-negative", s.Format(v.Cuboid), s.CellLabel(v.Cuboid, i), c)
			}
		}
	}
	return checkAgreement(s, inv)
}

// implied reports whether invariant i's constraint on cuboid over (its
// marginal on [Ci] ∩ [over]) is implied by another's: one whose dimensions
// within over are a superset, or the same and listed earlier.
func implied(inv []Invariant, over domain.Cuboid, i int) bool {
	k := inv[i].Cuboid & over
	for j, w := range inv {
		kw := w.Cuboid & over
		if k.AncestorOf(kw) && (k != kw || j < i) {
			return true
		}
	}
	return false
}

// checkAgreement verifies that every two invariants have the same counts on
// the cuboid of their common dimensions. That is also sufficient for a
// table (with real counts) satisfying all of them to exist.
func checkAgreement(s *domain.Schema, inv []Invariant) error {
	sizes := s.Sizes()
	for i := range inv {
		for j := i + 1; j < len(inv); j++ {
			a, b := inv[i], inv[j]
			common := a.Cuboid & b.Cuboid
			pa := make([]float64, s.CuboidSize(common))
			pb := make([]float64, len(pa))
			tensor.Project(tensor.SubSizes(sizes, a.Cuboid), tensor.Reindex(common, a.Cuboid), a.Counts, pa)
			tensor.Project(tensor.SubSizes(sizes, b.Cuboid), tensor.Reindex(common, b.Cuboid), b.Counts, pb)
			for k := range pa {
				if math.Abs(pa[k]-pb[k]) > 1e-9*math.Max(1, math.Max(math.Abs(pa[k]), math.Abs(pb[k]))) {
					where := "the grand total"
					if common != 0 {
						where = "cell " + s.CellLabel(common, k) + " of their common cuboid " + s.Format(common)
					}
					return fmt.Errorf("%w: exact cuboids %s and %s disagree on %s: %v vs %v",
						ErrInconsistent, s.Format(a.Cuboid), s.Format(b.Cuboid), where, pa[k], pb[k])
				}
			}
		}
	}
	return nil
}

// ErrInconsistent is matched by errors about invariants that no table can
// satisfy together.
var ErrInconsistent = errors.New("inconsistent invariants")

// NonNegative configures ConsistentNonNegative.
type NonNegative struct {
	// Tol bounds the optimality conditions of the result (see
	// ConsistentNonNegative); 0 means 1e-6.
	Tol float64
	// MaxIter bounds the number of alternating projections; 0 means 10000.
	MaxIter int
	// derived marks invariants that are post-processed tables rather than
	// data: their counts may be negative by the tolerance they met.
	Derived bool
}

// ConsistentNonNegative replaces x by the least-squares point of
// {y >= 0 : y satisfies every invariant}, computed with Dykstra's
// alternating projections between the invariants' affine set (one sweep of
// Consistent) and the non-negative orthant.
//
// The result satisfies the invariants exactly (to float rounding) and meets
// the Karush-Kuhn-Tucker conditions of the problem to within Tol: no cell is
// below -Tol, and with the multipliers mu >= 0 that Dykstra's corrections
// carry for the orthant, the stationarity residual (the part of x - y + mu
// the invariants cannot absorb) and the complementarity products mu_i y_i
// are at most Tol in every cell. It fails if that is not reached within
// MaxIter sweeps (for example when no non-negative table satisfies the
// invariants), leaving x unchanged. It returns the number of sweeps used.
func ConsistentNonNegative(ctx context.Context, s *domain.Schema, over domain.Cuboid, x []float64, inv []Invariant, opt NonNegative) (int, error) {
	res, err := SolveNonNegative(ctx, s, over, x, inv, opt)
	if err != nil {
		return res.sweeps, err
	}
	if res.Residual > res.tol {
		return res.sweeps, fmt.Errorf("non-negative consistency did not meet tolerance %g in %d sweeps (residual %g); the invariants may admit no non-negative table", res.tol, res.sweeps, res.Residual)
	}
	copy(x, res.Y)
	return res.sweeps, nil
}

// nnResult is the outcome of Dykstra's iteration: the last iterate (which
// satisfies the invariants), its KKT residual and the tolerance asked for.
type nnResult struct {
	Y        []float64
	sweeps   int
	Residual float64
	tol      float64
}

// solveNonNegative runs Dykstra's iteration until the KKT residual is within
// tolerance or MaxIter sweeps are done. It fails only for invalid input or a
// cancelled context.
func SolveNonNegative(ctx context.Context, s *domain.Schema, over domain.Cuboid, x []float64, inv []Invariant, opt NonNegative) (nnResult, error) {
	if opt.Tol == 0 {
		opt.Tol = 1e-6
	}
	if opt.MaxIter == 0 {
		opt.MaxIter = 10000
	}
	if !(opt.Tol > 0) || math.IsInf(opt.Tol, 0) {
		return nnResult{}, fmt.Errorf("non-negative tolerance must be finite and > 0, got %v", opt.Tol)
	}
	cons, err := constraintsOf(s, over, x, inv, !opt.Derived)
	if err != nil {
		return nnResult{}, err
	}
	sizes := s.SubSizesOf(over)
	affine := newProjector(sizes, cons)
	// The linear part of the affine projection, for the stationarity test.
	lin := make([]constraint, len(cons))
	for i, c := range cons {
		lin[i] = constraint{keep: c.keep, target: make([]float64, len(c.target)), deg: c.deg}
	}
	linear := newProjector(sizes, lin)
	// Dykstra: y = P_A(z); z = max(y + q, 0); q = y + q - z. The affine set
	// needs no correction term of its own; -q converges to the orthant's
	// multipliers.
	z := append([]float64(nil), x...)
	res := nnResult{Y: make([]float64, len(x)), tol: opt.Tol}
	q := make([]float64, len(x))
	r := make([]float64, len(x))
	for it := 1; it <= opt.MaxIter; it++ {
		copy(res.Y, z)
		affine.apply(res.Y)
		for i := range res.Y {
			w := res.Y[i] + q[i]
			z[i] = max(w, 0)
			q[i] = w - z[i]
		}
		if it%8 != 1 && it != opt.MaxIter {
			continue
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		res.sweeps = it
		res.Residual = kktResidual(x, res.Y, q, r, linear)
		if res.Residual <= opt.Tol {
			break
		}
	}
	return res, nil
}

// kktResidual returns the largest violation of the optimality conditions:
// y >= 0, mu_i y_i = 0 with mu = -q, and x - y + mu in the invariants'
// normal space.
func kktResidual(x, y, q, r []float64, linear *projector) float64 {
	var worst float64
	for i := range y {
		worst = max(worst, -y[i], math.Abs(q[i]*y[i]))
		r[i] = x[i] - y[i] - q[i]
	}
	linear.apply(r)
	for _, v := range r {
		worst = max(worst, math.Abs(v))
	}
	return worst
}
