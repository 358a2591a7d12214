package pipeline

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/fileio"
	"github.com/knowdp/knowdp/internal/tablefile"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/release"
)

// A workload release on the cluster: the sources (the invariants, then the
// measurements, as release.WorkloadPlan numbers them) are counted block by
// block; each measurement's block gets its noise; each block emits its
// marginals on the margins the tables' estimates need, combined per
// (source, margin): those on a proper part of a table's dimensions written,
// all together, to the scratch directory, those on a whole table cut at
// its blocks (Pair.Blocked); and each block of each table is its estimate,
// Σ coef · broadcast(marginal), plus, where the table is itself a source,
// that source's block times its coefficient (the local term, read from the
// scratch directory rather than moved through the runner).

func init() {
	register.DoFn4x1[context.Context, int64, func(*[]byte) bool, func(int, []byte), error](&sourceFn{})
	register.DoFn4x1[context.Context, int64, func(*[]byte) bool, func(int), error](&tableFn{})
	register.DoFn3x1[int64, func(*[]byte) bool, func(int64, []byte), error](&publishFn{})
	register.DoFn4x0[int, margAcc, func(int64, []byte), func(int64, []byte)](&routeFn{})
}

// SourceNoise is the noise of one source of a workload: none for an
// invariant; for a measurement, Measurement (number Index of the release),
// whose noise is Measurement.Noise().
type SourceNoise struct {
	Measured    bool
	Index       int
	Measurement release.Measurement
}

// TableTerms is one table of a workload and its estimate (see
// release.WorkloadPlan.Terms): Pair indexes the combined marginal
// Config.Pairs[Pair] of a term, or is -1 for the local term.
type TableTerms struct {
	Cuboid uint64
	Stem   string
	MOE90  float64
	Terms  []Term
}

// Term is one term of a table's estimate.
type Term struct {
	Source int
	Coef   float64
	Pair   int
}

// Pair is a marginal some table's estimate needs: source Source's counts
// summed onto Margin. A marginal on the whole of table Table's cuboid
// (Blocked: a table estimated from a larger measurement, or a public table
// from a larger invariant) is as large as the table: it is combined block
// by block of the table and joined to the table's blocks, never gathered
// on one worker.
type Pair struct {
	Source  int
	Margin  uint64
	Blocked bool
	Table   int
}

// planWorkload plans a workload released block by block from its plan: its
// sources, their noise, every table's estimate and the privacy story.
func (pl *Plan) planWorkload(wp *release.WorkloadPlan) error {
	s, jb := pl.spec.Schema, pl.jb
	pl.mode = ModeWorkload
	cfg := &pl.cfg
	nInv := len(wp.Release.Invariants)
	cfg.Counted, cfg.Noise = nil, nil
	for i := range wp.NumSources() {
		cfg.Counted = append(cfg.Counted, uint64(wp.Source(i)))
		sn := SourceNoise{}
		if i >= nInv {
			sn = SourceNoise{Measured: true, Index: i - nInv, Measurement: wp.Release.Measurements[i-nInv]}
		}
		cfg.Noise = append(cfg.Noise, sn)
	}
	cfg.Local = make([]bool, wp.NumSources())
	pairs := map[Pair]int{}
	stems := jb.tableStems(s)
	story := *wp.Release
	story.Seeded = pl.spec.Seeded
	meta := story.Metadata()
	for t, tab := range wp.Release.Tables {
		tt := TableTerms{Cuboid: uint64(tab.Cuboid), Stem: stems[t], MOE90: tab.CellMOE90()}
		for _, term := range wp.Terms(t) {
			x := Term{Source: term.Source, Coef: term.Coef, Pair: -1}
			if src := wp.Source(term.Source); term.Margin == src && src == tab.Cuboid {
				cfg.Local[term.Source] = true
			} else {
				p := Pair{Source: term.Source, Margin: uint64(term.Margin), Table: -1}
				if term.Margin == tab.Cuboid {
					p.Blocked, p.Table = true, t
				}
				k, ok := pairs[p]
				if !ok {
					k = len(cfg.Pairs)
					pairs[p] = k
					cfg.Pairs = append(cfg.Pairs, p)
				}
				x.Pair = k
			}
			tt.Terms = append(tt.Terms, x)
		}
		cfg.Tables = append(cfg.Tables, tt)
		meta.Tables[t].File = tableFile(stems[t], s.CuboidSize(tab.Cuboid), jb.format)
	}
	return pl.setSidecar(meta)
}

