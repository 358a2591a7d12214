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
	"github.com/knowdp/knowdp/internal/fileio"
	"github.com/knowdp/knowdp/internal/tablefile"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/release"
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
	strategy                                                   string
	measurements                                               string
	format                                                     string
	infer, nonneg, integer, json                               bool
	exact, cuboids                                             stringList
	epsilon, tol, rho, delta                                   float64
	sensitivity, cellLimit                                     int
	seed                                                       seedFlag
}

// sidecarPath is where the privacy story of an output CSV goes: the same
// name with .json.
func sidecarPath(out string) string {
	return strings.TrimSuffix(out, filepath.Ext(out)) + ".json"
}

func runRelease(ctx context.Context, e *env, args []string) error {
	// Flags.
	fs := newFlagSet(e, "release", "release --data FILE --schema FILE --epsilon X [--exact DIMS]... [--cuboid DIMS]... [--workload FILE] [--split HOW] [--nonneg|--integer] [--seed N] [--format FORMAT] --out FILE|DIR")
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
	fs.StringVar(&f.split, "split", "optimal", "with several cuboids, `HOW` epsilon is shared among them: optimal (least weighted total variance), equal, or spine (each level of a hierarchy the same share)")
	fs.StringVar(&f.measurements, "measurements", "", "with several cuboids: also write the noisy measurements, invariants and noise to this JSON `FILE`, from which knowdp estimate answers any cuboid they determine at no privacy cost (as private as the release)")
	fs.StringVar(&f.strategy, "strategy", "best", "with several cuboids, `WHAT` to measure: requested (the cuboids themselves), marginals (any cuboid under them, chosen by the optimal split) or best (the one of the two with the least weighted total variance)")
	fs.IntVar(&f.sensitivity, "sensitivity", 0, "calibrate the noise to this generic sensitivity: refused below the value knowdp computes; where it has no closed form, the guarantee is conditional on this claim")
	fs.BoolVar(&f.nonneg, "nonneg", false, "least-squares consistent release with no negative counts")
	fs.BoolVar(&f.integer, "integer", false, "non-negative integer counts that keep every invariant exactly (unbiased controlled rounding)")
	fs.Float64Var(&f.tol, "tol", 1e-6, "tolerance of --nonneg and --integer (> 0)")
	fs.IntVar(&f.cellLimit, "cell-limit", cube.DefaultCellLimit, "refuse domains with more cells than this (>= 1); memory is checked as well")
	fs.StringVar(&f.out, "out", "", "output CSV `FILE` (required; FILE.parquet for Parquet), with the privacy story in the same name with .json; with several cuboids a new directory: one CSV (or Parquet, --format) file per cuboid and release.json")
	fs.StringVar(&f.format, "format", "", "`FORMAT` of the released tables: csv or parquet (default: parquet for an --out ending in .parquet, otherwise csv); the columns are the same")
	fs.BoolVar(&f.json, "json", false, "print the summary as JSON (the sidecar's fields, full precision)")
	fs.Var(&f.seed, "seed", seedUsage)
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
	mech, err := release.ParseMechanism(f.mechanism)
	if err != nil {
		return usageErr(fs, "--mechanism: %v", err)
	}
	var eps privacy.Epsilon
	var rho privacy.Rho
	if mech == release.MechanismGaussian {
		switch {
		case f.epsilon != 0:
			return usageErr(fs, "--mechanism gaussian is calibrated to --rho; --epsilon does not apply (the equivalent (eps, delta) is reported for --delta)")
		case f.sensitivity != 0:
			return usageErr(fs, "--sensitivity overrides the L1 generic sensitivity of --mechanism laplace; gaussian uses the L2 one, which knowdp computes")
		case !(f.delta > 0 && f.delta < 1):
			return usageErr(fs, "--delta must be in (0, 1), got %v", f.delta)
		}
		if rho, err = privacy.NewRho(f.rho); err != nil {
			return usageErr(fs, "--rho: %v", err)
		}
	} else {
		if f.rho != 0 {
			return usageErr(fs, "--rho needs --mechanism gaussian")
		}
		if eps, err = privacy.NewEpsilon(f.epsilon); err != nil {
			return usageErr(fs, "--epsilon: %v", err)
		}
	}
	split, err := release.ParseSplit(f.split)
	if err != nil {
		return usageErr(fs, "--split: %v", err)
	}
	strategy, err := release.ParseMeasureStrategy(f.strategy)
	if err != nil {
		return usageErr(fs, "--strategy: %v", err)
	}
	workload := len(f.cuboids) > 1 || f.workload != ""
	inputs := []fileio.Named{{Flag: "--data", Path: f.data}, {Flag: "--schema", Path: f.schema}, {Flag: "--workload", Path: f.workload}}
	outputs := []fileio.Named{{Flag: "--out", Path: f.out}, {Flag: "sidecar", Path: sidecarPath(f.out)}}
	if workload {
		outputs = outputs[:1]
	}
	if workload {
		if err := checkNewDir(f.out); err != nil {
			return usageErr(fs, "--out: %v", err)
		}
	}
	if f.measurements != "" && !workload {
		return usageErr(fs, "--measurements needs several cuboids (repeat --cuboid, or --workload)")
	}
	if f.measurements != "" {
		outputs = append(outputs, fileio.Named{Flag: "--measurements", Path: f.measurements})
	}
	if err := fileio.CheckOutputs(inputs, outputs); err != nil {
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
	// Views at coarser levels of a hierarchy (--cuboid geo:state) are
	// released together by one estimate across the hierarchy.
	vs, coarse, err := parseViews(s, &f)
	if err != nil {
		return err
	}
	if coarse || split == release.SplitSpine {
		if f.nonneg {
			return usageErr(fs, "--nonneg: views at coarser levels are published as real counts or, with --integer, as non-negative integers that add up level by level; use --integer")
		}
		vspec := release.ViewSpec{Epsilon: eps, Split: split, Sensitivity: f.sensitivity, DomainsFromData: f.infer, Mechanism: mech, Rho: rho}
		if mech == release.MechanismGaussian {
			vspec.Delta = f.delta
		}
		return releaseViews(ctx, e, s, vs, vspec, &f, format)
	}
	var cuboids []domain.Cuboid
	var weights []float64
	for _, x := range f.cuboids {
		c, err := s.ParseCuboid(x)
		if err != nil {
			return fmt.Errorf("--cuboid %q: %w", x, err)
		}
		cuboids, weights = append(cuboids, c), append(weights, 1)
	}
	if f.workload != "" {
		b, err := os.ReadFile(f.workload)
		if err != nil {
			return fmt.Errorf("--workload: %w", err)
		}
		cs, ws, err := release.ParseWorkload(s, b)
		if err != nil {
			return fmt.Errorf("--workload %s: %w", f.workload, err)
		}
		cuboids, weights = append(cuboids, cs...), append(weights, ws...)
	}
	if len(cuboids) == 0 {
		cuboids, weights = []domain.Cuboid{domain.Base(s.NumDims())}, []float64{1}
	}
	var exact []domain.Cuboid
	for _, x := range f.exact {
		c, err := s.ParseCuboid(x)
		if err != nil {
			return fmt.Errorf("--exact %q: %w", x, err)
		}
		exact = append(exact, c)
	}
	// What to count: the released and exact cuboids only, never the base
	// domain unless it is released.
	wspec := release.WorkloadSpec{Epsilon: eps, Exact: exact, Cuboids: cuboids, Weights: weights, Split: split,
		Sensitivity: f.sensitivity, DomainsFromData: f.infer, Mechanism: mech, Rho: rho}
	wspec.Strategy, wspec.KeepMeasurements = strategy, f.measurements != ""
	if mech == release.MechanismGaussian {
		wspec.Delta = f.delta
	}
	spec := release.ReleaseSpec{Epsilon: eps, Exact: exact, Cuboid: cuboids[0], Sensitivity: f.sensitivity,
		NonNegative: f.nonneg, Integer: f.integer, Tol: f.tol, DomainsFromData: f.infer,
		Mechanism: mech, Rho: rho}
	if mech == release.MechanismGaussian {
		spec.Delta = f.delta
	}
	needs := spec.Needs()
	var plan *release.WorkloadPlan
	if workload {
		// Planned once, before the data is read: the optimal split can
		// take seconds for a large workload.
		if plan, err = release.PlanWorkload(s, wspec, false); err != nil {
			return err
		}
		needs = plan.Needs()
	}
	if err := cube.CheckMemory(cube.ReleaseMemory(s, needs, cuboids, f.nonneg || f.integer)); err != nil {
		return fmt.Errorf("releasing %s would run out of memory (%w); %s; coarsen the schema or release smaller cuboids", s.FormatList(cuboids), err, largestTable(s, needs, exact))
	}

	// The data, counted straight into the cuboids needed.
	tables, err := countData(ctx, e, &f, func(t cube.Records, opt cube.Options) (map[domain.Cuboid][]float64, int64, error) {
		return cube.Aggregate(ctx, t, s, needs, opt)
	})
	if err != nil {
		return err
	}
	if workload {
		return releaseWorkload(ctx, e, s, tables, plan, &f, format)
	}

	// One cuboid: a CSV and its sidecar.
	rel, err := release.ReleaseFrom(ctx, s, tables, spec, f.seed.rand(e))
	if err != nil {
		return err
	}
	sidecar := sidecarPath(f.out)
	meta := rel.Metadata()
	metaJSON, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return err
	}
	if err := fileio.WritePairAtomic(
		fileio.File{Path: f.out, Write: func(w io.Writer) error {
			return tablefile.Write(w, format, s, rel.Cuboid, rel.Counts, rel.CellMOE90())
		}},
		fileio.File{Path: sidecar, Write: func(w io.Writer) error { _, err := w.Write(append(metaJSON, '\n')); return err }},
	); err != nil {
		return err
	}
	if rel.ReleasedExactly || rel.SensitivityClaimed {
		for _, w := range rel.Warnings() {
			if !strings.HasPrefix(w, "seeded") && !strings.HasPrefix(w, "domains") {
				fmt.Fprintln(e.stderr, "WARNING: "+w)
			}
		}
	}
	if f.json {
		return writeJSON(e.stdout, releaseSummary{Out: f.out, Sidecar: sidecar, Cells: len(rel.Counts), Metadata: meta})
	}
	printRelease(e.stdout, rel, f.out, sidecar)
	return nil
}

