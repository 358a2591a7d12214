// Package privacy holds privacy budgets: validated epsilon, delta and rho
// (zero-concentrated DP), sequential and parallel composition, conversion
// from zCDP to (eps, delta), and an accountant that refuses to overspend.
//
// Budgets are accounted exactly. Epsilon and rho are kept on a grid of 2^-40
// (about 9.1e-13) and delta on a grid of 2^-62, as integer counts of grid
// steps, so that ten charges of 0.1 fit a budget of 1 and no sum ever rounds
// past a limit. NewEpsilon and NewRho round a requested value down to the
// grid and mechanisms calibrate their noise to the rounded value, so what is
// charged is exactly what is spent.
//
// Epsilon, Delta and Rho are structs with unexported fields: the only way to
// make a non-zero one is through its validating constructor, so a negative,
// infinite or NaN parameter cannot reach a budget.
//
// Sums never wrap. Every component of a Budget holds at most MaxSteps grid
// steps; a sum beyond that saturates to the vacuous value (eps or rho
// infinite, delta 1), which is still a true statement about the loss (every
// mechanism satisfies it) and which no budget covers, so an accountant
// refuses it. Composing deltas to 1 or more is meaningless, and is refused
// the same way.
package privacy

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strings"
	"sync"
)

// EpsilonStep, DeltaStep and RhoStep are the accounting grids.
const (
	EpsilonStep = 0x1p-40
	DeltaStep   = 0x1p-62
	RhoStep     = 0x1p-40
)

// MaxEpsilon bounds a single epsilon. Larger values promise nothing (an
// adversary's odds may grow by e^4096) and would make budget sums inexact.
const MaxEpsilon = 4096

// MaxRho bounds a single rho. A rho-zCDP mechanism with rho this large
// promises nothing useful; the bound keeps sums of many charges exact.
const MaxRho = 1 << 20

// MaxSteps is the largest count of grid steps any component of a Budget
// holds: eps and rho up to MaxSteps*2^-40 (about 4.2e6), delta up to
// MaxSteps*2^-62 (just below 1). A sum beyond it is vacuous (see Budget).
const MaxSteps = 1<<62 - 1

// vacuous is the step count of a component that promises nothing: eps or
// rho infinite, delta 1.
const vacuous = MaxSteps + 1

// Epsilon is a privacy-loss parameter: positive, at most MaxEpsilon and a
// multiple of EpsilonStep. Obtain one from NewEpsilon or EpsilonFromSteps.
// The zero Epsilon is not a valid parameter (every mechanism rejects it);
// Pure(Epsilon{}) is the zero budget.
type Epsilon struct{ steps int64 }

// NewEpsilon validates eps and rounds it down to the accounting grid. It
// fails for NaN, infinities, values <= 0 or above MaxEpsilon, and values
// smaller than one grid step.
func NewEpsilon(eps float64) (Epsilon, error) {
	switch {
	case math.IsNaN(eps) || math.IsInf(eps, 0):
		return Epsilon{}, fmt.Errorf("epsilon must be a finite number, got %v", eps)
	case eps <= 0:
		return Epsilon{}, fmt.Errorf("epsilon must be > 0, got %v", eps)
	case eps > MaxEpsilon:
		return Epsilon{}, fmt.Errorf("epsilon must be at most %v, got %v", MaxEpsilon, eps)
	case eps < EpsilonStep:
		return Epsilon{}, fmt.Errorf("epsilon %v is below the accounting resolution %v", eps, EpsilonStep)
	}
	// eps/EpsilonStep is exact (a power-of-two scaling) and below 2^53.
	return Epsilon{steps: int64(math.Floor(eps / EpsilonStep))}, nil
}

// maxEpsilonSteps is MaxEpsilon in steps of EpsilonStep.
const maxEpsilonSteps = MaxEpsilon << 40

// EpsilonFromSteps returns the epsilon of n steps of EpsilonStep. It fails
// unless 1 <= n <= MaxEpsilon/EpsilonStep.
func EpsilonFromSteps(n int64) (Epsilon, error) {
	if n < 1 || n > maxEpsilonSteps {
		return Epsilon{}, fmt.Errorf("epsilon steps must be in [1, %d], got %d", int64(maxEpsilonSteps), n)
	}
	return Epsilon{steps: n}, nil
}

