package source_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"path/filepath"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/pgtest"
	"github.com/knowdp/knowdp/source"
)

// recordCounter is an SQL table that counts the records (groups) it
// returns; embedding keeps its CheckDomains.
type recordCounter struct {
	*source.SQL
	n int
}

func (r *recordCounter) NextRecord() ([][]byte, int64, error) {
	rec, w, err := r.SQL.NextRecord()
	if err == nil {
		r.n++
	}
	return rec, w, err
}

// TestSQLGroupsByTheNeededDimensions (issue 24): cube.Aggregate over a
// database table groups by the dimensions of the requested cuboids only
// (at most their cells come back, not one group per distinct row), checks
// the other dimensions in the database, and counts what a CSV read counts.
func TestSQLGroupsByTheNeededDimensions(t *testing.T) {
	ctx := context.Background()
	const dims, size, rows = 6, 10, 3000
	var ds []domain.Dimension
	for d := range dims {
		var vals []string
		for v := range size {
			vals = append(vals, strconv.Itoa(v))
		}
		ds = append(ds, domain.Dimension{Name: fmt.Sprintf("d%d", d), Values: vals})
	}
	s, err := domain.NewSchema(ds)
	if err != nil {
		t.Fatal(err)
	}
	// Row i has digit k of i*7919 in dimension k: nearly every row distinct.
	value := func(i, d int) int { return (i * 7919 / pow10(d)) % size }
	dbs := map[string]string{"sqlite": filepath.Join(t.TempDir(), "f.db"), "postgres": pgtest.Schema(t)}
	for name, dsn := range dbs {
		driver := map[string]string{"sqlite": "sqlite", "postgres": "pgx"}[name]
		db, err := sql.Open(driver, dsn)
		if err != nil {
			t.Fatal(err)
		}
		var cols, vals []string
		for d := range dims {
			cols = append(cols, fmt.Sprintf("d%d INTEGER", d))
		}
		for _, table := range []string{"facts", "outside", "holes"} {
			if _, err := db.Exec("CREATE TABLE " + table + " (" + strings.Join(cols, ", ") + ")"); err != nil {
				t.Fatal(err)
			}
		}
		vals = vals[:0]
		for i := range rows {
			var r []string
			for d := range dims {
				r = append(r, strconv.Itoa(value(i, d)))
			}
			vals = append(vals, "("+strings.Join(r, ",")+")")
		}
		for _, q := range []string{
			"INSERT INTO facts VALUES " + strings.Join(vals, ","),
			"INSERT INTO outside VALUES " + strings.Join(vals[:5], ",") + ", (1,2,3,4,5,10)",
			"INSERT INTO holes VALUES " + strings.Join(vals[:5], ",") + ", (1,2,3,4,NULL,6), (1,2,3,5,NULL,6)",
		} {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()

		open := func(table string) *recordCounter {
			tab, err := source.OpenSQL(ctx, map[string]string{"sqlite": "sqlite", "postgres": "postgres"}[name], dsn, table)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tab.Close() })
			return &recordCounter{SQL: tab}
		}
		released, exact := domain.Cuboid(1<<0|1<<1), domain.Cuboid(1<<1|1<<2)
		tab := open("facts")
		tables, n, err := cube.Aggregate(ctx, tab, s, []domain.Cuboid{released, exact}, cube.Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n != rows {
			t.Errorf("%s: %d rows counted, want %d", name, n, rows)
		}
		if tab.n > size*size*size {
			t.Errorf("%s: the database returned %d groups for %d rows; grouping by d0,d1,d2 gives at most %d", name, tab.n, rows, size*size*size)
		}
		want := make([]float64, size*size)
		for i := range rows {
			want[value(i, 0)*size+value(i, 1)]++
		}
		if !slices.Equal(tables[released], want) {
			t.Errorf("%s: {d0,d1} counts differ from a direct count", name)
		}
		for _, tc := range []struct{ table, want string }{
			{"outside", `column "d5": value "10" is not in the declared domain of "d5"`},
			{"holes", `column "d4" is NULL in 2 rows`},
		} {
			if _, _, err := cube.Aggregate(ctx, open(tc.table), s, []domain.Cuboid{released}, cube.Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s %s: %v, want %q", name, tc.table, err, tc.want)
			}
		}
	}
}

func pow10(k int) int {
	n := 1
	for range k {
		n *= 10
	}
	return n
}
