package hier

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Flat is a set of flat dimensions: bit d stands for flat dimension d. A
// table over a Flat set is row-major over its dimensions in increasing
// order (the last varies fastest).
type Flat uint32

// Has reports whether dimension d is in f.
func (f Flat) Has(d int) bool { return f&(1<<d) != 0 }

// dims returns the dimensions of f in increasing order.
func (f Flat) dims() []int {
	out := make([]int, 0, bits.OnesCount32(uint32(f)))
	for g := uint32(f); g != 0; g &= g - 1 {
		out = append(out, bits.TrailingZeros32(g))
	}
	return out
}

// String lists the dimensions of f, as in {0,2}.
func (f Flat) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, d := range f.dims() {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, d)
	}
	b.WriteByte('}')
	return b.String()
}

// maxFlat bounds the number of flat dimensions.
const maxFlat = 30

// Measurement is one measured (or exact) table: the marginal of the data
// over the flat dimensions Flat, with the hierarchy rolled up to Level.
// Values has Nodes(Level) × Π_{d∈Flat} n_d cells, row-major with the
// hierarchy node first (the caller's node numbering). Every cell carries
// independent noise of variance Variance; Variance 0 makes the table exact
// (an invariant the estimate reproduces).
type Measurement struct {
	Flat     Flat
	Level    int
	Values   []float64
	Variance float64
}

// View names a table: the flat dimensions Flat, the hierarchy at Level.
type View struct {
	Flat  Flat
	Level int
}

// Problem is a set of measurements of one data cube whose dimensions are
// one hierarchy crossed with flat dimensions of sizes FlatSizes.
type Problem struct {
	Hierarchy    *Hierarchy
	FlatSizes    []int
	Measurements []Measurement
	// Workers bounds the goroutines of Solve; 0 means GOMAXPROCS.
	Workers int
}

// Solution is the weighted least-squares estimate: the requested tables,
// and what is needed for the error laws of their cells (O(nodes) numbers
// per residual; the solved residual tables themselves are not kept). Its
// methods only read it and may be called concurrently.
type Solution struct {
	// Tables[q] is the estimated table of the q-th query, laid out like a
	// measurement of that view.
	Tables [][]float64

	p       *Problem
	queries []View
	res     map[Flat]*resid
}

// resid is the solved tree problem of one residual T.
type resid struct {
	plan    *tplan
	z       []float64 // the estimate of H_k u_T for every node of every level (internal order), nc columns per node
	a, b, g []float64 // per internal node: z_i = a_i y_i + b_i Σ_c z_c; f_c = z_c + g_c (f_p - Σ z)
	// Per internal node, for the error laws: vz is the variance of the
	// upward estimate z_i (Σ_k (∂z_i/∂y_k)² σ²_k, per unit of the column
	// covariance), and umax bounds |∂z_i/∂y_k| over the noisy observations
	// y_k of its subtree; cvz and cumax are the sum of vz and the largest
	// umax over the node's children.
	vz, umax, cvz, cumax []float64
}

// tplan is how the measurements observe the residual T.
type tplan struct {
	t      Flat
	dims   []int     // the flat dimensions of T
	sizes  []int     // their sizes
	nc     int       // cells of T
	sigma2 []float64 // per level: variance of the combined observation (0 exact, +Inf none)
	alpha  []float64 // per measurement: its weight in its level's combined observation
	exact  [][]int   // per level: the exact measurements observing T (the first one is used)
	noisy  [][]int   // per level: the noisy measurements observing T
	minObs int       // lowest observed level, or -1
	// cm[j]: for each cell of measurement j, its cell of T (nil when
	// measurement j does not observe T, or its cells are T's or T is empty).
	cm [][]int32
}

// validate checks the problem's shape.
func (p *Problem) validate() error {
	h := p.Hierarchy
	if h == nil {
		return fmt.Errorf("hier: no hierarchy")
	}
	if len(p.FlatSizes) > maxFlat {
		return fmt.Errorf("hier: %d flat dimensions, at most %d allowed", len(p.FlatSizes), maxFlat)
	}
	for d, n := range p.FlatSizes {
		if n < 1 {
			return fmt.Errorf("hier: flat dimension %d has size %d", d, n)
		}
	}
	for j, m := range p.Measurements {
		if err := p.checkView(View{m.Flat, m.Level}); err != nil {
			return fmt.Errorf("hier: measurement %d: %w", j, err)
		}
		want := h.Nodes(m.Level) * p.cells(m.Flat)
		if len(m.Values) != want {
			return fmt.Errorf("hier: measurement %d (flat %v, level %d) has %d values, want %d", j, m.Flat, m.Level, len(m.Values), want)
		}
		if !(m.Variance >= 0) || math.IsInf(m.Variance, 1) {
			return fmt.Errorf("hier: measurement %d has variance %v", j, m.Variance)
		}
	}
	return nil
}

