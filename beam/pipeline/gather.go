package pipeline

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/fileio"
	"github.com/knowdp/knowdp/internal/tablefile"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/release"
)

// gatherKeyFn sends every partial count to one worker, its block's key in
// front.
type gatherKeyFn struct{}

func (gatherKeyFn) ProcessElement(k int64, p []byte, emit func(int64, []byte)) error {
	emit(0, append(binary.AppendUvarint([]byte{tagPartial}, uint64(k)), p...))
	return nil
}

// gatherFn is the one worker of a release that does not split into
// blocks (non-negative or integer tables, tables at the levels of a
// hierarchy, the noisy measurements kept): it sums the partial counts into
// the exact counted cuboids, runs the core's release on them as knowdp
// release does, and writes every table's shards, the privacy story and the
// measurements.
type gatherFn struct {
	Cfg Config
}

// ProcessElement marks its errors for the driver (see marked).
func (f *gatherFn) ProcessElement(ctx context.Context, _ int64, parts func(*[]byte) bool, done func(int)) error {
	if err := f.process(ctx, parts); err != nil {
		return marked(err)
	}
	done(1)
	return nil
}

func (f *gatherFn) process(ctx context.Context, parts func(*[]byte) bool) error {
	st, err := f.Cfg.decode()
	if err != nil {
		return err
	}
	jb, err := parseJob(st.s, f.Cfg.Job)
	if err != nil {
		return err
	}
	counts := make([][]float64, len(st.counted))
	for i, cc := range st.counted {
		counts[i] = make([]float64, cc.cells)
	}
	var p []byte
	var units *gatheredUnits
	if jb.plan.Unit() != nil {
		units = &gatheredUnits{}
	}
	for parts(&p) {
		if len(p) == 0 {
			continue // the element that makes this worker run without rows
		}
		tag := p[0]
		p = p[1:]
		if tag == tagUnit && units != nil {
			if err := units.add(p); err != nil {
				return err
			}
			continue
		} else if tag != tagPartial {
			return errors.New("corrupt gathered element")
		}
		k, n := binary.Uvarint(p)
		if n <= 0 {
			return errors.New("corrupt partial counts")
		}
		i, b := st.unkey(int64(k))
		if i >= len(counts) || b >= st.counted[i].blocks {
			return errors.New("corrupt partial counts: block beyond the cuboid")
		}
		if err := addSparse(counts[i][b*BlockSize:min((b+1)*BlockSize, len(counts[i]))], p[n:]); err != nil {
			return err
		}
	}
	exact := make(map[domain.Cuboid][]float64, len(counts))
	for i, cc := range st.counted {
		exact[cc.c] = counts[i]
	}
	var out *released
	if units != nil {
		out, err = releaseUnits(ctx, st.s, jb, exact, units, f.Cfg.Seeded, f.Cfg.Seed, f.Cfg.Directory, f.Cfg.File)
	} else {
		r := noise.NewRand()
		if f.Cfg.Seeded {
			r = noise.NewSeeded(f.Cfg.Seed)
		}
		out, err = releaseOnOne(ctx, st.s, jb, exact, r, f.Cfg.Directory, f.Cfg.File)
	}
	if err != nil {
		return err
	}
	if err := f.write(ctx, st.s, jb, out); err != nil {
		return err
	}
	if out.measurements != nil {
		if err := fileio.WriteFileAtomic(filepath.Join(f.Cfg.Scratch, measurementsName), out.measurements); err != nil {
			return err
		}
	}
	return fileio.WriteFileAtomic(filepath.Join(f.Cfg.Scratch, sidecarName), out.sidecar)
}

