package sensitivity

// Sensitivity of any set of linear queries under exact cuboids: a query
// term T = ⊗_i F_i (query.Term, one factor per dimension: identity, total,
// roll-up, prefix sums, ranges, Helmert residual contrasts, a given
// matrix). Worst-case induced neighbours differ by a Graver element g of
// the exact cuboids' constraints (graver.go), so the L1 and L2
// sensitivities of releasing T x are max_g ||T g||_1 and max_g ||T g||_2.
// Derivations (docs/sensitivity.md, "Sensitivity of any query term"):
//
//   - No exact cuboid: g = ±e_a and T e_a = ⊗_i F_i e_{a_i}, whose norm is
//     the product of the factors' column norms: the maximum is the
//     product of each factor's largest column norm. Exact.
//   - Support. A factor whose columns are all equal (a total) makes T x a
//     function of the marginal of x on the other dimensions S (the
//     support). When an exact cuboid contains S, T x is public: 0.
//   - One exact cuboid K: the Graver elements are e_a - e_b for two cells
//     a, b of one fibre of K (they agree on K). With N_i(a) = ||F_i e_a||²
//     and G_i(a, b) = <F_i e_a, F_i e_b>,
//
//     ||T g||² = Π_{i∈K} N_i(a_i) · (Π_{i∉K} N_i(a_i) + Π_{i∉K} N_i(b_i) - 2 Π_{i∉K} G_i(a_i, b_i)),
//
//     and when every factor outside K has columns of one norm ν_i (identity,
//     total, Helmert, roll-ups into groups of one size...) the bracket is
//     2 Π ν_i - 2 Π G_i, maximised by the least product of one Gram entry
//     per dimension, which a pass over the dimensions keeping the least and
//     the largest partial product finds (the product is linear in each
//     factor, so its extremes are at each factor's extremes). Exact. For
//     the Helmert residual R_A this is 2 π_A n/(n-1), n the smallest
//     dimension of A outside K and π_A = Π_{i∈A} (1 - 1/n_i). The L1 norm
//     is 2 Π of the largest column L1 norms at most, exactly 2 when every
//     factor outside K is an identity, a total or a roll-up (distinct
//     columns are disjoint unit vectors).
//   - Tiny domains (at most 24 base cells): the largest norms over the
//     Graver basis itself. Exact.
//   - Otherwise an upper bound: T g = (F_S ⊗ f) M_S g, with F_S the
//     factors on the support and f the total factors' common columns, so
//     ||T g||_2 <= σ_max(F_S) Π ||f_i||_2 ||M_S g||_2 and ||T g||_1 <= (the
//     largest column L1 norm of F_S) Π ||f_i||_1 ||M_S g||_1, where the
//     largest ||M_S g|| is the generic sensitivity of the marginal S
//     (GenericL2Sensitivity, GenericSensitivity). For Helmert rows σ_max = 1,
//     so a residual's L2 sensitivity is at most its marginal's.
//
// Values are computed in floating point from exact closed forms; a caller
// calibrating noise adds a relative margin (release adds 2^-30).

import (
	"context"
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/query"
)

// QuerySensitivity is a sensitivity of a set of linear queries: the value,
// whether it is the value itself or only an upper bound, and the rule that
// gave it.
type QuerySensitivity struct {
	Value float64
	Exact bool
	Rule  string
}

// factorStats are what the closed forms need of one factor.
type factorStats struct {
	// norm2 and norm1 are the largest squared L2 and L1 column norms,
	// constant whether every column has squared L2 norm norm2.
	norm2, norm1 float64
	constant     bool
	// same: every column is the same vector (a total).
	same bool
	// offMin, offMax are the least and largest Gram entries between two
	// distinct columns (norm2 for a dimension of one value).
	offMin, offMax float64
	// unit: every column is a 0/1 vector with one 1 (identity, roll-up,
	// total), so distinct columns are equal or disjoint.
	unit bool
	// sigma is an upper bound of the largest singular value, and sigmaExact
	// says whether it is the value.
	sigma      float64
	sigmaExact bool
}