// validateValues checks that every measured value is finite.
func (p *Problem) validateValues() error {
	for j, m := range p.Measurements {
		for i, v := range m.Values {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("hier: measurement %d has value %v in cell %d", j, v, i)
			}
		}
	}
	return nil
}

// checkView checks that a view's dimensions and level exist.
func (p *Problem) checkView(v View) error {
	if v.Flat>>len(p.FlatSizes) != 0 {
		return fmt.Errorf("flat set %v outside the %d flat dimensions", v.Flat, len(p.FlatSizes))
	}
	if v.Level < 0 || v.Level > p.Hierarchy.RootLevel() {
		return fmt.Errorf("level %d outside 0..%d", v.Level, p.Hierarchy.RootLevel())
	}
	return nil
}

// cells returns Π_{d∈f} n_d.
func (p *Problem) cells(f Flat) int {
	n := 1
	for _, d := range f.dims() {
		n *= p.FlatSizes[d]
	}
	return n
}

// nontrivial drops the dimensions of size 1 from f: a residual over such a
// dimension is identically zero.
func (p *Problem) nontrivial(f Flat) Flat {
	for _, d := range f.dims() {
		if p.FlatSizes[d] == 1 {
			f &^= 1 << d
		}
	}
	return f
}

// plan returns how the measurements observe residual t.
func (p *Problem) plan(t Flat) *tplan {
	levels := p.Hierarchy.Levels()
	tp := &tplan{
		t:      t,
		dims:   t.dims(),
		sigma2: make([]float64, levels),
		alpha:  make([]float64, len(p.Measurements)),
		exact:  make([][]int, levels),
		noisy:  make([][]int, levels),
		minObs: -1,
		nc:     1,
	}
	for _, d := range tp.dims {
		tp.sizes = append(tp.sizes, p.FlatSizes[d])
		tp.nc *= p.FlatSizes[d]
	}
	prec := make([]float64, levels)
	tp.cm = make([][]int32, len(p.Measurements))
	for j, m := range p.Measurements {
		if m.Flat&t != t {
			continue
		}
		if cells := p.cells(m.Flat); cells != tp.nc && tp.nc > 1 {
			tp.cm[j] = cellMap(p.FlatSizes, m.Flat.dims(), tp.dims)
		}
		if m.Variance == 0 {
			tp.exact[m.Level] = append(tp.exact[m.Level], j)
			continue
		}
		tp.noisy[m.Level] = append(tp.noisy[m.Level], j)
		prec[m.Level] += 1 / (m.Variance * float64(p.cells(m.Flat&^t)))
	}
	for k := range levels {
		switch {
		case len(tp.exact[k]) > 0:
			tp.sigma2[k] = 0
			tp.alpha[tp.exact[k][0]] = 1
		case len(tp.noisy[k]) > 0:
			tp.sigma2[k] = 1 / prec[k]
			for _, j := range tp.noisy[k] {
				m := p.Measurements[j]
				tp.alpha[j] = 1 / (m.Variance * float64(p.cells(m.Flat&^t))) / prec[k]
			}
		default:
			tp.sigma2[k] = math.Inf(1)
			continue
		}
		if tp.minObs < 0 {
			tp.minObs = k
		}
	}
	return tp
}

// determined reports whether H_level u_T is determined by the
// measurements planned in tp, and if not why.
func (p *Problem) determined(tp *tplan, level int) error {
	h := p.Hierarchy
	if tp.minObs < 0 {
		return fmt.Errorf("no measurement contains the flat dimensions %v", tp.t)
	}
	if tp.minObs <= level || h.Nodes(level) == h.Nodes(tp.minObs) {
		return nil
	}
	return fmt.Errorf("every measurement containing the flat dimensions %v is at level %d or coarser, and level %d does not map one-to-one onto it", tp.t, tp.minObs, level)
}

