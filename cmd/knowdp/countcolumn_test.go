package main

import (
	"bytes"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/knowdp/knowdp/internal/pgtest"
	"github.com/knowdp/knowdp/prior"
)

// countFact is a row of a table of counts: persons per sex and age.
type countFact struct {
	Sex string `parquet:"sex"`
	Age int32  `parquet:"age"`
	N   int64  `parquet:"n"`
}

const countSchema = `{"dimensions":[{"name":"sex","values":["F","M"]},{"name":"age","values":["0","1","2"]}]}`

// countTables writes rows as a CSV file, a Parquet file, an SQLite table
// and a PostgreSQL table, and returns the --data (and --table) arguments of
// each.
func countTables(t *testing.T, rows []countFact) map[string][]string {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("sex,age,n\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "%s,%d,%d\n", r.Sex, r.Age, r.N)
	}
	csvPath := writeTemp(t, dir, "counts.csv", b.String())
	pq := filepath.Join(dir, "counts.parquet")
	if err := parquet.WriteFile(pq, rows); err != nil {
		t.Fatal(err)
	}
	load := func(db *sql.DB, ph func(int) string) {
		t.Helper()
		if _, err := db.Exec(`CREATE TABLE counts (sex TEXT, age INTEGER, n BIGINT)`); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if _, err := db.Exec("INSERT INTO counts VALUES ("+ph(1)+", "+ph(2)+", "+ph(3)+")", r.Sex, r.Age, r.N); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()
	}
	dbPath := filepath.Join(dir, "counts.db")
	db, err := sql.Open("sqlite", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	load(db, func(int) string { return "?" })
	dsn := pgtest.Schema(t)
	pg, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	load(pg, func(i int) string { return "$" + strconv.Itoa(i) })
	return map[string][]string{
		"csv":        {"--data", csvPath},
		"parquet":    {"--data", pq},
		"sqlite":     {"--data", dbPath, "--table", "counts"},
		"postgres":   {"--data", dsn, "--table", "counts"},
		"postgresql": {"--data", "postgresql://" + strings.TrimPrefix(dsn, "postgres://"), "--table", "counts"},
	}
}

// TestReleaseCountColumn releases a table of counts with --count-column
// from every source: the seeded release equals the one of the same records
// given one per row, and counts beyond 2^31 (6*10^9 in all) keep the exact
// grand total.
func TestReleaseCountColumn(t *testing.T) {
	dir := t.TempDir()
	schema := writeTemp(t, dir, "s.json", countSchema)
	small := []countFact{{"F", 0, 2}, {"F", 2, 0}, {"M", 1, 3}, {"F", 0, 1}, {"M", 2, 1}}
	var micro strings.Builder
	micro.WriteString("sex,age\n")
	for _, r := range small {
		for range r.N {
			fmt.Fprintf(&micro, "%s,%d\n", r.Sex, r.Age)
		}
	}
	release := func(out string, data ...string) (int, string) {
		args := append([]string{"release", "--schema", schema, "--epsilon", "1", "--exact", "", "--seed", "5", "--out", out}, data...)
		code, _, stderr := runCLI(t, args...)
		return code, stderr
	}
	wantOut := filepath.Join(dir, "micro.csv")
	if code, stderr := release(wantOut, "--data", writeTemp(t, dir, "micro.csv.in", micro.String())); code != 0 {
		t.Fatalf("microdata: exit %d: %s", code, stderr)
	}
	want, _ := os.ReadFile(wantOut)
	for name, data := range countTables(t, small) {
		out := filepath.Join(dir, name+".csv")
		if code, stderr := release(out, append(data, "--count-column", "n")...); code != 0 {
			t.Errorf("%s: exit %d: %s", name, code, stderr)
			continue
		}
		if got, _ := os.ReadFile(out); !bytes.Equal(got, want) {
			t.Errorf("%s: release\n%s\nwant (the same records one per row)\n%s", name, got, want)
		}
	}

	big := []countFact{{"F", 0, 3_000_000_000}, {"M", 1, 2_999_999_999}, {"M", 2, 0}, {"F", 0, 1}}
	for name, data := range countTables(t, big) {
		out := filepath.Join(dir, "big-"+name+".csv")
		if code, stderr := release(out, append(data, "--count-column", "n")...); code != 0 {
			t.Errorf("%s: exit %d: %s", name, code, stderr)
			continue
		}
		var total float64
		for _, r := range readCSVFile(t, out)[1:] {
			v, _ := strconv.ParseFloat(r[2], 64)
			total += v
		}
		if total != 6_000_000_000 {
			t.Errorf("%s: released total %v, want 6000000000 (the exact grand total)", name, total)
		}
	}
}

// TestCountColumnErrors: a bad count is an error naming the file, the row
// and the column, for release and query prior.
func TestCountColumnErrors(t *testing.T) {
	dir := t.TempDir()
	schema := writeTemp(t, dir, "s.json", countSchema)
	data := writeTemp(t, dir, "counts.csv", "sex,age,n\nF,0,2\nM,1,-3\n")
	code, _, stderr := runCLI(t, "release", "--data", data, "--schema", schema, "--epsilon", "1", "--count-column", "n", "--out", filepath.Join(dir, "r.csv"))
	if want := data + `: row 3, column "n": the count "-3" is not a non-negative integer`; code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("release: exit %d, stderr %q, want %q", code, stderr, want)
	}
	code, _, stderr = runCLI(t, "release", "--data", data, "--schema", schema, "--epsilon", "1", "--count-column", "persons", "--out", filepath.Join(dir, "r.csv"))
	if code != 1 || !strings.Contains(stderr, `no column "persons"`) {
		t.Errorf("release, missing count column: exit %d, stderr %q", code, stderr)
	}
	prior := writeTemp(t, dir, "p.json", `{"values": [0, 1, 2, 3, 4, 5], "probabilities": [0.2, 0.2, 0.2, 0.2, 0.1, 0.1]}`)
	_, stderr, code = runQueryCLI(t, "query", "prior", "--data", data, "--schema", schema, "--query", "count where sex=F",
		"--prior", prior, "--epsilon", "1", "--count-column", "n")
	if want := data + `: row 3, column "n": the count "-3" is not a non-negative integer`; code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("query prior: exit %d, stderr %q, want %q", code, stderr, want)
	}
}

