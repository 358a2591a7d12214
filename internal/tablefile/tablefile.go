// Package tablefile writes the tables knowdp release publishes, as CSV or
// Parquet with the same columns in the same order: one per dimension of
// the table's cuboid (its values, as strings), then "count" and "moe90";
// one row per cell, row-major (the last dimension varies fastest). The CSV
// is release.WriteTableCSV's. A table of prefix sums or ranges is written as
// CSV by WriteQueryCSV, with two columns (from, to) for its ordered
// dimension.
//
// Numbers are written in full: a CSV number is the shortest decimal that
// parses back to the same float64 (FormatNumber), a Parquet number is the
// float64 itself. A table read back from either file therefore keeps every
// invariant the release keeps, to the precision of the solve; rounding each
// cell to a few decimals would move a sum of n cells by up to n half-units
// of the last decimal.
package tablefile

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/release"
)

// Format is the file format of a released table.
type Format string

// The formats.
const (
	CSV     Format = "csv"
	Parquet Format = "parquet"
)

// ParseFormat parses a --format value: csv or parquet.
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(s)); f {
	case CSV, Parquet:
		return f, nil
	}
	return "", fmt.Errorf("unknown format %q (want csv or parquet)", s)
}

// FormatOf returns the format a file name asks for: Parquet for a name
// ending in .parquet (any case), CSV otherwise.
func FormatOf(path string) Format {
	if strings.EqualFold(filepath.Ext(path), ".parquet") {
		return Parquet
	}
	return CSV
}

// Ext is the format's file name extension, with its dot.
func (f Format) Ext() string { return "." + string(f) }

// Write writes the counts of cuboid c of s (row-major, as a release holds
// them), with the margin of error moe90 on every row, in format f.
func Write(w io.Writer, f Format, s *domain.Schema, c domain.Cuboid, counts []float64, moe90 float64) error {
	switch f {
	case CSV:
		return WriteCSV(w, s, c, counts, moe90)
	case Parquet:
		return WriteParquet(w, s, c, counts, moe90)
	}
	return fmt.Errorf("tablefile: unknown format %q", f)
}

// FormatNumber formats a count or margin of error as the shortest decimal
// that parses back to the same float64, in fixed notation (a count column
// reads 12345678, not 1.2345678e+07), without a negative zero.
func FormatNumber(v float64) string { return domain.FormatExact(v) }

// WriteCSV writes the counts of cuboid c of s with the margin of error
// moe90 on every row as CSV (cube.WriteTableCSV): a header row, then one
// row per cell, labels quoted where they need it, numbers as FormatNumber
// writes them.
func WriteCSV(w io.Writer, s *domain.Schema, c domain.Cuboid, counts []float64, moe90 float64) error {
	if err := check(s, c, counts); err != nil {
		return err
	}
	return release.WriteTableCSV(w, s, domain.ViewOf(c), counts, func(int) float64 { return moe90 })
}

// eachCell calls f with the label indices and count of every cell, in
// row-major order, the first of counts being cell first.
func eachCell[L any](labels [][]L, first int, counts []float64, f func(idx []int, v float64)) {
	idx := make([]int, len(labels))
	for j := len(idx) - 1; j >= 0; j-- {
		idx[j] = first % len(labels[j])
		first /= len(labels[j])
	}
	for _, v := range counts {
		f(idx, v)
		for j := len(idx) - 1; j >= 0; j-- {
			idx[j]++
			if idx[j] < len(labels[j]) {
				break
			}
			idx[j] = 0
		}
	}
}

// check refuses counts that do not cover the cuboid's cells.
func check(s *domain.Schema, c domain.Cuboid, counts []float64) error {
	if want := s.CuboidSize(c); want != len(counts) {
		return fmt.Errorf("tablefile: %d counts for the %d cells of %s", len(counts), want, s.Format(c))
	}
	return nil
}

// parquetBatch is the number of rows handed to the Parquet writer at once.
const parquetBatch = 4096

// WriteParquet writes the counts of cuboid c of s (row-major, as a
// release holds them), with the margin of error moe90 on every row, as a
// Parquet file: a required UTF-8 string
// column per dimension (named as s.ViewColumns names them), then required DOUBLE columns count and moe90, in
// one row group per 2^20 rows, Snappy-compressed, the dimension columns
// dictionary-encoded. Counts are written at full precision (the float64
// the release holds).
func WriteParquet(w io.Writer, s *domain.Schema, c domain.Cuboid, counts []float64, moe90 float64) error {
	if err := check(s, c, counts); err != nil {
		return err
	}
	return writeParquetRows(w, s, domain.ViewOf(c), 0, counts, func(int) float64 { return moe90 }, false)
}

