package sensitivity

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/noise"
)

// bruteAll computes, from one Graver basis, S_Q(C) for every cuboid C of s:
// the rows and the projections are built from coordinates here, not by the
// code under test.
func bruteAll(t testing.TB, s *domain.Schema, rows [][]int) (map[domain.Cuboid]int, int) {
	t.Helper()
	basis, err := GraverBasis(context.Background(), s.Cells(), rows)
	if err != nil {
		t.Fatal(err)
	}
	out := map[domain.Cuboid]int{}
	for c := range domain.Base(s.NumDims()) + 1 {
		cells := testkit.CuboidRows(s, c)
		best := 0
		for _, g := range basis {
			d := 0
			for _, cell := range cells {
				v := 0
				for _, a := range cell {
					v += g[a]
				}
				d += max(v, -v)
			}
			best = max(best, d)
		}
		out[c] = best
	}
	return out, len(basis)
}

func knownRows(s *domain.Schema, exact []domain.Cuboid, cells []ExactCells) [][]int {
	rows := testkit.CuboidRows(s, exact...)
	for _, k := range cells {
		all := testkit.CuboidRows(s, k.Cuboid)
		for _, c := range k.Cells {
			rows = append(rows, all[c])
		}
	}
	return rows
}

// TestPaperNumbers pins the closed forms to the paper's numbers and each to
// the brute force (where the domain has at most 64 cells).
func TestPaperNumbers(t *testing.T) {
	const (
		A = domain.Cuboid(1 << iota)
		B
		C
	)
	tests := []struct {
		name  string
		sizes []int
		exact []domain.Cuboid
		paper int // the paper's value
		want  int // the true value (differs from paper where it is wrong)
	}{
		{"Example 4.1: {Sex,Age},{Age,Salary}, |Sex|=2, |Age|=7, |Salary|=5", []int{2, 7, 5}, []domain.Cuboid{A | B, B | C}, 4, 4},
		{"Example 4.1 with |Age|=2", []int{2, 2, 5}, []domain.Cuboid{A | B, B | C}, 4, 4},
		{"Lemma 4.1(i): row sums of 3x4", []int{3, 4}, []domain.Cuboid{A}, 2, 2},
		{"Lemma 4.1(ii): rows and columns of 3x4", []int{3, 4}, []domain.Cuboid{A, B}, 6, 6},
		{"Lemma 4.1(ii): rows and columns of 2x5", []int{2, 5}, []domain.Cuboid{A, B}, 4, 4},
		{"Lemma 4.1(ii): rows and columns of 4x4", []int{4, 4}, []domain.Cuboid{A, B}, 8, 8},
		{"Lemma 4.2(i): {A,C} of 2x3x2", []int{2, 3, 2}, []domain.Cuboid{A | C}, 2, 2},
		{"Lemma 4.2(i): grand total of 2x3", []int{2, 3}, []domain.Cuboid{0}, 2, 2},
		{"Lemma 4.2(ii): {A,B},{B,C} of 2x3x2", []int{2, 3, 2}, []domain.Cuboid{A | B, B | C}, 4, 4},
		{"Lemma 4.2(ii): {A},{B,C} of 3x2x2", []int{3, 2, 2}, []domain.Cuboid{A, B | C}, 6, 6},
		{"Lemma 4.2(ii): {A},{B} of 3x3x2", []int{3, 3, 2}, []domain.Cuboid{A, B}, 6, 6},
		{"Lemma 4.2 nested: {A} ⪯ {A,B} of 2x3x2", []int{2, 3, 2}, []domain.Cuboid{A, A | B}, 2, 2},
		{"Section 4.1: {A1},{A2},{A3}, sizes 2,2,2", []int{2, 2, 2}, []domain.Cuboid{A, B, C}, 6, 6},
		// The paper says 6; the witness is checked from the definition in
		// TestBruteForceWitness and BenchmarkDefinition2x2x3.
		{"Section 4.1: {A1},{A2},{A3}, sizes 2,2,3 (paper wrong)", []int{2, 2, 3}, []domain.Cuboid{A, B, C}, 6, 8},
		{"Section 4.1: {A1},{A2},{A3}, sizes 2,2,4", []int{2, 2, 4}, []domain.Cuboid{A, B, C}, 8, 8},
		{"Section 4.1: {A1},{A2},{A3}, sizes 3,2,2 (order)", []int{3, 2, 2}, []domain.Cuboid{A, B, C}, 6, 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := sizedSchema(t, tc.sizes...)
			got, err := GenericSensitivity(s, tc.exact, domain.Base(s.NumDims()))
			if err != nil {
				t.Fatal(err)
			}
			if got.Value != tc.want {
				t.Errorf("got %d (%s), want %d (paper: %d)", got.Value, got.Rule, tc.want, tc.paper)
			}
			if s.Cells() > MaxGraverCells {
				return
			}
			brute, _ := bruteAll(t, s, testkit.CuboidRows(s, tc.exact...))
			if brute[domain.Base(s.NumDims())] != tc.want {
				t.Errorf("brute force %d, want %d", brute[domain.Base(s.NumDims())], tc.want)
			}
		})
	}
}

