package source

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/internal/pgtest"
)

// countRow is a row of a table of counts: a sex and how many persons.
type countRow struct {
	Sex string `parquet:"sex"`
	N   string `parquet:"n"`
}

// countRowInt is countRow with an integer count, as Parquet writers store it.
type countRowInt struct {
	Sex string `parquet:"sex"`
	N   int64  `parquet:"n"`
}

// countTables writes rows in every format and returns, per format, the
// spec of the table (column "n" is the count) and how errors name the
// second data row ("row 3" of a CSV file, whose header is row 1).
func countTables(t *testing.T, rows []countRow) map[string]struct {
	spec Spec
	row  string
} {
	t.Helper()
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "counts.csv")
	var b strings.Builder
	b.WriteString("sex,n\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "%s,%q\n", r.Sex, r.N)
	}
	if err := os.WriteFile(csvPath, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := map[string]struct {
		spec Spec
		row  string
	}{
		"csv":     {Spec{Path: csvPath, CountColumn: "n"}, csvPath + ": row 3"},
		"parquet": {Spec{Path: writeParquet(t, rows, 10), CountColumn: "n"}, "row group 1, row 2"},
	}
	load := func(db *sql.DB, ph func(int) string) {
		if _, err := db.Exec(`CREATE TABLE counts (sex TEXT, n TEXT)`); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			var n any = r.N
			if r.N == "NULL" {
				n = nil
			}
			if _, err := db.Exec("INSERT INTO counts VALUES ("+ph(1)+", "+ph(2)+")", r.Sex, n); err != nil {
				t.Fatal(err)
			}
		}
	}
	dbPath := filepath.Join(dir, "counts.db")
	db, err := sql.Open("sqlite", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	load(db, func(int) string { return "?" })
	db.Close()
	out["sqlite"] = struct {
		spec Spec
		row  string
	}{Spec{Path: dbPath, Table: "counts", CountColumn: "n"}, "rowid 2"}
	dsn := pgtest.Schema(t)
	pg, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	load(pg, func(i int) string { return "$" + strconv.Itoa(i) })
	pg.Close()
	out["postgres"] = struct {
		spec Spec
		row  string
	}{Spec{Path: dsn, Table: "counts", CountColumn: "n"}, "ctid (0,2)"}
	return out
}

// sumBySex reads a counted table and sums the weights per sex.
func sumBySex(t *testing.T, spec Spec) (map[string]int64, error) {
	t.Helper()
	ctx := context.Background()
	tab, err := Open(ctx, spec)
	if err != nil {
		return nil, err
	}
	defer tab.Close()
	if err := tab.Select(ctx, []string{"sex"}); err != nil {
		return nil, err
	}
	sums := map[string]int64{}
	for {
		rec, w, err := tab.NextRecord()
		if err == io.EOF {
			return sums, nil
		}
		if err != nil {
			return nil, err
		}
		if len(rec) != 1 {
			t.Fatalf("%d values, want 1 (the count column is not a value)", len(rec))
		}
		sums[string(rec[0])] += w
	}
}

// TestCountColumn reads tables of counts beyond 2^31 (in all above 2^32),
// with a zero count, in every format.
func TestCountColumn(t *testing.T) {
	rows := []countRow{{"F", "3000000000"}, {"M", "0"}, {"F", "2500000000"}, {"F", "0007"}, {"M", "4294967296"}}
	for name, tab := range countTables(t, rows) {
		t.Run(name, func(t *testing.T) {
			got, err := sumBySex(t, tab.spec)
			if err != nil {
				t.Fatal(err)
			}
			if got["F"] != 5_500_000_007 || got["M"] != 4_294_967_296 || len(got) != 2 {
				t.Errorf("sums %v, want F 5500000007, M 4294967296", got)
			}
		})
	}
	// Parquet integer counts.
	p := writeParquet(t, []countRowInt{{"F", 3_000_000_000}, {"M", 0}, {"F", 1 << 40}}, 2)
	got, err := sumBySex(t, Spec{Path: p, CountColumn: "n"})
	if err != nil || got["F"] != 3_000_000_000+1<<40 || got["M"] != 0 {
		t.Errorf("parquet int64 counts: %v, %v", got, err)
	}
	p = writeParquet(t, []countRowInt{{"F", 3}, {"M", -1}}, 2)
	if _, err := sumBySex(t, Spec{Path: p, CountColumn: "n"}); err == nil || !strings.Contains(err.Error(), `row group 1, row 2 (row 2 of the file), column "n": the count "-1" is not a non-negative integer`) {
		t.Errorf("parquet negative count: %v", err)
	}
}

