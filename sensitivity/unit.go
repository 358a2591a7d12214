package sensitivity

// Sensitivity when each privacy unit (a person, a household) may have
// several rows. docs/sensitivity.md, "Privacy units", has the derivations;
// in short:
//
//   - Without invariants the neighbours add or remove one unit with all its
//     rows, and the bounding keeps at most K rows per unit. A unit of K
//     rows changes any linear measurement by at most K times its largest
//     column norm (triangle inequality), attained by K rows in one cell: K
//     times the row-level value, in L1 and in L2 alike.
//   - With invariants the neighbours are two tables that agree on every
//     invariant and differ in the rows of one unit. The bounding keeps at
//     most K rows of each version of the unit, so one measured cuboid moves
//     by at most 2K in L1 and sqrt(2) K in L2, whatever the invariants are
//     (two units of more than K rows can agree on every invariant while
//     their bounded rows do not). knowdp calibrates to K times the
//     row-level generic sensitivity instead, which is at least that (a
//     row-level sensitivity under invariants is at least 2 in L1 and
//     sqrt(2) in L2), and which makes a release per unit with K = 1 on data
//     of one row per unit exactly as private as the row-level release.
//   - The relation the row-level one generalises to, worst-case induced
//     neighbours whose moves add and remove whole units of at most K rows
//     (BruteForceUnitSensitivity), has a sensitivity of at least K times
//     the row-level one and sometimes much more: 2K(K-1) for the base
//     cuboid under the grand total alone, and it grows with the number of
//     cells of the invariants. With units of any size it is unbounded, so
//     no bounding by rows can give it; knowdp does not use it.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/knowdp/knowdp/domain"
)

// MaxUnitRows is the largest number of rows per unit the unit sensitivities
// accept, so that K times a sensitivity and K^2 times a squared L2
// sensitivity stay far from overflowing.
const MaxUnitRows = 1 << 20

// ForUnits returns the L1 sensitivity a measurement is calibrated to when
// each privacy unit keeps at most k rows: k times row, the row-level
// generic sensitivity (or the caller's value) of the same measurement. A
// public measurement (0) stays 0. k = 1 returns row unchanged.
func ForUnits(row Sensitivity, k int) (Sensitivity, error) {
	if err := checkUnitRows(k); err != nil {
		return Sensitivity{}, err
	}
	if k == 1 || row.Value == 0 {
		return row, nil
	}
	hi, lo := bits.Mul64(uint64(row.Value), uint64(k))
	if hi != 0 || lo > math.MaxInt32 {
		return Sensitivity{}, fmt.Errorf("unit sensitivity: %d rows per unit times the sensitivity %d overflows", k, row.Value)
	}
	return Sensitivity{Value: int(lo), Rule: fmt.Sprintf("%d rows per unit x %d (%s)", k, row.Value, row.Rule)}, nil
}

// ForUnitsL2 returns the L2 sensitivity a Gaussian measurement is
// calibrated to when each privacy unit keeps at most k rows: k times row,
// with Squared k^2 times row.Squared.
func ForUnitsL2(row L2Sensitivity, k int) (L2Sensitivity, error) {
	if err := checkUnitRows(k); err != nil {
		return L2Sensitivity{}, err
	}
	if k == 1 || row.Squared == 0 {
		return row, nil
	}
	hi, lo := bits.Mul64(uint64(row.Squared), uint64(k)*uint64(k))
	if hi != 0 || lo > math.MaxInt32*uint64(math.MaxInt32) {
		return L2Sensitivity{}, fmt.Errorf("unit sensitivity: %d rows per unit times the L2 sensitivity %g overflows", k, row.Value)
	}
	return L2Sensitivity{Value: float64(k) * row.Value, Squared: int(lo),
		Rule: fmt.Sprintf("%d rows per unit x %.6g (%s)", k, row.Value, row.Rule)}, nil
}

func checkUnitRows(k int) error {
	if k < 1 || k > MaxUnitRows {
		return fmt.Errorf("unit sensitivity: rows per unit must be in [1, %d], got %d", MaxUnitRows, k)
	}
	return nil
}

