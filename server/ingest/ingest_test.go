package ingest

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/pgtest"
)

func testSchema(t *testing.T) *domain.Schema {
	t.Helper()
	s, err := domain.ParseSchema([]byte(`{"dimensions":[{"name":"sex","values":["F","M"]},{"name":"year","values":["1997","1998","1999"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestPath: a curator's file must lie inside a source directory, however
// it is named: relative names are taken inside the directories, symbolic
// links are followed before the check.
func TestPath(t *testing.T) {
	base := t.TempDir()
	in, out := filepath.Join(base, "in"), filepath.Join(base, "out")
	for _, d := range []string{in, out, filepath.Join(in, "sub")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(in, "a.csv"), "x\n")
	write(t, filepath.Join(in, "sub", "b.csv"), "x\n")
	write(t, filepath.Join(out, "secret.csv"), "x\n")
	for _, link := range [][2]string{{filepath.Join(out, "secret.csv"), filepath.Join(in, "link.csv")}, {in, filepath.Join(base, "alias")}} {
		if err := os.Symlink(link[0], link[1]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Dirs([]string{filepath.Join(in, "a.csv")}); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("a file as a source directory: %v", err)
	}
	if _, err := Dirs([]string{filepath.Join(base, "none")}); err == nil {
		t.Fatal("a missing source directory accepted")
	}
	dirs, err := Dirs([]string{filepath.Join(base, "alias")}) // resolved to in
	if err != nil || len(dirs) != 1 || filepath.Base(dirs[0]) != "in" {
		t.Fatalf("Dirs: %v, %v", dirs, err)
	}
	for _, tc := range []struct {
		name, want, err string
	}{
		{"a.csv", filepath.Join(dirs[0], "a.csv"), ""},
		{"sub/b.csv", filepath.Join(dirs[0], "sub", "b.csv"), ""},
		{filepath.Join(in, "a.csv"), filepath.Join(dirs[0], "a.csv"), ""},
		{filepath.Join(base, "alias", "a.csv"), filepath.Join(dirs[0], "a.csv"), ""},
		{"link.csv", "", "outside the source directories"},
		{"../out/secret.csv", "", "outside the source directories"},
		{filepath.Join(out, "secret.csv"), "", "outside the source directories"},
		{".", "", "outside the source directories"},
		{"none.csv", "", "source.csv: none.csv: no such file"},
	} {
		got, err := Path(dirs, tc.name, "source.csv")
		if tc.err == "" && (err != nil || got != tc.want) || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %q, %v; want %q or an error saying %q", tc.name, got, err, tc.want, tc.err)
		}
	}
	if _, err := Path(nil, "a.csv", "source.csv"); err == nil || !strings.Contains(err.Error(), "file sources are disabled") {
		t.Fatalf("no source directory: %v", err)
	}
}

// TestCountCSV: rows are counted into their cells (or their count column
// added); errors name the file, the row and the column, never a value.
func TestCountCSV(t *testing.T) {
	s := testSchema(t)
	dir := t.TempDir()
	ctx := context.Background()
	for _, tc := range []struct {
		name, text, countColumn string
		want                    []float64 // row-major: sex, then year
		err                     string
	}{
		{"rows", "year,sex,other\n1997,F,x\n1997,F,y\n1999,M,z\n", "", []float64{2, 0, 0, 0, 0, 1}, ""},
		{"count column", "sex,year,n\nF,1998,5\nM,1998,0\nF,1998,2\n", "n", []float64{0, 7, 0, 0, 0, 0}, ""},
		{"no such column", "sex,age\nF,1\n", "", nil, `the header row has no column "year"`},
		{"no count column", "sex,year\nF,1997\n", "n", nil, `source.count_column: `},
		{"value outside the domain", "sex,year\nF,1997\nTOPSECRET,1997\n", "", nil, "row 3 is malformed or has a value outside"},
		{"bad count", "sex,year,n\nF,1997,-TOPSECRET\n", "n", nil, `or its "n" is not a non-negative integer`},
	} {
		path := filepath.Join(dir, tc.name+".csv")
		write(t, path, tc.text)
		c, err := CountCSV(ctx, path, tc.countColumn, s, 1<<20)
		switch {
		case tc.err == "" && (err != nil || !slices.Equal(c.Counts, tc.want)):
			t.Errorf("%s: %v, %v; want %v", tc.name, c, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), "TOPSECRET")):
			t.Errorf("%s: %v; want an error naming %s and saying %q, without the value", tc.name, err, path, tc.err)
		}
	}
	if _, err := CountCSV(ctx, filepath.Join(dir, "none.csv"), "", s, 1<<20); err == nil || !strings.Contains(err.Error(), "not a readable CSV file") {
		t.Fatalf("a missing file: %v", err)
	}
}

// TestCountSQL counts an SQLite table with GROUP BY in its own database.
func TestCountSQL(t *testing.T) {
	s := testSchema(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "facts.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE "we""ird" (sex TEXT, year INTEGER, n INTEGER)`,
		`INSERT INTO "we""ird" VALUES ('F', 1997, 2), ('F', 1997, 3), ('M', 1999, 1)`,
		`CREATE TABLE outside (sex TEXT, year INTEGER)`,
		`INSERT INTO outside VALUES ('F', 1997), ('TOPSECRET', 1998)`,
		`CREATE TABLE nulls (sex TEXT, year INTEGER)`,
		`INSERT INTO nulls VALUES ('F', NULL)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	ctx := context.Background()
	table := func(name string) Table { return Table{Driver: "sqlite", DSN: "facts.db", Name: name} }
	c, err := CountSQL(ctx, table(`we"ird`), "", s, 1<<20, 1<<32, []string{dir})
	if err != nil || !slices.Equal(c.Counts, []float64{2, 0, 0, 0, 0, 1}) {
		t.Fatalf("rows: %v, %v", c, err)
	}
	c, err = CountSQL(ctx, table(`we"ird`), "n", s, 1<<20, 1<<32, []string{dir})
	if err != nil || !slices.Equal(c.Counts, []float64{5, 0, 0, 0, 0, 1}) {
		t.Fatalf("count column: %v, %v", c, err)
	}
	for _, tc := range []struct {
		name    string
		t       Table
		maxRows float64
		dirs    []string
		want    string
	}{
		{"outside the domain", table("outside"), 1 << 32, []string{dir}, `column "sex" has a value outside its declared domain (1 rows)`},
		{"null", table("nulls"), 1 << 32, []string{dir}, `column "year" is NULL in 1 rows`},
		{"too many rows", table(`we"ird`), 2, []string{dir}, "more than 1 rows"},
		{"no such table", table("none"), 1 << 32, []string{dir}, "sql none: "},
		{"bad name", table("a..b"), 1 << 32, []string{dir}, "sql.table: bad identifier"},
		{"driver", Table{Driver: "mysql", DSN: "x", Name: "t"}, 1 << 32, []string{dir}, `sql.driver: "mysql"`},
		{"file outside the directories", table("outside"), 1 << 32, []string{t.TempDir()}, "source.sql.dsn: facts.db: no such file"},
	} {
		_, err := CountSQL(ctx, tc.t, "", s, 1<<20, tc.maxRows, tc.dirs)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "TOPSECRET") {
			t.Errorf("%s: %v; want an error saying %q, without the value", tc.name, err, tc.want)
		}
	}
}

// TestPostgres: a PostgreSQL table is counted in its database; one that
// cannot be reached is one message whatever the cause, with the cause kept
// for the log.
func TestPostgres(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := testSchema(t)
	_, err = CountSQL(context.Background(), Table{Driver: "postgres", DSN: "postgres://u:pw@" + addr + "/x?sslmode=disable&connect_timeout=2", Name: "t"}, "", s, 1<<20, 1<<32, nil)
	var e *Error
	if !errors.As(err, &e) || e.Msg != pgConnectError || e.Detail == nil || strings.Contains(e.Error(), addr) {
		t.Fatalf("an unreachable database: %v", err)
	}

	dsn := pgtest.Schema(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{`CREATE TABLE facts (sex TEXT, year INTEGER, n BIGINT)`, `INSERT INTO facts VALUES ('M', 1998, 4), ('M', 1998, 1), ('F', 1999, 2)`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	for col, want := range map[string][]float64{"": {0, 0, 1, 0, 2, 0}, "n": {0, 0, 2, 0, 5, 0}} {
		c, err := CountSQL(context.Background(), Table{Driver: "postgres", DSN: dsn, Name: "facts"}, col, s, 1<<20, 1<<32, nil)
		if err != nil || !slices.Equal(c.Counts, want) {
			t.Errorf("count column %q: %v, %v; want %v", col, c, err, want)
		}
	}
}

// TestRedactDSN: a password never survives, in a URL or a key=value DSN.
func TestRedactDSN(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://u:hunter2@db/x?sslmode=require": "postgres://u:REDACTED@db/x?sslmode=require",
		"postgres://u@db/x":                         "postgres://u@db/x",
		"host=db user=u password=hunter2":           "(redacted)",
		"data/facts.db":                             "data/facts.db",
	} {
		if got := RedactDSN(dsn); got != want {
			t.Errorf("%s: %s, want %s", dsn, got, want)
		}
	}
}

// TestQuoteIdent quotes each part of a schema-qualified name.
func TestQuoteIdent(t *testing.T) {
	for name, want := range map[string]string{`t`: `"t"`, `s.t`: `"s"."t"`, `a"b`: `"a""b"`, ``: "", `a.`: "", "a\x00": ""} {
		got, err := quoteIdent(name)
		if got != want || (err != nil) != (want == "") {
			t.Errorf("%q: %q, %v; want %q", name, got, err, want)
		}
	}
}
