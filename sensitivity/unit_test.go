package sensitivity

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/knowdp/knowdp/domain"
)

func TestForUnits(t *testing.T) {
	row := Sensitivity{Value: 4, Rule: "Lemma 4.2(ii)"}
	for _, tc := range []struct {
		k, want int
	}{{1, 4}, {2, 8}, {25, 100}} {
		got, err := ForUnits(row, tc.k)
		if err != nil || got.Value != tc.want {
			t.Errorf("ForUnits(4, %d) = %v, %v; want %d", tc.k, got, err, tc.want)
		}
	}
	if got, err := ForUnits(Sensitivity{Rule: "public"}, 7); err != nil || got.Value != 0 || got.Rule != "public" {
		t.Errorf("a public measurement must stay public, got %+v, %v", got, err)
	}
	for _, k := range []int{0, -1, MaxUnitRows + 1} {
		if _, err := ForUnits(row, k); err == nil {
			t.Errorf("ForUnits(row, %d) accepted", k)
		}
	}
	if _, err := ForUnits(Sensitivity{Value: math.MaxInt32}, 2); err == nil {
		t.Error("an overflowing product was accepted")
	}
	l2 := L2Sensitivity{Value: math.Sqrt(8), Squared: 8, Rule: "two cuboids"}
	got, err := ForUnitsL2(l2, 3)
	if err != nil || got.Squared != 72 || math.Abs(got.Value-3*math.Sqrt(8)) > 1e-12 {
		t.Errorf("ForUnitsL2(sqrt 8, 3) = %+v, %v; want squared 72", got, err)
	}
	for _, tc := range []struct {
		inv        bool
		l1, l2, k2 int
	}{{false, 5, 25, 5}, {true, 10, 50, 5}} {
		l1, sq, err := UnitReplacement(tc.k2, tc.inv)
		if err != nil || l1 != tc.l1 || sq != tc.l2 {
			t.Errorf("UnitReplacement(%d, %v) = %d, %d, %v; want %d, %d", tc.k2, tc.inv, l1, sq, err, tc.l1, tc.l2)
		}
	}
}

// unitShape is a small domain with invariants for the unit brute force.
type unitShape struct {
	name  string
	sizes []int
	exact []domain.Cuboid // as bit sets over the dimensions
	ks    []int
}

var unitShapes = []unitShape{
	{"no invariant, 2", []int{2}, nil, []int{1, 2, 3}},
	{"no invariant, 2x2", []int{2, 2}, nil, []int{1, 2}},
	{"grand total, 2", []int{2}, []domain.Cuboid{0}, []int{1, 2, 3, 4, 5}},
	{"grand total, 3", []int{3}, []domain.Cuboid{0}, []int{1, 2, 3}},
	{"{d0}, 2x2", []int{2, 2}, []domain.Cuboid{1}, []int{1, 2}},
	{"{d0}, 3x2", []int{3, 2}, []domain.Cuboid{1}, []int{1, 2}},
	{"{d0} and {d1}, 2x2", []int{2, 2}, []domain.Cuboid{1, 2}, []int{1}},
	{"{d0} and {d1}, 2x3", []int{2, 3}, []domain.Cuboid{1, 2}, []int{1}},
	{"{d0,d1} and {d1,d2}, 2x2x2", []int{2, 2, 2}, []domain.Cuboid{3, 6}, []int{1}},
}

func (u unitShape) build(t *testing.T) (*domain.Schema, []domain.View) {
	s := sizedSchema(t, u.sizes...)
	var ex []domain.View
	for _, e := range u.exact {
		ex = append(ex, domain.ViewOf(e))
	}
	return s, ex
}

