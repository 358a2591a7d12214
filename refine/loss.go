package refine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
)

// Relation is the neighbour relation between databases.
type Relation int

const (
	// AddRemove: neighbours differ by one record added or removed, so
	// mu − mu' is ± a column of the query matrix.
	AddRemove Relation = iota
	// Substitute: neighbours differ by one record replaced by another, so
	// mu − mu' is the difference of two columns (the appendix's D', D'').
	Substitute
)

func (r Relation) String() string {
	switch r {
	case AddRemove:
		return "add or remove one record"
	case Substitute:
		return "replace one record"
	}
	return fmt.Sprintf("Relation(%d)", int(r))
}

// Workload says how the true answers depend on the data: the answer
// vector of a database with histogram u over a finite universe is
// mu = W u, for the n×N query matrix W.
type Workload struct {
	Queries  *mat.Dense
	Universe []string // names of the N universe elements (optional)
	Relation Relation
}

// Neighbour is a pair of neighbouring databases, named by the universe
// elements of the record that differs: Add alone (Remove = -1) for
// AddRemove, the record of type Remove replaced by one of type Add for
// Substitute.
type Neighbour struct {
	Add, Remove int
	Name        string // readable description
}

func (nb Neighbour) String() string { return nb.Name }

// Loss is the privacy loss of releasing refined answers.
type Loss struct {
	Release []int   // indices of the released refined answers
	Sigma   float64 // Laplace scale of the noise on the raw answers
	// Rho is the privacy loss: the largest log-ratio of the densities of
	// the released refined answers on neighbouring databases. It is +Inf
	// when some neighbours are told apart with certainty (Distinguishable).
	Rho float64
	// Sensitivity is the effective sensitivity g of the released refined
	// answers: Rho = Sensitivity / Sigma.
	Sensitivity float64
	// Raw is the L1 sensitivity of the unrefined answers, max ‖mu − mu'‖₁:
	// what a plain Laplace mechanism is calibrated to.
	Raw float64
	// Worst is the neighbour pair that attains Rho.
	Worst Neighbour
	// Distinguishable is true when, for the Worst neighbours, the released
	// refined answers of the two databases lie on disjoint affine sets: the
	// release reveals a data-dependent constant exactly.
	Distinguishable bool
}

// maxPairs bounds the number of distinct neighbour pairs analysed.
const maxPairs = 1 << 16

// pair is one neighbour pair with its change of the true answers.
type pair struct {
	nb    Neighbour
	delta []float64 // mu − mu'
}

func (w Workload) pairs(n int) ([]pair, error) {
	if w.Queries == nil {
		return nil, errors.New("refine: workload has no query matrix")
	}
	r, N := w.Queries.Dims()
	if r != n {
		return nil, fmt.Errorf("refine: the query matrix has %d rows, want one per answer (%d)", r, n)
	}
	if w.Universe != nil && len(w.Universe) != N {
		return nil, fmt.Errorf("refine: %d universe names for %d query-matrix columns", len(w.Universe), N)
	}
	for i := range n {
		for j := range N {
			if v := w.Queries.At(i, j); math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("refine: query matrix entry [%d,%d] is %v; entries must be finite", i, j, v)
			}
		}
	}
	name := func(j int) string {
		if w.Universe != nil {
			return fmt.Sprintf("%q", w.Universe[j])
		}
		return fmt.Sprintf("#%d", j)
	}
	var ps []pair
	seen := map[string]bool{}
	add := func(nb Neighbour, d []float64) error {
		key := make([]byte, 0, 8*len(d))
		for _, v := range d {
			key = binary.LittleEndian.AppendUint64(key, math.Float64bits(v+0)) // +0 folds -0 into 0
		}
		if seen[string(key)] {
			return nil
		}
		if len(ps) == maxPairs {
			return fmt.Errorf("refine: more than %d distinct neighbour pairs; use a smaller universe", maxPairs)
		}
		seen[string(key)] = true
		ps = append(ps, pair{nb, d})
		return nil
	}
	switch w.Relation {
	case AddRemove:
		for j := range N {
			d := mat.Col(nil, j, w.Queries)
			if err := add(Neighbour{Add: j, Remove: -1, Name: "add or remove a record of type " + name(j)}, d); err != nil {
				return nil, err
			}
		}
	case Substitute:
		for i := range N {
			for j := i + 1; j < N; j++ {
				d := mat.Col(nil, j, w.Queries)
				for k := range d {
					d[k] -= w.Queries.At(k, i)
				}
				if err := add(Neighbour{Add: j, Remove: i, Name: "replace a record of type " + name(i) + " by one of type " + name(j)}, d); err != nil {
					return nil, err
				}
			}
		}
	default:
		return nil, fmt.Errorf("refine: unknown neighbour relation %d", int(w.Relation))
	}
	if len(ps) == 0 {
		return nil, errors.New("refine: the universe has no neighbouring databases (it needs at least one element, two for Substitute)")
	}
	return ps, nil
}

