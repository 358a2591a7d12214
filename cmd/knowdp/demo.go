package main

import (
	"context"
	"fmt"
	"math"
	"text/tabwriter"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/data"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/release"
	"github.com/knowdp/knowdp/sensitivity"
)

func demoCommand() *command {
	return &command{
		name:    "demo",
		summary: "release the bundled Toronto arrests data under public invariants and compare errors",
		run:     runDemo,
	}
}

// demoScenario is a set of invariants a publisher might really have.
type demoScenario struct {
	title string
	exact []string // cuboids as comma-separated dimensions
}

var demoScenarios = []demoScenario{
	{"arrest totals by year and colour are published exactly", []string{"year,colour"}},
	{"totals by year, and by colour and sex, are published exactly", []string{"year", "colour,sex"}},
}

// demoCuboids are the cuboids whose error the demo reports.
var demoCuboids = []string{"year", "colour,sex", "colour,released", "agegroup", "checks", "year,colour,released"}

// parseDemoFlags parses the flags every demo takes: --epsilon (help
// epsHelp), --runs (by default runs, at least minRuns) and --seed.
func parseDemoFlags(e *env, name string, args []string, epsHelp string, runs, minRuns int, runsHelp string) (privacy.Epsilon, int, seedFlag, error) {
	fs := newFlagSet(e, name, name+" [--epsilon X] [--runs N] [--seed N]")
	epsilon := fs.Float64("epsilon", 1, epsHelp)
	n := fs.Int("runs", runs, runsHelp)
	var seed seedFlag
	fs.Var(&seed, "seed", seedUsage)
	if err := parseFlags(fs, args); err != nil {
		return privacy.Epsilon{}, 0, seed, err
	}
	eps, err := privacy.NewEpsilon(*epsilon)
	if err != nil {
		return privacy.Epsilon{}, 0, seed, usageErr(fs, "--epsilon: %v", err)
	}
	if *n < minRuns {
		return privacy.Epsilon{}, 0, seed, usageErr(fs, "--runs must be at least %d, got %d", minRuns, *n)
	}
	return eps, *n, seed, nil
}

func runDemo(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 && args[0] == "hierarchy" {
		return runDemoHierarchy(ctx, e, args[1:])
	}
	if len(args) > 0 && args[0] == "units" {
		return runDemoUnits(ctx, e, args[1:])
	}
	eps, runs, seed, err := parseDemoFlags(e, "demo", args, "privacy loss eps > 0 of each release", 200, 2, "releases averaged for each error figure (>= 2, for the standard errors)")
	if err != nil {
		return err
	}
	tab, s, err := data.Arrests()
	if err != nil {
		return err
	}
	c, err := cube.Build(ctx, tab, s, cube.Options{})
	if err != nil {
		return err
	}
	r := seed.rand(e)
	w := e.stdout
	fmt.Fprintf(w, "knowdp demo: Toronto arrests for marijuana possession, %s people (carData 3.0-5, GPL; see data/README.md)\n", domain.FormatCount(c.Total()))
	fmt.Fprintf(w, "base cuboid %s: %d cells\nepsilon %g per release; errors are root-mean-square per cell over %d releases, ± one standard error\n",
		s.Format(domain.Base(s.NumDims())), s.Cells(), eps.Float64(), runs)
	if r.Seeded() {
		fmt.Fprintln(w, "SEEDED RUN: reproducible and NOT differentially private")
	}
	for i, sc := range demoScenarios {
		if err := demoScenarioRun(ctx, e, c, sc, i+1, eps, runs, r); err != nil {
			return err
		}
	}
	if err := demoWorkload(ctx, e, c, demoScenarios[1], eps, r); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nIn scenarios 1 and 2 each cuboid is released on its own (knowdp release --cuboid), costing epsilon each.")
	fmt.Fprintln(w, "S:          the generic sensitivity the invariants induce (0: the cuboid is public, released exactly)")
	fmt.Fprintln(w, "noisy:      Laplace(S/eps) on every cell of the cuboid's declared domain; no consistency")
	fmt.Fprintln(w, "consistent: the same noise, then least-squares consistency with the invariants (knowdp release)")
	fmt.Fprintln(w, "naive*:     Laplace(1/eps), ignoring the invariants, then consistency. NOT private under the invariants:")
	fmt.Fprintln(w, "            an adversary who knows them can tell induced neighbours apart with more than e^eps odds.")
	return nil
}

