package main

import (
	"context"
	"fmt"
	"math"
	"text/tabwriter"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/data"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/release"
)

// demoHierarchyViews are the tables of the hierarchy demo: one per level
// of the geography, finer tables at finer levels, as a census publishes.
var demoHierarchyViews = []string{"", "geo:region", "geo:division,sex", "geo:state,sex", "geo,sex,agegroup"}

// demoHierarchyExact are its invariants: state totals published exactly.
var demoHierarchyExact = []string{"geo:state"}

// runDemoHierarchy releases the bundled US places (synthetic persons over a
// real hierarchy) at every level of the geography under one budget, as
// integer tables that add up, and compares it with releasing each level
// separately.
func runDemoHierarchy(ctx context.Context, e *env, args []string) error {
	eps, runs, seed, err := parseDemoFlags(e, "demo hierarchy", args, "privacy loss eps > 0 of the whole release", 20, 1, "releases averaged for each measured error (>= 1)")
	if err != nil {
		return err
	}
	tab, s, err := data.USGeo()
	if err != nil {
		return err
	}
	parse := func(xs []string) ([]domain.View, error) {
		out := make([]domain.View, len(xs))
		for i, x := range xs {
			if out[i], err = s.ParseView(x); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	views, err := parse(demoHierarchyViews)
	if err != nil {
		return err
	}
	exact, err := parse(demoHierarchyExact)
	if err != nil {
		return err
	}
	plan, err := release.NewPlan(s, release.Spec{Epsilon: eps, Split: release.SplitSpine, Tables: views, Exact: exact})
	if err != nil {
		return err
	}
	// The truth of every table, for the measured errors.
	truth, rows, err := cube.AggregateViews(ctx, tab, s, append(append([]domain.View{}, views...), plan.Needs()...), cube.Options{})
	if err != nil {
		return err
	}
	w := e.stdout
	fmt.Fprintf(w, "knowdp demo hierarchy: %d synthetic persons over the %d US places with more than 50,000 inhabitants,\n", rows, s.Size(0))
	fmt.Fprintf(w, "grouped into %d states and DC, %d Census divisions and %d regions (GeoNames CC BY + Census classification; persons are SYNTHETIC, see data/README.md)\n",
		s.LevelSize(0, 1), s.LevelSize(0, 2), s.LevelSize(0, 3))
	fmt.Fprintf(w, "tables: %s; state totals published exactly; epsilon %g for everything\n", formatViews(s, views), eps.Float64())
	r := seed.rand(e)
	if r.Seeded() {
		fmt.Fprintln(w, "SEEDED RUN: reproducible and NOT differentially private")
	}

	// One release, shown in full: integer tables that add up.
	rel, err := plan.Run(ctx, truth, r.Split())
	if err != nil {
		return err
	}
	if err := rel.RoundIntegers(ctx, r.Split()); err != nil {
		return err
	}
	fmt.Fprintf(w, "\none release (spine split: each level measured gets the same share), non-negative integers:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "table\tcells\tshare\tsensitivity\texpected |error|\tmean moe90\tinteger sums exact\t\n")
	for _, t := range rel.Tables {
		share := fmt.Sprintf("%.3g", t.Share)
		if t.Public {
			share = "public"
		}
		var abs, moe float64
		for _, l := range rel.Levels {
			for _, name := range l.Tables {
				if name == s.FormatView(t.TableView()) {
					abs, moe = l.MeanAbsError, l.MeanMOE90
				}
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%.3g\t%.3g\t%v\t\n", s.FormatView(t.TableView()), len(t.Counts), share, t.Sensitivity, abs, moe, t.IntegerExact || t.Public)
	}
	tw.Flush()
	worst := addUpGap(s, rel.Tables)
	fmt.Fprintf(w, "largest gap between a table and the sum of a finer one, over every pair of levels: %g\n", worst)

	// Measured error per level, against releasing each level on its own.
	one := make(map[domain.View]float64)
	sep := make(map[domain.View]float64)
	var sepGap float64
	for range runs {
		rel, err := plan.Run(ctx, truth, r.Split())
		if err != nil {
			return err
		}
		var sepTables []release.Table
		for _, t := range rel.Tables {
			one[t.TableView()] += meanAbsDiff(t.Counts, truth[t.TableView()]) / float64(runs)
		}
		measured := measuredCount(rel)
		for _, t := range rel.Tables {
			if t.Public {
				sepTables = append(sepTables, t)
				continue
			}
			share, err := privacy.NewEpsilon(eps.Float64() / float64(measured))
			if err != nil {
				return err
			}
			one, err := release.NewPlan(s, release.Spec{Epsilon: share, Split: release.SplitEqual, Tables: []domain.View{t.TableView()}, Exact: exact})
			if err != nil {
				return err
			}
			alone, err := one.Run(ctx, truth, r.Split())
			if err != nil {
				return err
			}
			sep[t.TableView()] += meanAbsDiff(alone.Tables[0].Counts, truth[t.TableView()]) / float64(runs)
			sepTables = append(sepTables, alone.Tables[0])
		}
		sepGap = math.Max(sepGap, addUpGap(s, sepTables))
	}
	fmt.Fprintf(w, "\nmean absolute error per cell over %d releases (measured against the truth):\n", runs)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "table\tone budget, one estimate\teach level separately\t\n")
	for _, v := range views {
		if sep[v] == 0 && one[v] == 0 {
			fmt.Fprintf(tw, "%s\tpublic\tpublic\t\n", s.FormatView(v))
			continue
		}
		fmt.Fprintf(tw, "%s\t%.3g\t%.3g\t\n", s.FormatView(v), one[v], sep[v])
	}
	tw.Flush()
	fmt.Fprintf(w, "largest gap between levels: one estimate %g; separate releases %.3g (their tables do not add up)\n", 0.0, sepGap)
	fmt.Fprintf(w, "\nEach separate release spends epsilon/%d on one table and is made consistent with the state totals only;\n", measuredCount(rel))
	fmt.Fprintln(w, "the one estimate measures the same tables with the same shares and fits them together, so every level")
	fmt.Fprintln(w, "borrows strength from the others and all of them add up. Method: docs/hierarchy.md.")
	return nil
}

// meanAbsDiff returns the mean absolute difference of two tables.
func meanAbsDiff(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += math.Abs(a[i] - b[i])
	}
	return s / float64(len(a))
}

// addUpGap returns the largest difference between a table and the roll-up
// of a finer table it is a roll-up of.
func addUpGap(s *domain.Schema, tables []release.Table) float64 {
	var worst float64
	for _, a := range tables {
		for _, b := range tables {
			va, vb := a.TableView(), b.TableView()
			if va == vb || !vb.RollUpOf(va) {
				continue
			}
			r, err := s.RollUp(va, a.Counts, vb)
			if err != nil {
				continue
			}
			for i := range r {
				worst = math.Max(worst, math.Abs(r[i]-b.Counts[i]))
			}
		}
	}
	return worst
}

// measuredCount returns how many tables of a release were measured.
func measuredCount(w *release.Release) int {
	n := 0
	for _, t := range w.Tables {
		if t.Measured {
			n++
		}
	}
	return n
}
