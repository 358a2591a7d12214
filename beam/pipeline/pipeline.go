// Package release builds the Apache Beam pipelines of knowdp releases: the
// same tables as knowdp release, from the same flags, computed on any Beam
// runner from fact tables in shards.
//
// Every pipeline starts the same way: the fact table's files (CSV or
// Parquet shards, or one database table) are read in parallel with the
// core's readers, and each row is counted into its cell of every cuboid the
// release needs, aggregated per file into sparse partial counts per block
// of BlockSize cells. What follows depends on the release (see Build):
//
//   - one cuboid (release.Plan.Cuboid, as Plan.Run draws it): every block of the
//     cuboid is noised on its own, the invariants' marginals are combined,
//     the least-squares corrections computed from them on one worker
//     (estimate.Corrections) and added back to every block;
//   - several cuboids under one budget (release.Plan.Workload, as Plan.Run
//     draws it): every block of every measured cuboid is noised on its own,
//     and each table's block is its least-squares estimate, a sum of
//     broadcast marginals of the measurements and invariants
//     (release.WorkloadPlan.Terms), combined per marginal and joined back to
//     the blocks;
//   - non-negative or integer tables, and tables at the levels of a
//     hierarchy: the exact counts (8 bytes a cell of the finest-level
//     cuboids counted) are gathered on one worker, which runs the core's
//     release, as large as one worker's memory allows.
//
// Noise comes from the distribution and the generators the single machine
// uses for the same cells, so a seeded run reproduces knowdp release
// --seed. Stages join through GroupByKey, never a side input (see writeFn),
// and what one stage computes for many (noisy blocks, corrections,
// marginals) waits for the next in a scratch directory beside the output.
// The tables are written by the workers, block by block, as shards of the
// output (see writePart).
package pipeline

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/source"
)

// BlockSize is the number of cells of a cuboid in one block: cells
// [i*BlockSize, (i+1)*BlockSize) are counted, noised and written together.
// It equals the chunk of the single machine's parallel noise, which is what
// makes a seeded run reproduce its release.
const BlockSize = 1 << 18

// maxHeldCells bounds the distinct cells a file reader counts in its hash
// maps before it flushes them as sparse partial counts (about 40 bytes a
// cell: 80 MiB). Counting sparsely, rows in any order cost the same: dense
// per-block counters made unsorted rows flush and reallocate blocks of
// 2 MiB over and over.
const maxHeldCells = 1 << 21

func init() {
	register.DoFn3x1[context.Context, string, func(int64, []byte), error](&countFn{})
	register.DoFn2x1[[]byte, func(int64, []byte), error](&domainFn{})
	register.DoFn5x1[context.Context, int64, func(*[]byte) bool, func(int64, []byte), func(int, []byte), error](&noiseFn{})
	register.Combiner3[margAcc, []byte, margAcc](&margCombine{})
	register.DoFn3x1[int64, func(*[]byte) bool, func(int64, []byte), error](&correctFn{})
	register.DoFn3x0[int, margAcc, func(int64, []byte)](&keyMarginalFn{})
	register.DoFn2x0[[]byte, func(int64, []byte)](&emptyFn{})
	register.DoFn4x1[context.Context, int64, func(*[]byte) bool, func(int), error](&writeFn{})
	register.DoFn3x1[int64, []byte, func(int64, []byte), error](&gatherKeyFn{})
	register.DoFn4x1[context.Context, int64, func(*[]byte) bool, func(int), error](&gatherFn{})
	register.Function2x1(sum)
	register.Emitter1[int]()
	register.Emitter1[[]byte]()
	register.Emitter2[int64, []byte]()
	register.Emitter2[int, []byte]()
	register.Iter1[[]byte]()
	beam.RegisterType(reflect.TypeOf((*margAcc)(nil)).Elem())
}

// Stages of a release (Config.Mode).
const (
	// ModeCuboid releases one cuboid block by block.
	ModeCuboid = iota
	// ModeWorkload releases several cuboids block by block.
	ModeWorkload
	// ModeGather releases on one worker.
	ModeGather
)