// TestDegenerateCases covers the cases the lemmas do not foresee, against
// the brute force. lemma is what a literal reading of Lemma 4.1/4.2 gives.
func TestDegenerateCases(t *testing.T) {
	const (
		A = domain.Cuboid(1 << iota)
		B
		C
	)
	tests := []struct {
		name    string
		sizes   []int
		exact   []domain.Cuboid
		release domain.Cuboid
		lemma   int
		want    int
	}{
		{"no knowledge", []int{2, 3}, nil, A | B, 1, 1},
		{"no knowledge, one cell", []int{1}, nil, A, 1, 1},
		{"no knowledge, release {A}", []int{2, 3}, nil, A, 1, 1},
		{"Lemma 4.1(i) with |A2| = 1: the table is known", []int{3, 1}, []domain.Cuboid{A}, A | B, 2, 0},
		{"Lemma 4.1(ii) with |A1| = 1: the table is known", []int{1, 4}, []domain.Cuboid{A, B}, A | B, 2, 0},
		{"exact cuboid = base", []int{2, 3}, []domain.Cuboid{A | B}, A | B, 2, 0},
		{"C1 ⪯ C2 = base", []int{2, 3}, []domain.Cuboid{A, A | B}, A | B, 2, 0},
		{"C1 ⪯ C2, deg(C2) >= 2", []int{2, 3, 2}, []domain.Cuboid{A, A | B}, A | B | C, 2, 2},
		{"all dimensions of size 1", []int{1, 1}, []domain.Cuboid{A}, A | B, 2, 0},
		{"duplicate cuboids", []int{2, 3}, []domain.Cuboid{A, A}, A | B, 2, 2},
		{"size-1 dimension between the cuboids", []int{2, 1, 3}, []domain.Cuboid{A | B, B | C}, A | B | C, 4, 4},
		{"size-1 dimension making C1 ⪯ C2", []int{2, 1, 3}, []domain.Cuboid{A | B, A | C}, A | B | C, 2, 0},
		{"released cuboid computable from Q", []int{2, 3, 2}, []domain.Cuboid{A | B, C}, A, 0, 0},
		{"released cuboid computable up to a size-1 dimension", []int{2, 1, 2}, []domain.Cuboid{A}, A | B, 0, 0},
		{"released {A,B}, dimension C free", []int{2, 3, 2}, []domain.Cuboid{A, B}, A | C, 4, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := sizedSchema(t, tc.sizes...)
			got, err := GenericSensitivity(s, tc.exact, tc.release)
			if err != nil {
				t.Fatal(err)
			}
			brute, _ := bruteAll(t, s, testkit.CuboidRows(s, tc.exact...))
			if brute[tc.release] != tc.want {
				t.Fatalf("brute force %d, want %d", brute[tc.release], tc.want)
			}
			if got.Value != tc.want {
				t.Errorf("got %d (%s), want %d (lemma: %d)", got.Value, got.Rule, tc.want, tc.lemma)
			}
		})
	}
}

// sortedShapes lists domain sizes up to 3 dimensions of sizes 1 to 3, in
// non-decreasing order (every cuboid is tried, so order is immaterial).
func sortedShapes(maxCells int) [][]int {
	var out [][]int
	var rec func(pre []int, d int)
	rec = func(pre []int, d int) {
		if len(pre) == d {
			cells := 1
			for _, v := range pre {
				cells *= v
			}
			if cells <= maxCells {
				out = append(out, slices.Clone(pre))
			}
			return
		}
		lo := 1
		if len(pre) > 0 {
			lo = pre[len(pre)-1]
		}
		for v := lo; v <= 3; v++ {
			rec(append(pre, v), d)
		}
	}
	for d := 1; d <= 3; d++ {
		rec(nil, d)
	}
	return out
}

