package metricdp

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"slices"

	"github.com/knowdp/knowdp/noise"
)

// Laplace is the d_X-private Laplace mechanism for k linear queries (the
// paper's Theorem 1 and Section 4.2): it releases F x + (Z_1, ..., Z_k) with
// independent grid Laplace noise Z_l of scale b_l, where the scales satisfy,
// for every pair of universe elements,
//
//	sum_l Loss_l(|F[l,i] - F[l,j]|) <= d(u_i, u_j),
//
// Loss_l being the exact worst-case privacy loss of query l's grid noise
// (noise.Laplace.Loss). That is the d_X condition for moving one record
// from u_i to u_j, checked for every pair before anything is released.
type Laplace struct {
	metric Metric
	q      *Queries
	ideal  []float64       // the strategy's continuous scales
	mech   []noise.Laplace // per query; zero value for queries released exactly
	n      int64           // records in the histogram: public under bounded d_X-privacy
	alloc  Allocation      // the strategy that produced ideal, and its note
}

// NewLaplace allocates scales to the queries with strategy s (Allocate) and
// calibrates the grid noise to them for histograms of n records. n is the
// (public) number of records; it bounds the answers so that the check that
// they fit the noise grid does not depend on the data.
func NewLaplace(ctx context.Context, m Metric, q *Queries, s Strategy, n int64) (*Laplace, error) {
	a, err := NewAllocation(ctx, m, q, s)
	if err != nil {
		return nil, err
	}
	l, err := NewLaplaceScales(ctx, m, q, a.Scales, n)
	if err != nil {
		return nil, err
	}
	l.alloc = *a
	return l, nil
}

// Allocation returns the strategy that allocated the scales and its note:
// Strategy differs from the one requested, and Note says why, only when the
// optimal allocation fell back to the best of strategies 1-3. For a
// mechanism built by NewLaplaceScales, Strategy is 0.
func (l *Laplace) Allocation() Allocation {
	a := l.alloc
	a.Scales = slices.Clone(l.ideal)
	return a
}

// NewLaplaceScales builds the mechanism from given ideal scales (0 for a
// query to be released exactly). The scales must satisfy the privacy
// condition up to rounding; the grid noise is calibrated to them, inflated
// by about one part in 2^18 for the grid, and the per-pair condition is
// verified exactly. It fails, naming a pair, if the scales are not private.
func NewLaplaceScales(ctx context.Context, m Metric, q *Queries, scales []float64, n int64) (*Laplace, error) {
	if err := checkUniverse(m, q); err != nil {
		return nil, err
	}
	if len(scales) != q.k {
		return nil, fmt.Errorf("metricdp: %d scales for %d queries", len(scales), q.k)
	}
	if n < 0 {
		return nil, fmt.Errorf("metricdp: number of records must be >= 0, got %d", n)
	}
	l := &Laplace{metric: m, q: q, ideal: slices.Clone(scales), mech: make([]noise.Laplace, q.k), n: n}
	inflate := 1 + 0x1p-18
	for attempt := 0; ; attempt++ {
		for i, b := range scales {
			if math.IsNaN(b) || math.IsInf(b, 0) || b < 0 {
				return nil, fmt.Errorf("metricdp: query %d scale %v; scales must be finite and >= 0", i, b)
			}
			if b == 0 {
				l.mech[i] = noise.Laplace{}
				continue
			}
			// The grid resolves the smallest coefficient gap, but not below
			// 2^-19 of the scale: finer grids would need discrete noise
			// beyond noise.MaxScale grid steps. Pairs closer than that pay
			// at most one grid step (below 2^-38 of the scale) extra, which
			// the per-pair check below accounts for.
			res := max(resolution(q, i), b*inflate*0x1p-19)
			mech, err := noise.NewLaplaceScale(b*inflate, res)
			if err != nil {
				return nil, fmt.Errorf("metricdp: query %d: %w", i, err)
			}
			if bound := float64(n) * maxAbs(q, i); !(bound < mech.Grid()*0x1p50) {
				return nil, fmt.Errorf("metricdp: query %d: answers up to %g on %d records do not fit the noise grid %g", i, bound, n, mech.Grid())
			}
			l.mech[i] = mech
		}
		worst, err := l.worstPair(ctx)
		if err != nil {
			return nil, err
		}
		if worst.ratio <= pairSlack {
			return l, nil
		}
		if attempt == 3 || worst.ratio > 1.01 {
			return nil, &PairError{I: worst.i, J: worst.j, Loss: worst.loss, Dist: worst.dist}
		}
		inflate *= worst.ratio * (1 + 0x1p-30)
	}
}

