package source

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// CSV streams a CSV file with a header row. Fields may be quoted (RFC 4180,
// "" escapes a quote, quoted fields may span lines), lines may end in LF
// or CRLF, empty lines are skipped and a UTF-8 byte order mark before the
// header is ignored: what encoding/csv accepts, read several times faster.
// Every row must have as many fields as the header.
type CSV struct {
	name   string
	f      *os.File
	r      *csvReader
	header []string
	row    int // number of the row last returned (the header is row 1)
	sel    []int
	vals   [][]byte
	strs   []string
}

// OpenCSV opens path and reads its header. Close the result when done.
func OpenCSV(path string) (*CSV, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("fact table: %w", err)
	}
	c, err := NewCSV(path, f)
	if err != nil {
		f.Close()
		return nil, err
	}
	c.f = f
	return c, nil
}

// NewCSV reads a CSV table with a header row from r; name is used in errors.
func NewCSV(name string, r io.Reader) (*CSV, error) {
	c := &CSV{name: name, r: newCSVReader(r)}
	h, err := c.r.read()
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: the file is empty; a header row is required", name)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: header: %w", name, err)
	}
	c.header = make([]string, len(h))
	for i, col := range h {
		c.header[i] = strings.TrimSpace(strings.TrimPrefix(string(col), "\ufeff"))
	}
	c.row = 1
	return c, nil
}

// Name returns the name used in errors (the path for OpenCSV).
func (c *CSV) Name() string { return c.name }

// Header returns the column names.
func (c *CSV) Header() []string { return c.header }

// Column returns the index of the named column or an error listing the
// columns the file has.
func (c *CSV) Column(name string) (int, error) {
	for i, h := range c.header {
		if h == name {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%s: no column %q (the header has %s)", c.name, name, strings.Join(c.header, ", "))
}

// next reads the next row's fields, checking their number.
func (c *CSV) next() ([][]byte, error) {
	rec, err := c.r.read()
	if err == io.EOF {
		return nil, io.EOF
	}
	c.row++
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", c.name, c.where(), err)
	}
	if len(rec) != len(c.header) {
		return nil, fmt.Errorf("%s: %s: %w (%d, the header has %d)", c.name, c.where(), csv.ErrFieldCount, len(rec), len(c.header))
	}
	return rec, nil
}

// where says "row N", adding the line when blank lines or quoted line
// breaks make them differ.
func (c *CSV) where() string {
	if c.r.start != c.row {
		return fmt.Sprintf("row %d (line %d)", c.row, c.r.start)
	}
	return fmt.Sprintf("row %d", c.row)
}

// Next returns the next row's fields, or io.EOF after the last row. The
// slice is reused by the following call; the strings are not.
func (c *CSV) Next() ([]string, error) {
	rec, err := c.next()
	if err != nil {
		return nil, err
	}
	// One string for the whole row, sliced into fields: one allocation.
	n := 0
	for _, f := range rec {
		n += len(f)
	}
	var b strings.Builder
	b.Grow(n)
	for _, f := range rec {
		b.Write(f)
	}
	all := b.String()
	c.strs = c.strs[:0]
	p := 0
	for _, f := range rec {
		c.strs = append(c.strs, all[p:p+len(f)])
		p += len(f)
	}
	return c.strs, nil
}

// Select chooses the columns NextRecord returns (Table).
func (c *CSV) Select(_ context.Context, columns []string) error {
	sel := make([]int, len(columns))
	for i, name := range columns {
		j, err := c.Column(name)
		if err != nil {
			return err
		}
		sel[i] = j
	}
	c.sel = sel
	c.vals = make([][]byte, len(sel))
	return nil
}

// NextRecord returns the selected fields of the next row, with weight 1,
// or io.EOF (Table). The slices are valid until the next call.
func (c *CSV) NextRecord() ([][]byte, int64, error) {
	rec, err := c.next()
	if err != nil {
		return nil, 0, err
	}
	for i, j := range c.sel {
		c.vals[i] = rec[j]
	}
	return c.vals, 1, nil
}

// FieldError returns an error about selected column i of the current row
// (Table).
func (c *CSV) FieldError(i int, format string, args ...any) error {
	return c.Errorf(c.sel[i], format, args...)
}

// Row returns the number of the row last returned by Next, counting the
// header as row 1 (so it matches the line number of simple files).
func (c *CSV) Row() int { return c.row }

// Errorf returns an error about column col of the current row.
func (c *CSV) Errorf(col int, format string, args ...any) error {
	return fmt.Errorf("%s: %s, column %q: %s", c.name, c.where(), c.header[col], fmt.Sprintf(format, args...))
}

// BytesRead returns how many bytes of the input have been consumed, for
// progress reporting.
func (c *CSV) BytesRead() int64 { return c.r.n }

// Close closes the file opened by OpenCSV.
func (c *CSV) Close() error {
	if c.f == nil {
		return nil
	}
	return c.f.Close()
}
