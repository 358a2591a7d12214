package integer

import (
	"fmt"
	"math"
	"strings"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/tensor"
	"github.com/knowdp/knowdp/noise"
)

// Problems of one column at a time.
//
// When the parent's margin (a) covers every flat dimension of the detail
// table and no invariant is at or below the level (no margin (b)), the
// children's problem falls apart into one problem per column, a cell g of
// the flat dimensions: the children's counts at g must add up to the
// parent's count at g, and nothing else ties them. Each column is then
// solved exactly in time linear in its children (a sort for the
// non-negative step):
//
//   - the non-negative least-squares point is the Euclidean projection of
//     the column onto the simplex {y >= 0, Σ y = t} (t the parent's
//     non-negative count), y = max(x - τ, 0) (Michelot 1986, see
//     projectSimplex); a column that is already feasible is kept as it is;
//   - the move onto the parent's integer count T is the least Σ d²/z with
//     Σ d = T - Σ z: d proportional to z, never negative for T >= 0;
//   - the rounding is Srinivasan's (2001) dependent rounding along the
//     column, in the fixed point of RoundInteger: the first two fractional
//     cells (a, b) become (a + α, b - α) with probability β/(α+β), else
//     (a - β, b + β), α = min(1-a, b), β = min(a, 1-b), which keeps their
//     sum and each expectation and makes one of them whole; the other goes
//     on with the next fractional cell. The sum of the fractional parts is
//     a whole number, so every cell ends whole and the column adds up to T
//     (up to the quantisation of the fractions, which a repair of one unit
//     undoes where it matters and Method reports).
//
// That is what RoundInteger does on the same problem (a network with one
// margin node per column is a set of stars), in linear time instead of the
// iterations of Dykstra's method and the search for cycles; it is unbiased
// in the same way, E[y] = z cell by cell.

// separable reports whether the children's problems of level lv (under the
// level par) are one problem per column.
func (p *ivPlan) separable(lv, par *ivLevel) bool {
	return par != nil && !lv.root && len(lv.marg) == 0 && lv.flat&par.flat == lv.flat
}

// solveColumns is solve for a separable level: it rounds the children ch of
// parent q column by column and stores their non-negative and integer
// tables in lv.nn and lv.y.
func (p *ivPlan) solveColumns(s *domain.Schema, lv, par *ivLevel, q int, ch []int32, r *noise.Rand) ivStats {
	st := ivStats{exact: true}
	outer, n, inner := p.split(s, lv.d)
	k := len(ch)
	x := make([]float64, outer*k*inner)
	ivGather(x, lv.est, outer, n, inner, ch)
	// The parent's non-negative and integer counts on every flat cell of
	// lv.d, laid out as the columns: outer × inner.
	po, pn, pi := p.split(s, par.d)
	row := make([]float64, po*pi)
	psizes := tensor.SubSizes(s.Sizes(), par.flat)
	keep := tensor.Reindex(lv.flat, par.flat)
	tReal := make([]float64, outer*inner)
	tInt := make([]float64, outer*inner)
	ivGather(row, par.nn, po, pn, pi, []int32{int32(q)})
	tensor.Project(psizes, keep, row, tReal)
	ivGather(row, par.y, po, pn, pi, []int32{int32(q)})
	tensor.Project(psizes, keep, row, tInt)

	zh := make([]float64, len(x))
	y := make([]float64, len(x))
	col := make([]float64, k)
	buf := make([]float64, k)
	iy := make([]int64, k)
	for o := range outer {
		for in := range inner {
			c := o*inner + in
			at := func(j int) int { return (o*k+j)*inner + in }
			for j := range k {
				col[j] = x[at(j)]
			}
			t := tReal[c]
			if !columnFeasible(col, t) {
				projectSimplex(col, max(t, 0), buf)
			}
			var sum float64
			for _, v := range col {
				sum += v
			}
			st.residual = max(st.residual, math.Abs(sum-max(t, 0)))
			for j := range k {
				zh[at(j)] = col[j]
			}
			if p.nonneg {
				continue
			}
			// Onto the parent's integer count, in proportion.
			for j, v := range col {
				col[j] = max(v, 0)
			}
			sum = 0
			for _, v := range col {
				sum += v
			}
			T := tInt[c]
			if sum > 0 {
				f := (T - sum) / sum
				for j, v := range col {
					col[j] = v + v*f
				}
			} else if T != 0 {
				// No child can take the parent's count: cannot happen for
				// a parent rounded from these children's estimate, which
				// is 0 wherever theirs is; spread it rather than fail.
				st.fallback = true
				for j := range col {
					col[j] = T / float64(k)
				}
			}
			if roundColumn(col, int64(T), r, iy) {
				st.repaired = true
			}
			for j, v := range iy {
				y[at(j)] = float64(v)
			}
		}
	}
	ivScatter(lv.nn, zh, outer, n, inner, ch)
	if p.nonneg {
		ivScatter(lv.y, zh, outer, n, inner, ch)
	} else {
		ivScatter(lv.y, y, outer, n, inner, ch)
	}
	return st
}

