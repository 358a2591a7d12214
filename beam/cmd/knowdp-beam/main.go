// Command knowdp-beam runs knowdp releases as Apache Beam pipelines.
//
//	knowdp-beam release --data 'shards/*.csv' --schema S.json --epsilon 1 \
//	    [--exact dims]... [--cuboid dims] [--seed N] --out release.csv \
//	    [--runner=universal --endpoint=HOST:PORT --environment_type=LOOPBACK]
//
// or, for a zCDP release with Gaussian noise, --mechanism gaussian --rho R
// [--delta D] instead of --epsilon.
//
// It writes the same CSV and JSON sidecar as knowdp release. Without
// --runner the pipeline runs in process on Beam's Prism runner. Beam's
// pipeline options (--runner, --endpoint, --environment_type, --job_name,
// the Dataflow and Flink options, ...) are accepted beside knowdp's flags.
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
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/knowdp/knowdp/beam/pipeline"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/cli"
	"github.com/knowdp/knowdp/internal/fileio"
	"github.com/knowdp/knowdp/release"
	"github.com/knowdp/knowdp/sidecar"
	"github.com/knowdp/knowdp/source"
)

const usage = `Usage: knowdp-beam release --data FILE|'GLOB' --schema FILE (--epsilon X | --mechanism gaussian --rho R [--delta D]) [--exact DIMS]... [--cuboid DIMS]... [--workload FILE] [--privacy-unit COLUMN --max-rows K] [--nonneg | --integer] [--seed N] --out FILE|DIR [Beam pipeline options]`

func main() {
	// An interrupt or termination cancels the release, which removes its
	// temporary blocks; if the runner does not return within a few
	// seconds of that, the process exits anyway.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		time.Sleep(5 * time.Second)
		fmt.Fprintln(os.Stderr, "knowdp-beam release: stopped")
		os.Exit(130)
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// errUsage marks errors that exit with status 2.
var errUsage = errors.New("usage")

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// run parses the command line into the global flag set, where Beam's
// runners register their options, and runs the command. It follows
// knowdp's conventions: --help prints to stdout and exits 0, --version
// prints the version, a usage error (a missing, unknown or invalid flag)
// exits 2 with "knowdp-beam release: problem", any other failure exits 1.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help"):
		if len(args) > 1 && args[1] == "release" {
			return run(ctx, []string{"release", "--help"}, stdout, stderr)
		}
		fmt.Fprintln(stdout, usage)
		fmt.Fprintln(stdout, "\nRun 'knowdp-beam release --help' for its flags, 'knowdp-beam --version' for the version.")
		return 0
	case len(args) > 0 && (args[0] == "version" || args[0] == "-version" || args[0] == "--version"):
		cli.PrintVersion(stdout, "knowdp-beam")
		return 0
	case len(args) == 0:
		fmt.Fprintf(stderr, "knowdp-beam: missing command (want release)\n%s\n", usage)
		return 2
	case args[0] != "release":
		fmt.Fprintf(stderr, "knowdp-beam: unknown command %q (want release)\n%s\n", args[0], usage)
		return 2
	}
	err := runRelease(ctx, args[1:], stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		return 2
	case errors.Is(err, flag.ErrHelp):
		return 0
	}
	fmt.Fprintln(stderr, "knowdp-beam release:", strings.TrimPrefix(err.Error(), "release: "))
	return 1
}

