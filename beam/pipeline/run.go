package pipeline

import (
	"bufio"
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
	"github.com/parquet-go/parquet-go"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/fileio"
	"github.com/knowdp/knowdp/internal/tablefile"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/release"
	"github.com/knowdp/knowdp/sidecar"
	"github.com/knowdp/knowdp/source"
	"github.com/knowdp/knowdp/unit"
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
	Schema      *domain.Schema
	// Job is the release the flags ask for.
	Job Job
	// Seeded makes the noise reproducible from Seed, and the release NOT
	// private.
	Seeded bool
	Seed   uint64
	// Out is the output: a CSV file (one table, the privacy story beside it
	// with .json) or a new directory of shards and release.json.
	Out string
	// Measurements, if set, receives the noisy measurements of a workload
	// (Job.KeepMeasurements).
	Measurements string
	// Force replaces outputs that exist (atomically); without it an
	// output that exists is refused before anything runs.
	Force bool
	// WorkerMemory is the memory of one worker, in bytes, which bounds a
	// release computed on one worker when the pipeline runs on a cluster
	// (in process, the memory of this machine does).
	WorkerMemory int64
}

// InProcessBytesPerCell is the memory a release takes per cell of the
// released cuboid when the pipeline runs in this process (Prism, the
// default runner), rounded up from the measured growth of the peak
// resident memory (5.5 bytes a cell between 4.7*10^6 and 1.7*10^7 cells,
// above about 70 MB): Run refuses a cuboid whose cells would need more
// than the memory available before starting.
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

// checkSize refuses a cuboid of more than 2^62 cells on any runner, and in
// process one whose cells need more memory than there is.
func checkSize(s *domain.Schema, c domain.Cuboid) error {
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
	// Sidecar is the privacy story as written (sidecar.Metadata, for one
	// table as for several), and SidecarPath where.
	Sidecar     []byte
	SidecarPath string
	// Files are the files written, relative to Out for a directory.
	Files []string
	// Directory says Out is a directory of shards; Workload that Sidecar
	// is a release.WorkloadMetadata (several tables, or tables at levels).
	Directory, Workload bool
	// Mode is the pipeline that ran (ModeCuboid, ...); Tables the number
	// of tables released and Cells their cells.
	Mode   int
	Tables int
	Cells  int64
}

// Plan is a release checked and planned against its schema, before any
// data is read.
type Plan struct {
	spec   Spec
	jb     *job
	mode   int
	single bool // --out is one CSV file
	cfg    Config
	// sidecar is the privacy story known before the run (ModeCuboid and
	// ModeWorkload); the one worker of ModeGather writes its own.
	sidecar []byte
}