func demoScenarioRun(ctx context.Context, e *env, c *cube.Cube, sc demoScenario, n int, eps privacy.Epsilon, runs int, r *noise.Rand) error {
	s := c.Schema
	var exact []domain.Cuboid
	for _, x := range sc.exact {
		cb, err := s.ParseCuboid(x)
		if err != nil {
			return err
		}
		exact = append(exact, cb)
	}
	naiveLap, err := noise.NewLaplace(1, eps.Float64())
	if err != nil {
		return err
	}
	w := e.stdout
	fmt.Fprintf(w, "\nScenario %d: %s.\n", n, sc.title)
	tw := tabwriter.NewWriter(w, 2, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  released cuboid\tcells\tS\tnoisy\tconsistent\tnaive*\t")
	exactViews := make([]domain.View, len(exact))
	for i, cb := range exact {
		exactViews[i] = domain.ViewOf(cb)
	}
	var rel *release.CuboidRelease
	for _, name := range append(demoCuboids, "") {
		cb := domain.Base(s.NumDims())
		if name != "" {
			if cb, err = s.ParseCuboid(name); err != nil {
				return err
			}
		}
		truth := c.Project(cb)
		// The release itself (knowdp release --cuboid), for its
		// sensitivity and invariants.
		plan, err := release.NewPlan(s, release.Spec{Epsilon: eps, Exact: exactViews, Tables: []domain.View{domain.ViewOf(cb)}})
		if err != nil {
			return err
		}
		if rel = plan.Cuboid(); rel == nil {
			return fmt.Errorf("demo: the release of %s is not one noisy cuboid", s.Format(cb))
		}
		counts, err := c.ProjectViews(plan.Needs())
		if err != nil {
			return err
		}
		released, err := plan.Run(ctx, counts, r)
		if err != nil {
			return err
		}
		invariants := released.Invariants
		var lap noise.Laplace
		if rel.Sensitivity > 0 {
			if lap, err = noise.NewLaplace(float64(rel.Sensitivity), eps.Float64()); err != nil {
				return err
			}
		}
		// Per method (noisy, consistent, naive): the sum of the runs' mean
		// squared errors per cell, and of their squares.
		var sq, sq2 [3]float64
		for range runs {
			// The release's mechanism with the noise kept: consistency is
			// a projection onto a set containing the truth, so on the same
			// noise it never increases the error, and the table compares
			// the two without the noise of independent draws.
			raw := append([]float64(nil), truth...)
			if rel.Sensitivity > 0 {
				if err := lap.AddTo(r, raw); err != nil {
					return err
				}
			}
			cons := append([]float64(nil), raw...)
			if err := estimate.Consistent(s, cb, cons, invariants); err != nil {
				return err
			}
			// The naive noise, calibrated as if nothing were public.
			nv := append([]float64(nil), truth...)
			if err := naiveLap.AddTo(r, nv); err != nil {
				return err
			}
			if err := estimate.Consistent(s, cb, nv, invariants); err != nil {
				return err
			}
			for m, x := range [3][]float64{raw, cons, nv} {
				var mse float64
				for k := range x {
					d := x[k] - truth[k]
					mse += d * d
				}
				mse /= float64(len(x))
				sq[m] += mse
				sq2[m] += mse * mse
			}
		}
		label := s.Format(cb)
		if name == "" {
			label = "base"
		}
		var col [3]string
		for m := range col {
			col[m] = rmsWithError(sq[m], sq2[m], runs)
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%s\t%s\t%s\t\n", label, len(truth), rel.Sensitivity, col[0], col[1], col[2])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "  neighbours: %s\n", rel.Neighbours)
	fmt.Fprintf(w, "  base cuboid: S = %d by %s\n", rel.Sensitivity, rel.SensitivityRule)
	return nil
}

// rmsWithError formats the root of the mean of runs per-run mean squared
// errors (sum and sum of squares given) with its standard error, by the
// delta method: SE(sqrt(m)) = SE(m) / (2 sqrt(m)).
func rmsWithError(sum, sumSq float64, runs int) string {
	n := float64(runs)
	mean := sum / n
	if mean == 0 {
		return "0"
	}
	variance := max(sumSq/n-mean*mean, 0) * n / (n - 1)
	rms := math.Sqrt(mean)
	se := math.Sqrt(variance/n) / (2 * rms)
	return fmt.Sprintf("%.2f±%.2f", rms, se)
}

// demoWorkload releases the demo's cuboids as one table set under one
// epsilon (knowdp release with several --cuboid), and compares the
// expected error of the ways to spend that budget.
func demoWorkload(ctx context.Context, e *env, c *cube.Cube, sc demoScenario, eps privacy.Epsilon, r *noise.Rand) error {
	s := c.Schema
	spec := release.Spec{Epsilon: eps}
	var exact, cuboids []domain.Cuboid
	for _, x := range sc.exact {
		cb, err := s.ParseCuboid(x)
		if err != nil {
			return err
		}
		exact = append(exact, cb)
		spec.Exact = append(spec.Exact, domain.ViewOf(cb))
	}
	for _, x := range demoCuboids {
		cb, err := s.ParseCuboid(x)
		if err != nil {
			return err
		}
		cuboids = append(cuboids, cb)
		spec.Tables = append(spec.Tables, domain.ViewOf(cb))
	}
	// Public cuboids (computable from the invariants) cost nothing; the
	// others share the budget when released one by one.
	k := 0
	for _, cb := range cuboids {
		if sens, err := sensitivity.GenericSensitivity(s, exact, cb); err == nil && sens.Value > 0 {
			k++
		}
	}
	w := e.stdout
	fmt.Fprintf(w, "\nScenario 3: the %d cuboids above as ONE table set for epsilon %g in all, with the invariants of scenario 2,\n", len(cuboids), eps.Float64())
	fmt.Fprintln(w, "estimated once (knowdp release --cuboid ... --cuboid ...): every table agrees with every other and with the invariants.")
	fmt.Fprintln(w, "Expected root-mean-square error per cell, from the mechanism alone (no data):")
	many, err := privacy.NewEpsilon(eps.Float64() * float64(k))
	if err != nil {
		return err
	}
	today := spec
	today.Epsilon = many
	cols := []struct {
		label string
		spec  release.Spec
		st    release.Strategy
	}{
		{fmt.Sprintf("separate, eps each (%g in all)", many.Float64()), today, release.StrategySeparate},
		{fmt.Sprintf("separate, eps/%d each", k), spec, release.StrategySeparate},
		{"noisy base, aggregated", spec, release.StrategyBase},
		{"equal split + LS", spec, release.StrategyEqual},
		{"optimal split + LS", spec, release.StrategyOptimal},
	}
	rmse := make([][]float64, len(cols))
	for i, col := range cols {
		if rmse[i], err = release.ExpectedRMSE(s, col.spec, col.st); err != nil {
			return err
		}
	}
	integer := spec
	integer.Integer = true
	plan, err := release.NewPlan(s, integer)
	if err != nil {
		return err
	}
	counts, err := c.ProjectViews(plan.Needs())
	if err != nil {
		return err
	}
	rel, err := plan.Run(ctx, counts, r)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 2, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "  cuboid\t")
	for _, col := range cols {
		fmt.Fprintf(tw, "%s\t", col.label)
	}
	fmt.Fprintln(tw, "released: integer, moe90\t")
	for j, t := range rel.Tables {
		fmt.Fprintf(tw, "  %s\t", s.Format(t.Cuboid))
		for i := range cols {
			fmt.Fprintf(tw, "%.2f\t", rmse[i][j])
		}
		exact := "exact margins"
		if !t.IntegerExact && !t.Public {
			exact = fmt.Sprintf("margins within %g", t.IntegerMaxDeviation)
		}
		if t.Public {
			exact = "public"
		}
		fmt.Fprintf(tw, "%s, ±%.1f\t\n", exact, t.CellMOE90())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "  The released set (optimal split, non-negative integers) spent epsilon %.6g; moe90: the true count is within\n", rel.Epsilon)
	fmt.Fprintln(w, "  ± moe90 of the released one with probability 90% (the least-squares margin, plus 1 for rounding).")
	fmt.Fprintf(w, "  Separate releases: each of the %d non-public cuboids on its own (public ones cost nothing); the optimal\n", k)
	fmt.Fprintln(w, "  split minimises the total variance over all cells, so it favours the large cuboid over the small ones.")
	return nil
}