// TestCountColumnErrors: a count that is not a non-negative integer below
// 2^63 is an error naming the table, the row and the column, in every
// format; so is a count column that is missing or also a dimension.
func TestCountColumnErrors(t *testing.T) {
	for _, bad := range []string{"-1", "1.5", "", "abc", " 5", "1e3", "+4", "9223372036854775808", "99999999999999999999"} {
		rows := []countRow{{"F", "2"}, {"M", bad}, {"F", "1"}}
		for name, tab := range countTables(t, rows) {
			t.Run(name+"/"+bad, func(t *testing.T) {
				_, err := sumBySex(t, tab.spec)
				if err == nil {
					t.Fatalf("count %q accepted", bad)
				}
				for _, want := range []string{tab.row, `column "n"`, "not a non-negative integer"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
			})
		}
	}
	// NULL, in the databases.
	for name, tab := range countTables(t, []countRow{{"F", "2"}, {"M", "NULL"}}) {
		if tab.spec.Table == "" {
			continue
		}
		if _, err := sumBySex(t, tab.spec); err == nil || !strings.Contains(err.Error(), "count NULL") || !strings.Contains(err.Error(), tab.row) {
			t.Errorf("%s: NULL count: %v", name, err)
		}
	}
	// The largest count is accepted.
	for name, tab := range countTables(t, []countRow{{"F", "9223372036854775807"}}) {
		if got, err := sumBySex(t, tab.spec); err != nil || got["F"] != 1<<63-1 {
			t.Errorf("%s: 2^63-1: %v, %v", name, got, err)
		}
	}
	for name, tab := range countTables(t, []countRow{{"F", "2"}}) {
		ctx := context.Background()
		for _, tc := range []struct {
			count, sel, want string
		}{
			{"n", "n", `column "n" is the count column`},
			{"persons", "sex", `no column "persons"`},
		} {
			spec := tab.spec
			spec.CountColumn = tc.count
			tb, err := Open(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			if err := tb.Select(ctx, []string{tc.sel}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: count column %q, selecting %q: %v, want %q", name, tc.count, tc.sel, err, tc.want)
			}
			tb.Close()
		}
	}
}

// TestSQLNullCountsRows: a NULL in rows of different groups is reported
// with the number of rows, not the size of the first group.
func TestSQLNullCountsRows(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "holes.db")
	dsns := map[string]Spec{"sqlite": {Path: path, Table: "holes"}}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	pgDSN := pgtest.Schema(t)
	pg, err := sql.Open("pgx", pgDSN)
	if err != nil {
		t.Fatal(err)
	}
	dsns["postgres"] = Spec{Path: pgDSN, Table: "holes"}
	for _, d := range []*sql.DB{db, pg} {
		if _, err := d.Exec(`CREATE TABLE holes (sex TEXT, age INTEGER)`); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Exec(`INSERT INTO holes VALUES ('F', 30), (NULL, 41), (NULL, 42), ('M', 43)`); err != nil {
			t.Fatal(err)
		}
		d.Close()
	}
	for name, spec := range dsns {
		tab, err := Open(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		if err := tab.Select(ctx, []string{"sex", "age"}); err != nil {
			t.Fatal(err)
		}
		var last error
		for last == nil {
			_, _, last = tab.NextRecord()
		}
		if !strings.Contains(last.Error(), `column "sex" is NULL in 2 rows`) {
			t.Errorf("%s: %v, want NULL in 2 rows", name, last)
		}
		tab.Close()
	}
}
