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
)

// lawMaxTerms bounds the terms of a cell's error law kept exactly; the
// variance of the others (each smaller than the ones kept) joins the law as
// a sum of many small Laplace variables, which is normal to well within
// the coverage the margins are tested for (TestReleaseViewsCoverage).
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
		nodes := 1
		if t.View.Dims.Has(p.h) {
			nodes = p.s.LevelSize(p.h, int(t.View.Up[p.h]))
		}
		moe, abs, vars, err := p.nodeErrors(ctx, sol, q)
		if err != nil {
			return err
		}
		if len(moe) != nodes {
			return fmt.Errorf("release: %d margins of error for the %d nodes of %s", len(moe), nodes, p.s.FormatView(t.View))
		}
		node := l.nodeOf(t.View)
		t.MOE90s = make([]float64, len(t.Counts))
		t.absErr = make([]float64, len(t.Counts))
		for c := range t.Counts {
			g := node(c)
			t.MOE90s[c], t.absErr[c] = moe[g], abs[g]
		}
		t.MOE90 = slices.Max(moe)
		t.Variance = slices.Max(vars)
	}
	return nil
}

// nodeErrors returns the margin of error, the expected absolute error and
// the variance of the cells of every node of the q-th query's table. The
// nodes of one class of the hierarchy (Hierarchy.Classes) share one law,
// computed once; classes whose laws agree to 1e-12 share its quantile. The
// work is split over GOMAXPROCS goroutines, and each result depends only on
// its class's lowest-numbered node, so the margins do not depend on the
// number of cores.
func (p *viewPlan) nodeErrors(ctx context.Context, sol *hier.Solution, q int) (moe, abs, vars []float64, err error) {
	var class []int32
	var cm, ca, cv []float64 // per class
	if p.mech == MechanismGaussian {
		// Normal: the variance is all it takes.
		if cv, class, err = sol.TableVariances(ctx, q); err != nil {
			return nil, nil, nil, fmt.Errorf("release: %w", err)
		}
		cm, ca = make([]float64, len(cv)), make([]float64, len(cv))
		for c, v := range cv {
			sd := math.Sqrt(v)
			cm[c], ca[c] = z95*sd, sd*math.Sqrt(2/math.Pi)
		}
	} else {
		laws, cl, err := sol.TableLaws(ctx, q, hier.LawOptions{MaxTerms: lawMaxTerms})
		if err != nil {
			return nil, nil, nil, fmt.Errorf("release: %w", err)
		}
		class = cl
		// Distinct laws, in the order of their first class.
		index := map[string]int{}
		uniq := make([]int, len(laws)) // class -> distinct law
		var first []int                // distinct law -> its first class
		for c, law := range laws {
			key := lawKey(law)
			u, ok := index[key]
			if !ok {
				u = len(first)
				index[key] = u
				first = append(first, c)
			}
			uniq[c] = u
		}
		um, ua, uv := make([]float64, len(first)), make([]float64, len(first)), make([]float64, len(first))
		var (
			wg   sync.WaitGroup
			next atomic.Int64
		)
		for range min(runtime.GOMAXPROCS(0), len(first)) {
			wg.Go(func() {
				for {
					u := int(next.Add(1) - 1)
					if u >= len(first) || ctx.Err() != nil {
						return
					}
					um[u], ua[u], uv[u] = p.lawMOE(laws[first[u]])
				}
			})
		}
		wg.Wait()
		if err := ctx.Err(); err != nil {
			return nil, nil, nil, err
		}
		cm, ca, cv = make([]float64, len(laws)), make([]float64, len(laws)), make([]float64, len(laws))
		for c, u := range uniq {
			cm[c], ca[c], cv[c] = um[u], ua[u], uv[u]
		}
	}
	moe, abs, vars = make([]float64, len(class)), make([]float64, len(class)), make([]float64, len(class))
	for g, c := range class {
		moe[g], abs[g], vars[g] = cm[c], ca[c], cv[c]
	}
	return moe, abs, vars, nil
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
	for _, t := range law.Terms {
		b = binary.LittleEndian.AppendUint32(b, uint32(t.Measurement))
		b = binary.LittleEndian.AppendUint64(b, q(t.Coef))
		b = binary.LittleEndian.AppendUint64(b, uint64(t.Count))
	}
	return string(b)
}