// UnitReplacement returns the L1 sensitivity and the squared L2
// sensitivity of a released table with at least two cells under the
// relation knowdp states for privacy units: with invariants, two tables
// that agree on them and differ in the rows of one unit, of which the
// bounding keeps at most k rows (2k and 2k^2); without, one unit added or
// removed (k and k^2). ForUnits and ForUnitsL2 of a measurement that is
// not public are never below these.
func UnitReplacement(k int, invariants bool) (l1, l2Squared int, err error) {
	if err := checkUnitRows(k); err != nil {
		return 0, 0, err
	}
	if invariants {
		return 2 * k, 2 * k * k, nil
	}
	return k, k * k, nil
}

// UnitWitness is the result of BruteForceUnitSensitivity.
type UnitWitness struct {
	// K is the largest number of rows of a unit.
	K int
	// Induced is the L1 sensitivity under worst-case induced unit
	// neighbours: two tables that satisfy the invariants and differ by a
	// set of whole units (each of at most K rows) added and removed, of
	// which no nonempty proper part also keeps the invariants. Added and
	// Removed are such units (one row-count vector over the base cells
	// each) attaining it.
	Induced        int
	Added, Removed [][]int
	// InducedL2Squared is the largest squared L2 change under the same
	// relation, when Moves were few enough to enumerate every choice of
	// units (InducedL2Exact); otherwise 0.
	InducedL2Squared int
	InducedL2Exact   bool
	// Moves is the number of minimal moves, counted by the invariant
	// counts of their units (moves whose units differ only inside the
	// cells of the invariants count once).
	Moves int
	// Replacement is the L1 sensitivity when the neighbours differ in the
	// rows of one unit only (at most K rows before and after) and agree on
	// the invariants, without invariants one unit added or removed;
	// ReplacementL2Squared its squared L2 counterpart.
	Replacement, ReplacementL2Squared int
}

// Limits of BruteForceUnitSensitivity.
const (
	maxUnitBlocks   = 4096
	maxUnitChoices  = 1 << 16
	maxUnitSigns    = 1 << 12
	maxUnitImageCol = MaxGraverCells / 2
)

// BruteForceUnitSensitivity computes, from the definitions, the
// sensitivity of releasing view release when the views exact are public
// and each privacy unit has at most k rows, under two relations: worst-case
// induced neighbours whose moves add and remove whole units
// (UnitWitness.Induced), and tables that differ in one unit only
// (UnitWitness.Replacement). It is for tiny domains: every unit (a vector
// of at most k rows over the base cells) is enumerated, at most 4096 of
// them, and the invariant counts they can have are at most 32; beyond
// either the error wraps ErrTooLarge.
//
// A set of units added and removed keeps the invariants exactly when the
// invariant counts of the added units sum to those of the removed ones, so
// the minimal moves are the minimal zero-sum sequences of signed invariant
// counts: the nonnegative elements of the Graver basis of the matrix whose
// columns are every possible invariant count vector y and its negation.
// Each occurrence of y in a move is then any unit with those counts, and
// the L1 change is maximised over those choices exactly, as
// max over sign vectors s of the sum over occurrences of max over units
// of s.(M_release unit).
func BruteForceUnitSensitivity(ctx context.Context, s *domain.Schema, exact []domain.View, release domain.View, k int) (UnitWitness, error) {
	if s == nil {
		return UnitWitness{}, errors.New("unit brute force: nil schema")
	}
	if err := checkViews(s, exact, release); err != nil {
		return UnitWitness{}, fmt.Errorf("unit brute force: %w", err)
	}
	if err := checkUnitRows(k); err != nil {
		return UnitWitness{}, err
	}
	n := s.Cells()
	if n < 0 || n > MaxGraverCells {
		return UnitWitness{}, fmt.Errorf("unit brute force: the base cuboid has more than %d cells: %w", MaxGraverCells, ErrTooLarge)
	}
	var rows [][]int
	for _, v := range exact {
		cell := viewCellOf(s, v)
		r := make([][]int, s.ViewSize(v))
		for a, x := range cell {
			r[x] = append(r[x], a)
		}
		rows = append(rows, r...)
	}
	return bruteForceUnits(ctx, n, rows, viewCellOf(s, release), s.ViewSize(release), k)
}

// unitClass is the units that have one invariant count vector.
type unitClass struct {
	image []int64
	units [][]int // row counts per base cell
	proj  [][]int // the same units in the release's cells
}

