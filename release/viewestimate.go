package release

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate"
	"github.com/knowdp/knowdp/estimate/hier"
	"github.com/knowdp/knowdp/moe"
	"github.com/knowdp/knowdp/sidecar"
)

// lawMaxTerms is the number of terms of a cell's error law first kept
// exactly; the others (each smaller than the ones kept) are taken as normal
// with their exact variance, and the margin bounds what that costs its
// coverage (moe.Law.Margin). Where the bound exceeds covTarget, more terms
// are kept (nodeErrors).
const lawMaxTerms = 6

// hierLayout maps the schema onto package hier's problem: the hierarchy
// h, and every other dimension as a flat one.
type hierLayout struct {
	s    *domain.Schema
	h    int
	flat []int // schema dimension of each flat dimension
	idx  []int // flat index of each schema dimension (-1 for h)
	tree *hier.Hierarchy
}

func newHierLayout(s *domain.Schema, h int) (*hierLayout, error) {
	l := &hierLayout{s: s, h: h, idx: make([]int, s.NumDims())}
	for d := range s.NumDims() {
		l.idx[d] = -1
		if d != h {
			l.idx[d] = len(l.flat)
			l.flat = append(l.flat, d)
		}
	}
	n := s.NumLevels(h)
	sizes := make([]int, n)
	parents := make([][]int32, n-1)
	for k := range n {
		sizes[k] = s.LevelSize(h, k)
		if k < n-1 {
			parents[k] = make([]int32, sizes[k])
			for i := range parents[k] {
				parents[k][i] = int32(s.Parent(h, k, i))
			}
		}
	}
	tree, err := hier.NewHierarchy(sizes, parents)
	if err != nil {
		return nil, err
	}
	l.tree = tree
	return l, nil
}

// view returns v as package hier names it.
func (l *hierLayout) view(v domain.View) hier.View {
	var f hier.Flat
	for _, d := range v.Dims.Dims() {
		if d != l.h {
			f |= 1 << l.idx[d]
		}
	}
	level := l.s.NumLevels(l.h)
	if v.Dims.Has(l.h) {
		level = int(v.Up[l.h])
	}
	return hier.View{Flat: f, Level: level}
}

// toHier reorders a table of view v from schema order to hier's layout (the
// hierarchy's node first), or back when back is true. Both layouts are
// row-major; only the position of h differs.
func (l *hierLayout) reorder(v domain.View, x []float64, back bool) []float64 {
	if !v.Dims.Has(l.h) || v.Dims.Dims()[0] == l.h {
		return x
	}
	// Schema order: outer (dims before h) × nh × inner; hier: nh × outer × inner.
	var outer, inner int = 1, 1
	for _, d := range v.Dims.Dims() {
		switch {
		case d < l.h:
			outer *= l.s.Size(d)
		case d > l.h:
			inner *= l.s.Size(d)
		}
	}
	nh := l.s.LevelSize(l.h, int(v.Up[l.h]))
	out := make([]float64, len(x))
	for o := range outer {
		for g := range nh {
			src := (o*nh + g) * inner
			dst := (g*outer + o) * inner
			if back {
				src, dst = dst, src
			}
			copy(out[dst:dst+inner], x[src:src+inner])
		}
	}
	return out
}

// nodeOf returns, for cell i of view v (schema order), the hierarchy node
// it belongs to (0 when h is not in v).
func (l *hierLayout) nodeOf(v domain.View) func(i int) int {
	if !v.Dims.Has(l.h) {
		return func(int) int { return 0 }
	}
	inner := 1
	for _, d := range v.Dims.Dims() {
		if d > l.h {
			inner *= l.s.Size(d)
		}
	}
	nh := l.s.LevelSize(l.h, int(v.Up[l.h]))
	return func(i int) int { return i / inner % nh }
}

