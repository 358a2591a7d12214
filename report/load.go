package report

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// Table is one released table: its metadata and its cells as read from its
// file. The first len(Cuboid) columns of the file are the dimensions (in
// the cuboid's order, whatever their names), the next two the count and
// its margin of error.
type Table struct {
	TableMeta
	// Columns is the file's header.
	Columns []string
	// Values[d][i] is the value of dimension d in cell i.
	Values [][]string
	// Counts and Margins are the cells' released counts and margins of
	// error (moe90).
	Counts, Margins []float64
	// parquet is true for a table read from a Parquet file, whose rows
	// have no header before them.
	parquet bool
}

// Row returns the row of the file that holds cell i, as errors name it:
// 1-based, a CSV file's header being row 1.
func (t *Table) Row(i int) int {
	if t.parquet {
		return i + 1
	}
	return i + 2
}

// Cells returns the number of cells.
func (t *Table) Cells() int { return len(t.Counts) }

// Label returns cell i as "1997, Black" ("total" for the grand total).
func (t *Table) Label(i int) string {
	if len(t.Values) == 0 {
		return "total"
	}
	parts := make([]string, len(t.Values))
	for d := range t.Values {
		parts[d] = t.Values[d][i]
	}
	return strings.Join(parts, ", ")
}

// Load reads a release from fsys, the release's directory: the metadata
// file name (release.json, estimate.json, or OUT.json beside a one-table
// release's OUT.csv or OUT.parquet; "" or "." looks for release.json, then
// estimate.json) and every table it lists. It reads nothing else.
func Load(fsys fs.FS, name string) (*Release, error) {
	if name == "" || name == "." {
		// The metadata files knowdp writes into a directory, in order.
		metadataNames := []string{"release.json", "estimate.json"}
		for _, n := range metadataNames {
			if _, err := fs.Stat(fsys, n); err == nil {
				name = n
				break
			}
		}
		if name == "" || name == "." {
			return nil, fmt.Errorf("no %s in the directory (give a one-table release's OUT.json instead)", strings.Join(metadataNames, " or "))
		}
	}
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, err
	}
	m, err := ParseMetadata(name, b)
	if err != nil {
		return nil, err
	}
	if m.OneTable && m.Tables[0].File == "" {
		f, err := tableBeside(fsys, name)
		if err != nil {
			return nil, err
		}
		m.Tables[0].File = f
	}
	rel := &Release{Meta: m}
	for i, tm := range m.Tables {
		if !fs.ValidPath(tm.File) || strings.Contains(tm.File, "/") || tm.File == "." {
			return nil, fmt.Errorf("%s: table %d (%s): file %q is not a file name in the release's directory", name, i+1, tm.Name(), tm.File)
		}
		t, err := readTable(fsys, tm)
		if err != nil {
			return nil, err
		}
		rel.Tables = append(rel.Tables, t)
	}
	return rel, nil
}

// tableBeside finds the table of a one-table release: the sidecar's name
// with .csv or .parquet for .json.
func tableBeside(fsys fs.FS, sidecar string) (string, error) {
	base := strings.TrimSuffix(sidecar, path.Ext(sidecar))
	var found []string
	for _, ext := range []string{".csv", ".parquet"} {
		if st, err := fs.Stat(fsys, base+ext); err == nil && st.Mode().IsRegular() {
			found = append(found, base+ext)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("%s: the table it describes is missing: no %s.csv or %s.parquet beside it", sidecar, base, base)
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%s: both %s and %s are beside it; which one it describes is ambiguous (move the other away)", sidecar, found[0], found[1])
}

// readTable reads one table's file: Parquet if it starts with the Parquet
// magic number, CSV otherwise.
func readTable(fsys fs.FS, tm TableMeta) (*Table, error) {
	f, err := fsys.Open(tm.File)
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", tm.Name(), err)
	}
	defer f.Close()
	var magic [4]byte
	n, _ := io.ReadFull(f, magic[:])
	t := &Table{TableMeta: tm}
	if n == 4 && string(magic[:]) == "PAR1" {
		ra, ok := f.(io.ReaderAt)
		st, serr := f.Stat()
		if !ok || serr != nil {
			return nil, fmt.Errorf("%s: cannot read a Parquet file from this file system", tm.File)
		}
		t.parquet = true
		err = t.readParquet(ra, st.Size())
	} else {
		err = t.readCSV(io.MultiReader(bytes.NewReader(magic[:n]), f))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tm.File, err)
	}
	return t, nil
}

