// Package source reads fact tables as streams of weighted records, so that
// tables larger than memory can be aggregated: CSV files, Parquet files, and
// tables in SQLite or PostgreSQL databases (counted with GROUP BY in the
// database). Open picks the format from the path or URL.
//
// Errors name the file or table, the row (1-based, counting a CSV header as
// row 1; within its row group for Parquet) and the column.
package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
)

// Table is a fact table read as weighted records over chosen columns: a
// row of a CSV or Parquet file is one record of weight 1, a row of an SQL
// GROUP BY is the group's values with its count as weight. Every value is
// given as text (the bytes of a CSV field, a Parquet string, an integer's
// decimal form, an SQL value cast to TEXT).
type Table interface {
	// Name returns what errors call the table (a path or a table name).
	Name() string
	// Select chooses the columns NextRecord returns, in that order. A
	// missing column is an error naming the table and listing the columns
	// it has. Call it once, before NextRecord.
	Select(ctx context.Context, columns []string) error
	// NextRecord returns the selected values of the next record and its
	// weight (at least 1; at least 0 with a count column), or io.EOF after
	// the last one. The slices are
	// valid until the next call.
	NextRecord() (values [][]byte, weight int64, err error)
	// FieldError returns an error about selected column i of the record
	// last returned, naming the table, the record's position and the
	// column.
	FieldError(i int, format string, args ...any) error
	// BytesRead returns how many bytes of input have been read, for
	// progress reports (0 where it is not known).
	BytesRead() int64
	// Close releases the file or database connection.
	Close() error
}

// Spec says where a fact table is.
type Spec struct {
	// Path is a CSV file, a Parquet file, an SQLite database file, or a
	// postgres:// (or postgresql://) URL.
	Path string
	// Table names the table of an SQLite or PostgreSQL database,
	// optionally schema-qualified ("census.persons"). It is required for
	// databases and refused for files.
	Table string
	// CountColumn, if set, names a column of non-negative integers: each
	// row stands for that many records (see WithCountColumn).
	CountColumn string
}

// Open opens the fact table spec describes: a postgres:// URL is a
// PostgreSQL database; a file starting with the Parquet magic "PAR1" is
// Parquet, one starting with "SQLite format 3" is an SQLite database, and
// any other file is CSV with a header row. Close the result when done.
func Open(ctx context.Context, spec Spec) (Table, error) {
	t, err := open(ctx, spec)
	if err != nil {
		return nil, err
	}
	return WithCountColumn(t, spec.CountColumn), nil
}

func open(ctx context.Context, spec Spec) (Table, error) {
	if spec.Path == "" {
		return nil, errors.New("fact table: no path given")
	}
	if IsPostgresURL(spec.Path) {
		return OpenSQL(ctx, "postgres", spec.Path, spec.Table)
	}
	kind, err := sniff(spec.Path)
	if err != nil {
		return nil, err
	}
	if kind == "sqlite" {
		return OpenSQL(ctx, "sqlite", spec.Path, spec.Table)
	}
	if spec.Table != "" {
		return nil, fmt.Errorf("%s: a table name (%q) is only for databases; this is a %s file", spec.Path, spec.Table, kind)
	}
	if kind == "parquet" {
		return OpenParquet(spec.Path)
	}
	return OpenCSV(spec.Path)
}

// IsPostgresURL reports whether p is a postgres:// or postgresql:// URL
// rather than a file.
func IsPostgresURL(p string) bool {
	return strings.HasPrefix(p, "postgres://") || strings.HasPrefix(p, "postgresql://")
}

// Kind returns what Open would read path as: "postgres" for a URL,
// otherwise "parquet", "sqlite" or "CSV" from the file's first bytes.
func Kind(path string) (string, error) {
	if IsPostgresURL(path) {
		return "postgres", nil
	}
	return sniff(path)
}

// sniff returns "parquet", "sqlite" or "CSV" from a file's first bytes.
func sniff(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("fact table: %w", err)
	}
	defer f.Close()
	var b [16]byte
	n, err := io.ReadFull(f, b[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("fact table: %s: %w", path, err)
	}
	switch {
	case n >= 4 && string(b[:4]) == "PAR1":
		return "parquet", nil
	case n == 16 && string(b[:]) == "SQLite format 3\x00":
		return "sqlite", nil
	}
	return "CSV", nil
}

// selectColumns maps names to positions in have, or returns an error
// naming the table and listing what it has.
func selectColumns(table string, have, names []string) ([]int, error) {
	idx := make([]int, len(names))
	for i, name := range names {
		idx[i] = -1
		for j, h := range have {
			if h == name {
				idx[i] = j
				break
			}
		}
		if idx[i] < 0 {
			return nil, fmt.Errorf("%s: no column %q (the table has %s)", table, name, strings.Join(have, ", "))
		}
	}
	return idx, nil
}

// countingReaderAt counts the bytes read through it; parquet-go may read
// from several goroutines.
type countingReaderAt struct {
	r io.ReaderAt
	n atomic.Int64
}

func (c *countingReaderAt) ReadAt(b []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(b, off)
	c.n.Add(int64(n))
	return n, err
}
