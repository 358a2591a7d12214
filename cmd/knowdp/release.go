package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/cli"
	"github.com/knowdp/knowdp/internal/fileio"
	"github.com/knowdp/knowdp/internal/tablefile"
	"github.com/knowdp/knowdp/release"
	"github.com/knowdp/knowdp/sidecar"
	"github.com/knowdp/knowdp/source"
)

func releaseCommand() *command {
	return &command{
		name:    "release",
		summary: "release noisy cuboids, one or a set under one epsilon, consistent with exact (public) cuboids",
		run:     runRelease,
	}
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// releaseFlags are the flags of knowdp release, as parsed.
type releaseFlags struct {
	data, table, schema, dims, out, workload, split, mechanism string
	countColumn                                                string
	strategy, objective                                        string
	measurements                                               string
	format                                                     string
	infer, nonneg, integer, json, force, invariantCosts        bool
	exact, cuboids                                             stringList
	epsilon, tol, rho, delta                                   float64
	sensitivity, cellLimit                                     int
	seed                                                       seedFlag
	unit                                                       unitFlags
}

// sidecarPath is where the privacy story of an output CSV goes: the same
// name with .json.
func sidecarPath(out string) string {
	return strings.TrimSuffix(out, filepath.Ext(out)) + ".json"
}

func runRelease(ctx context.Context, e *env, args []string) error {
	// Flags.
	fs := newFlagSet(e, "release", "release --data FILE --schema FILE --epsilon X [--exact DIMS]... [--cuboid DIMS]... [--workload FILE] [--split HOW] [--privacy-unit COLUMN --max-rows K|auto] [--nonneg|--integer] [--seed N] [--format FORMAT] [--force] --out FILE|DIR")
	var f releaseFlags
	fs.StringVar(&f.data, "data", "", "fact table (required): a CSV `FILE` with a header row and a column per schema dimension, a Parquet file, an SQLite database file or a postgres:// URL (with --table)")
	fs.StringVar(&f.table, "table", "", "with an SQLite or PostgreSQL --data: the `TABLE` to count (the GROUP BY runs in the database)")
	fs.StringVar(&f.countColumn, "count-column", "", "`NAME` of a column of counts in --data: each row stands for that many records (non-negative integers)")
	fs.StringVar(&f.schema, "schema", "", `schema JSON `+"`FILE`"+` {"dimensions":[{"name":..,"values":[..]}]} declaring every domain (required unless --infer-domains)`)
	fs.BoolVar(&f.infer, "infer-domains", false, "take each dimension's domain from the data (the columns named by --dims); NOT private, for exploration only")
	fs.StringVar(&f.dims, "dims", "", "with --infer-domains: comma-separated dimension `COLUMNS`")
	fs.Var(&f.exact, "exact", "comma-separated `DIMS` of a cuboid published exactly (an invariant), each DIM or DIM:LEVEL of a hierarchy; repeatable; \"\" is the grand total")
	fs.Float64Var(&f.epsilon, "epsilon", 0, "privacy loss eps > 0 of the whole release with respect to the neighbours the invariants induce (required with --mechanism laplace)")
	fs.Var(&f.cuboids, "cuboid", "comma-separated `DIMS` of a cuboid to release, each DIM or DIM:LEVEL of a hierarchy (geo:state,sex); repeatable: several cuboids are released together under the one epsilon, all consistent with each other (default: the base cuboid)")
	fs.StringVar(&f.workload, "workload", "", "JSON `FILE` listing cuboids to release together, with optional weights: [[\"year\"], {\"cuboid\": [\"sex\",\"age\"], \"weight\": 2}]")
	fs.StringVar(&f.mechanism, "mechanism", "laplace", "`NAME` of the noise: laplace (pure eps, --epsilon) or gaussian (zCDP, --rho)")
	fs.Float64Var(&f.rho, "rho", 0, "with --mechanism gaussian: the zCDP parameter rho > 0 with respect to the neighbours the invariants induce")
	fs.Float64Var(&f.delta, "delta", 1e-6, "with --mechanism gaussian: the delta at which the sidecar states the equivalent (eps, delta) guarantee")
	fs.StringVar(&f.split, "split", "auto", "with several tables, `HOW` the budget is shared among their measurements: optimal (least weighted total variance, certified), equal, spine (each level of a hierarchy the same share), or auto (optimal where knowdp certifies it: flat dimensions or one hierarchy; spine across two or more hierarchies)")
	fs.StringVar(&f.measurements, "measurements", "", "with several cuboids: also write the noisy measurements, invariants and noise to this JSON `FILE`, from which knowdp estimate answers any cuboid they determine at no privacy cost (as private as the release)")
	fs.StringVar(&f.strategy, "strategy", "best", "with several cuboids, `WHAT` to measure: requested (the cuboids themselves), marginals (any cuboid under them, chosen by the optimal split), residuals (ResidualPlanner's Helmert contrasts; gaussian), lattice (cuboids anywhere in the lattice; laplace) or best (the one of those with the least objective)")
	fs.StringVar(&f.objective, "objective", "auto", "`WHAT` the optimal split minimises: total (the weighted sum of every cell's variance), mean (of each table's mean cell variance: every table counts the same), max (the largest weighted cell variance of any table; gaussian) or auto (mean across the levels of a hierarchy, total otherwise); a workload entry's \"moe90\" sets a target instead, met with the least budget (--epsilon or --rho is then the most it may spend)")
	fs.IntVar(&f.sensitivity, "sensitivity", 0, "calibrate the noise to this generic sensitivity: refused below the value knowdp computes; where it has no closed form, the guarantee is conditional on this claim")
	fs.BoolVar(&f.nonneg, "nonneg", false, "least-squares consistent release with no negative counts")
	fs.BoolVar(&f.integer, "integer", false, "non-negative integer counts that keep every invariant exactly (unbiased controlled rounding)")
	fs.Float64Var(&f.tol, "tol", 1e-6, "tolerance of --nonneg and --integer (> 0)")
	fs.IntVar(&f.cellLimit, "cell-limit", cube.DefaultCellLimit, "refuse domains with more cells than this (>= 1); memory is checked as well")
	fs.StringVar(&f.out, "out", "", "output CSV `FILE` (required; FILE.parquet for Parquet), with the privacy story in the same name with .json; with several cuboids a new directory: one CSV (or Parquet, --format) file per cuboid and release.json")
	fs.StringVar(&f.format, "format", "", "`FORMAT` of the released tables: csv or parquet (default: parquet for an --out ending in .parquet, otherwise csv); the columns are the same")
	fs.BoolVar(&f.json, "json", false, "print the summary as JSON (the sidecar's fields, full precision)")
	fs.BoolVar(&f.force, "force", false, forceUsage)
	fs.BoolVar(&f.invariantCosts, "invariant-costs", false, "also plan the release without each --exact invariant and without any, and state in the sidecar each table's error in those plans (without_invariants): what each invariant costs")
	fs.Var(&f.seed, "seed", seedUsage)
	f.unit.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := f.check(fs); err != nil {
		return err
	}
	format, err := f.tableFormat()
	if err != nil {
		return usageErr(fs, "%v", err)
	}
	req := f.request()
	if err := req.Check(); err != nil {
		return usageErr(fs, "%v", strings.TrimPrefix(err.Error(), release.ErrUsage.Error()+": "))
	}
	// Every output is checked before anything is read: not an input,
	// not existing (unless --force), in a directory that takes new files.
	inputs := []fileio.Named{{Flag: "--data", Path: f.data}, {Flag: "--schema", Path: f.schema}, {Flag: "--workload", Path: f.workload}}
	outputs := []fileio.Named{{Flag: "--out", Path: f.out}, {Flag: "sidecar", Path: sidecarPath(f.out)}}
	if !f.single() {
		outputs = []fileio.Named{{Flag: "--out", Path: f.out, Dir: true}}
	}
	if f.measurements != "" {
		outputs = append(outputs, fileio.Named{Flag: "--measurements", Path: f.measurements})
	}
	if err := fileio.CheckOutputs(inputs, outputs, f.force); err != nil {
		return usageErr(fs, "%v", err)
	}

	// The spec: schema, cuboids and what knowdp is asked to do.
	for _, in := range inputs {
		if in.Path != "" && !source.IsPostgresURL(in.Path) {
			if err := checkInput(in.Flag, in.Path); err != nil {
				return err
			}
		}
	}
	var s *domain.Schema
	if f.infer {
		fmt.Fprintln(e.stderr, "WARNING: --infer-domains takes the domains from the data; the release is NOT differentially private")
		if s, err = inferSchema(ctx, source.Spec{Path: f.data, Table: f.table, CountColumn: f.countColumn}, splitList(f.dims), e.log); err != nil {
			return err
		}
	} else if s, err = domain.LoadSchema(f.schema); err != nil {
		return err
	}
	if f.workload != "" {
		if req.Workload, err = os.ReadFile(f.workload); err != nil {
			return fmt.Errorf("--workload: %w", err)
		}
	}
	req.DomainsFromData = f.infer
	if req.Columns, err = tableColumns(ctx, source.Spec{Path: f.data, Table: f.table, CountColumn: f.countColumn}); err != nil {
		return err
	}
	spec, err := req.Spec(s)
	if errors.Is(err, release.ErrIdentifier) {
		return usageErr(fs, "%v", strings.TrimPrefix(err.Error(), release.ErrUsage.Error()+": "))
	} else if err != nil {
		return err
	}
	warnRowLevel(e, s, req)
	// Planned once, before the data is read: every refusal comes from the
	// flags and the schema, and the optimal split can take seconds.
	plan, err := release.NewPlan(s, spec)
	if err != nil {
		return err
	}
	if plan.QueryTables() && format != tablefile.CSV {
		return usageErr(fs, "--format %s: tables of prefix sums or ranges are written as CSV only", format)
	}
	needs := plan.Needs()
	var leaves, released []domain.Cuboid
	for _, v := range needs {
		if !slices.Contains(leaves, v.Dims) {
			leaves = append(leaves, v.Dims)
		}
	}
	for _, v := range spec.Tables {
		released = append(released, v.Dims)
	}
	if err := cube.CheckMemory(cube.ReleaseMemory(s, leaves, released, f.nonneg || f.integer)); err != nil {
		return fmt.Errorf("releasing %s would run out of memory (%w); %s; coarsen the schema or release smaller tables", formatViews(s, spec.Tables), err, largestTable(s, leaves, cuboidsOfViews(spec.Exact)))
	}

	// The data, counted straight into the leaf-level cuboids needed and
	// rolled up to the views.
	var w *release.Release
	if spec.Unit != nil {
		counts, rows, err := countUnits(ctx, e, &f, s, plan)
		if err != nil {
			return err
		}
		if w, err = plan.RunUnits(ctx, counts, rows, f.seed.rand(e)); err != nil {
			return err
		}
	} else {
		counts, err := countData(ctx, e, &f, func(t cube.Records, opt cube.Options) (map[domain.View][]float64, int64, error) {
			return cube.AggregateViews(ctx, t, s, needs, opt)
		})
		if err != nil {
			return err
		}
		if w, err = plan.Run(ctx, counts, f.seed.rand(e)); err != nil {
			return err
		}
	}
	return writeRelease(e, &f, w, format)
}

// request returns the release the flags ask for, in their words (the
// workload file's content is read later, with the other inputs).
func (f *releaseFlags) request() release.Request {
	q := release.Request{Tables: f.cuboids, WorkloadName: f.workload, Exact: f.exact, Mechanism: f.mechanism,
		Epsilon: f.epsilon, Rho: f.rho, Split: f.split, Strategy: f.strategy, Objective: f.objective, Sensitivity: f.sensitivity,
		NonNeg: f.nonneg, Integer: f.integer, Tol: f.tol, KeepMeasurements: f.measurements != "", InvariantCosts: f.invariantCosts}
	f.unit.apply(&q)
	if f.mechanism == "gaussian" {
		q.Delta = f.delta
	}
	return q
}

// single reports whether the release writes one table as a file and its
// sidecar (at most one --cuboid and no --workload) rather than a directory.
func (f *releaseFlags) single() bool { return len(f.cuboids) <= 1 && f.workload == "" }

// tableFormat is the format of the released tables: --format, or for a
// single table the one its --out name asks for. A single table's name must
// not say one format while --format says the other.
func (f *releaseFlags) tableFormat() (tablefile.Format, error) {
	single := f.single()
	if f.format == "" {
		if single {
			return tablefile.FormatOf(f.out), nil
		}
		return tablefile.CSV, nil
	}
	format, err := tablefile.ParseFormat(f.format)
	if err != nil {
		return "", fmt.Errorf("--format: %w", err)
	}
	if ext := strings.ToLower(filepath.Ext(f.out)); single && (ext == ".csv" || ext == ".parquet") && ext != format.Ext() {
		return "", fmt.Errorf("--format %s does not match --out %s", format, f.out)
	}
	return format, nil
}

// check validates the flags that need no file.
func (f *releaseFlags) check(fs *flag.FlagSet) error {
	if err := requireFlags(fs, "data", f.data, "out", f.out); err != nil {
		return err
	}
	switch {
	case f.schema == "" && !f.infer:
		return usageErr(fs, "missing required flag --schema (or --infer-domains with --dims, which is not private)")
	case f.schema != "" && f.infer:
		return usageErr(fs, "--schema and --infer-domains exclude each other")
	case f.infer && f.dims == "":
		return usageErr(fs, "missing required flag --dims (--infer-domains needs it)")
	case !(f.tol > 0) || math.IsInf(f.tol, 0):
		// Checked here: in a release.Request, 0 stands for the default.
		return usageErr(fs, "--tol must be a positive number, got %v", f.tol)
	case f.cellLimit < 1:
		return usageErr(fs, "--cell-limit must be at least 1, got %d", f.cellLimit)
	}
	return nil
}

// writeJSON prints v as indented JSON (floats in full precision).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// inferSchema reads the domains of the named columns from the fact table
// (see cube.InferSchemaFrom: the result is NOT private).
func inferSchema(ctx context.Context, spec source.Spec, columns []string, log *slog.Logger) (*domain.Schema, error) {
	t, err := source.Open(ctx, spec)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	return cube.InferSchemaFrom(ctx, t, columns, log)
}

// largestTable names the largest of the cuboids a release counts and why it
// is counted (released, or exact), so that a memory refusal blames the
// right flag.
func largestTable(s *domain.Schema, needs, exact []domain.Cuboid) string {
	var big domain.Cuboid
	bigCells := -1.0
	for _, c := range needs {
		n := 1.0
		for _, d := range c.Dims() {
			n *= float64(s.Size(d))
		}
		if n > bigCells {
			big, bigCells = c, n
		}
	}
	role := "the released cuboid"
	if slices.Contains(exact, big) {
		role = "the exact cuboid (--exact)"
	}
	return fmt.Sprintf("the largest table counted is %s %s, %.4g cells", role, s.Format(big), bigCells)
}

// countData opens --data and counts it with count (cube.Aggregate or
// cube.AggregateViews), showing its progress on a terminal.
func countData[T any](ctx context.Context, e *env, f *releaseFlags, count func(cube.Records, cube.Options) (T, int64, error)) (T, error) {
	var zero T
	t, err := source.Open(ctx, source.Spec{Path: f.data, Table: f.table, CountColumn: f.countColumn})
	if err != nil {
		return zero, fmt.Errorf("--data: %w", err)
	}
	defer t.Close()
	var size int64
	if st, err := os.Stat(f.data); err == nil {
		size = st.Size()
	}
	prog := newProgress(e, "reading "+filepath.Base(f.data), size)
	var last int64
	out, _, err := count(t, cube.Options{CellLimit: f.cellLimit, Progress: func(n int64) {
		prog.Add(n - last)
		last = n
	}})
	prog.Done()
	if errors.Is(err, cube.ErrCellLimit) {
		return zero, fmt.Errorf("--cell-limit: %w", err)
	}
	return out, err
}

// releaseSummary is what release --json prints.
type releaseSummary struct {
	Out      string           `json:"out"`
	Sidecar  string           `json:"sidecar,omitempty"`
	Files    []string         `json:"files"`
	Cells    int              `json:"cells"`
	Metadata sidecar.Metadata `json:"privacy"`
}

// writeRelease writes a release: one table as f.out with its sidecar
// beside it, or a new directory f.out with a file per table and
// release.json; then the measurements if asked for, and the summary.
func writeRelease(e *env, f *releaseFlags, w *release.Release, format tablefile.Format) error {
	s := w.Schema
	meta := w.Metadata()
	sidecar := func(out io.Writer) error {
		b, err := json.MarshalIndent(meta, "", "  ")
		if err != nil {
			return err
		}
		_, err = out.Write(append(b, '\n'))
		return err
	}
	writeTable := func(t release.Table) func(io.Writer) error {
		return func(out io.Writer) error {
			if t.Query.Kind != release.QueryCells {
				return tablefile.WriteQueryCSV(out, s, t)
			}
			return tablefile.WriteRows(out, format, s, t.TableView(), 0, t.Counts, t.CellMOE, t.Integer)
		}
	}
	var files []string
	cells := 0
	for _, t := range w.Tables {
		cells += len(t.Counts)
	}
	if f.single() {
		meta.Tables[0].File = filepath.Base(f.out)
		if err := fileio.WritePair(fileio.File{Path: f.out, Write: writeTable(w.Tables[0])}, fileio.File{Path: sidecarPath(f.out), Write: sidecar}, f.force); err != nil {
			return err
		}
		files = []string{f.out, sidecarPath(f.out)}
	} else {
		var out []fileio.File
		for i, t := range w.Tables {
			name := strings.TrimSuffix(t.FileName(s), ".csv") + format.Ext()
			meta.Tables[i].File = name
			out = append(out, fileio.File{Path: name, Write: writeTable(t)})
			files = append(files, name)
		}
		out = append(out, fileio.File{Path: "release.json", Write: sidecar})
		files = append(files, "release.json")
		if err := fileio.WriteDir(f.out, out, f.force); err != nil {
			return err
		}
	}
	if f.measurements != "" {
		if err := writeMeasurements(f.measurements, w, f.force); err != nil {
			return err
		}
	}
	for _, warn := range meta.Warnings {
		if !strings.HasPrefix(warn, "seeded") && !strings.HasPrefix(warn, "domains") {
			fmt.Fprintln(e.stderr, "WARNING: "+warn)
		}
	}
	if f.json {
		sum := releaseSummary{Out: f.out, Files: files, Cells: cells, Metadata: meta}
		if f.single() {
			sum.Sidecar = sidecarPath(f.out)
		}
		return writeJSON(e.stdout, sum)
	}
	cli.PrintSummary(e.stdout, meta)
	if f.single() {
		fmt.Fprintf(e.stdout, "wrote %s and %s\n", files[0], files[1])
	} else {
		fmt.Fprintf(e.stdout, "wrote %s/ (%d files)\n", strings.TrimSuffix(f.out, "/"), len(files))
	}
	return nil
}

// cuboidsOfViews returns the leaf-level cuboids of views.
func cuboidsOfViews(vs []domain.View) []domain.Cuboid {
	out := make([]domain.Cuboid, len(vs))
	for i, v := range vs {
		out[i] = v.Dims
	}
	return out
}