// Config is what every stage needs to know about the release. It is
// serialised into the pipeline, so its fields are exported.
type Config struct {
	// Schema is the schema's JSON (domain.LoadSchema's format).
	Schema []byte
	// Mode selects the pipeline after the count (ModeCuboid, ...).
	Mode int
	// Counted are the cuboids every row is counted into, in the order of
	// their keys (see key).
	Counted []uint64
	// Job is the release the flags ask for (parsed again by the stages
	// that need more than the counts).
	Job Job
	// Cuboid is the released cuboid C of ModeCuboid.
	Cuboid uint64
	// Keeps are K_i = E_i ∩ C for the deduplicated exact cuboids E_i.
	Keeps []uint64
	// Sensitivity is the generic sensitivity (0: released without noise).
	Sensitivity int
	Epsilon     float64
	// Gaussian selects noise.NewGaussian(L2, Rho) instead of
	// noise.NewLaplace(Sensitivity, Epsilon): the distribution release.Release
	// draws from for the same plan.
	Gaussian bool
	L2, Rho  float64
	// MOE90 is the margin of error of every cell of ModeCuboid's table.
	MOE90 float64
	// Seeded selects noise.NewSeeded(Seed) as the root generator; otherwise
	// each block draws from its own noise.NewRand.
	Seeded bool
	Seed   uint64
	// ModeWorkload: the sources' noise (by counted cuboid), whether a
	// table is the source itself (its blocks are then kept in Scratch),
	// the marginals the tables need, and the tables with their estimates.
	Noise  []SourceNoise
	Local  []bool
	Pairs  []Pair
	Tables []TableTerms
	// Directory says the output is a directory (not one CSV file);
	// otherwise File is the name of that one table's file, as its sidecar
	// gives it.
	Directory bool
	File      string
	// Scratch receives the noisy blocks between stages; Stage receives the
	// output's files (see writePart).
	Scratch, Stage string
	// Table and CountColumn are source.Spec's, for every file.
	Table       string
	CountColumn string
	// UnitKey is the key that chooses the rows each privacy unit keeps
	// (unit.Key), drawn by the driver for a release per unit that is not
	// seeded (a seeded one draws it from Seed, as knowdp release does). It
	// is secret: whoever has it can tell which rows were kept.
	UnitKey []byte
}

// counted is one cuboid the rows are counted into.
type counted struct {
	c      domain.Cuboid
	cells  int
	blocks int
	stride []int // its stride per schema dimension, 0 for one it lacks
}

// state is Config decoded on a worker.
type state struct {
	s       *domain.Schema
	counted []counted
	// ModeCuboid's released cuboid C: its dimensions' sizes, cells and
	// blocks.
	c      domain.Cuboid
	sizes  []int
	cells  int
	blocks int
}

func (cfg Config) decode() (*state, error) {
	s, err := domain.ParseSchema(cfg.Schema)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	c := domain.Cuboid(cfg.Cuboid)
	st := &state{s: s, c: c, cells: s.CuboidSize(c)}
	for _, d := range c.Dims() {
		st.sizes = append(st.sizes, s.Size(d))
	}
	st.blocks = Blocks(st.cells)
	for _, x := range cfg.Counted {
		cc := counted{c: domain.Cuboid(x), cells: s.CuboidSize(domain.Cuboid(x)), stride: make([]int, s.NumDims())}
		cc.blocks = Blocks(cc.cells)
		n := 1
		for d := s.NumDims() - 1; d >= 0; d-- {
			if cc.c.Has(d) {
				cc.stride[d] = n
				n *= s.Size(d)
			}
		}
		st.counted = append(st.counted, cc)
	}
	return st, nil
}

// key is the pipeline key of block b of counted cuboid i; with one
// counted cuboid, the block itself.
func (st *state) key(i int, b int) int64 { return int64(b)*int64(len(st.counted)) + int64(i) }

// unkey is key's inverse.
func (st *state) unkey(k int64) (i, b int) {
	n := int64(len(st.counted))
	return int(k % n), int(k / n)
}

