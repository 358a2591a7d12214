package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/fileio"
	"github.com/knowdp/knowdp/release"
)

func estimateCommand() *command {
	return &command{
		name:    "estimate",
		summary: "estimate any cuboid from the noisy measurements of a release (release --measurements), at no privacy cost",
		run:     runEstimate,
	}
}

// writeMeasurements writes a workload release's noisy measurements (kept
// with release.Spec.KeepMeasurements) to path, atomically.
func writeMeasurements(path string, w *release.Release, force bool) error {
	saved, err := w.SaveMeasurements()
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(saved, "", "  ")
	if err != nil {
		return err
	}
	return fileio.WriteFile(path, force, func(out io.Writer) error {
		_, err := out.Write(append(b, '\n'))
		return err
	})
}

// estimateSummary is the privacy story of an estimate: the release's, since
// estimating is post-processing.
type estimateSummary struct {
	Measurements string          `json:"measurements"`
	Note         string          `json:"note"`
	Mechanism    string          `json:"mechanism"`
	Epsilon      float64         `json:"epsilon"`
	Rho          float64         `json:"rho,omitempty"`
	Delta        float64         `json:"delta,omitempty"`
	Guarantee    string          `json:"guarantee"`
	Private      bool            `json:"private"`
	Tables       []estimateTable `json:"tables"`
}

type estimateTable struct {
	Cuboid   []string `json:"cuboid"`
	File     string   `json:"file,omitempty"`
	Public   bool     `json:"public"`
	Variance float64  `json:"variance"`
	MOE90    float64  `json:"moe90"`
}

func runEstimate(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "estimate", "estimate --measurements FILE --cuboid DIMS [--cuboid DIMS]... [--out DIR] [--force] [--json]")
	var cuboids stringList
	path := fs.String("measurements", "", "JSON `FILE` written by knowdp release --measurements (required)")
	fs.Var(&cuboids, "cuboid", "comma-separated `DIMS` of a table to estimate, each DIM or DIM:LEVEL of a hierarchy (\"\" is the grand total); repeatable (required)")
	out := fs.String("out", "", "write one CSV per cuboid and estimate.json into this new `DIR` (default: the CSVs to stdout)")
	asJSON := fs.Bool("json", false, "print the privacy story and the tables' errors as JSON")
	force := fs.Bool("force", false, forceUsage)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *path == "":
		return usageErr(fs, "--measurements is required")
	case len(cuboids) == 0:
		return usageErr(fs, "give at least one --cuboid")
	}
	if *out != "" {
		// --out is a directory whatever its name: a name that says one
		// file is refused rather than made a directory.
		if ext := strings.ToLower(filepath.Ext(*out)); ext == ".csv" || ext == ".parquet" || ext == ".json" {
			return usageErr(fs, "--out %s: estimate writes a directory (one CSV file per cuboid and estimate.json); give a directory name", *out)
		}
		if err := fileio.CheckOutputs([]fileio.Named{{Flag: "--measurements", Path: *path}}, []fileio.Named{{Flag: "--out", Path: *out, Dir: true}}, *force); err != nil {
			return usageErr(fs, "%v", err)
		}
	}
	b, err := os.ReadFile(*path)
	if err != nil {
		return fmt.Errorf("--measurements: %w", err)
	}
	var saved release.SavedMeasurements
	if err := json.Unmarshal(b, &saved); err != nil {
		return fmt.Errorf("--measurements %s: %w", *path, err)
	}
	s, err := saved.Schema()
	if err != nil {
		return fmt.Errorf("--measurements %s: %w", *path, err)
	}
	var vs []domain.View
	for _, x := range cuboids {
		v, err := s.ParseView(x)
		if err != nil {
			return fmt.Errorf("--cuboid %q: %w", x, err)
		}
		vs = append(vs, v)
	}
	tables, err := saved.EstimateViews(ctx, s, vs)
	if err != nil {
		return err
	}
	if !saved.Private {
		fmt.Fprintln(e.stderr, "WARNING: the measurements come from a release that is NOT differentially private (seeded, or domains read from the data); so are these estimates")
	}
	sum := estimateSummary{
		Measurements: *path, Mechanism: saved.Mechanism, Epsilon: saved.Epsilon, Rho: saved.Rho, Delta: saved.Delta,
		Guarantee: saved.Guarantee, Private: saved.Private,
		Note: "least-squares estimate from the release's noisy measurements and invariants: post-processing, no privacy cost beyond the release's",
	}
	var files []fileio.File
	for _, t := range tables {
		ts := estimateTable{Cuboid: s.ViewNames(t.TableView()), Public: t.Public, Variance: t.Variance, MOE90: t.MOE90}
		if ts.Cuboid == nil {
			ts.Cuboid = []string{}
		}
		if *out != "" {
			ts.File = s.ViewFileName(t.TableView())
			files = append(files, fileio.File{Path: ts.File, Write: func(w io.Writer) error { return t.WriteCSV(w, s) }})
		}
		sum.Tables = append(sum.Tables, ts)
	}
	if *out != "" {
		meta, err := json.MarshalIndent(sum, "", "  ")
		if err != nil {
			return err
		}
		files = append(files, fileio.File{Path: "estimate.json", Write: func(w io.Writer) error {
			_, err := w.Write(append(meta, '\n'))
			return err
		}})
		if err := fileio.WriteDir(*out, files, *force); err != nil {
			return err
		}
	}
	if *asJSON {
		return writeJSON(e.stdout, sum)
	}
	if *out != "" {
		fmt.Fprintf(e.stdout, "wrote %s/ (%d files); no privacy cost beyond the release's (%s)\n", strings.TrimSuffix(*out, "/"), len(files), sum.Guarantee)
		return nil
	}
	for i, t := range tables {
		if i > 0 {
			fmt.Fprintln(e.stdout)
		}
		if err := t.WriteCSV(e.stdout, s); err != nil {
			return err
		}
	}
	return ctx.Err()
}