func runRelease(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.CommandLine
	fs.Init("knowdp-beam release", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataPath := fs.String("data", "", "fact table (required): a CSV `FILE` with a header row or a Parquet file, with a column per schema dimension, or a glob of such shards; or an SQLite database file or a postgres:// URL (with --table)")
	table := fs.String("table", "", "with an SQLite or PostgreSQL --data: the `TABLE` to count (the GROUP BY runs in the database)")
	countColumn := fs.String("count-column", "", "`NAME` of a column of counts in --data: each row stands for that many records (non-negative integers)")
	schemaPath := fs.String("schema", "", `schema JSON `+"`FILE`"+` {"dimensions":[{"name":..,"values":[..]}]} declaring every domain (required)`)
	var job pipeline.Job
	var exact, cuboids stringList
	fs.Var(&exact, "exact", "comma-separated `DIMS` of a cuboid published exactly (an invariant), each DIM or DIM:LEVEL of a hierarchy; repeatable; \"\" is the grand total")
	fs.Var(&cuboids, "cuboid", "comma-separated `DIMS` of a cuboid to release, each DIM or DIM:LEVEL of a hierarchy (geo:state,sex); repeatable: several cuboids are released together under the one budget (default: the base cuboid)")
	workload := fs.String("workload", "", "JSON `FILE` listing cuboids to release together, with optional weights: [[\"year\"], {\"cuboid\": [\"sex\",\"age\"], \"weight\": 2}]")
	fs.Float64Var(&job.Epsilon, "epsilon", 0, "privacy loss eps > 0 of the whole release with respect to the neighbours the invariants induce (required with --mechanism laplace)")
	fs.StringVar(&job.Mechanism, "mechanism", "laplace", "`NAME` of the noise: laplace (pure eps, --epsilon) or gaussian (zCDP, --rho)")
	fs.Float64Var(&job.Rho, "rho", 0, "with --mechanism gaussian: the zCDP parameter rho > 0 with respect to the neighbours the invariants induce")
	fs.Float64Var(&job.Delta, "delta", 1e-6, "with --mechanism gaussian: the delta at which the sidecar states the equivalent (eps, delta) guarantee")
	fs.StringVar(&job.Split, "split", "auto", "with several tables, `HOW` the budget is shared among their measurements: optimal (least weighted total variance, certified), equal, spine (each level of a hierarchy the same share), or auto (optimal where knowdp certifies it: flat dimensions or one hierarchy; spine across two or more hierarchies)")
	fs.StringVar(&job.Strategy, "strategy", "best", "with several cuboids, `WHAT` to measure: requested (the cuboids themselves), marginals (any cuboid under them, chosen by the optimal split), residuals (gaussian), lattice (laplace) or best")
	fs.StringVar(&job.Objective, "objective", "auto", "`WHAT` the optimal split minimises: total, mean, max (gaussian) or auto (mean across the levels of a hierarchy, total otherwise); see knowdp release")
	fs.BoolVar(&job.InvariantCosts, "invariant-costs", false, "also state each table's error without each --exact invariant and without any (without_invariants in the sidecar)")
	measurements := fs.String("measurements", "", "with several cuboids: also write the noisy measurements, invariants and noise to this JSON `FILE`, for knowdp estimate (as private as the release)")
	fs.IntVar(&job.Sensitivity, "sensitivity", 0, "calibrate the noise to this generic sensitivity: refused below the value knowdp computes; where it has no closed form, the guarantee is conditional on this claim")
	fs.BoolVar(&job.NonNeg, "nonneg", false, "least-squares consistent release with no negative counts (solved on one worker)")
	fs.BoolVar(&job.Integer, "integer", false, "non-negative integer counts that keep every invariant exactly (unbiased controlled rounding, on one worker)")
	fs.Float64Var(&job.Tol, "tol", 1e-6, "tolerance of --nonneg and --integer (> 0)")
	fs.StringVar(&job.Format, "format", "", "`FORMAT` of the released tables: csv or parquet (default: parquet for an --out ending in .parquet, otherwise csv); the columns are the same")
	out := fs.String("out", "", "output (required): a CSV `FILE` (FILE.parquet for Parquet) for one table, written with its privacy story in the same name with .json; otherwise a new directory of shards (part-NNNNN.csv or .parquet, one per block of 262,144 cells written by a worker; a table of one block is one file named as knowdp release names it) and release.json")
	workerMemory := fs.Float64("worker-memory", 8, "on a cluster, the memory of one worker in `GB`: a release solved on one worker (--nonneg, --integer, levels of a hierarchy, --measurements) that needs more is refused before it starts")
	jsonOut := fs.Bool("json", false, "print the summary as JSON (the sidecar's fields, full precision)")
	verbose := fs.Bool("verbose", false, "print the Beam runner's and SDK's log (INFO and above) on stderr; without it they are silent and a failure is reported by its cause alone")
	force := fs.Bool("force", false, "replace outputs that exist (atomically); without it an output that exists is refused before anything is read")
	infer := fs.Bool("infer-domains", false, "refused: see knowdp release")
	fs.String("dims", "", "with --infer-domains, which is refused: comma-separated dimension `COLUMNS`")
	cellLimit := fs.Int("cell-limit", 0, "refused: see knowdp release")
	fs.StringVar(&job.PrivacyUnit, "privacy-unit", "", "`COLUMN` of --data naming whom each row is about (a person, a student, a household): the guarantee is then per unit, with all its rows; the rows are grouped by unit (GroupByKey) and bounded to --max-rows each; the column is never released")
	maxRows := fs.String("max-rows", "", "with --privacy-unit: the most rows `K` a unit keeps (chosen uniformly at random, as knowdp release chooses them); auto is refused: choose K with knowdp release --max-rows auto")
	quantile := fs.Float64("max-rows-quantile", 0, "refused with --max-rows auto: see knowdp release (`Q`)")
	limit := fs.Int("max-rows-limit", 0, "refused with --max-rows auto: see knowdp release (`K`)")
	fs.Float64Var(&job.UnitShare, "unit-share", 0, "with --privacy-unit: the `FRACTION` of the budget spent on a private count of the units with more than K rows (default 0: no count)")
	fs.BoolVar(&job.RowLevel, "row-level", false, "release per row although a column of --data looks like an identifier: say so only if every row is a different person (or household...)")
	var seed struct {
		set bool
		n   uint64
	}
	fs.Func("seed", "seed `N` for reproducible runs; the output is then NOT differentially private", func(v string) error {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fmt.Errorf("seed must be a non-negative integer, got %q", v)
		}
		seed.set, seed.n = true, n
		return nil
	})
	// Usage errors read "knowdp-beam release: problem" and point to the
	// help, as knowdp's do.
	usageErr := func(format string, a ...any) error {
		fmt.Fprintf(stderr, "knowdp-beam release: %s\nRun 'knowdp-beam release --help' for usage.\n", fmt.Sprintf(format, a...))
		return errUsage
	}
	if cli.HelpRequested(args) {
		fmt.Fprintln(stdout, usage)
		fmt.Fprintln(stdout, "\nFlags (knowdp's, as knowdp release has them, then --worker-memory; the others are Beam's pipeline options):")
		cli.PrintFlags(stdout, fs)
		return flag.ErrHelp
	}
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		msg := err.Error()
		for _, p := range []string{"flag -", "defined: -", "argument: -"} {
			msg = strings.Replace(msg, p, p+"-", 1)
		}
		return usageErr("%s", msg)
	}
	fs.SetOutput(stderr)
	switch {
	case fs.NArg() > 0:
		return usageErr("unexpected argument %q", fs.Arg(0))
	case *infer:
		return usageErr("--infer-domains: a domain read from the data is not private, and knowdp-beam plans the release from the schema before any data is read; explore with knowdp release --infer-domains, then write the schema")
	case *cellLimit != 0:
		return usageErr("--cell-limit guards knowdp release's memory; knowdp-beam has no cell limit on a cluster and checks the memory itself in process (--worker-memory for a release solved on one worker)")
	case *dataPath == "":
		return usageErr("missing required flag --data")
	case *schemaPath == "":
		return usageErr("missing required flag --schema")
	case *out == "":
		return usageErr("missing required flag --out")
	case *out == "-":
		return usageErr("--out -: writing to standard output is not supported; give a file or directory name")
	case !(*workerMemory > 0) || math.IsInf(*workerMemory, 0):
		return usageErr("--worker-memory must be a positive number of GB, got %v", *workerMemory)
	case *maxRows == "auto" || *quantile != 0 || *limit != 0:
		return usageErr("--max-rows auto: a private choice of K needs the rows per unit before the rows are bounded, which this pipeline does in one pass; choose K with knowdp release --max-rows auto (or give K)")
	case !(job.Tol > 0) || math.IsInf(job.Tol, 0):
		// As knowdp release: pipeline.Job reads a zero --tol as the default
		// and would pass NaN or an infinity on to the workers.
		return usageErr("--tol must be a positive number, got %v", job.Tol)
	}
	// pipeline.Job reads an empty --mechanism, --split or --strategy as the
	// default; knowdp release refuses them, and so does this command.
	if _, err := release.ParseMechanism(job.Mechanism); err != nil {
		return usageErr("--mechanism: %v", err)
	}
	if _, err := release.ParseSplit(job.Split); err != nil {
		return usageErr("--split: %v", err)
	}
	if _, err := release.ParseMeasureStrategy(job.Strategy); err != nil {
		return usageErr("--strategy: %v", err)
	}
	job.Cuboids, job.Exact, job.KeepMeasurements = cuboids, exact, *measurements != ""
	if *maxRows != "" {
		n, err := strconv.Atoi(*maxRows)
		if err != nil || n < 1 {
			return usageErr("--max-rows: want a number of rows >= 1, got %q", *maxRows)
		}
		job.MaxRows = n
	}
	sb, err := os.ReadFile(*schemaPath)
	if err != nil {
		return fmt.Errorf("--schema: %w", err)
	}
	s, err := domain.ParseSchema(sb)
	if err != nil {
		return fmt.Errorf("--schema %s: %w", *schemaPath, err)
	}
	if *workload != "" {
		if job.Workload, err = os.ReadFile(*workload); err != nil {
			return fmt.Errorf("--workload: %w", err)
		}
		job.WorkloadName = *workload
	}
	spec := pipeline.Spec{Schema: s, Job: job, Seeded: seed.set, Seed: seed.n, Out: *out, Table: *table, CountColumn: *countColumn,
		Measurements: *measurements, WorkerMemory: int64(*workerMemory * 1e9), Force: *force}
	if source.IsPostgresURL(*dataPath) {
		spec.Files = []string{*dataPath}
	} else if spec.Files, err = filepath.Glob(*dataPath); err != nil {
		return fmt.Errorf("--data %q: %w", *dataPath, err)
	}
	if len(spec.Files) == 0 {
		return fmt.Errorf("--data %q: no such file", *dataPath)
	}
	if spec.Job.Columns, err = tableColumns(ctx, source.Spec{Path: spec.Files[0], Table: *table, CountColumn: *countColumn}); err != nil {
		return err
	}
	// Beam reads its own flags from the global flag set; Init also turns
	// this binary into a worker when a runner starts it as one.
	beam.Init()
	// Beam's Init points the default logger at stderr at INFO, where Prism
	// logs every job's progress and, when a stage fails, the whole
	// pipeline plan before the cause. The cause is what this command
	// reports (pipeline.Run extracts it); the log is for --verbose.
	level := slog.Level(math.MaxInt32)
	if *verbose {
		level = slog.LevelInfo
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})))
	if err := setEnvironment(); err != nil {
		return usageErr("%v", err)
	}
	plan, err := pipeline.NewPlan(spec)
	if errors.Is(err, pipeline.ErrUsage) {
		return usageErr("%s", strings.TrimPrefix(err.Error(), "usage: "))
	}
	if err != nil {
		return err
	}
	// Outputs never replace an input (symbolic and hard links included),
	// checked before anything is read.
	inputs := []fileio.Named{{Flag: "--schema", Path: *schemaPath}, {Flag: "--workload", Path: *workload}}
	for _, f := range spec.Files {
		if !source.IsPostgresURL(f) {
			inputs = append(inputs, fileio.Named{Flag: "--data", Path: f})
		}
	}
	if err := fileio.CheckOutputs(inputs, plan.Outputs(), *force); err != nil {
		return usageErr("%v", err)
	}
	if seed.set {
		fmt.Fprintf(stderr, "WARNING: --seed %d makes the noise predictable; this output is NOT differentially private\n", seed.n)
	}
	res, err := plan.Run(ctx)
	if errors.Is(err, pipeline.ErrUsage) {
		return usageErr("%s", strings.TrimPrefix(err.Error(), "usage: "))
	}
	if err != nil {
		return err
	}
	return printSummary(stdout, s, spec, res, *jsonOut)
}