// buildWorkload adds the stages after the count of a workload release.
func buildWorkload(s beam.Scope, cfg Config, partials beam.PCollection) {
	domain := beam.ParDo(s, &domainFn{Cfg: cfg}, beam.Impulse(s))
	grouped := beam.GroupByKey(s, beam.Flatten(s, domain, partials))
	margs := beam.ParDo(s, &sourceFn{Cfg: cfg}, grouped)
	totals := beam.CombinePerKey(s, &margCombine{}, margs)
	gathered, blocked := beam.ParDo2(s, &routeFn{Cfg: cfg}, totals)
	empty := beam.ParDo(s, &emptyFn{}, beam.Impulse(s))
	blocks := beam.ParDo(s, &publishFn{Cfg: cfg}, beam.GroupByKey(s, beam.Flatten(s, gathered, empty)))
	finish(s, beam.ParDo(s, &tableFn{Cfg: cfg}, beam.GroupByKey(s, beam.Flatten(s, blocks, blocked))))
}

// sourceFn sums a source's block from its partial counts, adds a
// measurement's noise, emits the block's marginals on every margin a table
// needs, and keeps the block in the scratch directory if a table is the
// source itself.
type sourceFn struct {
	Cfg   Config
	st    *state
	dists []interface {
		AddTo(r *noise.Rand, xs []float64) error
	}
	// gens holds, per measurement, its seeded generator and the number of
	// block generators split from it so far.
	gens map[int]*blockGen
}

type blockGen struct {
	r    *noise.Rand
	next int
}

func (f *sourceFn) Setup() error {
	var err error
	if f.st, err = f.Cfg.decode(); err != nil {
		return err
	}
	f.dists = make([]interface {
		AddTo(r *noise.Rand, xs []float64) error
	}, len(f.Cfg.Noise))
	for i, sn := range f.Cfg.Noise {
		if sn.Measured {
			if f.dists[i], err = sn.Measurement.Noise(); err != nil {
				return err
			}
		}
	}
	f.gens = map[int]*blockGen{}
	return nil
}

// rand returns the generator of block b of source i, as
// release.Plan.Run derives it: measurement k's generator is the
// (k+1)-th split of the root, and with more than one block, block b's is
// the (b+1)-th split of that.
func (f *sourceFn) rand(i, b int) *noise.Rand {
	if !f.Cfg.Seeded {
		return noise.NewRand()
	}
	k := f.Cfg.Noise[i].Index
	g := f.gens[k]
	if g == nil || b < g.next {
		root := noise.NewSeeded(f.Cfg.Seed)
		g = &blockGen{}
		for range k + 1 {
			g.r = root.Split()
		}
		f.gens[k] = g
	}
	if f.st.counted[i].blocks <= 1 {
		return g.r
	}
	for g.next < b {
		g.r.Split()
		g.next++
	}
	g.next++
	return g.r.Split()
}

// ProcessElement marks its errors for the driver (see marked).
func (f *sourceFn) ProcessElement(ctx context.Context, key int64, parts func(*[]byte) bool, emit func(int, []byte)) error {
	return marked(f.process(ctx, key, parts, emit))
}