// maxDenseStats bounds the dimension size for which a factor's Gram is
// formed (n² entries).
const maxDenseStats = 4096

func statsOf(f query.Factor) (factorStats, error) {
	n := f.N
	switch f.Kind {
	case query.Identity:
		off := 0.0
		if n == 1 {
			off = 1
		}
		return factorStats{norm2: 1, norm1: 1, constant: true, same: n == 1, offMin: off, offMax: off, unit: true, sigma: 1, sigmaExact: true}, nil
	case query.Total:
		return factorStats{norm2: 1, norm1: 1, constant: true, same: true, offMin: 1, offMax: 1, unit: true, sigma: math.Sqrt(float64(n)), sigmaExact: true}, nil
	case query.Residual:
		if n == 1 {
			return factorStats{}, errors.New("a Helmert factor of a dimension of one value has no rows")
		}
		// HᵀH = I - J/n: every column has squared norm 1 - 1/n, distinct
		// ones meet at -1/n; the rows are orthonormal.
		var l1 float64
		var suffix float64
		for j := n - 1; j >= 0; j-- {
			v := suffix
			if j >= 1 {
				v += float64(j) / math.Sqrt(float64(j)*float64(j+1))
			}
			l1 = max(l1, v)
			if j >= 1 {
				suffix += 1 / math.Sqrt(float64(j)*float64(j+1))
			}
		}
		nn := float64(n)
		return factorStats{norm2: 1 - 1/nn, norm1: l1, constant: true, offMin: -1 / nn, offMax: -1 / nn, sigma: 1, sigmaExact: true}, nil
	case query.RollUp:
		sizes := make([]int, f.Groups)
		for _, g := range f.Group {
			sizes[g]++
		}
		big := 0
		for _, s := range sizes {
			big = max(big, s)
		}
		st := factorStats{norm2: 1, norm1: 1, constant: true, same: f.Groups == 1, unit: true, sigma: math.Sqrt(float64(big)), sigmaExact: true}
		// Distinct columns meet at 1 in one group, 0 across groups.
		st.offMin, st.offMax = 1, 0
		if big >= 2 {
			st.offMax = 1
		}
		if f.Groups >= 2 {
			st.offMin = 0
		}
		if n == 1 {
			st.offMin, st.offMax = 1, 1
		}
		return st, nil
	}
	if n > maxDenseStats {
		return factorStats{}, fmt.Errorf("a %v factor of %d values is too large for its Gram (at most %d)", f.Kind, n, maxDenseStats)
	}
	g := gramOf(f)
	st := factorStats{constant: true, same: true, offMin: math.Inf(1), offMax: math.Inf(-1)}
	for a := range n {
		st.norm2 = max(st.norm2, g[a*n+a])
		if g[a*n+a] != g[0] {
			st.constant = false
		}
		for b := range n {
			if a == b {
				continue
			}
			v := g[a*n+b]
			st.offMin, st.offMax = min(st.offMin, v), max(st.offMax, v)
			if g[a*n+a]+g[b*n+b]-2*v > 1e-12*(g[a*n+a]+g[b*n+b]) {
				st.same = false
			}
		}
	}
	if n == 1 {
		st.offMin, st.offMax = g[0], g[0]
	}
	st.norm1 = colL1(f)
	st.sigma, st.sigmaExact = sigmaBound(g, n)
	return st, nil
}

// gramOf returns FᵀF (n×n, row-major), from closed forms where the kind
// has one.
func gramOf(f query.Factor) []float64 {
	n := f.N
	g := make([]float64, n*n)
	switch f.Kind {
	case query.Prefix:
		for j := range n {
			for k := range n {
				g[j*n+k] = float64(n - max(j, k))
			}
		}
		return g
	case query.Ranges:
		for j := range n {
			for k := range n {
				g[j*n+k] = float64(min(j, k)+1) * float64(n-max(j, k))
			}
		}
		return g
	}
	d := f.Dense()
	for r := range f.Rows() {
		row := d[r*n : (r+1)*n]
		for j, a := range row {
			if a == 0 {
				continue
			}
			for k, b := range row {
				g[j*n+k] += a * b
			}
		}
	}
	return g
}

