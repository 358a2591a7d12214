package source

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	_ "modernc.org/sqlite"             // the "sqlite" database/sql driver
)

// SQL is a table in an SQLite or PostgreSQL database, read as the groups of
// SELECT columns..., COUNT(*) FROM table GROUP BY columns...: the counting
// happens in the database and only one record per distinct combination of
// values crosses the connection. Values are cast to TEXT in the database, so
// integer and text columns compare with a schema's values alike.
type SQL struct {
	driver string // "sqlite" or "postgres"
	where  string // the file, or the URL without its password
	table  string
	quoted string
	db     *sql.DB
	have   []string // the table's columns
	sel    []string
	rows   *sql.Rows
	vals   []sql.NullString
	dest   []any
	count  int64
	out    [][]byte
	group  int
}

// OpenSQL connects to a database and checks that the table exists. driver
// is "sqlite" (dsn is a file path, opened read-only) or "postgres" (dsn is a
// postgres:// URL). table may be schema-qualified (a.b). Close the result
// when done.
func OpenSQL(ctx context.Context, driver, dsn, table string) (*SQL, error) {
	s := &SQL{driver: driver, table: table}
	var name string
	switch driver {
	case "sqlite":
		name, s.where = "sqlite", dsn
		// An SQLite URI filename: %, ? and # in the path are escaped.
		esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(dsn)
		dsn = "file:" + esc + "?mode=ro&_pragma=query_only(1)"
	case "postgres":
		name, s.where = "pgx", redactURL(dsn)
	default:
		return nil, fmt.Errorf("database driver %q: use sqlite or postgres", driver)
	}
	db, err := sql.Open(name, dsn)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", driver, s.where, err)
	}
	s.db = db
	if table == "" {
		err := fmt.Errorf("%s %s: give the table to read", driver, s.where)
		if driver == "sqlite" {
			if names, lerr := s.sqliteTables(ctx); lerr == nil {
				err = fmt.Errorf("%w (the database has %s)", err, strings.Join(names, ", "))
			}
		}
		db.Close()
		return nil, err
	}
	if s.quoted, err = QuoteIdent(table); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s %s: table: %w", driver, s.where, err)
	}
	rows, err := db.QueryContext(ctx, "SELECT * FROM "+s.quoted+" WHERE 1 = 0")
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", s.Name(), err)
	}
	s.have, err = rows.Columns()
	rows.Close()
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", s.Name(), err)
	}
	return s, nil
}

func (s *SQL) sqliteTables(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') ORDER BY name")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		names = append(names, n)
	}
	return names, rows.Err()
}

// Name returns `table "t" of <file or URL>`, the URL without its password.
func (s *SQL) Name() string {
	return fmt.Sprintf("%s table %q of %s", s.driver, s.table, s.where)
}

// Select runs the GROUP BY over the chosen columns (Table).
func (s *SQL) Select(ctx context.Context, columns []string) error {
	if _, err := selectColumns(s.Name(), s.have, columns); err != nil {
		return err
	}
	n := len(columns)
	casts := make([]string, n)
	list := make([]string, n)
	for i, c := range columns {
		// One identifier: a dot is part of the column's name here.
		if c == "" || strings.ContainsRune(c, 0) {
			return fmt.Errorf("%s: bad column name %q", s.Name(), c)
		}
		q := `"` + strings.ReplaceAll(c, `"`, `""`) + `"`
		casts[i], list[i] = "CAST("+q+" AS TEXT)", q
	}
	query := "SELECT " + strings.Join(append(casts, "COUNT(*)"), ", ") + " FROM " + s.quoted
	if n > 0 {
		query += " GROUP BY " + strings.Join(list, ", ")
	}
	rows, err := s.db.QueryContext(ctx, query)
	if err != nil {
		return fmt.Errorf("%s: %w", s.Name(), err)
	}
	s.rows, s.sel = rows, columns
	s.vals = make([]sql.NullString, n)
	s.dest = make([]any, n+1)
	for i := range s.vals {
		s.dest[i] = &s.vals[i]
	}
	s.dest[n] = &s.count
	s.out = make([][]byte, n)
	return nil
}

// NextRecord returns the next group's values and its number of rows
// (Table). A NULL is an error naming the column and the group's size.
func (s *SQL) NextRecord() ([][]byte, int64, error) {
	if s.rows == nil {
		return nil, 0, fmt.Errorf("%s: Select was not called", s.Name())
	}
	if !s.rows.Next() {
		if err := s.rows.Err(); err != nil {
			return nil, 0, fmt.Errorf("%s: %w", s.Name(), err)
		}
		return nil, 0, io.EOF
	}
	s.group++
	if err := s.rows.Scan(s.dest...); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", s.Name(), err)
	}
	if s.count < 1 {
		return nil, 0, fmt.Errorf("%s: the database counted %d rows in a group", s.Name(), s.count)
	}
	for i, v := range s.vals {
		if !v.Valid {
			return nil, 0, fmt.Errorf("%s: column %q is NULL in %d rows; every row needs a value in the declared domain", s.Name(), s.sel[i], s.count)
		}
		s.out[i] = append(s.out[i][:0], v.String...)
	}
	return s.out, s.count, nil
}

// FieldError returns an error about selected column i of the current group
// (Table).
func (s *SQL) FieldError(i int, format string, args ...any) error {
	return fmt.Errorf("%s: column %q (a group of %d rows): %s", s.Name(), s.sel[i], s.count, fmt.Sprintf(format, args...))
}

// BytesRead returns 0: the database reads the table.
func (s *SQL) BytesRead() int64 { return 0 }

// Close closes the query and the connection.
func (s *SQL) Close() error {
	var err error
	if s.rows != nil {
		err = s.rows.Close()
	}
	return errors.Join(err, s.db.Close())
}

// QuoteIdent quotes a possibly schema-qualified SQL identifier ("a.b"
// becomes "a"."b"), doubling embedded quotes; empty parts and NUL bytes are
// an error.
func QuoteIdent(name string) (string, error) {
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

// redactURL hides the password of a database URL, for errors.
func redactURL(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(an unparsable database URL)"
	}
	return u.Redacted()
}
