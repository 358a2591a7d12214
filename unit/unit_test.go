package unit

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/source"
)

func testSchema(t testing.TB) *domain.Schema {
	t.Helper()
	s, err := domain.NewSchema([]domain.Dimension{
		{Name: "dept", Values: []string{"maths", "physics", "law"}},
		{Name: "grade", Values: []string{"1", "2", "3", "4", "5"}},
		{Name: "year", Values: []string{"y1", "y2"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ratings is a CSV of rows with a student column: student i has i%7+1
// rows.
func ratings(n int, seed uint64) string {
	r := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	b.WriteString("student,dept,grade,year\n")
	depts, grades, years := []string{"maths", "physics", "law"}, []string{"1", "2", "3", "4", "5"}, []string{"y1", "y2"}
	for i := range n {
		for range i%7 + 1 {
			fmt.Fprintf(&b, "s%d,%s,%s,%s\n", i, depts[r.IntN(3)], grades[r.IntN(5)], years[r.IntN(2)])
		}
	}
	return b.String()
}

func csvTable(t testing.TB, text string) *source.CSV {
	t.Helper()
	c, err := source.NewCSV("ratings.csv", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func collect(t testing.TB, s *domain.Schema, text string, views []domain.View, dims domain.Cuboid) (map[domain.View][]float64, *Rows) {
	t.Helper()
	col, rec, err := NewCollector(csvTable(t, text), s, "student", dims)
	if err != nil {
		t.Fatal(err)
	}
	counts, _, err := cube.AggregateViews(context.Background(), rec, s, views, cube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := col.Rows()
	if err != nil {
		t.Fatal(err)
	}
	return counts, rows
}

func views(t testing.TB, s *domain.Schema, lists ...string) []domain.View {
	t.Helper()
	var out []domain.View
	for _, l := range lists {
		v, err := s.ParseView(l)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// The collector lets cube count as it does without it, and groups the
// rows by unit exactly as a plain map does.
func TestCollectorGroupsRows(t *testing.T) {
	s := testSchema(t)
	text := ratings(200, 1)
	vs := views(t, s, "dept,grade", "year", "")
	dims := domain.Cuboid(0b111)
	counts, rows := collect(t, s, text, vs, dims)
	plain, _, err := cube.AggregateViews(context.Background(), csvTable(t, text), s, vs, cube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for v, want := range plain {
		if !slices.Equal(counts[v], want) {
			t.Errorf("%s: counted through the collector %v, without %v", s.FormatView(v), counts[v], want)
		}
	}
	fromRows, err := rows.Counts(vs)
	if err != nil {
		t.Fatal(err)
	}
	for v, want := range plain {
		if !slices.Equal(fromRows[v], want) {
			t.Errorf("%s: from the rows %v, counted %v", s.FormatView(v), fromRows[v], want)
		}
	}
	// A plain grouping of the CSV.
	want := map[string]map[uint64]int64{}
	cells, _ := NewCells(s, dims)
	for _, line := range strings.Split(strings.TrimSpace(text), "\n")[1:] {
		f := strings.Split(line, ",")
		var pos []int
		for j, d := range []int{0, 1, 2} {
			p, _ := s.ValueIndex(d, f[j+1])
			pos = append(pos, p)
		}
		x, err := cells.Index(pos)
		if err != nil {
			t.Fatal(err)
		}
		if want[f[0]] == nil {
			want[f[0]] = map[uint64]int64{}
		}
		want[f[0]][x]++
	}
	if rows.NumUnits() != len(want) {
		t.Fatalf("%d units, want %d", rows.NumUnits(), len(want))
	}
	for u := range rows.NumUnits() {
		id, cs, ns := rows.Unit(u)
		if len(cs) != len(want[id]) || !slices.IsSorted(cs) {
			t.Fatalf("unit %s: cells %v, want %v", id, cs, want[id])
		}
		for i, x := range cs {
			if ns[i] != want[id][x] {
				t.Errorf("unit %s cell %d: %d rows, want %d", id, x, ns[i], want[id][x])
			}
		}
	}
	per := rows.RowsPerUnit()
	for u := range rows.NumUnits() {
		id, _, _ := rows.Unit(u)
		var i int
		fmt.Sscanf(id, "s%d", &i)
		if per[u] != int64(i%7+1) {
			t.Errorf("unit %s has %d rows, want %d", id, per[u], i%7+1)
		}
	}
}

func TestCollectorWeights(t *testing.T) {
	s := testSchema(t)
	text := "student,dept,grade,year,n\na,maths,1,y1,3\na,maths,1,y1,2\nb,law,5,y2,1\na,law,2,y1,0\nb,law,5,y2,4\n"
	c, err := source.NewCSV("w.csv", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	tab := source.WithCountColumn(c, "n")
	col, rec, err := NewCollector(tab, s, "student", 0b111)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := cube.AggregateViews(context.Background(), rec, s, views(t, s, "dept"), cube.Options{}); err != nil {
		t.Fatal(err)
	}
	rows, err := col.Rows()
	if err != nil {
		t.Fatal(err)
	}
	if got := rows.RowsPerUnit(); !slices.Equal(got, []int64{5, 5}) {
		t.Errorf("rows per unit %v, want [5 5]", got)
	}
	for u := range 2 {
		_, cs, ns := rows.Unit(u)
		if len(cs) != 1 || ns[0] != 5 {
			t.Errorf("unit %d: cells %v counts %v, want one cell of 5", u, cs, ns)
		}
	}
}

func TestCollectorErrors(t *testing.T) {
	s := testSchema(t)
	if _, _, err := NewCollector(csvTable(t, ratings(1, 1)), s, "dept", 1); err == nil || !strings.Contains(err.Error(), "is a dimension") {
		t.Errorf("a unit column that is a dimension: %v", err)
	}
	// A value outside its domain: cube's error, naming row and column.
	col, rec, err := NewCollector(csvTable(t, "student,dept,grade,year\na,maths,1,y1\nb,art,1,y1\n"), s, "student", 0b111)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = cube.AggregateViews(context.Background(), rec, s, views(t, s, "dept"), cube.Options{})
	if err == nil || !strings.Contains(err.Error(), `"art"`) || !strings.Contains(err.Error(), "row 3") {
		t.Errorf("outside the domain: %v", err)
	}
	if _, err := col.Rows(); err == nil {
		t.Error("Rows after a failed count succeeded")
	}
	// A missing unit column: the table's error.
	_, rec, _ = NewCollector(csvTable(t, "dept,grade,year\nmaths,1,y1\n"), s, "student", 0b111)
	_, _, err = cube.AggregateViews(context.Background(), rec, s, views(t, s, "dept"), cube.Options{})
	if err == nil || !strings.Contains(err.Error(), `"student"`) {
		t.Errorf("missing unit column: %v", err)
	}
}

func boundOf(t testing.TB, rows *Rows, k int, seed uint64) *Rows {
	t.Helper()
	b, err := rows.Bound(context.Background(), k, NewKey(noise.NewSeeded(seed)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Bounding keeps min(rows, K) rows of every unit, inside its cells, and
// depends on the key and the rows only: not on the order they were read in.
func TestBound(t *testing.T) {
	s := testSchema(t)
	text := ratings(300, 2)
	_, rows := collect(t, s, text, views(t, s, "dept"), 0b111)
	lines := strings.Split(strings.TrimSpace(text), "\n")
	rev := slices.Clone(lines[1:])
	rand.New(rand.NewPCG(9, 9)).Shuffle(len(rev), func(i, j int) { rev[i], rev[j] = rev[j], rev[i] })
	_, shuffled := collect(t, s, lines[0]+"\n"+strings.Join(rev, "\n")+"\n", views(t, s, "dept"), 0b111)
	for _, k := range []int{1, 3, 7} {
		b := boundOf(t, rows, k, 5)
		per, bper := rows.RowsPerUnit(), b.RowsPerUnit()
		byID := map[string]int{}
		for u := range rows.NumUnits() {
			id, cs, ns := rows.Unit(u)
			bid, bcs, bns := b.Unit(u)
			if bid != id || bper[u] != min(per[u], int64(k)) {
				t.Fatalf("K=%d unit %s: kept %d of %d rows", k, id, bper[u], per[u])
			}
			for i, x := range bcs {
				j := slices.Index(cs, x)
				if j < 0 || bns[i] > ns[j] {
					t.Fatalf("K=%d unit %s: kept %d rows of cell %d, which has %v", k, id, bns[i], x, ns)
				}
			}
			byID[id] = u
		}
		sb := boundOf(t, shuffled, k, 5)
		for u := range sb.NumUnits() {
			id, cs, ns := sb.Unit(u)
			_, wcs, wns := b.Unit(byID[id])
			if !slices.Equal(cs, wcs) || !slices.Equal(ns, wns) {
				t.Fatalf("K=%d unit %s: bounded %v %v after shuffling the rows, %v %v before", k, id, cs, ns, wcs, wns)
			}
		}
		other := boundOf(t, rows, k, 6)
		if k < 7 && slices.Equal(other.cellOf, b.cellOf) && slices.Equal(other.counts, b.counts) {
			t.Errorf("K=%d: two keys kept the same rows of every unit", k)
		}
	}
}

// Every set of K of a unit's rows is equally likely: a unit with 3, 2 and 1
// rows in three cells keeps K = 2 rows, whose cell counts follow the
// multivariate hypergeometric law. Chi-square over 6000 keys, 5 cells of
// the law: the 0.999 quantile of chi-square with 4 degrees of freedom is
// 18.47.
func TestKeepUniform(t *testing.T) {
	counts := []int64{3, 2, 1}
	// P(kept = (a,b,c)) = C(3,a) C(2,b) C(1,c) / C(6,2).
	want := map[[3]int64]float64{{2, 0, 0}: 3, {1, 1, 0}: 6, {1, 0, 1}: 3, {0, 2, 0}: 1, {0, 1, 1}: 2}
	const n = 6000
	got := map[[3]int64]int{}
	r := noise.NewSeeded(11)
	for i := range n {
		key := NewKey(r)
		kept, err := key.Keep(fmt.Sprint("u", i), counts, 2)
		if err != nil {
			t.Fatal(err)
		}
		got[[3]int64(kept)]++
	}
	chi := 0.0
	for k, w := range want {
		e := n * w / 15
		d := float64(got[k]) - e
		chi += d * d / e
	}
	if len(got) != len(want) || chi > 18.47 {
		t.Errorf("kept %v; chi-square %.2f above 18.47 (want proportions %v of 15)", got, chi, want)
	}
	if kept, _ := NewKey(r).Keep("x", []int64{1, 1}, 5); !slices.Equal(kept, []int64{1, 1}) {
		t.Errorf("a unit of 2 rows under K = 5 kept %v", kept)
	}
	if _, err := NewKey(r).Keep("x", []int64{1}, 0); err == nil {
		t.Error("K = 0 accepted")
	}
}

// The key is drawn from the release's generator at a fixed position: the
// next four words. Pinned so that a pipeline reproducing it notices a
// change.
func TestKeyPinned(t *testing.T) {
	r := noise.NewSeeded(1)
	k := NewKey(r)
	r2 := noise.NewSeeded(1)
	var b [32]byte
	for i := range 4 {
		w := r2.Uint64()
		for j := range 8 {
			b[8*i+j] = byte(w >> (8 * j))
		}
	}
	if k.Bytes() != b || !k.Seeded() {
		t.Errorf("key %x, want the generator's next 32 bytes %x", k.Bytes(), b)
	}
	kept, err := k.Keep("student 7", []int64{4, 4, 4}, 5)
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprint(kept); s != "[2 3 0]" {
		t.Errorf("seeded choice changed: %s", s)
	}
	if KeyFromBytes(k.Bytes(), true).Unit("a").Uint64() != k.Unit("a").Uint64() {
		t.Error("a key rebuilt from its bytes gives another generator")
	}
}

func TestNewRows(t *testing.T) {
	s := testSchema(t)
	cells, _ := NewCells(s, 0b011)
	r, err := NewRows(cells, []string{"a", "b"}, [][]uint64{{3, 1, 3}, {0}}, [][]int64{{1, 2, 3}, {5}})
	if err != nil {
		t.Fatal(err)
	}
	id, cs, ns := r.Unit(0)
	if id != "a" || !slices.Equal(cs, []uint64{1, 3}) || !slices.Equal(ns, []int64{2, 4}) {
		t.Errorf("unit a: %v %v", cs, ns)
	}
	if _, err := NewRows(cells, []string{"a", "a"}, [][]uint64{{0}, {0}}, [][]int64{{1}, {1}}); err == nil {
		t.Error("a repeated identifier was accepted")
	}
	if _, err := NewRows(cells, []string{"a"}, [][]uint64{{0}}, [][]int64{{0}}); err == nil {
		t.Error("a zero count was accepted")
	}
	if _, err := r.Counts(views(t, s, "year")); err == nil {
		t.Error("a view outside the rows' dimensions was counted")
	}
}

// The exponential mechanism picks each candidate with exactly its
// probability: chi-square against the exact law.
func TestChooseMaxRows(t *testing.T) {
	per := []int64{1, 1, 2, 3, 3, 3, 4, 8, 9, 20}
	eps, _ := privacy.NewEpsilon(1)
	const limit, n = 10, 20000
	// u(k) = -|#{n <= k} - 0.5 * 10|.
	below := []int{2, 3, 6, 7, 7, 7, 7, 8, 9, 9}
	w := make([]float64, limit)
	total := 0.0
	for k := range limit {
		w[k] = math.Exp(-math.Abs(float64(below[k])-5) / 2)
		total += w[k]
	}
	got := make([]int, limit+1)
	r := noise.NewSeeded(3)
	for range n {
		k, err := ChooseMaxRows(r, NewHistogram(per, limit), 0.5, limit, eps)
		if err != nil {
			t.Fatal(err)
		}
		got[k]++
	}
	chi := 0.0
	for k := 1; k <= limit; k++ {
		e := n * w[k-1] / total
		d := float64(got[k]) - e
		chi += d * d / e
	}
	// 0.999 quantile of chi-square with 9 degrees of freedom: 27.88.
	if chi > 27.88 || got[0] != 0 {
		t.Errorf("choices %v, chi-square %.2f", got, chi)
	}
	for _, bad := range []struct {
		q     float64
		limit int
	}{{0, 5}, {1.5, 5}, {0.5, 0}, {math.NaN(), 5}} {
		if _, err := ChooseMaxRows(r, NewHistogram(per, 10), bad.q, bad.limit, eps); err == nil {
			t.Errorf("q %v limit %d accepted", bad.q, bad.limit)
		}
	}
}

func TestCountTruncated(t *testing.T) {
	per := []int64{1, 5, 6, 7, 2, 9}
	eps, _ := privacy.NewEpsilon(1)
	r := noise.NewSeeded(4)
	sum := 0.0
	const n = 4000
	for range n {
		c, err := CountTruncated(r, NewHistogram(per, 5), 5, eps)
		if err != nil {
			t.Fatal(err)
		}
		sum += c.Count
		if c.MOE90 != 2 || c.K != 5 {
			t.Fatalf("moe90 %v K %d", c.MOE90, c.K)
		}
	}
	// Three units have more than 5 rows; the noise has variance
	// 2a/(1-a)^2 = 0.92 at eps = 1: the mean of 4000 draws is within
	// 4 standard errors (0.06).
	if mean := sum / n; math.Abs(mean-3) > 4*math.Sqrt(0.92/n) {
		t.Errorf("mean count %.3f, want 3", mean)
	}
}

// Pinned to a direct evaluation of P(|Z| > m) = 2 a^(m+1) / (1 + a).
func TestLaplaceMOE90(t *testing.T) {
	for _, tc := range []struct{ eps, want float64 }{{1, 2}, {0.1, 23}, {0.5, 5}, {10, 0}} {
		if got := LaplaceMOE90(tc.eps); got != tc.want {
			t.Errorf("eps %v: %v, want %v", tc.eps, got, tc.want)
		}
		a := math.Exp(-tc.eps)
		tail := func(m float64) float64 { return 2 * math.Pow(a, m+1) / (1 + a) }
		if tail(tc.want) > 0.1 || (tc.want > 0 && tail(tc.want-1) <= 0.1) {
			t.Errorf("eps %v: %v is not the smallest m with P(|Z| > m) <= 0.1", tc.eps, tc.want)
		}
	}
}

func TestLooksLikeIdentifier(t *testing.T) {
	for name, want := range map[string]bool{
		"id": true, "ID": true, "student": true, "student_id": true, "studentId": true, "StudentID": true,
		"userid": true, "person": true, "household": true, "hh_id": true, "patient-no": true, "customernumber": true,
		"email": true, "s": false, "dept": false, "year": false, "grade": false, "valid": false, "paid": false,
		"citizen": false, "employed": false, "released": false, "agegroup": false, "colour": false, "grid": false,
	} {
		if got := LooksLikeIdentifier(name); got != want {
			t.Errorf("LooksLikeIdentifier(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestCellsIndex(t *testing.T) {
	s := testSchema(t)
	c, err := NewCells(s, 0b101)
	if err != nil {
		t.Fatal(err)
	}
	if x, err := c.Index([]int{2, 1}); err != nil || x != 5 {
		t.Errorf("Index(law, y2) = %d, %v; want 5", x, err)
	}
	if _, err := c.Index([]int{3, 0}); err == nil {
		t.Error("a position outside the domain was accepted")
	}
	big := make([]domain.Dimension, 64)
	for i := range big {
		big[i] = domain.Dimension{Name: fmt.Sprint("d", i), Values: []string{"a", "b"}}
	}
	bs, err := domain.NewSchema(big)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewCells(bs, domain.Base(64)); err == nil {
		t.Error("2^64 cells accepted")
	}
}

// BenchmarkCollectBound reads 10^6 rows of 100,000 units through the
// collector, groups and bounds them to 5 rows per unit.
func BenchmarkCollectBound(b *testing.B) {
	s := testSchema(b)
	var buf bytes.Buffer
	buf.WriteString("student,dept,grade,year\n")
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 1_000_000 {
		fmt.Fprintf(&buf, "s%d,%s,%d,y%d\n", r.IntN(100_000), []string{"maths", "physics", "law"}[i%3], 1+r.IntN(5), 1+r.IntN(2))
	}
	data := buf.Bytes()
	vs := views(b, s, "dept,grade", "year")
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		c, _ := source.NewCSV("bench.csv", bytes.NewReader(data))
		col, rec, err := NewCollector(c, s, "student", 0b111)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := cube.AggregateViews(context.Background(), rec, s, vs, cube.Options{}); err != nil {
			b.Fatal(err)
		}
		rows, err := col.Rows()
		if err != nil {
			b.Fatal(err)
		}
		bd, err := rows.Bound(context.Background(), 5, NewKey(noise.NewSeeded(1)))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := bd.Counts(vs); err != nil {
			b.Fatal(err)
		}
	}
}

func TestCandidates(t *testing.T) {
	want := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 17, 22, 28, 35, 44, 55, 69, 87, 100}
	if got := Candidates(100); !slices.Equal(got, want) {
		t.Errorf("Candidates(100) = %v, want %v", got, want)
	}
	if got := Candidates(3); !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("Candidates(3) = %v", got)
	}
	if got := Candidates(13); !slices.Equal(got, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13}) {
		t.Errorf("Candidates(13) = %v", got)
	}
}