// pairSlack is the largest loss/distance ratio accepted: a little below 1,
// so that rounding in summing k losses cannot hide a true excess.
const pairSlack = 1 - 0x1p-40

// PairError reports a pair of universe elements whose privacy loss exceeds
// its budget.
type PairError struct {
	I, J       int
	Loss, Dist float64
}

func (e *PairError) Error() string {
	return fmt.Sprintf("metricdp: the scales are not d_X-private: moving a record from u_%d to u_%d loses %v > d = %v", e.I, e.J, e.Loss, e.Dist)
}

// resolution returns the smallest nonzero gap between query l's
// coefficients, the smallest input change its noise grid must resolve.
func resolution(q *Queries, l int) float64 {
	c := q.Row(l)
	slices.Sort(c)
	r := math.Inf(1)
	for i := 1; i < len(c); i++ {
		if g := c[i] - c[i-1]; g > 0 {
			r = min(r, g)
		}
	}
	return r
}

func maxAbs(q *Queries, l int) float64 {
	var m float64
	for i := range q.n {
		m = max(m, math.Abs(q.Coef(l, i)))
	}
	return m
}

type pairLoss struct {
	i, j              int
	loss, dist, ratio float64
}

// worstPair returns the pair with the largest ratio of privacy loss to
// distance. Each |F[l,i] - F[l,j]| is rounded up by one ulp before Loss, so
// that the float difference never understates the exact one.
func (l *Laplace) worstPair(ctx context.Context) (pairLoss, error) {
	nw := scanWorkers(l.q.n)
	worst := make([]pairLoss, nw)
	k := l.q.k
	err := scanPairs(ctx, l.metric, func(w, i int, d []float64) {
		ci := l.q.col(i)
		for o, dij := range d {
			if math.IsInf(dij, 1) {
				continue
			}
			j := i + 1 + o
			cj := l.q.col(j)
			var loss float64
			for c := range k {
				diff := math.Abs(ci[c] - cj[c])
				if diff == 0 {
					continue
				}
				if l.ideal[c] == 0 {
					loss = math.Inf(1)
					break
				}
				loss += l.mech[c].Loss(math.Nextafter(diff, math.Inf(1)))
			}
			if loss == 0 {
				continue
			}
			r := loss / dij // +Inf for dij = 0
			if r > worst[w].ratio || math.IsNaN(r) {
				worst[w] = pairLoss{i, j, loss, dij, r}
			}
		}
	})
	if err != nil {
		return pairLoss{}, err
	}
	out := worst[0]
	for _, p := range worst[1:] {
		if p.ratio > out.ratio {
			out = p
		}
	}
	if math.IsNaN(out.ratio) {
		out.ratio = math.Inf(1)
	}
	return out, nil
}

// PairLoss returns the exact worst-case privacy loss of the released
// answers when one record moves from u_i to u_j: sum_l Loss_l(|F[l,i] -
// F[l,j]|). d_X-privacy holds because it is at most d(u_i, u_j) for every
// pair.
func (l *Laplace) PairLoss(i, j int) float64 {
	var loss float64
	for c := range l.q.k {
		diff := math.Abs(l.q.Coef(c, i) - l.q.Coef(c, j))
		if diff == 0 {
			continue
		}
		if l.ideal[c] == 0 {
			return math.Inf(1)
		}
		loss += l.mech[c].Loss(math.Nextafter(diff, math.Inf(1)))
	}
	return loss
}

// Scales returns the noise scale of each query's released answer (0 for
// queries released exactly): the strategy's scale, inflated by about one
// part in 2^18 to pay for the noise grid.
func (l *Laplace) Scales() []float64 {
	s := make([]float64, len(l.mech))
	for i, m := range l.mech {
		if l.ideal[i] > 0 {
			s[i] = m.Scale()
		}
	}
	return s
}

// Variances returns the exact variance of each query's noise.
func (l *Laplace) Variances() []float64 {
	v := make([]float64, len(l.mech))
	for i, m := range l.mech {
		if l.ideal[i] > 0 {
			v[i] = m.Variance()
		}
	}
	return v
}