// NewPlan checks the spec and plans the release from the schema and the
// flags alone. Its errors wrap ErrUsage where the flags are at fault.
func NewPlan(spec Spec) (*Plan, error) {
	s := spec.Schema
	if len(spec.Files) == 0 {
		return nil, fmt.Errorf("release: no fact table files")
	}
	// The format is --format's or, as knowdp release has it, the one the
	// name of a single table's --out says.
	ext := strings.ToLower(filepath.Ext(spec.Out))
	given := spec.Job.Format != ""
	if !given {
		spec.Job.Format = string(tablefile.CSV)
		if ext == ".parquet" {
			spec.Job.Format = string(tablefile.Parquet)
		}
	}
	jb, err := parseJob(s, spec.Job)
	if err != nil {
		return nil, err
	}
	if !given && jb.several {
		// A directory of several tables is CSV unless --format says.
		spec.Job.Format, jb.format = string(tablefile.CSV), tablefile.CSV
	}
	pl := &Plan{spec: spec, jb: jb}
	if err := pl.chooseForm(ext); err != nil {
		return nil, err
	}
	if spec.Measurements != "" && !spec.Job.KeepMeasurements {
		return nil, jobErr("--measurements: the job does not keep its measurements (Job.KeepMeasurements)")
	}
	wp := jb.plan.Workload()
	for _, c := range jb.counted {
		if err := checkSize(s, c); err != nil {
			return nil, err
		}
	}
	sj, err := schemaJSON(s)
	if err != nil {
		return nil, err
	}
	pl.cfg = Config{Schema: sj, Job: spec.Job, Seeded: spec.Seeded, Seed: spec.Seed, Table: spec.Table, CountColumn: spec.CountColumn}
	for _, c := range jb.counted {
		pl.cfg.Counted = append(pl.cfg.Counted, uint64(c))
	}
	post := spec.Job.postProcessed()
	units := jb.plan.Unit() != nil
	if units && !spec.Seeded {
		// Every worker that bounds a unit needs the same key.
		k := unit.NewKey(noise.NewRand()).Bytes()
		pl.cfg.UnitKey = k[:]
	}
	switch {
	case units:
		// The exact counts and the bounded ones meet on one worker.
		err = pl.planGather()
	case jb.plan.Cuboid() != nil && !post && !jb.keep:
		err = pl.planCuboid()
	case wp != nil && !post && !jb.keep:
		err = pl.planWorkload(wp)
	default:
		err = pl.planGather()
	}
	if err != nil {
		return nil, err
	}
	pl.cfg.Mode, pl.cfg.Directory = pl.mode, !pl.single
	if pl.single {
		pl.cfg.File = filepath.Base(spec.Out)
		if err := pl.fixSidecarFile(); err != nil {
			return nil, err
		}
	}
	return pl, nil
}

// chooseForm chooses between the single-file form (one table, --out
// ending in .csv or .parquet) and the directory form.
func (pl *Plan) chooseForm(ext string) error {
	spec, jb := pl.spec, pl.jb
	switch {
	case spec.Out == "" || spec.Out == "-":
		return jobErr("--out: give a file or a new directory's name")
	case jb.several || (ext != ".csv" && ext != ".parquet"):
		return nil
	case ext == ".csv" && jb.format != tablefile.CSV, ext == ".parquet" && jb.format != tablefile.Parquet:
		return jobErr("--format %s does not match --out %s", jb.format, spec.Out)
	case ext == ".parquet":
		// The driver joins the shards: it reads every count and margin
		// back (16 bytes a cell) and writes one Parquet file.
		cells := spec.Schema.ViewSize(jb.tables[0])
		if err := cube.CheckMemory(16 * int64(cells)); err != nil {
			return fmt.Errorf("--out %s: joining %d cells into one Parquet file on this machine would run out of memory (%w); give a directory name for Parquet shards", spec.Out, cells, err)
		}
	}
	pl.single = true
	return nil
}

// planCuboid plans one cuboid released block by block: its sensitivity,
// noise, margin of error and privacy story, as release.Plan planned them
// (Plan.Cuboid) and Plan.Run would draw them.
func (pl *Plan) planCuboid() error {
	rel := pl.jb.plan.Cuboid()
	pl.mode = ModeCuboid
	cfg := &pl.cfg
	cfg.Cuboid = uint64(rel.Cuboid)
	cfg.Counted = []uint64{uint64(rel.Cuboid)}
	cfg.Sensitivity, cfg.Epsilon = rel.Sensitivity, rel.Epsilon
	cfg.Gaussian, cfg.L2, cfg.Rho = rel.Mechanism == release.MechanismGaussian, rel.L2Sensitivity, rel.Rho
	cfg.MOE90 = rel.CellMOE90()
	for _, v := range rel.Invariants {
		cfg.Keeps = append(cfg.Keeps, uint64(v.Cuboid&rel.Cuboid))
	}
	story := *pl.jb.plan.Workload().Release
	story.Seeded = pl.spec.Seeded
	return pl.setSidecar(story.Metadata())
}

