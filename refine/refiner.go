package refine

import (
	"context"
	"fmt"
	"math"
)

// Knowledge is what an analyst knows about the true answers: linear
// equalities, orderings and ranges. Orderings and ranges (and the
// constants of public equalities) must be fixed without looking at the
// data; then refining is post-processing and keeps the privacy guarantee
// of the noisy answers.
type Knowledge struct {
	Equalities []Equality
	// Order lists chains: for a chain c, mu[c[0]] <= mu[c[1]] <= ... .
	Order [][]int
	// Lower and Upper bound each answer (nil: unbounded; use -Inf/+Inf for
	// single unbounded answers). Non-negativity is Lower = 0.
	Lower, Upper []float64
	// Names optionally names the answers in error messages.
	Names []string
}

// Refiner computes the least-squares refinement of noisy answers under
// Knowledge: the vector closest to the noisy answers in Euclidean distance
// that satisfies every constraint. It is safe for concurrent use.
//
// Equalities alone have the closed form of Theorem 3 (Equalities.Refine).
// Orderings alone are isotonic regression (pool-adjacent-violators, O(n)
// per chain) when the chains share no answer, also with ranges (pool
// adjacent violators with block means clipped to the bounds, tightened
// along the chain). Anything else (equalities with inequalities, chains that share
// answers) is solved by Dykstra's alternating projections onto the sets
// above, which converge to the exact least-squares solution; iteration
// stops when one round moves no answer by more than 1e-11 of the largest
// magnitude and every constraint holds to 1e-9 of it.
type Refiner struct {
	n        int
	eq       *Equalities
	chains   [][]int
	lo, hi   []float64 // nil when no answer is bounded on that side
	disjoint bool      // chains share no answer
	clo, chi [][]float64
	inChain  []bool
	names    []string
}

// Dykstra's stopping rule and budget.
const (
	dykstraStep      = 1e-11
	dykstraViolation = 1e-9
	dykstraMaxRounds = 200_000
)

// NewRefiner validates the knowledge about n answers. Besides the checks
// of NewEqualities, it rejects chains with fewer than two answers, indices
// outside 0..n-1, an answer repeated in a chain, NaN bounds, a lower bound
// above an upper bound, and chains whose bounds cannot be met in order.
func NewRefiner(n int, k Knowledge) (*Refiner, error) {
	if n <= 0 {
		return nil, fmt.Errorf("refine: the number of answers must be positive, got %d", n)
	}
	if k.Names != nil && len(k.Names) != n {
		return nil, fmt.Errorf("refine: %d answer names for %d answers", len(k.Names), n)
	}
	r := &Refiner{n: n, disjoint: true, names: k.Names}
	if len(k.Equalities) > 0 {
		eq, err := NewEqualities(n, k.Equalities)
		if err != nil {
			return nil, err
		}
		r.eq = eq
	}
	for side, b := range [][]float64{k.Lower, k.Upper} {
		if b == nil {
			continue
		}
		if len(b) != n {
			return nil, fmt.Errorf("refine: %s bounds have length %d, want %d", [2]string{"lower", "upper"}[side], len(b), n)
		}
		bounded := false
		for i, v := range b {
			if math.IsNaN(v) {
				return nil, fmt.Errorf("refine: %s bound of answer %s is NaN", [2]string{"lower", "upper"}[side], r.name(i))
			}
			if (side == 0 && v == math.Inf(1)) || (side == 1 && v == math.Inf(-1)) {
				return nil, fmt.Errorf("refine: %s bound of answer %s is %v; no value satisfies it", [2]string{"lower", "upper"}[side], r.name(i), v)
			}
			bounded = bounded || !math.IsInf(v, 0)
		}
		if bounded {
			if side == 0 {
				r.lo = b
			} else {
				r.hi = b
			}
		}
	}
	if r.lo != nil && r.hi != nil {
		for i := range n {
			if r.lo[i] > r.hi[i] {
				return nil, fmt.Errorf("refine: answer %s has lower bound %v above its upper bound %v", r.name(i), r.lo[i], r.hi[i])
			}
		}
	}
	chainOf := make([]int32, n) // chain index + 1 of the last chain seen on each answer
	for c, chain := range k.Order {
		if len(chain) < 2 {
			return nil, fmt.Errorf("refine: order chain %d has %d answers; it needs at least two", c, len(chain))
		}
		for t, i := range chain {
			if i < 0 || i >= n {
				return nil, fmt.Errorf("refine: order chain %d: answer index %d is outside 0..%d", c, i, n-1)
			}
			switch chainOf[i] {
			case int32(c) + 1:
				return nil, fmt.Errorf("refine: order chain %d names answer %s twice (position %d)", c, r.name(i), t)
			case 0:
			default:
				r.disjoint = false
			}
			chainOf[i] = int32(c) + 1
		}
		clo, chi := make([]float64, len(chain)), make([]float64, len(chain))
		if t := chainBounds(chain, r.lo, r.hi, clo, chi); t >= 0 {
			return nil, fmt.Errorf("refine: order chain %d cannot be satisfied: answer %s must be at least %v (a lower bound at or before it in the chain) and at most %v (an upper bound at or after it)", c, r.name(chain[t]), clo[t], chi[t])
		}
		r.chains = append(r.chains, chain)
		r.clo, r.chi = append(r.clo, clo), append(r.chi, chi)
	}
	r.inChain = make([]bool, n)
	for i, c := range chainOf {
		r.inChain[i] = c != 0
	}
	return r, nil
}

