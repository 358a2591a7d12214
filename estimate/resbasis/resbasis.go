// Package resbasis computes the exact least-squares estimate of a set of
// marginal tables of a data cube from noisy measurements of marginals (or
// of single residuals) and exact invariants, over the residual basis of
// the marginals, together with the variance of every estimated cell. It is
// pure arithmetic on plain inputs (cuboids as bit sets of dimensions,
// dimension sizes, per-cell noise variances, noisy arrays): no I/O, no
// privacy accounting.
//
// # Model
//
// Measurement j adds noise of per-cell variance v_j to every cell of the
// marginal on cuboid C_j, giving z_j. The estimate minimises
//
//	Σ_j (1/v_j) ||M_j y - z_j||²  subject to  M_E y = e for every invariant E
//
// over base tables y. With P_A the projection onto the A-residual subspace
// (centred along every dimension of A, constant along the others),
// M_C^T M_C = deg(C) Σ_{A⊆C} P_A, so both the objective and the constraints
// split over residuals (McKenna et al., "Optimizing error of high-
// dimensional statistical queries under differential privacy", and
// ResidualPlanner's Theorem: the residuals of different A are orthogonal).
// The invariants fix exactly the residuals A ⊆ E (the down-closure of the
// invariants), and each other residual is the weighted mean of what the
// measurements covering it say:
//
//	r_A = Σ_{j: A⊆C_j} β_{A,j} centre_A(marginal_A z_j),
//	β_{A,j} = (1/(v_j |C_j|)) / W_A,  W_A = Σ_{k: A⊆C_k} 1/(v_k |C_k|),
//
// (deg(C_j) = N/|C_j|, so the weight of measurement j in the normal
// equations, deg(C_j)/v_j, is proportional to 1/(v_j |C_j|)). A table C is
// then ŷ_C(c) = Σ_{A⊆C} (|A|/|C|) r_A(c_A), and since residuals are
// uncorrelated and centring is a projection, every cell of C has variance
//
//	Var ŷ_C = Σ_{A⊆C free} (|A|/|C|)² π_A / (|A| W_A),  π_A = Π_{i∈A} (1 - 1/n_i).
//
// A residual measurement of A (its normalised contrasts, noise of variance
// v_j on each) informs that residual only, with the same weight. Residuals
// over a dimension of size 1 are zero and play no part.
//
// Package release builds its flat-workload engine on it: it chooses what to
// measure and each measurement's share of the budget (minimising
// Objective), calibrates the noise, and publishes Basis.Estimate's tables
// with margins of error from Basis.CellVariance.
package resbasis

import (
	"cmp"
	"iter"
	"math"
	"slices"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/tensor"
)

// Status says what determines a residual.
type Status int

const (
	// Zero: the residual has a dimension of size 1, so it is zero.
	Zero Status = iota
	// Fixed: an invariant contains it, which fixes it exactly.
	Fixed
	// Free: it is estimated from the measurements covering it.
	Free
)

// Residual is one residual A of the tables and what is known about it.
type Residual struct {
	Status Status
	// Source is, for a fixed residual, the index of the invariant it is
	// taken from (the first containing it).
	Source int
	// Covers are, for a free residual, the indices of the measurements
	// that inform it.
	Covers []int
	// Weight is a_A = π_A Σ_{tables C⊇A} w_C |A|/|C|, the residual's
	// weight in the weighted total variance Σ_C w_C |C| Var ŷ_C.
	Weight float64
	// Precision is W_A (free residuals, once Cover has the variances).
	Precision float64
}

// Measurement is one noisy input: the marginal on Cuboid, or, when
// Residual is set, the residual Cuboid alone (its normalised contrasts, as
// a pseudo-marginal: see package contrast). Variance is the noise variance
// per cell (per contrast).
type Measurement struct {
	Cuboid   domain.Cuboid
	Residual bool
	Variance float64
}

// Table is a requested marginal and its weight in the objective.
type Table struct {
	Cuboid domain.Cuboid
	Weight float64
}

// Marginal is an exact marginal: counts row-major over Cuboid's dimensions.
type Marginal struct {
	Cuboid domain.Cuboid
	Counts []float64
}

// Basis is the residual basis of a set of tables under invariants and
// measurements: every residual of every table, with what determines it.
type Basis struct {
	sizes   []int
	trivial domain.Cuboid
	exact   []domain.Cuboid
	meas    []Measurement
	// Res holds every residual of the tables and of the measurements.
	Res map[domain.Cuboid]*Residual
}

