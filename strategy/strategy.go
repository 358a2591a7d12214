// Package strategy chooses what to measure, and with what noise, to answer
// a workload of linear queries on a product domain as accurately as a
// privacy budget allows. It is pure mathematics: no schema, no I/O, no
// noise sampling, no global state.
//
// A strategy is a list of measurements: each a set of queries (a
// query.Term, a Kronecker product of one factor per dimension) answered
// with independent noise of a given variance per query. The workload is
// then estimated by generalised least squares from all the measurements
// together, and the objective everywhere is the expected total squared
// error of the workload's queries under that estimate,
//
//	Σ_q w_q Var(q̂) = Σ_T w_T tr(W_T (Σ_k A_kᵀ A_k / v_k)⁺ W_Tᵀ),
//
// each query of each workload term counted once with its term's weight
// (for a marginal, the sum over its cells; for a range workload, the sum
// over the ranges). Objective computes it exactly.
//
// Optimize searches, for a mechanism and a budget:
//
//   - Gaussian noise (zCDP, shares of rho add up) on marginal-type
//     workloads: ResidualPlanner's strategy, one measurement of the
//     residual ⊗_{i∈A} Residual ⊗_{i∉A} Total per residual the workload
//     needs, with the closed-form variances of the sum-of-variances
//     objective (optimal over every strategy: it meets the SVD bound), or
//     the max-variance objective solved with a duality certificate;
//   - Laplace noise (pure DP, shares of epsilon add up) on marginal-type
//     workloads: marginals anywhere in the lattice (above or below the
//     requested ones) with their shares, by deterministic multi-start local
//     optimisation (HDMM's OPT_M family);
//   - workloads with ordered dimensions (prefix sums, ranges): Kronecker
//     products of one strategy factor per dimension (hierarchical b-ary
//     intervals, HDMM's p-Identity, identity, total; HDMM's OPT_⊗), the
//     marginal family above, and the union of both, whichever is best.
//
// Every strategy carries two bounds, named for what they bound: a lower
// bound over every strategy of the mechanism class (the SVD bound of the
// matrix mechanism, Li and Miklau), and, where the search is certified, a
// lower bound within the family searched.
package strategy

import (
	"errors"
	"fmt"
	"math"

	"github.com/knowdp/knowdp/query"
)

// Mechanism is the kind of noise and of budget.
type Mechanism int

const (
	// Laplace noise, pure epsilon-DP: measurement k gets a share eps_k of
	// epsilon (sequential composition) and noise of variance 2 (L1_k /
	// eps_k)² per query.
	Laplace Mechanism = iota
	// Gaussian noise, rho-zCDP: measurement k gets a share rho_k of rho
	// (zCDP composition) and noise of variance L2_k² / (2 rho_k) per query.
	Gaussian
)

// String returns "laplace" or "gaussian".
func (m Mechanism) String() string {
	switch m {
	case Laplace:
		return "laplace"
	case Gaussian:
		return "gaussian"
	}
	return fmt.Sprintf("Mechanism(%d)", int(m))
}

// Measurement is one set of queries measured with independent noise.
type Measurement struct {
	// Term is the measured queries.
	Term query.Term
	// Share is the measurement's fraction of the budget (the shares of a
	// strategy add up to at most 1).
	Share float64
	// Variance is the noise variance of every query of Term at the
	// strategy's budget: 2 (L1/(Share eps))² for Laplace noise, L2²/(2
	// Share rho) for Gaussian noise.
	Variance float64
	// L1 and L2 are the sensitivities Variance was calibrated to (add or
	// remove one row, unless Options.Sensitivity said otherwise).
	L1, L2 float64
}

// Bound is a lower bound on the objective, with what it bounds.
type Bound struct {
	// Value is the bound (0 when none is known).
	Value float64
	// Over says which strategies it bounds, e.g. "every strategy of the
	// matrix mechanism with Gaussian noise" or "the strategies of the
	// family searched".
	Over string
	// Method says how it was obtained.
	Method string
}