// Blocks returns the number of blocks of a cuboid with the given cells.
func Blocks(cells int) int { return (cells + BlockSize - 1) / BlockSize }

// blockLen returns the number of cells in block b of a cuboid of the given
// cells.
func blockLen(cells, b int) int { return min(BlockSize, cells-b*BlockSize) }

// Build adds the release of cfg over the fact table files to the pipeline.
// Each file is a CSV file with a header row or a Parquet file (see
// source.Open), with a column for every dimension of the schema, or a
// database (cfg.Table).
func Build(s beam.Scope, cfg Config, files []string) {
	s = s.Scope("knowdp.release")
	paths := beam.Reshuffle(s, beam.Create(s, stringsAny(files)...))
	partials := beam.ParDo(s, &countFn{Cfg: cfg}, paths)
	switch cfg.Mode {
	case ModeGather:
		// With an empty element beside the partial counts, so that the one
		// worker runs even when no file has a row (a header-only CSV).
		keyed := beam.ParDo(s, &gatherKeyFn{}, partials)
		gathered := beam.Flatten(s, keyed, beam.ParDo(s, &emptyFn{}, beam.Impulse(s)))
		if cfg.Job.PrivacyUnit != "" {
			gathered = beam.Flatten(s, gathered, buildUnits(s, cfg, paths))
		}
		all := beam.GroupByKey(s, gathered)
		finish(s, beam.ParDo(s, &gatherFn{Cfg: cfg}, all))
	case ModeWorkload:
		buildWorkload(s, cfg, partials)
	default:
		domain := beam.ParDo(s, &domainFn{Cfg: cfg}, beam.Impulse(s))
		grouped := beam.GroupByKey(s, beam.Flatten(s, domain, partials))
		blocks, margs := beam.ParDo2(s, &noiseFn{Cfg: cfg}, grouped)
		ready := beam.ParDo(s, &correctFn{Cfg: cfg}, gatherMarginals(s, margs))
		finish(s, beam.ParDo(s, &writeFn{Cfg: cfg}, beam.GroupByKey(s, beam.Flatten(s, blocks, ready))))
	}
}

// gatherMarginals combines the block marginals per key and sends them all
// to one worker, with an empty element, so that the worker runs even when
// no block emits a marginal (no invariant, or a release without noise).
func gatherMarginals(s beam.Scope, margs beam.PCollection) beam.PCollection {
	totals := beam.CombinePerKey(s, &margCombine{}, margs)
	keyed := beam.ParDo(s, &keyMarginalFn{}, totals)
	return beam.GroupByKey(s, beam.Flatten(s, keyed, beam.ParDo(s, &emptyFn{}, beam.Impulse(s))))
}

// emptyFn emits one empty element to key 0.
type emptyFn struct{}

func (emptyFn) ProcessElement(_ []byte, emit func(int64, []byte)) { emit(0, nil) }

// finish sums the blocks the last stage wrote. The sum itself is unused:
// it is there because Prism, the in-process runner, polls its watermarks
// without pause while the last stage of a pipeline runs (measured: 2 CPU-
// seconds for a stage sleeping 2 s), which at one worker thread took half
// the CPU; with a combine after it, the last stage is a trivial one. For
// the same reason no stage reads a side input (see writeFn).
func finish(s beam.Scope, written beam.PCollection) {
	beam.Combine(s, sum, written)
}

func sum(a, b int) int { return a + b }

func stringsAny(v []string) []any {
	out := make([]any, len(v))
	for i, x := range v {
		out[i] = x
	}
	return out
}

// countFn counts the rows of one file into sparse per-block partial counts
// of every counted cuboid.
type countFn struct {
	Cfg Config
	st  *state
}

func (f *countFn) Setup() error {
	var err error
	f.st, err = f.Cfg.decode()
	return err
}

// ProcessElement marks its errors for the driver (see marked).
func (f *countFn) ProcessElement(ctx context.Context, path string, emit func(int64, []byte)) error {
	return marked(f.process(ctx, path, emit))
}