// New classifies the residuals of the tables (over dimensions of the given
// sizes): zero, fixed by one of the exact cuboids, or free, with the
// measurements that cover it (whose variances are not used yet) and its
// weight in the objective.
func New(sizes []int, exact []domain.Cuboid, tables []Table, meas []Measurement) *Basis {
	b := &Basis{sizes: sizes, exact: exact, meas: meas, Res: map[domain.Cuboid]*Residual{}}
	for i, n := range sizes {
		if n == 1 {
			b.trivial |= 1 << i
		}
	}
	for _, t := range tables {
		size := b.size(t.Cuboid)
		for a := range b.Subsets(t.Cuboid) {
			if r := b.get(a); r.Status == Free {
				r.Weight += t.Weight * b.Pi(a) * b.size(a) / size
			}
		}
	}
	for k, m := range meas {
		for a := range b.Informs(m) {
			if r := b.get(a); r.Status == Free {
				r.Covers = append(r.Covers, k)
			}
		}
	}
	return b
}

// get returns residual a, classifying it on first use.
func (b *Basis) get(a domain.Cuboid) *Residual {
	if r, ok := b.Res[a]; ok {
		return r
	}
	r := &Residual{Status: Free, Source: -1}
	if a&b.trivial != 0 {
		r.Status = Zero
	} else {
		for i, e := range b.exact {
			if a.AncestorOf(e) {
				r.Status, r.Source = Fixed, i
				break
			}
		}
	}
	b.Res[a] = r
	return r
}

// size returns the number of cells of cuboid c.
func (b *Basis) size(c domain.Cuboid) float64 {
	n := 1.0
	for _, d := range c.Dims() {
		n *= float64(b.sizes[d])
	}
	return n
}

// Subsets yields the subsets of c without dimensions of size 1 (whose
// residuals are zero), c itself first.
func (b *Basis) Subsets(c domain.Cuboid) iter.Seq[domain.Cuboid] {
	c &^= b.trivial
	return func(yield func(domain.Cuboid) bool) {
		for a := c; ; a = (a - 1) & c {
			if !yield(a) || a == 0 {
				return
			}
		}
	}
}

// Informs yields the residuals a measurement informs: every residual of a
// measured marginal, the one residual of a residual measurement.
func (b *Basis) Informs(m Measurement) iter.Seq[domain.Cuboid] {
	if m.Residual {
		return func(yield func(domain.Cuboid) bool) { yield(m.Cuboid) }
	}
	return b.Subsets(m.Cuboid)
}

// Pi returns π_A = Π_{i∈A} (1 - 1/n_i), the variance a unit-variance
// marginal cell keeps after centring along A.
func (b *Basis) Pi(a domain.Cuboid) float64 {
	v := 1.0
	for _, i := range a.Dims() {
		v *= 1 - 1/float64(b.sizes[i])
	}
	return v
}

// Cover records the measurements as they are released (their variances
// known; some of New's may be gone): for every free residual, the
// measurements covering it and W_A.
func (b *Basis) Cover(meas []Measurement) {
	b.meas = meas
	for _, r := range b.Res {
		r.Covers, r.Precision = r.Covers[:0], 0
	}
	for k, m := range meas {
		for a := range b.Informs(m) {
			if r := b.Res[a]; r != nil && r.Status == Free {
				r.Covers = append(r.Covers, k)
				r.Precision += 1 / (m.Variance * b.size(m.Cuboid))
			}
		}
	}
}

// CellVariance is Var ŷ_C for every cell of c (package comment), after
// Cover.
func (b *Basis) CellVariance(c domain.Cuboid) float64 {
	size := b.size(c)
	var v float64
	for a := range b.Subsets(c) {
		if r := b.Res[a]; r.Status == Free {
			v += b.size(a) * b.Pi(a) / (size * size * r.Precision)
		}
	}
	return v
}

// CellVarianceAt is CellVariance at other precisions W_A, given for every
// free residual of c: the variance a split with those precisions gives.
func (b *Basis) CellVarianceAt(c domain.Cuboid, w map[domain.Cuboid]float64) float64 {
	size := b.size(c)
	var v float64
	for a := range b.Subsets(c) {
		if r := b.Res[a]; r.Status == Free {
			v += b.size(a) * b.Pi(a) / (size * size * w[a])
		}
	}
	return v
}