// write writes every table's shards, as many at once as there are CPUs.
func (f *gatherFn) write(ctx context.Context, s *domain.Schema, jb *job, out *released) error {
	type part struct{ t, b int }
	stems := jb.tableStems(s)
	var todo []part
	for t, tab := range out.tables {
		for b := range Blocks(len(tab.counts)) {
			todo = append(todo, part{t, b})
		}
	}
	var (
		mu    sync.Mutex
		first error
		next  = make(chan part)
		wg    sync.WaitGroup
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for p := range next {
				tab := out.tables[p.t]
				x := tab.counts[p.b*BlockSize : min((p.b+1)*BlockSize, len(tab.counts))]
				if err := writePart(ctx, s, tab.view, f.Cfg.Stage, stems[p.t], p.b, x, tab.moe90, tablefile.Format(f.Cfg.Job.Format), tab.integer); err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, p := range todo {
		if ctx.Err() != nil {
			break
		}
		next <- p
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	return first
}

// released is a release computed on one worker: its tables, its privacy
// story and, if asked for, its noisy measurements (JSON).
type released struct {
	tables       []releasedTable
	sidecar      []byte
	measurements []byte
}

type releasedTable struct {
	view    domain.View
	counts  []float64
	moe90   func(cell int) float64
	integer bool
}

// releaseOnOne releases jb from the exact counts of its counted cuboids as
// knowdp release does with the same flags: the same core calls, in the
// same order, from the same generator, so a seeded run writes the same
// tables and privacy story.
func releaseOnOne(ctx context.Context, s *domain.Schema, jb *job, exact map[domain.Cuboid][]float64, r *noise.Rand, directory bool, file string) (*released, error) {
	counts, err := rollUpNeeds(s, jb, exact)
	if err != nil {
		return nil, err
	}
	w, err := jb.plan.Run(ctx, counts, r)
	if err != nil {
		return nil, err
	}
	return describe(s, jb, w, directory, file)
}

// rollUpNeeds returns the counts of the views the plan needs, rolled up
// from the exact counts of their finest-level cuboids.
func rollUpNeeds(s *domain.Schema, jb *job, exact map[domain.Cuboid][]float64) (map[domain.View][]float64, error) {
	counts := make(map[domain.View][]float64)
	for _, v := range jb.plan.Needs() {
		if _, done := counts[v]; done {
			continue
		}
		x, err := s.RollUp(domain.LeafView(v), exact[v.Dims], v)
		if err != nil {
			return nil, err
		}
		counts[v] = x
	}
	return counts, nil
}

// describe returns the release's tables, privacy story (the tables' files
// named as this output names them) and measurements.
func describe(s *domain.Schema, jb *job, w *release.Release, directory bool, file string) (*released, error) {
	out := &released{}
	m := w.Metadata()
	stems := jb.tableStems(s)
	for i, t := range w.Tables {
		out.tables = append(out.tables, releasedTable{view: t.TableView(), counts: t.Counts, moe90: t.CellMOE, integer: t.Integer})
		switch {
		case stems[i] != "":
			m.Tables[i].File = tableFile(stems[i], len(t.Counts), jb.format)
		case directory:
			m.Tables[i].File = onlyTableFile(len(t.Counts), jb.format)
		default:
			m.Tables[i].File = file
		}
	}
	if jb.keep {
		saved, err := w.SaveMeasurements()
		if err != nil {
			return nil, err
		}
		if out.measurements, err = json.MarshalIndent(saved, "", "  "); err != nil {
			return nil, err
		}
		out.measurements = append(out.measurements, '\n')
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	out.sidecar = append(b, '\n')
	return out, nil
}

// tableFile is the name release.json gives a table of a directory: its
// file, or its directory of shards.
func tableFile(stem string, cells int, f tablefile.Format) string {
	if Blocks(cells) == 1 {
		return stem + f.Ext()
	}
	return stem + "/"
}

// onlyTableFile is the name release.json gives the only table of a
// directory: its one part, or its parts.
func onlyTableFile(cells int, f tablefile.Format) string {
	if Blocks(cells) == 1 {
		return partFile("", 1, 0, f)
	}
	return "part-*" + f.Ext()
}

// readScratch reads a file the one worker left in the scratch directory.
func readScratch(dir, name string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return nil, fmt.Errorf("the release's %s is missing: %w", name, err)
	}
	return b, nil
}