// estimate fills every table's counts and margins of error from the
// invariants and the noisy measurements: one exact least-squares estimate
// over the hierarchy and the flat dimensions.
func (p *viewPlan) estimate(ctx context.Context, tables []Table, inv []estimate.Invariant, noisy [][]float64) error {
	l, err := newHierLayout(p.s, p.h)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	prob := hier.Problem{Hierarchy: l.tree}
	for _, d := range l.flat {
		prob.FlatSizes = append(prob.FlatSizes, p.s.Size(d))
	}
	for _, v := range inv {
		hv := l.view(v.View)
		prob.Measurements = append(prob.Measurements, hier.Measurement{Flat: hv.Flat, Level: hv.Level, Values: l.reorder(v.View, v.Counts, false)})
	}
	for k, m := range p.meas {
		hv := l.view(m.v)
		prob.Measurements = append(prob.Measurements, hier.Measurement{Flat: hv.Flat, Level: hv.Level, Values: l.reorder(m.v, noisy[k], false), Variance: m.variance})
	}
	var queries []hier.View
	var qt []int
	for i, t := range tables {
		if t.Public {
			continue
		}
		queries = append(queries, l.view(t.View))
		qt = append(qt, i)
	}
	sol, err := hier.Solve(ctx, prob, queries)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	for i, t := range tables {
		if !t.Public {
			continue
		}
		for _, e := range inv {
			if t.View.RollUpOf(e.View) {
				if tables[i].Counts, err = p.s.RollUp(e.View, e.Counts, t.View); err != nil {
					return err
				}
				break
			}
		}
		tables[i].MOE90s = make([]float64, len(tables[i].Counts))
	}
	for q, i := range qt {
		t := &tables[i]
		t.Counts = l.reorder(t.View, sol.Tables[q], true)
		errs, class, err := p.nodeErrors(ctx, sol, q)
		if err != nil {
			return err
		}
		// Schema order: outer (dimensions before h) × h's nodes × inner.
		outer, nodes, inner := 1, 1, 1
		for _, d := range t.View.Dims.Dims() {
			switch {
			case d < p.h:
				outer *= p.s.Size(d)
			case d == p.h:
				nodes = p.s.LevelSize(p.h, int(t.View.Up[p.h]))
			default:
				inner *= p.s.Size(d)
			}
		}
		if len(class) != nodes || outer*nodes*inner != len(t.Counts) {
			return fmt.Errorf("release: %d margins of error for the %d nodes of %s", len(class), nodes, p.s.FormatView(t.View))
		}
		t.MOE90s = make([]float64, len(t.Counts))
		t.absErrSum, t.moeSum = 0, 0
		for o := range outer {
			for g, c := range class {
				at := (o*nodes + g) * inner
				fill(t.MOE90s[at:at+inner], errs[c].moe)
				t.absErrSum += float64(inner) * errs[c].abs
				t.moeSum += float64(inner) * errs[c].moe
			}
		}
		t.MOE90, t.Variance, t.moeCoverage = 0, 0, 0
		for _, e := range errs {
			t.MOE90, t.Variance, t.moeCoverage = max(t.MOE90, e.moe), max(t.Variance, e.variance), max(t.moeCoverage, e.cov)
		}
	}
	return nil
}

// fill sets every element of x to v.
func fill(x []float64, v float64) {
	for i := range x {
		x[i] = v
	}
}

// nodeError is the error of the cells of one class of nodes: the margin of
// error, the expected absolute error, the variance, and how far the
// margin's coverage can be from 90% because part of its law was
// approximated (moe.Law.Margin).
type nodeError struct {
	moe, abs, variance, cov float64
}

// Margins whose coverage may be further than covTarget from 90% (a
// proven bound, lawQuantile90) are recomputed with lawGrowth times more
// exact terms, up to lawMaxTermsCap.
const (
	covTarget      = 0.002
	lawGrowth      = 4
	lawMaxTermsCap = 6 * lawGrowth * lawGrowth * lawGrowth
)