// colL1 returns the largest L1 norm of a column of f.
func colL1(f query.Factor) float64 {
	n := f.N
	switch f.Kind {
	case query.Prefix:
		return float64(n)
	case query.Ranges:
		j := (n - 1) / 2
		return float64(j+1) * float64(n-j)
	}
	d := f.Dense()
	var best float64
	for j := range n {
		var s float64
		for r := range f.Rows() {
			s += math.Abs(d[r*n+j])
		}
		best = max(best, s)
	}
	return best
}

// sigmaBound returns an upper bound of the largest singular value of a
// factor of Gram g: the square root of the Gram's largest eigenvalue (with
// a relative margin of 1e-9 for the eigensolver) up to 512 values, and the
// Schur bound sqrt(max row sum of |G|) beyond.
func sigmaBound(g []float64, n int) (float64, bool) {
	if n <= 512 {
		sym := mat.NewSymDense(n, nil)
		for i := range n {
			for j := i; j < n; j++ {
				sym.SetSym(i, j, (g[i*n+j]+g[j*n+i])/2)
			}
		}
		var es mat.EigenSym
		if es.Factorize(sym, false) {
			vals := es.Values(nil)
			top := 0.0
			for _, v := range vals {
				top = max(top, v)
			}
			return math.Sqrt(top * (1 + 1e-9)), true
		}
	}
	var best float64
	for i := range n {
		var s float64
		for j := range n {
			s += math.Abs(g[i*n+j])
		}
		best = max(best, s)
	}
	return math.Sqrt(best), false
}

// termStats checks t against s and returns its factors' statistics.
func termStats(s *domain.Schema, t query.Term) ([]factorStats, error) {
	if s == nil {
		return nil, errors.New("query sensitivity: nil schema")
	}
	if len(t) != s.NumDims() {
		return nil, fmt.Errorf("query sensitivity: the term has %d factors for %d dimensions", len(t), s.NumDims())
	}
	st := make([]factorStats, len(t))
	for i, f := range t {
		if f.N != s.Size(i) {
			return nil, fmt.Errorf("query sensitivity: factor %d has %d columns, dimension %s has %d values", i+1, f.N, s.Dim(i).Name, s.Size(i))
		}
		var err error
		if st[i], err = statsOf(f); err != nil {
			return nil, fmt.Errorf("query sensitivity: dimension %s: %w", s.Dim(i).Name, err)
		}
	}
	return st, nil
}

// support returns the dimensions on which t's factor is not a total (its
// columns are not all equal).
func support(st []factorStats) domain.Cuboid {
	var c domain.Cuboid
	for i, x := range st {
		if !x.same {
			c |= 1 << i
		}
	}
	return c
}

// TermL2Sensitivity returns the L2 sensitivity of releasing the queries
// t (one factor per dimension of s) when the cuboids exact are public: the
// largest ||t g||_2 between worst-case induced neighbours, or an upper bound
// of it (Exact false; see the file comment for the rules). The error wraps
// ErrNoClosedForm where the generic sensitivity of t's support has none.
func TermL2Sensitivity(s *domain.Schema, exact []domain.Cuboid, t query.Term) (QuerySensitivity, error) {
	return termSensitivity(s, exact, t, 2)
}

// TermL1Sensitivity is TermL2Sensitivity for the L1 norm.
func TermL1Sensitivity(s *domain.Schema, exact []domain.Cuboid, t query.Term) (QuerySensitivity, error) {
	return termSensitivity(s, exact, t, 1)
}