func bruteForceUnits(ctx context.Context, n int, rows [][]int, cell []int, cells, k int) (UnitWitness, error) {
	units, err := enumerateUnits(n, k)
	if err != nil {
		return UnitWitness{}, err
	}
	w := UnitWitness{K: k}
	project := func(u []int) []int {
		p := make([]int, cells)
		for a, c := range u {
			p[cell[a]] += c
		}
		return p
	}
	// Group the units by their invariant counts.
	var classes []*unitClass
	byImage := map[string]*unitClass{}
	for _, u := range units {
		img := make([]int64, len(rows))
		for i, r := range rows {
			for _, a := range r {
				img[i] += int64(u[a])
			}
		}
		key := fmt.Sprint(img)
		c := byImage[key]
		if c == nil {
			c = &unitClass{image: img}
			byImage[key] = c
			classes = append(classes, c)
		}
		c.units = append(c.units, u)
		c.proj = append(c.proj, project(u))
	}
	// The one-unit relation: a unit replaced by one with the same
	// invariant counts, or without invariants added or removed.
	for _, c := range classes {
		for i, a := range c.proj {
			if len(rows) == 0 {
				d, d2 := norms(a, nil)
				w.Replacement, w.ReplacementL2Squared = max(w.Replacement, d), max(w.ReplacementL2Squared, d2)
				continue
			}
			for _, b := range c.proj[i+1:] {
				d, d2 := norms(a, b)
				w.Replacement, w.ReplacementL2Squared = max(w.Replacement, d), max(w.ReplacementL2Squared, d2)
			}
		}
	}
	if len(rows) == 0 {
		// Every unit keeps the (no) invariants by itself: the minimal
		// moves are single units.
		w.Induced, w.InducedL2Squared, w.InducedL2Exact, w.Moves = w.Replacement, w.ReplacementL2Squared, true, len(classes)
		for _, c := range classes {
			for i, p := range c.proj {
				if d, _ := norms(p, nil); d == w.Induced && w.Added == nil {
					w.Added = [][]int{c.units[i]}
				}
			}
		}
		return w, nil
	}
	if len(classes) > maxUnitImageCol {
		return UnitWitness{}, fmt.Errorf("unit brute force: %d distinct invariant counts of a unit, above %d: %w", len(classes), maxUnitImageCol, ErrTooLarge)
	}
	// Columns +y_c and -y_c of every class c; the minimal moves are the
	// nonnegative Graver elements.
	m := len(classes)
	a := make([][]int64, len(rows))
	for i := range rows {
		a[i] = make([]int64, 2*m)
		for j, c := range classes {
			a[i][j], a[i][m+j] = c.image[i], -c.image[i]
		}
	}
	e, err := newGraverEngine(ctx, 2*m, a, graverLimits{elements: defaultMaxGraver})
	if err != nil {
		return UnitWitness{}, fmt.Errorf("unit brute force: %w", err)
	}
	if cells > 30 || 1<<cells > maxUnitSigns {
		return UnitWitness{}, fmt.Errorf("unit brute force: the released table has %d cells, too many sign vectors: %w", cells, ErrTooLarge)
	}
	signs := 1 << cells
	// best[c][s]: the largest s.(proj u) over the units u of class c, with
	// s read as ±1 per cell from the bits of s, and its unit.
	best := make([][]int, m)
	arg := make([][]int, m)
	for j, c := range classes {
		best[j], arg[j] = make([]int, signs), make([]int, signs)
		for sv := range signs {
			best[j][sv] = math.MinInt
			for i, p := range c.proj {
				if d := dotSign(p, sv); d > best[j][sv] {
					best[j][sv], arg[j][sv] = d, i
				}
			}
		}
	}
	w.InducedL2Exact = true
	for _, g := range e.basis() {
		lam := nonnegative(g)
		if lam == nil {
			continue
		}
		w.Moves++
		// L1: max over sign vectors.
		for sv := range signs {
			total := 0
			for j := range m {
				// An added unit of class j counts s.proj, a removed one
				// -s.proj = (-s).proj: the complement sign vector.
				total += lam[j]*best[j][sv] + lam[m+j]*best[j][signs-1-sv]
			}
			if total > w.Induced {
				w.Induced = total
				w.Added, w.Removed = nil, nil
				for j := range m {
					for range lam[j] {
						w.Added = append(w.Added, classes[j].units[arg[j][sv]])
					}
					for range lam[m+j] {
						w.Removed = append(w.Removed, classes[j].units[arg[j][signs-1-sv]])
					}
				}
			}
		}
		if w.InducedL2Exact {
			d2, ok := maxL2(classes, lam, cells)
			if !ok {
				w.InducedL2Exact, w.InducedL2Squared = false, 0
			} else {
				w.InducedL2Squared = max(w.InducedL2Squared, d2)
			}
		}
		if err := ctx.Err(); err != nil {
			return UnitWitness{}, err
		}
	}
	return w, nil
}

