// Package ingest reads a curator's source into a cube, under the server's
// rules for what a registration may read: files only inside the source
// directories the operator exposed (symbolic links resolved first), SQL
// tables aggregated with GROUP BY in their own database, and errors that
// name the file, row, column or table but never quote the source's
// contents, nor say why a PostgreSQL host could not be reached (the
// server may reach hosts the curator cannot; the details go to the
// server's log, see Error). It is apart from the server because it is the
// only code that reads a curator's data from outside, and it knows nothing
// of queries or budgets.
package ingest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	_ "modernc.org/sqlite"             // registers the "sqlite" database/sql driver

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/source"
)

// Dirs returns the absolute, symlink-free form of each source directory,
// refusing one that is not a directory.
func Dirs(dirs []string) ([]string, error) {
	out := make([]string, 0, len(dirs))
	for _, dir := range dirs {
		abs, err := filepath.Abs(dir)
		if err == nil {
			abs, err = filepath.EvalSymlinks(abs)
		}
		if err != nil {
			return nil, fmt.Errorf("source dir %s: %w", dir, err)
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("source dir %s: not a directory", dir)
		}
		out = append(out, abs)
	}
	return out, nil
}

// Path resolves a curator's file source (symbolic links included) and
// checks that it lies inside one of the source directories dirs (as Dirs
// returns them): the server reads files on its own machine, with its own
// rights, so a curator may name only the files the operator exposed at
// start. A relative name is taken inside the source directories, the first
// that holds it, never from the server's working directory. field names
// the request's field in errors.
func Path(dirs []string, name, field string) (string, error) {
	if len(dirs) == 0 {
		return "", fmt.Errorf("%s: file sources are disabled: the server was started without a source directory (knowdp serve --source-dir DIR, Config.SourceDirs)", field)
	}
	candidates := []string{name}
	if !filepath.IsAbs(name) {
		candidates = candidates[:0]
		for _, dir := range dirs {
			candidates = append(candidates, filepath.Join(dir, name))
		}
	}
	var abs string
	var err error
	for _, c := range candidates {
		if abs, err = filepath.EvalSymlinks(c); err == nil {
			break
		}
	}
	if err != nil {
		return "", fmt.Errorf("%s: %s: %w", field, name, errors.Unwrap(err))
	}
	if abs, err = filepath.Abs(abs); err != nil {
		return "", fmt.Errorf("%s: %s: %w", field, name, err)
	}
	for _, dir := range dirs {
		if rel, err := filepath.Rel(dir, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && rel != "." {
			return abs, nil
		}
	}
	return "", fmt.Errorf("%s: %s is outside the source directories (%s)", field, name, strings.Join(dirs, ", "))
}

// CountCSV counts the CSV file at path (resolved by Path) into a cube of
// schema s, of at most cellLimit base cells. With a count column each row
// stands for that many records. Its errors name the file, row and column
// but never quote the file's contents (not even its header): a server error
// must not become a way to read files.
func CountCSV(ctx context.Context, path, countColumn string, s *domain.Schema, cellLimit int) (*cube.Cube, error) {
	t, err := source.OpenCSV(path)
	if err != nil {
		return nil, fmt.Errorf("source.csv: %s: not a readable CSV file with a header row", path)
	}
	defer t.Close()
	header := map[string]bool{}
	for _, h := range t.Header() {
		header[h] = true
	}
	for i := range s.NumDims() {
		if name := s.Dim(i).Name; !header[name] {
			return nil, fmt.Errorf("source.csv: %s: the header row has no column %q", path, name)
		}
	}
	if countColumn != "" && !header[countColumn] {
		return nil, fmt.Errorf("source.count_column: %s: the header row has no column %q", path, countColumn)
	}
	c, err := cube.Build(ctx, source.WithCountColumn(t, countColumn), s, cube.Options{CellLimit: cellLimit})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if countColumn != "" {
			return nil, fmt.Errorf("source.csv: %s: row %d is malformed, has a value outside its column's declared domain, or its %q is not a non-negative integer below 2^63 (values are not quoted)", path, t.Row(), countColumn)
		}
		return nil, fmt.Errorf("source.csv: %s: row %d is malformed or has a value outside its column's declared domain (values are not quoted)", path, t.Row())
	}
	return c, nil
}

// quoteIdent quotes a possibly schema-qualified SQL identifier.
func quoteIdent(name string) (string, error) {
	if name == "" {
		return "", errors.New("empty identifier")
	}
	parts := strings.Split(name, ".")
	for i, p := range parts {
		if p == "" || strings.ContainsRune(p, 0) {
			return "", fmt.Errorf("bad identifier %q", name)
		}
		parts[i] = `"` + strings.ReplaceAll(p, `"`, `""`) + `"`
	}
	return strings.Join(parts, "."), nil
}

// Table is a table in a database the server can reach.
type Table struct {
	// Driver is "sqlite" (DSN is a file path, resolved by Path) or
	// "postgres" (DSN is a postgres:// URL or key=value string).
	Driver, DSN string
	// Name is the table's name, optionally schema-qualified (a.b).
	Name string
}

