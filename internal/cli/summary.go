package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/sidecar"
)

// PrintSummary prints what a release spent, on which measurements, the
// error of its tables (level by level across a hierarchy) and its
// guarantee, from its privacy story alone, so that knowdp and knowdp-beam
// print a release alike. The number of rows read is never printed: it is
// the true total, private unless an invariant publishes it.
func PrintSummary(w io.Writer, m sidecar.Metadata) {
	view := func(names []string) string { return "{" + strings.Join(names, ",") + "}" }
	what := fmt.Sprintf("released %d tables", len(m.Tables))
	if len(m.Tables) == 1 {
		what = fmt.Sprintf("released %s: %d cells", view(m.Tables[0].Cuboid), m.Tables[0].Cells)
	}
	if m.Hierarchy != "" {
		what += fmt.Sprintf(" across the levels of %q", m.Hierarchy)
	}
	if m.Rho > 0 || m.RhoBudget > 0 {
		fmt.Fprintf(w, "%s for rho %.6g (zCDP; (%.6g, %g)-DP; budget %.6g; split %s) w.r.t. %s\n",
			what, m.Rho, m.Epsilon, m.Delta, m.RhoBudget, m.Split, m.Neighbours)
	} else {
		fmt.Fprintf(w, "%s for epsilon %.6g (budget %.6g; split %s) w.r.t. %s\n", what, m.Epsilon, m.Budget, m.Split, m.Neighbours)
	}
	if len(m.Exact) > 0 {
		var ex []string
		for _, e := range m.Exact {
			ex = append(ex, view(e))
		}
		fmt.Fprintf(w, "exact (published as they are): %s\n", strings.Join(ex, ", "))
	}
	gaussian := m.Rho > 0 || m.RhoBudget > 0
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if gaussian {
		fmt.Fprintf(tw, "table\tcells\trho share\tL2 sensitivity\tGaussian sigma\tmax moe90\tfile\n")
	} else {
		fmt.Fprintf(tw, "table\tcells\tepsilon share\tsensitivity\tLaplace scale\tmax moe90\tfile\n")
	}
	for _, t := range m.Tables {
		share, sens, scale := "derived", "-", "-"
		for _, x := range m.Measurements {
			if !slices.Equal(x.Cuboid, t.Cuboid) || x.Queries != "" || t.Queries != "" {
				continue
			}
			if gaussian {
				share, sens, scale = fmt.Sprintf("%.4g", x.RhoShare), fmt.Sprintf("%.4g", x.L2Sensitivity), fmt.Sprintf("%.4g", x.Sigma)
			} else {
				share, sens, scale = fmt.Sprintf("%.4g", x.Share), fmt.Sprint(x.Sensitivity), fmt.Sprintf("%.4g", x.Scale)
			}
		}
		if t.Public {
			share, sens, scale = "public (exact)", "0", "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%.4g\t%s\n", view(t.Cuboid), t.Cells, share, sens, scale, t.MOE90, t.File)
	}
	tw.Flush()
	if measuredOnly := measuredElsewhere(m); len(measuredOnly) > 0 {
		fmt.Fprintf(w, "also measured (not published, used by the estimate): %s\n", strings.Join(measuredOnly, ", "))
	}
	if len(m.Levels) > 0 {
		head := "error by level (from the mechanism alone; per cell):"
		if slices.ContainsFunc(m.Tables, func(t sidecar.TableMetadata) bool { return t.Integer }) {
			head = "error by level (from the mechanism alone; per cell; moe90 as the tables publish it, +1 for integer rounding):"
		}
		fmt.Fprintln(w, head)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "level\tcells\texpected |error|\tmean moe90\tmax moe90\n")
		for _, l := range m.Levels {
			fmt.Fprintf(tw, "%s\t%d\t%.4g\t%.4g\t%.4g\n", l.Level, l.Cells, l.MeanAbsError, l.MeanMOE90, l.MaxMOE90)
		}
		tw.Flush()
	}
	if m.SplitGap != nil {
		of := m.ObjectiveOf
		if of == "" {
			of = "weighted total variance"
		}
		fmt.Fprintf(w, "split: objective %.6g (%s), strategy %s; within %.2g%% of the best split among its candidates (%s)\n",
			m.Objective, of, m.Strategy, 100**m.SplitGap, m.SplitMethod)
	}
	if u := m.PrivacyUnit; u != nil {
		how := "given"
		if u.MaxRowsEpsilon > 0 {
			how = fmt.Sprintf("chosen privately, eps %.4g", u.MaxRowsEpsilon)
		}
		fmt.Fprintf(w, "privacy unit: column %q, at most %d rows each (%s); the guarantee is per unit\n", u.Column, u.MaxRows, how)
		if t := u.TruncatedUnits; t != nil {
			fmt.Fprintf(w, "units with more than %d rows (private count, eps %.4g): %.0f ± %.0f (90%%)\n", t.MaxRows, t.Epsilon, t.Count, t.MOE90)
		}
	}
	for _, warn := range m.Warnings {
		if strings.Contains(warn, "TRUE counts") {
			fmt.Fprintln(w, "note: "+warn)
		}
	}
	switch m.Guarantee {
	case privacy.GuaranteeNone:
		fmt.Fprintln(w, "guarantee: none: this release is NOT differentially private (seeded, or domains read from the data)")
	case privacy.GuaranteeConditional:
		fmt.Fprintln(w, "guarantee: conditional: "+m.GuaranteeNote)
	}
}

// measuredElsewhere names the measurements that are not published tables.
func measuredElsewhere(m sidecar.Metadata) []string {
	var out []string
	for _, x := range m.Measurements {
		if x.Queries != "" {
			out = append(out, x.Queries+" {"+strings.Join(x.Cuboid, ",")+"}")
			continue
		}
		published := false
		for _, t := range m.Tables {
			published = published || slices.Equal(x.Cuboid, t.Cuboid) && t.Queries == ""
		}
		if !published {
			out = append(out, "{"+strings.Join(x.Cuboid, ",")+"}")
		}
	}
	return out
}
