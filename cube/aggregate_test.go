package cube

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/source"
)

// FromCSV counts a CSV fact table with a header row into a cube over s
// (the tests' shorthand for source.OpenCSV and Build; package cube itself
// reads no files).
func FromCSV(ctx context.Context, path string, s *domain.Schema, opt Options) (*Cube, error) {
	t, err := source.OpenCSV(path)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	return Build(ctx, t, s, opt)
}

// fact is one row of the fact table the source tests write in every format.
type fact struct {
	Sex    string `parquet:"sex,dict"`
	Age    int32  `parquet:"age"`
	Region string `parquet:"region"`
	Extra  string `parquet:"extra"`
}

func factSchema(t testing.TB) *domain.Schema {
	t.Helper()
	s, err := domain.NewSchema([]domain.Dimension{
		{Name: "sex", Values: []string{"F", "M"}},
		{Name: "age", Values: []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}},
		{Name: "region", Values: []string{"north", "south", "east", "west", "centre"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func makeFacts(n int, seed uint64) []fact {
	r := noise.NewSeeded(seed)
	regions := []string{"north", "south", "east", "west", "centre"}
	rows := make([]fact, n)
	for i := range rows {
		rows[i] = fact{
			Sex:    []string{"F", "M"}[r.Uint64N(2)],
			Age:    int32(r.Uint64N(10)),
			Region: regions[r.Uint64N(uint64(len(regions)))],
			Extra:  strconv.Itoa(int(r.Uint64N(1000))),
		}
	}
	return rows
}

// countFacts counts rows into cuboid cb of s directly from the rows.
func countFacts(s *domain.Schema, cb domain.Cuboid, rows []fact) []float64 {
	out := make([]float64, s.CuboidSize(cb))
	for _, f := range rows {
		vals := []string{f.Sex, strconv.Itoa(int(f.Age)), f.Region}
		cell := 0
		for _, d := range cb.Dims() {
			j, _ := s.ValueIndex(d, vals[d])
			cell = cell*s.Size(d) + j
		}
		out[cell]++
	}
	return out
}

func writeFactsCSV(t testing.TB, rows []fact, crlf bool) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "facts.csv")
	var b strings.Builder
	nl := "\n"
	if crlf {
		nl = "\r\n"
	}
	b.WriteString("\ufeffextra,region,sex,age" + nl)
	for i, f := range rows {
		region := f.Region
		if i%3 == 0 {
			region = `"` + region + `"` // quoted fields are the same values
		}
		fmt.Fprintf(&b, "%s,%s,%s,%d%s", f.Extra, region, f.Sex, f.Age, nl)
	}
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeFactsParquet(t testing.TB, rows []fact) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "facts.parquet")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[fact](f, parquet.MaxRowsPerRowGroup(700))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return p
}

func writeFactsSQLite(t testing.TB, rows []fact) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "facts.db")
	db, err := sql.Open("sqlite", p)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("CREATE TABLE facts (sex TEXT, age INTEGER, region TEXT, extra TEXT)"); err != nil {
		t.Fatal(err)
	}
	ins, err := tx.Prepare("INSERT INTO facts VALUES (?, ?, ?, ?)")
	if err != nil {
		t.Fatal(err)
	}
	defer ins.Close()
	for _, f := range rows {
		if _, err := ins.Exec(f.Sex, f.Age, f.Region, f.Extra); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAggregateMatchesBruteForce counts the same rows from CSV (LF and
// CRLF, some fields quoted), Parquet (several row groups, a dictionary
// column, an integer column) and SQLite (GROUP BY in the database) into
// every cuboid of the schema, and compares each with a direct count; Build
// must agree too.
func TestAggregateMatchesBruteForce(t *testing.T) {
	ctx := context.Background()
	s := factSchema(t)
	rows := makeFacts(2000, 3)
	var all []domain.Cuboid
	for cb := range domain.Cuboid(1 << s.NumDims()) {
		all = append(all, cb)
	}
	files := map[string]source.Spec{
		"csv":      {Path: writeFactsCSV(t, rows, false)},
		"csv crlf": {Path: writeFactsCSV(t, rows, true)},
		"parquet":  {Path: writeFactsParquet(t, rows)},
		"sqlite":   {Path: writeFactsSQLite(t, rows), Table: "facts"},
	}
	for name, spec := range files {
		t.Run(name, func(t *testing.T) {
			tab, err := source.Open(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			defer tab.Close()
			tables, n, err := Aggregate(ctx, tab, s, append(all, all[3]), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if n != int64(len(rows)) || len(tables) != len(all) {
				t.Fatalf("%d rows in %d tables, want %d in %d", n, len(tables), len(rows), len(all))
			}
			for _, cb := range all {
				if want := countFacts(s, cb, rows); !slices.Equal(tables[cb], want) {
					t.Errorf("cuboid %s = %v, want %v", s.Format(cb), tables[cb], want)
				}
			}
			tab2, err := source.Open(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			defer tab2.Close()
			c, err := Build(ctx, tab2, s, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.Counts, tables[domain.Base(3)]) {
				t.Error("Build and Aggregate disagree on the base cuboid")
			}
		})
	}
}

// TestAggregateErrors: limits are checked before reading; a value outside
// the domain names the table, position and column in every format.
func TestAggregateErrors(t *testing.T) {
	ctx := context.Background()
	s := factSchema(t)
	rows := makeFacts(1500, 4)
	rows[1234].Region = "atlantis"
	csvPath := writeFactsCSV(t, rows, false)
	pqPath := writeFactsParquet(t, rows)
	dbPath := writeFactsSQLite(t, rows)
	agg := func(spec source.Spec, cuboids []domain.Cuboid, limit int) func() error {
		return func() error {
			tab, err := source.Open(ctx, spec)
			if err != nil {
				return err
			}
			defer tab.Close()
			_, _, err = Aggregate(ctx, tab, s, cuboids, Options{CellLimit: limit})
			return err
		}
	}
	region := testkit.CuboidOf([]int{2})
	testkit.CheckErrors(t, []testkit.ErrorCase{
		{Name: "limit", Run: agg(source.Spec{Path: csvPath}, []domain.Cuboid{domain.Base(3), region}, 104),
			Words: "the requested cuboids have 105 cells in all ({sex,age,region} 100, {region} 5), above the limit of 104"},
		{Name: "dimension outside the schema", Run: agg(source.Spec{Path: csvPath}, []domain.Cuboid{1 << 3}, 0),
			Words: "does not have"},
		{Name: "csv", Run: agg(source.Spec{Path: csvPath}, []domain.Cuboid{region}, 0),
			Words: csvPath + `: row 1236, column "region": value "atlantis" is not in the declared domain of "region" (north, south, east, west, centre)`},
		{Name: "parquet", Run: agg(source.Spec{Path: pqPath}, []domain.Cuboid{region}, 0),
			Words: pqPath + `: row group 2, row 535 (row 1235 of the file), column "region": value "atlantis"`},
		{Name: "sqlite", Run: agg(source.Spec{Path: dbPath, Table: "facts"}, []domain.Cuboid{region}, 0),
			Words: `sqlite table "facts" of ` + dbPath + `: column "region" (a group of 1 rows): value "atlantis"`},
		{Name: "cancelled", Is: context.Canceled, Run: func() error {
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			tab, _ := source.Open(ctx, source.Spec{Path: csvPath})
			defer tab.Close()
			_, _, err := Aggregate(cctx, tab, s, []domain.Cuboid{region}, Options{})
			return err
		}, Words: "canceled"},
		{Name: "missing column", Run: func() error {
			s2, _ := domain.NewSchema([]domain.Dimension{{Name: "tenure", Values: []string{"own"}}})
			tab, _ := source.Open(ctx, source.Spec{Path: pqPath})
			defer tab.Close()
			_, _, err := Aggregate(ctx, tab, s2, []domain.Cuboid{1}, Options{})
			return err
		}, Words: `no column "tenure"`},
	})
}

// censusFacts writes n rows of a 12-dimension schema of 10^12 base cells
// (ten values per dimension) to a CSV file and returns the schema, the path
// and the rows' value indices.
func censusFacts(t testing.TB, n int) (*domain.Schema, string, [][12]uint8) {
	t.Helper()
	sizes := make([]int, 12)
	for i := range sizes {
		sizes[i] = 10
	}
	s := testkit.TestSchema(t, sizes...)
	path := filepath.Join(t.TempDir(), "census.csv")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "d0,d1,d2,d3,d4,d5,d6,d7,d8,d9,d10,d11")
	r := noise.NewSeeded(12)
	rows := make([][12]uint8, n)
	for k := range rows {
		for i := range 12 {
			rows[k][i] = uint8(r.Uint64N(10))
			if i > 0 {
				w.WriteByte(',')
			}
			fmt.Fprintf(w, "v%d", rows[k][i])
		}
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return s, path, rows
}

// TestAggregateWithoutBaseCube counts 10^5 rows of a schema of 10^12 base
// cells into a 2-D cuboid, an invariant {d1,d2,d3} and its intersection
// with the cuboid, allocating less than 200 MB in all: the base cuboid
// (8 TB of counts) is never built.
func TestAggregateWithoutBaseCube(t *testing.T) {
	ctx := context.Background()
	s, path, rows := censusFacts(t, 100_000)
	if s.Cells() != 1_000_000_000_000 {
		t.Fatalf("%d base cells", s.Cells())
	}
	if _, err := FromCSV(ctx, path, s, Options{}); err == nil {
		t.Fatal("the base cuboid of 10^12 cells was not refused")
	}
	c := testkit.CuboidOf([]int{0, 1})
	inv := testkit.CuboidOf([]int{1, 2, 3})
	cuboids := []domain.Cuboid{c, inv, c & inv}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tab, err := source.OpenCSV(path)
	if err != nil {
		t.Fatal(err)
	}
	tables, n, err := Aggregate(ctx, tab, s, cuboids, Options{})
	tab.Close()
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc >= 200<<20 {
		t.Errorf("allocated %d MB, want < 200 MB", alloc>>20)
	} else {
		t.Logf("allocated %.1f MB in all for %d rows", float64(alloc)/(1<<20), n)
	}
	if n != int64(len(rows)) {
		t.Fatalf("%d rows, want %d", n, len(rows))
	}
	for _, cb := range cuboids {
		want := make([]float64, s.CuboidSize(cb))
		for _, r := range rows {
			cell := 0
			for _, d := range cb.Dims() {
				cell = cell*10 + int(r[d])
			}
			want[cell]++
		}
		if !slices.Equal(tables[cb], want) {
			t.Errorf("cuboid %s differs from a direct count", s.Format(cb))
		}
	}
	if got := slices.Sorted(maps.Keys(tables)); len(got) != 3 {
		t.Errorf("tables for %v", got)
	}
}

// BenchmarkAggregate counts 10^5 rows of the 12-dimension schema into a
// 2-D cuboid and a 3-D invariant: rows/s and MB/s of CSV.
func BenchmarkAggregate(b *testing.B) {
	ctx := context.Background()
	s, path, rows := censusFacts(b, 100_000)
	st, _ := os.Stat(path)
	cuboids := []domain.Cuboid{testkit.CuboidOf([]int{0, 1}), testkit.CuboidOf([]int{1, 2, 3}), testkit.CuboidOf([]int{1})}
	b.SetBytes(st.Size())
	for b.Loop() {
		tab, err := source.OpenCSV(path)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := Aggregate(ctx, tab, s, cuboids, Options{}); err != nil {
			b.Fatal(err)
		}
		tab.Close()
	}
	b.ReportMetric(float64(len(rows))*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mrows/s")
}

// TestInferSchema reads the domains of CSV and Parquet files (numeric
// columns sorted as numbers) and warns that they are not private.
func TestInferSchema(t *testing.T) {
	rows := makeFacts(500, 5)
	rows[7].Age = 12 // sorts after 9 as a number, before 2 as text
	for _, path := range []string{writeFactsCSV(t, rows, false), writeFactsParquet(t, rows)} {
		var log strings.Builder
		tab, err := source.Open(context.Background(), source.Spec{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		s, err := InferSchemaFrom(context.Background(), tab, []string{"region", "age"}, slog.New(slog.NewTextHandler(&log, nil)))
		tab.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Dim(0).Values; !slices.Equal(got, []string{"centre", "east", "north", "south", "west"}) {
			t.Errorf("%s: region domain %q", path, got)
		}
		if got := s.Dim(1).Values; !slices.Equal(got, []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "12"}) {
			t.Errorf("%s: age domain %q", path, got)
		}
		if !strings.Contains(log.String(), "NOT differentially private") || !strings.Contains(log.String(), path) {
			t.Errorf("%s: log %q", path, log.String())
		}
	}
}

// TestValueIndexMatchesMap compares valueIndex with a map on domains of
// short, long, empty and NUL-padded values, for members and non-members.
func TestValueIndexMatchesMap(t *testing.T) {
	r := noise.NewSeeded(9)
	randValue := func() string {
		b := make([]byte, r.Uint64N(20))
		for i := range b {
			b[i] = "ab\x00"[r.Uint64N(3)]
		}
		return string(b)
	}
	for _, size := range []int{1, 2, 7, 100, 5000} {
		want := map[string]int{}
		var vals []string
		for _, v := range []string{"", "a", "a\x00", "\x00", "abcdefgh", "abcdefgh\x00", "abcdefghi"} {
			if len(vals) < size {
				want[v] = len(vals)
				vals = append(vals, v)
			}
		}
		for len(vals) < size {
			v := randValue()
			if _, dup := want[v]; !dup {
				want[v] = len(vals)
				vals = append(vals, v)
			}
		}
		vi := newValueIndex(vals)
		probes := append(slices.Clone(vals), "zz", "a\x00\x00", "abcdefgh\x00\x00")
		for range 2000 {
			probes = append(probes, randValue())
		}
		for _, p := range probes {
			j, ok := vi.lookup([]byte(p))
			k, in := want[p]
			if ok != in || (in && j != k) {
				t.Fatalf("size %d: lookup(%q) = %d, %v; want %d, %v", size, p, j, ok, k, in)
			}
		}
	}
}

// BenchmarkBuildSources counts the same 200,000 rows of three dimensions
// from CSV, Parquet and SQLite (where the database does the GROUP BY):
// rows/s of the fact table.
func BenchmarkBuildSources(b *testing.B) {
	ctx := context.Background()
	s := factSchema(b)
	rows := makeFacts(200_000, 6)
	specs := []struct {
		name string
		spec source.Spec
	}{
		{"csv", source.Spec{Path: writeFactsCSV(b, rows, false)}},
		{"parquet", source.Spec{Path: writeFactsParquet(b, rows)}},
		{"sqlite", source.Spec{Path: writeFactsSQLite(b, rows), Table: "facts"}},
	}
	for _, sp := range specs {
		b.Run(sp.name, func(b *testing.B) {
			for b.Loop() {
				tab, err := source.Open(ctx, sp.spec)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Build(ctx, tab, s, Options{}); err != nil {
					b.Fatal(err)
				}
				tab.Close()
			}
			b.ReportMetric(float64(len(rows))*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mrows/s")
		})
	}
}

func TestAggregateViews(t *testing.T) {
	s := testkit.SmallGeo(t)
	var b strings.Builder
	b.WriteString("geo,sex,age\n")
	rng := rand.New(rand.NewPCG(3, 4))
	base := make([]float64, s.Cells())
	for range 500 {
		g, sx, a := rng.IntN(10), rng.IntN(2), rng.IntN(3)
		base[g*6+sx*3+a]++
		fmt.Fprintf(&b, "%s,%s,%s\n", s.Dim(0).Values[g], s.Dim(1).Values[sx], s.Dim(2).Values[a])
	}
	views := []domain.View{testkit.MustView(t, s, "geo:region"), testkit.MustView(t, s, "geo:state,sex"), testkit.MustView(t, s, "geo,sex,age"), testkit.MustView(t, s, "age")}
	tab, err := source.NewCSV("persons.csv", strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	got, rows, err := AggregateViews(context.Background(), tab, s, views, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rows != 500 {
		t.Fatalf("%d rows", rows)
	}
	for _, v := range views {
		want, _ := s.RollUp(domain.View{Dims: domain.Base(3)}, base, v)
		if !slices.Equal(got[v], want) {
			t.Errorf("%s: %v, want %v", s.FormatView(v), got[v], want)
		}
	}
	// The same counts from the base cube (ProjectViews).
	c := &Cube{Schema: s, Counts: base}
	fromCube, err := c.ProjectViews(views)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range views {
		if !slices.Equal(fromCube[v], got[v]) {
			t.Errorf("ProjectViews %s: %v, want %v", s.FormatView(v), fromCube[v], got[v])
		}
	}
	if _, err := c.ProjectViews([]domain.View{{Dims: 8}}); err == nil {
		t.Error("ProjectViews of a view outside the schema: no error")
	}
	// A leaf the hierarchy does not have is an error naming row and column.
	bad, _ := source.NewCSV("persons.csv", strings.NewReader("geo,sex,age\nc1,F,65+\nc11,M,65+\n"))
	if _, _, err := AggregateViews(context.Background(), bad, s, views, Options{}); err == nil ||
		!strings.Contains(err.Error(), "c11") || !strings.Contains(err.Error(), "row 3") {
		t.Fatalf("got %v, want an error naming c11 and row 3", err)
	}
}
