package release

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/knowdp/knowdp/estimate"
	"github.com/knowdp/knowdp/integer"
	"github.com/knowdp/knowdp/noise"
)

// Post-processing of a workload release: non-negative or non-negative
// integer tables. The least-squares tables of a workload agree with each
// other and with the invariants; a per-table projection or rounding could
// break that. So the tables are processed one at a time, smallest first,
// each constrained by the invariants and by every table processed before it
// (as margins on their common dimensions): a table then agrees with all
// earlier ones wherever its own post-processing keeps its constraints
// exactly. Non-negativity always does (Dykstra's last step is the affine
// projection). Integer rounding does with at most two crossing chains of
// margins, the common case of one- and two-dimensional tables
// (RoundInteger); with three or more it reports the deviation, and a table
// that deviates is not used as a constraint for later ones, which would
// make their margins disagree.
//
// Each step depends on the noisy tables and the public invariants only; it
// never fails on the values.

// postProcessed reports whether any table was post-processed.
func (w *Release) postProcessed() bool {
	for _, t := range w.Tables {
		if t.NonNegative || t.Integer {
			return true
		}
	}
	return false
}

// processingOrder returns the indices of w's tables, smallest first.
func (w *Release) processingOrder() []int {
	order := make([]int, len(w.Tables))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(w.Schema.CuboidSize(w.Tables[a].Cuboid), w.Schema.CuboidSize(w.Tables[b].Cuboid))
	})
	return order
}

// MakeNonNegative replaces every table by the least-squares point with no
// negative count that keeps the invariants and the tables processed before
// it (Dykstra's alternating projections to KKT residual tol; 0 means 1e-6).
// Public tables are exact and left alone.
func (w *Release) MakeNonNegative(ctx context.Context, tol float64) error {
	if w.Hierarchy != "" {
		return w.roundViews(ctx, nil)
	}
	constraints := slices.Clone(w.Invariants)
	for _, i := range w.processingOrder() {
		t := &w.Tables[i]
		if !t.Public {
			res, err := estimate.SolveNonNegative(ctx, w.Schema, t.Cuboid, t.Counts, constraints, estimate.NonNegative{Tol: tol, Derived: true})
			if err != nil {
				return fmt.Errorf("non-negative table %s: %w", w.Schema.Format(t.Cuboid), err)
			}
			copy(t.Counts, res.Y)
			t.NonNegative, t.NonNegativeResidual = true, res.Residual
		}
		constraints = append(constraints, estimate.Invariant{Cuboid: t.Cuboid, Counts: t.Counts})
	}
	return nil
}

// RoundIntegers replaces every table by non-negative integer counts
// (RoundInteger: non-negativity, then unbiased controlled rounding) whose
// margins equal the invariants' and those of the tables rounded before it,
// exactly where an integer table can; see the file comment for the rest.
// Randomness for the rounding comes from r.
func (w *Release) RoundIntegers(ctx context.Context, r *noise.Rand) error {
	if w.Hierarchy != "" {
		return w.roundViews(ctx, r)
	}
	constraints := slices.Clone(w.Invariants)
	for _, i := range w.processingOrder() {
		t := &w.Tables[i]
		if !t.Public {
			margins, err := integer.InvariantMargins(w.Schema, t.Cuboid, constraints)
			if err != nil {
				return fmt.Errorf("integer table %s: %w", w.Schema.Format(t.Cuboid), err)
			}
			res, err := integer.RoundInteger(ctx, w.Schema, t.Cuboid, t.Counts, margins, r.Split())
			if err != nil {
				return fmt.Errorf("integer table %s: %w", w.Schema.Format(t.Cuboid), err)
			}
			copy(t.Counts, res.Counts)
			t.NonNegative, t.NonNegativeResidual = true, res.NonNegativeResidual
			t.Integer, t.IntegerExact, t.IntegerMethod, t.IntegerMaxDeviation = true, res.Exact, res.Method, res.MaxDeviation
			if !res.Exact {
				continue
			}
		}
		constraints = append(constraints, estimate.Invariant{Cuboid: t.Cuboid, Counts: t.Counts})
	}
	return nil
}
