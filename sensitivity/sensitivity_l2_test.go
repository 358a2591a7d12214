package sensitivity

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/testkit"
)

// l2Brute is, for one Graver basis, the largest ||M_C g||_1 and
// ||M_C g||_2^2 for every cuboid C of s, and whether one element attains
// both, computed from coordinates (cuboidRows), not by the code under test.
type l2Brute struct {
	l1, l2 map[domain.Cuboid]int
	both   map[domain.Cuboid]bool
}

func bruteL2All(t testing.TB, s *domain.Schema, rows [][]int) l2Brute {
	t.Helper()
	basis, err := GraverBasis(context.Background(), s.Cells(), rows)
	if err != nil {
		t.Fatal(err)
	}
	out := l2Brute{l1: map[domain.Cuboid]int{}, l2: map[domain.Cuboid]int{}, both: map[domain.Cuboid]bool{}}
	for c := range domain.Base(s.NumDims()) + 1 {
		cells := testkit.CuboidRows(s, c)
		type norms struct{ l1, l2 int }
		var all []norms
		for _, g := range basis {
			var n norms
			for _, cell := range cells {
				v := 0
				for _, a := range cell {
					v += g[a]
				}
				n.l1 += max(v, -v)
				n.l2 += v * v
			}
			all = append(all, n)
			out.l1[c] = max(out.l1[c], n.l1)
			out.l2[c] = max(out.l2[c], n.l2)
		}
		for _, n := range all {
			if n.l1 == out.l1[c] && n.l2 == out.l2[c] {
				out.both[c] = true
			}
		}
		if len(basis) == 0 {
			out.both[c] = true
		}
	}
	return out
}

// TestL2ClosedFormsMatchBruteForce pins every closed form to the brute
// force on every shape of at most 3 dimensions of size at most 3 (3x3x3
// included), with no, one and two exact cuboids, and every released cuboid:
// an exact rule must equal the brute force, a bound must not be below it.
// GenericL2Sensitivity (closed form, or brute force on tiny domains) is
// checked the same way.
func TestL2ClosedFormsMatchBruteForce(t *testing.T) {
	var bounds, tight, cases int
	for _, sizes := range sortedShapes(27) {
		s := sizedSchema(t, sizes...)
		for _, q := range knowledgeSets(len(sizes), false) {
			brute := bruteL2All(t, s, testkit.CuboidRows(s, q...))
			for rel := range domain.Base(s.NumDims()) + 1 {
				cases++
				want := brute.l2[rel]
				where := fmt.Sprintf("%v exact %v release %s", sizes, q, s.Format(rel))
				got, exact, err := l2ClosedForm(s, q, rel)
				if err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				if got.Value*got.Value < float64(got.Squared)-1e-9 || got.Value*got.Value > float64(got.Squared)+1e-9 {
					t.Fatalf("%s: Value %v is not sqrt(%d)", where, got.Value, got.Squared)
				}
				if exact != !strings.Contains(got.Rule, "upper bound") {
					t.Errorf("%s: exact=%v but rule %q", where, exact, got.Rule)
				}
				switch {
				case exact && got.Squared != want:
					t.Errorf("%s: %d (%s), brute force %d", where, got.Squared, got.Rule, want)
				case got.Squared < want:
					t.Errorf("%s: bound %d (%s) below the brute force %d", where, got.Squared, got.Rule, want)
				case !exact:
					bounds++
					if got.Squared == want {
						tight++
					} else {
						t.Logf("loose: %s: %d (%s), brute force %d", where, got.Squared, got.Rule, want)
					}
				}
				pub, err := GenericL2Sensitivity(s, q, rel)
				if err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				if (exact || s.Cells() <= autoBruteCells) && pub.Squared != want {
					t.Errorf("%s: GenericL2Sensitivity %d (%s), brute force %d", where, pub.Squared, pub.Rule, want)
				}
				if pub.Squared < want {
					t.Errorf("%s: GenericL2Sensitivity %d (%s) below the brute force %d", where, pub.Squared, pub.Rule, want)
				}
			}
		}
	}
	t.Logf("%d cases; %d upper bounds, %d of them tight", cases, bounds, tight)
	if bounds == 0 || tight == 0 || tight == bounds {
		t.Errorf("expected bounds both tight and loose among the cases (%d bounds, %d tight)", bounds, tight)
	}
}

