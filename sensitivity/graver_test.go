package sensitivity

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/noise"
)

// sizedSchema returns a schema with the given domain sizes; dimensions are
// named A, B, C, ... and values 0, 1, ....
func sizedSchema(t testing.TB, sizes ...int) *domain.Schema {
	t.Helper()
	dims := make([]domain.Dimension, len(sizes))
	for i, n := range sizes {
		dims[i].Name = string(rune('A' + i))
		for j := range n {
			dims[i].Values = append(dims[i].Values, fmt.Sprint(j))
		}
	}
	s, err := domain.NewSchema(dims)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// definitionNeighbours is the definition of worst-case induced neighbours,
// independent of any lattice theory: it enumerates every table with at most
// maxTotal rows on cells cells, groups them by the values of the rows (the
// fibers), and returns, keyed by canonical, every T_b - T_a over pairs of a
// fiber with no third table of the fiber between them (min(T_a,T_b) <= T_c
// <= max(T_a,T_b), which is what a proper subset of the moves reaches). Only
// pairs whose pointwise maximum has at most maxTotal rows are judged, so
// that every table between them has been enumerated.
func definitionNeighbours(cells int, rows [][]int, maxTotal int) map[string][]int {
	fibers := map[string][][]int{}
	t := make([]int, cells)
	var rec func(i, left int)
	rec = func(i, left int) {
		if i == cells {
			var b strings.Builder
			for _, r := range rows {
				v := 0
				for _, a := range r {
					v += t[a]
				}
				fmt.Fprintf(&b, "%d,", v)
			}
			fibers[b.String()] = append(fibers[b.String()], slices.Clone(t))
			return
		}
		for v := 0; v <= left; v++ {
			t[i] = v
			rec(i+1, left-v)
		}
		t[i] = 0
	}
	rec(0, maxTotal)
	out := map[string][]int{}
	lo, hi := make([]int, cells), make([]int, cells)
	for _, f := range fibers {
		for i := range f {
			for j := i + 1; j < len(f); j++ {
				top := 0
				for a := range cells {
					lo[a], hi[a] = min(f[i][a], f[j][a]), max(f[i][a], f[j][a])
					top += hi[a]
				}
				if top > maxTotal {
					continue
				}
				between := false
				for k := range f {
					if k == i || k == j {
						continue
					}
					in := true
					for a := range cells {
						if f[k][a] < lo[a] || f[k][a] > hi[a] {
							in = false
							break
						}
					}
					if in {
						between = true
						break
					}
				}
				if !between {
					d := make([]int, cells)
					for a := range cells {
						d[a] = f[j][a] - f[i][a]
					}
					out[testkit.Canonical(d)] = d
				}
			}
		}
	}
	return out
}

func basisKeys(t *testing.T, basis [][]int, maxNorm int) map[string][]int {
	t.Helper()
	out := map[string][]int{}
	for _, g := range basis {
		k := testkit.Canonical(g)
		if _, dup := out[k]; dup {
			t.Fatalf("basis lists ±%v twice", g)
		}
		if testkit.L1(g) <= maxNorm {
			out[k] = g
		}
	}
	return out
}

func sameKeys(t *testing.T, what string, got, want map[string][]int) {
	t.Helper()
	for k, g := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("%s: %v missing from the Graver basis", what, g)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: Graver element %v is not an induced-neighbour move by the definition", what, g)
		}
	}
}

