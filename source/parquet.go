package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding"
)

// Parquet streams a Parquet file row group by row group, reading only the
// selected columns' chunks (column projection). A selected column must be
// a non-repeated column (a nested one is named by its dotted path) of strings (BYTE_ARRAY or
// FIXED_LEN_BYTE_ARRAY, plain or dictionary-encoded), integers (INT32,
// INT64: their decimal form is the value) or booleans ("true", "false").
// A null is an error naming the file, row group, row and column.
type Parquet struct {
	name string
	f    *os.File
	cr   *countingReaderAt
	pf   *parquet.File
	sel  []string
	leaf []int // column index of each selected column

	group    int   // current row group (0-based)
	endGroup int   // the row group after the last one read (all of them if 0)
	groupRow int64 // rows of the current group already returned
	before   int64 // rows in the groups before the current one
	pages    []parquet.Pages
	readers  []parquet.ValueReader
	current  []parquet.Page

	batch []parquet.Value
	arena [][]byte   // per column: the values of the batch read one by one, concatenated
	offs  [][][2]int // per column: the rows read one by one, and their span of arena
	vals  [][][]byte // per column: the batch's values
	// The current page of a column, when it is dictionary-encoded and has
	// no nulls, is read as its indices into the dictionary (idx), whose
	// values are formatted once per dictionary (dicts): a row's value is
	// then a slice of the dictionary's text, valid for the row group.
	idx   [][]int32
	dicts []parquetDict
	// For the parts of SplitIndexed: each selected column's domain
	// (value to position), the batch's positions (-1 outside the
	// domain), and the positions of the current dictionary's values.
	index   []map[string]int32
	pos     [][]int32
	dictPos [][]int32
	n, i    int // rows in the batch, next row to return
	out     [][]byte
	failed  error
}

const parquetBatch = 1024

// OpenParquet opens a Parquet file and reads its footer. Close the result
// when done.
func OpenParquet(path string) (*Parquet, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("fact table: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("fact table: %w", err)
	}
	cr := &countingReaderAt{r: f}
	pf, err := parquet.OpenFile(cr, st.Size(), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: not a readable Parquet file: %w", path, err)
	}
	return &Parquet{name: path, f: f, cr: cr, pf: pf}, nil
}

// Name returns the path.
func (p *Parquet) Name() string { return p.name }

// Columns returns the file's columns (dotted paths for nested ones).
func (p *Parquet) Columns() []string {
	var names []string
	for _, c := range p.pf.Schema().Columns() {
		names = append(names, strings.Join(c, "."))
	}
	return names
}

// Select chooses the columns to read (Table); their types are checked here,
// before any row is read.
func (p *Parquet) Select(_ context.Context, columns []string) error {
	schema := p.pf.Schema()
	p.sel = columns
	p.leaf = make([]int, len(columns))
	for i, name := range columns {
		leaf, ok := schema.Lookup(name)
		if !ok && strings.Contains(name, ".") {
			leaf, ok = schema.Lookup(strings.Split(name, ".")...) // a nested column
		}
		if !ok {
			return fmt.Errorf("%s: no column %q (the file has %s)", p.name, name, strings.Join(p.Columns(), ", "))
		}
		if leaf.MaxRepetitionLevel > 0 {
			return fmt.Errorf("%s: column %q is repeated (a list); a fact table needs one value per row", p.name, name)
		}
		switch k := leaf.Node.Type().Kind(); k {
		case parquet.ByteArray, parquet.FixedLenByteArray, parquet.Int32, parquet.Int64, parquet.Boolean:
		default:
			return fmt.Errorf("%s: column %q has type %s; use strings, integers or booleans", p.name, name, k)
		}
		p.leaf[i] = leaf.ColumnIndex
	}
	p.alloc()
	return nil
}

// alloc makes the buffers of the selected columns.
func (p *Parquet) alloc() {
	k := len(p.sel)
	p.pages = make([]parquet.Pages, k)
	p.readers = make([]parquet.ValueReader, k)
	p.current = make([]parquet.Page, k)
	p.arena = make([][]byte, k)
	p.offs = make([][][2]int, k)
	p.vals = make([][][]byte, k)
	p.idx = make([][]int32, k)
	p.dicts = make([]parquetDict, k)
	p.out = make([][]byte, k)
	p.batch = make([]parquet.Value, parquetBatch)
	p.group = -1
}

