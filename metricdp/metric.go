package metricdp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
)

// Metric is a privacy budget between the elements u_0..u_{N-1} of a finite
// universe: Dist(i, j) is d(u_i, u_j), the log of the largest factor by which
// moving one record from u_i to u_j may change an output probability.
//
// Distances are >= 0 and may be +Inf (the pair is not protected at all, as
// a Blowfish policy allows). A mechanism only needs the per-pair budgets; the
// triangle inequality is what makes the guarantee compose sensibly for
// records that move further (group privacy), so every metric built by this
// package satisfies it and Validate checks it for metrics given as matrices.
type Metric interface {
	// Len returns N, the size of the universe.
	Len() int
	// Dist returns d(u_i, u_j) for 0 <= i, j < N.
	Dist(i, j int) float64
}

// rowMetric is implemented by metrics that fill a row of distances faster
// than one Dist call per pair.
type rowMetric interface {
	// row sets dst[j-i-1] = Dist(i, j) for j in (i, N); len(dst) >= N-i-1.
	row(i int, dst []float64)
}

func fillRow(m Metric, i int, dst []float64) {
	if rm, ok := m.(rowMetric); ok {
		rm.row(i, dst)
		return
	}
	n := m.Len()
	for j := i + 1; j < n; j++ {
		dst[j-i-1] = m.Dist(i, j)
	}
}

// scanPairs calls visit(w, i, d) for every row i of the strict upper
// triangle, where d[j-i-1] = Dist(i, j), spreading rows over GOMAXPROCS
// workers numbered w = 0..workers-1; it returns the number of workers so
// callers can size per-worker state beforehand with scanWorkers. It stops
// early, returning ctx.Err(), when ctx is cancelled.
func scanPairs(ctx context.Context, m Metric, visit func(w, i int, d []float64)) error {
	n := m.Len()
	workers := scanWorkers(n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]float64, n)
			for {
				if ctx.Err() != nil {
					return
				}
				// Hand out rows in small batches: early rows are longer.
				i0 := int(next.Add(8)) - 8
				if i0 >= n-1 {
					return
				}
				for i := i0; i < min(i0+8, n-1); i++ {
					d := buf[:n-i-1]
					fillRow(m, i, d)
					visit(w, i, d)
				}
			}
		}()
	}
	wg.Wait()
	return ctx.Err()
}

// scanWorkers returns how many workers scanPairs uses for a universe of n.
func scanWorkers(n int) int {
	if n < 64 {
		return 1
	}
	return runtime.GOMAXPROCS(0)
}

// MinDist returns the smallest distance between two distinct elements: the
// epsilon of the ordinary eps-DP mechanism that gives every pair at least
// the protection the metric asks for.
func MinDist(ctx context.Context, m Metric) (float64, error) {
	if m.Len() < 2 {
		return 0, errors.New("metricdp: the universe needs at least 2 elements")
	}
	mins := make([]float64, scanWorkers(m.Len()))
	for w := range mins {
		mins[w] = math.Inf(1)
	}
	err := scanPairs(ctx, m, func(w, _ int, d []float64) {
		for _, v := range d {
			if v < mins[w] || math.IsNaN(v) {
				mins[w] = v
			}
		}
	})
	if err != nil {
		return 0, err
	}
	lo := math.Inf(1)
	for _, v := range mins {
		if v < lo || math.IsNaN(v) {
			lo = v
		}
	}
	if math.IsNaN(lo) {
		return 0, errors.New("metricdp: the metric has a NaN distance")
	}
	return lo, nil
}

// MaxDense is the largest universe for which the package stores all N^2
// distances (shortest-path metrics, closures): 4096 elements take 128 MiB.
const MaxDense = 4096

// Dense is a metric given by its full distance matrix.
type Dense struct {
	n int
	d []float64 // row-major n x n
}

// NewDense returns the metric with distance matrix d (N rows of N entries),
// after Validate. Use Closure first for budgets that break the triangle
// inequality.
func NewDense(ctx context.Context, d [][]float64) (*Dense, error) {
	m, err := denseFromRows(d)
	if err != nil {
		return nil, err
	}
	if err := Validate(ctx, m); err != nil {
		return nil, err
	}
	return m, nil
}

func denseFromRows(d [][]float64) (*Dense, error) {
	n := len(d)
	if n > MaxDense {
		return nil, fmt.Errorf("metricdp: %d universe elements exceed the dense-matrix limit of %d", n, MaxDense)
	}
	m := &Dense{n: n, d: make([]float64, n*n)}
	for i, row := range d {
		if len(row) != n {
			return nil, fmt.Errorf("metricdp: distance matrix row %d has %d entries, want %d", i, len(row), n)
		}
		copy(m.d[i*n:], row)
	}
	return m, nil
}

// Len implements Metric.
func (m *Dense) Len() int { return m.n }

// Dist implements Metric.
func (m *Dense) Dist(i, j int) float64 { return m.d[i*m.n+j] }

func (m *Dense) row(i int, dst []float64) { copy(dst, m.d[i*m.n+i+1:(i+1)*m.n]) }

// triangleTol is the relative slack Validate allows in the triangle
// inequality, for distances computed in floating point.
const triangleTol = 1e-9