// planGather plans a release computed on one worker, refused if its
// counts and tables would not fit the worker's memory.
func (pl *Plan) planGather() error {
	s, jb := pl.spec.Schema, pl.jb
	pl.mode = ModeGather
	var released []domain.Cuboid
	for _, v := range jb.tables {
		released = append(released, v.Dims)
	}
	// The partial counts pass through the runner to the one worker, which
	// holds the counted cuboids at 8 bytes a cell besides the release.
	need := cube.ReleaseMemory(s, jb.counted, released, pl.spec.Job.postProcessed())
	why := "non-negative and integer tables are solved"
	switch {
	case jb.plan.Unit() != nil:
		why = "a release per privacy unit is computed"
	case jb.plan.Workload() == nil:
		why = "tables at the levels of a hierarchy are estimated"
	case jb.keep:
		why = "a release that keeps its noisy measurements (--measurements) is computed"
	}
	if inProcess() {
		if err := cube.CheckMemory(need); err != nil {
			return fmt.Errorf("%s on one worker, and this one would run out of memory (%w); release smaller tables or coarsen the schema", why, err)
		}
		return nil
	}
	if limit := pl.spec.WorkerMemory; limit > 0 && need > limit {
		return fmt.Errorf("%s on one worker, which would need about %.3g GB (counting %s), more than --worker-memory (%.3g GB); release smaller tables, coarsen the schema or give a larger --worker-memory", why, float64(need)/1e9, s.FormatList(jb.counted), float64(limit)/1e9)
	}
	return nil
}

// fixSidecarFile names the one table's file in a sidecar made before the
// form was known.
func (pl *Plan) fixSidecarFile() error {
	if pl.sidecar == nil {
		return nil
	}
	var m sidecar.Metadata
	if err := json.Unmarshal(pl.sidecar, &m); err != nil {
		return err
	}
	if len(m.Tables) == 1 {
		m.Tables[0].File = pl.cfg.File
	}
	return pl.setSidecar(m)
}

func (pl *Plan) setSidecar(meta any) error {
	b, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return err
	}
	pl.sidecar = append(b, '\n')
	return nil
}

// Mode is the pipeline the plan runs (ModeCuboid, ModeWorkload or
// ModeGather).
func (pl *Plan) Mode() int { return pl.mode }

// Outputs are the files the release writes (the directory, for a
// release written as one), for fileio.CheckOutputs.
func (pl *Plan) Outputs() []fileio.Named {
	out := []fileio.Named{{Flag: "--out", Path: pl.spec.Out, Dir: !pl.single}}
	if pl.single {
		out = append(out, fileio.Named{Flag: "sidecar", Path: pl.sidecarPath()})
	}
	if pl.spec.Measurements != "" {
		out = append(out, fileio.Named{Flag: "--measurements", Path: pl.spec.Measurements})
	}
	return out
}

// sidecarPath is where the privacy story goes.
func (pl *Plan) sidecarPath() string {
	if pl.single {
		return strings.TrimSuffix(pl.spec.Out, filepath.Ext(pl.spec.Out)) + ".json"
	}
	return filepath.Join(pl.spec.Out, sidecarName)
}

// Run plans the release (NewPlan), builds its pipeline, runs it on the
// runner chosen by Beam's flags (--runner, --endpoint, ...; Prism in
// process by default) and writes the tables and the privacy story, all or
// nothing. The output's directory must be visible to the workers, which
// write the shards there before the driver renames them into place.
func Run(ctx context.Context, spec Spec) (*Result, error) {
	pl, err := NewPlan(spec)
	if err != nil {
		return nil, err
	}
	return pl.Run(ctx)
}