// knowledgeSets lists no cuboid, every cuboid, every pair of distinct
// cuboids, and (when three is true) every triple.
func knowledgeSets(dims int, three bool) [][]domain.Cuboid {
	n := domain.Cuboid(1) << dims
	q := [][]domain.Cuboid{nil}
	for a := range n {
		q = append(q, []domain.Cuboid{a})
		for b := a + 1; b < n; b++ {
			q = append(q, []domain.Cuboid{a, b})
			if three {
				for c := b + 1; c < n; c++ {
					q = append(q, []domain.Cuboid{a, b, c})
				}
			}
		}
	}
	return q
}

// sweep checks GenericSensitivity and Lemma 4.4 against the brute force for
// every release of one shape and knowledge, and returns the releases where
// S_Q(C) < S_Q(base) although C is not computable from Q.
func sweep(t testing.TB, s *domain.Schema, q []domain.Cuboid) []string {
	brute, _ := bruteAll(t, s, testkit.CuboidRows(s, q...))
	base := domain.Base(s.NumDims())
	trivial := TrivialDims(s)
	var union domain.Cuboid
	for _, c := range q {
		union |= c
	}
	var strict []string
	for rel := range base + 1 {
		got, err := GenericSensitivity(s, q, rel)
		if err != nil {
			t.Fatalf("%v %v release %s: %v", s.Sizes(), q, s.Format(rel), err)
		}
		want := brute[rel]
		computable := len(q) > 0 && slices.ContainsFunc(q, func(c domain.Cuboid) bool { return (rel &^ trivial).AncestorOf(c) })
		exact := rel&^trivial == base&^trivial || computable || len(q) == 0 || rel&^union&^trivial != 0 || brute[base] == 0
		switch {
		case got.Value < want:
			t.Errorf("%v %v release %s: %d (%s) is below the brute force %d", s.Sizes(), q, s.Format(rel), got.Value, got.Rule, want)
		case exact && got.Value != want:
			t.Errorf("%v %v release %s: %d (%s), brute force %d", s.Sizes(), q, s.Format(rel), got.Value, got.Rule, want)
		}
		// Lemma 4.4.
		if computable || len(q) == 0 {
			continue
		}
		if want > brute[base] {
			t.Errorf("Lemma 4.4 fails: %v %v: S(%s) = %d > S(base) = %d", s.Sizes(), q, s.Format(rel), want, brute[base])
		}
		if rel&^union&^trivial != 0 && want != brute[base] {
			t.Errorf("Lemma 4.4 equality fails: %v %v: S(%s) = %d, S(base) = %d", s.Sizes(), q, s.Format(rel), want, brute[base])
		}
		if 2*want < brute[base] {
			t.Errorf("Lemma 4.4 lower bound fails: %v %v: S(%s) = %d < S(base)/2 = %d/2", s.Sizes(), q, s.Format(rel), want, brute[base])
		}
		if want < brute[base] {
			strict = append(strict, fmt.Sprintf("%v %v %s: %d < %d", s.Sizes(), q, s.Format(rel), want, brute[base]))
		}
	}
	return strict
}

// TestGenericSensitivityMatchesBruteForce runs the sweep on every shape of
// at most 3 dimensions of size at most 3 with up to 18 cells, with no, one
// and two exact cuboids, and three on up to 12 cells (3x3x3 and the larger
// triples are in BenchmarkSweep). It also checks Lemma 4.4 and pins a case
// where its "otherwise" branch is strict.
func TestGenericSensitivityMatchesBruteForce(t *testing.T) {
	var strict []string
	for _, sizes := range sortedShapes(18) {
		s := sizedSchema(t, sizes...)
		for _, q := range knowledgeSets(len(sizes), s.Cells() <= 12) {
			strict = append(strict, sweep(t, s, q)...)
		}
	}
	// Three margins of 2x2x2: releasing {A,B} has sensitivity 4 while the
	// base has 6, inside Lemma 4.4's bounds [3, 6].
	want := "[2 2 2] [1 2 4] {A,B}: 4 < 6"
	if !slices.Contains(strict, want) {
		t.Errorf("expected the strict case %q among %q", want, strict)
	}
}

