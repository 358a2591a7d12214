package cube

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/source"
)

// splitTable is a table that can be split.
type splitTable interface {
	Records
	Splitter
}

// tinyParts splits its table into parts of any size, so that small test
// files are read in parts, and records how many parts it made.
type tinyParts struct {
	splitTable
	parts *int
}

func (t tinyParts) Split(n int, _ int64) ([]func() ([][]byte, int64, error), func() bool) {
	ps, joined := t.splitTable.Split(n, 1)
	*t.parts = len(ps)
	return ps, joined
}

// tinyIndexed is tinyParts for a table whose parts give positions.
type tinyIndexed struct {
	tinyParts
	is IndexSplitter
}

func (t tinyIndexed) SplitIndexed(n int, _ int64, domains [][]string) ([]func([][]int32) (int, error), func() bool) {
	ps, joined := t.is.SplitIndexed(n, 1, domains)
	*t.parts = len(ps)
	return ps, joined
}

// withProcs runs f with GOMAXPROCS n: the number of parts Aggregate asks for.
func withProcs(n int, f func()) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n))
	f()
}

// openTiny opens spec for reading in tiny parts; *parts is set to their
// number.
func openTiny(t *testing.T, spec source.Spec, parts *int) Records {
	t.Helper()
	tab, err := source.Open(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tab.Close() })
	st, ok := tab.(splitTable)
	if !ok {
		t.Fatalf("%T cannot be split", tab)
	}
	if is, ok := tab.(IndexSplitter); ok {
		return tinyIndexed{tinyParts{st, parts}, is}
	}
	return tinyParts{st, parts}
}

// TestAggregateInPartsMatchesBruteForce reads CSV and Parquet files in 1 to
// 5 parts into every cuboid (some counted, the others projected from them)
// and compares each with a direct count.
func TestAggregateInPartsMatchesBruteForce(t *testing.T) {
	ctx := context.Background()
	s := factSchema(t)
	rows := makeFacts(3000, 5)
	var all []domain.Cuboid
	for cb := range domain.Cuboid(1 << s.NumDims()) {
		all = append(all, cb)
	}
	files := map[string]source.Spec{
		"csv":       {Path: writeFactsCSV(t, rows, false)},
		"csv crlf":  {Path: writeFactsCSV(t, rows, true)},
		"parquet":   {Path: writeFactsParquet(t, rows)},
		"csv count": {Path: writeFactsCSV(t, rows, false), CountColumn: "extra"},
	}
	procsList := []int{1, 2, 3, 4, 5}
	if testing.Short() {
		procsList = []int{1, 2, 5}
	}
	for name, spec := range files {
		for _, procs := range procsList {
			t.Run(fmt.Sprintf("%s/%d", name, procs), func(t *testing.T) {
				for _, cuboids := range [][]domain.Cuboid{all, {domain.Base(3)}, {testkit.CuboidOf([]int{0, 2}), testkit.CuboidOf([]int{1})}} {
					var tables map[domain.Cuboid][]float64
					var n int64
					var err error
					parts := 0
					withProcs(procs, func() { tables, n, err = Aggregate(ctx, openTiny(t, spec, &parts), s, cuboids, Options{}) })
					if err != nil {
						t.Fatal(err)
					}
					if procs > 1 && parts != procs {
						t.Fatalf("%d parts, want %d", parts, procs)
					}
					var want int64
					for _, r := range rows {
						want += weightOf(spec, r)
					}
					if n != want {
						t.Fatalf("%d rows, want %d", n, want)
					}
					for _, cb := range cuboids {
						if w := countWeighted(s, cb, rows, spec); !slices.Equal(tables[cb], w) {
							t.Errorf("cuboid %s = %v, want %v", s.Format(cb), tables[cb], w)
						}
					}
				}
			})
		}
	}
}

// weightOf is a fact's weight when read with spec's count column.
func weightOf(spec source.Spec, f fact) int64 {
	if spec.CountColumn == "" {
		return 1
	}
	var k int64
	fmt.Sscan(f.Extra, &k)
	return k
}

func countWeighted(s *domain.Schema, cb domain.Cuboid, rows []fact, spec source.Spec) []float64 {
	out := make([]float64, s.CuboidSize(cb))
	for _, f := range rows {
		one := countFacts(s, cb, []fact{f})
		for i, v := range one {
			out[i] += v * float64(weightOf(spec, f))
		}
	}
	return out
}