// Determined returns nil when the measurements determine the table of v
// (every estimate of it is the same), and otherwise an error naming the
// residual that is not determined. The table of (S, ℓ) is determined iff
// for every set T ⊆ S of flat dimensions of size > 1 some measurement j
// has S_j ⊇ T, and the lowest level ℓ* of those measurements is at most ℓ
// or the roll-up from level ℓ to ℓ* is one-to-one (Nodes(ℓ) == Nodes(ℓ*)).
func (p *Problem) Determined(v View) error {
	if err := p.validate(); err != nil {
		return err
	}
	if err := p.checkView(v); err != nil {
		return fmt.Errorf("hier: view %v level %d: %w", v.Flat, v.Level, err)
	}
	return p.determinedView(v, nil)
}

func (p *Problem) determinedView(v View, plans map[Flat]*tplan) error {
	s := p.nontrivial(v.Flat)
	for t := range subsets(s) {
		tp := plans[t]
		if tp == nil {
			tp = p.plan(t)
			if plans != nil {
				plans[t] = tp
			}
		}
		if err := p.determined(tp, v.Level); err != nil {
			return fmt.Errorf("hier: table of flat dimensions %v at level %d is not determined: %w", v.Flat, v.Level, err)
		}
	}
	return nil
}

// subsets yields every subset of s, s first and the empty set last.
func subsets(s Flat) func(func(Flat) bool) {
	return func(yield func(Flat) bool) {
		for t := s; ; t = (t - 1) & s {
			if !yield(t) || t == 0 {
				return
			}
		}
	}
}

// Solve computes the weighted least-squares estimate of the data given the
// measurements (weights 1/variance, exact measurements as equality
// constraints) and returns the tables of the queries. It fails when the
// problem is malformed, when exact measurements disagree, or when a query's
// table is not determined by the measurements (see Determined).
func Solve(ctx context.Context, p Problem, queries []View) (*Solution, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	if err := p.validateValues(); err != nil {
		return nil, err
	}
	plans := map[Flat]*tplan{}
	for q, v := range queries {
		if err := p.checkView(v); err != nil {
			return nil, fmt.Errorf("hier: query %d: %w", q, err)
		}
		if err := p.determinedView(v, plans); err != nil {
			return nil, fmt.Errorf("%w (query %d)", err, q)
		}
	}
	// Exact measurements must agree on every residual they share, whether
	// or not a query needs it.
	for j, mj := range p.Measurements {
		for k := j + 1; k < len(p.Measurements); k++ {
			mk := p.Measurements[k]
			if mj.Variance != 0 || mk.Variance != 0 {
				continue
			}
			for t := range subsets(p.nontrivial(mj.Flat & mk.Flat)) {
				if plans[t] == nil {
					plans[t] = p.plan(t)
				}
			}
		}
	}
	ts := make([]Flat, 0, len(plans))
	for t := range plans {
		ts = append(ts, t)
	}
	// Largest residuals first (a fixed order: the first error is the same
	// however the work is split).
	sort.Slice(ts, func(a, b int) bool {
		if plans[ts[a]].nc != plans[ts[b]].nc {
			return plans[ts[a]].nc > plans[ts[b]].nc
		}
		return ts[a] < ts[b]
	})
	p.Measurements = slices.Clone(p.Measurements) // the laws read Flat, Level and Variance
	s := &Solution{p: &p, queries: slices.Clone(queries), res: make(map[Flat]*resid, len(ts))}
	rowAbs := p.exactRowAbs()
	// One residual after the other, each split over the workers by rows:
	// one residual (the finest) often holds most of the work.
	for _, t := range ts {
		r, err := p.solveResidual(ctx, plans[t], rowAbs)
		if err != nil {
			return nil, err
		}
		s.res[t] = r
	}
	if err := s.tables(ctx); err != nil {
		return nil, err
	}
	// The laws need only the per-node coefficients.
	for _, r := range s.res {
		r.z = nil
	}
	return s, nil
}

