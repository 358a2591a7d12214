package source

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
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
	// partBytes counts the bytes read by the parts of Split.
	partBytes atomic.Int64
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
func (c *CSV) BytesRead() int64 { return c.r.n + c.partBytes.Load() }

// Close closes the file opened by OpenCSV.
func (c *CSV) Close() error {
	if c.f == nil {
		return nil
	}
	return c.f.Close()
}

// Split cuts the rows of a file opened by OpenCSV into at most n byte
// ranges of at least minBytes bytes each, each starting after a newline,
// for reading at once (cube.Splitter). It must be called after Select and
// before the first row is read; the rows stay readable with NextRecord.
// A newline may lie inside a quoted field, so where a range starts is only
// a guess: joined reports whether each part's first record started where
// the part before it found its next record, which makes every part's
// records exactly the file's. The parts return errors without row numbers:
// on any error the caller reads the file whole, with NextRecord, which
// numbers them.
func (c *CSV) Split(n int, minBytes int64) (parts []func() ([][]byte, int64, error), joined func() bool) {
	if c.f == nil || c.sel == nil || c.row != 1 || c.r.rerr != nil || n < 1 {
		return nil, nil
	}
	st, err := c.f.Stat()
	if err != nil {
		return nil, nil
	}
	size := st.Size()
	// The header's end: the data after it is where the rows begin.
	from := c.r.n - int64(c.r.end-c.r.pos)
	k := int(min(int64(n), (size-from)/max(minBytes, 1)))
	if k < 1 {
		return nil, nil
	}
	cuts := []int64{from}
	for i := 1; i < k; i++ {
		at := from + int64(i)*((size-from)/int64(k))
		nl, ok := c.nextNewline(max(at-1, cuts[len(cuts)-1]))
		if !ok || nl+1 >= size {
			break
		}
		if nl+1 > cuts[len(cuts)-1] {
			cuts = append(cuts, nl+1)
		}
	}
	cuts = append(cuts, size)
	ps := make([]*csvPart, len(cuts)-1)
	parts = make([]func() ([][]byte, int64, error), len(ps))
	for i := range ps {
		p := &csvPart{c: c, from: cuts[i], limit: cuts[i+1], first: -1, vals: make([][]byte, len(c.sel))}
		p.r = newCSVReader(&countingReader{r: io.NewSectionReader(c.f, cuts[i], size-cuts[i]), n: &c.partBytes})
		ps[i], parts[i] = p, p.next
	}
	joined = func() bool {
		for i := 1; i < len(ps); i++ {
			if !ps[i-1].done || ps[i-1].end != ps[i].first {
				return false
			}
		}
		return ps[len(ps)-1].done
	}
	return parts, joined
}

// nextNewline returns the offset of the first newline at or after off.
func (c *CSV) nextNewline(off int64) (int64, bool) {
	buf := make([]byte, 64<<10)
	for {
		k, err := c.f.ReadAt(buf, off)
		if i := bytes.IndexByte(buf[:k], '\n'); i >= 0 {
			return off + int64(i), true
		}
		if err != nil || k == 0 {
			return 0, false
		}
		off += int64(k)
	}
}

// csvPart reads the records of a CSV file that start in [from, limit).
type csvPart struct {
	c           *CSV
	r           *csvReader
	from, limit int64
	first, end  int64 // offsets of the first record at or after from and at or after limit (the file's size if none)
	done        bool  // end is known
	vals        [][]byte
}

func (p *csvPart) next() ([][]byte, int64, error) {
	if p.done {
		return nil, 0, io.EOF
	}
	rec, err := p.r.read()
	at := p.from + p.r.recStart
	if err == io.EOF {
		at = p.from + p.r.n
	} else if err != nil {
		return nil, 0, err
	}
	if p.first < 0 {
		p.first = at
	}
	if err == io.EOF || at >= p.limit {
		p.end, p.done = at, true
		return nil, 0, io.EOF
	}
	if len(rec) != len(p.c.header) {
		return nil, 0, csv.ErrFieldCount
	}
	for i, j := range p.c.sel {
		p.vals[i] = rec[j]
	}
	return p.vals, 1, nil
}

// countingReader adds the bytes read through it to n.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	k, err := c.r.Read(b)
	c.n.Add(int64(k))
	return k, err
}