// setHeader checks the header against the cuboid and prepares the columns.
func (t *Table) setHeader(h []string) error {
	k := len(t.Cuboid)
	if len(h) < k+2 {
		return fmt.Errorf("%d columns (%s), but the cuboid %s needs %d: one per dimension, then the count and its margin of error",
			len(h), strings.Join(h, ", "), t.Name(), k+2)
	}
	t.Columns = h
	t.Values = make([][]string, k)
	return nil
}

// addRow appends one row (dimension values, count, margin of error as
// text). row is 1-based (for CSV, counting the header as row 1), for
// errors.
func (t *Table) addRow(rec []string, row int) error {
	k := len(t.Cuboid)
	if len(rec) != len(t.Columns) {
		return fmt.Errorf("row %d: %d fields, the header has %d", row, len(rec), len(t.Columns))
	}
	for d := range k {
		t.Values[d] = append(t.Values[d], rec[d])
	}
	for j, dst := range []*[]float64{&t.Counts, &t.Margins} {
		c := k + j
		v, err := strconv.ParseFloat(strings.TrimSpace(rec[c]), 64)
		switch {
		case err != nil || math.IsNaN(v) || math.IsInf(v, 0):
			return fmt.Errorf("row %d, column %q: %q is not a finite number", row, t.Columns[c], rec[c])
		case j == 1 && v < 0:
			return fmt.Errorf("row %d, column %q: a margin of error of %s is below 0", row, t.Columns[c], rec[c])
		}
		*dst = append(*dst, v)
	}
	return nil
}

func (t *Table) readCSV(r io.Reader) error {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	h, err := cr.Read()
	if err == io.EOF {
		return errors.New("empty file: no header")
	}
	if err != nil {
		return err
	}
	h = append([]string(nil), h...)
	h[0] = strings.TrimPrefix(h[0], "\ufeff")
	if err := t.setHeader(h); err != nil {
		return err
	}
	for row := 2; ; row++ {
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := t.addRow(rec, row); err != nil {
			return err
		}
	}
}

func (t *Table) readParquet(r io.ReaderAt, size int64) error {
	pf, err := parquet.OpenFile(r, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return fmt.Errorf("not a readable Parquet file: %w", err)
	}
	var h []string
	for _, c := range pf.Schema().Columns() {
		h = append(h, strings.Join(c, "."))
	}
	if err := t.setHeader(h); err != nil {
		return err
	}
	rec := make([]string, len(h))
	row := 0 // Parquet has no header row: rows count from 1
	for _, rg := range pf.RowGroups() {
		rows := rg.Rows()
		buf := make([]parquet.Row, 256)
		for {
			n, err := rows.ReadRows(buf)
			for _, pr := range buf[:n] {
				row++
				for c := range rec {
					rec[c] = ""
				}
				for _, v := range pr {
					c := v.Column()
					if c < 0 || c >= len(rec) {
						continue
					}
					if v.IsNull() {
						rows.Close()
						return fmt.Errorf("row %d, column %q: null", row, h[c])
					}
					rec[c] = parquetText(v)
				}
				if err := t.addRow(rec, row); err != nil {
					rows.Close()
					return err
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				rows.Close()
				return err
			}
		}
		rows.Close()
	}
	return nil
}

// parquetText is a Parquet value as the text a CSV cell would hold.
func parquetText(v parquet.Value) string {
	switch v.Kind() {
	case parquet.ByteArray, parquet.FixedLenByteArray:
		return string(v.ByteArray())
	case parquet.Int32:
		return strconv.FormatInt(int64(v.Int32()), 10)
	case parquet.Int64:
		return strconv.FormatInt(v.Int64(), 10)
	case parquet.Float:
		return strconv.FormatFloat(float64(v.Float()), 'g', -1, 32)
	case parquet.Double:
		return strconv.FormatFloat(v.Double(), 'g', -1, 64)
	case parquet.Boolean:
		return strconv.FormatBool(v.Boolean())
	}
	return v.String()
}