// shifts returns, for each pair, the change (A + D Bᵀ)(mu − mu') of the
// mean of the refined answers, after checking that public constraints
// keep their constants: c − c' = Bᵀ(mu − mu') must vanish for them.
func (l *Linear) shifts(ps []pair) ([][]float64, error) {
	var g mat.Dense
	g.Mul(l.d, l.b.T())
	g.Add(&g, l.a)
	out := make([][]float64, len(ps))
	for p, pr := range ps {
		dv := mat.NewVecDense(l.n, pr.delta)
		var dc mat.VecDense
		dc.MulVec(l.b.T(), dv)
		for k, eq := range l.eqs.eqs {
			if eq.Public && math.Abs(dc.AtVec(k)) > 1e-9*max(1, norm2(eq.Coef)) {
				return nil, fmt.Errorf("refine: equality %s is marked public (its constant is the same on every database), but the neighbours \"%s\" change it by %.6g; mark it data-dependent, or fix the query matrix", l.eqs.label(k), pr.nb.Name, dc.AtVec(k))
			}
		}
		var s mat.VecDense
		s.MulVec(&g, dv)
		out[p] = s.RawVector().Data
	}
	return out, nil
}

// Loss returns the exact privacy loss of releasing the refined answers
// with indices release (nil: all of them) when the raw answers carry
// independent Laplace(sigma) noise, over all neighbouring databases of the
// workload. Each constraint's constant is c = b_kᵀ mu on each database, so
// c − c' = Bᵀ(mu − mu'); public constraints must not move (checked).
//
// The released answers are x̂_S = A_S L + (A_S mu + D_S c + h_S) with L the
// noise, so neighbours shift their mean by delta_S = (A + D Bᵀ)_S (mu − mu').
// If delta_S is outside the range of A_S, the two releases lie on disjoint
// affine sets and the neighbours are told apart with certainty (+Inf).
// Otherwise the loss is
//
//	rho = min { ‖v‖₁ : A_S v = delta_S } / sigma,
//
// the L1-smallest change of the raw noise that reproduces the shift: an
// upper bound by a change of variables along the fibres of A_S (the
// density ratio of the integrands is at most exp(‖v‖₁/sigma)), and attained
// as the output goes to infinity in the direction of the optimal v
// (checked by numerical integration in the tests). It is computed by a
// linear program. It is the corrected Theorem 2 where that theorem
// applies, and differs from it where it does not (see Theorem2).
//
// The analysis is for exact arithmetic and continuous Laplace noise;
// Calibrate returns the grid mechanism of package noise at the calibrated
// scale.
func (l *Linear) Loss(w Workload, release []int, sigma float64) (Loss, error) {
	if math.IsNaN(sigma) || math.IsInf(sigma, 0) || sigma <= 0 {
		return Loss{}, fmt.Errorf("refine: noise scale sigma must be finite and > 0, got %v", sigma)
	}
	release, err := l.release(release)
	if err != nil {
		return Loss{}, err
	}
	ps, err := w.pairs(l.n)
	if err != nil {
		return Loss{}, err
	}
	shifts, err := l.shifts(ps)
	if err != nil {
		return Loss{}, err
	}
	pre, err := newPreimage(l.rows(release))
	if err != nil {
		return Loss{}, err
	}
	loss := Loss{Release: release, Sigma: sigma}
	first := true
	for p, pr := range ps {
		loss.Raw = max(loss.Raw, l1(pr.delta))
		g, _, err := pre.minL1(pick(shifts[p], release))
		if err != nil {
			return Loss{}, fmt.Errorf("refine: neighbours %s: %w", pr.nb.Name, err)
		}
		if first || g > loss.Sensitivity {
			loss.Sensitivity, loss.Worst, first = g, pr.nb, false
		}
	}
	loss.Distinguishable = math.IsInf(loss.Sensitivity, 1)
	loss.Rho = loss.Sensitivity / sigma
	return loss, nil
}