func (f *countFn) process(ctx context.Context, path string, emit func(int64, []byte)) error {
	st := f.st
	t, err := source.Open(ctx, source.Spec{Path: path, Table: f.Cfg.Table, CountColumn: f.Cfg.CountColumn})
	if err != nil {
		return err
	}
	defer t.Close()
	// Every schema dimension is read and checked against its domain, not
	// only the counted cuboids', as the single-machine release does.
	nd := st.s.NumDims()
	names := make([]string, nd)
	index := make([]map[string]int, nd)
	var union domain.Cuboid
	for _, cc := range st.counted {
		union |= cc.c
	}
	for d := range nd {
		names[d] = st.s.Dim(d).Name
		index[d] = make(map[string]int, st.s.Size(d))
		for j, v := range st.s.Dim(d).Values {
			index[d][v] = j
		}
	}
	// A database checks the dimensions no counted cuboid has itself, in
	// one query, and groups by the others only (see cube.DomainChecker).
	sel := domain.Base(nd).Dims()
	if dc, ok := t.(cube.DomainChecker); ok {
		var other []string
		var domains [][]string
		for d := range nd {
			if !union.Has(d) {
				other, domains = append(other, names[d]), append(domains, st.s.Dim(d).Values)
			}
		}
		if len(other) > 0 {
			if err := dc.CheckDomains(ctx, other, domains); err != nil {
				return err
			}
		}
		sel = union.Dims()
	}
	selNames := make([]string, len(sel))
	for i, d := range sel {
		selNames[i] = names[d]
	}
	if err := t.Select(ctx, selNames); err != nil {
		return err
	}
	held := make([]counter, len(st.counted))
	for i, cc := range st.counted {
		if cc.cells <= maxDenseCells {
			held[i] = &denseCounts{cells: cc.cells}
		} else {
			held[i] = newCellCounts()
		}
	}
	heldCells := func() int {
		n := 0
		for _, h := range held {
			n += h.held()
		}
		return n
	}
	flush := func() {
		for i, h := range held {
			h.emit(func(b int, p []byte) { emit(st.key(i, b), p) })
			h.reset()
		}
	}
	j := make([]int, len(sel))
	for row := 0; ; row++ {
		if row&0xffff == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		rec, w, err := t.NextRecord()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		for i, v := range rec {
			d := sel[i]
			x, ok := index[d][string(v)]
			if !ok {
				return domainErr(t, st.s, i, d, v)
			}
			j[i] = x
		}
		if w == 0 {
			continue
		}
		if row&0xff == 0 && heldCells() >= maxHeldCells {
			flush()
		}
		for k, cc := range st.counted {
			cell := 0
			for i, d := range sel {
				cell += j[i] * cc.stride[d]
			}
			held[k].add(cell, uint64(w))
		}
	}
	flush()
	return nil
}

// domainErr is the error of value v of selected column i, dimension d.
func domainErr(t source.Table, s *domain.Schema, i, d int, v []byte) error {
	vals := s.Dim(d).Values
	list := strings.Join(vals[:min(8, len(vals))], ", ")
	if len(vals) > 8 {
		list += fmt.Sprintf(", ... %d values in all", len(vals))
	}
	return t.FieldError(i, "value %q is not in the declared domain of %q (%s)", v, s.Dim(d).Name, list)
}

// maxDenseCells is the largest cuboid a file reader counts in an array
// (8 bytes a cell, 32 MiB): one increment a row, where the hash table
// probes; larger cuboids are counted in a cellCounts.
const maxDenseCells = 1 << 22

// counter counts a file's records per cell of one cuboid and emits them as
// sparse partial counts per block (encodeSparse's format).
type counter interface {
	add(cell int, w uint64)
	// held is the number of distinct cells held, for the flush.
	held() int
	emit(emit func(block int, p []byte))
	reset()
}

// denseCounts counts in an array of the cuboid's cells.
type denseCounts struct {
	cells int
	cnt   []uint64
}

