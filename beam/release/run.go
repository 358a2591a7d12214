package release

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/internal/fileio"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/source"
)

// Spec says what to release, as the flags of knowdp release do.
type Spec struct {
	// Files are the fact table's CSV or Parquet files (shards of one
	// table), or one SQLite database file or postgres:// URL with Table.
	Files []string
	// Table names the table of an SQLite or PostgreSQL database (see
	// source.Spec).
	Table string
	// CountColumn, if set, names a column of non-negative integer counts:
	// each row stands for that many records (see source.WithCountColumn).
	CountColumn string
	Schema      *cube.Schema
	Cuboid      cube.Cuboid
	Exact       []cube.Cuboid
	// Mechanism is Laplace (Epsilon, the default) or Gaussian (Rho, with
	// the equivalent (eps, delta) guarantee stated at Delta), as
	// cube.ReleaseSpec's.
	Mechanism cube.Mechanism
	Epsilon   privacy.Epsilon
	Rho       privacy.Rho
	Delta     float64
	// Seeded makes the noise reproducible from Seed, and the release NOT
	// private.
	Seeded bool
	Seed   uint64
	// Out is the output CSV; the privacy story goes to the same name with
	// .json.
	Out string
}

// InProcessBytesPerCell is the memory a release takes per cell of the
// released cuboid when the pipeline runs in this process (Prism, the
// default runner), rounded up from the measured growth of the peak
// resident memory (5.5 bytes a cell between 4.7*10^6 and 1.7*10^7 cells,
// above about 70 MB; it was 116 bytes while the noisy blocks went through
// the runner): Run refuses a cuboid whose cells would need more than the
// memory available before starting.
const InProcessBytesPerCell = 8

// inProcess reports whether the pipeline runs in this process: no
// --runner, or prism without a job server endpoint.
func inProcess() bool {
	r := ""
	if f := flag.Lookup("runner"); f != nil {
		r = f.Value.String()
	}
	if r != "" && r != "prism" && r != "direct" {
		return false
	}
	if f := flag.Lookup("endpoint"); f != nil && f.Value.String() != "" {
		return false
	}
	return true
}

// checkSize refuses a released cuboid of more than 2^62 cells on any
// runner, and in process one whose cells need more memory than there is.
func checkSize(s *cube.Schema, c cube.Cuboid) error {
	n := uint64(1)
	for _, d := range c.Dims() {
		hi, lo := bits.Mul64(n, uint64(s.Size(d)))
		if hi != 0 || lo > 1<<62 {
			return fmt.Errorf("the cuboid %s has more than 2^62 cells; release a smaller cuboid (--cuboid) or coarsen the schema", s.Format(c))
		}
		n = lo
	}
	if !inProcess() {
		return nil
	}
	hi, need := bits.Mul64(n, InProcessBytesPerCell)
	if hi != 0 || need > math.MaxInt64 {
		need = math.MaxInt64
	}
	if err := cube.CheckMemory(int64(need)); err != nil {
		return fmt.Errorf("releasing the cuboid %s (%d cells) in process would run out of memory (%w); release a smaller cuboid (--cuboid), coarsen the schema, or run on a cluster (--runner)", s.Format(c), n, err)
	}
	return nil
}

// Result describes a finished release.
type Result struct {
	// Plan is the release without its counts (cube.PlanRelease's), Meta
	// its privacy story.
	Plan    *cube.Release
	Meta    cube.Metadata
	Cells   int
	Sidecar string
}

// Run builds the release pipeline, runs it on the runner chosen by Beam's
// flags (--runner, --endpoint, ...; Prism in process by default) and
// writes the CSV and its sidecar, both or neither. The output directory
// must be visible to the workers (workers write one file per block there
// before the driver joins them).
func Run(ctx context.Context, spec Spec) (*Result, error) {
	s := spec.Schema
	if len(spec.Files) == 0 {
		return nil, fmt.Errorf("release: no fact table files")
	}
	if err := checkSize(s, spec.Cuboid); err != nil {
		return nil, err
	}
	rel, err := plan(s, spec)
	if err != nil {
		return nil, err
	}
	sj, err := schemaJSON(s)
	if err != nil {
		return nil, err
	}
	cfg := Config{
		Schema:      sj,
		Cuboid:      uint64(spec.Cuboid),
		Sensitivity: rel.Sensitivity,
		Epsilon:     rel.Epsilon,
		Gaussian:    rel.Mechanism == cube.MechanismGaussian,
		L2:          rel.L2Sensitivity,
		Rho:         rel.Rho,
		MOE90:       cube.FormatExact(rel.CellMOE90()),
		Seeded:      spec.Seeded,
		Seed:        spec.Seed,
		Table:       spec.Table,
		CountColumn: spec.CountColumn,
	}
	for _, v := range rel.Invariants {
		cfg.Keeps = append(cfg.Keeps, uint64(v.Cuboid&spec.Cuboid))
	}
	sidecar := strings.TrimSuffix(spec.Out, filepath.Ext(spec.Out)) + ".json"
	inputs := make([]fileio.Named, 0, len(spec.Files))
	for _, f := range spec.Files {
		if source.IsPostgresURL(f) {
			continue
		}
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("fact table: %w", err)
		}
		inputs = append(inputs, fileio.Named{Flag: "--data", Path: f})
	}
	if err := fileio.CheckOutputs(inputs, []fileio.Named{{Flag: "--out", Path: spec.Out}, {Flag: "sidecar", Path: sidecar}}); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(filepath.Dir(spec.Out), "."+filepath.Base(spec.Out)+".blocks*")
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", spec.Out, err)
	}
	defer removeBlocks(dir)
	// Stopped (the context cancelled, on a signal): remove the blocks at
	// once, even if the runner is slow to return.
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			removeBlocks(dir)
		case <-done:
		}
	}()
	if cfg.Dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	files := slices.Clone(spec.Files)
	for i, f := range files {
		if source.IsPostgresURL(f) {
			continue
		}
		if files[i], err = filepath.Abs(f); err != nil {
			return nil, err
		}
	}

	p, root := beam.NewPipelineWithRoot()
	Build(root, cfg, files)
	if err := beamx.Run(ctx, p); err != nil {
		slog.Debug("release pipeline failed", "report", err)
		return nil, stageError(err)
	}

	cells := s.CuboidSize(spec.Cuboid)
	meta, err := json.MarshalIndent(rel.Metadata(), "", "  ")
	if err != nil {
		return nil, err
	}
	err = fileio.WriteAtomic(spec.Out, func(w io.Writer) error {
		if _, err := io.WriteString(w, Header(s, spec.Cuboid)); err != nil {
			return err
		}
		for b := range Blocks(cells) {
			f, err := os.Open(filepath.Join(dir, BlockFile(int64(b))))
			if err != nil {
				return fmt.Errorf("block %d of the release is missing: %w", b, err)
			}
			_, err = io.Copy(w, f)
			f.Close()
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := fileio.WriteFileAtomic(sidecar, append(meta, '\n')); err != nil {
		os.Remove(spec.Out)
		return nil, err
	}
	return &Result{Plan: rel, Meta: rel.Metadata(), Cells: cells, Sidecar: sidecar}, nil
}

// removeBlocks removes the blocks directory. A worker of an in-process
// runner may still be writing a block when the pipeline is stopped, so
// RemoveAll can find the directory not empty; it is retried (for up to two
// seconds) until the directory is gone, after which no write can recreate
// it (the workers never create directories).
func removeBlocks(dir string) {
	deadline := time.Now().Add(2 * time.Second)
	for {
		os.RemoveAll(dir)
		if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) || time.Now().After(deadline) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