// TestGraverMatchesDefinition checks the Graver basis against the
// definition of induced neighbours on tiny tables: the primitive moves of
// at most maxTotal rows are exactly the differences of neighbour pairs.
func TestGraverMatchesDefinition(t *testing.T) {
	tests := []struct {
		name     string
		sizes    []int
		exact    []domain.Cuboid
		cells    []ExactCells
		maxTotal int
	}{
		{"2x3 rows", []int{2, 3}, []domain.Cuboid{0b01}, nil, 4},
		{"3x3 rows+cols", []int{3, 3}, []domain.Cuboid{0b01, 0b10}, nil, 6},
		{"2x2x2 three margins", []int{2, 2, 2}, []domain.Cuboid{0b001, 0b010, 0b100}, nil, 6},
		{"2x2x3 three margins", []int{2, 2, 3}, []domain.Cuboid{0b001, 0b010, 0b100}, nil, 6},
		{"2x2x2 AB,BC", []int{2, 2, 2}, []domain.Cuboid{0b011, 0b110}, nil, 5},
		{"2x2x2 AB,BC,AC", []int{2, 2, 2}, []domain.Cuboid{0b011, 0b110, 0b101}, nil, 8},
		{"2x3 all rows, one column", []int{2, 3}, nil, []ExactCells{{0b01, []int{0, 1}}, {0b10, []int{0}}}, 5},
		{"2x2x2 cells", []int{2, 2, 2}, nil, []ExactCells{{0b011, []int{0, 3}}, {0b110, []int{1, 2, 3}}}, 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := sizedSchema(t, tc.sizes...)
			rows := testkit.CuboidRows(s, tc.exact...)
			for _, k := range tc.cells {
				all := testkit.CuboidRows(s, k.Cuboid)
				for _, c := range k.Cells {
					rows = append(rows, all[c])
				}
			}
			basis, err := GraverBasis(context.Background(), s.Cells(), rows)
			if err != nil {
				t.Fatal(err)
			}
			want := definitionNeighbours(s.Cells(), rows, tc.maxTotal)
			sameKeys(t, tc.name, basisKeys(t, basis, tc.maxTotal), want)
		})
	}
}

// plainCompletion is Pottier's completion with none of the engine's
// refinements: all pairs, normal forms by a linear scan on every
// coordinate, then the ⊑-minimal elements. It starts from a lattice basis.
func plainCompletion(t *testing.T, basis [][]int64) map[string][]int {
	t.Helper()
	var g [][]int
	for _, b := range basis {
		v := make([]int, len(b))
		w := make([]int, len(b))
		for k, x := range b {
			v[k], w[k] = int(x), -int(x)
		}
		g = append(g, v, w)
	}
	below := func(h, s []int) bool {
		for k := range h {
			if h[k] != 0 && (h[k]*s[k] <= 0 || max(h[k], -h[k]) > max(s[k], -s[k])) {
				return false
			}
		}
		return true
	}
	zero := func(s []int) bool { return !slices.ContainsFunc(s, func(x int) bool { return x != 0 }) }
	for i := 0; i < len(g); i++ {
		for j := 0; j < i; j++ {
			s := make([]int, len(g[i]))
			for k := range s {
				s[k] = g[i][k] + g[j][k]
			}
			for !zero(s) {
				r := slices.IndexFunc(g, func(h []int) bool { return below(h, s) })
				if r < 0 {
					break
				}
				for k := range s {
					s[k] -= g[r][k]
				}
			}
			if !zero(s) {
				neg := make([]int, len(s))
				for k := range s {
					neg[k] = -s[k]
				}
				g = append(g, s, neg)
			}
			if len(g) > 20000 {
				t.Fatal("plain completion too large")
			}
		}
	}
	out := map[string][]int{}
	for i, h := range g {
		minimal := true
		for j, f := range g {
			if j != i && below(f, h) && !slices.Equal(f, h) {
				minimal = false
				break
			}
		}
		if minimal {
			out[testkit.Canonical(h)] = h
		}
	}
	return out
}

