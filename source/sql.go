package source

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
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
	// countColumn, if set, is summed instead of counting rows (see
	// WithCountColumn); bad counts the group's rows whose count is not a
	// non-negative integer.
	countColumn string
	bad         int64
	ctx         context.Context // Select's, for the queries that explain an error
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
		q := quoteColumn(c)
		casts[i], list[i] = "CAST("+q+" AS TEXT)", q
	}
	aggs := []string{"COUNT(*)"}
	if s.countColumn != "" {
		if slices.Contains(columns, s.countColumn) {
			return fmt.Errorf("%s: column %q is the count column; it cannot also be a dimension", s.Name(), s.countColumn)
		}
		if _, err := selectColumns(s.Name(), s.have, []string{s.countColumn}); err != nil {
			return err
		}
		// A bad count adds 0 and is counted apart, so the query itself
		// does not fail on it and NextRecord can name the row.
		bad := s.badCount()
		good := "CAST(CAST(" + quoteColumn(s.countColumn) + " AS TEXT) AS BIGINT)"
		aggs = []string{
			"CAST(COALESCE(SUM(CASE WHEN " + bad + " THEN 0 ELSE " + good + " END), 0) AS BIGINT)",
			"SUM(CASE WHEN " + bad + " THEN 1 ELSE 0 END)",
		}
	}
	query := "SELECT " + strings.Join(append(casts, aggs...), ", ") + " FROM " + s.quoted
	if n > 0 {
		query += " GROUP BY " + strings.Join(list, ", ")
	}
	rows, err := s.db.QueryContext(ctx, query)
	if err != nil {
		return fmt.Errorf("%s: %w", s.Name(), err)
	}
	s.rows, s.sel, s.ctx = rows, columns, ctx
	s.vals = make([]sql.NullString, n)
	s.dest = make([]any, n+1, n+2)
	for i := range s.vals {
		s.dest[i] = &s.vals[i]
	}
	s.dest[n] = &s.count
	if s.countColumn != "" {
		s.dest = append(s.dest, &s.bad)
	}
	s.out = make([][]byte, n)
	return nil
}

// quoteColumn quotes one column name (a dot is part of the name).
func quoteColumn(c string) string {
	return `"` + strings.ReplaceAll(c, `"`, `""`) + `"`
}

// badCount is an SQL condition true on the rows whose count column is not
// a non-negative integer below 2^63 written in decimal digits.
func (s *SQL) badCount() string { return BadCount(s.driver, s.countColumn) }

// BadCount returns an SQL condition, for driver "sqlite" or "postgres",
// true on the rows whose column is not a valid count: NULL, or not a
// non-negative integer below 2^63 written in decimal digits.
func BadCount(driver, column string) string {
	q := quoteColumn(column)
	text := "CAST(" + q + " AS TEXT)"
	digits := "LTRIM(" + text + ", '0')"
	big := "(LENGTH(" + digits + ") > 19 OR (LENGTH(" + digits + ") = 19 AND " + digits + " > '9223372036854775807'))"
	if driver == "postgres" {
		return "(" + q + " IS NULL OR " + text + ` COLLATE "C" !~ '^[0-9]+$' OR ` + big + ")"
	}
	// SQLite: an integer or a text of digits; a REAL 3.0 is refused too.
	return "(" + q + " IS NULL OR typeof(" + q + ") NOT IN ('integer', 'text') OR " + text + " = '' OR " + text + " GLOB '*[^0-9]*' OR " + big + ")"
}

