package unit

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/sensitivity"
)

// Rows are the rows of a fact table grouped by privacy unit: for each unit,
// its identifier and how many rows it has in each cell (numbered by Cells)
// it has rows in. They are private data: nothing about them may be
// published except through a mechanism.
type Rows struct {
	cells Cells
	ids   []string
	// Unit u has the cells cellOf[start[u]:start[u+1]] (ascending,
	// distinct) with counts[...] rows each (> 0).
	start  []int
	cellOf []uint64
	counts []int64
}

// NewRows builds Rows from units given as identifiers with their cells and
// counts (for tests and for callers that group rows themselves). Cells
// need not be sorted or distinct; counts must be positive.
func NewRows(cells Cells, ids []string, unitCells [][]uint64, unitCounts [][]int64) (*Rows, error) {
	if len(unitCells) != len(ids) || len(unitCounts) != len(ids) {
		return nil, fmt.Errorf("unit: %d identifiers, %d cell lists and %d count lists", len(ids), len(unitCells), len(unitCounts))
	}
	var units []uint32
	var cell []uint64
	var weights []int64
	seen := map[string]bool{}
	for u, id := range ids {
		if seen[id] {
			return nil, fmt.Errorf("unit: identifier %q given twice", id)
		}
		seen[id] = true
		if len(unitCells[u]) != len(unitCounts[u]) {
			return nil, fmt.Errorf("unit %q: %d cells and %d counts", id, len(unitCells[u]), len(unitCounts[u]))
		}
		for i, x := range unitCells[u] {
			if w := unitCounts[u][i]; w <= 0 {
				return nil, fmt.Errorf("unit %q: count %d of cell %d is not positive", id, w, x)
			}
			units, cell, weights = append(units, uint32(u)), append(cell, x), append(weights, unitCounts[u][i])
		}
	}
	return group(cells, slices.Clone(ids), len(units), func(i int) uint32 { return units[i] },
		func(i int) uint64 { return cell[i] }, func(i int) int64 { return weights[i] }), nil
}

// Cells returns the numbering of the rows' cells.
func (r *Rows) Cells() Cells { return r.cells }

// NumUnits returns the number of units.
func (r *Rows) NumUnits() int { return len(r.ids) }

// Unit returns unit u's identifier and its cells and row counts (ascending
// cells). The slices belong to r.
func (r *Rows) Unit(u int) (id string, cells []uint64, counts []int64) {
	a, b := r.start[u], r.start[u+1]
	return r.ids[u], r.cellOf[a:b], r.counts[a:b]
}

// RowsPerUnit returns the number of rows of every unit.
func (r *Rows) RowsPerUnit() []int64 {
	out := make([]int64, len(r.ids))
	for u := range r.ids {
		for _, w := range r.counts[r.start[u]:r.start[u+1]] {
			out[u] += w
		}
	}
	return out
}