// TestGraverMatchesPlainCompletion compares project-and-lift (with its
// critical-pair criterion, norm order and support tree) with the plain
// completion, on random 0/1 matrices and on integer matrices whose Hermite
// normal form has pivots other than 1.
func TestGraverMatchesPlainCompletion(t *testing.T) {
	r := noise.NewSeeded(20260501)
	var cases [][][]int64
	for range 60 {
		n := 3 + int(r.Uint64N(5))
		m := 1 + int(r.Uint64N(3))
		a := make([][]int64, m)
		for i := range a {
			a[i] = make([]int64, n)
			for k := range a[i] {
				a[i][k] = int64(r.Uint64N(2))
			}
		}
		cases = append(cases, a)
	}
	cases = append(cases,
		[][]int64{{1, 2, 3}},
		[][]int64{{2, 3, 5}},
		[][]int64{{1, 1, 1, 1}, {0, 1, 2, 3}}, // twisted cubic
		[][]int64{{3, 0, 1, 2}, {0, 2, 1, 1}},
	)
	nonUnit := 0 // cases that need the completion on the pivots
	for ci, a := range cases {
		n := len(a[0])
		kernel, err := integerKernel(a, n)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range kernel {
			for _, row := range a {
				dot := int64(0)
				for k := range v {
					dot += row[k] * v[k]
				}
				if dot != 0 {
					t.Fatalf("case %d: kernel vector %v not in the kernel of %v", ci, v, a)
				}
			}
		}
		want := plainCompletion(t, slices.Clone(kernel))
		hnf, pivots, err := rowEchelon(slices.Clone(kernel), n)
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range pivots {
			if hnf[i][p] != 1 {
				nonUnit++
				break
			}
		}
		e, err := newGraverEngine(context.Background(), n, a, graverLimits{elements: defaultMaxGraver})
		if err != nil {
			t.Fatal(err)
		}
		got := basisKeys(t, e.basis(), 1<<30)
		sameKeys(t, fmt.Sprintf("case %d %v", ci, a), got, want)
	}
	if nonUnit == 0 {
		t.Error("no case has a Hermite normal form pivot other than 1")
	}
}

// TestGraverKnownSizes pins the basis sizes to values known independently:
// the 3x3x3 table with its three 2-D margins (no-three-way interaction) has
// 795 Graver elements up to sign, the 2x2x2 one a single element (the
// checkerboard of ±1), and the rows and columns of a 3x3 table the 15
// alternating cycles (9 of length 4, 6 of length 6).
func TestGraverKnownSizes(t *testing.T) {
	tests := []struct {
		sizes []int
		exact []domain.Cuboid
		want  int
	}{
		{[]int{3, 3, 3}, []domain.Cuboid{0b011, 0b110, 0b101}, 795},
		{[]int{2, 2, 2}, []domain.Cuboid{0b011, 0b110, 0b101}, 1},
		{[]int{3, 3}, []domain.Cuboid{0b01, 0b10}, 15},
		{[]int{2, 3}, nil, 6},                               // ±e_i
		{[]int{4}, []domain.Cuboid{0b1}, 0},                 // determined
		{[]int{2, 2, 2}, []domain.Cuboid{0b000}, 8 * 7 / 2}, // total known: e_i - e_j
	}
	for _, tc := range tests {
		s := sizedSchema(t, tc.sizes...)
		b, err := GraverBasis(context.Background(), s.Cells(), testkit.CuboidRows(s, tc.exact...))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != tc.want {
			t.Errorf("%v with %v: %d Graver elements, want %d", tc.sizes, tc.exact, len(b), tc.want)
		}
	}
}