// Strategy is the result of Optimize.
type Strategy struct {
	Mechanism Mechanism
	// Budget is epsilon (Laplace) or rho (Gaussian).
	Budget float64
	// Measurements lists what to measure, each with its share and noise.
	Measurements []Measurement
	// Objective is the expected total squared error of the workload's
	// queries (Σ_q w_q Var(q̂)) under the GLS estimate, or with
	// Options.MaxVariance the largest per-query variance of a workload
	// term (weighted).
	Objective float64
	// LowerBound bounds the objective of every strategy of the mechanism
	// class, not only the family searched; Over says so.
	LowerBound Bound
	// FamilyBound bounds the objective within the family searched, where a
	// certificate is known (Value 0 otherwise).
	FamilyBound Bound
	// Family names the strategy family the measurements come from.
	Family string
	// Candidates is the number of candidate measurements the family's
	// search chose among (the lattice's cuboids), where it has a list.
	Candidates int
	// Work is what the lattice search did, in package plan's unit of work
	// (plan.Result.Work); it is also added to the context's plan.Meter.
	Work float64
}

// Options tune Optimize. The zero value is usable.
type Options struct {
	// MaxVariance minimises the largest weighted per-query variance of a
	// workload term (w_T times the largest Var(q̂) of its queries) instead
	// of the weighted sum; Gaussian marginal workloads only.
	MaxVariance bool
	// Sensitivity, if set, gives the sensitivities of a term in place of
	// the add/remove-one-row ones (for neighbours induced by invariants,
	// say). It must be deterministic and must not depend on private data.
	// A candidate marginal whose sensitivity is 0 (known exactly) is left
	// out of the lattice search.
	Sensitivity func(t query.Term) (l1, l2 float64, err error)
	// Known, if set, reports the residuals (sets of dimensions, bit i for
	// dimension i) that are known exactly, such as those under an
	// invariant: the workload needs no measurement of them, and their
	// error is zero. Set it with Sensitivity.
	Known func(a uint64) bool
	// Restarts is the number of starting points of each non-convex local
	// search (default 12). Starts are deterministic.
	Restarts int
	// MaxCandidates bounds the marginals the Laplace lattice search
	// considers (default 4096): beyond, the lattice is pruned to the
	// cuboids of the workload's order plus two.
	MaxCandidates int
	// Seed seeds the random starting points (deterministic for a seed).
	Seed uint64
	// MaxWork caps the lattice search's work (package plan's unit): past
	// it the search returns the best strategy found. 0: no cap.
	MaxWork float64
}

func (o Options) restarts() int {
	if o.Restarts <= 0 {
		return 12
	}
	return o.Restarts
}

func (o Options) maxCandidates() int {
	if o.MaxCandidates <= 0 {
		return 4096
	}
	return o.MaxCandidates
}

// sens returns the sensitivities of t: the caller's or add/remove.
func (o Options) sens(t query.Term) (l1, l2 float64, err error) {
	if o.Sensitivity != nil {
		l1, l2, err = o.Sensitivity(t)
		if err != nil {
			return 0, 0, fmt.Errorf("strategy: sensitivity: %w", err)
		}
		if !(l1 >= 0) || !(l2 >= 0) || math.IsInf(l1, 0) || math.IsInf(l2, 0) {
			return 0, 0, fmt.Errorf("strategy: sensitivity gave L1 %v, L2 %v: want finite and >= 0", l1, l2)
		}
		return l1, l2, nil
	}
	l1, l2 = AddRemove(t)
	return l1, l2, nil
}

// variance returns the per-query noise variance of a measurement with the
// given sensitivities and share of budget.
func variance(mech Mechanism, l1, l2, share, budget float64) float64 {
	if mech == Laplace {
		b := l1 / (share * budget)
		return 2 * b * b
	}
	return l2 * l2 / (2 * share * budget)
}

// ErrNotEstimable is returned (wrapped) when a workload query is not a
// linear combination of the measured queries: its error is unbounded.
var ErrNotEstimable = errors.New("strategy: a workload query is not estimable from the measurements")

func checkBudget(mech Mechanism, budget float64) error {
	if mech != Laplace && mech != Gaussian {
		return fmt.Errorf("strategy: unknown mechanism %v", mech)
	}
	if !(budget > 0) || math.IsInf(budget, 0) {
		name := "epsilon"
		if mech == Gaussian {
			name = "rho"
		}
		return fmt.Errorf("strategy: %s must be finite and > 0, got %v", name, budget)
	}
	return nil
}
