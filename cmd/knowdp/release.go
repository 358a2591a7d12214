package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/internal/fileio"
	"github.com/knowdp/knowdp/privacy"
)

func releaseCommand() *command {
	return &command{
		name:    "release",
		summary: "release a noisy cuboid consistent with exact (public) cuboids",
		run:     runRelease,
	}
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func runRelease(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "release", "release --data F.csv --schema S.json --epsilon E [--exact dims]... [--cuboid dims] [--nonneg] [--seed N] --out release.csv")
	dataPath := fs.String("data", "", "fact table: CSV with a header row and a column per schema dimension (required)")
	schemaPath := fs.String("schema", "", `schema JSON {"dimensions":[{"name":..,"values":[..]}]} declaring every domain (required unless --infer-domains)`)
	infer := fs.Bool("infer-domains", false, "take each dimension's domain from the data (the columns named by --dims); NOT private, for exploration only")
	inferDims := fs.String("dims", "", "with --infer-domains: comma-separated dimension columns")
	var exact stringList
	fs.Var(&exact, "exact", "comma-separated dimensions of a cuboid published exactly (an invariant); repeatable; \"\" is the grand total")
	epsilon := fs.Float64("epsilon", 0, "privacy loss eps > 0 with respect to the neighbours the invariants induce (required)")
	cuboid := fs.String("cuboid", "", "comma-separated dimensions of the cuboid to release (default: the base cuboid)")
	sens := fs.Int("sensitivity", 0, "override the generic sensitivity (needed where no closed form exists; a value below the true one voids the guarantee)")
	nonneg := fs.Bool("nonneg", false, "least-squares consistent release with no negative counts")
	tol := fs.Float64("tol", 1e-6, "tolerance of --nonneg")
	limit := fs.Int("cell-limit", cube.DefaultCellLimit, "refuse domains with more cells than this")
	out := fs.String("out", "", "output CSV (required); the privacy story goes to the same name with .json")
	var seed seedFlag
	fs.Var(&seed, "seed", seedUsage)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *dataPath == "":
		return usageErr(fs, "--data is required")
	case *schemaPath == "" && !*infer:
		return usageErr(fs, "--schema is required (or --infer-domains with --dims, which is not private)")
	case *schemaPath != "" && *infer:
		return usageErr(fs, "--schema and --infer-domains exclude each other")
	case *out == "":
		return usageErr(fs, "--out is required")
	}
	eps, err := privacy.NewEpsilon(*epsilon)
	if err != nil {
		return fmt.Errorf("--epsilon: %w", err)
	}

	var s *cube.Schema
	if *infer {
		if *inferDims == "" {
			return usageErr(fs, "--infer-domains needs --dims")
		}
		fmt.Fprintln(e.stderr, "WARNING: --infer-domains takes the domains from the data; the release is NOT differentially private")
		if s, err = cube.InferSchema(ctx, *dataPath, splitList(*inferDims), e.log); err != nil {
			return err
		}
	} else if s, err = cube.LoadSchema(*schemaPath); err != nil {
		return err
	}
	spec := cube.ReleaseSpec{Epsilon: eps, Sensitivity: *sens, NonNegative: *nonneg, Tol: *tol}
	spec.Cuboid = cube.Base(s.NumDims())
	if *cuboid != "" {
		if spec.Cuboid, err = s.ParseCuboid(*cuboid); err != nil {
			return fmt.Errorf("--cuboid: %w", err)
		}
	}
	for _, x := range exact {
		c, err := s.ParseCuboid(x)
		if err != nil {
			return fmt.Errorf("--exact %q: %w", x, err)
		}
		spec.Exact = append(spec.Exact, c)
	}
	if err := s.CheckCells(*limit); err != nil {
		return err
	}

	var size int64
	if st, err := os.Stat(*dataPath); err == nil {
		size = st.Size()
	}
	prog := newProgress(e, "reading "+filepath.Base(*dataPath), size)
	var last int64
	c, err := cube.FromCSV(ctx, *dataPath, s, cube.Options{CellLimit: *limit, Progress: func(n int64) {
		prog.Add(n - last)
		last = n
	}})
	prog.Done()
	if err != nil {
		return err
	}
	rel, err := c.Release(ctx, spec, seed.rand(e))
	if err != nil {
		return err
	}
	meta, err := json.MarshalIndent(rel.Metadata(), "", "  ")
	if err != nil {
		return err
	}
	sidecar := strings.TrimSuffix(*out, filepath.Ext(*out)) + ".json"
	if err := fileio.WriteAtomic(*out, rel.WriteCSV); err != nil {
		return err
	}
	if err := fileio.WriteFileAtomic(sidecar, append(meta, '\n')); err != nil {
		return err
	}
	printRelease(e.stdout, rel, *out, sidecar)
	return nil
}

func printRelease(w io.Writer, rel *cube.Release, out, sidecar string) {
	s := rel.Schema
	fmt.Fprintf(w, "released cuboid %s: %d cells from %s rows\n", s.Format(rel.Cuboid), len(rel.Counts), cube.FormatCount(sum(rel.Counts)))
	if len(rel.Invariants) > 0 {
		var ex []string
		for _, v := range rel.Invariants {
			ex = append(ex, s.Format(v.Cuboid))
		}
		fmt.Fprintf(w, "exact cuboids (published as they are): %s\n", strings.Join(ex, ", "))
	}
	fmt.Fprintf(w, "epsilon %g w.r.t. %s\n", rel.Epsilon, rel.Neighbours)
	if rel.Sensitivity == 0 {
		fmt.Fprintf(w, "no noise: the cuboid is determined by the exact cuboids (%s)\n", rel.SensitivityRule)
	} else {
		fmt.Fprintf(w, "generic sensitivity %d (%s); Laplace scale %.6g per cell\n", rel.Sensitivity, rel.SensitivityRule, rel.Scale)
	}
	if rel.Seeded {
		fmt.Fprintln(w, "SEEDED RUN: reproducible and NOT differentially private")
	}
	fmt.Fprintf(w, "wrote %s and %s\n", out, sidecar)
}

func sum(x []float64) float64 {
	var t float64
	for _, v := range x {
		t += v
	}
	return t
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

// usageErr reports a usage problem with the command's usage and returns
// errUsage.
func usageErr(fs *flag.FlagSet, msg string) error {
	fmt.Fprintln(fs.Output(), msg)
	fs.Usage()
	return errUsage
}