// WriteRows writes cells first, first+1, ... of view v of s, with the
// margin of error moe90(cell) (the cell's index in the whole table), as a
// file of format f with its header: one shard of a table too large for one
// file, readable on its own. The columns are named by s.ViewColumns (a
// hierarchy's column by its level). integer says the table's counts are
// integers by construction (an --integer table): Parquet then stores them
// as INT64, which is decided by the release, never by the values.
func WriteRows(w io.Writer, f Format, s *domain.Schema, v domain.View, first int, counts []float64, moe90 func(cell int) float64, integer bool) error {
	switch f {
	case CSV:
		return release.WriteTableRowsCSV(w, s, v, first, counts, moe90)
	case Parquet:
		if n := s.ViewSize(v); first < 0 || first > n || len(counts) > n-first {
			return fmt.Errorf("tablefile: cells %d to %d are not all in the %d cells of %s", first, first+len(counts), n, s.FormatView(v))
		}
		return writeParquetRows(w, s, v, first, counts, moe90, integer)
	}
	return fmt.Errorf("tablefile: unknown format %q", f)
}

func writeParquetRows(w io.Writer, s *domain.Schema, v domain.View, first int, counts []float64, moe90 func(cell int) float64, integer bool) error {
	dims := v.Dims.Dims()
	names := s.ViewColumns(v)
	cols := make(orderedGroup, 0, len(dims)+2)
	for k := range dims {
		cols = append(cols, field{parquet.Encoded(parquet.String(), &parquet.RLEDictionary), names[k]})
	}
	countType := parquet.DoubleType
	if integer {
		countType = parquet.Int64Type
	}
	cols = append(cols, field{parquet.Leaf(countType), "count"}, field{parquet.Leaf(parquet.DoubleType), "moe90"})
	if err := cols.checkNames(); err != nil {
		return err
	}
	pw := parquet.NewWriter(w, parquet.NewSchema("release", cols), parquet.Compression(&parquet.Snappy),
		parquet.MaxRowsPerRowGroup(1<<20), parquet.CreatedBy("knowdp", "", ""))
	labels := make([][][]byte, len(dims))
	for k, d := range dims {
		for _, x := range s.LevelValues(d, int(v.Up[d])) {
			labels[k] = append(labels[k], []byte(x))
		}
	}
	k := len(dims)
	rows := make([]parquet.Row, 0, parquetBatch)
	var err error
	flush := func() {
		if err == nil {
			_, err = pw.WriteRows(rows)
		}
		rows = rows[:0]
	}
	cell := first
	eachCell(labels, first, counts, func(idx []int, x float64) {
		row := make(parquet.Row, k+2)
		for j := range k {
			row[j] = parquet.ByteArrayValue(labels[j][idx[j]]).Level(0, 0, j)
		}
		if x == 0 {
			x = 0 // no negative zero
		}
		if integer {
			if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
				err = fmt.Errorf("tablefile: cell %d of an integer table holds %v", cell, x)
			}
			row[k] = parquet.Int64Value(int64(x)).Level(0, 0, k)
		} else {
			row[k] = parquet.DoubleValue(x).Level(0, 0, k)
		}
		row[k+1] = parquet.DoubleValue(moe90(cell)).Level(0, 0, k+1)
		cell++
		if rows = append(rows, row); len(rows) == parquetBatch {
			flush()
		}
	})
	if flush(); err != nil {
		return err
	}
	return pw.Close()
}

// orderedGroup is a Parquet group whose columns keep the order given
// (parquet.Group sorts them by name), so that a Parquet table has the
// columns of the CSV in the same order.
type orderedGroup []parquet.Field

// checkNames refuses two columns of the same name (a dimension named
// "count" or "moe90").
func (g orderedGroup) checkNames() error {
	seen := map[string]bool{}
	for _, f := range g {
		if seen[f.Name()] {
			return fmt.Errorf("tablefile: two columns named %q (a dimension may not be named count or moe90)", f.Name())
		}
		seen[f.Name()] = true
	}
	return nil
}

func (g orderedGroup) ID() int                     { return 0 }
func (g orderedGroup) String() string              { return fmt.Sprint([]parquet.Field(g)) }
func (g orderedGroup) Type() parquet.Type          { return parquet.Group{}.Type() }
func (g orderedGroup) Optional() bool              { return false }
func (g orderedGroup) Repeated() bool              { return false }
func (g orderedGroup) Required() bool              { return true }
func (g orderedGroup) Leaf() bool                  { return false }
func (g orderedGroup) Fields() []parquet.Field     { return g }
func (g orderedGroup) Encoding() encoding.Encoding { return nil }
func (g orderedGroup) Compression() compress.Codec { return nil }
func (g orderedGroup) GoType() reflect.Type {
	fields := make([]reflect.StructField, len(g))
	for i, f := range g {
		fields[i] = reflect.StructField{Name: fmt.Sprintf("Column%d", i), Type: f.GoType(), Tag: reflect.StructTag(fmt.Sprintf("parquet:%q", f.Name()))}
	}
	return reflect.StructOf(fields)
}

// field is a named column of an orderedGroup.
type field struct {
	parquet.Node
	name string
}

func (f field) Name() string { return f.name }

// Value returns the field of a Go value of the group's GoType, a struct
// whose fields carry the columns' names in their parquet tags (rows are
// written here as parquet.Row values, so the writer does not call it).
func (f field) Value(base reflect.Value) reflect.Value {
	for i := range base.NumField() {
		if base.Type().Field(i).Tag.Get("parquet") == f.name {
			return base.Field(i)
		}
	}
	return reflect.Value{}
}