// Bound returns the rows with at most k rows per unit: a unit with more
// keeps k of them chosen uniformly at random (every set of k of its rows
// equally likely), with the generator key.Unit(id), so the choice depends
// on the unit's rows and the key only. Units are bounded in parallel.
func (r *Rows) Bound(ctx context.Context, k int, key Key) (*Rows, error) {
	if k < 1 || k > sensitivity.MaxUnitRows {
		return nil, fmt.Errorf("unit: at most k rows per unit needs k in [1, %d], got %d", sensitivity.MaxUnitRows, k)
	}
	n := len(r.ids)
	kept := make([][]int64, n) // nil: the unit keeps every row
	workers := min(runtime.GOMAXPROCS(0), max(1, n/1024))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var sc scratch
			for u := w; u < n; u += workers {
				if u%4096 == 0 && ctx.Err() != nil {
					mu.Lock()
					firstErr = ctx.Err()
					mu.Unlock()
					return
				}
				id, _, counts := r.Unit(u)
				total := int64(0)
				for _, c := range counts {
					total += c
				}
				if total <= int64(k) {
					continue
				}
				kept[u] = key.keep(&sc, id, counts, k)
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	out := &Rows{cells: r.cells, ids: r.ids, start: make([]int, n+1),
		cellOf: make([]uint64, 0, len(r.cellOf)), counts: make([]int64, 0, len(r.counts))}
	for u := range n {
		_, cells, counts := r.Unit(u)
		for i, x := range cells {
			c := counts[i]
			if kept[u] != nil {
				c = kept[u][i]
			}
			if c > 0 {
				out.cellOf, out.counts = append(out.cellOf, x), append(out.counts, c)
			}
		}
		out.start[u+1] = len(out.cellOf)
	}
	return out, nil
}

// Counts returns the counts of the rows in each view, row-major over the
// view's cells, keyed by the view in normal form (as cube.AggregateViews
// keys them). Every view's dimensions must be among the rows' Cells.
func (r *Rows) Counts(views []domain.View) (map[domain.View][]float64, error) {
	s := r.cells.s
	out := make(map[domain.View][]float64, len(views))
	for _, v := range views {
		if err := s.CheckView(v); err != nil {
			return nil, fmt.Errorf("unit: %w", err)
		}
		v = v.Normal()
		if _, done := out[v]; done {
			continue
		}
		if v.Dims&^r.cells.set != 0 {
			return nil, fmt.Errorf("unit: view %s has dimensions the rows were not read over (%s)", s.FormatView(v), s.Format(r.cells.set))
		}
		// The stride of each of the rows' dimensions in the leaf cuboid
		// (0 for a dimension the view does not have).
		stride := make([]int, len(r.cells.dims))
		m := 1
		for j := len(r.cells.dims) - 1; j >= 0; j-- {
			if v.Dims.Has(r.cells.dims[j]) {
				stride[j] = m
				m *= r.cells.sizes[j]
			}
		}
		leaf := make([]float64, m)
		for i, x := range r.cellOf {
			cell := 0
			for j := len(r.cells.dims) - 1; j >= 0; j-- {
				size := uint64(r.cells.sizes[j])
				cell += int(x%size) * stride[j]
				x /= size
			}
			leaf[cell] += float64(r.counts[i])
		}
		if v.Flat() {
			out[v] = leaf
			continue
		}
		var err error
		if out[v], err = s.RollUp(domain.LeafView(v), leaf, v); err != nil {
			return nil, fmt.Errorf("unit: %w", err)
		}
	}
	return out, nil
}

// Key keys the generators that choose which rows each unit keeps.
type Key struct {
	k      [32]byte
	seeded bool
}

// NewKey draws a key from r: 256 bits, its next four 64-bit words. A key
// from a seeded generator is seeded (the bounding is then reproducible and
// not private, like the rest of the release).
func NewKey(r *noise.Rand) Key {
	var k Key
	for i := 0; i < 32; i += 8 {
		binary.LittleEndian.PutUint64(k.k[i:], r.Uint64())
	}
	k.seeded = r.Seeded()
	return k
}

// KeyFromBytes rebuilds a key from its bytes (Bytes), for a pipeline that
// sends it to its workers.
func KeyFromBytes(b [32]byte, seeded bool) Key { return Key{k: b, seeded: seeded} }

// Bytes returns the key's 256 bits. For a release that is not seeded they
// are secret: whoever has them can tell which rows were kept.
func (k Key) Bytes() [32]byte { return k.k }

// Seeded reports whether the key came from a seeded generator.
func (k Key) Seeded() bool { return k.seeded }

// Unit returns the generator of the unit with identifier id: ChaCha8 keyed
// with SHA-256 of the key, the identifier's length (8 bytes, little endian)
// and the identifier.
func (k Key) Unit(id string) *rand.ChaCha8 {
	return rand.NewChaCha8(k.seed(id))
}

func (k Key) seed(id string) [32]byte {
	b := make([]byte, 0, 40+len(id))
	b = append(b, k.k[:]...)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(id)))
	b = append(b, id...)
	return sha256.Sum256(b)
}

// scratch is what keep reuses from one unit to the next.
type scratch struct {
	src    rand.ChaCha8
	chosen map[uint64]struct{}
	pos    []uint64
}

// Keep returns how many of a unit's rows in each of its cells are kept
// when it keeps at most k: counts itself when they add up to k or less,
// otherwise k rows chosen uniformly at random by Floyd's algorithm with the
// unit's generator, the rows numbered cell by cell in the order given
// (ascending cells, as Rows holds them). A pipeline that groups rows by
// unit calls it with the same key, identifier, cells and counts to keep the
// same rows.
func (k Key) Keep(id string, counts []int64, max int) ([]int64, error) {
	if max < 1 || max > sensitivity.MaxUnitRows {
		return nil, fmt.Errorf("unit: at most k rows per unit needs k in [1, %d], got %d", sensitivity.MaxUnitRows, max)
	}
	total := int64(0)
	for _, c := range counts {
		if c < 0 {
			return nil, errors.New("unit: negative row count")
		}
		total += c
	}
	if total <= int64(max) {
		return slices.Clone(counts), nil
	}
	var sc scratch
	return k.keep(&sc, id, counts, max), nil
}

// keep chooses k of the unit's rows (more than k of them).
func (k Key) keep(sc *scratch, id string, counts []int64, max int) []int64 {
	total := uint64(0)
	for _, c := range counts {
		total += uint64(c)
	}
	sc.src.Seed(k.seed(id))
	src := &sc.src
	if sc.chosen == nil {
		sc.chosen = make(map[uint64]struct{}, max)
	}
	chosen := sc.chosen
	clear(chosen)
	// Floyd: for j = total-max .. total-1, pick t in [0, j]; take t unless
	// it is taken already, then j. Every max-subset is equally likely.
	for j := total - uint64(max); j < total; j++ {
		t := uint64n(src, j+1)
		if _, dup := chosen[t]; dup {
			t = j
		}
		chosen[t] = struct{}{}
	}
	pos := sc.pos[:0]
	for t := range chosen {
		pos = append(pos, t)
	}
	slices.Sort(pos)
	sc.pos = pos
	out := make([]int64, len(counts))
	i, end := 0, uint64(0)
	for c, n := range counts {
		end += uint64(n)
		for i < len(pos) && pos[i] < end {
			out[c]++
			i++
		}
	}
	return out
}

// uint64n returns a uniform integer in [0, n), n > 0, by Lemire's method
// (the same as noise.Rand.Uint64N), so that the choice is fixed by the
// ChaCha8 stream alone.
func uint64n(src *rand.ChaCha8, n uint64) uint64 {
	hi, lo := bits.Mul64(src.Uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(src.Uint64(), n)
		}
	}
	return hi
}
