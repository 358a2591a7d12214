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
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/knowdp/knowdp/beam/release"
	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/internal/fileio"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/source"
)

const usage = `Usage: knowdp-beam release --data FILE|'GLOB' --schema FILE (--epsilon X | --mechanism gaussian --rho R [--delta D]) [--exact DIMS]... [--cuboid DIMS] [--seed N] --out FILE [Beam pipeline options]`

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
		printVersion(stdout)
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

// printVersion prints the module version and the VCS revision the binary
// was built from, as recorded by the Go toolchain (as knowdp --version).
func printVersion(w io.Writer) {
	version, rev, dirty := "(unknown)", "not recorded (built without VCS information: go run, or -buildvcs=false)", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		version = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	fmt.Fprintf(w, "knowdp-beam %s\nrevision %s", version, rev)
	if dirty {
		fmt.Fprint(w, " with uncommitted changes")
	}
	fmt.Fprintf(w, "\n%s\n", runtime.Version())
}

// printFlags lists the flags of fs as "--name VALUE" lines with their
// usage, as knowdp's help does.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, text := flag.UnquoteUsage(f)
		switch name {
		case "int", "uint", "int64", "uint64":
			name = "N"
		case "float":
			name = "X"
		case "string", "value":
			name = strings.ToUpper(name)
		case "duration":
			name = "DURATION"
		}
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		fmt.Fprintf(w, "%s\n    \t%s", line, strings.ReplaceAll(text, "\n", "\n    \t"))
		if d := f.DefValue; d != "" && d != "0" && d != "false" && d != "[]" {
			fmt.Fprintf(w, " (default %s)", strconv.Quote(d))
		}
		fmt.Fprintln(w)
	})
}