func (c *denseCounts) add(cell int, w uint64) {
	if c.cnt == nil {
		c.cnt = make([]uint64, c.cells)
	}
	c.cnt[cell] += w
}

// held is 0: the array is never flushed before the end of the file.
func (c *denseCounts) held() int { return 0 }

func (c *denseCounts) emit(emit func(int, []byte)) {
	if c.cnt == nil {
		return
	}
	for b := range Blocks(c.cells) {
		if p := encodeSparse(c.cnt[b*BlockSize : min((b+1)*BlockSize, c.cells)]); len(p) > 0 {
			emit(b, p)
		}
	}
}

func (c *denseCounts) reset() { c.cnt = nil }

// cellCounts counts records per cell in an open-addressing hash table
// (linear probing, at most half full): a few times faster than a Go map
// on integer keys, and 16 bytes a slot.
type cellCounts struct {
	slots []cellSlot
	n     int // cells held
	shift uint
}

type cellSlot struct {
	key   uint64 // 1 + the cell; 0 marks an empty slot
	count uint64
}

func newCellCounts() *cellCounts {
	return &cellCounts{slots: make([]cellSlot, 1<<10), shift: 64 - 10}
}

func (c *cellCounts) held() int { return c.n }

// add adds w to cell's count.
func (c *cellCounts) add(cell int, w uint64) {
	key := uint64(cell) + 1
	mask := uint64(len(c.slots) - 1)
	for h := (key * 0x9e3779b97f4a7c15) >> c.shift; ; h = (h + 1) & mask {
		s := &c.slots[h]
		if s.key == key {
			s.count += w
			return
		}
		if s.key == 0 {
			s.key, s.count = key, w
			c.n++
			if 2*c.n > len(c.slots) {
				c.grow()
			}
			return
		}
	}
}

func (c *cellCounts) grow() {
	old := c.slots
	c.slots = make([]cellSlot, 2*len(old))
	c.shift--
	mask := uint64(len(c.slots) - 1)
	for _, s := range old {
		if s.key == 0 {
			continue
		}
		h := (s.key * 0x9e3779b97f4a7c15) >> c.shift
		for c.slots[h].key != 0 {
			h = (h + 1) & mask
		}
		c.slots[h] = s
	}
}

// reset empties the table, keeping its size.
func (c *cellCounts) reset() {
	clear(c.slots)
	c.n = 0
}

// radixSort sorts a by key, 16 bits a pass (least significant first), as
// many passes as max has digits: linear time, where a comparison sort of
// 10^6 cells took longer than counting them.
func radixSort(a []cellSlot, max uint64) []cellSlot {
	if len(a) < 256 {
		slices.SortFunc(a, func(x, y cellSlot) int { return cmp.Compare(x.key, y.key) })
		return a
	}
	buf := make([]cellSlot, len(a))
	cnt := make([]int, 1<<16+1)
	for shift := uint(0); shift < 64 && max>>shift != 0; shift += 16 {
		clear(cnt)
		for _, s := range a {
			cnt[(s.key>>shift)&0xffff+1]++
		}
		for i := 1; i < len(cnt); i++ {
			cnt[i] += cnt[i-1]
		}
		for _, s := range a {
			d := (s.key >> shift) & 0xffff
			buf[cnt[d]] = s
			cnt[d]++
		}
		a, buf = buf, a
	}
	return a
}

// emit emits the counts as one sparse partial count per block, in
// encodeSparse's format.
func (c *cellCounts) emit(emit func(int, []byte)) {
	held := make([]cellSlot, 0, c.n)
	var top uint64
	for _, s := range c.slots {
		if s.key != 0 {
			held = append(held, s)
			top = max(top, s.key)
		}
	}
	held = radixSort(held, top)
	for i := 0; i < len(held); {
		b := int(held[i].key-1) / BlockSize
		var out []byte
		last := 0
		for ; i < len(held) && int(held[i].key-1)/BlockSize == b; i++ {
			off := int(held[i].key-1) % BlockSize
			out = binary.AppendUvarint(out, uint64(off-last))
			out = binary.AppendUvarint(out, held[i].count)
			last = off
		}
		emit(b, out)
	}
}

