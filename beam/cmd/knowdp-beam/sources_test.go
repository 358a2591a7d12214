package main

import (
	"bytes"
	"database/sql"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/knowdp/knowdp/internal/pgtest"
)

// countFact is a row of a table of counts over schemaJSON's dimensions.
type countFact struct {
	Town string `parquet:"town"`
	Sex  string `parquet:"sex"`
	Age  string `parquet:"age"`
	N    int64  `parquet:"n"`
}

// countSources writes rows as a CSV file, a Parquet file, an SQLite table
// and a PostgreSQL table (column n is the count) and returns the --data
// and --table arguments of each.
func countSources(t *testing.T, dir string, rows []countFact) map[string][]string {
	t.Helper()
	var b strings.Builder
	b.WriteString("town,sex,age,n\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "%q,%s,%s,%d\n", r.Town, r.Sex, r.Age, r.N)
	}
	csvPath := filepath.Join(dir, "counts.csv")
	pq := filepath.Join(dir, "counts.parquet")
	if err := os.WriteFile(csvPath, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := parquet.WriteFile(pq, rows); err != nil {
		t.Fatal(err)
	}
	load := func(db *sql.DB, ph func(int) string) {
		t.Helper()
		defer db.Close()
		if _, err := db.Exec(`CREATE TABLE counts (town TEXT, sex TEXT, age TEXT, n BIGINT)`); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if _, err := db.Exec("INSERT INTO counts VALUES ("+ph(1)+", "+ph(2)+", "+ph(3)+", "+ph(4)+")", r.Town, r.Sex, r.Age, r.N); err != nil {
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
	dsn := pgtest.Schema(t)
	pg, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	load(pg, func(i int) string { return "$" + strconv.Itoa(i) })
	return map[string][]string{
		"csv":      {"--data", csvPath},
		"parquet":  {"--data", pq},
		"sqlite":   {"--data", dbPath, "--table", "counts"},
		"postgres": {"--data", dsn, "--table", "counts"},
	}
}

// TestCountColumnAndDatabases (issues 23 and 24): knowdp-beam reads a
// table of counts with --count-column from CSV, Parquet, SQLite and
// PostgreSQL, and SQLite and PostgreSQL tables without it; each seeded
// release equals the one of the same records given one per row. Counts
// beyond 2^31 keep the exact grand total.
func TestCountColumnAndDatabases(t *testing.T) {
	dir, schema, table := writeInputs(t, facts)
	rows := []countFact{{"Ash", "F", "18-64", 1}, {"Ash", "M", "18-64", 1}, {"Elm, North", "F", "0-17", 1},
		{"Oak", "M", "65+", 2}, {"Ash", "F", "65+", 1}, {"Elm, North", "M", "18-64", 1}, {"Oak", "F", "0-17", 0}}
	seeded := []string{"--schema", schema, "--epsilon", "1", "--seed", "4", "--exact", "sex", "--cuboid", "sex,town"}
	ref := filepath.Join(dir, "ref.csv")
	if code, _, stderr := knowdpBeam(t, append([]string{"release", "--data", table, "--out", ref}, seeded...)...); code != 0 {
		t.Fatalf("microdata: exit %d: %s", code, stderr)
	}
	want, _ := os.ReadFile(ref)
	sources := countSources(t, t.TempDir(), rows)
	for name, data := range sources {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "rel.csv")
			args := append(append([]string{"release", "--out", out, "--count-column", "n"}, data...), seeded...)
			if code, _, stderr := knowdpBeam(t, args...); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if got, _ := os.ReadFile(out); !bytes.Equal(got, want) {
				t.Errorf("release\n%s\nwant\n%s", got, want)
			}
		})
	}
	// A workload of three cuboids (the rows counted into each from one
	// GROUP BY in a database) and an integer workload (on one worker):
	// every file equal to the release of the microdata.
	for _, extra := range [][]string{
		{"--cuboid", "age", "--cuboid", "sex,age"},
		{"--cuboid", "age", "--integer"},
	} {
		several := append(slices.Clone(seeded), extra...)
		refDir := filepath.Join(t.TempDir(), "ref")
		if code, _, stderr := knowdpBeam(t, append([]string{"release", "--data", table, "--out", refDir}, several...)...); code != 0 {
			t.Fatalf("%v: microdata: exit %d: %s", extra, code, stderr)
		}
		for name, data := range sources {
			out := filepath.Join(t.TempDir(), "rel")
			args := append(append([]string{"release", "--out", out, "--count-column", "n"}, data...), several...)
			if code, _, stderr := knowdpBeam(t, args...); code != 0 {
				t.Fatalf("%v %s: exit %d: %s", extra, name, code, stderr)
			}
			entries, err := os.ReadDir(refDir)
			if err != nil || len(entries) < 3 {
				t.Fatalf("%v: %d files in the reference (%v)", extra, len(entries), err)
			}
			for _, e := range entries {
				want, _ := os.ReadFile(filepath.Join(refDir, e.Name()))
				if got, err := os.ReadFile(filepath.Join(out, e.Name())); err != nil || !bytes.Equal(got, want) {
					t.Errorf("%v %s: %s differs from the microdata's (%v)", extra, name, e.Name(), err)
				}
			}
		}
	}
	// The databases without a count column: one record per row.
	micro := countSources(t, t.TempDir(), []countFact{{"Ash", "F", "18-64", 9}, {"Ash", "F", "18-64", 5}})
	for _, name := range []string{"sqlite", "postgres"} {
		out := filepath.Join(t.TempDir(), "rel.csv")
		args := append([]string{"release", "--out", out, "--schema", schema, "--epsilon", "1", "--exact", "", "--cuboid", "sex"}, micro[name]...)
		if code, _, stderr := knowdpBeam(t, args...); code != 0 {
			t.Errorf("%s: exit %d: %s", name, code, stderr)
		} else if got, _ := os.ReadFile(out); !bytes.Contains(got, []byte("F,")) || math.Abs(sumCounts(t, got)-2) > 2e-6 { // 6 decimals per cell
			t.Errorf("%s: release\n%s\nwant a total of 2 rows", name, got)
		}
	}
	big := countSources(t, t.TempDir(), []countFact{{"Ash", "F", "18-64", 3_000_000_000}, {"Oak", "M", "65+", 3_000_000_001}})
	for _, name := range []string{"csv", "postgres"} {
		out := filepath.Join(t.TempDir(), "rel.csv")
		args := append([]string{"release", "--out", out, "--schema", schema, "--epsilon", "1", "--exact", "", "--cuboid", "sex", "--count-column", "n"}, big[name]...)
		if code, _, stderr := knowdpBeam(t, args...); code != 0 {
			t.Errorf("big %s: exit %d: %s", name, code, stderr)
		} else if got, _ := os.ReadFile(out); math.Abs(sumCounts(t, got)-6_000_000_001) > 1e-3 {
			t.Errorf("big %s: released total %v, want 6000000001", name, sumCounts(t, got))
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.csv")
	os.WriteFile(bad, []byte("town,sex,age,n\nAsh,F,18-64,2\nOak,M,65+,1.5\n"), 0o644)
	code, _, stderr := knowdpBeam(t, "release", "--data", bad, "--schema", schema, "--epsilon", "1", "--count-column", "n", "--out", filepath.Join(t.TempDir(), "r.csv"))
	if want := bad + `: row 3, column "n": the count "1.5" is not a non-negative integer`; code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("bad count: exit %d, stderr %q, want %q", code, stderr, want)
	}
}

// sumCounts adds the count column of a release CSV.
func sumCounts(t *testing.T, b []byte) float64 {
	t.Helper()
	var total float64
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		v, err := strconv.ParseFloat(f[len(f)-2], 64)
		if err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		total += v
	}
	return total
}

