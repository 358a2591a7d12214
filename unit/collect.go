package unit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
)

// Collector reads a fact table through cube.AggregateViews (or
// cube.Aggregate) and keeps, for every privacy unit, the cells over dims
// its rows fall in. Create it with NewCollector, count with the
// cube.Records it returns, then call Rows. It is not safe for concurrent
// use.
type Collector struct {
	t      cube.Records
	s      *domain.Schema
	column string
	cells  Cells
	// at[j] is the position of the j-th dimension of dims among the
	// columns cube selected; selected is how many it selected.
	at       []int
	selected int
	ids      map[string]uint32
	names    []string
	// The records, in chunks of chunkLen (no copying as they grow): the
	// unit's index, the cell and, once a weight is not 1, the weights.
	units   chunks[uint32]
	cell    chunks[uint64]
	weights chunks[int64]
	n       int  // records kept
	weighed bool // weights holds every record's weight
	// last is the previous record's unit and its index: rows grouped by
	// unit in the file look their unit up once.
	last    []byte
	lastIdx uint32
	bad     bool // a value outside its domain was read: cube fails
	done    bool
}

// chunkLen is the number of records in one chunk of a Collector.
const chunkLen = 1 << 16

// chunks is an append-only array in chunks of chunkLen.
type chunks[T any] [][]T

func (c *chunks[T]) add(x T) {
	if n := len(*c); n == 0 || len((*c)[n-1]) == chunkLen {
		*c = append(*c, make([]T, 0, chunkLen))
	}
	n := len(*c) - 1
	(*c)[n] = append((*c)[n], x)
}

func (c chunks[T]) at(i int) T { return c[i/chunkLen][i%chunkLen] }

// NewCollector returns a collector of the units named by column over the
// dimensions dims, and the table to count in its place: t, reading the unit
// column as well, whose records cube sees without it. Pass every view the
// release counts to cube.AggregateViews with that table: the dimensions it
// selects must include dims (the union of the leaf cuboids of the views to
// measure). The unit column must not be a dimension of s, and the cells
// over dims must number fewer than 2^63; both are checked here, from the
// schema alone.
func NewCollector(t cube.Records, s *domain.Schema, column string, dims domain.Cuboid) (*Collector, cube.Records, error) {
	if column == "" {
		return nil, nil, errors.New("unit: the unit column has no name")
	}
	if _, ok := s.Lookup(column); ok {
		return nil, nil, fmt.Errorf("unit: the unit column %q is a dimension of the schema: a unit is never released, so it cannot be one", column)
	}
	cells, err := NewCells(s, dims)
	if err != nil {
		return nil, nil, err
	}
	c := &Collector{t: t, s: s, column: column, cells: cells, ids: map[string]uint32{}}
	if dc, ok := t.(cube.DomainChecker); ok {
		return c, &checkingReader{reader{c}, dc}, nil
	}
	return c, reader{c}, nil
}

// reader is the cube.Records view of a collector.
type reader struct{ c *Collector }

// checkingReader forwards CheckDomains to a table that checks domains
// itself (a database).
type checkingReader struct {
	reader
	dc cube.DomainChecker
}

func (r *checkingReader) CheckDomains(ctx context.Context, columns []string, domains [][]string) error {
	return r.dc.CheckDomains(ctx, columns, domains)
}

func (r reader) Name() string     { return r.c.t.Name() }
func (r reader) BytesRead() int64 { return r.c.t.BytesRead() }
func (r reader) Close() error     { return r.c.t.Close() }
func (r reader) FieldError(i int, format string, args ...any) error {
	return r.c.t.FieldError(i, format, args...)
}