// enumerateUnits returns every vector of nonnegative row counts over n base
// cells with 1 to k rows in all.
func enumerateUnits(n, k int) ([][]int, error) {
	var out [][]int
	cur := make([]int, n)
	var rec func(i, left int) error
	rec = func(i, left int) error {
		if i == n {
			if left < k {
				if len(out) == maxUnitBlocks {
					return fmt.Errorf("unit brute force: more than %d possible units of at most %d rows over %d cells: %w", maxUnitBlocks, k, n, ErrTooLarge)
				}
				out = append(out, slices.Clone(cur))
			}
			return nil
		}
		for c := 0; c <= left; c++ {
			cur[i] = c
			if err := rec(i+1, left-c); err != nil {
				return err
			}
		}
		cur[i] = 0
		return nil
	}
	if err := rec(0, k); err != nil {
		return nil, err
	}
	return out, nil
}

// nonnegative returns |g| when g is nonnegative or nonpositive, else nil.
func nonnegative(g []int) []int {
	sign := 0
	for _, v := range g {
		switch {
		case v > 0 && sign < 0, v < 0 && sign > 0:
			return nil
		case v > 0:
			sign = 1
		case v < 0:
			sign = -1
		}
	}
	out := make([]int, len(g))
	for i, v := range g {
		out[i] = max(v, -v)
	}
	return out
}

// norms returns the L1 and squared L2 norms of a - b (b may be nil).
func norms(a, b []int) (int, int) {
	d, d2 := 0, 0
	for i, v := range a {
		if b != nil {
			v -= b[i]
		}
		d += max(v, -v)
		d2 += v * v
	}
	return d, d2
}

// dotSign returns the dot product of p with the sign vector whose cell i is
// +1 when bit i of sv is set and -1 otherwise.
func dotSign(p []int, sv int) int {
	d := 0
	for i, v := range p {
		if sv&(1<<i) != 0 {
			d += v
		} else {
			d -= v
		}
	}
	return d
}

// maxL2 returns the largest squared L2 norm of the release change of the
// move lam over every choice of units for its occurrences, or false when
// there are more than maxUnitChoices choices. Occurrences of one class and
// sign are interchangeable, so a choice is a multiset of units per class
// and sign.
func maxL2(classes []*unitClass, lam []int, cells int) (int, bool) {
	m := len(classes)
	type slot struct {
		units [][]int
		count int
		sign  int
	}
	var slots []slot
	choices := 1.0
	for j := range 2 * m {
		if lam[j] == 0 {
			continue
		}
		c := classes[j%m]
		sign := 1
		if j >= m {
			sign = -1
		}
		slots = append(slots, slot{units: c.proj, count: lam[j], sign: sign})
		choices *= binomial(len(c.proj)+lam[j]-1, lam[j])
		if choices > maxUnitChoices {
			return 0, false
		}
	}
	acc := make([]int, cells)
	best := 0
	var rec func(si, from, left int)
	rec = func(si, from, left int) {
		if si == len(slots) {
			_, d2 := norms(acc, nil)
			best = max(best, d2)
			return
		}
		sl := slots[si]
		if left == 0 {
			if si+1 < len(slots) {
				rec(si+1, 0, slots[si+1].count)
			} else {
				rec(si+1, 0, 0)
			}
			return
		}
		for u := from; u < len(sl.units); u++ {
			for i, v := range sl.units[u] {
				acc[i] += sl.sign * v
			}
			rec(si, u, left-1)
			for i, v := range sl.units[u] {
				acc[i] -= sl.sign * v
			}
		}
	}
	if len(slots) > 0 {
		rec(0, 0, slots[0].count)
	}
	return best, true
}

func binomial(n, k int) float64 {
	r := 1.0
	for i := range k {
		r = r * float64(n-i) / float64(i+1)
	}
	return r
}