// NextRecord returns the selected values of the next row, with weight 1,
// or io.EOF (Table).
func (p *Parquet) NextRecord() ([][]byte, int64, error) {
	if p.failed != nil {
		return nil, 0, p.failed
	}
	if p.batch == nil {
		return nil, 0, fmt.Errorf("%s: Select was not called", p.name)
	}
	for p.i == p.n {
		if err := p.fill(); err != nil {
			if err != io.EOF {
				p.failed = err
			}
			return nil, 0, err
		}
	}
	for c := range p.out {
		p.out[c] = p.vals[c][p.i]
	}
	p.i++
	p.groupRow++
	return p.out, 1, nil
}

// fill reads the next batch of rows of every selected column, moving to
// the next row group when the current one is done.
func (p *Parquet) fill() error {
	groups := p.pf.RowGroups()
	for p.group < 0 || p.groupRow+int64(p.n-p.i) >= groups[p.group].NumRows() {
		if p.group >= 0 {
			p.before += groups[p.group].NumRows()
		}
		p.closePages()
		p.group++
		p.groupRow = 0
		p.n, p.i = 0, 0
		if p.group >= len(groups) || p.endGroup > 0 && p.group >= p.endGroup {
			return io.EOF
		}
		chunks := groups[p.group].ColumnChunks()
		for c, leaf := range p.leaf {
			p.pages[c] = chunks[leaf].Pages()
		}
	}
	left := groups[p.group].NumRows() - p.groupRow
	n := int(min(left, parquetBatch))
	for c := range p.leaf {
		p.arena[c], p.offs[c], p.vals[c] = p.arena[c][:0], p.offs[c][:0], p.vals[c][:0]
		if p.index != nil {
			p.pos[c] = p.pos[c][:0]
		}
		for got := 0; got < n; {
			if p.readers[c] == nil && p.idx[c] == nil {
				pg, err := p.pages[c].ReadPage()
				if err != nil {
					if err == io.EOF {
						err = errors.New("the column chunk ends before the row group does")
					}
					return p.errorf(c, p.groupRow+int64(got)+1, "%v", err)
				}
				p.current[c] = pg
				if idx, ok := dictIndices(pg); ok {
					if p.dicts[c].d != pg.Dictionary() {
						p.dicts[c] = newParquetDict(pg.Dictionary())
						if p.index != nil {
							p.dictPos[c] = p.dictPos[c][:0]
							for _, v := range p.dicts[c].vals {
								p.dictPos[c] = append(p.dictPos[c], p.position(c, v))
							}
						}
					}
					p.idx[c] = idx
				} else {
					p.readers[c] = pg.Values()
				}
			}
			if idx := p.idx[c]; idx != nil {
				k := min(n-got, len(idx))
				dv := p.dicts[c].vals
				for _, i := range idx[:k] {
					got++
					if uint(i) >= uint(len(dv)) {
						return p.errorf(c, p.groupRow+int64(got), "dictionary index %d, the dictionary has %d values", i, len(dv))
					}
					if p.index != nil {
						p.pos[c] = append(p.pos[c], p.dictPos[c][i])
						continue
					}
					p.vals[c] = append(p.vals[c], dv[i])
				}
				if p.idx[c] = idx[k:]; len(p.idx[c]) == 0 {
					parquet.Release(p.current[c])
					p.current[c], p.idx[c] = nil, nil
				}
				continue
			}
			k, err := p.readers[c].ReadValues(p.batch[:n-got])
			for _, v := range p.batch[:k] {
				got++
				if v.IsNull() {
					return p.errorf(c, p.groupRow+int64(got), "null value; every row needs a value in the declared domain")
				}
				if p.index != nil {
					// The arena is reused for each value: only its position is kept.
					p.arena[c] = appendText(p.arena[c][:0], v)
					p.pos[c] = append(p.pos[c], p.position(c, p.arena[c]))
					continue
				}
				a := len(p.arena[c])
				p.arena[c] = appendText(p.arena[c], v)
				// The arena may move: the slice is taken when the batch is done.
				p.offs[c] = append(p.offs[c], [2]int{len(p.vals[c]), a})
				p.vals[c] = append(p.vals[c], nil)
			}
			if err == io.EOF {
				parquet.Release(p.current[c])
				p.current[c], p.readers[c] = nil, nil
			} else if err != nil {
				return p.errorf(c, p.groupRow+int64(got)+1, "%v", err)
			}
		}
		offs, arena := p.offs[c], p.arena[c]
		for k, o := range offs {
			end := len(arena)
			if k+1 < len(offs) {
				end = offs[k+1][1]
			}
			p.vals[c][o[0]] = arena[o[1]:end:end]
		}
	}
	p.n, p.i = n, 0
	return nil
}