// Run runs the planned release.
func (pl *Plan) Run(ctx context.Context) (*Result, error) {
	spec, s := pl.spec, pl.spec.Schema
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
	if err := fileio.CheckOutputs(inputs, pl.Outputs(), spec.Force); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	parent, base := filepath.Split(filepath.Clean(spec.Out))
	if parent == "" {
		parent = "."
	}
	stage, err := os.MkdirTemp(parent, "."+base+".stage*")
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", spec.Out, err)
	}
	defer removeAll(stage)
	scratch, err := os.MkdirTemp(parent, "."+base+".scratch*")
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", spec.Out, err)
	}
	defer removeAll(scratch)
	// Stopped (the context cancelled, on a signal): remove both at once,
	// even if the runner is slow to return.
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			removeAll(stage)
			removeAll(scratch)
		case <-done:
		}
	}()
	cfg := pl.cfg
	if cfg.Stage, err = filepath.Abs(stage); err != nil {
		return nil, err
	}
	if cfg.Scratch, err = filepath.Abs(scratch); err != nil {
		return nil, err
	}
	// The workers never create directories (see removeAll): the tables'
	// directories of shards are made here.
	stems := pl.jb.tableStems(s)
	for i, v := range pl.jb.tables {
		if stems[i] != "" && Blocks(s.ViewSize(v)) > 1 {
			if err := os.Mkdir(filepath.Join(stage, stems[i]), 0o755); err != nil {
				return nil, fmt.Errorf("write %s: %w", spec.Out, err)
			}
		}
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
		if ctx.Err() != nil {
			// Stopped: the runner's report ("failed to get metrics", ...)
			// would not say why.
			return nil, fmt.Errorf("release pipeline stopped: %w", context.Cause(ctx))
		}
		return nil, stageError(err)
	}

	res := &Result{Mode: pl.mode, Sidecar: pl.sidecar, SidecarPath: pl.sidecarPath(), Directory: !pl.single, Workload: pl.mode != ModeCuboid, Tables: len(pl.jb.tables)}
	for _, v := range pl.jb.tables {
		res.Cells += int64(s.ViewSize(v))
	}
	var measurements []byte
	if pl.mode == ModeGather {
		if res.Sidecar, err = readScratch(scratch, sidecarName); err != nil {
			return nil, err
		}
		if spec.Measurements != "" {
			if measurements, err = readScratch(scratch, measurementsName); err != nil {
				return nil, err
			}
		}
	}
	if pl.single {
		err = pl.writeSingle(stage, res.Sidecar)
		res.Files = []string{spec.Out, res.SidecarPath}
	} else {
		res.Files, err = pl.writeDir(stage, res.Sidecar)
	}
	if err != nil {
		return nil, err
	}
	if measurements != nil {
		if err := fileio.WriteFile(spec.Measurements, spec.Force, func(w io.Writer) error { _, err := w.Write(measurements); return err }); err != nil {
			return nil, err
		}
		res.Files = append(res.Files, spec.Measurements)
	}
	return res, nil
}

// writeSingle joins the only table's shards in order into the --out CSV,
// with one header row, and writes the sidecar beside it: both or neither.
func (pl *Plan) writeSingle(stage string, sidecar []byte) error {
	s, v := pl.spec.Schema, pl.jb.tables[0]
	blocks := Blocks(s.ViewSize(v))
	join := func(w io.Writer) error {
		for b := range blocks {
			f, err := os.Open(filepath.Join(stage, partFile("", 0, b, tablefile.CSV)))
			if err != nil {
				return fmt.Errorf("block %d of the release is missing: %w", b, err)
			}
			r := bufio.NewReaderSize(f, 1<<16)
			if b > 0 {
				_, err = r.ReadSlice('\n') // the shard's header
			}
			if err == nil {
				_, err = io.Copy(w, r)
			}
			f.Close()
			if err != nil {
				return err
			}
		}
		return nil
	}
	if pl.jb.format == tablefile.Parquet {
		// Parquet files do not concatenate: the counts and margins are
		// read back and written by the single machine's writer.
		counts, moe, integer, err := readParquetParts(stage, blocks)
		if err != nil {
			return err
		}
		join = func(w io.Writer) error {
			return tablefile.WriteRows(w, tablefile.Parquet, s, v, 0, counts, func(cell int) float64 { return moe[cell] }, integer)
		}
	}
	return fileio.WritePair(
		fileio.File{Path: pl.spec.Out, Write: join},
		fileio.File{Path: pl.sidecarPath(), Write: func(w io.Writer) error { _, err := w.Write(sidecar); return err }},
		pl.spec.Force,
	)
}