// nodeErrors returns the errors of the cells of every class of nodes of
// the q-th query's table (Hierarchy.Classes), and the class of each node:
// the nodes of a class share one law, computed once, and classes whose
// laws agree to 1e-12 share its quantile. The work is split over
// GOMAXPROCS goroutines, and each result depends only on its class's
// lowest-numbered node, so the margins do not depend on the number of
// cores.
func (p *viewPlan) nodeErrors(ctx context.Context, sol *hier.Solution, q int) ([]nodeError, []int32, error) {
	if p.mech == MechanismGaussian {
		// Normal: the variance is all it takes.
		cv, class, err := sol.TableVariances(ctx, q)
		if err != nil {
			return nil, nil, fmt.Errorf("release: %w", err)
		}
		errs := make([]nodeError, len(cv))
		for c, v := range cv {
			sd := math.Sqrt(v)
			errs[c] = nodeError{moe: moe.Z95 * sd, abs: sd * math.Sqrt(2/math.Pi), variance: v}
		}
		return errs, class, nil
	}
	maxTerms := lawMaxTerms
	laws, class, err := sol.TableLaws(ctx, q, hier.LawOptions{MaxTerms: maxTerms})
	if err != nil {
		return nil, nil, fmt.Errorf("release: %w", err)
	}
	reps := make([]int, len(laws)) // the lowest-numbered node of each class
	for c := range reps {
		reps[c] = -1
	}
	for g, c := range class {
		if reps[c] < 0 {
			reps[c] = g
		}
	}
	errs := make([]nodeError, len(laws))
	todo := make([]int, len(laws)) // the classes whose margins to compute
	for c := range todo {
		todo[c] = c
	}
	for {
		if err := p.lawErrors(ctx, laws, todo, errs); err != nil {
			return nil, nil, err
		}
		// Too rough an approximation: more exact terms.
		var again []int
		for _, c := range todo {
			if errs[c].cov > covTarget {
				again = append(again, c)
			}
		}
		if len(again) == 0 || maxTerms >= lawMaxTermsCap {
			break
		}
		maxTerms *= lawGrowth
		err := parallelFor(ctx, len(again), func(i int) error {
			var err error
			laws[again[i]], err = sol.Law(q, reps[again[i]], hier.LawOptions{MaxTerms: maxTerms})
			return err
		})
		if err != nil {
			return nil, nil, fmt.Errorf("release: %w", err)
		}
		todo = again
	}
	return errs, class, nil
}

// lawErrors computes errs[c] from laws[c] for every class c of todo; the
// classes whose laws agree to 1e-12 share one computation, that of the
// first of them.
func (p *viewPlan) lawErrors(ctx context.Context, laws []hier.Law, todo []int, errs []nodeError) error {
	index := map[string]int{}
	uniq := make([]int, len(todo)) // todo index -> distinct law
	var first []int                // distinct law -> its first class
	for i, c := range todo {
		key := lawKey(laws[c])
		u, ok := index[key]
		if !ok {
			u = len(first)
			index[key] = u
			first = append(first, c)
		}
		uniq[i] = u
	}
	ue := make([]nodeError, len(first))
	err := parallelFor(ctx, len(first), func(u int) error {
		ue[u] = p.lawMOE(laws[first[u]])
		return nil
	})
	if err != nil {
		return err
	}
	for i, c := range todo {
		errs[c] = ue[uniq[i]]
	}
	return nil
}