// CountSQL aggregates table t in its own database with GROUP BY and fills
// the counts into a dense cube of schema s, of at most cellLimit base cells
// and fewer than maxRows rows in any cell, rejecting values outside the
// declared domains. With a count column the groups sum it instead of
// counting rows. dirs are the source directories an SQLite file must lie
// in. A PostgreSQL database that cannot be reached is one *Error whatever
// the cause.
func CountSQL(ctx context.Context, t Table, countColumn string, s *domain.Schema, cellLimit int, maxRows float64, dirs []string) (*cube.Cube, error) {
	var driver string
	switch t.Driver {
	case "sqlite":
		driver = "sqlite"
	case "postgres":
		driver = "pgx"
	default:
		return nil, fmt.Errorf("sql.driver: %q; use sqlite or postgres", t.Driver)
	}
	table, err := quoteIdent(t.Name)
	if err != nil {
		return nil, fmt.Errorf("sql.table: %w", err)
	}
	n := s.NumDims()
	cols := make([]string, n)
	for i := range n {
		if cols[i], err = quoteIdent(s.Dim(i).Name); err != nil {
			return nil, fmt.Errorf("schema dimension %d: %w", i, err)
		}
	}
	dsn := t.DSN
	if driver == "sqlite" {
		path, err := Path(dirs, dsn, "source.sql.dsn")
		if err != nil {
			return nil, err
		}
		dsn = "file:" + path + "?mode=ro&_pragma=query_only(1)"
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, fmt.Errorf("sql: %w", err)
	}
	defer db.Close()
	if driver == "pgx" {
		if err := db.PingContext(ctx); err != nil {
			// Whether something listens at the address, and what, is
			// none of the curator's business: the server may reach hosts
			// the curator cannot. The details go to the server's log.
			return nil, &Error{Msg: pgConnectError, Detail: err}
		}
	}
	list := strings.Join(cols, ", ")
	// The dimensions are cast to text so that integer and text columns
	// compare with the schema's values alike.
	casts := make([]string, n)
	for i, c := range cols {
		casts[i] = "CAST(" + c + " AS TEXT)"
	}
	agg := "COUNT(*)"
	if countColumn != "" {
		q, err := quoteIdent(countColumn)
		if err != nil || strings.Contains(countColumn, ".") {
			return nil, fmt.Errorf("source.count_column: bad column name %q", countColumn)
		}
		var bad int64
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table+" WHERE "+source.BadCount(t.Driver, countColumn)).Scan(&bad); err != nil {
			return nil, fmt.Errorf("sql %s: count column %q: %w", t.Name, countColumn, err)
		}
		if bad > 0 {
			return nil, fmt.Errorf("sql %s: count column %q is not a non-negative integer below 2^63 in %d rows (values are not quoted)", t.Name, countColumn, bad)
		}
		agg = "CAST(SUM(CAST(CAST(" + q + " AS TEXT) AS BIGINT)) AS BIGINT)"
	}
	query := "SELECT " + strings.Join(casts, ", ") + ", " + agg + " FROM " + table + " GROUP BY " + list
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		var pe *pgconn.PgError
		var ce *pgconn.ConnectError
		if driver == "pgx" && (errors.As(err, &ce) || !errors.As(err, &pe)) {
			return nil, &Error{Msg: pgConnectError, Detail: err}
		}
		if pe != nil {
			// Connected and authenticated: the database's own answer.
			return nil, fmt.Errorf("sql %s: %s (SQLSTATE %s)", t.Name, pe.Message, pe.Code)
		}
		return nil, fmt.Errorf("sql %s: %w", t.Name, err)
	}
	defer rows.Close()
	c, err := cube.New(s, cellLimit)
	if err != nil {
		return nil, err
	}
	vals := make([]sql.NullString, n)
	dest := make([]any, n+1)
	for i := range vals {
		dest[i] = &vals[i]
	}
	var count int64
	dest[n] = &count
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("sql %s: a group's values or count cannot be read (a count must be an integer): %w", t.Name, err)
		}
		if count < 0 {
			return nil, fmt.Errorf("sql %s: COUNT(*) gave a negative count for a group; a source must give every cell a count of rows >= 0", t.Name)
		}
		cell := 0
		for i, v := range vals {
			dim := s.Dim(i)
			if !v.Valid {
				return nil, fmt.Errorf("sql %s: column %q is NULL in %d rows; every row needs a value in the declared domain", t.Name, dim.Name, count)
			}
			k, ok := s.ValueIndex(i, v.String)
			if !ok {
				// The value itself is not quoted: error messages never echo
				// the source's contents.
				return nil, fmt.Errorf("sql %s: column %q has a value outside its declared domain (%d rows)", t.Name, dim.Name, count)
			}
			cell += k * s.Stride(i)
		}
		if c.Counts[cell] += float64(count); c.Counts[cell] >= maxRows {
			return nil, fmt.Errorf("sql %s: more than %d rows; at most %d are supported", t.Name, int64(maxRows-1), int64(maxRows-1))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sql %s: %w", t.Name, err)
	}
	return c, nil
}

// pgConnectError is the one answer to a PostgreSQL source that cannot be
// reached, whatever the cause.
const pgConnectError = "cannot connect to the PostgreSQL source (its address, credentials or database may be wrong; the server's log has the details)"

// Error is a source's failure whose details stay in the server's log: the
// curator sees Msg only.
type Error struct {
	Msg    string
	Detail error
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Detail }

// RedactDSN removes a password from a database URL before it is stored or
// shown.
func RedactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		if strings.Contains(dsn, "password") {
			return "(redacted)"
		}
		return dsn
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "REDACTED")
	}
	return u.String()
}
