package audit

import (
	"context"
	"fmt"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/release"
	"github.com/knowdp/knowdp/unit"
)

// unitK is the bound of the unit cases: each unit keeps at most 3 rows.
const unitK = 3

// unitData is a table of ratings (one dimension, low or high) by units:
// 40 units of 1 to 3 rows (within the bound: the bounding keeps them
// whole), and unit "u" with the rows given.
func unitData(s *domain.Schema, u []int64) (*unit.Rows, error) {
	cells, err := unit.NewCells(s, domain.Base(s.NumDims()))
	if err != nil {
		return nil, err
	}
	var ids []string
	var cs [][]uint64
	var ns [][]int64
	for i := range 40 {
		ids = append(ids, fmt.Sprint("v", i))
		cs, ns = append(cs, []uint64{uint64(i % 2)}), append(ns, []int64{int64(1 + i%3)})
	}
	var uc []uint64
	var un []int64
	for c, n := range u {
		if n > 0 {
			uc, un = append(uc, uint64(c)), append(un, n)
		}
	}
	if len(uc) > 0 {
		ids, cs, ns = append(ids, "u"), append(cs, uc), append(ns, un)
	}
	return unit.NewRows(cells, ids, cs, ns)
}

// unitCase audits a release of the table {grade} per unit (or, for the
// control, per row) on two tables that differ in unit u's rows: before and
// after are u's rows per cell (nil: u absent). With exact, the grand total
// is an invariant (the two tables must then have equal totals).
func unitCase(eps float64, exact bool, before, after []int64, perRow bool) (Case, error) {
	s, err := domain.NewSchema([]domain.Dimension{{Name: "grade", Values: []string{"low", "high"}}})
	if err != nil {
		return Case{}, err
	}
	e, err := privacy.NewEpsilon(eps)
	if err != nil {
		return Case{}, err
	}
	grade := domain.ViewOf(1)
	spec := release.Spec{Tables: []domain.View{grade}, Epsilon: e}
	if exact {
		spec.Exact = []domain.View{domain.ViewOf(0)}
	}
	if !perRow {
		spec.Unit = &release.Unit{Column: "unit", MaxRows: unitK}
	}
	plan, err := release.NewPlan(s, spec)
	if err != nil {
		return Case{}, err
	}
	x, err := unitData(s, before)
	if err != nil {
		return Case{}, err
	}
	x2, err := unitData(s, after)
	if err != nil {
		return Case{}, err
	}
	run := func(rows *unit.Rows, r *noise.Rand) (*release.Release, error) {
		counts, err := rows.Counts(plan.Needs())
		if err != nil {
			return nil, err
		}
		if perRow {
			return plan.Run(context.Background(), counts, r)
		}
		return plan.RunUnits(context.Background(), counts, rows, r)
	}
	probe, err := run(x, noise.NewSeeded(0))
	if err != nil {
		return Case{}, err
	}
	sens := probe.Measurements[0].Sensitivity
	lap, err := noise.NewLaplace(float64(sens), eps)
	if err != nil {
		return Case{}, err
	}
	// The statistic: low - high of the noisy measurement of the bounded
	// rows, drawn as the release draws it (a fresh bounding key, then grid
	// Laplace noise on each cell, the exact audit checking that it is the
	// release's noise). The release is its post-processing with the public
	// invariant (with the grand total exact, the released low count is
	// (low - high + total) / 2), so its loss is at most this statistic's;
	// drawing the measurement rather than the whole release keeps a
	// million samples fast.
	stat := func(rows *unit.Rows) Sampler {
		return func(r *noise.Rand) (float64, error) {
			b := rows
			if !perRow {
				var err error
				if b, err = rows.Bound(context.Background(), unitK, unit.NewKey(r)); err != nil {
					return 0, err
				}
			}
			counts, err := b.Counts([]domain.View{grade})
			if err != nil {
				return 0, err
			}
			y := counts[grade]
			if err := lap.AddTo(r, y); err != nil {
				return 0, err
			}
			return y[0] - y[1], nil
		}
	}
	describe := func(u []int64) string {
		if u == nil {
			return "absent"
		}
		return fmt.Sprintf("%d low, %d high", u[0], u[1])
	}
	c := Case{
		Mechanism: fmt.Sprintf("release per unit, at most %d rows each (release.Plan.RunUnits), sensitivity %d", unitK, sens),
		Neighbours: fmt.Sprintf("one unit's rows: %s against %s, among 40 other units (without invariants)",
			describe(before), describe(after)),
		Claimed: eps,
		X:       stat(x),
		XPrime:  stat(x2),
	}
	if exact {
		c.Neighbours = fmt.Sprintf("one unit's rows: %s against %s, the grand total exact", describe(before), describe(after))
	}
	if perRow {
		c.Mechanism, c.Control = fmt.Sprintf("release per row on data with units (sensitivity %d): the unit's rows are not bounded", sens), true
	}
	// The exact audit applies where the bounding cannot choose: every row
	// of u in one cell, or u within the bound (the other units are within
	// it).
	deterministic := func(u []int64) bool {
		return u == nil || u[0] == 0 || u[1] == 0 || u[0]+u[1] <= unitK
	}
	if deterministic(before) && deterministic(after) {
		c.Exact = func(context.Context) (Exact, string, error) {
			m := probe.Measurements[0]
			if lap.Scale() != m.Scale || lap.Grid() != m.Grid {
				return Exact{}, "", fmt.Errorf("the release's noise (scale %v, grid %v) is not the one audited (%v, %v)", m.Scale, m.Grid, lap.Scale(), lap.Grid())
			}
			// The measured counts of x and x', as the release bounds them
			// (u's rows all in one cell: the choice cannot matter).
			key := unit.NewKey(noise.NewSeeded(1))
			var in [2][]float64
			for i, rows := range []*unit.Rows{x, x2} {
				b := rows
				if !perRow {
					if b, err = rows.Bound(context.Background(), unitK, key); err != nil {
						return Exact{}, "", err
					}
				}
				counts, err := b.Counts([]domain.View{grade})
				if err != nil {
					return Exact{}, "", err
				}
				in[i] = counts[grade]
			}
			ex, err := exactGrid(lap, in[0], in[1], eps)
			return ex, "the noisy counts before consistency, in the tails", err
		}
	}
	return c, nil
}

// unitCases are the releases per privacy unit: without invariants a unit
// of 5 rows added (bounded to 3); with the grand total exact a unit whose
// 5 rows move from low to high, and one whose 8 rows are split 4-4 against
// 8 low (the bounding's random choice is then part of the mechanism:
// sampled only); and the control, a release per row on the same pair,
// which the audit must catch (5 rows of one unit against a noise
// calibrated to one).
func unitCases(_ context.Context, eps float64) ([]Case, error) {
	var out []Case
	for _, tc := range []struct {
		exact         bool
		before, after []int64
		perRow        bool
	}{
		{false, nil, []int64{5, 0}, false},
		{true, []int64{5, 0}, []int64{0, 5}, false},
		{true, []int64{4, 4}, []int64{8, 0}, false},
		{false, nil, []int64{5, 0}, true},
	} {
		c, err := unitCase(eps, tc.exact, tc.before, tc.after, tc.perRow)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