func TestGraverErrors(t *testing.T) {
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	expired, stop := context.WithTimeout(ctx, time.Nanosecond)
	defer stop()
	<-expired.Done()
	big := sizedSchema(t, 2, 3, 4)
	tests := []testkit.ErrorCase{
		{"no cells", func() error { _, err := GraverBasis(ctx, 0, nil); return err }, nil, "0 cells"},
		{"too many cells", func() error { _, err := GraverBasis(ctx, 65, nil); return err }, ErrTooLarge, "65 cells"},
		{"cell out of range", func() error { _, err := GraverBasis(ctx, 4, [][]int{{0, 4}}); return err }, nil, "row 0 names cell 4"},
		{"cell twice", func() error { _, err := GraverBasis(ctx, 4, [][]int{{1, 1}}); return err }, nil, "cell 1 twice"},
		{"cancelled", func() error {
			_, err := GraverBasis(cancelled, big.Cells(), testkit.CuboidRows(big, 0b001, 0b010, 0b100))
			return err
		}, context.Canceled, ""},
		{"deadline", func() error {
			_, err := BruteForceSensitivity(expired, big, []domain.Cuboid{0b001, 0b010, 0b100}, nil, domain.Base(3))
			return err
		}, context.DeadlineExceeded, ""},
		{"element limit", func() error {
			_, err := graverBasis(ctx, big.Cells(), testkit.CuboidRows(big, 0b001, 0b010), graverLimits{elements: 100})
			return err
		}, ErrTooLarge, "more than 100 basis elements"},
		{"work limit", func() error {
			_, err := graverBasis(ctx, big.Cells(), testkit.CuboidRows(big, 0b001, 0b010, 0b100), graverLimits{elements: 1 << 20, work: 1 << 16})
			return err
		}, ErrTooLarge, "steps"},
		{"brute force: too many cells", func() error {
			_, err := BruteForceSensitivity(ctx, sizedSchema(t, 5, 13), nil, nil, domain.Base(2))
			return err
		}, ErrTooLarge, "more than 64 cells"},
		{"brute force: bad release", func() error {
			_, err := BruteForceSensitivity(ctx, big, nil, nil, 0b1000)
			return err
		}, nil, "released cuboid names dimension 3"},
		{"brute force: bad cell", func() error {
			_, err := BruteForceSensitivity(ctx, big, nil, []ExactCells{{0b001, []int{2}}}, domain.Base(3))
			return err
		}, nil, "cell 2 of cuboid {A} is outside [0, 2)"},
		{"brute force: nil schema", func() error {
			_, err := BruteForceSensitivity(ctx, nil, nil, nil, 0)
			return err
		}, nil, "nil schema"},
	}
	testkit.CheckErrors(t, tests)
}

// checkPrimitive fails unless d keeps every row and no proper nonempty
// sub-move z (z between 0 and d coordinate by coordinate) does: the
// definition of worst-case induced neighbours.
func checkPrimitive(t *testing.T, rows [][]int, d []int) {
	t.Helper()
	keeps := func(z []int) bool {
		for _, r := range rows {
			v := 0
			for _, c := range r {
				v += z[c]
			}
			if v != 0 {
				return false
			}
		}
		return true
	}
	if !keeps(d) {
		t.Fatalf("move %v changes the knowledge", d)
	}
	z := make([]int, len(d))
	var rec func(i int, proper, nonzero bool)
	rec = func(i int, proper, nonzero bool) {
		if i == len(d) {
			if proper && nonzero && keeps(z) {
				t.Fatalf("sub-move %v of %v keeps the knowledge", z, d)
			}
			return
		}
		for x := min(0, d[i]); x <= max(0, d[i]); x++ {
			z[i] = x
			rec(i+1, proper || x != d[i], nonzero || x != 0)
		}
		z[i] = 0
	}
	rec(0, false, false)
}

