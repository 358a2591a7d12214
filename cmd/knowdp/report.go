package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/fileio"
	"github.com/knowdp/knowdp/report"
)

func reportCommand() *command {
	return &command{
		name:    "report",
		summary: "write a release as one self-contained HTML page: privacy story, budget, errors, checks",
		run:     runReport,
	}
}

const reportUsage = `report DIR|FILE.json [--out FILE] [--schema FILE] [--force]

DIR is a release's directory (its release.json, or estimate.json, and the
tables it lists); FILE.json is a release's metadata file, such as the
sidecar OUT.json of a one-table release beside its OUT.csv or OUT.parquet.
The page is computed from the release's files only, never from the data.`

func runReport(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "report", reportUsage)
	out := fs.String("out", "report.html", "write the page to this `FILE` (refused if it exists, unless --force)")
	schemaPath := fs.String("schema", "", "the release's schema `FILE` (optional): with it, tables at different levels of a hierarchy are checked to add up level by level")
	force := fs.Bool("force", false, forceUsage)
	target, err := parseTarget(fs, args)
	if err != nil {
		return err
	}
	if *out == "" {
		return usageErr(fs, "--out: give a file name")
	}
	// The output is checked before anything is read.
	if err := fileio.CheckOutputs([]fileio.Named{{Flag: "--schema", Path: *schemaPath}}, []fileio.Named{{Flag: "--out", Path: *out}}, *force); err != nil {
		return usageErr(fs, "%v", err)
	}

	dir, name, err := reportTarget(target)
	if err != nil {
		return err
	}
	rel, err := report.Load(os.DirFS(dir), name)
	if err != nil {
		return fmt.Errorf("%s: %w", target, err)
	}
	inputs := []fileio.Named{{Flag: "metadata", Path: filepath.Join(dir, rel.Meta.File)}, {Flag: "--schema", Path: *schemaPath}}
	for _, t := range rel.Tables {
		inputs = append(inputs, fileio.Named{Flag: "table", Path: filepath.Join(dir, t.File)})
	}
	if err := fileio.CheckOutputs(inputs, []fileio.Named{{Flag: "--out", Path: *out}}, *force); err != nil {
		return usageErr(fs, "%v", err)
	}
	var schema *domain.Schema
	if *schemaPath != "" {
		if schema, err = domain.LoadSchema(*schemaPath); err != nil {
			return fmt.Errorf("--schema: %w", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var page bytes.Buffer
	err = report.Render(&page, rel, report.Options{
		Title:     "knowdp report: " + filepath.Base(filepath.Clean(target)),
		Source:    target,
		Schema:    schema,
		Generator: "knowdp report",
	})
	if err != nil {
		return fmt.Errorf("%s: %w", target, err)
	}
	err = fileio.WriteFile(*out, *force, func(w io.Writer) error {
		_, err := w.Write(page.Bytes())
		return err
	})
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	v := rel.Meta.Verdict()
	fmt.Fprintf(e.stdout, "wrote %s (%d tables): %s\n", *out, len(rel.Tables), v.Headline)
	return nil
}

// parseTarget parses "DIR|FILE.json [flags]" or "[flags] DIR|FILE.json".
func parseTarget(fs *flag.FlagSet, args []string) (string, error) {
	var target string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		target, args = args[0], args[1:]
	}
	if err := parse(fs, args); err != nil {
		return "", err
	}
	switch {
	case target == "" && fs.NArg() == 1:
		target = fs.Arg(0)
	case target == "" && fs.NArg() == 0:
		return "", usageErr(fs, "missing argument: the release's directory or metadata file")
	case fs.NArg() > 0:
		return "", usageErr(fs, "unexpected argument %q", fs.Arg(0))
	}
	return target, nil
}

// reportTarget splits the release named on the command line into the
// directory whose files the report may read and the metadata file's name
// in it ("" to look for release.json, then estimate.json).
func reportTarget(target string) (dir, name string, err error) {
	st, err := os.Stat(target)
	if err != nil {
		return "", "", err
	}
	if st.IsDir() {
		return target, "", nil
	}
	return filepath.Dir(target), filepath.Base(target), nil
}