// naturalLemma43 is the natural reading of the garbled Lemma 4.3(ii):
// 2 max_x min(k1(x), k2(x)) over the values x of [C1]∩[C2].
func naturalLemma43(s *domain.Schema, c1, c2 domain.Cuboid, k1, k2 []int) int {
	inter := c1 & c2
	n1, n2 := map[int]int{}, map[int]int{}
	for _, x := range k1 {
		n1[cellProjection(s, c1, inter, x)]++
	}
	for _, x := range k2 {
		n2[cellProjection(s, c2, inter, x)]++
	}
	best := 0
	for x := range s.CuboidSize(inter) {
		best = max(best, 2*min(n1[x], n2[x]))
	}
	return best
}

// TestCellSensitivityCounterExample: a 3x3 table with every row sum and the
// sum of column 0 known. Lemma 4.3's natural reading gives 2; moving rows
// (0,1) and (1,0) to (0,0) and (1,2) is a primitive move of 4 rows.
func TestCellSensitivityCounterExample(t *testing.T) {
	s := sizedSchema(t, 3, 3)
	known := []ExactCells{{0b01, []int{0, 1, 2}}, {0b10, []int{0}}}
	got, err := CellSensitivity(s, known)
	if err != nil {
		t.Fatal(err)
	}
	rows := knownRows(s, nil, known)
	brute, _ := bruteAll(t, s, rows)
	if got.Value != 4 || brute[0b11] != 4 {
		t.Errorf("got %d (%s), brute force %d, want 4", got.Value, got.Rule, brute[0b11])
	}
	if v := naturalLemma43(s, 0b01, 0b10, []int{0, 1, 2}, []int{0}); v != 2 {
		t.Errorf("the natural reading of Lemma 4.3 gives %d, expected 2", v)
	}
	// Cells (i,j) are i*3+j. T_a = {(0,1),(1,0)}, T_b = {(0,0),(1,2)}.
	move := map[int]int{0*3 + 1: -1, 1*3 + 0: -1, 0*3 + 0: 1, 1*3 + 2: 1}
	if !testkit.IsPrimitiveMove(t, rows, move) {
		t.Error("the move is not primitive")
	}
}

func TestCellSensitivityCases(t *testing.T) {
	const (
		A = domain.Cuboid(1 << iota)
		B
		C
	)
	tests := []struct {
		name  string
		sizes []int
		known []ExactCells
		want  int
	}{
		{"nothing known", []int{2, 3}, nil, 1},
		{"empty cell list", []int{2, 3}, []ExactCells{{A, nil}}, 1},
		{"Lemma 4.3(i): one row sum", []int{2, 3}, []ExactCells{{A, []int{0}}}, 2},
		{"Lemma 4.3(i) fails: some base cells known", []int{2, 3}, []ExactCells{{A | B, []int{0, 4}}}, 1},
		{"Lemma 4.3(i) fails: every base cell known", []int{2, 3}, []ExactCells{{A | B, []int{0, 1, 2, 3, 4, 5}}}, 0},
		{"all cells of two cuboids = Lemma 4.2", []int{3, 4}, []ExactCells{{A, []int{0, 1, 2}}, {B, []int{0, 1, 2, 3}}}, 6},
		{"same cuboid twice is merged", []int{2, 3}, []ExactCells{{A, []int{0}}, {A, []int{1}}}, 2},
		{"nested cuboids", []int{2, 3, 2}, []ExactCells{{A, []int{0}}, {A | B, []int{0, 1}}}, 2},
		{"one row and one column", []int{3, 3}, []ExactCells{{A, []int{0}}, {B, []int{0}}}, 3},
		{"three cuboids, brute-forced", []int{2, 2, 2}, []ExactCells{{A, []int{0}}, {B, []int{0}}, {C, []int{0, 1}}}, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := sizedSchema(t, tc.sizes...)
			got, err := CellSensitivity(s, tc.known)
			if err != nil {
				t.Fatal(err)
			}
			brute, _ := bruteAll(t, s, knownRows(s, nil, tc.known))
			want := brute[domain.Base(s.NumDims())]
			if tc.want >= 0 && want != tc.want {
				t.Fatalf("brute force %d, want %d", want, tc.want)
			}
			if got.Value != want {
				t.Errorf("got %d (%s), brute force %d", got.Value, got.Rule, want)
			}
		})
	}
}