// TestUnitSensitivityBounds checks, on every shape and every released
// cuboid, what docs/sensitivity.md proves about units:
//   - K times the row-level value (what knowdp calibrates to) is at least
//     what the one-unit relation needs: the brute force over units of at
//     most K rows, and 2K (K without invariants) once units may have more
//     rows than the bounding keeps;
//   - worst-case induced unit neighbours need at least K times the
//     row-level value, and exactly it for K = 1 (the row-level relation);
//   - without invariants every relation gives K, in L1 and L2 alike.
func TestUnitSensitivityBounds(t *testing.T) {
	ctx := context.Background()
	for _, sh := range unitShapes {
		s, ex := sh.build(t)
		for rel := range domain.Cuboid(1 << s.NumDims()) {
			view := domain.ViewOf(rel)
			row, err := bruteForceViews(ctx, s, ex, view, graverLimits{elements: defaultMaxGraver})
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range sh.ks {
				name := fmt.Sprintf("%s, release %s, K=%d", sh.name, s.Format(rel), k)
				w, err := BruteForceUnitSensitivity(ctx, s, ex, view, k)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				l1, err := ForUnits(Sensitivity{Value: row.Value}, k)
				if err != nil {
					t.Fatal(err)
				}
				l2, err := ForUnitsL2(L2Sensitivity{Squared: row.L2Squared, Value: math.Sqrt(float64(row.L2Squared))}, k)
				if err != nil {
					t.Fatal(err)
				}
				if l1.Value < w.Replacement || l2.Squared < w.ReplacementL2Squared {
					t.Errorf("%s: K x row-level (%d, L2^2 %d) is below the one-unit brute force (%d, %d)", name, l1.Value, l2.Squared, w.Replacement, w.ReplacementL2Squared)
				}
				if row.Value > 0 && s.CuboidSize(rel) > 1 {
					need, need2, _ := UnitReplacement(k, len(ex) > 0)
					if l1.Value < need || l2.Squared < need2 {
						t.Errorf("%s: K x row-level (%d, L2^2 %d) is below the truncated one-unit bound (%d, %d)", name, l1.Value, l2.Squared, need, need2)
					}
				}
				if w.Induced < l1.Value {
					t.Errorf("%s: induced unit sensitivity %d below K x row-level %d", name, w.Induced, l1.Value)
				}
				if w.InducedL2Exact && w.InducedL2Squared < l2.Squared {
					t.Errorf("%s: induced unit L2^2 %d below K^2 x row-level %d", name, w.InducedL2Squared, l2.Squared)
				}
				if k == 1 && (w.Induced != row.Value || w.InducedL2Squared != row.L2Squared) {
					t.Errorf("%s: with K = 1 the induced unit relation is the row-level one: got %d (L2^2 %d), row-level %d (%d)", name, w.Induced, w.InducedL2Squared, row.Value, row.L2Squared)
				}
				if len(ex) == 0 && (w.Induced != k || w.Replacement != k || w.InducedL2Squared != k*k || l1.Value != k || l2.Squared != k*k) {
					t.Errorf("%s: without invariants every relation gives K = %d: got induced %d, one unit %d, L2^2 %d, calibrated %d", name, k, w.Induced, w.Replacement, w.InducedL2Squared, l1.Value)
				}
				checkUnitWitness(t, name, s, ex, view, w)
			}
		}
	}
}

// checkUnitWitness checks that the move the brute force returns keeps the
// invariants, has units of at most K rows, is minimal (no nonempty proper
// part of it keeps them) and changes the release by Induced.
func checkUnitWitness(t *testing.T, name string, s *domain.Schema, ex []domain.View, rel domain.View, w UnitWitness) {
	t.Helper()
	type signed struct {
		u    []int
		sign int
	}
	var units []signed
	for _, u := range w.Added {
		units = append(units, signed{u, 1})
	}
	for _, u := range w.Removed {
		units = append(units, signed{u, -1})
	}
	if len(units) == 0 {
		if w.Induced != 0 {
			t.Errorf("%s: no witness for %d", name, w.Induced)
		}
		return
	}
	if len(units) > 20 {
		return // too many parts to check every one
	}
	keeps := func(mask int) bool {
		for _, v := range ex {
			cell := viewCellOf(s, v)
			sum := make([]int, s.ViewSize(v))
			for i, su := range units {
				if mask&(1<<i) != 0 {
					for a, c := range su.u {
						sum[cell[a]] += su.sign * c
					}
				}
			}
			for _, x := range sum {
				if x != 0 {
					return false
				}
			}
		}
		return true
	}
	full := 1<<len(units) - 1
	if !keeps(full) {
		t.Errorf("%s: the witness does not keep the invariants", name)
	}
	for mask := 1; mask < full; mask++ {
		if keeps(mask) {
			t.Errorf("%s: part %b of the witness keeps the invariants: not minimal", name, mask)
			break
		}
	}
	cell := viewCellOf(s, rel)
	diff := make([]int, s.ViewSize(rel))
	for _, su := range units {
		rows := 0
		for a, c := range su.u {
			diff[cell[a]] += su.sign * c
			rows += c
		}
		if rows < 1 || rows > w.K {
			t.Errorf("%s: a unit of the witness has %d rows, outside [1, %d]", name, rows, w.K)
		}
	}
	if d, _ := norms(diff, nil); d != w.Induced {
		t.Errorf("%s: the witness changes the release by %d, not %d", name, d, w.Induced)
	}
}

