package privacy

import (
	"fmt"
	"math"
)

// Conversion from zero-concentrated DP to (eps, delta)-DP.
//
// A rho-zCDP mechanism is (alpha, alpha rho)-Renyi DP for every alpha > 1,
// and Canonne, Kamath and Steinke ("The discrete Gaussian for differential
// privacy", 2020, Proposition 12 and Corollary 13) show that an
// (alpha, tau)-RDP mechanism is (eps, delta)-DP for
//
//	delta = exp((alpha-1)(tau-eps)) / (alpha-1) * (1-1/alpha)^alpha.
//
// With tau = alpha rho, the log of this is strictly convex in alpha (its
// second derivative is 2 rho + 1/(alpha(alpha-1)) > 0) with derivative
//
//	g(alpha) = (2 alpha - 1) rho - eps + log(1 - 1/alpha),
//
// so DeltaFor finds the unique root of g by bisection. Solving for eps at a
// fixed alpha gives
//
//	eps(alpha) = alpha rho + (log(1/delta) - log alpha)/(alpha-1) + log(1-1/alpha),
//
// whose derivative rho + log(alpha delta)/(alpha-1)^2 changes sign once, so
// EpsilonFor bisects on its sign. Every alpha > 1 gives a valid bound, so an
// imprecise alpha only loses tightness, never validity; the value at the
// chosen alpha is evaluated with a margin that covers float64 rounding, so
// the results are never below the true bound.

// relMargin covers the rounding of a handful of float64 operations (each
// within 2^-53 relative) in the evaluations below.
const relMargin = 0x1p-48

// DeltaFor returns the smallest delta for which the Canonne-Kamath-Steinke
// bound shows that a rho-zCDP mechanism is (eps, delta)-DP, rounded up (never
// smaller than the bound) and at most 1. It is 0 for rho = 0. rho and eps
// must be finite and >= 0.
func DeltaFor(rho, eps float64) (float64, error) {
	if !(rho >= 0) || math.IsInf(rho, 0) {
		return 0, fmt.Errorf("DeltaFor: rho must be a finite number >= 0, got %v", rho)
	}
	if !(eps >= 0) || math.IsInf(eps, 0) {
		return 0, fmt.Errorf("DeltaFor: eps must be a finite number >= 0, got %v", eps)
	}
	if rho == 0 {
		return 0, nil
	}
	// The root of g lies above (1 + eps/rho)/2 (where the first two terms
	// of g cancel and the log is still negative) and below
	// (eps+1)/(2 rho) + 2, where g >= 1 + 3 rho + log(1/2) > 0.
	lo := max(1+0x1p-30, (1+eps/rho)/2)
	hi := (eps+1)/(2*rho) + 2
	for range 200 {
		mid := lo + (hi-lo)/2
		if mid <= lo || mid >= hi {
			break
		}
		if (2*mid-1)*rho-eps+math.Log1p(-1/mid) < 0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	return deltaAt(rho, eps, hi), nil
}

// deltaAt evaluates the bound at alpha, rounded up, capped at 1.
func deltaAt(rho, eps, alpha float64) float64 {
	am1 := alpha - 1
	t1 := am1 * (alpha*rho - eps)
	t2 := alpha * math.Log1p(-1/alpha)
	t3 := -math.Log(am1)
	logd := t1 + t2 + t3
	// Each term is within a few ulps of its exact value at this alpha.
	logd += relMargin * (math.Abs(t1) + math.Abs(t2) + math.Abs(t3))
	// math.Exp is within one ulp; step up two to be above the exact value,
	// also where it underflows to 0.
	d := math.Nextafter(math.Nextafter(math.Exp(logd), 2), 2)
	return min(d, 1)
}

// EpsilonFor returns the smallest eps for which the Canonne-Kamath-Steinke
// bound shows that a rho-zCDP mechanism is (eps, delta)-DP, rounded up
// (never smaller than the bound). It is 0 for rho = 0. rho must be finite
// and >= 0, delta in (0, 1).
func EpsilonFor(rho, delta float64) (float64, error) {
	if !(rho >= 0) || math.IsInf(rho, 0) {
		return 0, fmt.Errorf("EpsilonFor: rho must be a finite number >= 0, got %v", rho)
	}
	if !(delta > 0 && delta < 1) {
		return 0, fmt.Errorf("EpsilonFor: delta must be in (0, 1), got %v", delta)
	}
	if rho == 0 {
		return 0, nil
	}
	// eps'(alpha) = rho - log(1/(alpha delta))/(alpha-1)^2 is negative near
	// 1 and positive from alpha = 1/delta on; it changes sign once.
	pos := func(a float64) bool { return rho*(a-1)*(a-1) > -math.Log(a*delta) }
	lo, hi := 1+0x1p-30, 2.0
	for !pos(hi) {
		lo, hi = hi, 2*hi
	}
	for range 200 {
		mid := lo + (hi-lo)/2
		if mid <= lo || mid >= hi {
			break
		}
		if pos(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	best := epsilonAt(rho, delta, lo)
	if e := epsilonAt(rho, delta, hi); e < best {
		best = e
	}
	return best, nil
}

// epsilonAt evaluates eps(alpha), rounded up; it is never below 0 (an
// (eps, delta) guarantee with eps < 0 is no stronger than one with eps = 0
// for the purposes of reporting).
func epsilonAt(rho, delta, alpha float64) float64 {
	am1 := alpha - 1
	t1 := alpha * rho
	t2 := (-math.Log(delta) - math.Log(alpha)) / am1
	t3 := math.Log1p(-1 / alpha)
	e := t1 + t2 + t3
	e += relMargin * (math.Abs(t1) + math.Abs(t2) + math.Abs(t3))
	return max(e, 0)
}

// ApproxEpsilon returns the eps for which b is (eps, delta)-DP in total: its
// (eps_b, delta_b) part composed with its rho part converted at delta -
// delta_b, i.e. eps_b + EpsilonFor(rho_b, delta - delta_b). delta must be
// above delta_b if b has a rho part, and at least delta_b otherwise. A
// vacuous b gives +Inf.
func (b Budget) ApproxEpsilon(delta float64) (float64, error) {
	if math.IsNaN(delta) || delta >= 1 || delta < b.Delta() || (b.rho != 0 && delta == b.Delta()) {
		return 0, fmt.Errorf("ApproxEpsilon: delta %v must be in [%v, 1), and above it when the budget has a rho part", delta, b.Delta())
	}
	if b.Vacuous() {
		return math.Inf(1), nil
	}
	if b.rho == 0 {
		return b.Epsilon(), nil
	}
	// The subtraction may round up; shrink by more than its error so the
	// delta converted is never above the true difference.
	rest := (delta - b.Delta()) * (1 - 0x1p-50)
	if !(rest > 0) {
		return math.Inf(1), nil
	}
	e, err := EpsilonFor(b.Rho(), rest)
	if err != nil {
		return 0, err
	}
	// The sum is within half an ulp of the exact one: the next float up
	// is above it.
	return math.Nextafter(b.Epsilon()+e, math.Inf(1)), nil
}