// TestOutputsNeverReplaceInputs (issue 24): --out or its sidecar on an
// input, by name, symbolic link or hard link, is refused with exit 2 before
// the pipeline starts; the inputs are unchanged and no temporary is left.
func TestOutputsNeverReplaceInputs(t *testing.T) {
	dir, schema, table := writeInputs(t, facts)
	if err := os.Symlink(table, filepath.Join(dir, "link.csv")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(table, filepath.Join(dir, "hard.csv")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, filepath.Join(dir, "via")); err != nil {
		t.Fatal(err)
	}
	before := map[string][]byte{}
	for _, p := range []string{schema, table} {
		before[p], _ = os.ReadFile(p)
	}
	several := []string{"--cuboid", "sex", "--cuboid", "age"}
	for _, tc := range []struct {
		out, want string
		args      []string
	}{
		{table, "is the same file as --data", nil},
		{filepath.Join(dir, "schema.csv"), "sidecar " + filepath.Join(dir, "schema.json") + " is the same file as --schema", nil},
		// A name not ending in .csv is a new directory (part-NNNNN.csv
		// and release.json), here an input's name.
		{schema, "--out " + schema + " is the same file as --schema", nil},
		{filepath.Join(dir, "link.csv"), "is the same file as --data", nil},
		{filepath.Join(dir, "hard.csv"), "is the same file as --data", nil},
		{filepath.Join(dir, "via", "facts.csv"), "is the same file as --data", nil},
		// Several cuboids are always a directory, whatever its name.
		{table, "--out " + table + " is the same file as --data", several},
		{filepath.Join(dir, "link.csv"), "is the same file as --data", several},
		{schema, "--out " + schema + " is the same file as --schema", several},
	} {
		args := append([]string{"release", "--data", table, "--schema", schema, "--epsilon", "1", "--out", tc.out}, tc.args...)
		code, _, stderr := knowdpBeam(t, args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("--out %s %q: exit %d, stderr %q, want exit 2 and %q", tc.out, tc.args, code, stderr, tc.want)
		}
	}
	// --measurements on an input.
	code, _, stderr := knowdpBeam(t, "release", "--data", table, "--schema", schema, "--epsilon", "1", "--cuboid", "sex", "--cuboid", "age",
		"--measurements", schema, "--out", filepath.Join(dir, "rel"))
	if want := "--measurements " + schema + " is the same file as --schema"; code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("--measurements on the schema: exit %d, stderr %q, want exit 2 and %q", code, stderr, want)
	}
	for p, b := range before {
		if now, _ := os.ReadFile(p); !bytes.Equal(now, b) {
			t.Errorf("%s was changed", p)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".*")); len(m) != 0 {
		t.Errorf("temporaries left behind: %v", m)
	}
}

