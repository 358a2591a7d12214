package cube

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"strings"

	"sync"
	"sync/atomic"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/tensor"
)

// Records is a fact table read as weighted records over chosen columns, as
// Aggregate, Build and InferSchemaFrom read it. Package source implements
// it for CSV and Parquet files and SQLite and PostgreSQL tables; it is
// defined here so that the cube package does not depend on those readers.
// Every value is given as text.
type Records interface {
	// Name returns what errors call the table (a path or a table name).
	Name() string
	// Select chooses the columns NextRecord returns, in that order. A
	// missing column is an error naming the table. Call it once, before
	// NextRecord.
	Select(ctx context.Context, columns []string) error
	// NextRecord returns the selected values of the next record and its
	// weight (the number of rows it stands for, at least 0), or io.EOF
	// after the last one. The slices are valid until the next call.
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

// DomainChecker is implemented by a table that can check columns against
// their declared domains without returning them, as a database does in one
// query. Aggregate then selects (and a database groups by) only the
// dimensions of the requested cuboids, and checks the others with it.
type DomainChecker interface {
	// CheckDomains returns an error naming the table and the column if
	// some row has a value of columns[i] outside domains[i], or a NULL.
	CheckDomains(ctx context.Context, columns []string, domains [][]string) error
}

// Aggregate reads a fact table once and counts its records straight into
// each requested cuboid (row-major over the cuboid's dimensions, as
// Project returns them), without building the base cuboid: memory and time
// grow with the cells of the requested cuboids, not with the base domain.
// rows is the number of rows counted (the sum of the records' weights).
//
// Every schema dimension is read and checked, requested or not: a value
// outside its declared domain is an error naming the table, row and column,
// exactly as Build reports it, so the rows counted are the rows Build would
// count. (A table that is a DomainChecker checks the dimensions the
// cuboids do not need itself, and returns only the others.)
// opt.CellLimit bounds the total number of cells of the requested
// cuboids, checked before anything is allocated or read.
func Aggregate(ctx context.Context, t Records, s *domain.Schema, cuboids []domain.Cuboid, opt Options) (tables map[domain.Cuboid][]float64, rows int64, err error) {
	limit := opt.CellLimit
	if limit == 0 {
		limit = DefaultCellLimit
	}
	full := domain.Base(s.NumDims())
	var uniq []domain.Cuboid
	for _, cb := range cuboids {
		if cb&^full != 0 {
			return nil, 0, fmt.Errorf("aggregate: cuboid %#x names dimensions the schema (%d dimensions) does not have", uint64(cb), s.NumDims())
		}
		if !slices.Contains(uniq, cb) {
			uniq = append(uniq, cb)
		}
	}
	if err := checkCuboidCells(s, uniq, limit); err != nil {
		return nil, 0, err
	}
	tables = make(map[domain.Cuboid][]float64, len(uniq))
	targets := make([]target, len(uniq))
	for k, cb := range uniq {
		out := make([]float64, s.CuboidSize(cb))
		tables[cb] = out
		targets[k] = newTarget(s, cb, out)
	}
	dims := domain.Base(s.NumDims()).Dims()
	if dc, ok := t.(DomainChecker); ok {
		var need domain.Cuboid
		for _, cb := range uniq {
			need |= cb
		}
		var names []string
		var domains [][]string
		for _, d := range dims {
			if !need.Has(d) {
				names, domains = append(names, s.Dim(d).Name), append(domains, s.Dim(d).Values)
			}
		}
		if len(names) > 0 {
			if err := dc.CheckDomains(ctx, names, domains); err != nil {
				return nil, 0, err
			}
		}
		dims = need.Dims()
	}
	rows, err = countDims(ctx, t, s, dims, targets, opt)
	if err != nil {
		return nil, 0, err
	}
	return tables, rows, nil
}

// checkCuboidCells refuses a set of cuboids whose cells add up to more than
// limit (or overflow), naming each cuboid and its size.
func checkCuboidCells(s *domain.Schema, cuboids []domain.Cuboid, limit int) error {
	total, over := uint64(0), false
	parts := make([]string, len(cuboids))
	for k, cb := range cuboids {
		n, ok := uint64(1), true
		for _, i := range cb.Dims() {
			hi, lo := bits.Mul64(n, uint64(s.Size(i)))
			if hi != 0 || lo > math.MaxInt {
				ok = false
				break
			}
			n = lo
		}
		if !ok {
			over = true
			parts[k] = s.Format(cb) + " more than 2^63"
			continue
		}
		parts[k] = fmt.Sprintf("%s %d", s.Format(cb), n)
		total += n
		if total > math.MaxInt {
			over = true
		}
	}
	if over || total > uint64(limit) {
		return fmt.Errorf("%w: the requested cuboids have %s cells in all (%s), above the limit of %d; raise the limit or request smaller cuboids",
			ErrCellLimit, cellCount(total, over), strings.Join(parts, ", "), limit)
	}
	return nil
}

// ErrCellLimit is wrapped by the errors of Aggregate that refuse cuboids
// with more cells in all than the limit, before allocating them.
var ErrCellLimit = errors.New("cell limit exceeded")

func cellCount(n uint64, over bool) string {
	if over {
		return "more than 2^63"
	}
	return fmt.Sprint(n)
}

// target is one table being counted: for each schema dimension, the stride
// of that dimension in the table (0 if the table does not have it).
type target struct {
	dims    []int
	strides []int
	out     []float64
}

func newTarget(s *domain.Schema, cb domain.Cuboid, out []float64) target {
	dims := cb.Dims()
	strides := make([]int, len(dims))
	n := 1
	for k := len(dims) - 1; k >= 0; k-- {
		strides[k] = n
		n *= s.Size(dims[k])
	}
	return target{dims: dims, strides: strides, out: out}
}

// count is countDims over every schema dimension.
func count(ctx context.Context, t Records, s *domain.Schema, targets []target, opt Options) (int64, error) {
	return countDims(ctx, t, s, domain.Base(s.NumDims()).Dims(), targets, opt)
}

// Splitter is implemented by a table whose records can be read in parts
// at once, such as a file cut into byte ranges at record boundaries.
// Aggregate, Build and AggregateViews then count the parts on
// GOMAXPROCS goroutines into arrays of their own (looking values up in
// batches, whose cache misses overlap) and add the arrays up:
// the counts are whole numbers, added exactly, so the result does not
// depend on how the records were cut or scheduled.
type Splitter interface {
	// Split is called after Select and before NextRecord. It cuts the
	// records into at most n parts of at least minBytes bytes of input
	// each, in order, and returns a function per part that returns the
	// part's records as NextRecord does (io.EOF after its last), called
	// from one goroutine per part. It returns no parts when the table
	// cannot be cut, or is smaller than minBytes. After every part has
	// returned io.EOF, joined reports whether the parts hold exactly the
	// table's records; a CSV file whose cut fell inside a quoted field
	// reports false. An error from a part, or joined false, makes the
	// caller read the table whole with NextRecord, which reports the
	// error with its true row number.
	Split(n int, minBytes int64) (parts []func() ([][]byte, int64, error), joined func() bool)
}

// IndexSplitter is a Splitter whose parts give each value's position in
// its domain themselves, as a Parquet file can once per dictionary instead
// of once per row. Aggregate, Build and AggregateViews prefer it.
type IndexSplitter interface {
	Splitter
	// SplitIndexed is Split for parts that return positions: domains[i]
	// lists the values of selected column i. Each call of a part fills
	// pos[i][r] with the position in domains[i] of the value of column i
	// in the part's next records r, up to len(pos[0]) records of weight 1,
	// and returns their number (at least 1), or io.EOF after the last. A
	// value outside its domain is an error of the part.
	SplitIndexed(n int, minBytes int64, domains [][]string) (parts []func(pos [][]int32) (int, error), joined func() bool)
}

// minPartBytes is the least input a part of a split table holds: below it,
// starting a goroutine and an array of counts of its own costs more than
// the part's reading.
const minPartBytes = 4 << 20

// countDims reads every record of t over the schema dimensions dims (every
// dimension the targets have, in schema order), maps each value to its
// index in the declared domain, and adds the record's weight to one cell
// of every target. It returns the total weight.
//
// A target whose dimensions are all in another target is not counted
// record by record: it is projected from the smallest such target after
// the read, which costs one pass over that target's cells instead of one
// scattered add per record.
func countDims(ctx context.Context, t Records, s *domain.Schema, dims []int, targets []target, opt Options) (int64, error) {
	names := make([]string, len(dims))
	for i, d := range dims {
		names[i] = s.Dim(d).Name
	}
	if err := t.Select(ctx, names); err != nil {
		return 0, err
	}
	c := newCounter(s, dims, targets)
	rows, err := countSplit(ctx, t, c, opt)
	if errors.Is(err, errNoSplit) {
		rows, err = c.countAll(ctx, t, opt)
	}
	if err != nil {
		return 0, err
	}
	for k, from := range c.from {
		if from < 0 {
			continue
		}
		src, dst := &targets[from], &targets[k]
		sizes := make([]int, len(src.dims))
		var keep domain.Cuboid
		for m, d := range src.dims {
			sizes[m] = s.Size(d)
			if slices.Contains(dst.dims, d) {
				keep |= 1 << m
			}
		}
		tensor.Project(sizes, keep, src.out, dst.out)
	}
	return rows, nil
}

// counter maps a record's values to their domain positions and adds its
// weight to the targets counted record by record.
type counter struct {
	s       *domain.Schema
	targets []target
	dims    []int // schema dimension of each selected column
	vi      []valueIndex
	from    []int // per target: the target it is projected from, or -1
	count   []int // targets counted record by record
	// colStride[k][i] is the stride of selected column i in counted
	// target k (0 if the target does not have it).
	colStride [][]int
}

func newCounter(s *domain.Schema, dims []int, targets []target) *counter {
	c := &counter{s: s, targets: targets, dims: dims, vi: make([]valueIndex, len(dims)), from: make([]int, len(targets))}
	for i, d := range dims {
		c.vi[i] = newValueIndex(s.Dim(d).Values)
	}
	cbs := make([]domain.Cuboid, len(targets))
	for k := range targets {
		for _, d := range targets[k].dims {
			cbs[k] |= 1 << d
		}
	}
	// The targets contained in no other are counted; each of the others
	// is projected from the smallest of those containing it. (Equal
	// cuboids, which Aggregate never passes, are both counted.)
	top := func(k int) bool {
		for j := range targets {
			if cbs[k] != cbs[j] && cbs[k].AncestorOf(cbs[j]) {
				return false
			}
		}
		return true
	}
	for k := range targets {
		c.from[k] = -1
		if top(k) {
			c.count = append(c.count, k)
			st := make([]int, len(dims))
			for m, d := range targets[k].dims {
				st[slices.Index(dims, d)] = targets[k].strides[m]
			}
			c.colStride = append(c.colStride, st)
			continue
		}
		for j := range targets {
			if top(j) && cbs[k].AncestorOf(cbs[j]) && (c.from[k] < 0 || len(targets[j].out) < len(targets[c.from[k]].out)) {
				c.from[k] = j
			}
		}
	}
	return c
}

// tallyBatch is the number of records whose cells a tally collects before
// it adds to them: the adds then run in a loop of their own, whose
// scattered memory accesses overlap, instead of one at the end of each
// record's parsing. A deferred tally looks the values up in such a loop
// too.
const tallyBatch = 256

// tally counts records into one set of arrays, on one goroutine.
type tally struct {
	c     *counter
	outs  [][]float64 // the counted targets' arrays, in the order of c.count
	cells [][]int     // per counted target, the cells of the pending records
	ws    []float64   // the pending records' weights
	// With deferred lookups, keys[i] holds selected column i's values of
	// the pending records: a value of up to 8 bytes as its word and
	// length (lens[i]), a longer one looked up at once, as its position
	// with length 255.
	deferred bool
	keys     [][]uint64
	lens     [][]uint8
}

func (c *counter) newTally(outs [][]float64, deferred bool) *tally {
	t := &tally{c: c, outs: outs, cells: make([][]int, len(outs)), ws: make([]float64, 0, tallyBatch), deferred: deferred}
	for k := range t.cells {
		t.cells[k] = make([]int, 0, tallyBatch)
	}
	if deferred {
		t.keys, t.lens = make([][]uint64, len(c.vi)), make([][]uint8, len(c.vi))
		for i := range t.keys {
			t.keys[i], t.lens[i] = make([]uint64, 0, tallyBatch), make([]uint8, 0, tallyBatch)
		}
	}
	return t
}

// add counts one record. It returns the selected column whose value is not
// in its domain, or -1; a deferred tally reports that in flush instead,
// and only for values longer than 8 bytes here.
func (t *tally) add(rec [][]byte, w int64) int {
	c := t.c
	switch {
	case t.deferred:
		for i, v := range rec {
			if len(v) <= 8 {
				t.keys[i], t.lens[i] = append(t.keys[i], packBytes(v)), append(t.lens[i], uint8(len(v)))
				continue
			}
			j, ok := c.vi[i].lookup(v)
			if !ok {
				for i2 := range i {
					t.keys[i2], t.lens[i2] = t.keys[i2][:len(t.ws)], t.lens[i2][:len(t.ws)]
				}
				return i
			}
			t.keys[i], t.lens[i] = append(t.keys[i], uint64(j)), append(t.lens[i], 255)
		}
	case len(t.outs) == 1:
		st := c.colStride[0]
		cell := 0
		for i, v := range rec {
			j, ok := c.vi[i].lookup(v)
			if !ok {
				return i
			}
			cell += j * st[i]
		}
		t.cells[0] = append(t.cells[0], cell)
	default:
		for k := range t.cells {
			t.cells[k] = append(t.cells[k], 0)
		}
		last := len(t.ws)
		for i, v := range rec {
			j, ok := c.vi[i].lookup(v)
			if !ok {
				for k := range t.cells {
					t.cells[k] = t.cells[k][:last]
				}
				return i
			}
			for k, st := range c.colStride {
				t.cells[k][last] += j * st[i]
			}
		}
	}
	t.ws = append(t.ws, float64(w))
	if len(t.ws) == tallyBatch && !t.flush() {
		return 0
	}
	return -1
}

// addPositions counts k records of weight 1 whose values have positions
// pos[i][r] in their domains.
func (t *tally) addPositions(pos [][]int32, k int) {
	for m, out := range t.outs {
		st := t.c.colStride[m]
		cells := append(t.cells[m][:0], make([]int, k)...)
		for i, p := range pos {
			if s := st[i]; s != 0 {
				for r, j := range p[:k] {
					cells[r] += int(j) * s
				}
			}
		}
		for _, cell := range cells {
			out[cell]++
		}
		t.cells[m] = cells[:0]
	}
}

// flush adds the pending records' weights to their cells. A deferred
// tally looks their values up first, column by column, and reports false
// if one is not in its domain (counting nothing of the batch).
func (t *tally) flush() bool {
	n := len(t.ws)
	if t.deferred {
		for k := range t.cells {
			t.cells[k] = append(t.cells[k][:0], make([]int, n)...)
		}
		for i, keys := range t.keys {
			vi, lens := &t.c.vi[i], t.lens[i]
			for r, key := range keys {
				j := int(key)
				if lens[r] != 255 {
					var ok bool
					if j, ok = vi.lookupWord(key, int(lens[r])); !ok {
						t.ws = t.ws[:0]
						return false
					}
				}
				for k, st := range t.c.colStride {
					t.cells[k][r] += j * st[i]
				}
			}
			t.keys[i], t.lens[i] = keys[:0], lens[:0]
		}
	}
	for k, out := range t.outs {
		cells := t.cells[k]
		for i, w := range t.ws[:len(cells)] {
			out[cells[i]] += w
		}
		t.cells[k] = cells[:0]
	}
	t.ws = t.ws[:0]
	return true
}

// outs returns the counted targets' arrays.
func (c *counter) outs(targets []target) [][]float64 {
	outs := make([][]float64, len(c.count))
	for k, t := range c.count {
		outs[k] = targets[t].out
	}
	return outs
}

// countAll reads every record of t in order on this goroutine.
func (c *counter) countAll(ctx context.Context, t Records, opt Options) (int64, error) {
	tl := c.newTally(c.outs(c.targets), false)
	defer tl.flush()
	var rows int64
	for n := 0; ; n++ {
		if n&0xffff == 0 {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			if opt.Progress != nil {
				opt.Progress(t.BytesRead())
			}
		}
		rec, w, err := t.NextRecord()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, err
		}
		if i := tl.add(rec, w); i >= 0 {
			return 0, outside(t, c.s, i, c.dims[i], rec[i])
		}
		if w > math.MaxInt64-rows {
			return 0, fmt.Errorf("%s: the records' weights add up to 2^63 or more", t.Name())
		}
		rows += w
	}
	if opt.Progress != nil {
		opt.Progress(t.BytesRead())
	}
	return rows, nil
}

