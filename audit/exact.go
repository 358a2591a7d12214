package audit

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// Verdict is the outcome of an audit against a claimed eps.
type Verdict int

// The verdicts.
const (
	// Pass: the exact loss is at most the claim, or the sampled lower bound
	// does not exceed it (no violation found at the audit's confidence).
	Pass Verdict = iota + 1
	// Violation: the exact loss exceeds the claim, or the sampled lower
	// bound does, so the mechanism is broken with confidence 1-alpha.
	Violation
)

// String returns "pass" or "VIOLATION".
func (v Verdict) String() string {
	switch v {
	case Pass:
		return "pass"
	case Violation:
		return "VIOLATION"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// exactSlack absorbs float64 rounding in the computed log ratios when an
// exact loss is compared with its claim.
const exactSlack = 1e-9

func verdict(measured, claimed float64) Verdict {
	if measured > claimed*(1+exactSlack)+exactSlack {
		return Violation
	}
	return Pass
}

func checkClaim(claimed float64) error {
	if math.IsNaN(claimed) || claimed < 0 {
		return fmt.Errorf("audit: claimed eps must be >= 0 (+Inf allowed), got %v", claimed)
	}
	return nil
}

// Exact is the result of an exact audit: the privacy loss between two
// neighbouring inputs computed from the mechanism's output distributions,
//
//	eps = max over outputs o of |ln P(M(x) = o) - ln P(M(x') = o)|.
type Exact struct {
	// Epsilon is the exact loss; +Inf when some output is possible on one
	// input and impossible on the other.
	Epsilon float64
	// At is an output where the maximum is attained: an index into the
	// distributions of ExactFinite, an integer of ExactIntegers, the left
	// end of a piece of ExactDensities.
	At float64
	// Tail is true when the maximum is the value the log ratio takes on
	// every output beyond the window of ExactIntegers (At is then the
	// window's end).
	Tail    bool
	Claimed float64
	Verdict Verdict
}

// ExactFinite audits a mechanism with finitely many outputs: p[o] and q[o]
// are the probabilities of output o on two neighbouring inputs. Outputs
// impossible on both are skipped. claimed may be +Inf (no protection
// promised).
func ExactFinite(p, q []float64, claimed float64) (Exact, error) {
	if len(p) != len(q) || len(p) == 0 {
		return Exact{}, fmt.Errorf("audit: distributions must be non-empty and of equal length, got %d and %d outputs", len(p), len(q))
	}
	if err := checkClaim(claimed); err != nil {
		return Exact{}, err
	}
	for _, d := range [][]float64{p, q} {
		for o, v := range d {
			if !(v >= 0 && v <= 1) {
				return Exact{}, fmt.Errorf("audit: probability of output %d is %v, not in [0, 1]", o, v)
			}
		}
	}
	found := false
	best := Exact{Claimed: claimed}
	for o := range p {
		if p[o] == 0 && q[o] == 0 {
			continue
		}
		l := math.Abs(math.Log(p[o]) - math.Log(q[o]))
		if !found || l > best.Epsilon {
			best.Epsilon, best.At, found = l, float64(o), true
		}
	}
	if !found {
		return Exact{}, errors.New("audit: every output has probability zero")
	}
	best.Verdict = verdict(best.Epsilon, claimed)
	return best, nil
}

// ExactIntegers audits a mechanism whose output is an integer (in units of
// a noise grid, for example), with log-probabilities logp(z) and logq(z)
// on two neighbouring inputs (-Inf for an impossible output). It computes
// the log ratio on every integer of the window [lo, hi] and takes the tails
// from the window's ends: it is exact for noise whose log-probability is
// linear beyond the window (discrete and grid Laplace, once the window
// contains both inputs), where the ratio is constant. It checks that
// assumption where it can: the ratio must be the same on the last two
// integers of each end, or it fails.
func ExactIntegers(logp, logq func(z int64) float64, lo, hi int64, claimed float64) (Exact, error) {
	if hi-lo < 3 {
		return Exact{}, fmt.Errorf("audit: window [%d, %d] needs at least 4 integers", lo, hi)
	}
	if hi-lo > 1<<26 {
		return Exact{}, fmt.Errorf("audit: window [%d, %d] is wider than 2^26 integers", lo, hi)
	}
	if err := checkClaim(claimed); err != nil {
		return Exact{}, err
	}
	ratio := func(z int64) (float64, error) {
		a, b := logp(z), logq(z)
		switch {
		case math.IsNaN(a) || math.IsNaN(b) || a > 0 || b > 0:
			return 0, fmt.Errorf("audit: log-probabilities at %d are %v and %v, not in [-Inf, 0]", z, a, b)
		case math.IsInf(a, -1) && math.IsInf(b, -1):
			return 0, fmt.Errorf("audit: both outputs are impossible at %d: choose a window inside the support", z)
		}
		return a - b, nil
	}
	best := Exact{Claimed: claimed, At: float64(lo)}
	for z := lo; z <= hi; z++ {
		l, err := ratio(z)
		if err != nil {
			return Exact{}, err
		}
		if z == lo || math.Abs(l) > best.Epsilon {
			best.Epsilon, best.At = math.Abs(l), float64(z)
		}
	}
	for _, end := range [][2]int64{{lo, lo + 1}, {hi, hi - 1}} {
		a, _ := ratio(end[0])
		b, _ := ratio(end[1])
		if math.Abs(a-b) > 1e-9*math.Max(1, math.Abs(a)) {
			return Exact{}, fmt.Errorf("audit: log ratio still changes at the end %d of window [%d, %d] (%v vs %v): the tails are not covered", end[0], lo, hi, a, b)
		}
		if math.Abs(a) >= best.Epsilon*(1-1e-12) {
			best.Epsilon, best.At, best.Tail = math.Max(best.Epsilon, math.Abs(a)), float64(end[0]), true
		}
	}
	best.Verdict = verdict(best.Epsilon, claimed)
	return best, nil
}

// ExactDensities audits a mechanism with a real output whose densities on
// two neighbouring inputs are piecewise constant: f on the breakpoints fx
// (f[i] on [fx[i], fx[i+1]), zero outside) and g on gx likewise. It
// compares them on every piece of the common refinement.
func ExactDensities(fx, f, gx, g []float64, claimed float64) (Exact, error) {
	if err := checkClaim(claimed); err != nil {
		return Exact{}, err
	}
	for _, d := range []struct{ x, v []float64 }{{fx, f}, {gx, g}} {
		if len(d.x) != len(d.v)+1 || len(d.v) == 0 {
			return Exact{}, fmt.Errorf("audit: a piecewise density needs one more breakpoint than values, got %d and %d", len(d.x), len(d.v))
		}
		for i := range d.v {
			if !(d.x[i] < d.x[i+1]) || !(d.v[i] >= 0) || math.IsInf(d.v[i], 1) {
				return Exact{}, fmt.Errorf("audit: piece %d of a density is invalid ([%v, %v) with density %v)", i, d.x[i], d.x[i+1], d.v[i])
			}
		}
	}
	cuts := append(append([]float64(nil), fx...), gx...)
	sort.Float64s(cuts)
	at := func(x, v []float64, t float64) float64 {
		i := sort.SearchFloat64s(x, t) // first breakpoint >= t
		if i < len(x) && x[i] == t {
			i++
		}
		if i == 0 || i == len(x) {
			return 0
		}
		return v[i-1]
	}
	found := false
	best := Exact{Claimed: claimed}
	for i := 0; i+1 < len(cuts); i++ {
		if cuts[i] == cuts[i+1] {
			continue
		}
		mid := cuts[i] + (cuts[i+1]-cuts[i])/2
		a, b := at(fx, f, mid), at(gx, g, mid)
		if a == 0 && b == 0 {
			continue
		}
		if l := math.Abs(math.Log(a) - math.Log(b)); !found || l > best.Epsilon {
			best.Epsilon, best.At, found = l, cuts[i], true
		}
	}
	if !found {
		return Exact{}, errors.New("audit: both densities vanish everywhere")
	}
	best.Verdict = verdict(best.Epsilon, claimed)
	return best, nil
}
