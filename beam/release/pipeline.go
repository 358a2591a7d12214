// Package release builds the Apache Beam pipeline of a knowdp release: the
// same noisy cuboid, made consistent with the same invariants, as
// cube.(*Cube).Release, computed in blocks of cells on any Beam runner and
// without the dense base cube.
//
// The pipeline:
//
//  1. reads the fact table's files (CSV or Parquet shards) in parallel with
//     the core's readers and counts each row into its
//     cell of the released cuboid C, aggregated per file into sparse
//     partial counts per block of BlockSize cells;
//  2. enumerates every block of C's declared domain as a pipeline stage and
//     groups it with the partial counts, so every cell gets noise whether or
//     not a row falls in it;
//  3. adds noise (Laplace, or Gaussian for a zCDP release) per block from
//     the distribution and the generators cube.Release uses for the same
//     block (with a seed, block i of n > 1 uses the i-th split of the root
//     generator; a single block uses the root itself), so a seeded run
//     reproduces the single-machine release;
//  4. combines, per invariant E_i, the block marginals of the noisy and the
//     exact counts on K_i = E_i ∩ C, computes the least-squares corrections
//     on one worker (cube.Corrections) and adds them back to every block
//     from a side input;
//  5. writes each block's CSV rows to its own file, which the driver joins
//     in order after the pipeline succeeds.
package release

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/source"
)

// BlockSize is the number of cells of the released cuboid in one block:
// cells [i*BlockSize, (i+1)*BlockSize) are counted, noised and written
// together. It equals the chunk of cube.Release's parallel noise, which is
// what makes a seeded run reproduce the single-machine release.
const BlockSize = 1 << 18

// maxHeldCells bounds the distinct cells a file reader counts in its hash
// map before it flushes them as sparse partial counts (about 40 bytes a
// cell: 80 MiB). Counting sparsely, rows in any order cost the same: dense
// per-block counters made unsorted rows flush and reallocate blocks of
// 2 MiB over and over.
const maxHeldCells = 1 << 21

func init() {
	register.DoFn3x1[context.Context, string, func(int64, []byte), error](&countFn{})
	register.DoFn2x1[[]byte, func(int64, []byte), error](&domainFn{})
	register.DoFn5x1[context.Context, int64, func(*[]byte) bool, func(int64, []byte), func(int, []byte), error](&noiseFn{})
	register.Combiner3[margAcc, []byte, margAcc](&margCombine{})
	register.DoFn3x1[[]byte, func(*int, *margAcc) bool, func([]byte), error](&correctFn{})
	register.DoFn4x1[context.Context, int64, []byte, []byte, error](&writeFn{})
	register.Emitter1[[]byte]()
	register.Emitter2[int64, []byte]()
	register.Emitter2[int, []byte]()
	register.Iter1[[]byte]()
	register.Iter2[int, margAcc]()
	beam.RegisterType(reflect.TypeOf((*margAcc)(nil)).Elem())
}

// Config is what every stage needs to know about the release. It is
// serialised into the pipeline, so its fields are exported.
type Config struct {
	// Schema is the schema's JSON (cube.LoadSchema's format).
	Schema []byte
	// Cuboid is the released cuboid C.
	Cuboid uint64
	// Keeps are K_i = E_i ∩ C for the deduplicated exact cuboids E_i.
	Keeps []uint64
	// Sensitivity is the generic sensitivity (0: released without noise).
	Sensitivity int
	Epsilon     float64
	// Gaussian selects noise.NewGaussian(L2, Rho) instead of
	// noise.NewLaplace(Sensitivity, Epsilon): the distribution cube.Release
	// draws from for the same plan.
	Gaussian bool
	L2, Rho  float64
	// MOE90 is the margin of error written in every row, formatted.
	MOE90 string
	// Seeded selects noise.NewSeeded(Seed) as the root generator; otherwise
	// each block draws from its own noise.NewRand.
	Seeded bool
	Seed   uint64
	// Dir receives one CSV file of rows per block.
	Dir string
	// Table and CountColumn are source.Spec's, for every file.
	Table       string
	CountColumn string
}

// state is Config decoded on a worker.
type state struct {
	s      *cube.Schema
	c      cube.Cuboid
	sizes  []int // domain sizes of C's dimensions
	cells  int   // cells of C
	blocks int
}