// parallelFor runs fn(0..n-1) on GOMAXPROCS goroutines and returns the
// error of the lowest index that failed, or the context's.
func parallelFor(ctx context.Context, n int, fn func(i int) error) error {
	var (
		wg    sync.WaitGroup
		next  atomic.Int64
		mu    sync.Mutex
		errAt = n
		first error
	)
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if i < errAt {
						errAt, first = i, err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// lawKey identifies a law to 1e-12 relative, for sharing the work of its
// quantile between the nodes that have it.
func lawKey(law hier.Law) string {
	b := make([]byte, 0, 24*len(law.Terms)+16)
	q := func(x float64) uint64 {
		if x == 0 {
			return 0
		}
		// 40 bits of mantissa: equal within about 1e-12 relative.
		return math.Float64bits(x) >> 12
	}
	b = binary.LittleEndian.AppendUint64(b, q(law.Variance))
	b = binary.LittleEndian.AppendUint64(b, q(law.Dropped))
	b = binary.LittleEndian.AppendUint64(b, q(law.DroppedMax))
	for _, t := range law.Terms {
		b = binary.LittleEndian.AppendUint32(b, uint32(t.Measurement))
		b = binary.LittleEndian.AppendUint64(b, q(t.Coef))
		b = binary.LittleEndian.AppendUint64(b, uint64(t.Count))
	}
	return string(b)
}

// lawMOE returns the error of a cell whose error has the given law. The
// left-out part of the law, many small Laplace terms, is taken as normal
// with its exact variance, and the margin states how far that can move its
// coverage (moe.Law.Margin).
func (p *viewPlan) lawMOE(law hier.Law) nodeError {
	variance := law.Variance
	if variance == 0 {
		return nodeError{}
	}
	if len(law.Terms) == 1 && law.Dropped == 0 && law.Terms[0].Count == 1 && math.Abs(law.Terms[0].Coef-1) < 1e-12 {
		lap := p.meas[law.Terms[0].Measurement-p.nInv()].lap
		return nodeError{moe: moe.Laplace90(lap), abs: lap.Scale(), variance: variance}
	}
	terms := make([]moe.Term, 0, len(law.Terms))
	for _, t := range law.Terms {
		m := p.meas[t.Measurement-p.nInv()]
		terms = append(terms, moe.Term{Scale: math.Abs(t.Coef) * m.lap.Scale(), Count: float64(t.Count)})
	}
	// A Laplace variable of standard deviation sd has scale sd/√2.
	e := moe.Law{Terms: terms, NormalVariance: law.Dropped, NormalMaxScale: law.DroppedMax / math.Sqrt2}.Margin(moe.WideRule())
	return nodeError{moe: e.MOE90, abs: e.MeanAbs, variance: variance, cov: e.CoverageErr}
}

// nInv is the number of invariants, which come first among the problem's
// measurements.
func (p *viewPlan) nInv() int { return len(p.exact) }

// levelSummary returns the error of the tables level by level: coarsest
// first, the tables that sum the hierarchy out as "total".
func (p *viewPlan) levelSummary(tables []Table) []sidecar.LevelError {
	names := p.s.Levels(p.h)
	n := len(names)
	by := map[int]*sidecar.LevelError{}
	var order []int
	for _, t := range tables {
		lv := p.level(t.View)
		e := by[lv]
		if e == nil {
			name := "total"
			if lv < n {
				name = names[n-1-lv]
			}
			e = &sidecar.LevelError{Level: name}
			by[lv] = e
			order = append(order, lv)
		}
		e.Tables = append(e.Tables, p.s.FormatView(t.View))
		e.Cells += len(t.Counts)
		e.MOE90CoverageError = max(e.MOE90CoverageError, t.moeCoverage)
		e.MeanMOE90 += t.moeSum
		e.MaxMOE90 = max(e.MaxMOE90, t.MOE90)
		e.MeanAbsError += t.absErrSum
	}
	slices.SortFunc(order, func(a, b int) int { return b - a })
	out := make([]sidecar.LevelError, 0, len(order))
	for _, lv := range order {
		e := by[lv]
		if e.Cells > 0 {
			e.MeanMOE90 /= float64(e.Cells)
			e.MeanAbsError /= float64(e.Cells)
		}
		out = append(out, *e)
	}
	return out
}
