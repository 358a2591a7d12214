package pipeline

// Releases per privacy unit (release.Unit): the rows of a unit may lie in
// any file, so they are brought together by a GroupByKey on the unit's
// identifier, as Privacy on Beam bounds a privacy ID's contributions. Then:
//
//   - unitReadFn reads each file's unit column and the dimensions the
//     release needs, and emits, per unit, its rows' cells in that file
//     (unit.Cells numbers them, as knowdp release does);
//   - GroupByKey on the unit;
//   - unitBoundFn adds up a unit's cells and keeps at most K of its rows
//     with unit.Key.Keep, the key drawn as knowdp release draws it (a
//     seeded run) or by the driver (Config.UnitKey), and sends the kept
//     cells and the unit's number of rows to the one worker;
//   - the one worker (gatherFn) counts the exact counts of every view on
//     all the rows (the invariants), the bounded counts of the measured
//     views, the histogram of rows per unit, and calls
//     release.Plan.RunBounded, which draws the rest of the randomness as
//     knowdp release does: a seeded run writes the same release.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/source"
	"github.com/knowdp/knowdp/unit"
)

func init() {
	register.DoFn3x1[context.Context, string, func(string, []byte), error](&unitReadFn{})
	register.DoFn3x1[string, func(*[]byte) bool, func(int64, []byte), error](&unitBoundFn{})
	register.Emitter2[string, []byte]()
}

// Tags of the elements the one worker of a release gathers.
const (
	tagPartial = 0 // a partial count of a counted cuboid
	tagUnit    = 1 // a unit's kept cells and its number of rows
)

// buildUnits adds the reading, grouping and bounding of the units and
// returns what they send to the one worker (key 0).
func buildUnits(s beam.Scope, cfg Config, paths beam.PCollection) beam.PCollection {
	s = s.Scope("units")
	cells := beam.ParDo(s, &unitReadFn{Cfg: cfg}, paths)
	return beam.ParDo(s, &unitBoundFn{Cfg: cfg}, beam.GroupByKey(s, cells))
}

// unitState is what the unit stages decode from Config.
type unitState struct {
	s     *domain.Schema
	jb    *job
	cells unit.Cells
	k     int
}

func (cfg Config) unitState() (*unitState, error) {
	s, err := domain.ParseSchema(cfg.Schema)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	jb, err := parseJob(s, cfg.Job)
	if err != nil {
		return nil, err
	}
	u := jb.plan.Unit()
	if u == nil {
		return nil, errors.New("the release has no privacy unit")
	}
	cells, err := unit.NewCells(s, jb.plan.UnitDims())
	if err != nil {
		return nil, err
	}
	return &unitState{s: s, jb: jb, cells: cells, k: u.MaxRows}, nil
}

// unitReadFn reads one file's rows as (unit, cells): per unit, the cells
// its rows fall in and how many, as uvarint pairs (cell, count).
type unitReadFn struct {
	Cfg Config
	us  *unitState
}

func (f *unitReadFn) Setup() error {
	var err error
	f.us, err = f.Cfg.unitState()
	return err
}

// ProcessElement marks its errors for the driver (see marked).
func (f *unitReadFn) ProcessElement(ctx context.Context, path string, emit func(string, []byte)) error {
	return marked(f.process(ctx, path, emit))
}

func (f *unitReadFn) process(ctx context.Context, path string, emit func(string, []byte)) error {
	us := f.us
	t, err := source.Open(ctx, source.Spec{Path: path, Table: f.Cfg.Table, CountColumn: f.Cfg.CountColumn})
	if err != nil {
		return err
	}
	defer t.Close()
	dims := us.cells.Dims().Dims()
	names := make([]string, 0, len(dims)+1)
	for _, d := range dims {
		names = append(names, us.s.Dim(d).Name)
	}
	names = append(names, us.jb.plan.Unit().Column)
	if err := t.Select(ctx, names); err != nil {
		return err
	}
	held := map[string]map[uint64]uint64{}
	pos := make([]int, len(dims))
	flush := func() {
		for id, m := range held {
			var out []byte
			for c, n := range m {
				out = binary.AppendUvarint(binary.AppendUvarint(out, c), n)
			}
			emit(id, out)
		}
		clear(held)
	}
	nheld := 0
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
		for i, d := range dims {
			x, ok := us.s.ValueIndex(d, string(rec[i]))
			if !ok {
				return domainErr(t, us.s, i, d, rec[i])
			}
			pos[i] = x
		}
		if w == 0 {
			continue
		}
		c, err := us.cells.Index(pos)
		if err != nil {
			return err
		}
		id := string(rec[len(dims)])
		m := held[id]
		if m == nil {
			m = map[uint64]uint64{}
			held[id] = m
		}
		if _, ok := m[c]; !ok {
			nheld++
		}
		m[c] += uint64(w)
		if nheld >= maxHeldCells {
			flush()
			nheld = 0
		}
	}
	flush()
	return nil
}

// unitBoundFn bounds one unit: its cells from every file added up and
// sorted, then at most K of its rows kept (unit.Key.Keep), sent to the one
// worker with the unit's number of rows.
type unitBoundFn struct {
	Cfg Config
	us  *unitState
	key unit.Key
}

