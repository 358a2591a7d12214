package server

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/internal/pgtest"
)

// TestDatasetCountColumn (issue 23): a dataset registered from a table of
// counts (CSV, SQLite, PostgreSQL) with source.count_column counts each
// row that many times, beyond 2^31; a bad count is refused without quoting
// it.
func TestDatasetCountColumn(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pgDSN := pgtest.Schema(t)
	schema := []byte(`{"dimensions":[{"name":"sex","values":["F","M"]}]}`)
	// mk writes rows ("sex,n" lines) in format kind under name and returns
	// the source.
	mk := func(kind, name string, rows []string) Source {
		t.Helper()
		if kind == "csv" {
			p := filepath.Join(dir, name+".csv")
			if err := os.WriteFile(p, []byte("sex,n\n"+strings.Join(rows, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			return Source{CSV: p, CountColumn: "n"}
		}
		driver, dsn, dbDriver := "sqlite", filepath.Join(dir, name+".db"), "sqlite"
		if kind == "postgres" {
			driver, dsn, dbDriver = "postgres", pgDSN, "pgx"
		}
		db, err := sql.Open(dbDriver, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`CREATE TABLE ` + name + ` (sex TEXT, n TEXT)`); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			f := strings.Split(r, ",")
			if _, err := db.Exec(`INSERT INTO ` + name + ` VALUES ('` + f[0] + `', '` + f[1] + `')`); err != nil {
				t.Fatal(err)
			}
		}
		return Source{SQL: &SQLSource{Driver: driver, DSN: dsn, Table: name}, CountColumn: "n"}
	}
	for _, kind := range []string{"csv", "sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			req := DatasetRequest{ID: "d", Schema: schema, Policy: Policy{EpsilonPerAnalyst: 1},
				Source: mk(kind, "good", []string{"F,3000000000", "M,0", "F,2", "M,7"})}
			d, err := buildDataset(context.Background(), req, 1<<20, []string{dir})
			if err != nil {
				t.Fatal(err)
			}
			if d.total != 3_000_000_009 || d.cube.Counts[0] != 3_000_000_002 || d.cube.Counts[1] != 7 {
				t.Errorf("total %d, counts %v", d.total, d.cube.Counts)
			}
			if !strings.Contains(string(d.source), `"count_column":"n"`) {
				t.Errorf("source %s does not record the count column", d.source)
			}
			req.Source = mk(kind, "bad", []string{"F,3", "M,-4"})
			_, err = buildDataset(context.Background(), req, 1<<20, []string{dir})
			if err == nil || !strings.Contains(err.Error(), "non-negative integer") || strings.Contains(err.Error(), "-4") {
				t.Errorf("bad count: %v (must say what is wrong, not quote the value)", err)
			}
		})
	}
}