// TestCellSensitivityRandom compares CellSensitivity with the brute force on
// random cells of two random cuboids (equal, nested or crossing) of random
// tables of up to 3 dimensions.
func TestCellSensitivityRandom(t *testing.T) {
	r := noise.NewSeeded(43)
	disagree := 0
	for i := range 400 {
		var sizes []int
		for range 1 + r.Uint64N(3) {
			sizes = append(sizes, 1+int(r.Uint64N(3)))
		}
		s := sizedSchema(t, sizes...)
		if s.Cells() > 18 {
			continue
		}
		var known []ExactCells
		var c1, c2 []int
		for j := range 2 {
			c := domain.Cuboid(r.Uint64N(uint64(domain.Base(len(sizes)) + 1)))
			var cells []int
			for x := range s.CuboidSize(c) {
				if r.Uint64N(3) > 0 {
					cells = append(cells, x)
				}
			}
			known = append(known, ExactCells{c, cells})
			if j == 0 {
				c1 = cells
			} else {
				c2 = cells
			}
		}
		got, err := CellSensitivity(s, known)
		if err != nil {
			t.Fatal(err)
		}
		brute, _ := bruteAll(t, s, knownRows(s, nil, known))
		if want := brute[domain.Base(len(sizes))]; got.Value != want {
			t.Errorf("case %d: %v %v: %d (%s), brute force %d", i, sizes, known, got.Value, got.Rule, want)
		}
		if known[0].Cuboid != known[1].Cuboid && naturalLemma43(s, known[0].Cuboid, known[1].Cuboid, c1, c2) != got.Value {
			disagree++
		}
	}
	// The natural reading of Lemma 4.3 is wrong on a good share of them.
	if disagree < 50 {
		t.Errorf("the natural reading of Lemma 4.3 disagrees on only %d cases", disagree)
	}
}

func TestSensitivityErrors(t *testing.T) {
	s := sizedSchema(t, 2, 3)
	cube3 := sizedSchema(t, 3, 3, 3)
	tests := []testkit.ErrorCase{
		{"nil schema", func() error { _, err := GenericSensitivity(nil, nil, 0); return err }, nil, "nil schema"},
		{"release beyond schema", func() error { _, err := GenericSensitivity(s, nil, 0b100); return err }, nil, "released cuboid names dimension 2, but the schema has 2"},
		{"exact beyond schema", func() error { _, err := GenericSensitivity(s, []domain.Cuboid{0b1, 0b1000}, 0b11); return err }, nil, "exact cuboid 2 names dimension 3"},
		{"no closed form", func() error { _, err := GenericSensitivity(cube3, []domain.Cuboid{1, 2, 4}, 7); return err }, ErrNoClosedForm, "--sensitivity"},
		{"cells: nil schema", func() error { _, err := CellSensitivity(nil, nil); return err }, nil, "nil schema"},
		{"cells: cuboid beyond schema", func() error { _, err := CellSensitivity(s, []ExactCells{{0b100, []int{0}}}); return err }, nil, "exact cells 1 names dimension 2"},
		{"cells: out of range", func() error { _, err := CellSensitivity(s, []ExactCells{{0b10, []int{3}}}); return err }, nil, "cell 3 of cuboid {B} is outside [0, 3)"},
		{"cells: negative", func() error { _, err := CellSensitivity(s, []ExactCells{{0b01, []int{-1}}}); return err }, nil, "cell -1 of cuboid {A}"},
		{"cells: no closed form", func() error {
			_, err := CellSensitivity(cube3, []ExactCells{{1, []int{0}}, {2, []int{0}}, {4, []int{0}}})
			return err
		}, ErrNoClosedForm, "exact cells of {A}, {B}, {C}"},
	}
	testkit.CheckErrors(t, tests)
}

// TestRuleNamesTheLemma checks that the rule carried into the release
// metadata says where the value comes from.
func TestRuleNamesTheLemma(t *testing.T) {
	s := sizedSchema(t, 2, 7, 5)
	tests := []struct {
		exact   []domain.Cuboid
		release domain.Cuboid
		words   string
	}{
		{[]domain.Cuboid{0b011, 0b110}, 0b111, "Lemma 4.2(ii)"},
		{[]domain.Cuboid{0b011}, 0b111, "Lemma 4.2(i)"},
		{[]domain.Cuboid{0b001, 0b010}, 0b101, "Lemma 4.4: equal"},
		{[]domain.Cuboid{0b001, 0b010}, 0b011, "Lemma 4.4: upper bound"},
		{[]domain.Cuboid{0b011}, 0b001, "public"},
		{nil, 0b111, "no background knowledge"},
	}
	for _, tc := range tests {
		got, err := GenericSensitivity(s, tc.exact, tc.release)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(got.Rule, tc.words) {
			t.Errorf("%v release %s: rule %q does not say %q", tc.exact, s.Format(tc.release), got.Rule, tc.words)
		}
	}
}

