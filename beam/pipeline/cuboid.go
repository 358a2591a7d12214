package pipeline

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate"
	"github.com/knowdp/knowdp/internal/fileio"
	"github.com/knowdp/knowdp/internal/tablefile"
	"github.com/knowdp/knowdp/noise"
)

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

// rand returns block b's generator, as release.Release derives it.
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
	x := make([]float64, blockLen(st.cells, int(b)))
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
			m, r := marginal(st.s, st.c, domain.Cuboid(k), lo, x)
			exact, ranges = append(exact, m), append(ranges, r)
		}
		if err := f.dist.AddTo(f.rand(b), x); err != nil {
			return fmt.Errorf("block %d: %w", b, err)
		}
		for i, k := range f.Cfg.Keeps {
			m, _ := marginal(st.s, st.c, domain.Cuboid(k), lo, x)
			emitMarg(i, encodeMarginal(ranges[i][0], m, exact[i]))
		}
	}
	// The noisy block goes to a file of the output's temporary directory,
	// not into the pipeline: the runner would otherwise hold every block
	// (8 bytes a cell, and its copies) until the corrections are known.
	// The write stage reads it back.
	if err := fileio.WriteFileAtomic(filepath.Join(f.Cfg.Scratch, noisyFile(b)), appendFloats(make([]byte, 0, 8*len(x)), x)); err != nil {
		return fmt.Errorf("block %d: %w", b, err)
	}
	emit(b, nil)
	return ctx.Err()
}

// noisyFile is the name of block b's noisy counts in the output's
// temporary directory.
func noisyFile(b int64) string { return fmt.Sprintf("noisy-%012d.bin", b) }

// marginal returns the sums of the block x (cells lo, lo+1, ... of c) on
// the cells of keep it touches, as a dense range [r[0], r[1]) of K's cells.
// A keep of no more cells than the block is summed in one pass into an
// array of all its cells; a larger one over the range the block touches,
// found first.
func marginal(s *domain.Schema, c, keep domain.Cuboid, lo int, x []float64) ([]float64, [2]int) {
	cu := newCursor(s, c, keep, lo)
	r := [2]int{math.MaxInt, 0}
	if n := s.CuboidSize(keep); n <= len(x) {
		m := make([]float64, n)
		for _, v := range x {
			m[cu.k] += v
			r[0], r[1] = min(r[0], cu.k), max(r[1], cu.k)
			cu.inc()
		}
		r[1]++
		return m[r[0]:r[1]], r
	}
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

// margAcc accumulates an invariant's marginals over the range of its cells
// [Lo, Lo+len(Noisy)): of the noisy counts and of the exact counts.
type margAcc struct {
	Lo           int
	Noisy, Exact []float64
}

// encodeMarginal encodes a block's marginal on the cells [lo, lo+len(noisy))
// of its cuboid, with the exact counts' marginal or without (exact nil).
func encodeMarginal(lo int, noisy, exact []float64) []byte {
	enc := binary.AppendUvarint(nil, uint64(lo))
	enc = binary.AppendUvarint(enc, uint64(len(noisy)))
	enc = appendFloats(enc, noisy)
	return appendFloats(enc, exact)
}

// margCombine sums the block marginals of one invariant (noisy and exact)
// or of one measurement (noisy only).
type margCombine struct{}

func (margCombine) CreateAccumulator() margAcc { return margAcc{} }

func (c margCombine) AddInput(a margAcc, in []byte) (margAcc, error) {
	lo, n := binary.Uvarint(in)
	if n <= 0 {
		return a, errors.New("corrupt marginal")
	}
	cnt, m := binary.Uvarint(in[n:])
	if size := uint64(len(in) - n - m); m <= 0 || (size != 16*cnt && size != 8*cnt) {
		return a, errors.New("corrupt marginal")
	}
	fl, err := decodeFloats(in[n+m:])
	if err != nil {
		return a, err
	}
	b := margAcc{Lo: int(lo), Noisy: fl[:cnt]}
	if len(fl) > int(cnt) {
		b.Exact = fl[cnt:]
	}
	return c.MergeAccumulators(a, b), nil
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
	if lo != a.Lo || hi != a.Lo+len(a.Noisy) {
		out := margAcc{Lo: lo, Noisy: make([]float64, hi-lo)}
		if a.Exact != nil {
			out.Exact = make([]float64, hi-lo)
		}
		a = addAcc(out, a)
	}
	return addAcc(a, b)
}

// addAcc adds b into a, whose range covers b's, and returns a.
func addAcc(a, b margAcc) margAcc {
	for i, v := range b.Noisy {
		a.Noisy[b.Lo-a.Lo+i] += v
	}
	for i, v := range b.Exact {
		a.Exact[b.Lo-a.Lo+i] += v
	}
	return a
}

// correctFn computes the consistency corrections from the invariants'
// combined marginals, all on one worker, writes them to the scratch
// directory and emits every block's key, for the write stage to join.
type correctFn struct {
	Cfg Config
}

// ProcessElement marks its errors for the driver (see marked).
func (f *correctFn) ProcessElement(_ int64, totals func(*[]byte) bool, emit func(int64, []byte)) error {
	return marked(f.process(totals, emit))
}

func (f *correctFn) process(totals func(*[]byte) bool, emit func(int64, []byte)) error {
	st, err := f.Cfg.decode()
	if err != nil {
		return err
	}
	n := len(f.Cfg.Keeps)
	xMarg := make([][]float64, n)
	inv := make([]estimate.Invariant, n)
	for i, k := range f.Cfg.Keeps {
		size := st.s.CuboidSize(domain.Cuboid(k))
		xMarg[i] = make([]float64, size)
		inv[i] = estimate.Invariant{Cuboid: domain.Cuboid(k), Counts: make([]float64, size)}
	}
	var p []byte
	for totals(&p) {
		if len(p) == 0 {
			continue // gatherMarginals' empty element
		}
		i, a, err := decodeKeyedMarginal(p)
		if err != nil || i >= n || a.Lo+len(a.Noisy) > len(xMarg[i]) || len(a.Exact) != len(a.Noisy) {
			return fmt.Errorf("corrupt marginal of invariant %d", i)
		}
		for j := range a.Noisy {
			xMarg[i][a.Lo+j] += a.Noisy[j]
			inv[i].Counts[a.Lo+j] += a.Exact[j]
		}
	}
	var out []byte
	if f.Cfg.Sensitivity > 0 && n > 0 {
		corr, err := estimate.Corrections(st.s, st.c, xMarg, inv)
		if err != nil {
			return err
		}
		for _, c := range corr {
			out = binary.AppendUvarint(out, uint64(c.Keep))
			out = binary.AppendUvarint(out, uint64(len(c.Delta)))
			out = appendFloats(out, c.Delta)
		}
	}
	if err := fileio.WriteFileAtomic(filepath.Join(f.Cfg.Scratch, correctionsName), out); err != nil {
		return err
	}
	for b := range st.blocks {
		emit(int64(b), nil)
	}
	return nil
}

// correctionsName is the file of the corrections in the scratch directory.
const correctionsName = "corrections.bin"

// keyMarginalFn sends every combined marginal to one worker, its index in
// front.
type keyMarginalFn struct{}

func (keyMarginalFn) ProcessElement(i int, a margAcc, emit func(int64, []byte)) {
	emit(0, append(binary.AppendUvarint(nil, uint64(i)), encodeMarginal(a.Lo, a.Noisy, a.Exact)...))
}

// decodeKeyedMarginal decodes keyMarginalFn's element.
func decodeKeyedMarginal(p []byte) (int, margAcc, error) {
	i, n := binary.Uvarint(p)
	if n <= 0 {
		return 0, margAcc{}, errors.New("corrupt marginal")
	}
	a, err := margCombine{}.AddInput(margAcc{}, p[n:])
	return int(i), a, err
}

func decodeCorrections(b []byte) ([]estimate.Correction, error) {
	var out []estimate.Correction
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
		out = append(out, estimate.Correction{Keep: domain.Cuboid(k), Delta: d})
		b = b[end:]
	}
	return out, nil
}