// name names answer i in errors.
func (r *Refiner) name(i int) string {
	if r.names != nil {
		return fmt.Sprintf("%q", r.names[i])
	}
	return fmt.Sprintf("%d", i)
}

// PostProcessing reports whether the refinement depends on the data only
// through the noisy answers: every equality is public. Then the refined
// answers keep the privacy guarantee of the noisy ones. Otherwise analyse
// the refinement with Linear.Loss and calibrate the noise with
// Linear.Calibrate.
func (r *Refiner) PostProcessing() bool { return r.eq == nil || r.eq.Public() }

// Exact reports whether Refine computes the solution in closed form
// (without iterating).
func (r *Refiner) Exact() bool {
	ineq := len(r.chains) > 0 || r.lo != nil || r.hi != nil
	return !(r.eq != nil && ineq) && r.disjoint
}

// Method describes the algorithm Refine uses.
func (r *Refiner) Method() string {
	ineq := len(r.chains) > 0 || r.lo != nil || r.hi != nil
	switch {
	case r.eq != nil && !ineq:
		return "least squares under linear equalities (closed form, Theorem 3)"
	case !ineq:
		return "no constraints (answers copied)"
	case r.Exact() && len(r.chains) > 0:
		return "isotonic regression with ranges (pool adjacent violators, exact)"
	case r.Exact():
		return "clipping to the ranges (exact)"
	default:
		return "Dykstra's alternating projections (converges to the exact least-squares solution)"
	}
}

// Refine writes to dst the least-squares refinement of the noisy answers
// x. dst may be x. Only the iterative case looks at ctx; it fails if the
// iteration does not converge, which happens when the constraints cannot
// all hold together.
func (r *Refiner) Refine(ctx context.Context, dst, x []float64) error {
	if err := checkVectors(r.n, dst, x); err != nil {
		return err
	}
	ineq := len(r.chains) > 0 || r.lo != nil || r.hi != nil
	if !ineq {
		if r.eq != nil {
			return r.eq.Refine(dst, x)
		}
		copy(dst, x)
		return nil
	}
	if &dst[0] != &x[0] {
		copy(dst, x)
	}
	if r.Exact() {
		r.projectInequalities(dst)
		return nil
	}
	return r.dykstra(ctx, dst)
}

// projectInequalities projects y in place onto the chains and ranges, for
// chains that share no answer.
func (r *Refiner) projectInequalities(y []float64) {
	for i := range y {
		if r.inChain[i] {
			continue
		}
		if r.lo != nil {
			y[i] = max(y[i], r.lo[i])
		}
		if r.hi != nil {
			y[i] = min(y[i], r.hi[i])
		}
	}
	s := r.chainScratch()
	for c, chain := range r.chains {
		v := s.buf[:len(chain)]
		for t, i := range chain {
			v[t] = y[i]
		}
		boundedIsotonic(v, r.clo[c], r.chi[c], s)
		for t, i := range chain {
			y[i] = v[t]
		}
	}
}