// Float64 returns eps as a float64 (exactly), for calibrating noise.
func (e Epsilon) Float64() float64 { return float64(e.steps) * EpsilonStep }

// Steps returns eps as a count of EpsilonStep.
func (e Epsilon) Steps() int64 { return e.steps }

// IsZero reports whether e is the zero (unset, invalid) Epsilon.
func (e Epsilon) IsZero() bool { return e.steps == 0 }

// String formats eps as its float64 value.
func (e Epsilon) String() string { return fmt.Sprint(e.Float64()) }

// Format makes eps print like its float64 value under every verb (%g, %.3f, ...).
func (e Epsilon) Format(f fmt.State, verb rune) { formatFloat(f, verb, e.Float64()) }

func formatFloat(f fmt.State, verb rune, x float64) {
	if verb == 's' {
		verb = 'v'
	}
	fmt.Fprintf(f, fmt.FormatString(f, verb), x)
}

// Delta is the probability with which an (eps, delta) guarantee may fail:
// in [0, 1) and a multiple of DeltaStep. Obtain one from NewDelta; the zero
// Delta is 0.
type Delta struct{ steps int64 }

// NewDelta validates delta and rounds it down to the accounting grid.
func NewDelta(delta float64) (Delta, error) {
	if math.IsNaN(delta) || delta < 0 || delta >= 1 {
		return Delta{}, fmt.Errorf("delta must be in [0, 1), got %v", delta)
	}
	// delta/DeltaStep is exact and below 2^62.
	return Delta{steps: int64(math.Floor(delta / DeltaStep))}, nil
}

// Float64 returns delta as a float64 (rounded to nearest: the grid has 62
// bits, a float64 53).
func (d Delta) Float64() float64 { return float64(d.steps) * DeltaStep }

// Steps returns delta as a count of DeltaStep.
func (d Delta) Steps() int64 { return d.steps }

// String formats delta as its float64 value.
func (d Delta) String() string { return fmt.Sprint(d.Float64()) }

// Format makes delta print like its float64 value under every verb.
func (d Delta) Format(f fmt.State, verb rune) { formatFloat(f, verb, d.Float64()) }

// Rho is the parameter of rho-zero-concentrated differential privacy (Bun
// and Steinke 2016): positive, at most MaxRho and a multiple of RhoStep.
// Obtain one from NewRho or RhoFromSteps. The zero Rho is not a valid
// parameter; Concentrated(Rho{}) is the zero budget.
type Rho struct{ steps int64 }

// maxRhoSteps is MaxRho in steps of RhoStep.
const maxRhoSteps = MaxRho << 40

// NewRho validates rho and rounds it down to the accounting grid. It fails
// for NaN, infinities, values <= 0 or above MaxRho, and values smaller than
// one grid step.
func NewRho(rho float64) (Rho, error) {
	switch {
	case math.IsNaN(rho) || math.IsInf(rho, 0):
		return Rho{}, fmt.Errorf("rho must be a finite number, got %v", rho)
	case rho <= 0:
		return Rho{}, fmt.Errorf("rho must be > 0, got %v", rho)
	case rho > MaxRho:
		return Rho{}, fmt.Errorf("rho must be at most %v, got %v", MaxRho, rho)
	case rho < RhoStep:
		return Rho{}, fmt.Errorf("rho %v is below the accounting resolution %v", rho, RhoStep)
	}
	return Rho{steps: int64(math.Floor(rho / RhoStep))}, nil
}

// RhoFromSteps returns the rho of n steps of RhoStep. It fails unless
// 1 <= n <= MaxRho/RhoStep.
func RhoFromSteps(n int64) (Rho, error) {
	if n < 1 || n > maxRhoSteps {
		return Rho{}, fmt.Errorf("rho steps must be in [1, %d], got %d", int64(maxRhoSteps), n)
	}
	return Rho{steps: n}, nil
}

// Float64 returns rho as a float64 (exactly), for calibrating noise.
func (r Rho) Float64() float64 { return float64(r.steps) * RhoStep }

// Steps returns rho as a count of RhoStep.
func (r Rho) Steps() int64 { return r.steps }