// position returns the position of value v of selected column c in its
// domain, or -1.
func (p *Parquet) position(c int, v []byte) int32 {
	if j, ok := p.index[c][string(v)]; ok {
		return j
	}
	return -1
}

// appendText appends a value's text: its bytes, or an integer's decimal
// form, or "true" or "false".
func appendText(a []byte, v parquet.Value) []byte {
	switch v.Kind() {
	case parquet.ByteArray, parquet.FixedLenByteArray:
		return append(a, v.ByteArray()...)
	case parquet.Int32:
		return strconv.AppendInt(a, int64(v.Int32()), 10)
	case parquet.Int64:
		return strconv.AppendInt(a, v.Int64(), 10)
	case parquet.Boolean:
		return strconv.AppendBool(a, v.Boolean())
	}
	return a
}

// dictIndices returns the indices of a dictionary-encoded page without
// nulls, one per row.
func dictIndices(pg parquet.Page) ([]int32, bool) {
	if pg.Dictionary() == nil || pg.NumNulls() != 0 {
		return nil, false
	}
	data := pg.Data()
	if data.Kind() != encoding.Int32 {
		return nil, false
	}
	idx := data.Int32()
	if int64(len(idx)) != pg.NumValues() || len(idx) == 0 {
		return nil, false
	}
	return idx, true
}

// parquetDict is a column chunk's dictionary with the text of each value.
type parquetDict struct {
	d    parquet.Dictionary
	vals [][]byte
}

func newParquetDict(d parquet.Dictionary) parquetDict {
	n := d.Len()
	var text []byte
	ends := make([]int, n)
	for i := range n {
		text = appendText(text, d.Index(int32(i)))
		ends[i] = len(text)
	}
	vals := make([][]byte, n)
	start := 0
	for i, e := range ends {
		vals[i] = text[start:e:e]
		start = e
	}
	return parquetDict{d: d, vals: vals}
}

func (p *Parquet) closePages() {
	for c, pg := range p.pages {
		if pg != nil {
			pg.Close()
		}
		p.pages[c], p.readers[c], p.idx[c] = nil, nil, nil
		if p.current[c] != nil {
			parquet.Release(p.current[c])
			p.current[c] = nil
		}
	}
}

// errorf names the file, the row group and row (1-based), the row in the
// file and selected column c.
func (p *Parquet) errorf(c int, row int64, format string, args ...any) error {
	return fmt.Errorf("%s: row group %d, row %d (row %d of the file), column %q: %s",
		p.name, p.group+1, row, p.before+row, p.sel[c], fmt.Sprintf(format, args...))
}

// FieldError returns an error about selected column i of the row last
// returned (Table).
func (p *Parquet) FieldError(i int, format string, args ...any) error {
	return p.errorf(i, p.groupRow, format, args...)
}

// BytesRead returns the bytes read from the file so far.
func (p *Parquet) BytesRead() int64 { return p.cr.n.Load() }

// Close closes the file.
func (p *Parquet) Close() error {
	if p.pages != nil {
		p.closePages()
	}
	return p.f.Close()
}

