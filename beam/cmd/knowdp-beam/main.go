// Command knowdp-beam runs knowdp releases as Apache Beam pipelines.
//
//	knowdp-beam release --data 'shards/*.csv' --schema S.json --epsilon 1 \
//	    [--exact dims]... [--cuboid dims] [--seed N] --out release.csv \
//	    [--runner=universal --endpoint=HOST:PORT --environment_type=LOOPBACK]
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
	"path/filepath"
	"strconv"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/knowdp/knowdp/beam/release"
	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/privacy"
)

const usage = `usage: knowdp-beam release --data F.csv|F.parquet|'shards/*' --schema S.json --epsilon E [--exact dims]... [--cuboid dims] [--seed N] --out release.csv [Beam pipeline options]`

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// errUsage marks errors that exit with status 2.
var errUsage = errors.New("usage")

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// run parses the command line into the global flag set, where Beam's
// runners register their options, and runs the command.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "release" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprintln(stdout, usage)
			return 0
		}
		fmt.Fprintln(stderr, usage)
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
	fmt.Fprintln(stderr, "knowdp-beam:", err)
	return 1
}

func runRelease(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.CommandLine
	fs.Init("knowdp-beam release", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataPath := fs.String("data", "", "fact table: a CSV file with a header row or a Parquet file, with a column per schema dimension, or a glob of such shards (required)")
	schemaPath := fs.String("schema", "", `schema JSON {"dimensions":[{"name":..,"values":[..]}]} declaring every domain (required)`)
	var exact stringList
	fs.Var(&exact, "exact", "comma-separated dimensions of a cuboid published exactly (an invariant); repeatable; \"\" is the grand total")
	epsilon := fs.Float64("epsilon", 0, "privacy loss eps > 0 with respect to the neighbours the invariants induce (required)")
	var cuboids stringList
	fs.Var(&cuboids, "cuboid", "comma-separated dimensions of the cuboid to release; \"\" is the grand total (default: the base cuboid)")
	out := fs.String("out", "", "output CSV (required); the privacy story goes to the same name with .json")
	var seed struct {
		set bool
		n   uint64
	}
	fs.Func("seed", "seed for reproducible runs; the output is then NOT differentially private", func(v string) error {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fmt.Errorf("seed must be a non-negative integer, got %q", v)
		}
		seed.set, seed.n = true, n
		return nil
	})
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), usage)
		fmt.Fprintln(fs.Output(), "knowdp flags: --data --schema --exact --cuboid --epsilon --seed --out; run with -help for every flag, Beam's included")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return err
		}
		return errUsage
	}
	usageErr := func(msg string) error {
		fmt.Fprintln(stderr, msg)
		fs.Usage()
		return errUsage
	}
	switch {
	case fs.NArg() > 0:
		return usageErr(fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	case *dataPath == "":
		return usageErr("--data is required")
	case *schemaPath == "":
		return usageErr("--schema is required")
	case *out == "":
		return usageErr("--out is required")
	}
	eps, err := privacy.NewEpsilon(*epsilon)
	if err != nil {
		return fmt.Errorf("--epsilon: %w", err)
	}
	s, err := cube.LoadSchema(*schemaPath)
	if err != nil {
		return err
	}
	spec := release.Spec{Schema: s, Epsilon: eps, Seeded: seed.set, Seed: seed.n, Out: *out}
	spec.Cuboid = cube.Base(s.NumDims())
	switch len(cuboids) {
	case 0:
	case 1:
		if spec.Cuboid, err = s.ParseCuboid(cuboids[0]); err != nil {
			return fmt.Errorf("--cuboid: %w", err)
		}
	default:
		return usageErr("--cuboid is given more than once: knowdp-beam releases one cuboid (workloads of several cuboids are knowdp release's)")
	}
	for _, x := range exact {
		c, err := s.ParseCuboid(x)
		if err != nil {
			return fmt.Errorf("--exact %q: %w", x, err)
		}
		spec.Exact = append(spec.Exact, c)
	}
	if spec.Files, err = filepath.Glob(*dataPath); err != nil {
		return fmt.Errorf("--data %q: %w", *dataPath, err)
	}
	if len(spec.Files) == 0 {
		return fmt.Errorf("--data %q: no such file", *dataPath)
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
	fmt.Fprintf(stdout, "epsilon %g w.r.t. %s\n", m.Epsilon, m.Neighbours)
	if m.Sensitivity == 0 {
		fmt.Fprintf(stdout, "no noise: the cuboid is determined by the exact cuboids (%s); its counts are the TRUE counts\n", m.SensitivityRule)
	} else {
		fmt.Fprintf(stdout, "generic sensitivity %d (%s); Laplace scale %.6g per cell\n", m.Sensitivity, m.SensitivityRule, m.Scale)
	}
	if m.Guarantee == cube.GuaranteeNone {
		fmt.Fprintln(stdout, "guarantee: none: this release is NOT differentially private (seeded)")
	}
	fmt.Fprintf(stdout, "wrote %s and %s\n", *out, res.Sidecar)
	return nil
}