// printSummary prints what the release wrote and its privacy story, as
// knowdp release prints it (or, with --json, the sidecar with the files).
func printSummary(w io.Writer, s *domain.Schema, spec pipeline.Spec, res *pipeline.Result, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Out     string          `json:"out"`
			Sidecar string          `json:"sidecar"`
			Files   []string        `json:"files"`
			Cells   int64           `json:"cells"`
			Privacy json.RawMessage `json:"privacy"`
		}{spec.Out, res.SidecarPath, res.Files, res.Cells, res.Sidecar})
	}
	var m sidecar.Metadata
	if err := json.Unmarshal(res.Sidecar, &m); err != nil {
		return err
	}
	cli.PrintSummary(w, m)
	if res.Directory {
		fmt.Fprintf(w, "wrote %s/ (%d files)\n", strings.TrimSuffix(spec.Out, "/"), len(res.Files))
	} else {
		fmt.Fprintf(w, "wrote %s and %s\n", spec.Out, res.SidecarPath)
	}
	return nil
}

// tableColumns returns the columns of a fact table file (CSV header,
// Parquet schema), or nil where the reader does not list them (databases).
// It reads no data row.
func tableColumns(ctx context.Context, spec source.Spec) ([]string, error) {
	t, err := source.Open(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("--data: %w", err)
	}
	defer t.Close()
	switch c := t.(type) {
	case interface{ Header() []string }:
		return c.Header(), nil
	case interface{ Columns() []string }:
		return c.Columns(), nil
	}
	return nil, nil
}