// Split cuts the row groups into at most n runs of consecutive groups, of
// at least minBytes bytes of the file each (in proportion to their rows),
// for reading at once (cube.Splitter). It must be called after Select and
// before the first row is read; the rows stay readable with NextRecord.
// The parts return errors without their row numbers: on any error the
// caller reads the file whole, with NextRecord, which numbers them.
func (p *Parquet) Split(n int, minBytes int64) (parts []func() ([][]byte, int64, error), joined func() bool) {
	for _, q := range p.splitParts(n, minBytes) {
		parts = append(parts, q.partNext)
	}
	if parts == nil {
		return nil, nil
	}
	return parts, func() bool { return true }
}

// SplitIndexed is Split for parts that give each value's position in
// domains[i], the values of selected column i (cube.IndexSplitter): the
// values of a dictionary-encoded page are looked up once per dictionary,
// not once per row. A value outside its domain fails its part, and the
// caller then reads the file whole, which names the row and column.
func (p *Parquet) SplitIndexed(n int, minBytes int64, domains [][]string) (parts []func(pos [][]int32) (int, error), joined func() bool) {
	if len(domains) != len(p.sel) {
		return nil, nil
	}
	index := make([]map[string]int32, len(domains))
	for i, d := range domains {
		index[i] = make(map[string]int32, len(d))
		for j, v := range d {
			index[i][v] = int32(j)
		}
	}
	for _, q := range p.splitParts(n, minBytes) {
		q.index = index
		q.pos = make([][]int32, len(p.sel))
		q.dictPos = make([][]int32, len(p.sel))
		parts = append(parts, q.nextPositions)
	}
	if parts == nil {
		return nil, nil
	}
	return parts, func() bool { return true }
}

// errNotInDomain fails a part of SplitIndexed.
var errNotInDomain = errors.New("a value outside its domain")

// nextPositions fills pos[i][r] with the positions of the next rows'
// values, for up to len(pos[0]) rows, and returns how many.
func (p *Parquet) nextPositions(pos [][]int32) (int, error) {
	for p.i == p.n {
		if err := p.fill(); err != nil {
			p.closePages()
			return 0, err
		}
	}
	k := min(len(pos[0]), p.n-p.i)
	for c := range pos {
		for r, j := range p.pos[c][p.i : p.i+k] {
			if j < 0 {
				p.closePages()
				return 0, errNotInDomain
			}
			pos[c][r] = j
		}
	}
	p.i += k
	p.groupRow += int64(k)
	return k, nil
}

// splitParts cuts the row groups for Split and SplitIndexed.
func (p *Parquet) splitParts(n int, minBytes int64) []*Parquet {
	groups := p.pf.RowGroups()
	total := p.pf.NumRows()
	if p.batch == nil || p.group != -1 || n < 1 || total == 0 {
		return nil
	}
	st, err := p.f.Stat()
	if err != nil {
		return nil
	}
	k := int(min(int64(n), int64(len(groups)), st.Size()/max(minBytes, 1)))
	if k < 1 {
		return nil
	}
	// Cut before the group where the rows so far first reach i/k of all.
	var cuts []int
	var rows int64
	for g, rg := range groups {
		if g > 0 && rows*int64(k) >= int64(len(cuts)+1)*total && len(cuts)+1 < k {
			cuts = append(cuts, g)
		}
		rows += rg.NumRows()
	}
	cuts = append(append([]int{0}, cuts...), len(groups))
	var parts []*Parquet
	for i := range len(cuts) - 1 {
		q := &Parquet{name: p.name, f: p.f, cr: p.cr, pf: p.pf, sel: p.sel, leaf: p.leaf, endGroup: cuts[i+1]}
		q.alloc()
		if q.group = cuts[i] - 1; q.group >= 0 {
			// As if the group before were done: fill moves on.
			q.groupRow = groups[q.group].NumRows()
		}
		parts = append(parts, q)
	}
	return parts
}

// partNext returns the next row of a part of Split, and closes its pages
// after the last.
func (p *Parquet) partNext() ([][]byte, int64, error) {
	rec, w, err := p.NextRecord()
	if err != nil {
		p.closePages()
	}
	return rec, w, err
}