// readParquetParts reads the count and moe90 columns (the last two) of the
// only table's Parquet shards, in order.
func readParquetParts(stage string, blocks int) (counts, moe []float64, integer bool, err error) {
	for b := range blocks {
		path := filepath.Join(stage, partFile("", 0, b, tablefile.Parquet))
		f, err := os.Open(path)
		if err != nil {
			return nil, nil, false, fmt.Errorf("block %d of the release is missing: %w", b, err)
		}
		st, err := f.Stat()
		if err == nil {
			var pf *parquet.File
			if pf, err = parquet.OpenFile(f, st.Size()); err == nil {
				counts, moe, err = appendParquetColumns(pf, counts, moe)
				// An integer table's counts are INT64 (tablefile.WriteRows),
				// and stay so in the joined file.
				fields := pf.Schema().Fields()
				integer = len(fields) >= 2 && fields[len(fields)-2].Type().Kind() == parquet.Int64
			}
		}
		f.Close()
		if err != nil {
			return nil, nil, false, fmt.Errorf("block %d of the release: %w", b, err)
		}
	}
	return counts, moe, integer, nil
}

func appendParquetColumns(pf *parquet.File, counts, moe []float64) ([]float64, []float64, error) {
	n := len(pf.Schema().Fields())
	number := func(v parquet.Value) float64 {
		if v.Kind() == parquet.Int64 {
			return float64(v.Int64())
		}
		return v.Double()
	}
	r := parquet.NewReader(pf)
	defer r.Close()
	rows := make([]parquet.Row, 1024)
	for {
		k, err := r.ReadRows(rows)
		for _, row := range rows[:k] {
			if len(row) != n {
				return nil, nil, fmt.Errorf("a row of %d columns, want %d", len(row), n)
			}
			counts, moe = append(counts, number(row[n-2])), append(moe, row[n-1].Double())
		}
		if errors.Is(err, io.EOF) {
			return counts, moe, nil
		}
		if err != nil {
			return nil, nil, err
		}
	}
}

// writeDir checks that the staging directory holds every shard, adds the
// sidecar and renames it to --out. It returns the files, relative to --out.
func (pl *Plan) writeDir(stage string, sidecar []byte) ([]string, error) {
	s := pl.spec.Schema
	stems := pl.jb.tableStems(s)
	var files []string
	for i, v := range pl.jb.tables {
		blocks := Blocks(s.ViewSize(v))
		for b := range blocks {
			name := partFile(stems[i], blocks, b, pl.jb.format)
			if _, err := os.Stat(filepath.Join(stage, name)); err != nil {
				return nil, fmt.Errorf("block %d of table %s of the release is missing: %w", b, s.FormatView(v), err)
			}
			files = append(files, name)
		}
	}
	// The output holds these shards and nothing else: a worker that died
	// while writing a shard left its temporary file (see writePart), and
	// the shard itself was written again.
	want := make(map[string]bool, len(files))
	for _, f := range files {
		want[filepath.Join(stage, f)] = true
	}
	err := filepath.WalkDir(stage, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !want[path] {
			err = os.Remove(path)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", pl.spec.Out, err)
	}
	if err := fileio.WriteFileAtomic(filepath.Join(stage, sidecarName), sidecar); err != nil {
		return nil, err
	}
	files = append(files, sidecarName)
	if err := os.Chmod(stage, 0o755); err != nil {
		return nil, err
	}
	if err := fileio.CommitDir(stage, pl.spec.Out, pl.spec.Force); err != nil {
		return nil, err
	}
	return files, nil
}

// removeAll removes a staging or scratch directory. A worker of an
// in-process runner may still be writing into it when the pipeline is
// stopped, so RemoveAll can find the directory not empty; it is retried
// (for up to two seconds) until the directory is gone, after which no
// write can recreate it (the workers never create directories).
func removeAll(dir string) {
	deadline := time.Now().Add(2 * time.Second)
	for {
		os.RemoveAll(dir)
		if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) || time.Now().After(deadline) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