func termSensitivity(s *domain.Schema, exact []domain.Cuboid, t query.Term, p int) (QuerySensitivity, error) {
	st, err := termStats(s, t)
	if err != nil {
		return QuerySensitivity{}, err
	}
	for i, c := range exact {
		if err := CheckCuboid(s, c, fmt.Sprintf("exact cuboid %d", i+1)); err != nil {
			return QuerySensitivity{}, err
		}
	}
	trivial := TrivialDims(s)
	q := maximalCuboids(exact, trivial)
	sup := support(st) &^ trivial
	norm := func(x factorStats) float64 {
		if p == 1 {
			return x.norm1
		}
		return math.Sqrt(x.norm2)
	}
	if len(q) == 0 {
		v := 1.0
		for _, x := range st {
			v *= norm(x)
		}
		return QuerySensitivity{v, true, "no background knowledge: one row added or removed moves one cell, and the largest column norm of a Kronecker product is the product of its factors'"}, nil
	}
	for _, c := range q {
		if sup.AncestorOf(c) {
			return QuerySensitivity{0, true, fmt.Sprintf("public: the queries depend on the data through the marginal %s, computable from exact cuboid %s", s.Format(sup), s.Format(c))}, nil
		}
	}
	best := QuerySensitivity{Value: math.Inf(1)}
	consider := func(v QuerySensitivity) {
		if v.Value < best.Value || (v.Value == best.Value && v.Exact && !best.Exact) {
			best = v
		}
	}
	if len(q) == 1 {
		if v, ok := oneExact(s, q[0], st, p); ok {
			consider(v)
		}
	}
	if !best.Exact && s.Cells() >= 0 && s.Cells() <= autoBruteCells {
		what := fmt.Sprintf("exact cuboids %s", s.FormatList(q))
		basis, err := movesOf(s, q, what)
		if err == nil {
			v1, v2 := bruteTerm(s, basis, t)
			v := v2
			if p == 1 {
				v = v1
			}
			consider(QuerySensitivity{v, true, fmt.Sprintf("brute force: %s, Graver basis of %d elements", what, len(basis))})
		} else if !errors.Is(err, ErrNoClosedForm) {
			return QuerySensitivity{}, err
		}
	}
	if !best.Exact {
		v, err := supportBound(s, exact, st, sup, p)
		if err != nil && math.IsInf(best.Value, 1) {
			return QuerySensitivity{}, err
		}
		if err == nil {
			consider(v)
		}
	}
	return best, nil
}

// oneExact is the closed form of one exact cuboid k (file comment), when
// the factors allow it.
func oneExact(s *domain.Schema, k domain.Cuboid, st []factorStats, p int) (QuerySensitivity, bool) {
	in := 1.0
	lo, hi := 1.0, 1.0 // least and largest partial product of Gram entries outside k
	outNorm := 1.0
	unit := true
	outL1 := 1.0
	for i, x := range st {
		if k.Has(i) {
			if p == 1 {
				in *= x.norm1
			} else {
				in *= x.norm2
			}
			continue
		}
		if !x.constant {
			if p == 2 {
				return QuerySensitivity{}, false
			}
		}
		outNorm *= x.norm2
		outL1 *= x.norm1
		unit = unit && x.unit
		// Each dimension's Gram entry is its column norm (equal values)
		// or one between distinct columns.
		cands := []float64{x.norm2}
		if s.Size(i) > 1 {
			cands = append(cands, x.offMin, x.offMax)
		}
		nlo, nhi := math.Inf(1), math.Inf(-1)
		for _, c := range cands {
			for _, pp := range []float64{lo, hi} {
				nlo, nhi = min(nlo, pp*c), max(nhi, pp*c)
			}
		}
		lo, hi = nlo, nhi
	}
	if p == 1 {
		if unit {
			return QuerySensitivity{2 * in, true, fmt.Sprintf("one exact cuboid %s: moves of one row within a cell of it, which change two cells of the queries' columns by 1", s.Format(k))}, true
		}
		return QuerySensitivity{2 * in * outL1, false, fmt.Sprintf("upper bound: one exact cuboid %s: a move of one row within a cell of it changes two columns", s.Format(k))}, true
	}
	v := in * (2*outNorm - 2*lo)
	return QuerySensitivity{math.Sqrt(max(v, 0)), true, fmt.Sprintf("one exact cuboid %s: moves of one row within a cell of it, 2 (Π ν_i - min Π G_i(a_i, b_i)) over the other dimensions", s.Format(k))}, true
}