// Validate checks that m is a metric on its universe: at least two
// elements, d(u,u) = 0, d(u,v) = d(v,u) > 0 for u != v (+Inf allowed, NaN
// not), and d(u,w) <= d(u,v) + d(v,w) up to a relative 1e-9 for floating
// point. It takes O(N^3) time and is meant for metrics given as matrices;
// the constructors of this package build metrics that satisfy it. A
// triangle violation is reported with the offending triple; Closure repairs
// it.
func Validate(ctx context.Context, m Metric) error {
	n := m.Len()
	if n < 2 {
		return fmt.Errorf("metricdp: the universe needs at least 2 elements, got %d", n)
	}
	for i := range n {
		if d := m.Dist(i, i); d != 0 {
			return fmt.Errorf("metricdp: d(u_%d, u_%d) = %v, want 0", i, i, d)
		}
		for j := i + 1; j < n; j++ {
			d, e := m.Dist(i, j), m.Dist(j, i)
			switch {
			case math.IsNaN(d) || math.IsNaN(e):
				return fmt.Errorf("metricdp: d(u_%d, u_%d) is NaN", i, j)
			case d != e:
				return fmt.Errorf("metricdp: not symmetric: d(u_%d, u_%d) = %v but d(u_%d, u_%d) = %v", i, j, d, j, i, e)
			case d <= 0:
				return fmt.Errorf("metricdp: d(u_%d, u_%d) = %v; distinct elements need a distance > 0 (merge elements that must be indistinguishable)", i, j, d)
			}
		}
	}
	for k := range n {
		if err := ctx.Err(); err != nil {
			return err
		}
		for i := range n {
			dik := m.Dist(i, k)
			if math.IsInf(dik, 1) {
				continue
			}
			for j := range n {
				dij, dkj := m.Dist(i, j), m.Dist(k, j)
				if sum := dik + dkj; dij > sum*(1+triangleTol) {
					return &TriangleError{I: i, J: j, K: k, IJ: dij, IK: dik, KJ: dkj}
				}
			}
		}
	}
	return nil
}

// TriangleError reports a triple that breaks the triangle inequality.
type TriangleError struct {
	I, J, K    int
	IJ, IK, KJ float64
}

func (e *TriangleError) Error() string {
	return fmt.Sprintf("metricdp: triangle inequality fails: d(u_%d, u_%d) = %v > d(u_%d, u_%d) + d(u_%d, u_%d) = %v + %v; "+
		"close the budgets into a metric by shortest paths (Closure)", e.I, e.J, e.IJ, e.I, e.K, e.K, e.J, e.IK, e.KJ)
}

// Closure returns the largest metric below the budgets d: the shortest-path
// distance in the complete graph with edge weights d(u_i, u_j) (Floyd-
// Warshall, O(N^3)). Budgets that break the triangle inequality promise
// protection they cannot deliver (a record can move from u to w through v
// at cost d(u,v) + d(v,w)); the closure states what is actually delivered.
// It also reports how many pairs were lowered. d must be symmetric with a
// zero diagonal, and positive, non-NaN entries off it (+Inf allowed).
func Closure(ctx context.Context, d Metric) (*Dense, int, error) {
	n := d.Len()
	if n < 2 {
		return nil, 0, fmt.Errorf("metricdp: the universe needs at least 2 elements, got %d", n)
	}
	if n > MaxDense {
		return nil, 0, fmt.Errorf("metricdp: %d universe elements exceed the dense-matrix limit of %d", n, MaxDense)
	}
	m := &Dense{n: n, d: make([]float64, n*n)}
	for i := range n {
		for j := range n {
			v := d.Dist(i, j)
			if i == j {
				if v != 0 {
					return nil, 0, fmt.Errorf("metricdp: d(u_%d, u_%d) = %v, want 0", i, i, v)
				}
				continue
			}
			if math.IsNaN(v) || v <= 0 {
				return nil, 0, fmt.Errorf("metricdp: d(u_%d, u_%d) = %v; off-diagonal budgets must be > 0", i, j, v)
			}
			if j < i && v != m.d[j*n+i] {
				return nil, 0, fmt.Errorf("metricdp: not symmetric: d(u_%d, u_%d) = %v but d(u_%d, u_%d) = %v", j, i, m.d[j*n+i], i, j, v)
			}
			m.d[i*n+j] = v
		}
	}
	lowered := floydWarshall(ctx, m)
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	return m, lowered, nil
}

// floydWarshall closes m in place and returns the number of ordered pairs
// (i < j) it lowered.
func floydWarshall(ctx context.Context, m *Dense) int {
	n := m.n
	orig := make([]float64, len(m.d))
	copy(orig, m.d)
	for k := range n {
		if ctx.Err() != nil {
			return 0
		}
		rk := m.d[k*n : (k+1)*n]
		for i := range n {
			dik := m.d[i*n+k]
			if math.IsInf(dik, 1) {
				continue
			}
			ri := m.d[i*n : (i+1)*n]
			for j, dkj := range rk {
				if s := dik + dkj; s < ri[j] {
					ri[j] = s
				}
			}
		}
	}
	lowered := 0
	for i := range n {
		for j := i + 1; j < n; j++ {
			if m.d[i*n+j] < orig[i*n+j] {
				lowered++
			}
		}
	}
	return lowered
}
