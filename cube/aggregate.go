package cube

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"strings"

	"github.com/knowdp/knowdp/domain"
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

// countDims reads every record of t over the schema dimensions dims (every
// dimension the targets have, in schema order), maps each value to its
// index in the declared domain, and adds the record's weight to one cell
// of every target. It returns the total weight.
func countDims(ctx context.Context, t Records, s *domain.Schema, dims []int, targets []target, opt Options) (int64, error) {
	names := make([]string, len(dims))
	for i, d := range dims {
		names[i] = s.Dim(d).Name
	}
	if err := t.Select(ctx, names); err != nil {
		return 0, err
	}
	idx := make([]int, s.NumDims())
	vi := make([]valueIndex, len(names))
	for i, d := range dims {
		vi[i] = newValueIndex(s.Dim(d).Values)
	}
	// A single target over every dimension (Build) needs no index array.
	base := len(targets) == 1 && len(targets[0].dims) == s.NumDims() && len(dims) == s.NumDims()
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
		if base {
			cell := 0
			for i, v := range rec {
				j, ok := vi[i].lookup(v)
				if !ok {
					return 0, outside(t, s, i, i, v)
				}
				cell += j * s.Stride(i)
			}
			targets[0].out[cell] += float64(w)
		} else {
			for i, v := range rec {
				j, ok := vi[i].lookup(v)
				if !ok {
					return 0, outside(t, s, i, dims[i], v)
				}
				idx[dims[i]] = j
			}
			for k := range targets {
				tg := &targets[k]
				cell := 0
				for m, d := range tg.dims {
					cell += idx[d] * tg.strides[m]
				}
				tg.out[cell] += float64(w)
			}
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

func packBytes(b []byte) uint64 {
	var w uint64
	for i, c := range b {
		w |= uint64(c) << (8 * i)
	}
	return w
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
