package release

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/internal/fileio"
	"github.com/knowdp/knowdp/privacy"
)

// Spec says what to release, as the flags of knowdp release do.
type Spec struct {
	// Files are the fact table's CSV or Parquet files (shards of one
	// table).
	Files   []string
	Schema  *cube.Schema
	Cuboid  cube.Cuboid
	Exact   []cube.Cuboid
	Epsilon privacy.Epsilon
	// Seeded makes the noise reproducible from Seed, and the release NOT
	// private.
	Seeded bool
	Seed   uint64
	// Out is the output CSV; the privacy story goes to the same name with
	// .json.
	Out string
	// FullPrecision writes the counts with every float64 digit instead of
	// the 6 decimals of knowdp release (see Config.FullPrecision).
	FullPrecision bool
}

// Result describes a finished release.
type Result struct {
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
	rel, err := cube.PlanRelease(s, cube.ReleaseSpec{Epsilon: spec.Epsilon, Exact: spec.Exact, Cuboid: spec.Cuboid}, spec.Seeded)
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
		MOE90:       cube.FormatCount(rel.CellMOE90()),
		Seeded:      spec.Seeded,
		Seed:        spec.Seed,

		FullPrecision: spec.FullPrecision,
	}
	for _, v := range rel.Invariants {
		cfg.Keeps = append(cfg.Keeps, uint64(v.Cuboid&spec.Cuboid))
	}
	for _, f := range spec.Files {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("fact table: %w", err)
		}
	}
	dir, err := os.MkdirTemp(filepath.Dir(spec.Out), "."+filepath.Base(spec.Out)+".blocks*")
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", spec.Out, err)
	}
	defer os.RemoveAll(dir)
	if cfg.Dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	for i, f := range spec.Files {
		if spec.Files[i], err = filepath.Abs(f); err != nil {
			return nil, err
		}
	}

	p, root := beam.NewPipelineWithRoot()
	Build(root, cfg, spec.Files)
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
	sidecar := strings.TrimSuffix(spec.Out, filepath.Ext(spec.Out)) + ".json"
	if err := fileio.WriteFileAtomic(sidecar, append(meta, '\n')); err != nil {
		os.Remove(spec.Out)
		return nil, err
	}
	return &Result{Meta: rel.Metadata(), Cells: cells, Sidecar: sidecar}, nil
}