func (cfg Config) decode() (*state, error) {
	s, err := cube.ParseSchema(cfg.Schema)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	c := cube.Cuboid(cfg.Cuboid)
	st := &state{s: s, c: c, cells: s.CuboidSize(c)}
	for _, d := range c.Dims() {
		st.sizes = append(st.sizes, s.Size(d))
	}
	st.blocks = Blocks(st.cells)
	return st, nil
}

// Blocks returns the number of blocks of a cuboid with the given cells.
func Blocks(cells int) int { return (cells + BlockSize - 1) / BlockSize }

// blockLen returns the number of cells in block b.
func (st *state) blockLen(b int64) int {
	return min(BlockSize, st.cells-int(b)*BlockSize)
}

// Build adds the release of cfg over the fact table files to the pipeline.
// Each file is a CSV file with a header row or a Parquet file (see
// source.Open), with a column for every dimension of the schema.
func Build(s beam.Scope, cfg Config, files []string) {
	s = s.Scope("knowdp.release")
	paths := beam.Reshuffle(s, beam.Create(s, stringsAny(files)...))
	partials := beam.ParDo(s, &countFn{Cfg: cfg}, paths)
	domain := beam.ParDo(s, &domainFn{Cfg: cfg}, beam.Impulse(s))
	grouped := beam.GroupByKey(s, beam.Flatten(s, domain, partials))
	blocks, margs := beam.ParDo2(s, &noiseFn{Cfg: cfg}, grouped)
	totals := beam.CombinePerKey(s, &margCombine{}, margs)
	corr := beam.ParDo(s, &correctFn{Cfg: cfg}, beam.Impulse(s), beam.SideInput{Input: totals})
	beam.ParDo0(s, &writeFn{Cfg: cfg}, blocks, beam.SideInput{Input: corr})
}

func stringsAny(v []string) []any {
	out := make([]any, len(v))
	for i, x := range v {
		out[i] = x
	}
	return out
}

// countFn counts the rows of one file into sparse per-block partial counts.
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
	// only C's, as the single-machine release does.
	nd := st.s.NumDims()
	names := make([]string, nd)
	index := make([]map[string]int, nd)
	stride := make([]int, nd) // stride in C, 0 for a dimension not in C
	for d := range nd {
		names[d] = st.s.Dim(d).Name
		index[d] = make(map[string]int, st.s.Size(d))
		for j, v := range st.s.Dim(d).Values {
			index[d][v] = j
		}
	}
	n := 1
	for d := nd - 1; d >= 0; d-- {
		if st.c.Has(d) {
			stride[d] = n
			n *= st.s.Size(d)
		}
	}
	// A database checks the dimensions C lacks itself, in one query, and
	// groups by C's dimensions only (see cube.DomainChecker).
	sel := cube.Base(nd).Dims()
	if dc, ok := t.(cube.DomainChecker); ok {
		var other []string
		var domains [][]string
		for d := range nd {
			if !st.c.Has(d) {
				other, domains = append(other, names[d]), append(domains, st.s.Dim(d).Values)
			}
		}
		if len(other) > 0 {
			if err := dc.CheckDomains(ctx, other, domains); err != nil {
				return err
			}
		}
		sel = st.c.Dims()
	}
	selNames := make([]string, len(sel))
	for i, d := range sel {
		selNames[i] = names[d]
	}
	if err := t.Select(ctx, selNames); err != nil {
		return err
	}
	held := newCellCounts()
	flush := func() {
		held.emit(emit)
		held.reset()
	}
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
		cell := 0
		for i, v := range rec {
			d := sel[i]
			j, ok := index[d][string(v)]
			if !ok {
				return domainErr(t, st.s, i, d, v)
			}
			cell += j * stride[d]
		}
		if w == 0 {
			continue
		}
		if held.n >= maxHeldCells {
			flush()
		}
		held.add(cell, uint64(w))
	}
	flush()
	return nil
}

