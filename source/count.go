package source

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// WithCountColumn returns t read with the named column as a count: each
// row stands for that many records (a table of persons per block, age and
// sex, say), so a record's weight is the column's value and a row of count
// 0 counts nothing (its other values are still read and checked). The
// column must hold non-negative integers below 2^63; anything else is an
// error naming the table, the row and the column. A database table sums
// the column in its GROUP BY. The count column cannot also be selected.
// An empty column returns t unchanged.
func WithCountColumn(t Table, column string) Table {
	if column == "" {
		return t
	}
	if s, ok := t.(*SQL); ok {
		s.countColumn = column
		return s
	}
	return &counted{Table: t, column: column}
}

// counted reads one more column than selected, the count, and returns it
// as the record's weight.
type counted struct {
	Table
	column string
	n      int // columns selected by the caller
}

// Select selects columns and, after them, the count column.
func (c *counted) Select(ctx context.Context, columns []string) error {
	if slices.Contains(columns, c.column) {
		return fmt.Errorf("%s: column %q is the count column; it cannot also be a dimension", c.Name(), c.column)
	}
	c.n = len(columns)
	return c.Table.Select(ctx, append(slices.Clip(columns), c.column))
}

// NextRecord returns the selected values of the next row and its count.
func (c *counted) NextRecord() ([][]byte, int64, error) {
	rec, w, err := c.Table.NextRecord()
	if err != nil {
		return nil, 0, err
	}
	k, ok := ParseCount(rec[c.n])
	if !ok {
		return nil, 0, c.Table.FieldError(c.n, "the count %q is not a non-negative integer below 2^63", rec[c.n])
	}
	if w != 1 {
		hi, lo := bits.Mul64(uint64(k), uint64(w))
		if hi != 0 || lo > math.MaxInt64 {
			return nil, 0, c.Table.FieldError(c.n, "the count %d times the row's weight %d is 2^63 or more", k, w)
		}
		k = int64(lo)
	}
	return rec[:c.n], k, nil
}

// FieldError names selected column i of the row last returned.
func (c *counted) FieldError(i int, format string, args ...any) error {
	return c.Table.FieldError(i, format, args...)
}

// ParseCount parses the value of a count column: a non-negative decimal
// integer below 2^63, ASCII digits only (no sign, spaces or exponent).
func ParseCount[T ~string | ~[]byte](b T) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n uint64
	for i := range len(b) {
		c := b[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (math.MaxInt64-9)/10 {
			// Close to the limit: check exactly.
			if n > math.MaxInt64/10 || n*10 > math.MaxInt64-uint64(c-'0') {
				return 0, false
			}
		}
		n = n*10 + uint64(c-'0')
	}
	return int64(n), true
}

// splitter is cube.Splitter, which this package does not import.
type splitter interface {
	Split(n int, minBytes int64) (parts []func() ([][]byte, int64, error), joined func() bool)
}

// Split splits the table read under the count column, if it can be split
// (cube.Splitter): each part returns its rows' counts as their weights.
func (c *counted) Split(n int, minBytes int64) (parts []func() ([][]byte, int64, error), joined func() bool) {
	sp, ok := c.Table.(splitter)
	if !ok {
		return nil, nil
	}
	parts, joined = sp.Split(n, minBytes)
	for i, next := range parts {
		parts[i] = func() ([][]byte, int64, error) {
			rec, w, err := next()
			if err != nil {
				return nil, 0, err
			}
			k, ok := ParseCount(rec[c.n])
			if !ok || w != 1 {
				// The whole read names the row and column.
				return nil, 0, errors.New("a count that is not a non-negative integer below 2^63")
			}
			return rec[:c.n], k, nil
		}
	}
	return parts, joined
}