// IsZero reports whether r is the zero (unset, invalid) Rho.
func (r Rho) IsZero() bool { return r.steps == 0 }

// String formats rho as its float64 value.
func (r Rho) String() string { return fmt.Sprint(r.Float64()) }

// Format makes rho print like its float64 value under every verb.
func (r Rho) Format(f fmt.State, verb rune) { formatFloat(f, verb, r.Float64()) }

// Budget is an amount of privacy loss, kept exactly as counts of grid steps:
// an (eps, delta)-DP part and a rho-zCDP part. A budget with both says that
// the mechanisms charged to it split into a group that is (eps, delta)-DP
// and a group that is rho-zCDP; see Budget.ApproxEpsilon for the (eps,
// delta) guarantee of the whole. The zero Budget is no loss.
//
// A component that a sum pushed past MaxSteps is vacuous: eps or rho
// infinite, or delta 1. Such a budget is still true of the mechanisms (every
// mechanism is (eps, 1)-DP), but it guarantees nothing, and Covers never
// reports it covered.
type Budget struct {
	eps   int64 // steps of EpsilonStep
	delta int64 // steps of DeltaStep
	rho   int64 // steps of RhoStep
}

// Pure returns the budget (eps, 0).
func Pure(eps Epsilon) Budget { return Budget{eps: eps.steps} }

// Approx returns the budget (eps, delta).
func Approx(eps Epsilon, delta Delta) Budget { return Budget{eps: eps.steps, delta: delta.steps} }

// Concentrated returns the budget of a rho-zCDP mechanism.
func Concentrated(rho Rho) Budget { return Budget{rho: rho.steps} }

// PureAsRho returns the zCDP charge of an eps-DP mechanism: every eps-DP
// mechanism is (eps^2/2)-zCDP (Bun and Steinke 2016, Proposition 1.4). The
// rho is eps^2/2 rounded up to RhoStep, computed exactly.
func PureAsRho(eps Epsilon) Budget {
	// eps = k 2^-40, so eps^2/2 = k^2 2^-81 = (k^2 / 2^41) RhoStep.
	k := uint64(eps.steps)
	hi, lo := bits.Mul64(k, k)
	steps := hi<<23 | lo>>41 // hi < 2^40 since k <= 2^52
	if lo&(1<<41-1) != 0 {
		steps++
	}
	return Budget{rho: int64(min(steps, vacuous))}
}

// NewBudget validates and rounds eps and delta and returns the budget.
// eps may be 0 here (a budget, unlike a mechanism's parameter, can be empty).
func NewBudget(eps, delta float64) (Budget, error) {
	var b Budget
	if eps != 0 {
		e, err := NewEpsilon(eps)
		if err != nil {
			return Budget{}, err
		}
		b.eps = e.steps
	}
	d, err := NewDelta(delta)
	if err != nil {
		return Budget{}, err
	}
	b.delta = d.steps
	return b, nil
}

// Epsilon returns the budget's epsilon (+Inf if vacuous).
func (b Budget) Epsilon() float64 {
	if b.eps == vacuous {
		return math.Inf(1)
	}
	return float64(b.eps) * EpsilonStep
}

// Delta returns the budget's delta (1 if vacuous).
func (b Budget) Delta() float64 { return float64(b.delta) * DeltaStep }

// Rho returns the budget's rho (+Inf if vacuous).
func (b Budget) Rho() float64 {
	if b.rho == vacuous {
		return math.Inf(1)
	}
	return float64(b.rho) * RhoStep
}

// IsZero reports whether b is no loss at all.
func (b Budget) IsZero() bool { return b == Budget{} }

// Vacuous reports whether a component of b promises nothing: a sum reached
// an infinite eps or rho, or a delta of 1.
func (b Budget) Vacuous() bool {
	return b.eps == vacuous || b.delta == vacuous || b.rho == vacuous
}

// Covers reports whether b is at least c in every component. A vacuous
// component of c is covered by nothing, not even a vacuous b: its true value
// is unknown.
func (b Budget) Covers(c Budget) bool {
	return covers(b.eps, c.eps) && covers(b.delta, c.delta) && covers(b.rho, c.rho)
}