// supportBound is the bound through the marginal on the support (file
// comment).
func supportBound(s *domain.Schema, exact []domain.Cuboid, st []factorStats, sup domain.Cuboid, p int) (QuerySensitivity, error) {
	gain := 1.0
	for i, x := range st {
		switch {
		case !sup.Has(i) && p == 1:
			gain *= x.norm1
		case !sup.Has(i):
			gain *= math.Sqrt(x.norm2)
		case p == 1:
			gain *= x.norm1
		default:
			gain *= x.sigma
		}
	}
	if p == 1 {
		g, err := GenericSensitivity(s, exact, sup)
		if err != nil {
			return QuerySensitivity{}, err
		}
		return QuerySensitivity{gain * float64(g.Value), false, fmt.Sprintf("upper bound: the largest column L1 norm of the factors (%.6g) times the generic sensitivity %d of the marginal %s (%s)", gain, g.Value, s.Format(sup), g.Rule)}, nil
	}
	g, err := GenericL2Sensitivity(s, exact, sup)
	if err != nil {
		return QuerySensitivity{}, err
	}
	return QuerySensitivity{gain * g.Value, false, fmt.Sprintf("upper bound: the largest singular value of the factors (%.6g) times the L2 generic sensitivity %.6g of the marginal %s (%s)", gain, g.Value, s.Format(sup), g.Rule)}, nil
}

// movesOf returns the Graver basis of the exact cuboids q (the moves
// between worst-case induced neighbours) within the automatic brute
// force's limits, or an error wrapping ErrNoClosedForm beyond them.
func movesOf(s *domain.Schema, q []domain.Cuboid, what string) ([][]int, error) {
	n := s.Cells()
	if n < 0 || n > autoBruteCells {
		return nil, fmt.Errorf("%s on %d base cells: %w", what, n, ErrNoClosedForm)
	}
	base := domain.Base(s.NumDims())
	var rows [][]int
	for _, c := range q {
		members := make([][]int, s.CuboidSize(c))
		for a := range n {
			x := cellProjection(s, base, c, a)
			members[x] = append(members[x], a)
		}
		rows = append(rows, members...)
	}
	basis, err := graverBasis(context.Background(), n, rows, graverLimits{elements: autoBruteGraver, work: autoBruteWork})
	if errors.Is(err, ErrTooLarge) {
		return nil, fmt.Errorf("%s (brute force stops at "+autoBruteMessage+"): %w", what, autoBruteCells, autoBruteGraver, autoBruteWork, ErrNoClosedForm)
	}
	return basis, err
}

// bruteTerm returns the largest ||t g||_1 and ||t g||_2 over the moves.
func bruteTerm(s *domain.Schema, basis [][]int, t query.Term) (l1, l2 float64) {
	x := make([]float64, s.Cells())
	for _, g := range basis {
		for a, v := range g {
			x[a] = float64(v)
		}
		var a1, a2 float64
		for _, v := range t.Apply(x) {
			a1 += math.Abs(v)
			a2 += v * v
		}
		l1, l2 = max(l1, a1), max(l2, a2)
	}
	return l1, math.Sqrt(l2)
}

// maxJointDims bounds the dimensions outside the exact cuboid over whose
// subsets JointL2Squared enumerates.
const maxJointDims = 16