// Term is a part of a cell's error: Count independent noise variables of
// measurement K, each with coefficient Coef.
type Term struct {
	K     int
	Coef  float64
	Count float64
}

// CellLaw returns the error of a cell of table c (the same law for every
// cell) as a sum of terms over the measurements of marginals, after Cover:
// Σ Count·Coef²·v_K is CellVariance(c). Measurements of residuals are left
// out: their noise is on contrasts, not on cells. Terms whose coefficient
// is zero in exact arithmetic may come out as rounding noise.
func (b *Basis) CellLaw(c domain.Cuboid) []Term {
	size := b.size(c)
	var out []Term
	for j, m := range b.meas {
		if m.Residual {
			continue
		}
		common := ((c & m.Cuboid) &^ b.trivial).Dims()
		g := make([]float64, 1<<len(common))
		for pat := range g {
			var a domain.Cuboid
			for i, d := range common {
				if pat&(1<<i) != 0 {
					a |= 1 << d
				}
			}
			if r := b.Res[a]; r != nil && r.Status == Free {
				beta := 1 / (m.Variance * b.size(m.Cuboid) * r.Precision)
				g[pat] = beta * b.size(a) / size
			}
		}
		// Σ_A g(A) Π_{i∈A}(δ_i - 1/n_i) is a Kronecker product over the
		// common dimensions: one butterfly per dimension. Pattern bit i
		// then says whether the noise variable agrees with the cell on
		// the i-th common dimension.
		for i, d := range common {
			inv := 1 / float64(b.sizes[d])
			for pat := range g {
				if pat&(1<<i) != 0 {
					continue
				}
				a0, a1 := g[pat], g[pat|1<<i]
				g[pat], g[pat|1<<i] = a0-a1*inv, a0+a1*(1-inv)
			}
		}
		outside := b.size(m.Cuboid &^ c)
		for pat, k := range g {
			n := outside
			for i, d := range common {
				if pat&(1<<i) == 0 {
					n *= float64(b.sizes[d] - 1)
				}
			}
			out = append(out, Term{K: j, Coef: k, Count: n})
		}
	}
	return out
}

// Weights returns, for the residuals common to table c and a source (the
// invariant of index e, or the measurement of index k; the other is -1),
// the weight with which the source's residual enters the table's estimate,
// indexed by pattern (bit b set: the b-th dimension of c ∩ src, in
// increasing order, is in the residual; see tensor.Transfer), and whether
// any is non-zero.
func (b *Basis) Weights(c, src domain.Cuboid, e, k int) ([]float64, bool) {
	common := (c & src).Dims()
	w := make([]float64, 1<<len(common))
	nz := false
	for pat := range w {
		var a domain.Cuboid
		for i, d := range common {
			if pat&(1<<i) != 0 {
				a |= 1 << d
			}
		}
		r, ok := b.Res[a]
		if !ok {
			continue // has a dimension of size 1: zero
		}
		switch {
		case r.Status == Fixed && e >= 0 && r.Source == e:
			w[pat] = 1
		case r.Status == Free && k >= 0 && (!b.meas[k].Residual || a == b.meas[k].Cuboid):
			// A residual measurement informs its own residual only.
			m := b.meas[k]
			w[pat] = 1 / (m.Variance * b.size(m.Cuboid) * r.Precision)
		}
		nz = nz || w[pat] != 0
	}
	return w, nz
}

// Determined reports whether the invariants determine table c: whether its
// own residual (without dimensions of size 1), and so every residual of
// it, is fixed.
func (b *Basis) Determined(c domain.Cuboid) bool {
	r := b.Res[c&^b.trivial]
	return r != nil && r.Status == Fixed
}

// FromInvariant returns the counts of a determined table c, summed from an
// invariant that contains it, and false when none does.
func (b *Basis) FromInvariant(c domain.Cuboid, inv []Marginal) ([]float64, bool) {
	eff := c &^ b.trivial
	for _, v := range inv {
		if eff.AncestorOf(v.Cuboid) {
			out := make([]float64, int(b.size(c)))
			tensor.Project(tensor.SubSizes(b.sizes, v.Cuboid), tensor.Reindex(c&v.Cuboid, v.Cuboid), v.Counts, out)
			return out, true
		}
	}
	return nil, false
}

