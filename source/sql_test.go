package source

import (
	"context"
	"database/sql"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/internal/pgtest"
)

// facts are the rows every SQL test loads: (sex, age) with repeats.
var facts = [][2]any{{"F", 30}, {"M", 41}, {"F", 30}, {"F", 41}, {"M", 41}, {"M", 41}}

// wantGroups are facts grouped by (age, sex), as "age,sex:count".
var wantGroups = []string{"30,F:2", "41,F:1", "41,M:3"}

// loadFacts creates the table in db and inserts facts, with a third column
// (with a dot in its name) that the queries must not group by.
func loadFacts(t *testing.T, db *sql.DB, table string, ph func(int) string) {
	t.Helper()
	q, err := QuoteIdent(table)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE " + q + ` (sex TEXT, age INTEGER, "id.no" INTEGER)`); err != nil {
		t.Fatal(err)
	}
	for i, f := range facts {
		if _, err := db.Exec("INSERT INTO "+q+" VALUES ("+ph(1)+", "+ph(2)+", "+ph(3)+")", f[0], f[1], i); err != nil {
			t.Fatal(err)
		}
	}
}

// groups reads every record of a selected table as "values:weight", sorted.
func groups(t *testing.T, tab Table) []string {
	t.Helper()
	var out []string
	for {
		rec, w, err := tab.NextRecord()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var vals []string
		for _, v := range rec {
			vals = append(vals, string(v))
		}
		out = append(out, strings.Join(vals, ",")+":"+strconv.FormatInt(w, 10))
	}
	slices.Sort(out)
	return out
}

// sqliteFacts writes an SQLite database with the facts in table "people"
// and returns its path.
func sqliteFacts(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "facts.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	loadFacts(t, db, "people", func(int) string { return "?" })
	if _, err := db.Exec(`CREATE TABLE holes (sex TEXT, age INTEGER); INSERT INTO holes VALUES ('F', 30), (NULL, 41), (NULL, 41)`); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkSQL runs the tests shared by SQLite and PostgreSQL on an opened
// table of facts.
func checkSQL(t *testing.T, tab Table) {
	t.Helper()
	ctx := context.Background()
	err := tab.Select(ctx, []string{"age", "tenure"})
	if err == nil || !strings.Contains(err.Error(), `no column "tenure" (the table has sex, age, id.no)`) || !strings.Contains(err.Error(), `table "people"`) {
		t.Errorf("missing column: %v", err)
	}
	if err := tab.Select(ctx, []string{"age", "sex"}); err != nil {
		t.Fatal(err)
	}
	// One record per group: the GROUP BY ran in the database.
	if got := groups(t, tab); !slices.Equal(got, wantGroups) {
		t.Errorf("groups %q, want %q", got, wantGroups)
	}
	e := tab.FieldError(1, "bad value").Error()
	if !strings.Contains(e, `table "people"`) || !strings.Contains(e, `column "sex"`) || !strings.Contains(e, "bad value") {
		t.Errorf("FieldError = %q", e)
	}
}

func TestSQLite(t *testing.T) {
	ctx := context.Background()
	path := sqliteFacts(t)
	tab, err := Open(ctx, Spec{Path: path, Table: "people"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tab.(*SQL); !ok {
		t.Fatalf("Open gave a %T for an SQLite file", tab)
	}
	checkSQL(t, tab)
	tab.Close()

	// A column whose name has a dot is one column, not table.column.
	s, err := OpenSQL(ctx, "sqlite", path, "people")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Select(ctx, []string{"id.no"}); err != nil {
		t.Fatal(err)
	}
	if got := groups(t, s); len(got) != len(facts) {
		t.Errorf("id.no groups %q", got)
	}
	s.Close()

	// A file name with the characters of an SQLite URI.
	weird := filepath.Join(t.TempDir(), "we?ird#100%.db")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(weird, b, 0o644)
	w, err := Open(ctx, Spec{Path: weird, Table: "people"})
	if err != nil {
		t.Fatal(err)
	}
	checkSQL(t, w)
	w.Close()

	s, err = OpenSQL(ctx, "sqlite", path, "holes")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Select(ctx, []string{"sex", "age"}); err != nil {
		t.Fatal(err)
	}
	var last error
	for last == nil {
		_, _, last = s.NextRecord()
	}
	if want := `table "holes" of ` + path + `: column "sex" is NULL in 2 rows`; !strings.Contains(last.Error(), want) {
		t.Errorf("NULL: %v, want %q", last, want)
	}
}

func TestSQLErrors(t *testing.T) {
	ctx := context.Background()
	path := sqliteFacts(t)
	if _, err := Open(ctx, Spec{Path: path}); err == nil || !strings.Contains(err.Error(), "give the table") || !strings.Contains(err.Error(), "holes, people") {
		t.Errorf("no table: %v", err)
	}
	if _, err := Open(ctx, Spec{Path: path, Table: "nobody"}); err == nil || !strings.Contains(err.Error(), `table "nobody"`) {
		t.Errorf("missing table: %v", err)
	}
	if _, err := OpenSQL(ctx, "oracle", path, "people"); err == nil || !strings.Contains(err.Error(), "oracle") {
		t.Errorf("bad driver: %v", err)
	}
	if _, err := Open(ctx, Spec{Path: "postgres://u:secret@127.0.0.1:1/db", Table: "t"}); err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("unreachable postgres: %v (must name the host, not the password)", err)
	}
	for _, bad := range []string{"a..b", "", "x\x00"} {
		if _, err := QuoteIdent(bad); err == nil {
			t.Errorf("QuoteIdent(%q) accepted", bad)
		}
	}
	if q, _ := QuoteIdent(`census.p"x`); q != `"census"."p""x"` {
		t.Errorf("QuoteIdent = %s", q)
	}
}

// TestPostgres runs the SQL tests on the database named by
// $KNOWDP_TEST_POSTGRES (scripts/test.sh starts one). Without it the test
// is skipped, unless $KNOWDP_TEST_REQUIRE_ALL=1 says every test must run.
func TestPostgres(t *testing.T) {
	if os.Getenv(pgtest.Env) == "" && os.Getenv("KNOWDP_TEST_REQUIRE_ALL") != "1" {
		t.Skipf("$%s is not set", pgtest.Env)
	}
	dsn := pgtest.Schema(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	loadFacts(t, db, "people", func(i int) string { return "$" + strconv.Itoa(i) })
	tab, err := Open(context.Background(), Spec{Path: dsn, Table: "people"})
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	checkSQL(t, tab)

	// A schema-qualified name.
	var schema string
	if err := db.QueryRow("SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	q, err := Open(context.Background(), Spec{Path: dsn, Table: schema + ".people"})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := q.Select(context.Background(), []string{"age", "sex"}); err != nil {
		t.Fatal(err)
	}
	if got := groups(t, q); !slices.Equal(got, wantGroups) {
		t.Errorf("%s.people: groups %q, want %q", schema, got, wantGroups)
	}
}
