package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/fileio"
	"github.com/knowdp/knowdp/internal/tablefile"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/release"
)

// releaseViewsSpec is a release whose cuboids name levels of a hierarchy
// (--cuboid geo:state,sex), parsed from the flags.
type releaseViewsSpec struct {
	views   []domain.View
	weights []float64
	exact   []domain.View
}

// parseViews reads --cuboid, --workload and --exact as views. It reports
// whether any stands at a coarser level of a hierarchy.
func parseViews(s *domain.Schema, f *releaseFlags) (releaseViewsSpec, bool, error) {
	var r releaseViewsSpec
	coarse := false
	for _, x := range f.cuboids {
		v, err := s.ParseView(x)
		if err != nil {
			return r, false, fmt.Errorf("--cuboid %q: %w", x, err)
		}
		r.views, r.weights = append(r.views, v), append(r.weights, 1)
		coarse = coarse || !v.Flat()
	}
	if f.workload != "" {
		b, err := os.ReadFile(f.workload)
		if err != nil {
			return r, false, fmt.Errorf("--workload: %w", err)
		}
		vs, ws, err := release.ParseViewWorkload(s, b)
		if err != nil {
			return r, false, fmt.Errorf("--workload %s: %w", f.workload, err)
		}
		for _, v := range vs {
			coarse = coarse || !v.Flat()
		}
		r.views, r.weights = append(r.views, vs...), append(r.weights, ws...)
	}
	for _, x := range f.exact {
		v, err := s.ParseView(x)
		if err != nil {
			return r, false, fmt.Errorf("--exact %q: %w", x, err)
		}
		r.exact = append(r.exact, v)
		coarse = coarse || !v.Flat()
	}
	return r, coarse, nil
}

// releaseViews releases views at several levels of a hierarchy under one
// budget and writes them, with release.json, into the new directory f.out
// (or, for one view, f.out and its sidecar).
func releaseViews(ctx context.Context, e *env, s *domain.Schema, vs releaseViewsSpec, spec release.ViewSpec, f *releaseFlags, format tablefile.Format) error {
	spec.Views, spec.Weights, spec.Exact = vs.views, vs.weights, vs.exact
	// Planned once, before the data is read: the optimal split across a
	// hierarchy takes seconds at national scale.
	plan, err := release.PlanViews(s, spec)
	if err != nil {
		return err
	}
	needs := plan.Needs()
	leaves := map[domain.Cuboid]bool{}
	var leafCuboids []domain.Cuboid
	for _, v := range needs {
		if !leaves[v.Dims] {
			leaves[v.Dims] = true
			leafCuboids = append(leafCuboids, v.Dims)
		}
	}
	var released []domain.Cuboid
	for _, v := range vs.views {
		released = append(released, v.Dims)
	}
	if err := cube.CheckMemory(cube.ReleaseMemory(s, leafCuboids, released, f.integer)); err != nil {
		return fmt.Errorf("releasing %s would run out of memory (%w); coarsen the schema or release smaller views", formatViews(s, vs.views), err)
	}
	counts, err := countData(ctx, e, f, func(t cube.Records, opt cube.Options) (map[domain.View][]float64, int64, error) {
		return cube.AggregateViews(ctx, t, s, needs, opt)
	})
	if err != nil {
		return err
	}
	r := f.seed.rand(e)
	w, err := plan.ReleaseFrom(ctx, counts, r)
	if err != nil {
		return err
	}
	if f.integer {
		if err := w.RoundIntegers(ctx, r.Split()); err != nil {
			return err
		}
	}
	meta := w.Metadata()
	// Written last: the tables' file names are set below.
	sidecar := func(out io.Writer) error {
		metaJSON, err := json.MarshalIndent(meta, "", "  ")
		if err != nil {
			return err
		}
		_, err = out.Write(append(metaJSON, '\n'))
		return err
	}
	var names []string
	if len(w.Tables) == 1 && f.workload == "" {
		t := w.Tables[0]
		if err := fileio.WritePairAtomic(
			fileio.File{Path: f.out, Write: func(out io.Writer) error { return writeTable(out, format, s, t) }},
			fileio.File{Path: sidecarPath(f.out), Write: sidecar},
		); err != nil {
			return err
		}
		names = []string{f.out, sidecarPath(f.out)}
	} else {
		var files []fileio.File
		for _, t := range w.Tables {
			name := strings.TrimSuffix(s.ViewFileName(t.TableView()), ".csv") + format.Ext()
			meta.Tables[len(files)].File = name
			files = append(files, fileio.File{Path: name, Write: func(out io.Writer) error { return writeTable(out, format, s, t) }})
			names = append(names, name)
		}
		files = append(files, fileio.File{Path: "release.json", Write: sidecar})
		names = append(names, "release.json")
		if err := fileio.WriteDirAtomic(f.out, files); err != nil {
			return err
		}
	}
	if w.Conditional {
		fmt.Fprintln(e.stderr, "WARNING: the guarantee is conditional: "+meta.GuaranteeNote)
	}
	if f.json {
		return writeJSON(e.stdout, workloadSummary{Out: f.out, Files: names, Metadata: meta})
	}
	printViewsSummary(e.stdout, w, meta, names)
	if len(names) == 2 && names[0] == f.out {
		fmt.Fprintf(e.stdout, "wrote %s and %s\n", names[0], names[1])
	} else {
		fmt.Fprintf(e.stdout, "wrote %s/ (%d files)\n", strings.TrimSuffix(f.out, "/"), len(names))
	}
	return nil
}