func (r reader) Select(ctx context.Context, columns []string) error {
	c := r.c
	if c.at != nil {
		return errors.New("unit: Select called twice")
	}
	dims := c.cells.dims
	c.at = make([]int, len(dims))
	for j, d := range dims {
		c.at[j] = slices.Index(columns, c.s.Dim(d).Name)
		if c.at[j] < 0 {
			return fmt.Errorf("unit: dimension %q is needed by the measured views but was not read", c.s.Dim(d).Name)
		}
	}
	if slices.Contains(columns, c.column) {
		return fmt.Errorf("unit: the unit column %q is also a selected column", c.column)
	}
	c.selected = len(columns)
	return c.t.Select(ctx, append(slices.Clip(columns), c.column))
}

func (r reader) NextRecord() ([][]byte, int64, error) {
	c := r.c
	vals, w, err := c.t.NextRecord()
	if err != nil {
		return vals, w, err
	}
	if len(vals) != c.selected+1 {
		return nil, 0, fmt.Errorf("unit: %s returned %d values for %d columns", c.t.Name(), len(vals), c.selected+1)
	}
	if w > 0 && !c.bad {
		c.record(vals, w)
	}
	return vals[:c.selected], w, nil
}

// record keeps one record's unit and cell. A value outside its domain is
// not kept: cube refuses the table on it, naming the row and column.
func (c *Collector) record(vals [][]byte, w int64) {
	var cell uint64
	for j, d := range c.cells.dims {
		v, ok := c.s.ValueIndex(d, string(vals[c.at[j]]))
		if !ok {
			c.bad = true
			return
		}
		cell = cell*uint64(c.cells.sizes[j]) + uint64(v)
	}
	id := vals[c.selected]
	u := c.lastIdx
	if c.last == nil || string(id) != string(c.last) {
		var ok bool
		if u, ok = c.ids[string(id)]; !ok {
			if len(c.names) == math.MaxUint32 {
				c.bad = true
				return
			}
			u = uint32(len(c.names))
			c.ids[string(id)] = u
			c.names = append(c.names, string(id))
		}
		c.last, c.lastIdx = append(c.last[:0], id...), u
	}
	if w != 1 && !c.weighed {
		for range c.n {
			c.weights.add(1)
		}
		c.weighed = true
	}
	c.units.add(u)
	c.cell.add(cell)
	if c.weighed {
		c.weights.add(w)
	}
	c.n++
}

// Rows returns the rows read, grouped by unit, and releases the collector's
// memory. Call it once, after cube has read the table without error.
func (c *Collector) Rows() (*Rows, error) {
	switch {
	case c.done:
		return nil, errors.New("unit: Rows called twice")
	case c.at == nil:
		return nil, errors.New("unit: the table was not read")
	case c.bad:
		return nil, errors.New("unit: the table has values outside their domains (counting it must have failed)")
	}
	c.done = true
	c.ids = nil
	r := group(c.cells, c.names, c.n, c.units.at, c.cell.at, c.weightAt())
	c.names, c.units, c.cell, c.weights = nil, nil, nil, nil
	return r, nil
}

// weightAt returns the weight of record i, or nil when every weight is 1.
func (c *Collector) weightAt() func(int) int64 {
	if !c.weighed {
		return nil
	}
	return c.weights.at
}