// Calibrate returns the Laplace mechanism that makes releasing the refined
// answers with indices release (nil: all) eps-differentially private, and
// the loss at its scale. The mechanism's Loss(g) is at most eps for the
// effective sensitivity g, which pays for the grid (one grid step of
// sensitivity, below one part in a million). It fails when neighbours are
// told apart with certainty (no noise scale helps: release fewer answers,
// or only answers whose constraints are public) and when the release does
// not depend on the data at all.
func (l *Linear) Calibrate(w Workload, release []int, eps privacy.Epsilon) (noise.Laplace, Loss, error) {
	loss, err := l.Loss(w, release, 1)
	if err != nil {
		return noise.Laplace{}, Loss{}, err
	}
	if loss.Distinguishable {
		return noise.Laplace{}, loss, fmt.Errorf("refine: no noise scale makes this release private: for the neighbours %s the released refined answers lie on disjoint sets (they reveal a data-dependent constraint constant exactly); release fewer answers or use public constraints only", loss.Worst.Name)
	}
	if loss.Sensitivity == 0 {
		return noise.Laplace{}, loss, errors.New("refine: the released refined answers do not depend on the data; no noise is needed")
	}
	lap, err := noise.NewLaplace(loss.Sensitivity, eps.Float64())
	if err != nil {
		return noise.Laplace{}, loss, err
	}
	loss.Sigma = lap.Scale()
	loss.Rho = loss.Sensitivity / loss.Sigma
	return lap, loss, nil
}

// maxSubsets bounds WorstRelease's search: 2^n − 1 subsets.
const maxSubsets = 12

// WorstRelease returns the largest privacy loss over every subset of the
// refined answers that does not reveal a constant with certainty, for each
// neighbour pair: Definition 5's rho, which the paper takes over subsets
// S with overlapping ranges R_S ∩ R'_S ≠ ∅. Loss.Release is the subset
// that attains it. It enumerates the 2^n − 1 subsets, so n is limited to
// 12.
func (l *Linear) WorstRelease(w Workload, sigma float64) (Loss, error) {
	if l.n > maxSubsets {
		return Loss{}, fmt.Errorf("refine: WorstRelease enumerates every subset of the answers; %d answers is more than the limit %d", l.n, maxSubsets)
	}
	if math.IsNaN(sigma) || math.IsInf(sigma, 0) || sigma <= 0 {
		return Loss{}, fmt.Errorf("refine: noise scale sigma must be finite and > 0, got %v", sigma)
	}
	ps, err := w.pairs(l.n)
	if err != nil {
		return Loss{}, err
	}
	shifts, err := l.shifts(ps)
	if err != nil {
		return Loss{}, err
	}
	best := Loss{Sigma: sigma, Sensitivity: -1}
	for _, pr := range ps {
		best.Raw = max(best.Raw, l1(pr.delta))
	}
	for mask := uint(1); mask < 1<<l.n; mask++ {
		var s []int
		for i := range l.n {
			if mask&(1<<i) != 0 {
				s = append(s, i)
			}
		}
		pre, err := newPreimage(l.rows(s))
		if err != nil {
			return Loss{}, err
		}
		for p, pr := range ps {
			g, _, err := pre.minL1(pick(shifts[p], s))
			if err != nil {
				return Loss{}, fmt.Errorf("refine: neighbours %s, answers %v: %w", pr.nb.Name, s, err)
			}
			if math.IsInf(g, 1) {
				continue
			}
			// Prefer larger loss, then smaller subsets.
			if g > best.Sensitivity+1e-12 || (g > best.Sensitivity-1e-12 && bits.OnesCount(mask) < len(best.Release)) {
				best.Sensitivity, best.Worst, best.Release = g, pr.nb, s
			}
		}
	}
	if best.Sensitivity < 0 {
		return Loss{}, errors.New("refine: every subset of the refined answers reveals a data-dependent constant for every neighbour pair")
	}
	best.Rho = best.Sensitivity / sigma
	return best, nil
}