// writeTable writes a released table in the format asked for, with its
// margin of error cell by cell.
func writeTable(w io.Writer, format tablefile.Format, s *domain.Schema, t release.Table) error {
	return tablefile.WriteRows(w, format, s, t.TableView(), 0, t.Counts, t.CellMOE)
}

// printViewsSummary prints what a release of views spent and its error
// level by level.
func printViewsSummary(out io.Writer, w *release.WorkloadRelease, meta release.WorkloadMetadata, names []string) {
	s := w.Schema
	if w.Mechanism == release.MechanismGaussian {
		fmt.Fprintf(out, "released %d tables across the levels of %q for rho %.6g in all (budget %.6g; (%.6g, %g)-DP; split %s) w.r.t. %s\n",
			len(w.Tables), w.Hierarchy, w.Rho, w.RhoBudget, w.Epsilon, w.Delta, meta.Split, w.Neighbours)
	} else {
		fmt.Fprintf(out, "released %d tables across the levels of %q for epsilon %.6g in all (budget %.6g; split %s) w.r.t. %s\n",
			len(w.Tables), w.Hierarchy, w.Epsilon, w.Budget, meta.Split, w.Neighbours)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "table\tcells\tshare\tsensitivity\tmax moe90\tfile\n")
	for i, t := range w.Tables {
		share, sens := fmt.Sprintf("eps %.4g", t.Share), fmt.Sprint(t.Sensitivity)
		if w.Mechanism == release.MechanismGaussian {
			share, sens = fmt.Sprintf("rho %.4g", t.RhoShare), "L2"
		}
		switch {
		case t.Public:
			share, sens = "public (exact)", "0"
		case !t.Measured:
			share = "derived"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%.4g\t%s\n", s.FormatView(t.TableView()), len(t.Counts), share, sens, t.CellMOE90(), filepath.Base(names[min(i, len(names)-1)]))
	}
	tw.Flush()
	fmt.Fprintln(out, "error by level (from the mechanism alone; per cell):")
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "level\tcells\texpected |error|\tmean moe90\tmax moe90\n")
	for _, l := range w.Levels {
		fmt.Fprintf(tw, "%s\t%d\t%.4g\t%.4g\t%.4g\n", l.Level, l.Cells, l.MeanAbsError, l.MeanMOE90, l.MaxMOE90)
	}
	tw.Flush()
	if meta.Guarantee == privacy.GuaranteeNone {
		fmt.Fprintln(out, "guarantee: none: this release is NOT differentially private (seeded, or domains read from the data)")
	}
}

// formatViews formats views as "{geo:state,sex}, {age}".
func formatViews(s *domain.Schema, vs []domain.View) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = s.FormatView(v)
	}
	return strings.Join(out, ", ")
}