// group sorts the records (n of them: record i has unit unitAt(i), cell
// cellAt(i) and weight weightAt(i), or 1 when weightAt is nil) by unit (a
// counting sort) and, within a unit, by cell, adding up the weights of
// equal cells.
func group(cells Cells, names []string, nrec int, unitAt func(int) uint32, cellAt func(int) uint64, weightAt func(int) int64) *Rows {
	n := len(names)
	start := make([]int, n+1)
	for i := range nrec {
		start[unitAt(i)+1]++
	}
	for i := range n {
		start[i+1] += start[i]
	}
	next := slices.Clone(start[:n])
	sorted := make([]uint64, nrec)
	var sw []int64
	if weightAt != nil {
		sw = make([]int64, nrec)
	}
	for i := range nrec {
		u := unitAt(i)
		p := next[u]
		next[u]++
		sorted[p] = cellAt(i)
		if sw != nil {
			sw[p] = weightAt(i)
		}
	}
	r := &Rows{cells: cells, ids: names, start: make([]int, n+1)}
	if sw == nil {
		r.counts = make([]int64, 0, nrec)
	}
	out := 0
	for u := range n {
		seg := sorted[start[u]:start[u+1]]
		var wseg []int64
		if sw != nil {
			wseg = sw[start[u]:start[u+1]]
			sortPairs(seg, wseg)
		} else {
			slices.Sort(seg)
		}
		for i := 0; i < len(seg); {
			j, w := i, int64(0)
			for ; j < len(seg) && seg[j] == seg[i]; j++ {
				if wseg != nil {
					w += wseg[j]
				} else {
					w++
				}
			}
			// Compacted in place: out never passes the segment's start.
			sorted[out] = seg[i]
			if sw != nil {
				sw[out] = w
			} else {
				// Counts need their own slice when weights were all 1.
				r.counts = append(r.counts, w)
			}
			out++
			i = j
		}
		r.start[u+1] = out
	}
	r.cellOf = slices.Clip(sorted[:out])
	if sw != nil {
		r.counts = slices.Clip(sw[:out])
	}
	return r
}

// sortPairs sorts cells ascending, permuting weights alike.
func sortPairs(cells []uint64, weights []int64) {
	type pair struct {
		c uint64
		w int64
	}
	ps := make([]pair, len(cells))
	for i := range cells {
		ps[i] = pair{cells[i], weights[i]}
	}
	slices.SortFunc(ps, func(a, b pair) int {
		switch {
		case a.c < b.c:
			return -1
		case a.c > b.c:
			return 1
		}
		return 0
	})
	for i, p := range ps {
		cells[i], weights[i] = p.c, p.w
	}
}

// Cells numbers the cells over a set of dimensions: the row-major index of
// their values' positions, in schema order. It is how Rows names a row's
// cell, and how a pipeline that groups rows by unit must name them too.
type Cells struct {
	s     *domain.Schema
	set   domain.Cuboid
	dims  []int
	sizes []int
}

// NewCells returns the numbering of the cells over dims, refused (from the
// schema alone) when they number 2^63 or more.
func NewCells(s *domain.Schema, dims domain.Cuboid) (Cells, error) {
	if s == nil {
		return Cells{}, errors.New("unit: nil schema")
	}
	if dims&^domain.Base(s.NumDims()) != 0 {
		return Cells{}, fmt.Errorf("unit: dimensions %#x beyond the schema's %d", uint64(dims), s.NumDims())
	}
	c := Cells{s: s, set: dims, dims: dims.Dims()}
	n := uint64(1)
	for _, d := range c.dims {
		c.sizes = append(c.sizes, s.Size(d))
		hi, lo := bits.Mul64(n, uint64(s.Size(d)))
		if hi != 0 || lo > math.MaxInt64 {
			return Cells{}, fmt.Errorf("unit: the cells over %s number 2^63 or more", s.Format(dims))
		}
		n = lo
	}
	return c, nil
}

// Dims returns the dimensions numbered.
func (c Cells) Dims() domain.Cuboid { return c.set }

// Index returns the number of the cell whose value positions are pos, one
// per dimension of Dims in schema order.
func (c Cells) Index(pos []int) (uint64, error) {
	if len(pos) != len(c.dims) {
		return 0, fmt.Errorf("unit: %d positions for %d dimensions", len(pos), len(c.dims))
	}
	var x uint64
	for j, p := range pos {
		if p < 0 || p >= c.sizes[j] {
			return 0, fmt.Errorf("unit: position %d of dimension %q outside [0, %d)", p, c.s.Dim(c.dims[j]).Name, c.sizes[j])
		}
		x = x*uint64(c.sizes[j]) + uint64(p)
	}
	return x, nil
}