func (l *Linear) release(release []int) ([]int, error) {
	if release == nil {
		release = make([]int, l.n)
		for i := range release {
			release[i] = i
		}
		return release, nil
	}
	if len(release) == 0 {
		return nil, errors.New("refine: the release is empty")
	}
	seen := make([]bool, l.n)
	for _, i := range release {
		if i < 0 || i >= l.n {
			return nil, fmt.Errorf("refine: released answer %d is outside 0..%d", i, l.n-1)
		}
		if seen[i] {
			return nil, fmt.Errorf("refine: answer %d is released twice", i)
		}
		seen[i] = true
	}
	return slices.Clone(release), nil
}

// rows returns A restricted to the given rows.
func (l *Linear) rows(s []int) *mat.Dense {
	m := mat.NewDense(len(s), l.n, nil)
	for r, i := range s {
		m.SetRow(r, l.a.RawRowView(i))
	}
	return m
}

func pick(x []float64, s []int) []float64 {
	out := make([]float64, len(s))
	for r, i := range s {
		out[r] = x[i]
	}
	return out
}

func l1(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += math.Abs(v)
	}
	return s
}

// preimage solves min ‖v‖₁ subject to M v = d for a fixed k×n matrix M.
type preimage struct {
	k, n int
	rank int
	pinv *mat.Dense // n×k pseudo-inverse
	null *mat.Dense // n×(n−rank) orthonormal basis of the null space, or nil
	m    *mat.Dense
}

func newPreimage(m *mat.Dense) (*preimage, error) {
	k, n := m.Dims()
	var svd mat.SVD
	if !svd.Factorize(m, mat.SVDFull) {
		return nil, errors.New("refine: SVD failed")
	}
	s := svd.Values(nil)
	var u, v mat.Dense
	svd.UTo(&u)
	svd.VTo(&v)
	r := 0
	for _, x := range s {
		if x > rankTol*s[0] {
			r++
		}
	}
	p := &preimage{k: k, n: n, rank: r, m: m, pinv: mat.NewDense(n, k, nil)}
	for j := range r {
		vj := mat.Col(nil, j, &v)
		uj := mat.Col(nil, j, &u)
		for a := range n {
			for b := range k {
				p.pinv.Set(a, b, p.pinv.At(a, b)+vj[a]*uj[b]/s[j])
			}
		}
	}
	if r < n {
		p.null = mat.DenseCopyOf(v.Slice(0, n, r, n))
	}
	return p, nil
}

// particular returns M⁺d and whether d is in the range of M.
func (p *preimage) particular(d []float64) ([]float64, bool) {
	v0 := mat.NewVecDense(p.n, nil)
	v0.MulVec(p.pinv, mat.NewVecDense(p.k, d))
	var back mat.VecDense
	back.MulVec(p.m, v0)
	var res float64
	for i, x := range d {
		res = max(res, math.Abs(back.AtVec(i)-x))
	}
	return v0.RawVector().Data, res <= 1e-9*max(1, l1(d))
}