// countError names the first row (by rowid in SQLite, ctid in PostgreSQL,
// where the table has one) whose count is bad, and how many rows are.
func (s *SQL) countError(ctx context.Context) error {
	q := quoteColumn(s.countColumn)
	where := " FROM " + s.quoted + " WHERE " + s.badCount()
	var total int64
	if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*)"+where).Scan(&total); err != nil {
		return fmt.Errorf("%s: column %q: a count is not a non-negative integer below 2^63 (finding the row: %w)", s.Name(), s.countColumn, err)
	}
	rowid, idName := "rowid", "rowid"
	if s.driver == "postgres" {
		rowid, idName = "CAST(ctid AS TEXT)", "ctid"
	}
	var val, id sql.NullString
	err := s.db.QueryRowContext(ctx, "SELECT CAST("+q+" AS TEXT), CAST("+rowid+" AS TEXT)"+where+" LIMIT 1").Scan(&val, &id)
	if err != nil { // a view or a table without rowid: no row identifier
		id.Valid = false
		err = s.db.QueryRowContext(ctx, "SELECT CAST("+q+" AS TEXT)"+where+" LIMIT 1").Scan(&val)
	}
	if err != nil {
		return fmt.Errorf("%s: column %q: %d rows have a count that is not a non-negative integer below 2^63 (finding the row: %w)", s.Name(), s.countColumn, total, err)
	}
	shown := "NULL"
	if val.Valid {
		shown = strconv.Quote(val.String)
	}
	row := "a row"
	if id.Valid {
		row = idName + " " + id.String
	}
	return fmt.Errorf("%s: %s, column %q: the count %s is not a non-negative integer below 2^63 (bad counts in %d rows in all)", s.Name(), row, s.countColumn, shown, total)
}

// nullError reports a NULL in a column with the number of the table's
// rows where it is NULL (a group holds only some of them).
func (s *SQL) nullError(ctx context.Context, column string) error {
	var rows int64
	err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+s.quoted+" WHERE "+quoteColumn(column)+" IS NULL").Scan(&rows)
	if err != nil {
		return fmt.Errorf("%s: column %q is NULL in some rows; every row needs a value in the declared domain", s.Name(), column)
	}
	return fmt.Errorf("%s: column %q is NULL in %d rows; every row needs a value in the declared domain", s.Name(), column, rows)
}

// CheckDomains checks columns against their domains in one query over the
// table, so that Select need not group by them (cube.DomainChecker): a
// row with a NULL or a value outside its column's domain is an error
// naming the table, the column and the value.
func (s *SQL) CheckDomains(ctx context.Context, columns []string, domains [][]string) error {
	if len(columns) == 0 {
		return nil
	}
	if _, err := selectColumns(s.Name(), s.have, columns); err != nil {
		return err
	}
	casts := make([]string, len(columns))
	conds := make([]string, len(columns))
	for i, c := range columns {
		q := quoteColumn(c)
		casts[i] = "CAST(" + q + " AS TEXT)"
		lits := make([]string, len(domains[i]))
		for j, v := range domains[i] {
			lits[j] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
		}
		conds[i] = "(" + q + " IS NULL)"
		if len(lits) > 0 {
			conds[i] = "(" + q + " IS NULL OR " + casts[i] + " NOT IN (" + strings.Join(lits, ", ") + "))"
		} else {
			conds[i] = "(1 = 1)"
		}
	}
	query := "SELECT " + strings.Join(casts, ", ") + " FROM " + s.quoted + " WHERE " + strings.Join(conds, " OR ") + " LIMIT 1"
	vals := make([]sql.NullString, len(columns))
	dest := make([]any, len(columns))
	for i := range vals {
		dest[i] = &vals[i]
	}
	err := s.db.QueryRowContext(ctx, query).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: checking the domains of %s: %w", s.Name(), strings.Join(columns, ", "), err)
	}
	for i, v := range vals {
		if !v.Valid {
			return s.nullError(ctx, columns[i])
		}
		if !slices.Contains(domains[i], v.String) {
			list := domains[i][:min(8, len(domains[i]))]
			more := ""
			if len(domains[i]) > 8 {
				more = fmt.Sprintf(", ... %d values in all", len(domains[i]))
			}
			return fmt.Errorf("%s: column %q: value %q is not in the declared domain of %q (%s%s)", s.Name(), columns[i], v.String, columns[i], strings.Join(list, ", "), more)
		}
	}
	return fmt.Errorf("%s: checking the domains of %s: the database found a row outside them that it does not return", s.Name(), strings.Join(columns, ", "))
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
	if s.bad > 0 {
		return nil, 0, s.countError(s.ctx)
	}
	if s.count < 1 && (s.countColumn == "" || s.count < 0) {
		return nil, 0, fmt.Errorf("%s: the database counted %d rows in a group", s.Name(), s.count)
	}
	for i, v := range s.vals {
		if !v.Valid {
			return nil, 0, s.nullError(s.ctx, s.sel[i])
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