// columnFeasible reports whether the column is non-negative and adds up to
// t, both to 1e-9 relative (as ivFeasible).
func columnFeasible(col []float64, t float64) bool {
	var sum float64
	for _, v := range col {
		if v < -1e-9*max(1, math.Abs(v)) {
			return false
		}
		sum += v
	}
	return math.Abs(sum-t) <= 1e-9*max(1, math.Abs(t))
}

// projectSimplex replaces v by its Euclidean projection onto {y >= 0,
// Σ y = t}, t >= 0: y = max(v - τ, 0) where τ makes the sum t. τ is found
// by Michelot's (1986) iteration: τ = (Σ_A v - t)/|A| over the active set
// A, starting from every value; the values at or below τ leave A and τ is
// recomputed, until none leaves. τ only grows, A ends as the support of y,
// and no sort is needed (buf, len(v), is scratch).
func projectSimplex(v []float64, t float64, buf []float64) {
	if t == 0 {
		clear(v)
		return
	}
	act := append(buf[:0], v...)
	var tau float64
	for {
		var sum float64
		for _, x := range act {
			sum += x
		}
		tau = (sum - t) / float64(len(act))
		kept := act[:0]
		for _, x := range act {
			if x > tau {
				kept = append(kept, x)
			}
		}
		if len(kept) == len(act) {
			break
		}
		act = kept
	}
	for i, x := range v {
		v[i] = max(x-tau, 0)
	}
}

// roundColumn rounds z >= 0, whose sum is the whole number target up to
// floating-point error, to integers y (len(z)) that add up to target, with
// E[y] = z cell by cell (dependent rounding along the column, see the file
// comment). It reports whether the quantisation of the fractions left the
// sum off and a unit was moved to restore it.
func roundColumn(z []float64, target int64, r *noise.Rand, y []int64) bool {
	cur, wc := -1, int64(0)
	settle := func(j int, w int64) {
		if w == fixedOne {
			y[j]++
		}
	}
	for j, v := range z {
		f, w := splitFixed(v)
		y[j] = f
		if w == 0 {
			continue
		}
		if cur < 0 {
			cur, wc = j, w
			continue
		}
		a, b := wc, w
		alpha, beta := min(fixedOne-a, b), min(a, fixedOne-b)
		if int64(r.Uint64N(uint64(alpha+beta))) < beta {
			a, b = a+alpha, b-alpha
		} else {
			a, b = a-beta, b+beta
		}
		aWhole, bWhole := a == 0 || a == fixedOne, b == 0 || b == fixedOne
		switch {
		case aWhole && bWhole:
			settle(cur, a)
			settle(j, b)
			cur = -1
		case aWhole:
			settle(cur, a)
			cur, wc = j, b
		default:
			settle(j, b)
			wc = a
		}
	}
	if cur >= 0 {
		// The fractions' sum is whole only up to their quantisation: the
		// last one left is nearly 0 or 1; round it alone, unbiased.
		if int64(r.Uint64N(uint64(fixedOne))) < wc {
			y[cur]++
		}
	}
	var sum int64
	for _, v := range y {
		sum += v
	}
	if sum == target {
		return false
	}
	// Off by the quantisation: move single units where the fraction was
	// closest to the other side.
	for sum != target {
		best, bestGap := -1, math.Inf(1)
		for j, v := range z {
			var gap float64
			if sum < target {
				gap = float64(y[j]) + 1 - v // raising j
			} else {
				if y[j] == 0 {
					continue
				}
				gap = v - (float64(y[j]) - 1) // lowering j
			}
			if gap < bestGap {
				best, bestGap = j, gap
			}
		}
		if best < 0 {
			break
		}
		if sum < target {
			y[best]++
			sum++
		} else {
			y[best]--
			sum--
		}
	}
	return true
}

// columnsMethod describes, after the level's heading, how a separable level
// was rounded.
func (p *ivPlan) columnsMethod(b *strings.Builder, lv *ivLevel) {
	fmt.Fprintf(b, "one column (cell of %s) at a time, the parent's counts being the only margin: least-squares non-negative estimate given the parent's (the projection onto the simplex)", lv.aNames)
	if p.nonneg {
		return
	}
	b.WriteString(", moved onto the parent's integer count in proportion (linear in the parent's rounding error, so of mean zero), then unbiased dependent rounding along the column (Srinivasan's, each cell to its floor or ceiling, the column adding up exactly)")
	if lv.fallbacks > 0 {
		fmt.Fprintf(b, "; in %d of %d problems a column's children had no estimate where the parent has a count, which was spread equally (not exactly unbiased there)", lv.fallbacks, lv.problems)
	}
	if lv.repaired > 0 {
		fmt.Fprintf(b, "; in %d problems a unit was moved where the quantisation of the fractions left a column off by one", lv.repaired)
	}
}