// helpRequested reports whether args ask for help before any "--".
func helpRequested(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

func runRelease(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.CommandLine
	fs.Init("knowdp-beam release", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataPath := fs.String("data", "", "fact table (required): a CSV `FILE` with a header row or a Parquet file, with a column per schema dimension, or a glob of such shards; or an SQLite database file or a postgres:// URL (with --table)")
	table := fs.String("table", "", "with an SQLite or PostgreSQL --data: the `TABLE` to count (the GROUP BY runs in the database)")
	countColumn := fs.String("count-column", "", "`NAME` of a column of counts in --data: each row stands for that many records (non-negative integers)")
	schemaPath := fs.String("schema", "", `schema JSON `+"`FILE`"+` {"dimensions":[{"name":..,"values":[..]}]} declaring every domain (required)`)
	var exact stringList
	fs.Var(&exact, "exact", "comma-separated `DIMS` of a cuboid published exactly (an invariant); repeatable; \"\" is the grand total")
	epsilon := fs.Float64("epsilon", 0, "privacy loss eps > 0 with respect to the neighbours the invariants induce (required with --mechanism laplace)")
	mechanism := fs.String("mechanism", "laplace", "`NAME` of the noise: laplace (pure eps, --epsilon) or gaussian (zCDP, --rho)")
	rhoFlag := fs.Float64("rho", 0, "with --mechanism gaussian: the zCDP parameter rho > 0 with respect to the neighbours the invariants induce")
	delta := fs.Float64("delta", 1e-6, "with --mechanism gaussian: the delta at which the sidecar states the equivalent (eps, delta) guarantee")
	var cuboids stringList
	fs.Var(&cuboids, "cuboid", "comma-separated `DIMS` of the cuboid to release; \"\" is the grand total (default: the base cuboid)")
	out := fs.String("out", "", "output CSV `FILE` (required); the privacy story goes to the same name with .json")
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
	if helpRequested(args) {
		fmt.Fprintln(stdout, usage)
		fmt.Fprintln(stdout, "\nFlags (knowdp's: --data --table --count-column --schema --exact --cuboid --epsilon --mechanism --rho --delta --seed --out; the others are Beam's pipeline options):")
		printFlags(stdout, fs)
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
	case *dataPath == "":
		return usageErr("missing required flag --data")
	case *schemaPath == "":
		return usageErr("missing required flag --schema")
	case *out == "":
		return usageErr("missing required flag --out")
	}
	// The mechanism's flags are checked as knowdp release checks them.
	mech, err := cube.ParseMechanism(*mechanism)
	if err != nil {
		return usageErr("--mechanism: %v", err)
	}
	var (
		eps privacy.Epsilon
		rho privacy.Rho
	)
	if mech == cube.MechanismGaussian {
		switch {
		case *epsilon != 0:
			return usageErr("--mechanism gaussian is calibrated to --rho; --epsilon does not apply (the equivalent (eps, delta) is reported for --delta)")
		case !(*delta > 0 && *delta < 1):
			return usageErr("--delta must be in (0, 1), got %v", *delta)
		}
		if rho, err = privacy.NewRho(*rhoFlag); err != nil {
			return usageErr("--rho: %v", err)
		}
	} else {
		if *rhoFlag != 0 {
			return usageErr("--rho needs --mechanism gaussian")
		}
		if eps, err = privacy.NewEpsilon(*epsilon); err != nil {
			return usageErr("--epsilon: %v", err)
		}
	}
	if *out == "-" {
		return usageErr("--out -: writing to standard output is not supported; give a file name")
	}
	sb, err := os.ReadFile(*schemaPath)
	if err != nil {
		return fmt.Errorf("--schema: %w", err)
	}
	s, err := cube.ParseSchema(sb)
	if err != nil {
		return fmt.Errorf("--schema %s: %w", *schemaPath, err)
	}
	spec := release.Spec{Schema: s, Mechanism: mech, Epsilon: eps, Rho: rho, Seeded: seed.set, Seed: seed.n, Out: *out, Table: *table, CountColumn: *countColumn}
	if mech == cube.MechanismGaussian {
		spec.Delta = *delta
	}
	spec.Cuboid = cube.Base(s.NumDims())
	switch len(cuboids) {
	case 0:
	case 1:
		v, err := s.ParseView(cuboids[0])
		if err != nil {
			return fmt.Errorf("--cuboid: %w", err)
		}
		if !v.Flat() {
			return usageErr("--cuboid %s: tables at coarser levels of a hierarchy are knowdp release's (knowdp-beam releases cuboids at their finest levels)", s.FormatView(v))
		}
		spec.Cuboid = v.Dims
	default:
		return usageErr("--cuboid is given more than once: knowdp-beam releases one cuboid (workloads of several cuboids are knowdp release's)")
	}
	for _, x := range exact {
		v, err := s.ParseView(x)
		if err != nil {
			return fmt.Errorf("--exact %q: %w", x, err)
		}
		if !v.Flat() {
			return usageErr("--exact %s: invariants at coarser levels of a hierarchy are knowdp release's (knowdp-beam takes cuboids at their finest levels)", s.FormatView(v))
		}
		spec.Exact = append(spec.Exact, v.Dims)
	}
	if source.IsPostgresURL(*dataPath) {
		spec.Files = []string{*dataPath}
	} else if spec.Files, err = filepath.Glob(*dataPath); err != nil {
		return fmt.Errorf("--data %q: %w", *dataPath, err)
	}
	if len(spec.Files) == 0 {
		return fmt.Errorf("--data %q: no such file", *dataPath)
	}
	// Outputs never replace an input (symbolic and hard links included),
	// checked before anything is read.
	inputs := []fileio.Named{{Flag: "--schema", Path: *schemaPath}}
	for _, f := range spec.Files {
		if !source.IsPostgresURL(f) {
			inputs = append(inputs, fileio.Named{Flag: "--data", Path: f})
		}
	}
	outputs := []fileio.Named{{Flag: "--out", Path: *out}, {Flag: "sidecar", Path: strings.TrimSuffix(*out, filepath.Ext(*out)) + ".json"}}
	if err := fileio.CheckOutputs(inputs, outputs); err != nil {
		return usageErr("%v", err)
	}
	if seed.set {
		fmt.Fprintf(stderr, "WARNING: --seed %d makes the noise predictable; this output is NOT differentially private\n", seed.n)
	}
	// Beam reads its own flags from the global flag set; Init also turns
	// this binary into a worker when a runner starts it as one.
	beam.Init()
	res, err := release.Run(ctx, spec)
	if err != nil {
		return err
	}
	m := res.Meta
	// As knowdp release prints it; the number of rows read is not
	// printed: it is the true total, private unless an invariant has it.
	fmt.Fprintf(stdout, "released cuboid %s: %d cells\n", s.Format(spec.Cuboid), res.Cells)
	if len(m.Exact) > 0 {
		var ex []string
		for _, e := range m.Exact {
			ex = append(ex, "{"+strings.Join(e, ",")+"}")
		}
		fmt.Fprintf(stdout, "exact cuboids (published as they are): %s\n", strings.Join(ex, ", "))
	}
	gaussian := mech == cube.MechanismGaussian
	if gaussian {
		fmt.Fprintf(stdout, "rho %.6g (zCDP; (%.6g, %g)-DP) w.r.t. %s\n", m.Rho, m.Epsilon, m.Delta, m.Neighbours)
	} else {
		fmt.Fprintf(stdout, "epsilon %g w.r.t. %s\n", m.Epsilon, m.Neighbours)
	}
	switch {
	case m.Sensitivity == 0:
		fmt.Fprintf(stdout, "no noise: the cuboid is determined by the exact cuboids (%s); its counts are the TRUE counts\n", res.Plan.SensitivityRule)
	case gaussian:
		fmt.Fprintf(stdout, "L2 generic sensitivity %.6g (%s); Gaussian sigma %.6g per cell\n", m.L2Sensitivity, m.L2SensitivityRule, m.Sigma)
	default:
		fmt.Fprintf(stdout, "generic sensitivity %d (%s); Laplace scale %.6g per cell\n", m.Sensitivity, m.SensitivityRule, m.Scale)
	}
	if m.Guarantee == cube.GuaranteeNone {
		fmt.Fprintln(stdout, "guarantee: none: this release is NOT differentially private (seeded)")
	}
	fmt.Fprintf(stdout, "wrote %s and %s\n", *out, res.Sidecar)
	return nil
}