// tableFormat is the format of the released tables: --format, or for a
// single table the one its --out name asks for. A single table's name must
// not say one format while --format says the other.
func (f *releaseFlags) tableFormat() (tablefile.Format, error) {
	single := len(f.cuboids) <= 1 && f.workload == ""
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
	case f.sensitivity < 0:
		return usageErr(fs, "--sensitivity must be positive (or 0 for the computed value), got %d", f.sensitivity)
	case !(f.tol > 0) || math.IsInf(f.tol, 0):
		return usageErr(fs, "--tol must be a positive number, got %v", f.tol)
	case f.cellLimit < 1:
		return usageErr(fs, "--cell-limit must be at least 1, got %d", f.cellLimit)
	case f.nonneg && f.integer:
		return usageErr(fs, "--nonneg and --integer exclude each other (--integer counts are non-negative)")
	}
	return nil
}

// releaseSummary is what release --json prints.
type releaseSummary struct {
	Out      string           `json:"out"`
	Sidecar  string           `json:"sidecar"`
	Cells    int              `json:"cells"`
	Metadata release.Metadata `json:"privacy"`
}

// writeJSON prints v as indented JSON (floats in full precision).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printRelease(w io.Writer, rel *release.Release, out, sidecar string) {
	s := rel.Schema
	// The number of rows read is not printed: it is the true total, which
	// is private unless an exact cuboid publishes it.
	fmt.Fprintf(w, "released cuboid %s: %d cells\n", s.Format(rel.Cuboid), len(rel.Counts))
	if len(rel.Invariants) > 0 {
		var ex []string
		for _, v := range rel.Invariants {
			ex = append(ex, s.Format(v.Cuboid))
		}
		fmt.Fprintf(w, "exact cuboids (published as they are): %s\n", strings.Join(ex, ", "))
	}
	if rel.Mechanism == release.MechanismGaussian {
		fmt.Fprintf(w, "rho %.6g (zCDP; (%.6g, %g)-DP) w.r.t. %s\n", rel.Rho, rel.Epsilon, rel.Delta, rel.Neighbours)
	} else {
		fmt.Fprintf(w, "epsilon %g w.r.t. %s\n", rel.Epsilon, rel.Neighbours)
	}
	if rel.Sensitivity == 0 {
		fmt.Fprintf(w, "no noise: the cuboid is determined by the exact cuboids (%s); its counts are the TRUE counts\n", rel.SensitivityRule)
	} else {
		if rel.Mechanism == release.MechanismGaussian {
			fmt.Fprintf(w, "L2 generic sensitivity %.6g (%s); Gaussian sigma %.6g per cell\n", rel.L2Sensitivity, rel.L2Rule, rel.Sigma)
		} else {
			fmt.Fprintf(w, "generic sensitivity %d (%s); Laplace scale %.6g per cell\n", rel.Sensitivity, rel.SensitivityRule, rel.Scale)
		}
	}
	switch rel.Guarantee() {
	case privacy.GuaranteeNone:
		fmt.Fprintln(w, "guarantee: none: this release is NOT differentially private (seeded, or domains read from the data)")
	case privacy.GuaranteeConditional:
		fmt.Fprintln(w, "guarantee: conditional on the --sensitivity you gave being at least the true generic sensitivity")
	}
	fmt.Fprintf(w, "wrote %s and %s\n", out, sidecar)
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