// TestL2Numbers pins named cases, each to the brute force: the closed forms,
// a release whose L2 sensitivity exceeds the base cuboid's (aggregation
// adds rows of one sign), and three margins whose Graver elements have
// entries of magnitude 2, so that the squared L2 norm exceeds the L1 norm.
func TestL2Numbers(t *testing.T) {
	const (
		A = domain.Cuboid(1 << iota)
		B
		C
	)
	for _, tc := range []struct {
		name    string
		sizes   []int
		exact   []domain.Cuboid
		release domain.Cuboid
		want    int // squared
		rule    string
	}{
		{"no knowledge", []int{3, 4}, nil, A | B, 1, "no background knowledge"},
		{"row sums of 3x4, base", []int{3, 4}, []domain.Cuboid{A}, A | B, 2, "one exact cuboid"},
		{"row sums of 3x4, columns", []int{3, 4}, []domain.Cuboid{A}, B, 2, "one exact cuboid"},
		{"row sums of 3x4, rows", []int{3, 4}, []domain.Cuboid{A}, A, 0, "public"},
		{"{A,B} of 2x3 (table known)", []int{2, 3}, []domain.Cuboid{A | B}, A, 0, "public"},
		{"{A,B} of 2x3x1 (table known)", []int{2, 3, 1}, []domain.Cuboid{A | B}, C, 0, "public"},
		{"rows and columns of 3x4", []int{3, 4}, []domain.Cuboid{A, B}, A | B, 6, "alternating cycles, 2*min(3, 4)"},
		{"{A,B},{B,C} of 2x3x2", []int{2, 3, 2}, []domain.Cuboid{A | B, B | C}, A | B | C, 4, "alternating cycles"},
		{"{A,B},{B,C} of 2x3x2, release {A,C}", []int{2, 3, 2}, []domain.Cuboid{A | B, B | C}, A | C, 4, "alternating cycles"},
		{"rows and columns of 3x3x2, release {C}: above the base's 6", []int{3, 3, 2}, []domain.Cuboid{A, B}, C, 18, "brute force"},
		{"rows and columns of 3x3x2, release {A,C}", []int{3, 3, 2}, []domain.Cuboid{A, B}, A | C, 6, "brute force"},
		{"three margins of 2x3x3, base: entries of 2", []int{2, 3, 3}, []domain.Cuboid{A, B, C}, A | B | C, 24, "brute force"},
		{"three margins of 2x3x3, release {A,B}", []int{2, 3, 3}, []domain.Cuboid{A, B, C}, A | B, 12, "brute force"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sizedSchema(t, tc.sizes...)
			got, err := GenericL2Sensitivity(s, tc.exact, tc.release)
			if err != nil {
				t.Fatal(err)
			}
			if got.Squared != tc.want || math.Abs(got.Value-math.Sqrt(float64(tc.want))) > 1e-12 || !strings.Contains(got.Rule, tc.rule) {
				t.Errorf("got %d (%v, %q), want %d by %q", got.Squared, got.Value, got.Rule, tc.want, tc.rule)
			}
			w, err := BruteForceSensitivity(context.Background(), s, tc.exact, nil, tc.release)
			if err != nil {
				t.Fatal(err)
			}
			if w.L2Squared != tc.want {
				t.Errorf("brute force %d, want %d", w.L2Squared, tc.want)
			}
		})
	}
	// The bounds used for larger domains, on the same cases.
	s := sizedSchema(t, 3, 3, 2)
	if b, exact, _ := l2ClosedForm(s, []domain.Cuboid{A, B}, C); exact || b.Squared != 18 {
		t.Errorf("two-cuboid bound for 3x3x2 release {C}: %d (exact %v), want the bound 2*3*3 = 18", b.Squared, exact)
	}
	s = sizedSchema(t, 2, 3, 3)
	if b, exact, _ := l2ClosedForm(s, []domain.Cuboid{A, B, C}, A|B|C); exact || b.Squared != 72 {
		t.Errorf("L1-derived bound for three margins of 2x3x3: %d (exact %v), want 2*(12/2)^2 = 72", b.Squared, exact)
	}
}