// errNoSplit says that countSplit did not count the table, so that it must
// be read whole.
var errNoSplit = errors.New("not split")

// countSplit counts the parts of a Splitter on GOMAXPROCS goroutines, each
// into arrays of its own (the first into the targets), and adds the arrays
// up. It returns errNoSplit, with the targets still zero, when the table
// is not split or any part fails: the whole read then reports the failure
// exactly as it would without parts.
func countSplit(ctx context.Context, t Records, c *counter, opt Options) (int64, error) {
	// One part is worth it too: its values are looked up in batches
	// (tally.deferred), which a whole read cannot do, as it must name the
	// row of a value outside its domain while the row is current.
	sp, ok := t.(Splitter)
	if !ok {
		return 0, errNoSplit
	}
	workers := runtime.GOMAXPROCS(0)
	// Every part but the first has arrays of its own: make its input at
	// least 2 bytes per cell of them (a byte takes a few ns to read, a
	// cell a nanosecond or two to clear and add up).
	cells := 0
	for _, k := range c.count {
		cells += len(c.targets[k].out)
	}
	// A part is read by a function that counts its records with a tally
	// and reports their weight, or false if the part failed; every 2^16
	// records it calls check, which reports false when it must stop.
	var runs []func(tl *tally, check func() bool) (int64, bool)
	var joined func() bool
	minBytes := max(minPartBytes, 2*int64(cells))
	if is, ok := t.(IndexSplitter); ok {
		domains := make([][]string, len(c.dims))
		for i, d := range c.dims {
			domains[i] = c.s.Dim(d).Values
		}
		var parts []func([][]int32) (int, error)
		parts, joined = is.SplitIndexed(workers, minBytes, domains)
		for _, next := range parts {
			runs = append(runs, func(tl *tally, check func() bool) (int64, bool) {
				pos := make([][]int32, len(c.dims))
				for i := range pos {
					pos[i] = make([]int32, tallyBatch)
				}
				var rows int64
				for n := 0; ; n++ {
					if n&0xff == 0 && !check() {
						return 0, false
					}
					k, err := next(pos)
					if errors.Is(err, io.EOF) {
						return rows, true
					}
					if err != nil || k < 1 {
						return 0, false
					}
					tl.addPositions(pos, k)
					rows += int64(k)
				}
			})
		}
	} else {
		var parts []func() ([][]byte, int64, error)
		parts, joined = sp.Split(workers, minBytes)
		for _, next := range parts {
			runs = append(runs, func(tl *tally, check func() bool) (int64, bool) {
				var rows int64
				for n := 0; ; n++ {
					if n&0xffff == 0 && !check() {
						return 0, false
					}
					rec, w, err := next()
					if errors.Is(err, io.EOF) {
						return rows, tl.flush()
					}
					if err != nil || tl.add(rec, w) >= 0 || w > math.MaxInt64-rows {
						return 0, false
					}
					rows += w
				}
			})
		}
	}
	if len(runs) == 0 {
		return 0, errNoSplit
	}
	type result struct {
		rows   int64
		failed bool
		outs   [][]float64
	}
	res := make([]result, len(runs))
	var (
		stop atomic.Bool
		mu   sync.Mutex // opt.Progress is called by one goroutine at a time
		wg   sync.WaitGroup
	)
	check := func() bool {
		if stop.Load() || ctx.Err() != nil {
			return false
		}
		if opt.Progress != nil {
			mu.Lock()
			opt.Progress(t.BytesRead())
			mu.Unlock()
		}
		return true
	}
	for p, run := range runs {
		outs := c.outs(c.targets)
		if p > 0 {
			for k := range outs {
				outs[k] = make([]float64, len(outs[k]))
			}
		}
		res[p].outs = outs
		wg.Go(func() {
			rows, ok := run(c.newTally(outs, true), check)
			if !ok {
				stop.Store(true)
			}
			res[p].rows, res[p].failed = rows, !ok
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var rows int64
	ok = joined()
	for _, r := range res {
		if r.failed || r.rows > math.MaxInt64-rows {
			ok = false
			break
		}
		rows += r.rows
	}
	// Each array holds whole numbers, and so does their sum: float64 adds
	// them exactly, in any order, while the total is at most 2^53.
	if !ok || rows > 1<<53 {
		for _, out := range res[0].outs {
			clear(out)
		}
		return 0, errNoSplit
	}
	for _, r := range res[1:] {
		for k, out := range r.outs {
			dst := res[0].outs[k]
			for i, v := range out {
				dst[i] += v
			}
		}
	}
	if opt.Progress != nil {
		opt.Progress(t.BytesRead())
	}
	return rows, nil
}

// outside is the error of value v of selected column i, dimension d.
func outside(t Records, s *domain.Schema, i, d int, v []byte) error {
	return t.FieldError(i, "value %q is not in the declared domain of %q (%s)", v, s.Dim(d).Name, domainList(s.Dim(d).Values))
}

// valueIndex maps a value's bytes to its position in a dimension's declared
// domain without allocating: open addressing (linear probing) over a table
// at most half full, 32 to 64 bytes per domain value. A value of up to 8
// bytes is compared as one machine word; a longer one by a 64-bit hash and
// then its bytes. This is several times faster than a map[string]int lookup
// on short values, and reading a fact table spends most of its time looking
// values up.
type valueIndex struct {
	shift uint
	slots []valueSlot
	vals  []string
}

type valueSlot struct {
	word uint64 // the value's bytes (up to 8) or its hash
	n    uint32 // 1 + the value's length; 0 marks an empty slot
	pos  uint32 // position in the domain
}

func newValueIndex(vals []string) valueIndex {
	bits := uint(2)
	for 1<<bits < 2*len(vals) {
		bits++
	}
	v := valueIndex{shift: 64 - bits, slots: make([]valueSlot, 1<<bits), vals: vals}
	mask := uint64(len(v.slots) - 1)
	for j, s := range vals {
		w := valueWord([]byte(s))
		h := mixValue(w, len(s)) >> v.shift
		for v.slots[h].n != 0 {
			h = (h + 1) & mask
		}
		v.slots[h] = valueSlot{word: w, n: uint32(len(s) + 1), pos: uint32(j)}
	}
	return v
}

// lookupWord returns the position of the value of n <= 8 bytes whose
// word (packBytes) is w.
func (v *valueIndex) lookupWord(w uint64, n int) (int, bool) {
	mask := uint64(len(v.slots) - 1)
	n1 := uint32(n + 1)
	h := mixValue(w, n) >> v.shift
	for {
		s := &v.slots[h]
		if s.n == 0 {
			return 0, false
		}
		if s.word == w && s.n == n1 {
			return int(s.pos), true
		}
		h = (h + 1) & mask
	}
}

// lookup returns the position of b in the domain.
func (v *valueIndex) lookup(b []byte) (int, bool) {
	mask := uint64(len(v.slots) - 1)
	w := valueWord(b)
	n := uint32(len(b) + 1)
	h := mixValue(w, len(b)) >> v.shift
	for {
		s := &v.slots[h]
		if s.n == 0 {
			return 0, false
		}
		if s.word == w && s.n == n && (n <= 9 || v.vals[s.pos] == string(b)) {
			return int(s.pos), true
		}
		h = (h + 1) & mask
	}
}

// valueWord packs a value of up to 8 bytes into a word (so equal words
// and lengths mean equal values), and hashes a longer one.
func valueWord(b []byte) uint64 {
	if len(b) > 8 {
		h := uint64(len(b)) * 0x9e3779b97f4a7c15
		for len(b) >= 8 {
			h = (h ^ binary.LittleEndian.Uint64(b)) * 0xbf58476d1ce4e5b9
			h ^= h >> 29
			b = b[8:]
		}
		return h ^ packBytes(b)*0x94d049bb133111eb
	}
	return packBytes(b)
}

// packBytes returns a word that, with len(b) <= 8, determines b: two
// loads, overlapping when b is shorter than their sum, cover every byte
// (a loop over the bytes took a tenth of a fact table's reading).
func packBytes(b []byte) uint64 {
	switch n := len(b); {
	case n >= 4:
		return uint64(binary.LittleEndian.Uint32(b)) | uint64(binary.LittleEndian.Uint32(b[n-4:]))<<32
	case n >= 2:
		return uint64(binary.LittleEndian.Uint16(b)) | uint64(binary.LittleEndian.Uint16(b[n-2:]))<<16
	case n == 1:
		return uint64(b[0])
	}
	return 0
}

// mixValue spreads a word over the high bits, which pick the slot.
func mixValue(w uint64, n int) uint64 {
	h := (w ^ uint64(n)<<59) * 0x9e3779b97f4a7c15
	return h ^ h>>29
}

// AggregateViews counts a fact table into views: each leaf-level cuboid
// the views need is counted once by Aggregate, then rolled up to every
// view at a coarser level. Memory grows with the cells of those leaf-level
// cuboids, not with the records.
func AggregateViews(ctx context.Context, t Records, s *domain.Schema, views []domain.View, opt Options) (map[domain.View][]float64, int64, error) {
	var leaves []domain.Cuboid
	for _, v := range views {
		if err := s.CheckView(v); err != nil {
			return nil, 0, fmt.Errorf("aggregate: %w", err)
		}
		if !slices.Contains(leaves, v.Dims) {
			leaves = append(leaves, v.Dims)
		}
	}
	counts, rows, err := Aggregate(ctx, t, s, leaves, opt)
	if err != nil {
		return nil, 0, err
	}
	out := make(map[domain.View][]float64, len(views))
	for _, v := range views {
		v = v.Normal()
		if _, done := out[v]; done {
			continue
		}
		if v.Flat() {
			out[v] = counts[v.Dims]
			continue
		}
		if out[v], err = s.RollUp(domain.LeafView(v), counts[v.Dims], v); err != nil {
			return nil, 0, err
		}
	}
	return out, rows, nil
}