// TestHopelessSizesAndInterrupts (issue 24): a release too large for this
// process is refused before the pipeline starts, and an interrupted
// release exits promptly; neither leaves a temporary behind.
func TestHopelessSizesAndInterrupts(t *testing.T) {
	dir := t.TempDir()
	var dims []string
	for d := range 8 {
		var vals []string
		for v := range 100 {
			vals = append(vals, fmt.Sprintf("%q", strconv.Itoa(v)))
		}
		dims = append(dims, fmt.Sprintf(`{"name":"d%d","values":[%s]}`, d, strings.Join(vals, ",")))
	}
	schema := filepath.Join(dir, "s.json")
	os.WriteFile(schema, []byte(`{"dimensions":[`+strings.Join(dims, ",")+`]}`), 0o644)
	data := filepath.Join(dir, "d.csv")
	os.WriteFile(data, []byte("d0,d1,d2,d3,d4,d5,d6,d7\n1,2,3,4,5,6,7,8\n"), 0o644)
	start := time.Now()
	code, _, stderr := knowdpBeam(t, "release", "--data", data, "--schema", schema, "--epsilon", "1", "--out", filepath.Join(dir, "r.csv"))
	if code != 1 || !strings.Contains(stderr, "10000000000000000 cells) in process would run out of memory") || time.Since(start) > 20*time.Second {
		t.Errorf("10^16 cells: exit %d after %v, stderr %q", code, time.Since(start), stderr)
	}
	// 10^7 cells take several seconds: interrupted after 2.
	cmd := exec.Command(os.Args[0], "release", "--data", data, "--schema", schema, "--epsilon", "1", "--cuboid", "d0,d1,d2,d3", "--out", filepath.Join(dir, "r.csv"))
	cmd.Env = append(os.Environ(), "KNOWDP_BEAM_RUN_MAIN=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if m, _ := filepath.Glob(filepath.Join(dir, ".r.csv.blocks*")); len(m) == 0 {
		t.Log("the release had not created its blocks directory yet")
	}
	cmd.Process.Signal(os.Interrupt)
	stopped := make(chan error, 1)
	go func() { stopped <- cmd.Wait() }()
	select {
	case err := <-stopped:
		if err == nil {
			t.Error("an interrupted release exited 0")
		}
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the release did not stop within 15 s of an interrupt")
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".*")); len(m) != 0 {
		t.Errorf("temporaries left behind: %v", m)
	}
	if _, err := os.Stat(filepath.Join(dir, "r.csv")); err == nil {
		t.Error("an interrupted release wrote its output")
	}
}