// Release answers the queries on histogram x (N non-negative counts summing
// to the n given at construction). Each answer is computed exactly, rounded
// to its noise grid and noised there, so the output depends on x only
// through the rounded exact answers.
func (l *Laplace) Release(r *noise.Rand, x []int64) ([]float64, error) {
	if err := checkHistogram(x, l.q.n, l.n); err != nil {
		return nil, err
	}
	out := make([]float64, l.q.k)
	for c := range l.q.k {
		if l.ideal[c] == 0 {
			out[c] = exactDot(l.q, c, x, 0)
			continue
		}
		g := l.mech[c].Grid()
		v, err := l.mech[c].Add(r, exactDot(l.q, c, x, g))
		if err != nil {
			return nil, fmt.Errorf("metricdp: query %d: %w", c, err)
		}
		out[c] = v
	}
	return out, nil
}

// checkHistogram validates a histogram against the universe size and the
// public number of records.
func checkHistogram(x []int64, n int, records int64) error {
	if len(x) != n {
		return fmt.Errorf("metricdp: histogram has %d cells, the universe has %d elements", len(x), n)
	}
	var s int64
	for i, v := range x {
		if v < 0 {
			return fmt.Errorf("metricdp: histogram cell %d is %d; counts must be >= 0", i, v)
		}
		if s += v; s < 0 {
			return fmt.Errorf("metricdp: histogram total overflows")
		}
	}
	if s != records {
		return fmt.Errorf("metricdp: histogram has %d records, the mechanism was calibrated for %d", s, records)
	}
	return nil
}

// exactDot returns sum_i F[l,i] x_i computed exactly and then, for grid > 0
// (a power of two), rounded half up to a multiple of grid, or for grid = 0
// rounded to the nearest float64. Every float64 is an integer mantissa times
// a power of two, so each term m * 2^e * x_i is accumulated exactly into a
// 192-bit integer per exponent e; the few per-exponent sums are combined
// with big integers at the end.
func exactDot(q *Queries, l int, x []int64, grid float64) float64 {
	type acc struct{ w [3]uint64 }
	buckets := map[int]*[2]acc{} // exponent -> positive and negative sums
	emin := math.MaxInt
	for i, xi := range x {
		c := q.Coef(l, i)
		if xi == 0 || c == 0 {
			continue
		}
		fr, e := math.Frexp(c) // c = fr * 2^e, |fr| in [1/2, 1)
		mant := int64(math.Ldexp(fr, 53))
		e -= 53
		neg := 0
		if mant < 0 {
			mant, neg = -mant, 1
		}
		hi, lo := bits.Mul64(uint64(mant), uint64(xi)) // xi > 0
		b := buckets[e]
		if b == nil {
			b = new([2]acc)
			buckets[e] = b
			emin = min(emin, e)
		}
		a := &b[neg]
		var carry uint64
		a.w[0], carry = bits.Add64(a.w[0], lo, 0)
		a.w[1], carry = bits.Add64(a.w[1], hi, carry)
		a.w[2] += carry
	}
	if len(buckets) == 0 {
		return 0
	}
	var sum, t, w big.Int
	for e, b := range buckets {
		for sign, a := range b {
			// t = w2 2^128 + w1 2^64 + w0, portably (big.Word may be 32 bits).
			t.SetUint64(a.w[2])
			t.Lsh(&t, 64)
			t.Add(&t, w.SetUint64(a.w[1]))
			t.Lsh(&t, 64)
			t.Add(&t, w.SetUint64(a.w[0]))
			t.Lsh(&t, uint(e-emin))
			if sign == 1 {
				sum.Sub(&sum, &t)
			} else {
				sum.Add(&sum, &t)
			}
		}
	}
	if grid == 0 {
		f, _ := new(big.Float).SetInt(&sum).Float64()
		return math.Ldexp(f, emin)
	}
	_, ge := math.Frexp(grid)
	ge-- // grid = 2^ge
	shift := emin - ge
	if shift >= 0 {
		sum.Lsh(&sum, uint(shift))
	} else {
		// floor((sum + 2^(s-1)) / 2^s) with s = -shift: Rsh floors.
		var half big.Int
		half.Lsh(big.NewInt(1), uint(-shift-1))
		sum.Add(&sum, &half)
		sum.Rsh(&sum, uint(-shift))
	}
	// |sum| < 2^50 by the bound checked at construction.
	return math.Ldexp(float64(sum.Int64()), ge)
}