// TestUnitInducedGrandTotal pins the induced unit sensitivity under the
// grand total alone to the closed form docs/sensitivity.md derives from
// Lambert's bound, 2 max(K, K(K-1)) in L1 and 2 max(K, K(K-1))^2 squared in
// L2, and to an enumeration of minimal zero-sum sequences of unit sizes
// that shares nothing with the Graver engine.
func TestUnitInducedGrandTotal(t *testing.T) {
	ctx := context.Background()
	s := sizedSchema(t, 2)
	for k := 1; k <= 5; k++ {
		w, err := BruteForceUnitSensitivity(ctx, s, []domain.View{domain.ViewOf(0)}, domain.ViewOf(1), k)
		if err != nil {
			t.Fatal(err)
		}
		p := max(k, k*(k-1))
		if w.Induced != 2*p || w.InducedL2Squared != 2*p*p {
			t.Errorf("K=%d: induced %d (L2^2 %d), want %d (%d)", k, w.Induced, w.InducedL2Squared, 2*p, 2*p*p)
		}
		if got := largestMinimalZeroSum(k); got != p {
			t.Errorf("K=%d: enumeration gives positive mass %d, closed form %d", k, got, p)
		}
	}
}

// largestMinimalZeroSum enumerates the multisets of integers in [-k, k]
// without 0 of at most 2k elements (Lambert: a minimal zero-sum sequence
// has at most k positive and k negative elements) and returns the largest
// sum of the positive elements of one that sums to zero and has no
// nonempty proper zero-sum part.
func largestMinimalZeroSum(k int) int {
	best := 0
	var seq []int
	var rec func(from int)
	rec = func(from int) {
		if len(seq) > 0 {
			sum, pos := 0, 0
			for _, x := range seq {
				sum += x
				pos += max(x, 0)
			}
			if sum == 0 && minimalZeroSum(seq) {
				best = max(best, pos)
			}
		}
		if len(seq) == 2*k {
			return
		}
		for x := from; x <= k; x++ {
			if x == 0 {
				continue
			}
			seq = append(seq, x)
			rec(x)
			seq = seq[:len(seq)-1]
		}
	}
	rec(-k)
	return best
}

func minimalZeroSum(seq []int) bool {
	full := 1<<len(seq) - 1
	for mask := 1; mask < full; mask++ {
		sum := 0
		for i, x := range seq {
			if mask&(1<<i) != 0 {
				sum += x
			}
		}
		if sum == 0 {
			return false
		}
	}
	return true
}

// TestUnitInducedGrowsWithCells pins the path construction of
// docs/sensitivity.md: with one exact cuboid of m cells and a released
// dimension outside it, units of 2 rows give induced unit neighbours 4m
// apart, against K x row-level = 4.
func TestUnitInducedGrowsWithCells(t *testing.T) {
	ctx := context.Background()
	for m := 1; m <= 3; m++ {
		s := sizedSchema(t, m, 2)
		w, err := BruteForceUnitSensitivity(ctx, s, []domain.View{domain.ViewOf(1)}, domain.ViewOf(3), 2)
		if err != nil {
			t.Fatal(err)
		}
		if w.Induced != 4*m {
			t.Errorf("m=%d: induced unit sensitivity %d, want 4m = %d", m, w.Induced, 4*m)
		}
		if w.Replacement != 4 {
			t.Errorf("m=%d: one-unit sensitivity %d, want 2K = 4", m, w.Replacement)
		}
	}
}

// TestUnitOneUnitVacuous pins why the one-unit relation alone is not used
// for bounded data: with both margins of a 2x2 table exact and units of one
// row, no two tables differ in one unit and agree on the margins, so the
// relation would allow releasing the (undetermined) table without noise.
func TestUnitOneUnitVacuous(t *testing.T) {
	s := sizedSchema(t, 2, 2)
	w, err := BruteForceUnitSensitivity(context.Background(), s, []domain.View{domain.ViewOf(1), domain.ViewOf(2)}, domain.ViewOf(3), 1)
	if err != nil {
		t.Fatal(err)
	}
	if w.Replacement != 0 || w.Induced != 4 {
		t.Errorf("one unit %d, induced %d; want 0 and 4", w.Replacement, w.Induced)
	}
}

func TestBruteForceUnitRefuses(t *testing.T) {
	ctx := context.Background()
	s := sizedSchema(t, 4, 4, 4, 2)
	if _, err := BruteForceUnitSensitivity(ctx, s, nil, domain.ViewOf(1), 2); !errors.Is(err, ErrTooLarge) {
		t.Errorf("128 cells: %v, want ErrTooLarge", err)
	}
	s = sizedSchema(t, 4, 4)
	if _, err := BruteForceUnitSensitivity(ctx, s, []domain.View{domain.ViewOf(1)}, domain.ViewOf(3), 6); !errors.Is(err, ErrTooLarge) {
		t.Errorf("16 cells, K=6: %v, want ErrTooLarge", err)
	}
	if _, err := BruteForceUnitSensitivity(ctx, s, nil, domain.ViewOf(3), 0); err == nil {
		t.Error("K = 0 accepted")
	}
}