func (f *sourceFn) process(ctx context.Context, key int64, parts func(*[]byte) bool, emit func(int, []byte)) error {
	st := f.st
	i, b := st.unkey(key)
	cc := st.counted[i]
	x := make([]float64, blockLen(cc.cells, b))
	var p []byte
	for parts(&p) {
		if err := addSparse(x, p); err != nil {
			return fmt.Errorf("block %d of %s: %w", b, st.s.Format(cc.c), err)
		}
	}
	if d := f.dists[i]; d != nil {
		if err := d.AddTo(f.rand(i, b), x); err != nil {
			return fmt.Errorf("block %d of %s: %w", b, st.s.Format(cc.c), err)
		}
	}
	lo := b * BlockSize
	n := len(f.Cfg.Pairs)
	for k, pr := range f.Cfg.Pairs {
		if pr.Source != i {
			continue
		}
		m, r := marginal(st.s, cc.c, domain.Cuboid(pr.Margin), lo, x)
		if !pr.Blocked {
			emit(k, encodeMarginal(r[0], m, nil))
			continue
		}
		// Cut at the table's blocks, each combined under its own key.
		for c := r[0]; c < r[1]; c = (c/BlockSize + 1) * BlockSize {
			end := min(r[1], (c/BlockSize+1)*BlockSize)
			emit(c/BlockSize*n+k, encodeMarginal(c, m[c-r[0]:end-r[0]], nil))
		}
	}
	if f.Cfg.Local[i] {
		if err := fileio.WriteFileAtomic(filepath.Join(f.Cfg.Scratch, sourceFile(i, b)), appendFloats(make([]byte, 0, 8*len(x)), x)); err != nil {
			return fmt.Errorf("block %d of %s: %w", b, st.s.Format(cc.c), err)
		}
	}
	return ctx.Err()
}

// sourceFile is the name of block b of source i in the scratch directory.
func sourceFile(i, b int) string { return fmt.Sprintf("source-%d-%012d.bin", i, b) }

// routeFn sends a combined marginal on to one worker (publishFn) or, cut
// at the blocks of a table (Pair.Blocked), to the table's block.
type routeFn struct {
	Cfg Config
}

func (f *routeFn) ProcessElement(key int, a margAcc, gathered, blocked func(int64, []byte)) {
	n := len(f.Cfg.Pairs)
	k, b := key%n, key/n
	enc := append(binary.AppendUvarint(nil, uint64(k)), encodeMarginal(a.Lo, a.Noisy, nil)...)
	if pr := f.Cfg.Pairs[k]; pr.Blocked {
		blocked(int64(b)*int64(len(f.Cfg.Tables))+int64(pr.Table), enc)
		return
	}
	gathered(0, enc)
}

// publishFn writes the combined marginals, all of them, to the scratch
// directory, and emits the key of every block of every table (the table
// stage then reads them there: see writeFn for why not a side input). The
// blocked marginals go to the tables' blocks instead.
type publishFn struct {
	Cfg Config
}

// ProcessElement marks its errors for the driver (see marked).
func (f *publishFn) ProcessElement(_ int64, totals func(*[]byte) bool, emit func(int64, []byte)) error {
	return marked(f.process(totals, emit))
}

func (f *publishFn) process(totals func(*[]byte) bool, emit func(int64, []byte)) error {
	st, err := f.Cfg.decode()
	if err != nil {
		return err
	}
	margs := make([][]byte, len(f.Cfg.Pairs))
	var p []byte
	for totals(&p) {
		if len(p) == 0 {
			continue // gatherMarginals' empty element
		}
		k, _, err := decodeKeyedMarginal(p)
		if err != nil || k >= len(margs) {
			return fmt.Errorf("corrupt marginal %d", k)
		}
		margs[k] = slices.Clone(p)
	}
	var out []byte
	for k, m := range margs {
		if f.Cfg.Pairs[k].Blocked {
			continue
		}
		if m == nil {
			return fmt.Errorf("the marginal of %s on %s is missing", st.s.Format(domain.Cuboid(f.Cfg.Counted[f.Cfg.Pairs[k].Source])), st.s.Format(domain.Cuboid(f.Cfg.Pairs[k].Margin)))
		}
		out = binary.AppendUvarint(out, uint64(len(m)))
		out = append(out, m...)
	}
	if err := fileio.WriteFileAtomic(filepath.Join(f.Cfg.Scratch, marginalsName), out); err != nil {
		return err
	}
	n := int64(len(f.Cfg.Tables))
	for t, tab := range f.Cfg.Tables {
		for b := range Blocks(st.s.CuboidSize(domain.Cuboid(tab.Cuboid))) {
			emit(int64(b)*n+int64(t), nil)
		}
	}
	return nil
}

