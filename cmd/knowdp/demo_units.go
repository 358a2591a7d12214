package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"text/tabwriter"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/data"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/release"
	"github.com/knowdp/knowdp/unit"
)

// demoUnitsTable is the table the units demo releases, and demoUnitsExact
// its invariant: the number of ratings per department, public exactly.
const (
	demoUnitsTable = "dept,rating"
	demoUnitsExact = "dept"
)

// demoUnitsK are the bounds the demo compares (the last is every rating).
var demoUnitsK = []int{1, 3, 5, 10, 22, 47, 92}

// runDemoUnits releases the bundled lecture evaluations (several ratings
// per student) per rating, which protects a rating and not a student, and
// per student at several bounds K, with the noise and the truncation each
// costs, and with a private choice of K.
func runDemoUnits(ctx context.Context, e *env, args []string) error {
	eps, runs, seed, err := parseDemoFlags(e, "demo units", args, "privacy loss eps > 0 of each release", 20, 2, "releases averaged for each measured error (>= 2)")
	if err != nil {
		return err
	}
	tab, s, err := data.InstEval()
	if err != nil {
		return err
	}
	table, err := s.ParseView(demoUnitsTable)
	if err != nil {
		return err
	}
	exact, err := s.ParseView(demoUnitsExact)
	if err != nil {
		return err
	}
	// Every bound is planned before the data is read.
	base := release.Spec{Tables: []domain.View{table}, Exact: []domain.View{exact}, Epsilon: eps}
	perRow, err := release.NewPlan(s, base)
	if err != nil {
		return err
	}
	plans := make([]*release.Plan, len(demoUnitsK))
	for i, k := range demoUnitsK {
		spec := base
		spec.Unit = &release.Unit{Column: data.InstEvalUnit, MaxRows: k}
		if plans[i], err = release.NewPlan(s, spec); err != nil {
			return err
		}
	}
	autoSpec := base
	autoSpec.Unit = &release.Unit{Column: data.InstEvalUnit}
	auto, err := release.NewPlan(s, autoSpec)
	if err != nil {
		return err
	}
	col, rec, err := unit.NewCollector(tab, s, data.InstEvalUnit, auto.UnitDims())
	if err != nil {
		return err
	}
	counts, _, err := cube.AggregateViews(ctx, rec, s, auto.Needs(), cube.Options{})
	if err != nil {
		return err
	}
	rows, err := col.Rows()
	if err != nil {
		return err
	}
	truth := counts[table.Normal()]
	per := rows.RowsPerUnit()
	sorted := slices.Sorted(slices.Values(per))
	total := int64(0)
	for _, n := range per {
		total += n
	}
	quantile := func(q float64) int64 { return sorted[int(math.Ceil(q*float64(len(sorted))))-1] }

	r := seed.rand(e)
	w := e.stdout
	fmt.Fprintf(w, "knowdp demo units: ETH Zurich lecture evaluations, %s ratings by %s students (lme4 1.1-31, GPL; see data/README.md)\n",
		domain.FormatCount(float64(total)), domain.FormatCount(float64(len(per))))
	fmt.Fprintf(w, "The student is the privacy unit: %d to %d ratings each (median %d, 90th percentile %d; shown because this data set is public).\n",
		sorted[0], sorted[len(sorted)-1], quantile(0.5), quantile(0.9))
	fmt.Fprintf(w, "Released: %s (%d cells) at epsilon %g, with %s (ratings per department) published exactly; errors are root-mean-square per cell over %d releases.\n",
		s.FormatView(table), s.ViewSize(table), eps.Float64(), s.FormatView(exact), runs)
	if r.Seeded() {
		fmt.Fprintln(w, "SEEDED RUN: reproducible and NOT differentially private")
	}

	rms := func(run func(*noise.Rand) ([]float64, error)) (float64, error) {
		sum := 0.0
		for range runs {
			got, err := run(r.Split())
			if err != nil {
				return 0, err
			}
			for i, x := range got {
				d := x - truth[i]
				sum += d * d
			}
		}
		return math.Sqrt(sum / float64(runs*len(truth))), nil
	}
	tableOf := func(rel *release.Release) []float64 {
		for _, t := range rel.Tables {
			if t.TableView() == table {
				return t.Counts
			}
		}
		return nil
	}

	// 1. Per rating.
	rowErr, err := rms(func(rr *noise.Rand) ([]float64, error) {
		rel, err := perRow.Run(ctx, counts, rr)
		if err != nil {
			return nil, err
		}
		return tableOf(rel), nil
	})
	if err != nil {
		return err
	}
	rowMeta, err := perRow.Run(ctx, counts, noise.NewSeeded(0))
	if err != nil {
		return err
	}
	m := rowMeta.Metadata()
	fmt.Fprintf(w, "\n1. Per rating (WRONG for this data): noise calibrated to one rating (sensitivity %d), moe90 %.1f per cell, RMS error %.1f.\n",
		m.Measurements[0].Sensitivity, m.Tables[0].MOE90, rowErr)
	fmt.Fprintf(w, "   The guarantee is per rating: a student with %d ratings is only protected at %d x epsilon = %g (group privacy), not %g.\n",
		sorted[len(sorted)-1], sorted[len(sorted)-1], float64(sorted[len(sorted)-1])*eps.Float64(), eps.Float64())
	fmt.Fprintln(w, "   knowdp release refuses such a file without --privacy-unit (or --row-level) when a column's name looks like an identifier.")

	// 2. Per student, at several K.
	fmt.Fprintf(w, "\n2. Per student (right): each student keeps at most K ratings, chosen at random; the noise is calibrated to K times the row-level sensitivity.\n")
	tw := tabwriter.NewWriter(w, 2, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "K\tsensitivity\tnoise moe90\tratings dropped\tstudents truncated\tRMS error\t")
	best, bestK := math.Inf(1), 0
	for i, k := range demoUnitsK {
		dropped, truncated := int64(0), 0
		for _, n := range per {
			if n > int64(k) {
				dropped += n - int64(k)
				truncated++
			}
		}
		p := plans[i]
		err1, err := rms(func(rr *noise.Rand) ([]float64, error) {
			rel, err := p.RunUnits(ctx, counts, rows, rr)
			if err != nil {
				return nil, err
			}
			return tableOf(rel), nil
		})
		if err != nil {
			return err
		}
		rel, err := p.RunUnits(ctx, counts, rows, noise.NewSeeded(0))
		if err != nil {
			return err
		}
		pm := rel.Metadata()
		fmt.Fprintf(tw, "%d\t%d\t%.1f\t%s (%.1f%%)\t%d\t%.1f\t\n", k, pm.Measurements[0].Sensitivity, pm.Tables[0].MOE90,
			domain.FormatCount(float64(dropped)), 100*float64(dropped)/float64(total), truncated, err1)
		if err1 < best {
			best, bestK = err1, k
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "   A small K drops ratings (bias), a large K adds noise: here K = %d has the least error. The dropped ratings and truncated students\n", bestK)
	fmt.Fprintln(w, "   are shown because this data set is public; a real release never prints them (the exact invariant keeps the department totals true).")

	// 3. A private choice of K.
	rel, err := auto.RunUnits(ctx, counts, rows, r.Split())
	if err != nil {
		return err
	}
	am := rel.Metadata()
	pu := am.PrivacyUnit
	fmt.Fprintf(w, "\n3. A private choice of K (knowdp release --max-rows auto): %g%% of epsilon chooses the %g-quantile of ratings per student and counts the\n",
		100*release.DefaultUnitShare, release.DefaultMaxRowsQuantile)
	fmt.Fprintf(w, "   students above it, privately: K = %d (true 0.9-quantile %d); students with more than K ratings: %.0f ± %.0f (90%%); noise moe90 %.1f per cell.\n",
		pu.MaxRows, quantile(0.9), pu.TruncatedUnits.Count, pu.TruncatedUnits.MOE90, am.Tables[0].MOE90)
	fmt.Fprintf(w, "   The release is %.4g-DP per student in all (the tables' %.4g and the choice's %.4g); see docs/release.md, \"Privacy units\".\n",
		am.Epsilon, am.Epsilon-pu.Epsilon, pu.Epsilon)
	return nil
}