// TestL2Witness checks the brute force's L2 witness from the definition:
// both tables meet the same exact cuboids and their released cuboids are
// sqrt(L2Squared) apart.
func TestL2Witness(t *testing.T) {
	s := sizedSchema(t, 3, 3, 2)
	exact := []domain.Cuboid{0b001, 0b010}
	for rel := range domain.Base(3) + 1 {
		w, err := BruteForceSensitivity(context.Background(), s, exact, nil, rel)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range append([]domain.Cuboid{rel}, exact...) {
			d := 0
			for _, cell := range testkit.CuboidRows(s, c) {
				v := 0
				for _, a := range cell {
					v += w.L2After[a] - w.L2Before[a]
				}
				d += v * v
				if c != rel && v != 0 {
					t.Fatalf("release %s: the witness changes exact cuboid %s", s.Format(rel), s.Format(c))
				}
			}
			if c == rel && d != w.L2Squared {
				t.Errorf("release %s: witness at squared distance %d, reported %d", s.Format(rel), d, w.L2Squared)
			}
		}
		if rel != 0 && rel&^0b011 != 0 {
			checkPrimitive(t, testkit.CuboidRows(s, exact...), diff(w.L2After, w.L2Before))
		}
	}
}

func diff(a, b []int) []int {
	d := make([]int, len(a))
	for i := range a {
		d[i] = a[i] - b[i]
	}
	return d
}

func TestGenericL2SensitivityErrors(t *testing.T) {
	s := sizedSchema(t, 5, 5, 5)
	testkit.CheckErrors(t, []testkit.ErrorCase{
		{Name: "nil schema", Run: func() error { _, err := GenericL2Sensitivity(nil, nil, 0); return err }, Words: "nil schema"},
		{Name: "release beyond schema", Run: func() error { _, err := GenericL2Sensitivity(s, nil, 1<<3); return err }, Words: "released cuboid names dimension 3"},
		{Name: "exact beyond schema", Run: func() error { _, err := GenericL2Sensitivity(s, []domain.Cuboid{1, 1 << 4}, 1); return err }, Words: "exact cuboid 2 names dimension 4"},
		{Name: "three margins of 5x5x5", Run: func() error { _, err := GenericL2Sensitivity(s, []domain.Cuboid{1, 2, 4}, domain.Base(3)); return err },
			Is: ErrNoClosedForm, Words: "L2 generic sensitivity"},
	})
}

func ExampleGenericL2Sensitivity() {
	dims := []domain.Dimension{
		{Name: "sex", Values: []string{"F", "M"}},
		{Name: "age", Values: []string{"0-17", "18-64", "65+"}},
		{Name: "county", Values: []string{"a", "b", "c", "d", "e"}},
	}
	s, _ := domain.NewSchema(dims)
	// Public: the counts by sex and age, and by county.
	exact := []domain.Cuboid{0b011, 0b100}
	base, _ := GenericL2Sensitivity(s, exact, domain.Base(3))
	fmt.Printf("base cuboid: sqrt(%d) = %.3f\n", base.Squared, base.Value)
	byCounty, _ := GenericL2Sensitivity(s, exact, 0b101)
	fmt.Printf("{sex,county}: sqrt(%d), %s\n", byCounty.Squared, byCounty.Rule[:11])
	// Output:
	// base cuboid: sqrt(10) = 3.162
	// {sex,county}: sqrt(10), upper bound
}