// writeFn adds the corrections to a noisy block and writes it as a shard
// of the output. Its input is the block's key grouped with the noise
// stage's and the corrections stage's signals, so it runs once both are
// done; both leave their data in the scratch directory. (A side input
// would do the same, but Prism, the in-process runner, polls without
// pause while a stage that reads a side input runs: measured, a second of
// CPU for every second such a stage takes.)
type writeFn struct {
	Cfg  Config
	st   *state
	corr []estimate.Correction
	read bool
}

func (f *writeFn) Setup() error {
	var err error
	f.st, err = f.Cfg.decode()
	return err
}

// ProcessElement marks its errors for the driver (see marked).
func (f *writeFn) ProcessElement(ctx context.Context, b int64, _ func(*[]byte) bool, done func(int)) error {
	if err := f.process(ctx, b); err != nil {
		return marked(err)
	}
	done(1)
	return nil
}

func (f *writeFn) process(ctx context.Context, b int64) error {
	data, err := os.ReadFile(filepath.Join(f.Cfg.Scratch, noisyFile(b)))
	if err != nil {
		return fmt.Errorf("block %d: %w", b, err)
	}
	x, err := decodeFloats(data)
	if err != nil {
		return fmt.Errorf("block %d: %w", b, err)
	}
	if !f.read {
		corr, err := os.ReadFile(filepath.Join(f.Cfg.Scratch, correctionsName))
		if err != nil {
			return err
		}
		if f.corr, err = decodeCorrections(corr); err != nil {
			return err
		}
		f.read = true
	}
	lo := int(b) * BlockSize
	for _, c := range f.corr {
		cu := newCursor(f.st.s, f.st.c, c.Keep, lo)
		for i := range x {
			x[i] += c.Delta[cu.k]
			cu.inc()
		}
	}
	moe := f.Cfg.MOE90
	return writePart(ctx, f.st.s, domain.ViewOf(f.st.c), f.Cfg.Stage, "", int(b), x, func(int) float64 { return moe }, tablefile.Format(f.Cfg.Job.Format), false)
}