// TestQueryPriorCountColumn: the true answer of a query weighs each row by
// its count (beyond 2^31), and a zero count is no record.
func TestQueryPriorCountColumn(t *testing.T) {
	dir := t.TempDir()
	data := writeTemp(t, dir, "counts.csv", "id,sex,score,n\n1,F,2,3000000000\n2,M,4,1000000000\n3,F,8,0\n4,M,1,1\n")
	for _, tc := range []struct {
		query string
		want  float64
	}{
		{"count where sex=F", 3e9},
		{"count", 4e9 + 1},
		{"sum(score)", 6e9 + 4e9 + 1},
		{"mean(score) where sex=M", (4e9 + 1) / (1e9 + 1)},
		{"fraction where sex=M", (1e9 + 1) / (4e9 + 1)},
	} {
		q, err := parsePriorQuery(tc.query)
		if err != nil {
			t.Fatal(err)
		}
		comps := []prior.Component{{Level: prior.Numeric}}
		truth, err := q.evaluate(t.Context(), data, "n", nil, comps)
		if err != nil {
			t.Fatalf("%s: %v", tc.query, err)
		}
		if len(truth) != 1 || truth[0] != tc.want {
			t.Errorf("%s: truth %v, want %v", tc.query, truth, tc.want)
		}
	}
	q, _ := parsePriorQuery("value(score) where id=3") // a zero count: absent
	if truth, err := q.evaluate(t.Context(), data, "n", nil, []prior.Component{{Level: prior.Numeric}}); err != nil || truth != nil {
		t.Errorf("zero-count individual: %v, %v; want absent", truth, err)
	}
}

// TestFactTableSources (issue 24): release reads a PostgreSQL table given
// as a postgres:// or postgresql:// URL (and SQLite, Parquet); query prior,
// which reads CSV only, refuses the others with exit 2 and says what to use.
func TestFactTableSources(t *testing.T) {
	dir := t.TempDir()
	schema := writeTemp(t, dir, "s.json", countSchema)
	rows := []countFact{{"F", 0, 1}, {"M", 1, 1}, {"M", 1, 1}}
	prior := writeTemp(t, dir, "p.json", `{"values": [0, 1, 2, 3], "probabilities": [0.25, 0.25, 0.25, 0.25]}`)
	for name, data := range countTables(t, rows) {
		out := filepath.Join(dir, name+".csv")
		code, _, stderr := runCLI(t, append([]string{"release", "--schema", schema, "--epsilon", "1", "--exact", "sex", "--out", out}, data...)...)
		if code != 0 {
			t.Errorf("release %s: exit %d: %s", name, code, stderr)
		} else if got := readCSVFile(t, out); len(got) != 1+6 {
			t.Errorf("release %s: %d rows", name, len(got))
		}
		if name == "csv" {
			continue
		}
		var pw string
		if strings.HasPrefix(data[1], "postgres") {
			data[1] = strings.Replace(data[1], "postgres@", "postgres:s3cret@", 1)
			pw = "s3cret"
		}
		_, stderr, code = runQueryCLI(t, "query", "prior", "--data", data[1], "--schema", schema, "--query", "count where sex=F",
			"--prior", prior, "--epsilon", "1")
		if code != 2 || !strings.Contains(stderr, "query prior reads a CSV file") || !strings.Contains(stderr, "export the table to CSV") ||
			(pw != "" && strings.Contains(stderr, pw)) {
			t.Errorf("query prior %s: exit %d, stderr %q", name, code, stderr)
		}
	}
}

// TestReleaseMemoryBlamesTheLargestTable (issue 24): a memory refusal
// names the cuboid that is too large, an exact one included.
func TestReleaseMemoryBlamesTheLargestTable(t *testing.T) {
	dir := t.TempDir()
	var dims []string
	for i := range 4 {
		vals := make([]string, 1000)
		for j := range vals {
			vals[j] = fmt.Sprintf("%q", strconv.Itoa(j))
		}
		dims = append(dims, fmt.Sprintf(`{"name":"d%d","values":[%s]}`, i, strings.Join(vals, ",")))
	}
	schema := writeTemp(t, dir, "big.json", `{"dimensions":[`+strings.Join(dims, ",")+`]}`)
	data := writeTemp(t, dir, "d.csv", "d0,d1,d2,d3\n1,2,3,4\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cuboid", "d0", "--exact", "d0,d1,d2,d3"}, "the largest table counted is the exact cuboid (--exact) {d0,d1,d2,d3}, 1e+12 cells"},
		{[]string{"--cuboid", "d0,d1,d2,d3", "--exact", "d0"}, "the largest table counted is the released cuboid {d0,d1,d2,d3}, 1e+12 cells"},
	} {
		args := append([]string{"release", "--data", data, "--schema", schema, "--epsilon", "1", "--cell-limit", "2000000000000", "--out", filepath.Join(dir, "r.csv")}, tc.args...)
		code, _, stderr := runCLI(t, args...)
		if code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, stderr, tc.want)
		}
	}
}