// domainErr is the error of value v of selected column i, dimension d.
func domainErr(t source.Table, s *cube.Schema, i, d int, v []byte) error {
	vals := s.Dim(d).Values
	list := strings.Join(vals[:min(8, len(vals))], ", ")
	if len(vals) > 8 {
		list += fmt.Sprintf(", ... %d values in all", len(vals))
	}
	return t.FieldError(i, "value %q is not in the declared domain of %q (%s)", v, s.Dim(d).Name, list)
}

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
func (c *cellCounts) emit(emit func(int64, []byte)) {
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
		emit(int64(b), out)
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

// domainFn emits every block of the declared domain with no counts.
type domainFn struct {
	Cfg Config
}

func (f *domainFn) ProcessElement(_ []byte, emit func(int64, []byte)) error {
	st, err := f.Cfg.decode()
	if err != nil {
		return marked(err)
	}
	for b := range st.blocks {
		emit(int64(b), nil)
	}
	return nil
}

// noiseFn sums a block's partial counts, adds noise and emits the noisy
// block and its marginals on every K_i.
type noiseFn struct {
	Cfg  Config
	st   *state
	dist interface {
		AddTo(r *noise.Rand, xs []float64) error
	}
	root *noise.Rand // seeded root, and how many splits it has given
	next int64
}

func (f *noiseFn) Setup() error {
	var err error
	if f.st, err = f.Cfg.decode(); err != nil {
		return err
	}
	switch {
	case f.Cfg.Sensitivity == 0:
	case f.Cfg.Gaussian:
		f.dist, err = noise.NewGaussian(f.Cfg.L2, f.Cfg.Rho)
	default:
		f.dist, err = noise.NewLaplace(float64(f.Cfg.Sensitivity), f.Cfg.Epsilon)
	}
	return err
}

// rand returns block b's generator, as cube.Release derives it.
func (f *noiseFn) rand(b int64) *noise.Rand {
	if !f.Cfg.Seeded {
		return noise.NewRand()
	}
	if f.st.blocks <= 1 {
		return noise.NewSeeded(f.Cfg.Seed)
	}
	if f.root == nil || b < f.next {
		f.root, f.next = noise.NewSeeded(f.Cfg.Seed), 0
	}
	for f.next < b {
		f.root.Split()
		f.next++
	}
	f.next++
	return f.root.Split()
}

// ProcessElement marks its errors for the driver (see marked).
func (f *noiseFn) ProcessElement(ctx context.Context, b int64, parts func(*[]byte) bool, emit func(int64, []byte), emitMarg func(int, []byte)) error {
	return marked(f.process(ctx, b, parts, emit, emitMarg))
}

func (f *noiseFn) process(ctx context.Context, b int64, parts func(*[]byte) bool, emit func(int64, []byte), emitMarg func(int, []byte)) error {
	st := f.st
	x := make([]float64, st.blockLen(b))
	var p []byte
	for parts(&p) {
		if err := addSparse(x, p); err != nil {
			return fmt.Errorf("block %d: %w", b, err)
		}
	}
	lo := int(b) * BlockSize
	var exact [][]float64
	var ranges [][2]int
	if f.Cfg.Sensitivity > 0 {
		for _, k := range f.Cfg.Keeps {
			m, r := marginal(st, cube.Cuboid(k), lo, x)
			exact, ranges = append(exact, m), append(ranges, r)
		}
		if err := f.dist.AddTo(f.rand(b), x); err != nil {
			return fmt.Errorf("block %d: %w", b, err)
		}
		for i, k := range f.Cfg.Keeps {
			m, _ := marginal(st, cube.Cuboid(k), lo, x)
			enc := binary.AppendUvarint(nil, uint64(ranges[i][0]))
			enc = binary.AppendUvarint(enc, uint64(len(m)))
			enc = appendFloats(enc, m)
			enc = appendFloats(enc, exact[i])
			emitMarg(i, enc)
		}
	}
	// The noisy block goes to a file of the output's temporary directory,
	// not into the pipeline: the runner would otherwise hold every block
	// (8 bytes a cell, and its copies) until the corrections are known.
	// The write stage reads it back.
	if err := writeFileAtomic(filepath.Join(f.Cfg.Dir, noisyFile(b)), appendFloats(make([]byte, 0, 8*len(x)), x)); err != nil {
		return fmt.Errorf("block %d: %w", b, err)
	}
	emit(b, nil)
	return ctx.Err()
}

// noisyFile is the name of block b's noisy counts in the output's
// temporary directory.
func noisyFile(b int64) string { return fmt.Sprintf("noisy-%012d.bin", b) }

// writeFileAtomic writes a file under a temporary name and renames it, so
// that a retried bundle never leaves a half-written file behind.
func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// cursor walks the cells of C from a starting cell, keeping the index of
// each cell's projection on a cuboid K within C.
type cursor struct {
	sizes, kstride, idx []int
	k                   int
}

func newCursor(st *state, keep cube.Cuboid, lo int) *cursor {
	dims := st.c.Dims()
	cu := &cursor{sizes: st.sizes, kstride: make([]int, len(dims)), idx: make([]int, len(dims))}
	n := 1
	for j := len(dims) - 1; j >= 0; j-- {
		if keep.Has(dims[j]) {
			cu.kstride[j] = n
			n *= st.sizes[j]
		}
	}
	for j := len(dims) - 1; j >= 0; j-- {
		cu.idx[j] = lo % st.sizes[j]
		lo /= st.sizes[j]
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

// marginal returns the sums of the block x (cells lo, lo+1, ... of C) on the
// cells of K it touches, as a dense range [r[0], r[1]) of K's cells.
func marginal(st *state, keep cube.Cuboid, lo int, x []float64) ([]float64, [2]int) {
	cu := newCursor(st, keep, lo)
	r := [2]int{math.MaxInt, 0}
	ks := make([]int, len(x))
	for i := range x {
		ks[i] = cu.k
		r[0], r[1] = min(r[0], cu.k), max(r[1], cu.k+1)
		cu.inc()
	}
	m := make([]float64, r[1]-r[0])
	for i, v := range x {
		m[ks[i]-r[0]] += v
	}
	return m, r
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

// margAcc accumulates an invariant's marginals over the range of its cells
// [Lo, Lo+len(Noisy)): of the noisy counts and of the exact counts.
type margAcc struct {
	Lo           int
	Noisy, Exact []float64
}

// margCombine sums the block marginals of one invariant.
type margCombine struct{}

func (margCombine) CreateAccumulator() margAcc { return margAcc{} }

func (c margCombine) AddInput(a margAcc, in []byte) (margAcc, error) {
	lo, n := binary.Uvarint(in)
	if n <= 0 {
		return a, errors.New("corrupt marginal")
	}
	cnt, m := binary.Uvarint(in[n:])
	if m <= 0 || uint64(len(in)-n-m) != 16*cnt {
		return a, errors.New("corrupt marginal")
	}
	fl, err := decodeFloats(in[n+m:])
	if err != nil {
		return a, err
	}
	return c.MergeAccumulators(a, margAcc{Lo: int(lo), Noisy: fl[:cnt], Exact: fl[cnt:]}), nil
}

func (margCombine) MergeAccumulators(a, b margAcc) margAcc {
	if len(a.Noisy) == 0 {
		return b
	}
	if len(b.Noisy) == 0 {
		return a
	}
	lo := min(a.Lo, b.Lo)
	hi := max(a.Lo+len(a.Noisy), b.Lo+len(b.Noisy))
	if lo == a.Lo && hi == a.Lo+len(a.Noisy) {
		for i := range b.Noisy {
			a.Noisy[b.Lo-lo+i] += b.Noisy[i]
			a.Exact[b.Lo-lo+i] += b.Exact[i]
		}
		return a
	}
	out := margAcc{Lo: lo, Noisy: make([]float64, hi-lo), Exact: make([]float64, hi-lo)}
	for _, s := range []margAcc{a, b} {
		for i := range s.Noisy {
			out.Noisy[s.Lo-lo+i] += s.Noisy[i]
			out.Exact[s.Lo-lo+i] += s.Exact[i]
		}
	}
	return out
}

// correctFn computes the consistency corrections from the invariants'
// combined marginals, on one worker.
type correctFn struct {
	Cfg Config
}

// ProcessElement marks its errors for the driver (see marked).
func (f *correctFn) ProcessElement(imp []byte, totals func(*int, *margAcc) bool, emit func([]byte)) error {
	return marked(f.process(imp, totals, emit))
}

func (f *correctFn) process(_ []byte, totals func(*int, *margAcc) bool, emit func([]byte)) error {
	st, err := f.Cfg.decode()
	if err != nil {
		return err
	}
	n := len(f.Cfg.Keeps)
	xMarg := make([][]float64, n)
	inv := make([]cube.Invariant, n)
	for i, k := range f.Cfg.Keeps {
		size := st.s.CuboidSize(cube.Cuboid(k))
		xMarg[i] = make([]float64, size)
		inv[i] = cube.Invariant{Cuboid: cube.Cuboid(k), Counts: make([]float64, size)}
	}
	var (
		i int
		a margAcc
	)
	for totals(&i, &a) {
		if i < 0 || i >= n || a.Lo < 0 || a.Lo+len(a.Noisy) > len(xMarg[i]) {
			return fmt.Errorf("corrupt marginal of invariant %d", i)
		}
		for j := range a.Noisy {
			xMarg[i][a.Lo+j] += a.Noisy[j]
			inv[i].Counts[a.Lo+j] += a.Exact[j]
		}
	}
	if f.Cfg.Sensitivity == 0 || n == 0 {
		emit(nil)
		return nil
	}
	corr, err := cube.Corrections(st.s, st.c, xMarg, inv)
	if err != nil {
		return err
	}
	var out []byte
	for _, c := range corr {
		out = binary.AppendUvarint(out, uint64(c.Keep))
		out = binary.AppendUvarint(out, uint64(len(c.Delta)))
		out = appendFloats(out, c.Delta)
	}
	emit(out)
	return nil
}

func decodeCorrections(b []byte) ([]cube.Correction, error) {
	var out []cube.Correction
	for len(b) > 0 {
		k, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, errors.New("corrupt corrections")
		}
		cnt, m := binary.Uvarint(b[n:])
		if m <= 0 || uint64(len(b)-n-m) < 8*cnt {
			return nil, errors.New("corrupt corrections")
		}
		end := n + m + 8*int(cnt)
		d, err := decodeFloats(b[n+m : end])
		if err != nil {
			return nil, err
		}
		out = append(out, cube.Correction{Keep: cube.Cuboid(k), Delta: d})
		b = b[end:]
	}
	return out, nil
}

// writeFn adds the corrections to a noisy block and writes its CSV rows.
type writeFn struct {
	Cfg  Config
	st   *state
	corr []cube.Correction
	seen []byte
}

func (f *writeFn) Setup() error {
	var err error
	f.st, err = f.Cfg.decode()
	return err
}

// ProcessElement marks its errors for the driver (see marked).
func (f *writeFn) ProcessElement(ctx context.Context, b int64, data []byte, corr []byte) error {
	return marked(f.process(ctx, b, data, corr))
}

func (f *writeFn) process(ctx context.Context, b int64, _ []byte, corr []byte) error {
	data, err := os.ReadFile(filepath.Join(f.Cfg.Dir, noisyFile(b)))
	if err != nil {
		return fmt.Errorf("block %d: %w", b, err)
	}
	x, err := decodeFloats(data)
	if err != nil {
		return fmt.Errorf("block %d: %w", b, err)
	}
	if f.corr == nil || !slices.Equal(f.seen, corr) {
		if f.corr, err = decodeCorrections(corr); err != nil {
			return err
		}
		f.seen = slices.Clone(corr)
	}
	lo := int(b) * BlockSize
	for _, c := range f.corr {
		cu := newCursor(f.st, c.Keep, lo)
		for i := range x {
			x[i] += c.Delta[cu.k]
			cu.inc()
		}
	}
	return writeBlock(ctx, f.st, filepath.Join(f.Cfg.Dir, BlockFile(b)), lo, x, f.Cfg.MOE90)
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

// BlockFile is the name of block b's rows in the output directory.
func BlockFile(b int64) string { return fmt.Sprintf("block-%012d.csv", b) }

// writeBlock writes a block's rows, every count in full (the shortest
// decimal that reads back as the same float64, as knowdp release writes
// it), so that the printed table keeps its invariants.
func writeBlock(ctx context.Context, st *state, path string, lo int, x []float64, moe string) error {
	dims := st.c.Dims()
	labels := make([][]string, len(dims))
	for k, d := range dims {
		for _, v := range st.s.Dim(d).Values {
			labels[k] = append(labels[k], csvField(v))
		}
	}
	cu := newCursor(st, 0, lo)
	buf := make([]byte, 0, 64*len(x))
	for _, v := range x {
		for k := range dims {
			buf = append(buf, labels[k][cu.idx[k]]...)
			buf = append(buf, ',')
		}
		buf = append(buf, cube.FormatExact(v)...)
		buf = append(buf, ',')
		buf = append(buf, moe...)
		buf = append(buf, '\n')
		cu.inc()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return writeFileAtomic(path, buf)
}

// Header returns the CSV header of a release of cuboid c: one column per
// dimension, then "count" and "moe90", as cube.(*Release).WriteCSV writes it.
func Header(s *cube.Schema, c cube.Cuboid) string {
	var b strings.Builder
	for _, d := range c.Dims() {
		b.WriteString(csvField(s.Dim(d).Name))
		b.WriteByte(',')
	}
	b.WriteString("count,moe90\n")
	return b.String()
}

func csvField(s string) string {
	if strings.ContainsAny(s, ",\"\n\r") {
		return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
	}
	return s
}

// schemaJSON encodes a schema for Config.
func schemaJSON(s *cube.Schema) ([]byte, error) { return json.Marshal(s) }