// BenchmarkSweep runs the brute-force sweep of
// TestGenericSensitivityMatchesBruteForce on the shapes too slow for the
// test suite: 3x3x3 with up to two exact cuboids, and three exact cuboids
// on 13 to 18 cells.
func BenchmarkSweep(b *testing.B) {
	for b.Loop() {
		for _, sizes := range sortedShapes(27) {
			s := sizedSchema(b, sizes...)
			for _, q := range knowledgeSets(len(sizes), s.Cells() <= 18) {
				if (s.Cells() <= 18 && len(q) <= 2) || (s.Cells() <= 12 && len(q) == 3) {
					continue // in the test suite
				}
				if len(q) == 3 && s.Cells() > 18 {
					continue
				}
				sweep(b, s, q)
			}
		}
	}
}

func BenchmarkGenericSensitivity(b *testing.B) {
	tests := []struct {
		name  string
		sizes []int
		exact []domain.Cuboid
	}{
		{"Example 4.1", []int{2, 7, 5}, []domain.Cuboid{0b011, 0b110}},
		{"Lemma 4.4 release", []int{2, 7, 5, 9, 11}, []domain.Cuboid{0b00011, 0b00110}},
		{"three margins 2x2x4", []int{2, 2, 4}, []domain.Cuboid{1, 2, 4}},
		{"brute-forced 2x2x5 margins", []int{2, 2, 5}, []domain.Cuboid{1, 2, 4}},
	}
	for _, tc := range tests {
		b.Run(tc.name, func(b *testing.B) {
			s := sizedSchema(b, tc.sizes...)
			rel := domain.Base(s.NumDims())
			if tc.name == "Lemma 4.4 release" {
				rel = 0b10101
			}
			for b.Loop() {
				if _, err := GenericSensitivity(s, tc.exact, rel); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
		})
	}
}

func BenchmarkCellSensitivity(b *testing.B) {
	s := sizedSchema(b, 10, 20, 30)
	r := noise.NewSeeded(7)
	var known []ExactCells
	for _, c := range []domain.Cuboid{0b011, 0b110} {
		e := ExactCells{Cuboid: c}
		for x := range s.CuboidSize(c) {
			if r.Uint64N(2) == 0 {
				e.Cells = append(e.Cells, x)
			}
		}
		known = append(known, e)
	}
	cells := len(known[0].Cells) + len(known[1].Cells)
	for b.Loop() {
		if _, err := CellSensitivity(s, known); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cells)*float64(b.N)/b.Elapsed().Seconds(), "cells/s")
}

// TestHugeSchema: closed forms on a schema whose base cuboid has more cells
// than an int holds (40 dimensions of size 3).
func TestHugeSchema(t *testing.T) {
	sizes := make([]int, 40)
	for i := range sizes {
		sizes[i] = 3
	}
	s := sizedSchema(t, sizes...)
	first := func(lo, hi int) domain.Cuboid { return domain.Base(hi) &^ domain.Base(lo) }
	got, err := GenericSensitivity(s, []domain.Cuboid{first(0, 15), first(15, 30)}, domain.Base(40))
	if err != nil || got.Value != 2*14348907 {
		t.Errorf("two 15-dimensional cuboids: %v, %v; want 2*3^15", got, err)
	}
	if _, err := GenericSensitivity(s, []domain.Cuboid{first(0, 20), first(20, 40)}, domain.Base(40)); err == nil || !strings.Contains(err.Error(), "is above") {
		t.Errorf("two 20-dimensional cuboids: error %v, want one saying the value is too large", err)
	}
	cells, err := CellSensitivity(s, []ExactCells{{first(0, 20), []int{0, 1 << 40}}, {first(20, 40), []int{5}}})
	// Half edge at cell 0, through the known cell of the second cuboid, to
	// cell 2^40 and its half edge: 4.
	if err != nil || cells.Value != 4 {
		t.Errorf("a few cells of two 20-dimensional cuboids: %v, %v; want 4", cells, err)
	}
	if _, err := BruteForceSensitivity(context.Background(), s, nil, nil, 0); !errors.Is(err, ErrTooLarge) {
		t.Errorf("brute force on a huge schema: %v, want ErrTooLarge", err)
	}
	if _, err := GenericSensitivity(s, []domain.Cuboid{1, 2, 4}, domain.Base(40)); !errors.Is(err, ErrNoClosedForm) {
		t.Errorf("three cuboids on a huge schema: %v, want ErrNoClosedForm", err)
	}
}
