// Package privacy holds privacy budgets: validated epsilon and delta,
// sequential and parallel composition, and an accountant that refuses to
// overspend.
//
// Budgets are accounted exactly. Epsilon is kept on a grid of 2^-40
// (about 9.1e-13) and delta on a grid of 2^-62, as integer counts of grid
// steps, so that ten charges of 0.1 fit a budget of 1 and no sum ever rounds
// past a limit. NewEpsilon rounds a requested epsilon down to the grid and
// mechanisms calibrate their noise to the rounded value, so what is charged
// is exactly what is spent.
package privacy

import (
	"errors"
	"fmt"
	"math"
	"sync"
)

// EpsilonStep and DeltaStep are the accounting grids.
const (
	EpsilonStep = 0x1p-40
	DeltaStep   = 0x1p-62
)

// MaxEpsilon bounds a single epsilon. Larger values promise nothing (an
// adversary's odds may grow by e^4096) and would make budget sums inexact.
const MaxEpsilon = 4096

// Epsilon is a privacy-loss parameter: finite, positive, at most MaxEpsilon
// and a multiple of EpsilonStep. Obtain one from NewEpsilon.
type Epsilon float64

// NewEpsilon validates eps and rounds it down to the accounting grid. It
// fails for NaN, infinities, values <= 0 or above MaxEpsilon, and values
// smaller than one grid step.
func NewEpsilon(eps float64) (Epsilon, error) {
	switch {
	case math.IsNaN(eps) || math.IsInf(eps, 0):
		return 0, fmt.Errorf("epsilon must be a finite number, got %v", eps)
	case eps <= 0:
		return 0, fmt.Errorf("epsilon must be > 0, got %v", eps)
	case eps > MaxEpsilon:
		return 0, fmt.Errorf("epsilon must be at most %v, got %v", MaxEpsilon, eps)
	case eps < EpsilonStep:
		return 0, fmt.Errorf("epsilon %v is below the accounting resolution %v", eps, EpsilonStep)
	}
	return Epsilon(math.Floor(eps/EpsilonStep) * EpsilonStep), nil
}

// Float64 returns eps as a float64, for calibrating noise.
func (e Epsilon) Float64() float64 { return float64(e) }

func (e Epsilon) steps() int64 { return int64(float64(e) / EpsilonStep) }

// Delta is the probability with which an (eps, delta) guarantee may fail:
// in [0, 1) and a multiple of DeltaStep. Obtain one from NewDelta.
type Delta float64

// NewDelta validates delta and rounds it down to the accounting grid.
func NewDelta(delta float64) (Delta, error) {
	if math.IsNaN(delta) || delta < 0 || delta >= 1 {
		return 0, fmt.Errorf("delta must be in [0, 1), got %v", delta)
	}
	return Delta(math.Floor(delta/DeltaStep) * DeltaStep), nil
}

// Float64 returns delta as a float64.
func (d Delta) Float64() float64 { return float64(d) }

// Budget is an amount of privacy loss: (epsilon, delta), kept exactly as
// counts of grid steps. The zero Budget is no loss.
type Budget struct {
	eps   int64 // steps of EpsilonStep
	delta int64 // steps of DeltaStep
}

// Pure returns the budget (eps, 0).
func Pure(eps Epsilon) Budget { return Budget{eps: eps.steps()} }

// Approx returns the budget (eps, delta).
func Approx(eps Epsilon, delta Delta) Budget {
	return Budget{eps: eps.steps(), delta: int64(float64(delta) / DeltaStep)}
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
		b.eps = e.steps()
	}
	d, err := NewDelta(delta)
	if err != nil {
		return Budget{}, err
	}
	b.delta = int64(float64(d) / DeltaStep)
	return b, nil
}

// Epsilon returns the budget's epsilon.
func (b Budget) Epsilon() float64 { return float64(b.eps) * EpsilonStep }

// Delta returns the budget's delta.
func (b Budget) Delta() float64 { return float64(b.delta) * DeltaStep }

// IsZero reports whether b is no loss at all.
func (b Budget) IsZero() bool { return b == Budget{} }

// Covers reports whether b is at least c in both epsilon and delta.
func (b Budget) Covers(c Budget) bool { return b.eps >= c.eps && b.delta >= c.delta }

// String formats b as "eps=0.5" or "eps=0.5, delta=1e-06".
func (b Budget) String() string {
	if b.delta == 0 {
		return fmt.Sprintf("eps=%.6g", b.Epsilon())
	}
	return fmt.Sprintf("eps=%.6g, delta=%.3g", b.Epsilon(), b.Delta())
}

// Sequential returns the loss of running all the given mechanisms on the
// same data: the sum (basic sequential composition).
func Sequential(bs ...Budget) Budget {
	var s Budget
	for _, b := range bs {
		s.eps += b.eps
		s.delta += b.delta
	}
	return s
}

// Parallel returns the loss of running each mechanism on its own one of
// disjoint parts of the data (each individual is in at most one part): the
// maximum, componentwise (McSherry 2009; paper 2, Proposition 3).
func Parallel(bs ...Budget) Budget {
	var m Budget
	for _, b := range bs {
		m.eps = max(m.eps, b.eps)
		m.delta = max(m.delta, b.delta)
	}
	return m
}

// Sub returns b - c, or an error if c exceeds b in either component.
func (b Budget) Sub(c Budget) (Budget, error) {
	if !b.Covers(c) {
		return Budget{}, fmt.Errorf("cannot take %v from %v", c, b)
	}
	return Budget{eps: b.eps - c.eps, delta: b.delta - c.delta}, nil
}

// ErrOverspend is matched (with errors.Is) by every *OverspendError.
var ErrOverspend = errors.New("privacy budget exceeded")

// OverspendError reports a refused charge: what was asked, what was left
// and by how much the charge would have exceeded it.
type OverspendError struct {
	Requested, Remaining, Excess Budget
}

func (e *OverspendError) Error() string {
	return fmt.Sprintf("privacy budget exceeded: spending %v would exceed the remaining %v by %v", e.Requested, e.Remaining, e.Excess)
}

// Is makes errors.Is(err, ErrOverspend) true.
func (e *OverspendError) Is(target error) bool { return target == ErrOverspend }

// Accountant tracks spending against a total budget. It is safe for
// concurrent use; a charge either fits entirely and is recorded, or is
// refused and changes nothing.
type Accountant struct {
	mu    sync.Mutex
	total Budget
	spent Budget
}

// NewAccountant returns an accountant with the given total and nothing spent.
func NewAccountant(total Budget) *Accountant { return &Accountant{total: total} }

// Spend records b if it fits in what remains; otherwise it returns an
// *OverspendError and records nothing.
func (a *Accountant) Spend(b Budget) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	next := Sequential(a.spent, b)
	if !a.total.Covers(next) {
		rem, _ := a.total.Sub(a.spent)
		return &OverspendError{
			Requested: b,
			Remaining: rem,
			Excess:    Budget{eps: max(next.eps-a.total.eps, 0), delta: max(next.delta-a.total.delta, 0)},
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

// Steps returns b's exact representation, counts of EpsilonStep and
// DeltaStep, for durable storage.
func (b Budget) Steps() (eps, delta int64) { return b.eps, b.delta }

// FromSteps is the inverse of Budget.Steps. It fails for negative counts.
func FromSteps(eps, delta int64) (Budget, error) {
	if eps < 0 || delta < 0 || delta >= 1<<62 {
		return Budget{}, fmt.Errorf("invalid budget steps (%d, %d)", eps, delta)
	}
	return Budget{eps: eps, delta: delta}, nil
}
