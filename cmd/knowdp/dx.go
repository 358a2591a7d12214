package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/knowdp/knowdp/metricdp"
	"github.com/knowdp/knowdp/source"
)

func dxCommand() *command {
	return &command{
		name:    "dx",
		summary: "d_X-private linear queries: per-pair budgets from a metric (paper 4)",
		run:     runDX,
	}
}

const dxUsage = `Usage: knowdp dx laplace --universe U.csv --metric SPEC --queries Q.csv --histogram H.csv [flags]

Answers linear queries with the d_X-private Laplace mechanism and prints each
query's noisy answer, noise scale, the scale the eps-DP Laplace mechanism would
need (eps = the smallest distance) and the improvement factor.

  U.csv  one row per universe element: an "id" column plus the metric's columns
  Q.csv  an "id" column and one column per query (its coefficients)
  H.csv  columns id,count: the histogram of the private data (ids not listed
         count 0). The total number of records is treated as public, as in
         bounded differential privacy: records move, never appear.

`

func runDX(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(e.stderr, dxUsage+metricdp.SpecHelp+"\n")
		if len(args) == 0 {
			return errUsage
		}
		return flag.ErrHelp
	}
	switch args[0] {
	case "laplace":
		return runDXLaplace(ctx, e, args[1:])
	}
	fmt.Fprintf(e.stderr, "knowdp dx: unknown subcommand %q\n\n%s", args[0], dxUsage)
	return errUsage
}

func runDXLaplace(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "dx laplace", "dx laplace --universe U.csv --metric SPEC --queries Q.csv --histogram H.csv [flags]")
	universe := fs.String("universe", "", "universe CSV (required)")
	spec := fs.String("metric", "", "metric SPEC, e.g. euclidean:scale=0.1 (required; see 'knowdp dx help')")
	queries := fs.String("queries", "", "queries CSV (required)")
	histogram := fs.String("histogram", "", "histogram CSV (required)")
	strategy := fs.String("strategy", "optimal", "budget allocation across queries: 1|equal, 2|same, 3|greedy or optimal")
	var seed seedFlag
	fs.Var(&seed, "seed", seedUsage)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	for name, v := range map[string]string{"universe": *universe, "metric": *spec, "queries": *queries, "histogram": *histogram} {
		if v == "" {
			fmt.Fprintf(e.stderr, "--%s is required\n", name)
			fs.Usage()
			return errUsage
		}
	}
	strat, err := metricdp.ParseStrategy(*strategy)
	if err != nil {
		return err
	}
	u, err := metricdp.LoadUniverse(*universe)
	if err != nil {
		return err
	}
	m, note, err := metricdp.ParseSpec(ctx, *spec, u)
	if err != nil {
		return err
	}
	names, q, err := readQueries(*queries, u)
	if err != nil {
		return err
	}
	x, n, err := readHistogram(*histogram, u)
	if err != nil {
		return err
	}
	lm, err := metricdp.NewLaplace(ctx, m, q, strat, n)
	if err != nil {
		return err
	}
	eps, base, err := metricdp.Baseline(ctx, m, q)
	if err != nil {
		return err
	}
	r := seed.rand(e)
	answers, err := lm.Release(r, x)
	if err != nil {
		return err
	}
	scales := lm.Scales()
	per, geo := metricdp.Improvement(base, scales)

	fmt.Fprintf(e.stdout, "metric %s on %d elements; %d records (public)\n", *spec, u.Len(), n)
	if note != "" {
		fmt.Fprintf(e.stdout, "note: %s\n", note)
	}
	fmt.Fprintf(e.stdout, "strategy %s; eps-DP baseline: eps = min distance = %s, scale %s\n", strat, fmtG(eps), fmtG(base))
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "query\tanswer\tscale\tbaseline_scale\timprovement\t")
	for l, name := range names {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", name, fmtG(answers[l]), fmtG(scales[l]), fmtG(base), fmtG(per[l]))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "improvement factor (geometric mean over queries): %s\n", fmtG(geo))
	return nil
}

func fmtG(v float64) string {
	if math.IsInf(v, 1) {
		return "inf"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// readQueries reads a queries CSV: an id column and one column per query,
// with exactly one row per universe element.
func readQueries(path string, u *metricdp.Universe) ([]string, *metricdp.Queries, error) {
	c, err := source.OpenCSV(path)
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	idCol, err := c.Column("id")
	if err != nil {
		return nil, nil, err
	}
	var names []string
	var cols []int
	for i, h := range c.Header() {
		if i != idCol {
			names = append(names, h)
			cols = append(cols, i)
		}
	}
	if len(names) == 0 {
		return nil, nil, fmt.Errorf("%s: no query columns besides id", path)
	}
	rows := make([][]float64, len(names))
	for l := range rows {
		rows[l] = make([]float64, u.Len())
	}
	seen := make([]bool, u.Len())
	for {
		rec, err := c.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		id := strings.TrimSpace(rec[idCol])
		i, ok := u.Index(id)
		if !ok {
			return nil, nil, c.Errorf(idCol, "id %q is not in the universe", id)
		}
		if seen[i] {
			return nil, nil, c.Errorf(idCol, "id %q listed twice", id)
		}
		seen[i] = true
		for l, col := range cols {
			v, err := strconv.ParseFloat(strings.TrimSpace(rec[col]), 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, nil, c.Errorf(col, "%q is not a finite number", rec[col])
			}
			rows[l][i] = v
		}
	}
	for i, s := range seen {
		if !s {
			return nil, nil, fmt.Errorf("%s: no row for universe element %q; every element needs its coefficients", path, u.IDs()[i])
		}
	}
	q, err := metricdp.NewQueries(rows)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return names, q, nil
}

// readHistogram reads id,count rows; elements not listed count 0.
func readHistogram(path string, u *metricdp.Universe) ([]int64, int64, error) {
	c, err := source.OpenCSV(path)
	if err != nil {
		return nil, 0, err
	}
	defer c.Close()
	idCol, err := c.Column("id")
	if err != nil {
		return nil, 0, err
	}
	countCol, err := c.Column("count")
	if err != nil {
		return nil, 0, err
	}
	x := make([]int64, u.Len())
	seen := make([]bool, u.Len())
	var n int64
	for {
		rec, err := c.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, 0, err
		}
		id := strings.TrimSpace(rec[idCol])
		i, ok := u.Index(id)
		if !ok {
			return nil, 0, c.Errorf(idCol, "id %q is not in the universe", id)
		}
		if seen[i] {
			return nil, 0, c.Errorf(idCol, "id %q listed twice", id)
		}
		seen[i] = true
		v, err := strconv.ParseInt(strings.TrimSpace(rec[countCol]), 10, 64)
		if err != nil || v < 0 {
			return nil, 0, c.Errorf(countCol, "%q is not a count >= 0", rec[countCol])
		}
		x[i] = v
		if n += v; n < 0 {
			return nil, 0, c.Errorf(countCol, "total count overflows")
		}
	}
	return x, n, nil
}