// Estimate returns the least-squares estimate of every table from the
// invariants (in New's order of exact cuboids) and the noisy measurements
// (in Cover's order, row-major over each cuboid): counts row-major over
// each table's cuboid. A determined table is summed from an invariant. A
// noisy array with the capacity of its extended array (tensor.ExtSize) is
// overwritten by it.
func (b *Basis) Estimate(tables []domain.Cuboid, inv []Marginal, noisy [][]float64) [][]float64 {
	out := make([][]float64, len(tables))
	invExt := make([][]float64, len(inv))
	measExt := make([][]float64, len(noisy))
	for i, c := range tables {
		if b.Determined(c) {
			out[i], _ = b.FromInvariant(c, inv)
			continue
		}
		dst := make([]float64, tensor.ExtSize(tensor.SubSizes(b.sizes, c)))
		for e, v := range inv {
			if w, nz := b.Weights(c, v.Cuboid, e, -1); nz {
				if invExt[e] == nil {
					invExt[e] = tensor.Extend(tensor.SubSizes(b.sizes, v.Cuboid), v.Counts)
				}
				tensor.Transfer(b.sizes, v.Cuboid, invExt[e], c, dst, w)
			}
		}
		for k, m := range b.meas {
			if w, nz := b.Weights(c, m.Cuboid, -1, k); nz {
				if measExt[k] == nil {
					sizes := tensor.SubSizes(b.sizes, m.Cuboid)
					if n := tensor.ExtSize(sizes); cap(noisy[k]) >= n {
						measExt[k] = noisy[k][:n]
						tensor.ExtendInPlace(sizes, measExt[k])
					} else {
						measExt[k] = tensor.Extend(sizes, noisy[k])
					}
				}
				tensor.Transfer(b.sizes, m.Cuboid, measExt[k], c, dst, w)
			}
		}
		// A copy, so that the larger extended array is not kept alive.
		out[i] = slices.Clone(tensor.Contract(tensor.SubSizes(b.sizes, c), dst))
	}
	return out
}

// MarginTerm is one term of a table's estimate: Coef times the marginal on
// Margin of source Source's counts (the invariants in New's order, then
// the measurements in Cover's order), broadcast to the table's cells.
// Margin is a subset of both the table and the source.
type MarginTerm struct {
	Source int
	Margin domain.Cuboid
	Coef   float64
}

// Terms returns the estimate of table c as a sum of terms:
//
//	ŷ_C(c) = Σ_terms Coef · marginal_Margin(x_Source)(c_Margin),
//
// where for a source S with weights w_A over the residuals A of K = C ∩ S
// (Weights) and every B ⊆ K,
//
//	Coef = β_B / Π_{d∈C\B} n_d,  β_B = Σ_{B⊆A⊆K} (-1)^{|A\B|} w_A,
//
// by Möbius inversion of the projections onto the residuals. Terms whose
// coefficient is exactly zero are left out (others, however small, are
// kept, so the sum is the estimate's to rounding). A determined table has
// exactly one term: the first invariant that contains it, on the table's
// dimensions within it, with coefficient 1, so that it stays the exact sum
// of integer counts. The terms are in a fixed order: by source, then by
// increasing Margin.
func (b *Basis) Terms(c domain.Cuboid) []MarginTerm {
	if b.Determined(c) {
		eff := c &^ b.trivial
		for e, v := range b.exact {
			if eff.AncestorOf(v) {
				return []MarginTerm{{Source: e, Margin: c & v, Coef: 1}}
			}
		}
	}
	var out []MarginTerm
	for e, v := range b.exact {
		if w, nz := b.Weights(c, v, e, -1); nz {
			out = b.appendTerms(out, e, c, v, w)
		}
	}
	for k, m := range b.meas {
		if w, nz := b.Weights(c, m.Cuboid, -1, k); nz {
			out = b.appendTerms(out, len(b.exact)+k, c, m.Cuboid, w)
		}
	}
	return out
}

