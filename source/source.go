// Package source reads fact tables row by row, so that tables larger than
// memory can be aggregated. Errors name the file, the row (1-based, counting
// the header as row 1) and the column.
package source

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// CSV streams a CSV file with a header row.
type CSV struct {
	name   string
	f      *os.File
	r      *csv.Reader
	header []string
	row    int // number of the row last returned by Next (the header is row 1)
	bytes  func() int64
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
	cr := &countingReader{r: r}
	c := &CSV{name: name, r: csv.NewReader(cr), bytes: func() int64 { return cr.n }}
	c.r.ReuseRecord = true
	c.r.FieldsPerRecord = 0 // every row must have as many fields as the header
	h, err := c.r.Read()
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: the file is empty; a header row is required", name)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: header: %w", name, err)
	}
	c.header = slices.Clone(h)
	for i, col := range c.header {
		c.header[i] = strings.TrimSpace(strings.TrimPrefix(col, "\ufeff"))
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

// Next returns the next row's fields, or io.EOF after the last row. The
// slice is reused by the following call.
func (c *CSV) Next() ([]string, error) {
	rec, err := c.r.Read()
	if err == io.EOF {
		return nil, io.EOF
	}
	c.row++
	if err != nil {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%s: row %d: %w", c.name, pe.StartLine, pe.Err)
		}
		return nil, fmt.Errorf("%s: row %d: %w", c.name, c.row, err)
	}
	return rec, nil
}

// Row returns the number of the row last returned by Next, counting the
// header as row 1 (so it matches the line number of simple files).
func (c *CSV) Row() int { return c.row }

// Errorf returns an error about column col of the current row.
func (c *CSV) Errorf(col int, format string, args ...any) error {
	return fmt.Errorf("%s: row %d, column %q: %s", c.name, c.row, c.header[col], fmt.Sprintf(format, args...))
}

// BytesRead returns how many bytes of the input have been consumed, for
// progress reporting.
func (c *CSV) BytesRead() int64 { return c.bytes() }

// Close closes the file opened by OpenCSV.
func (c *CSV) Close() error {
	if c.f == nil {
		return nil
	}
	return c.f.Close()
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