func (r *Refiner) chainScratch() *chainScratch {
	longest := 0
	for _, c := range r.chains {
		longest = max(longest, len(c))
	}
	return newChainScratch(longest)
}

// dykstra runs Dykstra's alternating projections from y, in place. The
// affine set of the equalities is projected onto last, so that the result
// satisfies them to rounding error.
func (r *Refiner) dykstra(ctx context.Context, y []float64) error {
	s := r.chainScratch()
	var sets []func([]float64)
	if r.disjoint {
		sets = append(sets, r.projectInequalities)
	} else {
		for _, chain := range r.chains {
			sets = append(sets, func(y []float64) {
				v := s.buf[:len(chain)]
				for t, i := range chain {
					v[t] = y[i]
				}
				pava(v, v, s.sums, s.sizes)
				for t, i := range chain {
					y[i] = v[t]
				}
			})
		}
		if r.lo != nil || r.hi != nil {
			sets = append(sets, func(y []float64) {
				for i := range y {
					if r.lo != nil {
						y[i] = max(y[i], r.lo[i])
					}
					if r.hi != nil {
						y[i] = min(y[i], r.hi[i])
					}
				}
			})
		}
	}
	// Dykstra's correction terms; the affine set needs none (its
	// corrections are orthogonal to it, so plain projection is the same).
	inc := make([][]float64, len(sets))
	for k := range inc {
		inc[k] = make([]float64, r.n)
	}
	prev, u := make([]float64, r.n), make([]float64, r.n)
	scale := 1.0
	for _, v := range y {
		scale = max(scale, math.Abs(v))
	}
	var viol float64
	for round := 1; round <= dykstraMaxRounds; round++ {
		if round%64 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		copy(prev, y)
		// The step of a round is the largest change of the iterate or of a
		// correction term: the iterate alone can stall for many rounds
		// while the corrections move, short of the solution.
		var step float64
		for k, project := range sets {
			d := inc[k]
			for i := range y {
				y[i] += d[i]
				u[i] = y[i]
			}
			project(y)
			for i := range y {
				nd := u[i] - y[i]
				step = max(step, math.Abs(nd-d[i]))
				d[i] = nd
			}
		}
		if r.eq != nil {
			_ = r.eq.Refine(y, y) // y is finite: cannot fail
		}
		for i, v := range y {
			step = max(step, math.Abs(v-prev[i]))
		}
		if step > dykstraStep*scale {
			continue
		}
		if viol = r.violation(y); viol <= dykstraViolation*scale {
			r.snap(y, dykstraViolation*scale)
			return nil
		}
	}
	viol = r.violation(y)
	return fmt.Errorf("refine: no refinement satisfies all the constraints to within %.3g after %d rounds of Dykstra's projections (largest violation %.3g): they are probably inconsistent", dykstraViolation*scale, dykstraMaxRounds, viol)
}

// snap moves answers within tol of a bound onto it, so that a count
// refined to zero by non-negativity is 0 rather than -1e-13 (the
// equalities then hold to within tol times their coefficients).
func (r *Refiner) snap(y []float64, tol float64) {
	for i, v := range y {
		if r.lo != nil && math.Abs(v-r.lo[i]) <= tol {
			y[i] = r.lo[i]
		}
		if r.hi != nil && math.Abs(v-r.hi[i]) <= tol {
			y[i] = r.hi[i]
		}
	}
}

// violation returns the largest amount by which y breaks a constraint, in
// units of the answers.
func (r *Refiner) violation(y []float64) float64 {
	var v float64
	if r.eq != nil {
		for _, eq := range r.eq.eqs {
			s := -eq.Value
			for t, i := range eq.Index {
				s += eq.Coef[t] * y[i]
			}
			v = max(v, math.Abs(s)/norm2(eq.Coef))
		}
	}
	for _, chain := range r.chains {
		for t := 1; t < len(chain); t++ {
			v = max(v, y[chain[t-1]]-y[chain[t]])
		}
	}
	for i := range y {
		if r.lo != nil {
			v = max(v, r.lo[i]-y[i])
		}
		if r.hi != nil {
			v = max(v, y[i]-r.hi[i])
		}
	}
	return v
}