// JointL2Squared returns the squared L2 sensitivity of several sets of
// queries released together, term k scaled by sqrt(w[k]): the largest
// Σ_k w_k ||t_k g||² over worst-case induced neighbours g. Releasing term k
// with Gaussian noise of variance σ_k² is then ρ-zCDP with ρ this value
// with w_k = 1/(2σ_k²), which can be less than the sum of the terms'
// own costs (composition: Σ_k w_k max_g ||t_k g||²), since one move need not
// be the worst for every term. It is computed exactly where no exact cuboid
// is given and every factor's columns have one norm (then it is the sum),
// for one exact cuboid when every factor is an identity, a total or Helmert
// contrasts (over the sets of dimensions in which the two cells of a move
// differ), and on tiny domains by brute force; ok is false elsewhere, and
// the caller keeps the composition.
func JointL2Squared(s *domain.Schema, exact []domain.Cuboid, terms []query.Term, w []float64) (v float64, rule string, ok bool, err error) {
	if len(terms) != len(w) {
		return 0, "", false, fmt.Errorf("query sensitivity: %d terms and %d weights", len(terms), len(w))
	}
	stats := make([][]factorStats, len(terms))
	for k, t := range terms {
		if stats[k], err = termStats(s, t); err != nil {
			return 0, "", false, err
		}
		if !(w[k] >= 0) || math.IsInf(w[k], 0) {
			return 0, "", false, fmt.Errorf("query sensitivity: weight %d is %v", k+1, w[k])
		}
	}
	trivial := TrivialDims(s)
	q := maximalCuboids(exact, trivial)
	if len(q) == 0 {
		for k, st := range stats {
			prod := w[k]
			for _, x := range st {
				if !x.constant {
					return 0, "", false, nil
				}
				prod *= x.norm2
			}
			v += prod
		}
		return v, "no background knowledge: every cell's column has the same norm in every term, so the worst move is any one row", true, nil
	}
	if len(q) == 1 {
		if v, ok := jointOneExact(s, q[0], terms, stats, w); ok {
			return v, fmt.Sprintf("one exact cuboid %s: the worst move of one row within a cell of it, over the sets of dimensions the move changes", s.Format(q[0])), true, nil
		}
	}
	if s.Cells() >= 0 && s.Cells() <= autoBruteCells {
		what := fmt.Sprintf("exact cuboids %s", s.FormatList(q))
		basis, err := movesOf(s, q, what)
		switch {
		case err == nil:
			x := make([]float64, s.Cells())
			for _, g := range basis {
				for a, c := range g {
					x[a] = float64(c)
				}
				var sum float64
				for k, t := range terms {
					for _, y := range t.Apply(x) {
						sum += w[k] * y * y
					}
				}
				v = max(v, sum)
			}
			return v, fmt.Sprintf("brute force: %s, Graver basis of %d elements", what, len(basis)), true, nil
		case !errors.Is(err, ErrNoClosedForm):
			return 0, "", false, err
		}
	}
	return 0, "", false, nil
}

// jointOneExact enumerates the sets D of dimensions outside k in which the
// two cells of a move differ.
func jointOneExact(s *domain.Schema, k domain.Cuboid, terms []query.Term, stats [][]factorStats, w []float64) (float64, bool) {
	var out []int
	for i := range s.NumDims() {
		if !k.Has(i) && s.Size(i) > 1 {
			out = append(out, i)
		}
	}
	if len(out) > maxJointDims {
		return 0, false
	}
	for _, t := range terms {
		for _, f := range t {
			if f.Kind != query.Identity && f.Kind != query.Total && f.Kind != query.Residual {
				return 0, false
			}
		}
	}
	best := 0.0
	for d := uint64(1); d < 1<<len(out); d++ {
		var sum float64
		for t, st := range stats {
			all, diff := w[t], w[t]
			for i, x := range st {
				all *= x.norm2
				j := indexOf(out, i)
				if j >= 0 && d&(1<<j) != 0 {
					diff *= x.offMin // one value between distinct columns
				} else {
					diff *= x.norm2
				}
			}
			sum += 2*all - 2*diff
		}
		best = max(best, sum)
	}
	return best, true
}

func indexOf(xs []int, v int) int {
	for i, x := range xs {
		if x == v {
			return i
		}
	}
	return -1
}