// setEnvironment chooses where a portable runner (--runner=universal, or
// any --endpoint) runs the pipeline's workers when --environment_type is
// not given. Beam's default, DOCKER, needs the Beam Go SDK container on
// every worker: a job server on this machine (a Prism job server, a local
// Flink or Spark job server) then fails after submission. For an endpoint
// on this machine the workers run in this process (LOOPBACK), which that
// job server reaches; for one elsewhere the choice is the cluster's, and
// a usage error says what to give.
func setEnvironment() error {
	endpoint, env := flag.Lookup("endpoint"), flag.Lookup("environment_type")
	runner := flag.Lookup("runner")
	if endpoint == nil || env == nil || endpoint.Value.String() == "" || env.Value.String() != "" {
		return nil
	}
	if r := strings.ToLower(runner.Value.String()); r == "dataflow" {
		return nil
	}
	host, _, err := net.SplitHostPort(endpoint.Value.String())
	if err != nil {
		host = endpoint.Value.String()
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return env.Value.Set("LOOPBACK")
	}
	return fmt.Errorf("--endpoint %s: give --environment_type: LOOPBACK if the runner's workers can reach this machine (they run in this process), DOCKER (the Beam Go SDK container on every worker) or PROCESS (--environment_config names the worker command)", endpoint.Value.String())
}
