package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/fileio"
	"github.com/knowdp/knowdp/internal/tablefile"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/release"
)

// checkNewDir refuses an output directory that exists: a workload release
// creates its directory, and never writes into or over an existing one.
func checkNewDir(dir string) error {
	if dir == "-" {
		return errors.New("-: a workload release writes a directory; give its name")
	}
	if _, err := os.Lstat(dir); err == nil {
		return fmt.Errorf("%s exists; a release of several cuboids creates a new directory (nothing is overwritten)", dir)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// workloadSummary is what release --json prints for several cuboids.
type workloadSummary struct {
	Out      string                   `json:"out"`
	Files    []string                 `json:"files"`
	Metadata release.WorkloadMetadata `json:"privacy"`
}

// releaseWorkload releases several cuboids together and writes them, with
// release.json, into the new directory f.out.
func releaseWorkload(ctx context.Context, e *env, s *domain.Schema, tables map[domain.Cuboid][]float64, plan *release.WorkloadPlan, f *releaseFlags, format tablefile.Format) error {
	r := f.seed.rand(e)
	w, err := plan.ReleaseFrom(ctx, tables, r)
	if err != nil {
		return err
	}
	switch {
	case f.integer:
		err = w.RoundIntegers(ctx, r.Split())
	case f.nonneg:
		err = w.MakeNonNegative(ctx, f.tol)
	}
	if err != nil {
		return err
	}
	meta := w.Metadata()
	var files []fileio.File
	var names []string
	for i, t := range w.Tables {
		name := strings.TrimSuffix(release.TableFileName(w.Schema, t.Cuboid), ".csv") + format.Ext()
		meta.Tables[i].File = name
		files = append(files, fileio.File{Path: name, Write: func(out io.Writer) error {
			return tablefile.Write(out, format, w.Schema, t.Cuboid, t.Counts, t.CellMOE90())
		}})
		names = append(names, name)
	}
	metaJSON, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return err
	}
	files = append(files, fileio.File{Path: "release.json", Write: func(out io.Writer) error {
		_, err := out.Write(append(metaJSON, '\n'))
		return err
	}})
	names = append(names, "release.json")
	if err := fileio.WriteDirAtomic(f.out, files); err != nil {
		return err
	}
	if f.measurements != "" {
		if err := writeMeasurements(f.measurements, w); err != nil {
			return err
		}
	}
	if w.Conditional {
		fmt.Fprintln(e.stderr, "WARNING: the guarantee is conditional: "+meta.GuaranteeNote)
	}
	if f.json {
		return writeJSON(e.stdout, workloadSummary{Out: f.out, Files: names, Metadata: meta})
	}
	if w.Mechanism == release.MechanismGaussian {
		fmt.Fprintf(e.stdout, "released %d cuboids for rho %.6g in all (budget %.6g; (%.6g, %g)-DP; %s) w.r.t. %s\n",
			len(w.Tables), w.Rho, w.RhoBudget, w.Epsilon, w.Delta, meta.Composition, w.Neighbours)
	} else {
		fmt.Fprintf(e.stdout, "released %d cuboids for epsilon %.6g in all (budget %.6g; %s) w.r.t. %s\n",
			len(w.Tables), w.Epsilon, w.Budget, meta.Composition, w.Neighbours)
	}
	if len(w.Invariants) > 0 {
		var ex []string
		for _, v := range w.Invariants {
			ex = append(ex, s.Format(v.Cuboid))
		}
		fmt.Fprintf(e.stdout, "exact cuboids (published as they are): %s\n", strings.Join(ex, ", "))
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	unit, sensName := "epsilon", "sensitivity"
	l2 := map[domain.Cuboid]float64{}
	if w.Mechanism == release.MechanismGaussian {
		unit, sensName = "rho", "L2 sensitivity"
		for _, m := range w.Measurements {
			l2[m.Cuboid] = m.L2Sensitivity
		}
	}
	fmt.Fprintf(tw, "cuboid\tcells\t%s share\t%s\tmoe90\tfile\n", unit, sensName)
	for i, t := range w.Tables {
		share := fmt.Sprintf("%.4g", t.Share)
		sens := fmt.Sprint(t.Sensitivity)
		if w.Mechanism == release.MechanismGaussian {
			share, sens = fmt.Sprintf("%.4g", t.RhoShare), fmt.Sprintf("%.4g", l2[t.Cuboid])
		}
		switch {
		case t.Public:
			share = "public (exact)"
		case !t.Measured:
			share = "derived"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%.4g\t%s\n", s.Format(t.Cuboid), len(t.Counts), share, sens, t.CellMOE90(), names[i])
	}
	tw.Flush()
	if meta.OptimalityGap != nil {
		fmt.Fprintf(e.stdout, "split: weighted total variance %.6g, measuring the %s cuboids; proved within %.2g%% of the optimum (%s)\n",
			meta.Objective, meta.Strategy, 100**meta.OptimalityGap, meta.SplitMethod)
	}
	if meta.Guarantee == privacy.GuaranteeNone {
		fmt.Fprintln(e.stdout, "guarantee: none: this release is NOT differentially private (seeded, or domains read from the data)")
	}
	fmt.Fprintf(e.stdout, "wrote %s/ (%d files)\n", strings.TrimSuffix(f.out, "/"), len(files))
	return nil
}