// lawMOE returns the margin of error, the expected absolute error and the
// variance of a cell whose error has the given law.
func (p *viewPlan) lawMOE(law hier.Law) (moe, abs, variance float64) {
	variance = law.Variance
	if variance == 0 {
		return 0, 0, 0
	}
	if p.mech == MechanismGaussian {
		sd := math.Sqrt(variance)
		return z95 * sd, sd * math.Sqrt(2/math.Pi), variance
	}
	if len(law.Terms) == 1 && law.Dropped == 0 && law.Terms[0].Count == 1 && math.Abs(law.Terms[0].Coef-1) < 1e-12 {
		lap := p.meas[law.Terms[0].Measurement-p.nInv()].lap
		return laplaceMOE90(lap), lap.Scale(), variance
	}
	terms := make([]lawTerm, 0, len(law.Terms)+1)
	for _, t := range law.Terms {
		m := p.meas[t.Measurement-p.nInv()]
		terms = append(terms, lawTerm{c: math.Abs(t.Coef) * m.lap.Scale(), n: float64(t.Count)})
	}
	if law.Dropped > 0 {
		// 1024 iid Laplace(c) with total variance Dropped: 2·1024·c² = Dropped.
		terms = append(terms, lawTerm{c: math.Sqrt(law.Dropped / 2048), n: 1024})
	}
	return quantile90(terms), meanAbs(terms), variance
}

// nInv is the number of invariants, which come first among the problem's
// measurements.
func (p *viewPlan) nInv() int { return len(p.exact) }

// meanAbs returns E|E| for E = Σ_g c_g Σ_{n_g iid} Laplace(1): for a
// symmetric error with characteristic function φ, E|E| = (2/π) ∫_0^∞
// (1 - φ(t))/t² dt. In u = σt = tan θ the integrand (1 - φ)/sin²θ is
// smooth and bounded on [0, π/2] (it tends to 1/2 at 0 and to 1 at π/2,
// and φ is a decreasing product), so a few Gauss-Legendre panels give it
// to about 1e-9.
func meanAbs(terms []lawTerm) float64 {
	var sigma2 float64
	for _, t := range terms {
		sigma2 += 2 * t.n * t.c * t.c
	}
	if sigma2 == 0 {
		return 0
	}
	x2 := make([]float64, len(terms))
	for i, t := range terms {
		x2[i] = t.c * t.c / sigma2
	}
	f := func(theta float64) float64 {
		s := math.Sin(theta)
		if s < 1e-4 {
			return 0.5
		}
		u := math.Tan(theta)
		var l float64
		for i, t := range terms {
			l -= t.n * math.Log1p(x2[i]*u*u)
		}
		return -math.Expm1(l) / (s * s)
	}
	const panels = 12
	var sum float64
	for k := range panels {
		a := float64(k) * math.Pi / 2 / panels
		sum += gaussLegendre(f, a, a+math.Pi/2/panels)
	}
	return 2 / math.Pi * sum * math.Sqrt(sigma2)
}

// gaussLegendre integrates f over [a, b] with the 5-point rule.
func gaussLegendre(f func(float64) float64, a, b float64) float64 {
	x := [5]float64{0, 0.5384693101056831, -0.5384693101056831, 0.9061798459386640, -0.9061798459386640}
	w := [5]float64{0.5688888888888889, 0.4786286704993665, 0.4786286704993665, 0.2369268850561891, 0.2369268850561891}
	h, m := (b-a)/2, (a+b)/2
	var s float64
	for i := range x {
		s += w[i] * f(m+h*x[i])
	}
	return s * h
}

// levelSummary returns the error of the tables level by level: coarsest
// first, the tables that sum the hierarchy out as "total".
func (p *viewPlan) levelSummary(tables []Table) []LevelError {
	names := p.s.Levels(p.h)
	n := len(names)
	by := map[int]*LevelError{}
	var order []int
	for _, t := range tables {
		lv := p.level(t.View)
		e := by[lv]
		if e == nil {
			name := "total"
			if lv < n {
				name = names[n-1-lv]
			}
			e = &LevelError{Level: name}
			by[lv] = e
			order = append(order, lv)
		}
		e.Tables = append(e.Tables, p.s.FormatView(t.View))
		e.Cells += len(t.Counts)
		for c := range t.Counts {
			m := 0.0
			if t.MOE90s != nil {
				m = t.MOE90s[c]
			}
			e.MeanMOE90 += m
			e.MaxMOE90 = max(e.MaxMOE90, m)
			if t.absErr != nil {
				e.MeanAbsError += t.absErr[c]
			}
		}
	}
	slices.SortFunc(order, func(a, b int) int { return b - a })
	out := make([]LevelError, 0, len(order))
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