func covers(b, c int64) bool { return c < vacuous && b >= c }

// String formats b as "eps=0.5", "eps=0.5, delta=1e-06" or "rho=0.125":
// eps is always shown unless only rho is spent.
func (b Budget) String() string { return b.format(b) }

// format formats b showing the components that are non-zero in b or in
// like (eps if none is), so that related budgets print alike.
func (b Budget) format(like Budget) string {
	var parts []string
	if b.eps != 0 || like.eps != 0 || (b.rho == 0 && like.rho == 0) {
		parts = append(parts, fmt.Sprintf("eps=%.6g", b.Epsilon()))
	}
	if b.delta != 0 || like.delta != 0 {
		parts = append(parts, fmt.Sprintf("delta=%.3g", b.Delta()))
	}
	if b.rho != 0 || like.rho != 0 {
		parts = append(parts, fmt.Sprintf("rho=%.6g", b.Rho()))
	}
	return strings.Join(parts, ", ")
}

// add returns a+b, saturated at vacuous; both are in [0, vacuous].
func add(a, b int64) int64 {
	if a >= vacuous-b {
		return vacuous
	}
	return a + b
}

// Sequential returns the loss of running all the given mechanisms on the
// same data: the sum, componentwise (basic sequential composition for eps
// and delta; rho adds under zCDP, Bun and Steinke 2016, Lemma 2.3). A sum
// past MaxSteps is vacuous.
func Sequential(bs ...Budget) Budget {
	var s Budget
	for _, b := range bs {
		s.eps = add(s.eps, b.eps)
		s.delta = add(s.delta, b.delta)
		s.rho = add(s.rho, b.rho)
	}
	return s
}

// Parallel returns the loss of running each mechanism on its own one of
// disjoint parts of the data (each individual is in at most one part): the
// maximum, componentwise (McSherry 2009; paper 2, Proposition 3; for zCDP,
// the same argument on Renyi divergences).
func Parallel(bs ...Budget) Budget {
	var m Budget
	for _, b := range bs {
		m.eps = max(m.eps, b.eps)
		m.delta = max(m.delta, b.delta)
		m.rho = max(m.rho, b.rho)
	}
	return m
}

// sub returns b-c for b >= c; a vacuous b stays vacuous.
func sub(b, c int64) int64 {
	if b == vacuous {
		return vacuous
	}
	return b - c
}

// Sub returns b - c, or an error if c exceeds b in any component (or is
// vacuous). A vacuous component of b stays vacuous.
func (b Budget) Sub(c Budget) (Budget, error) {
	if !b.Covers(c) {
		return Budget{}, fmt.Errorf("cannot take %v from %v", c, b)
	}
	return Budget{eps: sub(b.eps, c.eps), delta: sub(b.delta, c.delta), rho: sub(b.rho, c.rho)}, nil
}

// excess returns by how much next exceeds total in one component.
func excess(next, total int64) int64 {
	if next == vacuous {
		return vacuous
	}
	return max(next-total, 0)
}

// ErrOverspend is matched (with errors.Is) by every *OverspendError.
var ErrOverspend = errors.New("privacy budget exceeded")

// OverspendError reports a refused charge: what was asked, what was left
// and by how much the charge would have exceeded it.
type OverspendError struct {
	Requested, Remaining, Excess Budget
}

func (e *OverspendError) Error() string {
	// The remaining budget is shown in the requested budget's components
	// too ("remaining rho=0", not "remaining eps=0", for a rho charge).
	return fmt.Sprintf("privacy budget exceeded: spending %v would exceed the remaining %v by %v", e.Requested, e.Remaining.format(e.Requested), e.Excess)
}

// Is makes errors.Is(err, ErrOverspend) true.
func (e *OverspendError) Is(target error) bool { return target == ErrOverspend }

// Accountant tracks spending against a total budget. It is safe for
// concurrent use; a charge either fits entirely and is recorded, or is
// refused and changes nothing. A total with a rho component accepts zCDP
// charges (Concentrated, PureAsRho); one without refuses them, since zCDP
// does not imply pure DP.
type Accountant struct {
	mu    sync.Mutex
	total Budget
	spent Budget
}