// TestAggregateInPartsErrors: a value outside its domain far into the
// file, in a later part, is reported with its true row number, exactly as
// a whole read reports it.
func TestAggregateInPartsErrors(t *testing.T) {
	ctx := context.Background()
	s := factSchema(t)
	rows := makeFacts(1500, 4)
	rows[1234].Region = "atlantis"
	csvPath := writeFactsCSV(t, rows, false)
	pqPath := writeFactsParquet(t, rows)
	region := testkit.CuboidOf([]int{2})
	for procs := 1; procs <= 4; procs++ {
		for path, words := range map[string]string{
			csvPath: csvPath + `: row 1236, column "region": value "atlantis" is not in the declared domain of "region" (north, south, east, west, centre)`,
			pqPath:  pqPath + `: row group 2, row 535 (row 1235 of the file), column "region": value "atlantis" is not in the declared domain of "region" (north, south, east, west, centre)`,
		} {
			var err error
			parts := 0
			withProcs(procs, func() {
				_, _, err = Aggregate(ctx, openTiny(t, source.Spec{Path: path}, &parts), s, []domain.Cuboid{region}, Options{})
			})
			if parts < min(procs, 2) || err == nil || err.Error() != words {
				t.Errorf("%d parts of %d: %v, want %s", parts, procs, err, words)
			}
		}
	}
}

// TestAggregateInPartsQuotedLineBreaks: cuts that fall inside quoted
// fields spanning lines do not join, and the file is read whole instead,
// with the same counts.
func TestAggregateInPartsQuotedLineBreaks(t *testing.T) {
	ctx := context.Background()
	s := factSchema(t)
	rows := makeFacts(400, 6)
	var b strings.Builder
	b.WriteString("extra,region,sex,age\n")
	for _, f := range rows {
		fmt.Fprintf(&b, "\"%s\n%s\n\",%s,%s,%d\n", f.Extra, strings.Repeat("-", 40), f.Region, f.Sex, f.Age)
	}
	path := filepath.Join(t.TempDir(), "quoted.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	all := []domain.Cuboid{domain.Base(3), testkit.CuboidOf([]int{0})}
	var tables map[domain.Cuboid][]float64
	var err error
	parts := 0
	withProcs(4, func() {
		tables, _, err = Aggregate(ctx, openTiny(t, source.Spec{Path: path}, &parts), s, all, Options{})
	})
	if err != nil {
		t.Fatal(err)
	}
	if parts != 4 {
		t.Fatalf("%d parts", parts)
	}
	for _, cb := range all {
		if want := countFacts(s, cb, rows); !slices.Equal(tables[cb], want) {
			t.Errorf("cuboid %s = %v, want %v", s.Format(cb), tables[cb], want)
		}
	}
}

// TestAggregateInPartsLongValues: values longer than 8 bytes are looked up
// at once, shorter ones in batches; both count, and a long value outside
// its domain is reported with its row.
func TestAggregateInPartsLongValues(t *testing.T) {
	ctx := context.Background()
	s, err := domain.NewSchema([]domain.Dimension{
		{Name: "place", Values: []string{"a", "north-eastern district", "south-western district", "bb"}},
		{Name: "kind", Values: []string{"x", "yy"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("place,kind\n")
	want := make([]float64, 8)
	for i := range 3000 {
		p, k := i*7%4, i%3%2
		fmt.Fprintf(&b, "%s,%s\n", s.Dim(0).Values[p], s.Dim(1).Values[k])
		want[p*2+k]++
	}
	good := filepath.Join(t.TempDir(), "good.csv")
	if err := os.WriteFile(good, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.csv")
	if err := os.WriteFile(bad, []byte(b.String()+"north-eastern districts,x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for procs := 1; procs <= 3; procs++ {
		parts := 0
		var tables map[domain.Cuboid][]float64
		withProcs(procs, func() {
			tables, _, err = Aggregate(ctx, openTiny(t, source.Spec{Path: good}, &parts), s, []domain.Cuboid{3}, Options{})
		})
		if err != nil || parts != procs || !slices.Equal(tables[3], want) {
			t.Fatalf("%d parts of %d: %v, %v; want %v", parts, procs, err, tables[3], want)
		}
		withProcs(procs, func() {
			_, _, err = Aggregate(ctx, openTiny(t, source.Spec{Path: bad}, &parts), s, []domain.Cuboid{3}, Options{})
		})
		if err == nil || !strings.Contains(err.Error(), `row 3002, column "place": value "north-eastern districts" is not in the declared domain`) {
			t.Fatalf("%d parts: %v", procs, err)
		}
	}
}