// appendTerms appends to out the terms of source i, of cuboid src, in the
// estimate of table c, whose weights w are indexed by pattern over the
// common dimensions (Weights).
func (b *Basis) appendTerms(out []MarginTerm, i int, c, src domain.Cuboid, w []float64) []MarginTerm {
	common := (c & src).Dims()
	// β_B = Σ_{A⊇B} (-1)^{|A\B|} w_A, one dimension at a time: after the
	// pass over bit j, beta[B] is the alternating sum over the supersets
	// of B that differ from it in the bits done so far.
	beta := slices.Clone(w)
	for j := range common {
		bit := 1 << j
		for pat := range beta {
			if pat&bit == 0 {
				beta[pat] -= beta[pat|bit]
			}
		}
	}
	start := len(out)
	for pat, v := range beta {
		if v == 0 {
			continue
		}
		var m domain.Cuboid
		for k, d := range common {
			if pat&(1<<k) != 0 {
				m |= 1 << d
			}
		}
		out = append(out, MarginTerm{Source: i, Margin: m, Coef: v / b.size(c&^m)})
	}
	slices.SortFunc(out[start:], func(x, y MarginTerm) int { return cmp.Compare(x.Margin, y.Margin) })
	return out
}

// Objective is the weighted total variance Σ_C w_C |C| Var ŷ_C as a
// function of the measurements' budget fractions x: per free residual A
// with weight a_A > 0 it is a_A / W_A, with W_A = Σ_{k covers A} C_k x_k^p.
// For Laplace noise p = 2 (v_k = 2 (S_k/(eps x_k))², C_k = eps²/(2 S_k²
// |C_k|)); for Gaussian noise p = 1 (v_k = S_k²/(2 rho x_k), C_k = 2 rho /
// (S_k² |C_k|)), where the problem is convex.
type Objective struct {
	// A and Covers have one entry per free residual of positive weight:
	// its weight a_A and the measurements covering it.
	A      []float64
	Covers [][]int
	// C has one coefficient per measurement.
	C []float64
	// Power is p: 2 (Laplace) or 1 (Gaussian).
	Power float64
}

// NewObjective returns the objective of the basis's free residuals of
// positive weight, in increasing order of residual (a fixed order: the
// sums do not depend on map order), with the coefficients c of the
// measurements and power p.
func (b *Basis) NewObjective(c []float64, power float64) Objective {
	o := Objective{C: c, Power: power}
	keys := make([]domain.Cuboid, 0, len(b.Res))
	for a, r := range b.Res {
		if r.Status == Free && r.Weight > 0 {
			keys = append(keys, a)
		}
	}
	slices.Sort(keys)
	for _, a := range keys {
		o.A = append(o.A, b.Res[a].Weight)
		o.Covers = append(o.Covers, b.Res[a].Covers)
	}
	return o
}

// pow is x^Power for the two powers used, and dpow its derivative.
func (o Objective) pow(x float64) float64 {
	if o.Power == 1 {
		return x
	}
	return x * x
}

func (o Objective) dpow(x float64) float64 {
	if o.Power == 1 {
		return 1
	}
	return 2 * x
}

// Value returns the objective at the fractions x.
func (o Objective) Value(x []float64) float64 {
	var f float64
	for i, a := range o.A {
		var w float64
		for _, k := range o.Covers[i] {
			w += o.C[k] * o.pow(x[k])
		}
		f += a / w
	}
	return f
}

// Gradient sets g to the objective's gradient at x.
func (o Objective) Gradient(x, g []float64) {
	clear(g)
	for i, a := range o.A {
		var w float64
		for _, k := range o.Covers[i] {
			w += o.C[k] * o.pow(x[k])
		}
		for _, k := range o.Covers[i] {
			g[k] -= a * o.C[k] * o.dpow(x[k]) / (w * w)
		}
	}
}

// ClosedForm returns the fractions x_k ∝ (B_k / C_k)^(1/(p+1)), where B_k
// sums a_A / (number of measurements covering A) over k's residuals: the
// exact optimum of Σ_k B_k/(C_k x_k^p) on the simplex, which is the
// objective when no free residual is shared.
func (o Objective) ClosedForm() []float64 {
	b := make([]float64, len(o.C))
	for i, a := range o.A {
		for _, k := range o.Covers[i] {
			b[k] += a / float64(len(o.Covers[i]))
		}
	}
	x := make([]float64, len(b))
	var sum float64
	for k := range x {
		if o.Power == 1 {
			x[k] = math.Sqrt(b[k] / o.C[k])
		} else {
			x[k] = math.Cbrt(b[k] / o.C[k])
		}
		sum += x[k]
	}
	for k := range x {
		x[k] /= sum
	}
	return x
}