// NewAccountant returns an accountant with the given total and nothing spent.
func NewAccountant(total Budget) *Accountant { return &Accountant{total: total} }

// Spend records b if it fits in what remains; otherwise it returns an
// *OverspendError and records nothing. A vacuous b never fits.
func (a *Accountant) Spend(b Budget) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	next := Sequential(a.spent, b)
	if !a.total.Covers(next) {
		rem, _ := a.total.Sub(a.spent)
		return &OverspendError{
			Requested: b,
			Remaining: rem,
			Excess: Budget{
				eps:   excess(next.eps, a.total.eps),
				delta: excess(next.delta, a.total.delta),
				rho:   excess(next.rho, a.total.rho),
			},
		}
	}
	a.spent = next
	return nil
}

// Spent returns the total recorded so far.
func (a *Accountant) Spent() Budget {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.spent
}

// Remaining returns what can still be spent.
func (a *Accountant) Remaining() Budget {
	a.mu.Lock()
	defer a.mu.Unlock()
	rem, _ := a.total.Sub(a.spent)
	return rem
}

// Total returns the accountant's total budget.
func (a *Accountant) Total() Budget { return a.total }

// Steps returns b's exact (eps, delta) representation, counts of
// EpsilonStep and DeltaStep, for durable storage; RhoSteps gives the rho.
func (b Budget) Steps() (eps, delta int64) { return b.eps, b.delta }

// RhoSteps returns b's rho as a count of RhoStep, for durable storage.
func (b Budget) RhoSteps() int64 { return b.rho }

// FromSteps is the inverse of Budget.Steps. It fails unless both counts are
// in [0, MaxSteps]: a vacuous budget is not stored.
func FromSteps(eps, delta int64) (Budget, error) {
	if eps < 0 || eps > MaxSteps || delta < 0 || delta > MaxSteps {
		return Budget{}, fmt.Errorf("invalid budget steps (eps %d, delta %d): each must be in [0, %d]", eps, delta, int64(MaxSteps))
	}
	return Budget{eps: eps, delta: delta}, nil
}

// FromRhoSteps is the inverse of Budget.RhoSteps: the budget of rho steps
// of RhoStep. It fails unless rho is in [0, MaxSteps]. Compose it with
// FromSteps by Sequential to restore a budget with all three components.
func FromRhoSteps(rho int64) (Budget, error) {
	if rho < 0 || rho > MaxSteps {
		return Budget{}, fmt.Errorf("invalid rho steps %d: must be in [0, %d]", rho, int64(MaxSteps))
	}
	return Budget{rho: rho}, nil
}

// MarshalJSON writes eps as a JSON number (its exact float64 value), so
// that a struct holding an Epsilon does not silently encode as {}.
func (e Epsilon) MarshalJSON() ([]byte, error) { return json.Marshal(e.Float64()) }

// UnmarshalJSON reads a JSON number through NewEpsilon (validated, rounded
// down to the grid).
func (e *Epsilon) UnmarshalJSON(b []byte) error {
	return unmarshalParam(b, "epsilon", func(x float64) error {
		v, err := NewEpsilon(x)
		*e = v
		return err
	})
}

// MarshalJSON writes delta as a JSON number.
func (d Delta) MarshalJSON() ([]byte, error) { return json.Marshal(d.Float64()) }

// UnmarshalJSON reads a JSON number through NewDelta.
func (d *Delta) UnmarshalJSON(b []byte) error {
	return unmarshalParam(b, "delta", func(x float64) error {
		v, err := NewDelta(x)
		*d = v
		return err
	})
}

// MarshalJSON writes rho as a JSON number (its exact float64 value).
func (r Rho) MarshalJSON() ([]byte, error) { return json.Marshal(r.Float64()) }

// UnmarshalJSON reads a JSON number through NewRho.
func (r *Rho) UnmarshalJSON(b []byte) error {
	return unmarshalParam(b, "rho", func(x float64) error {
		v, err := NewRho(x)
		*r = v
		return err
	})
}

func unmarshalParam(b []byte, name string, set func(float64) error) error {
	var x float64
	if err := json.Unmarshal(b, &x); err != nil {
		return fmt.Errorf("%s must be a JSON number: %w", name, err)
	}
	return set(x)
}