func (f *unitBoundFn) Setup() error {
	var err error
	if f.us, err = f.Cfg.unitState(); err != nil {
		return err
	}
	f.key, err = f.Cfg.unitKey()
	return err
}

// unitKey returns the bounding key: in a seeded run the first draw of the
// seed's generator, as knowdp release draws it; otherwise the driver's.
func (cfg Config) unitKey() (unit.Key, error) {
	if cfg.Seeded {
		return unit.NewKey(noise.NewSeeded(cfg.Seed)), nil
	}
	if len(cfg.UnitKey) != 32 {
		return unit.Key{}, errors.New("the bounding key is missing")
	}
	return unit.KeyFromBytes([32]byte(cfg.UnitKey), false), nil
}

// ProcessElement marks its errors for the driver (see marked).
func (f *unitBoundFn) ProcessElement(id string, parts func(*[]byte) bool, emit func(int64, []byte)) error {
	return marked(f.process(id, parts, emit))
}

func (f *unitBoundFn) process(id string, parts func(*[]byte) bool, emit func(int64, []byte)) error {
	sum := map[uint64]int64{}
	var p []byte
	for parts(&p) {
		for len(p) > 0 {
			c, n := binary.Uvarint(p)
			if n <= 0 {
				return errors.New("corrupt unit cells")
			}
			w, m := binary.Uvarint(p[n:])
			if m <= 0 {
				return errors.New("corrupt unit cells")
			}
			p = p[n+m:]
			sum[c] += int64(w)
		}
	}
	cells := slices.Sorted(func(yield func(uint64) bool) {
		for c := range sum {
			if !yield(c) {
				return
			}
		}
	})
	counts := make([]int64, len(cells))
	total := int64(0)
	for i, c := range cells {
		counts[i] = sum[c]
		total += counts[i]
	}
	kept, err := f.key.Keep(id, counts, f.us.k)
	if err != nil {
		return err
	}
	out := []byte{tagUnit}
	out = binary.AppendUvarint(out, uint64(len(id)))
	out = append(out, id...)
	out = binary.AppendUvarint(out, uint64(total))
	for i, c := range cells {
		if kept[i] > 0 {
			out = binary.AppendUvarint(binary.AppendUvarint(out, c), uint64(kept[i]))
		}
	}
	emit(0, out)
	return nil
}

// gatheredUnits are the units the one worker received.
type gatheredUnits struct {
	ids     []string
	perUnit []int64
	cells   [][]uint64
	counts  [][]int64
}

// add decodes one unit's element (after its tag).
func (g *gatheredUnits) add(p []byte) error {
	n, k := binary.Uvarint(p)
	if k <= 0 || uint64(len(p)-k) < n {
		return errors.New("corrupt unit element")
	}
	id := string(p[k : k+int(n)])
	p = p[k+int(n):]
	total, k := binary.Uvarint(p)
	if k <= 0 {
		return errors.New("corrupt unit element")
	}
	p = p[k:]
	var cs []uint64
	var ns []int64
	for len(p) > 0 {
		c, a := binary.Uvarint(p)
		if a <= 0 {
			return errors.New("corrupt unit element")
		}
		w, b := binary.Uvarint(p[a:])
		if b <= 0 {
			return errors.New("corrupt unit element")
		}
		p = p[a+b:]
		cs, ns = append(cs, c), append(ns, int64(w))
	}
	g.ids, g.perUnit = append(g.ids, id), append(g.perUnit, int64(total))
	g.cells, g.counts = append(g.cells, cs), append(g.counts, ns)
	return nil
}

// releaseUnits releases jb per unit on the one worker: the views it needs
// on all the rows (exact), the measured views on the kept rows, and the
// histogram of rows per unit, through release.Plan.RunBounded with the
// generator positioned as knowdp release's after its bounding key.
func releaseUnits(ctx context.Context, s *domain.Schema, jb *job, exact map[domain.Cuboid][]float64, g *gatheredUnits, seeded bool, seed uint64, directory bool, file string) (*released, error) {
	counts, err := rollUpNeeds(s, jb, exact)
	if err != nil {
		return nil, err
	}
	cells, err := unit.NewCells(s, jb.plan.UnitDims())
	if err != nil {
		return nil, err
	}
	var kept *unit.Rows
	if len(g.ids) > 0 {
		// Units with no kept row (none: K >= 1) would have no cells.
		if kept, err = unit.NewRows(cells, g.ids, g.cells, g.counts); err != nil {
			return nil, err
		}
	} else if kept, err = unit.NewRows(cells, nil, nil, nil); err != nil {
		return nil, err
	}
	bounded, err := kept.Counts(jb.plan.Measured())
	if err != nil {
		return nil, err
	}
	r := noise.NewRand()
	if seeded {
		r = noise.NewSeeded(seed)
	}
	unit.NewKey(r) // the bounding key's draw (the workers used it)
	w, err := jb.plan.RunBounded(ctx, counts, bounded, unit.NewHistogram(g.perUnit, jb.plan.Unit().MaxRows), seeded, r)
	if err != nil {
		return nil, err
	}
	return describe(s, jb, w, directory, file)
}