// TestBruteForceWitness checks the witness pair against the definition: both
// tables satisfy the same knowledge, their difference is a move no proper
// subset of which keeps the knowledge, and the released cuboids differ by
// Value. It also checks the 8-row move quoted in sensitivity.go.
func TestBruteForceWitness(t *testing.T) {
	s := sizedSchema(t, 2, 2, 3)
	exact := []domain.Cuboid{0b001, 0b010, 0b100}
	w, err := BruteForceSensitivity(context.Background(), s, exact, nil, domain.Base(3))
	if err != nil {
		t.Fatal(err)
	}
	rows := testkit.CuboidRows(s, exact...)
	d := make([]int, s.Cells())
	for c := range d {
		if w.Before[c] < 0 || w.After[c] < 0 || w.Before[c]*w.After[c] != 0 {
			t.Fatalf("witness tables %v, %v are not max(0,∓g)", w.Before, w.After)
		}
		d[c] = w.After[c] - w.Before[c]
	}
	if testkit.L1(d) != w.Value || w.Value != 8 {
		t.Fatalf("witness moves %d rows, value %d, want 8", testkit.L1(d), w.Value)
	}
	checkPrimitive(t, rows, d)

	// From {(0,1,2),(0,1,2),(1,0,0),(1,1,1)} to
	// {(0,0,1),(0,1,0),(1,1,2),(1,1,2)}; cell (a,b,c) is 6a+3b+c.
	quoted := make([]int, s.Cells())
	for c, v := range map[int]int{5: -2, 6: -1, 10: -1, 1: 1, 3: 1, 11: 2} {
		quoted[c] = v
	}
	checkPrimitive(t, rows, quoted)
}

// BenchmarkBruteForce times the Graver engine; graver-elements is the basis
// size (one element of each pair ±g).
func BenchmarkBruteForce(b *testing.B) {
	tests := []struct {
		name  string
		sizes []int
		exact []domain.Cuboid
		want  int
	}{
		{"2x2x3 three margins", []int{2, 2, 3}, []domain.Cuboid{1, 2, 4}, 8},
		{"2x2x6 three margins", []int{2, 2, 6}, []domain.Cuboid{1, 2, 4}, 8},
		{"2x3x3 three margins", []int{2, 3, 3}, []domain.Cuboid{1, 2, 4}, 12},
		{"3x3x3 {A},{B}", []int{3, 3, 3}, []domain.Cuboid{1, 2}, 6},
		{"3x3x3 no-3-way", []int{3, 3, 3}, []domain.Cuboid{3, 5, 6}, 24},
	}
	for _, tc := range tests {
		b.Run(tc.name, func(b *testing.B) {
			s := sizedSchema(b, tc.sizes...)
			var w Witness
			for b.Loop() {
				var err error
				if w, err = BruteForceSensitivity(context.Background(), s, tc.exact, nil, domain.Base(len(tc.sizes))); err != nil {
					b.Fatal(err)
				}
			}
			if w.Value != tc.want {
				b.Fatalf("sensitivity %d, want %d", w.Value, tc.want)
			}
			b.ReportMetric(float64(w.Basis), "graver-elements")
			b.ReportMetric(float64(w.Basis)*float64(b.N)/b.Elapsed().Seconds(), "elements/s")
		})
	}
}

// BenchmarkDefinition2x2x3 is the definition-level check of the 2x2x3
// table with its three margins up to 8 rows (125970 tables): the primitive
// moves of at most 8 rows are the Graver elements of norm at most 8, and
// the largest has 8 rows (the paper says 6).
func BenchmarkDefinition2x2x3(b *testing.B) {
	s := sizedSchema(b, 2, 2, 3)
	rows := testkit.CuboidRows(s, 1, 2, 4)
	basis, err := GraverBasis(context.Background(), s.Cells(), rows)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		want := definitionNeighbours(s.Cells(), rows, 8)
		got := map[string][]int{}
		for _, g := range basis {
			if testkit.L1(g) <= 8 {
				got[testkit.Canonical(g)] = g
			}
		}
		if len(got) != len(want) {
			b.Fatalf("%d Graver elements of norm <= 8, %d moves by the definition", len(got), len(want))
		}
		top := 0
		for k, g := range want {
			if _, ok := got[k]; !ok {
				b.Fatalf("move %v missing from the Graver basis", g)
			}
			top = max(top, testkit.L1(g))
		}
		if top != 8 {
			b.Fatalf("largest primitive move by the definition: %d rows, want 8", top)
		}
	}
}