// marginalsName is the file of the combined marginals in the scratch
// directory: each keyMarginalFn element, preceded by its length.
const marginalsName = "marginals.bin"

// readMarginals reads publishFn's file.
func readMarginals(path string, pairs int) ([]margAcc, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := make([]margAcc, pairs)
	for len(b) > 0 {
		n, m := binary.Uvarint(b)
		if m <= 0 || uint64(len(b)-m) < n {
			return nil, errors.New("corrupt marginals file")
		}
		k, a, err := decodeKeyedMarginal(b[m : m+int(n)])
		if err != nil || k >= pairs {
			return nil, errors.New("corrupt marginals file")
		}
		out[k] = a
		b = b[m+int(n):]
	}
	return out, nil
}

// tableFn computes one block of one table from its terms and writes it as
// a shard of the output.
type tableFn struct {
	Cfg   Config
	st    *state
	margs []margAcc // the combined marginals, by pair, once read
}

func (f *tableFn) Setup() error {
	var err error
	f.st, err = f.Cfg.decode()
	return err
}

// ProcessElement marks its errors for the driver (see marked).
func (f *tableFn) ProcessElement(ctx context.Context, key int64, joined func(*[]byte) bool, done func(int)) error {
	if err := f.process(ctx, key, joined); err != nil {
		return marked(err)
	}
	done(1)
	return nil
}

func (f *tableFn) process(ctx context.Context, key int64, joined func(*[]byte) bool) error {
	s := f.st.s
	if f.margs == nil {
		var err error
		if f.margs, err = readMarginals(filepath.Join(f.Cfg.Scratch, marginalsName), len(f.Cfg.Pairs)); err != nil {
			return err
		}
	}
	// The block's own pieces of the blocked marginals, joined to its key.
	blocked := map[int]margAcc{}
	var p []byte
	for joined(&p) {
		if len(p) == 0 {
			continue // publishFn's signal
		}
		k, a, err := decodeKeyedMarginal(p)
		if err != nil || k >= len(f.Cfg.Pairs) || !f.Cfg.Pairs[k].Blocked {
			return fmt.Errorf("corrupt marginal %d", k)
		}
		blocked[k] = a
	}
	n := int64(len(f.Cfg.Tables))
	t, b := int(key%n), int(key/n)
	tab := f.Cfg.Tables[t]
	c := domain.Cuboid(tab.Cuboid)
	cells := s.CuboidSize(c)
	y := make([]float64, blockLen(cells, b))
	lo := b * BlockSize
	for _, term := range tab.Terms {
		if term.Pair < 0 {
			data, err := os.ReadFile(filepath.Join(f.Cfg.Scratch, sourceFile(term.Source, b)))
			if err != nil {
				return fmt.Errorf("block %d of %s: %w", b, s.Format(c), err)
			}
			x, err := decodeFloats(data)
			if err != nil || len(x) != len(y) {
				return fmt.Errorf("block %d of %s: corrupt source block", b, s.Format(c))
			}
			for j, v := range x {
				y[j] += term.Coef * v
			}
			continue
		}
		m := f.margs[term.Pair]
		if f.Cfg.Pairs[term.Pair].Blocked {
			m = blocked[term.Pair]
		}
		cu := newCursor(s, c, domain.Cuboid(f.Cfg.Pairs[term.Pair].Margin), lo)
		for j := range y {
			at := cu.k - m.Lo
			if at < 0 || at >= len(m.Noisy) {
				return errors.New("corrupt marginal: a cell outside its range")
			}
			y[j] += term.Coef * m.Noisy[at]
			cu.inc()
		}
	}
	moe := tab.MOE90
	return writePart(ctx, s, domain.ViewOf(c), f.Cfg.Stage, tab.Stem, b, y, func(int) float64 { return moe }, tablefile.Format(f.Cfg.Job.Format), false)
}
