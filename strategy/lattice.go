package strategy

// The residual lattice. When every measured factor is an identity, a total
// or a residual (Helmert contrasts), the precision of the GLS estimate is
// diagonal in the residual basis: on each dimension the constants P0 and
// the contrasts P1 = I - J/n, and on the domain the products P_A (contrasts
// on the dimensions of A, constants elsewhere), one per subset A. A marginal
// C (identity on C, total elsewhere) measured with variance v per cell gives
// every A ⊆ C the precision (N/|C|)/v, where N is the number of cells and
// |C| = Π_{i∈C} n_i; the residual R_A (Helmert rows on A, total elsewhere)
// gives A alone the precision (N/|A|)/v. The workload's weight on A is
//
//	b_A = Σ_T w_T Π_{i∈A} tr(W_{T,i}ᵀW_{T,i} P1) Π_{i∉A} tr(W_{T,i}ᵀW_{T,i} P0),
//
// for any workload factors (prefix, ranges...), and the objective is
// Σ_A b_A / λ_A.

import (
	"fmt"
	"math/bits"

	"github.com/knowdp/knowdp/query"
)

// lattice is a workload's weight on the residual subsets of a domain.
type lattice struct {
	shape []int
	cells float64 // N
	// sets are the residuals with weight, b their weights; index finds
	// a set.
	sets  []uint64
	b     []float64
	index map[uint64]int
	// perTerm[t] lists (residual index, weight) of workload term t.
	perTerm [][]termShare
	// rows[t] is the number of queries of term t.
	rows []float64
	// marginal[t] is true when term t is a cuboid (identity or total
	// factors): all its queries then have the same variance under a
	// marginal-type strategy.
	marginal []bool
	// support[t] is the set of dimensions term t involves.
	support []uint64
	// maxOrder is the largest number of dimensions a term involves.
	maxOrder int
}

type termShare struct {
	set int
	b   float64
}

// maxSupport bounds the dimensions a workload term may involve.
const maxSupport = 20

// newLattice returns the workload's weights on the residuals; a residual
// known reports (known exactly: fixed by invariants) gets none.
func newLattice(shape []int, w query.Workload, known func(a uint64) bool) (*lattice, error) {
	l := &lattice{shape: shape, cells: 1, index: map[uint64]int{}}
	for _, n := range shape {
		l.cells *= float64(n)
	}
	for ti, wt := range w {
		var t0, t1 [64]float64
		var support, required uint64
		marg := true
		for i, f := range wt.Term {
			t0[i], t1[i] = splitTraces(f)
			if t1[i] > 1e-13*(t0[i]+t1[i]) {
				support |= 1 << i
			} else {
				t1[i] = 0
			}
			if t0[i] <= 1e-13*(t0[i]+t1[i]) {
				t0[i] = 0
				required |= 1 << i
			}
			if f.Kind != query.Identity && f.Kind != query.Total {
				marg = false
			}
		}
		if required&^support != 0 {
			// A factor with no weight at all (a zero matrix): the term
			// asks nothing, but keeps its place.
			l.perTerm = append(l.perTerm, nil)
			l.rows = append(l.rows, float64(wt.Term.Rows()))
			l.marginal = append(l.marginal, marg)
			l.support = append(l.support, 0)
			continue
		}
		k := bits.OnesCount64(support)
		if k > maxSupport {
			return nil, fmt.Errorf("strategy: workload term %d involves %d dimensions, at most %d", ti+1, k, maxSupport)
		}
		l.maxOrder = max(l.maxOrder, k)
		var shares []termShare
		// Every subset A of support containing required.
		free := support &^ required
		for sub := free; ; sub = (sub - 1) & free {
			a := sub | required
			v := wt.Weight
			for i := range shape {
				if a&(1<<i) != 0 {
					v *= t1[i]
				} else {
					v *= t0[i]
				}
			}
			if v > 0 && (known == nil || !known(a)) {
				p, ok := l.index[a]
				if !ok {
					p = len(l.sets)
					l.index[a] = p
					l.sets = append(l.sets, a)
					l.b = append(l.b, 0)
				}
				l.b[p] += v
				shares = append(shares, termShare{p, v})
			}
			if sub == 0 {
				break
			}
		}
		l.perTerm = append(l.perTerm, shares)
		l.rows = append(l.rows, float64(wt.Term.Rows()))
		l.marginal = append(l.marginal, marg)
		l.support = append(l.support, support)
	}
	if len(l.sets) == 0 {
		return nil, fmt.Errorf("strategy: the workload has no weight (or every residual it needs is known)")
	}
	return l, nil
}

// size returns |A| = Π_{i∈A} n_i.
func (l *lattice) size(a uint64) float64 {
	s := 1.0
	for i, n := range l.shape {
		if a&(1<<i) != 0 {
			s *= float64(n)
		}
	}
	return s
}

// rank returns Π_{i∈A} (n_i - 1), the dimension of P_A.
func (l *lattice) rank(a uint64) float64 {
	s := 1.0
	for i, n := range l.shape {
		if a&(1<<i) != 0 {
			s *= float64(n - 1)
		}
	}
	return s
}

// residualTerm returns R_A: Helmert contrasts on A, total elsewhere.
func residualTerm(shape []int, a uint64) query.Term {
	t := make(query.Term, len(shape))
	for i, n := range shape {
		if a&(1<<i) != 0 {
			t[i] = query.NewResidual(n)
		} else {
			t[i] = query.NewTotal(n)
		}
	}
	return t
}

// marginalTerm returns the cuboid C: identity on C, total elsewhere.
func marginalTerm(shape []int, c uint64) query.Term {
	return query.Marginal(shape, func(d int) bool { return c&(1<<d) != 0 })
}

// setString names a subset of dimensions, 1-based.
func setString(a uint64) string {
	s := "{"
	first := true
	for i := range 64 {
		if a&(1<<i) != 0 {
			if !first {
				s += ","
			}
			s += fmt.Sprint(i + 1)
			first = false
		}
	}
	return s + "}"
}