// minL1 returns min ‖v‖₁ over M v = d and a minimiser, or +Inf when d is
// not in the range of M. With v = v0 + N z (N the null-space basis) it is
// the linear program min 1ᵀ(p + q) s.t. p − q − N z⁺ + N z⁻ = v0, all ≥ 0,
// started from the feasible basis p − q = v0.
func (p *preimage) minL1(d []float64) (float64, []float64, error) {
	v0, ok := p.particular(d)
	if !ok {
		return math.Inf(1), nil, nil
	}
	if p.null == nil || l1(v0) == 0 {
		return l1(v0), v0, nil
	}
	n, dn := p.n, p.n-p.rank
	cols := 2*n + 2*dn
	// The tableau in canonical form for the starting basis: row i is
	// multiplied by the sign of v0_i so that its basic variable (p_i or
	// q_i) has coefficient +1 and the right-hand side |v0_i| >= 0.
	t := make([][]float64, n)
	rhs := make([]float64, n)
	basis := make([]int, n)
	cost := make([]float64, cols)
	for i := range n {
		row := make([]float64, cols)
		sgn := 1.0
		if v0[i] < 0 {
			sgn = -1
		}
		row[i], row[n+i] = sgn, -sgn
		for j := range dn {
			row[2*n+j] = -sgn * p.null.At(i, j)
			row[2*n+dn+j] = sgn * p.null.At(i, j)
		}
		t[i], rhs[i] = row, math.Abs(v0[i])
		if sgn > 0 {
			basis[i] = i
		} else {
			basis[i] = n + i
		}
		cost[i], cost[n+i] = 1, 1
	}
	x, err := simplexBland(t, rhs, basis, cost)
	if err != nil {
		return 0, nil, fmt.Errorf("minimum-L1 preimage: %w", err)
	}
	// Rebuild v = v0 + N z from z, which keeps M v = d to rounding error
	// whatever the tableau accumulated.
	z := make([]float64, dn)
	for j := range dn {
		z[j] = x[2*n+j] - x[2*n+dn+j]
	}
	v := slices.Clone(v0)
	for i := range n {
		v[i] += dot(p.null.RawRowView(i), z)
	}
	return l1(v), v, nil
}

// simplexBland minimises costᵀx subject to T x = rhs, x >= 0, from a
// feasible basis in canonical form (column basis[i] of T is the i-th unit
// vector, rhs >= 0). It pivots by Bland's rule (entering: the lowest
// index with negative reduced cost; leaving: the lowest basic index among
// the tied ratios), which cannot cycle on degenerate problems. T, rhs and
// basis are overwritten. The problem must be bounded.
func simplexBland(t [][]float64, rhs []float64, basis []int, cost []float64) ([]float64, error) {
	const tol = 1e-11
	m, cols := len(t), len(cost)
	reduced := make([]float64, cols)
	for iter := 0; ; iter++ {
		if iter > 50*(m+cols)+1000 {
			return nil, errors.New("simplex did not terminate")
		}
		copy(reduced, cost)
		for i, b := range basis {
			if cb := cost[b]; cb != 0 {
				axpy(-cb, t[i], reduced)
			}
		}
		enter := -1
		for j, r := range reduced {
			if r < -tol {
				enter = j
				break
			}
		}
		if enter < 0 {
			break
		}
		leave := -1
		var best float64
		for i := range m {
			a := t[i][enter]
			if a <= tol {
				continue
			}
			ratio := rhs[i] / a
			if leave < 0 || ratio < best-tol*max(1, best) || (ratio <= best+tol*max(1, best) && basis[i] < basis[leave]) {
				leave, best = i, ratio
			}
		}
		if leave < 0 {
			return nil, errors.New("linear program is unbounded")
		}
		pr := t[leave]
		inv := 1 / pr[enter]
		for j := range pr {
			pr[j] *= inv
		}
		rhs[leave] *= inv
		pr[enter] = 1
		for i := range m {
			if i == leave {
				continue
			}
			if f := t[i][enter]; f != 0 {
				axpy(-f, pr, t[i])
				rhs[i] = max(rhs[i]-f*rhs[leave], 0)
				t[i][enter] = 0
			}
		}
		basis[leave] = enter
	}
	x := make([]float64, cols)
	for i, b := range basis {
		x[b] = rhs[i]
	}
	return x, nil
}