// encodeSparse encodes the non-zero counts as (offset delta, count) uvarints.
func encodeSparse(cnt []uint64) []byte {
	var out []byte
	last := 0
	for i, c := range cnt {
		if c != 0 {
			out = binary.AppendUvarint(out, uint64(i-last))
			out = binary.AppendUvarint(out, c)
			last = i
		}
	}
	return out
}

func addSparse(x []float64, b []byte) error {
	pos := 0
	for len(b) > 0 {
		d, n := binary.Uvarint(b)
		if n <= 0 {
			return errors.New("corrupt partial counts")
		}
		c, m := binary.Uvarint(b[n:])
		if m <= 0 {
			return errors.New("corrupt partial counts")
		}
		b = b[n+m:]
		pos += int(d)
		if pos >= len(x) {
			return errors.New("corrupt partial counts: offset beyond the block")
		}
		x[pos] += float64(c)
	}
	return nil
}

// domainFn emits every block of every counted cuboid's declared domain
// with no counts, so that every block is noised whether or not a row falls
// in it.
type domainFn struct {
	Cfg Config
}

func (f *domainFn) ProcessElement(_ []byte, emit func(int64, []byte)) error {
	st, err := f.Cfg.decode()
	if err != nil {
		return marked(err)
	}
	for i, cc := range st.counted {
		for b := range cc.blocks {
			emit(st.key(i, b), nil)
		}
	}
	return nil
}

// cursor walks the cells of a cuboid C from a starting cell, keeping the
// index of each cell's projection on a cuboid K within C.
type cursor struct {
	sizes, kstride, idx []int
	k                   int
}

func newCursor(s *domain.Schema, c, keep domain.Cuboid, lo int) *cursor {
	dims := c.Dims()
	cu := &cursor{sizes: make([]int, len(dims)), kstride: make([]int, len(dims)), idx: make([]int, len(dims))}
	n := 1
	for j := len(dims) - 1; j >= 0; j-- {
		cu.sizes[j] = s.Size(dims[j])
		if keep.Has(dims[j]) {
			cu.kstride[j] = n
			n *= cu.sizes[j]
		}
	}
	for j := len(dims) - 1; j >= 0; j-- {
		cu.idx[j] = lo % cu.sizes[j]
		lo /= cu.sizes[j]
		cu.k += cu.idx[j] * cu.kstride[j]
	}
	return cu
}

func (cu *cursor) inc() {
	for j := len(cu.idx) - 1; j >= 0; j-- {
		cu.idx[j]++
		cu.k += cu.kstride[j]
		if cu.idx[j] < cu.sizes[j] {
			return
		}
		cu.k -= cu.idx[j] * cu.kstride[j]
		cu.idx[j] = 0
	}
}

func appendFloats(b []byte, x []float64) []byte {
	for _, v := range x {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

func decodeFloats(b []byte) ([]float64, error) {
	if len(b)%8 != 0 {
		return nil, errors.New("corrupt float array")
	}
	x := make([]float64, len(b)/8)
	for i := range x {
		x[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return x, nil
}

// mark starts the line of a stage's error in the runner's report, which
// wraps it in pages of runner detail; the driver shows that line alone.
const mark = "knowdp-beam stage error: "

func marked(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s%w", mark, err)
}

// stageError returns the first stage error in a runner's report of a
// failed pipeline, or the report itself if it names none.
func stageError(err error) error {
	msg := err.Error()
	i := strings.Index(msg, mark)
	if i < 0 {
		return fmt.Errorf("release pipeline: %w", err)
	}
	line, _, _ := strings.Cut(msg[i+len(mark):], "\n")
	return fmt.Errorf("release pipeline failed: %s", line)
}

// schemaJSON encodes a schema for Config.
func schemaJSON(s *domain.Schema) ([]byte, error) { return json.Marshal(s) }