// parallel runs fn(0..n-1) on at most workers goroutines (GOMAXPROCS when
// workers <= 0), taking indices in increasing order and stopping at the
// first error or when ctx is done. The error returned is that of the lowest
// failing index: every lower index was taken before it and runs to its
// end, so the error does not depend on scheduling.
func parallel(ctx context.Context, n, workers int, fn func(i int) error) error {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, n)
	var (
		mu     sync.Mutex
		next   int
		failed = -1
		first  error
		wg     sync.WaitGroup
	)
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if failed >= 0 || next >= n {
			return 0, false
		}
		if err := ctx.Err(); err != nil {
			failed, first = next, err
			return 0, false
		}
		next++
		return next - 1, true
	}
	for range workers {
		wg.Go(func() {
			for {
				i, ok := take()
				if !ok {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if failed < 0 || i < failed {
						failed, first = i, err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// exactRowAbs returns, for every exact measurement, the sum of the absolute
// values of each node's row (internal order): a bound on every centred
// marginal of the row, used to scale the tolerance of consistency checks.
func (p *Problem) exactRowAbs() [][]float64 {
	h := p.Hierarchy
	out := make([][]float64, len(p.Measurements))
	for j, m := range p.Measurements {
		if m.Variance != 0 {
			continue
		}
		cells := p.cells(m.Flat)
		ra := make([]float64, h.Nodes(m.Level))
		for i := range ra {
			var s float64
			for _, v := range m.Values[i*cells : (i+1)*cells] {
				s += math.Abs(v)
			}
			ra[h.pos[m.Level][i]] = s
		}
		out[j] = ra
	}
	return out
}

// consistencyTol is the relative tolerance within which exact
// measurements must agree.
const consistencyTol = 1e-9

// cellMap returns, for every cell of a table over the dimensions sdims
// (row-major), the index of its cell in the table over tdims ⊆ sdims.
func cellMap(sizes []int, sdims, tdims []int) []int32 {
	n := 1
	for _, d := range sdims {
		n *= sizes[d]
	}
	stride := make([]int, len(sdims))
	st := 1
	for k := len(sdims) - 1; k >= 0; k-- {
		if slices.Contains(tdims, sdims[k]) {
			stride[k] = st
			st *= sizes[sdims[k]]
		}
	}
	out := make([]int32, n)
	idx := make([]int, len(sdims))
	cur := 0
	for c := range n {
		out[c] = int32(cur)
		for k := len(sdims) - 1; k >= 0; k-- {
			idx[k]++
			cur += stride[k]
			if idx[k] < sizes[sdims[k]] {
				break
			}
			cur -= idx[k] * stride[k]
			idx[k] = 0
		}
	}
	return out
}

// addRow adds alpha times the T-marginal (sum over Flat \ T) of row i
// (the caller's numbering) of measurement j to dst, nc cells.
func (p *Problem) addRow(dst []float64, j int, tp *tplan, i int, alpha float64) {
	m := p.Measurements[j]
	cells := len(m.Values) / p.Hierarchy.nodes[m.Level]
	src := m.Values[i*cells : (i+1)*cells]
	switch cm := tp.cm[j]; {
	case cells == tp.nc:
		for c, v := range src {
			dst[c] += alpha * v
		}
	case tp.nc == 1:
		var s float64
		for _, v := range src {
			s += v
		}
		dst[0] += alpha * s
	default:
		for c, v := range src {
			dst[cm[c]] += alpha * v
		}
	}
}

// byRows runs fn over the rows 0..n-1 of nc cells each, split into chunks
// of at least rowGrain cells that the workers take in order; it returns the
// error of the lowest chunk that failed. A row is always computed the same
// way, so the result does not depend on the number of workers.
func byRows(ctx context.Context, workers, n, nc int, fn func(r0, r1 int) error) error {
	grain := max(1, rowGrain/max(nc, 1))
	chunks := (n + grain - 1) / grain
	if chunks <= 1 {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fn(0, n)
	}
	return parallel(ctx, chunks, workers, func(c int) error {
		return fn(c*grain, min(n, (c+1)*grain))
	})
}

// rowGrain is the number of cells below which rows are not split further
// between workers.
const rowGrain = 1 << 14

// centre centres the rows of a row-major array (rows × Π sizes) along
// every dimension of sizes, x_v ← x_v - mean_v x, and returns the scratch
// buffer for reuse. It is called on single rows of a few dozen cells, so
// it avoids calls (copy) in its inner loops.
func centre(buf []float64, sizes []int, scratch []float64) []float64 {
	total := len(buf)
	inner := total
	for k, n := range sizes {
		if k == 0 {
			inner = 1
			for _, s := range sizes[1:] {
				inner *= s
			}
		} else {
			inner /= n
		}
		block := n * inner
		inv := 1 / float64(n)
		if inner == 1 {
			for o := 0; o < total; o += block {
				b := buf[o : o+block]
				m := b[0]
				for _, x := range b[1:] {
					m += x
				}
				m *= inv
				for v := range b {
					b[v] -= m
				}
			}
			continue
		}
		scratch = slices.Grow(scratch[:0], inner)[:inner]
		for o := 0; o < total; o += block {
			b := buf[o : o+block]
			for i, x := range b[:inner] {
				scratch[i] = x
			}
			for v := 1; v < n; v++ {
				for i, x := range b[v*inner : (v+1)*inner] {
					scratch[i] += x
				}
			}
			for i := range scratch {
				scratch[i] *= inv
			}
			for v := range n {
				row := b[v*inner : (v+1)*inner]
				for i := range row {
					row[i] -= scratch[i]
				}
			}
		}
	}
	return scratch
}

// store copies a row of a few dozen cells (a loop: cheaper than a call to
// copy at that size).
func store(dst, src []float64) {
	dst = dst[:len(src)]
	for i, x := range src {
		dst[i] = x
	}
}

// solveResidual solves the tree problem of residual T for all its columns,
// its rows split over the workers.
func (p *Problem) solveResidual(ctx context.Context, tp *tplan, rowAbs [][]float64) (*resid, error) {
	h := p.Hierarchy
	L := h.RootLevel()
	N := h.total()
	nc := tp.nc
	z := make([]float64, N*nc)

	// Observations, row by row: each level's combined observation, centred
	// over T.
	for k := 0; k <= L; k++ {
		ex, no := tp.exact[k], tp.noisy[k]
		if len(ex) == 0 && len(no) == 0 {
			continue
		}
		// By the caller's numbering, so that the measurements are read in
		// order; each row is made in a scratch row and stored once.
		err := byRows(ctx, p.Workers, h.nodes[k], nc, func(i0, i1 int) error {
			acc := make([]float64, nc)
			var scratch, tmp []float64
			for i := i0; i < i1; i++ {
				r := int(h.pos[k][i])
				clear(acc)
				if len(ex) == 0 {
					for _, j := range no {
						p.addRow(acc, j, tp, i, tp.alpha[j])
					}
					scratch = centre(acc, tp.sizes, scratch)
					store(z[(h.off[k]+r)*nc:], acc)
					continue
				}
				j0 := ex[0]
				p.addRow(acc, j0, tp, i, 1)
				scratch = centre(acc, tp.sizes, scratch)
				store(z[(h.off[k]+r)*nc:], acc)
				for _, j := range ex[1:] {
					tmp = slices.Grow(tmp[:0], nc)[:nc]
					clear(tmp)
					p.addRow(tmp, j, tp, i, 1)
					scratch = centre(tmp, tp.sizes, scratch)
					tol := consistencyTol * (rowAbs[j0][r] + rowAbs[j][r])
					for c := range nc {
						if x, y := acc[c], tmp[c]; math.Abs(x-y) > tol {
							return fmt.Errorf("hier: inconsistent invariants: exact measurements %d and %d disagree at level %d node %d (flat residual %v, cell %d): %v vs %v",
								j0, j, k, i, tp.t, c, x, y)
						}
					}
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}

	// Coefficients of the two passes (the same for every column).
	r := &resid{plan: tp, z: z, a: make([]float64, N), b: make([]float64, N), g: make([]float64, N)}
	w := make([]float64, N)
	inf := math.Inf(1)
	var checks []float64 // per node: the tolerance of its consistency check, or -1
	var mag []float64    // scale of the exact value of nodes with w = 0
	anyExact := false
	for k := range tp.exact {
		anyExact = anyExact || len(tp.exact[k]) > 0
	}
	if anyExact {
		mag = make([]float64, N)
		checks = make([]float64, N)
		for i := range checks {
			checks[i] = -1
		}
	}
	ownMag := func(k, i int) float64 {
		var m float64
		for _, j := range tp.exact[k] {
			m = max(m, rowAbs[j][i])
		}
		return m
	}
	s2 := tp.sigma2[0]
	for i := range h.nodes[0] {
		if math.IsInf(s2, 1) {
			w[i] = inf
			continue
		}
		w[i], r.a[i] = s2, 1
		if s2 == 0 {
			mag[i] = ownMag(0, i)
		}
	}
	for k := 1; k <= L; k++ {
		s2 := tp.sigma2[k]
		cbase, cs := h.off[k-1], h.cstart[k]
		for pp := range h.nodes[k] {
			gp := h.off[k] + pp
			c0, c1 := cbase+int(cs[pp]), cbase+int(cs[pp+1])
			var W, cmag float64
			nInf := 0
			for c := c0; c < c1; c++ {
				if math.IsInf(w[c], 1) {
					nInf++
				} else {
					W += w[c]
				}
			}
			if nInf > 0 {
				W = inf
			} else if W == 0 {
				for c := c0; c < c1; c++ {
					cmag += mag[c]
				}
			}
			// Downward gains of the children.
			switch {
			case nInf > 0:
				for c := c0; c < c1; c++ {
					if math.IsInf(w[c], 1) {
						r.g[c] = 1 / float64(nInf)
					}
				}
			case W > 0:
				for c := c0; c < c1; c++ {
					r.g[c] = w[c] / W
				}
			}
			// Upward combination with the node's own observation.
			switch {
			case s2 == 0:
				r.a[gp], w[gp] = 1, 0
				mag[gp] = ownMag(k, pp)
				if W == 0 {
					checks[gp] = consistencyTol * (mag[gp] + cmag)
				}
			case math.IsInf(s2, 1):
				r.b[gp], w[gp] = 1, W
				if W == 0 {
					mag[gp] = cmag
				}
			case math.IsInf(W, 1):
				r.a[gp], w[gp] = 1, s2
			case W == 0:
				r.b[gp], w[gp] = 1, 0
				mag[gp] = cmag
			default:
				r.a[gp] = W / (s2 + W)
				r.b[gp] = s2 / (s2 + W)
				w[gp] = s2 * W / (s2 + W)
			}
		}
	}

	// Variances of the upward estimates and bounds of their sensitivities.
	r.vz, r.umax = w, make([]float64, N) // w is no longer needed
	r.cvz, r.cumax = make([]float64, N), make([]float64, N)
	for k := 0; k <= L; k++ {
		s2 := tp.sigma2[k]
		noisy := s2 > 0 && !math.IsInf(s2, 1)
		for pp := range h.nodes[k] {
			gp := h.off[k] + pp
			var v, u float64
			if ap := r.a[gp]; ap != 0 && noisy {
				v, u = ap*ap*s2, math.Abs(ap)
			}
			if k > 0 {
				var cv, cu float64
				for c := h.off[k-1] + int(h.cstart[k][pp]); c < h.off[k-1]+int(h.cstart[k][pp+1]); c++ {
					cv += r.vz[c]
					cu = max(cu, r.umax[c])
				}
				r.cvz[gp], r.cumax[gp] = cv, cu
				if bp := r.b[gp]; bp != 0 {
					v += bp * bp * cv
					u = max(u, math.Abs(bp)*cu)
				}
			}
			r.vz[gp], r.umax[gp] = v, u
		}
	}

	// Upward pass: z_p = a_p y_p + b_p Σ_c z_c, level by level, the parents
	// of a level split over the workers.
	for k := 1; k <= L; k++ {
		cbase, cs := h.off[k-1], h.cstart[k]
		err := byRows(ctx, p.Workers, h.nodes[k], nc, func(p0, p1 int) error {
			zsum := make([]float64, nc)
			for pp := p0; pp < p1; pp++ {
				gp := h.off[k] + pp
				c0, c1 := cbase+int(cs[pp]), cbase+int(cs[pp+1])
				store(zsum, z[c0*nc:(c0+1)*nc])
				for c := c0 + 1; c < c1; c++ {
					for i, x := range z[c*nc : (c+1)*nc] {
						zsum[i] += x
					}
				}
				row := z[gp*nc : (gp+1)*nc]
				if checks != nil && checks[gp] >= 0 {
					for i := range nc {
						if math.Abs(row[i]-zsum[i]) > checks[gp] {
							return p.inconsistent(tp, k, pp, i, row[i], zsum[i])
						}
					}
				}
				switch ap, bp := r.a[gp], r.b[gp]; {
				case ap == 1 && bp == 0:
				case ap == 0 && bp == 1:
					store(row, zsum)
				case ap == 0 && bp == 0:
					clear(row)
				default:
					for i := range row {
						row[i] = ap*row[i] + bp*zsum[i]
					}
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}

	// Downward pass: f_c = z_c + g_c (f_p - Σ_c' z_c'), level by level.
	for k := L; k >= 1; k-- {
		cbase, cs := h.off[k-1], h.cstart[k]
		err := byRows(ctx, p.Workers, h.nodes[k], nc, func(p0, p1 int) error {
			d := make([]float64, nc)
			for pp := p0; pp < p1; pp++ {
				gp := h.off[k] + pp
				c0, c1 := cbase+int(cs[pp]), cbase+int(cs[pp+1])
				active := false
				for c := c0; c < c1; c++ {
					active = active || r.g[c] != 0
				}
				if !active {
					continue
				}
				store(d, z[gp*nc:(gp+1)*nc])
				for c := c0; c < c1; c++ {
					for i, x := range z[c*nc : (c+1)*nc] {
						d[i] -= x
					}
				}
				for c := c0; c < c1; c++ {
					gc := r.g[c]
					if gc == 0 {
						continue
					}
					row := z[c*nc : (c+1)*nc]
					for i := range row {
						row[i] += gc * d[i]
					}
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return r, nil
}

// inconsistent describes exact measurements that disagree across levels:
// node pp of level k is exact and so is each of its children.
func (p *Problem) inconsistent(tp *tplan, k, pp, cell int, own, sum float64) error {
	h := p.Hierarchy
	var below []int
	var levels []int
	for l := 0; l < k; l++ {
		if len(tp.exact[l]) > 0 {
			below = append(below, tp.exact[l]...)
			levels = append(levels, l)
		}
	}
	return fmt.Errorf("hier: inconsistent invariants: exact measurement %d gives %v at level %d node %d (flat residual %v, cell %d), but exact measurements %v (levels %v) give its children a sum of %v",
		tp.exact[k][0], own, k, h.ext[k][pp], tp.t, cell, below, levels, sum)
}

// tables reconstructs the table of every query from the residual
// estimates, M_{S,ℓ} x = Σ_{T⊆S} broadcast_{S\T}(H_ℓ u_T) / Π_{d∈S\T} n_d,
// one row (node) at a time over every T, the rows of all the queries split
// over the workers.
func (s *Solution) tables(ctx context.Context) error {
	p := s.p
	h := p.Hierarchy
	type part struct {
		r   *resid
		inv float64
		cm  []int32
	}
	type job struct{ q, n0, n1 int }
	var jobs []job
	parts := make([][]part, len(s.queries))
	s.Tables = make([][]float64, len(s.queries))
	for q, v := range s.queries {
		sd := v.Flat.dims()
		for t := range subsets(p.nontrivial(v.Flat)) {
			r := s.res[t]
			parts[q] = append(parts[q], part{r: r, inv: 1 / float64(p.cells(v.Flat&^t)), cm: cellMap(p.FlatSizes, sd, r.plan.dims)})
		}
		cells, nodes := p.cells(v.Flat), h.Nodes(v.Level)
		s.Tables[q] = make([]float64, nodes*cells)
		grain := max(1, rowGrain/cells)
		for n0 := 0; n0 < nodes; n0 += grain {
			jobs = append(jobs, job{q, n0, min(nodes, n0+grain)})
		}
	}
	// By the internal numbering, so that the residuals are read in order;
	// each row is made in a scratch row and stored once.
	return parallel(ctx, len(jobs), p.Workers, func(x int) error {
		jb := jobs[x]
		v := s.queries[jb.q]
		cells := p.cells(v.Flat)
		out := s.Tables[jb.q]
		acc := make([]float64, cells)
		for r := jb.n0; r < jb.n1; r++ {
			gi := h.off[v.Level] + r
			clear(acc)
			for _, pt := range parts[jb.q] {
				nc := pt.r.plan.nc
				src := pt.r.z[gi*nc : (gi+1)*nc]
				switch nc {
				case cells:
					for c, x := range src {
						acc[c] += pt.inv * x
					}
				case 1:
					x := pt.inv * src[0]
					for c := range acc {
						acc[c] += x
					}
				default:
					for c := range acc {
						acc[c] += pt.inv * src[pt.cm[c]]
					}
				}
			}
			i := int(h.ext[v.Level][r])
			store(out[i*cells:(i+1)*cells], acc)
		}
		return nil
	})
}
