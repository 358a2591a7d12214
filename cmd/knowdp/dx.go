package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/knowdp/knowdp/metricdp"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/source"
)

func dxCommand() *command {
	return &command{
		name:    "dx",
		summary: "d_X-private linear queries: per-pair budgets from a metric (paper 4)",
		run:     runDX,
	}
}

const dxUsage = `Usage: knowdp dx <mechanism> --universe FILE --metric SPEC --queries FILE --histogram FILE [flags]

d_X-private mechanisms (paper 4): every pair of universe elements has its own
privacy budget, the metric's distance between them. Mechanisms:

  laplace      answers linear queries with the d_X-private Laplace mechanism and
               prints each query's noisy answer, noise scale, the scale the eps-DP
               Laplace mechanism would need (eps = the smallest distance) and the
               improvement factor (IF = baseline scale / scale)
  exponential  chooses one candidate by the d_X-private exponential mechanism, with
               utilities linear in the histogram (--queries: one column per candidate)
  smalldb      releases a synthetic histogram of --size records chosen by the
               small database mechanism (exact; tiny universes only)
  mwem         releases a synthetic histogram by multiplicative weights and the
               exponential mechanism over --rounds rounds

Files:
  --universe   one row per universe element: an "id" column plus the metric's columns
  --queries    an "id" column and one column per query (its coefficients), one row
               per universe element
  --histogram  columns id,count: the histogram of the private data (ids not listed
               count 0). The total number of records is treated as public, as in
               bounded differential privacy: records move, never appear.

Run 'knowdp dx <mechanism> --help' for its flags.

`

// dxMechanisms are the subcommands of knowdp dx.
var dxMechanisms = map[string]func(context.Context, *env, []string) error{
	"laplace":     runDXLaplace,
	"exponential": runDXExponential,
	"smalldb":     runDXSmallDB,
	"mwem":        runDXMWEM,
}

func runDX(ctx context.Context, e *env, args []string) error {
	switch firstArg(args) {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			return runDX(ctx, e, []string{args[1], "--help"})
		}
		fmt.Fprint(e.stdout, dxUsage+metricdp.SpecHelp+"\n")
		return flag.ErrHelp
	}
	if run, ok := dxMechanisms[firstArg(args)]; ok {
		return inSubcommand("dx "+args[0], run(ctx, e, args[1:]))
	}
	return badSubcommand(e, "dx", args, "laplace, exponential, smalldb or mwem")
}

// firstArg returns args[0], or "" if there is none.
func firstArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

// dxInput is what every dx mechanism reads: the universe, the metric, the
// queries (or utilities) and the histogram.
type dxInput struct {
	universe, spec, queries, histogram string
	asJSON                             bool
	seed                               seedFlag

	u     *metricdp.Universe
	m     metricdp.Metric
	note  string
	names []string
	q     *metricdp.Queries
	x     []int64
	n     int64
}

// dxFlagSet declares the flags every dx mechanism shares; queriesWhat says
// what the --queries columns are.
func dxFlagSet(e *env, name, extra, queriesWhat string) (*flag.FlagSet, *dxInput) {
	fs := newFlagSet(e, "dx "+name, "dx "+name+" --universe FILE --metric SPEC --queries FILE --histogram FILE"+extra+" [--seed N] [--json]")
	in := &dxInput{}
	fs.StringVar(&in.universe, "universe", "", "universe CSV `FILE`: an id column and the metric's columns (required)")
	fs.StringVar(&in.spec, "metric", "", "metric `SPEC`, e.g. euclidean:scale=0.1 (required; see 'knowdp help dx')")
	fs.StringVar(&in.queries, "queries", "", "CSV `FILE`: an id column and one column per "+queriesWhat+" (required)")
	fs.StringVar(&in.histogram, "histogram", "", "histogram CSV `FILE` with columns id,count (required)")
	fs.BoolVar(&in.asJSON, "json", false, "print the result as JSON (full precision)")
	fs.Var(&in.seed, "seed", seedUsage)
	return fs, in
}

// load checks the required flags and reads the inputs.
func (in *dxInput) load(ctx context.Context, fs *flag.FlagSet) error {
	if err := requireFlags(fs, "universe", in.universe, "metric", in.spec, "queries", in.queries, "histogram", in.histogram); err != nil {
		return err
	}
	for _, f := range []struct{ name, path string }{{"--universe", in.universe}, {"--queries", in.queries}, {"--histogram", in.histogram}} {
		if err := checkInput(f.name, f.path); err != nil {
			return err
		}
	}
	var err error
	if in.u, err = metricdp.LoadUniverse(in.universe); err != nil {
		return fmt.Errorf("--universe: %w", err)
	}
	if in.m, in.note, err = metricdp.ParseSpec(ctx, in.spec, in.u); err != nil {
		return fmt.Errorf("--metric: %w", in.nameElements(err))
	}
	if in.names, in.q, err = readQueries(in.queries, in.u); err != nil {
		return fmt.Errorf("--queries: %w", err)
	}
	if in.x, in.n, err = readHistogram(in.histogram, in.u); err != nil {
		return fmt.Errorf("--histogram: %w", err)
	}
	return nil
}

var elementRef = regexp.MustCompile(`\b(u_|places? |elements? )(\d+)(?:( and )(\d+))?`)

// nameElements rewrites the package's positional references to universe
// elements (u_3, place 0, places 1 and 2) as their ids and universe rows.
func (in *dxInput) nameElements(err error) error {
	if err == nil || in.u == nil {
		return err
	}
	ids := in.u.IDs()
	name := func(num string) string {
		i, e := strconv.Atoi(num)
		if e != nil || i < 0 || i >= len(ids) {
			return num
		}
		return fmt.Sprintf("%q (universe row %d)", ids[i], i+2)
	}
	msg := elementRef.ReplaceAllStringFunc(err.Error(), func(m string) string {
		g := elementRef.FindStringSubmatch(m)
		prefix := strings.TrimPrefix(g[1], "u_")
		if g[1] == "u_" {
			prefix = ""
		}
		out := prefix + name(g[2])
		if g[3] != "" {
			out += g[3] + name(g[4])
		}
		return out
	})
	return &renamedError{msg: msg, err: err}
}

// renamedError is an error with a rewritten message that still unwraps to
// the original.
type renamedError struct {
	msg string
	err error
}

func (e *renamedError) Error() string { return e.msg }
func (e *renamedError) Unwrap() error { return e.err }

// dxSeeded is the privacy story every dx output carries.
type dxSeeded struct {
	Seeded  bool `json:"seeded"`
	Private bool `json:"private"`
}

func (in *dxInput) story(r *noise.Rand) dxSeeded {
	return dxSeeded{Seeded: r.Seeded(), Private: !r.Seeded()}
}

// dxQueryResult is one query's line of dx laplace.
type dxQueryResult struct {
	Name   string  `json:"name"`
	Answer float64 `json:"answer"`
	Scale  float64 `json:"scale"`
	// Improvement is baseline_scale/scale, null when the query needs no
	// noise (scale 0).
	Improvement *float64 `json:"improvement"`
}

// dxLaplaceResult is the --json output of dx laplace.
type dxLaplaceResult struct {
	Metric   string `json:"metric"`
	Note     string `json:"note,omitempty"`
	Elements int    `json:"elements"`
	Records  int64  `json:"records"`
	Strategy string `json:"strategy"`
	// AllocationNote says why the strategy used differs from the one asked
	// for (the optimal allocation fell back to the best of strategies 1-3).
	AllocationNote string          `json:"allocation_note,omitempty"`
	Epsilon        float64         `json:"baseline_epsilon"`
	Baseline       float64         `json:"baseline_scale"`
	Queries        []dxQueryResult `json:"queries"`
	// GeoMeanImprovement is over the queries that need noise; null if none.
	GeoMeanImprovement *float64 `json:"geomean_improvement"`
	dxSeeded
}

func runDXLaplace(ctx context.Context, e *env, args []string) error {
	fs, in := dxFlagSet(e, "laplace", " [--strategy STRATEGY]", "query (its coefficients)")
	strategy := fs.String("strategy", "optimal", "`STRATEGY` of the budget allocation across queries: 1|equal, 2|same, 3|greedy or optimal (least total variance)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	strat, err := metricdp.ParseStrategy(*strategy)
	if err != nil {
		return usageErr(fs, "--strategy: %v", err)
	}
	if err := in.load(ctx, fs); err != nil {
		return err
	}
	lm, err := metricdp.NewLaplace(ctx, in.m, in.q, strat, in.n)
	if err != nil {
		return in.nameElements(err)
	}
	eps, base, err := metricdp.Baseline(ctx, in.m, in.q)
	if err != nil {
		return in.nameElements(err)
	}
	r := in.seed.rand(e)
	answers, err := lm.Release(r, in.x)
	if err != nil {
		return err
	}
	scales := lm.Scales()
	alloc := lm.Allocation()
	res := dxLaplaceResult{Metric: in.spec, Note: in.note, Elements: in.u.Len(), Records: in.n, Strategy: alloc.Strategy.String(),
		AllocationNote: alloc.Note, Epsilon: eps, Baseline: base, dxSeeded: in.story(r)}
	var logSum float64
	var noisy int
	for l, name := range in.names {
		q := dxQueryResult{Name: name, Answer: answers[l], Scale: scales[l]}
		if scales[l] > 0 {
			f := base / scales[l]
			q.Improvement = &f
			logSum += math.Log(f)
			noisy++
		}
		res.Queries = append(res.Queries, q)
	}
	if noisy > 0 {
		g := math.Exp(logSum / float64(noisy))
		res.GeoMeanImprovement = &g
	}
	if in.asJSON {
		return writeJSON(e.stdout, res)
	}
	fmt.Fprintf(e.stdout, "metric %s on %d elements; %d records (public)\n", in.spec, in.u.Len(), in.n)
	if in.note != "" {
		fmt.Fprintf(e.stdout, "note: %s\n", in.note)
	}
	if alloc.Note != "" {
		fmt.Fprintf(e.stdout, "note: %s\n", alloc.Note)
	}
	fmt.Fprintf(e.stdout, "strategy %s; eps-DP baseline: eps = min distance = %s, scale %s\n", alloc.Strategy, fmtG(eps), fmtG(base))
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "query\tanswer\tscale\tbaseline_scale\timprovement\t")
	for _, q := range res.Queries {
		imp := "no noise needed"
		if q.Improvement != nil {
			imp = fmtIF(*q.Improvement)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", q.Name, fmtG(q.Answer), fmtG(q.Scale), fmtG(base), imp)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if res.GeoMeanImprovement != nil {
		fmt.Fprintf(e.stdout, "improvement factor (geometric mean over the %d queries that need noise): %s\n", noisy, fmtIF(*res.GeoMeanImprovement))
	} else {
		fmt.Fprintln(e.stdout, "no query needs noise: the answers are exact")
	}
	fmt.Fprintln(e.stdout, in.privacyLine(r))
	return nil
}

// privacyLine says what guarantee the output has.
func (in *dxInput) privacyLine(r *noise.Rand) string {
	if r.Seeded() {
		return "privacy: seeded run: reproducible and NOT differentially private"
	}
	return "privacy: d_X-private with respect to the metric (moving one record from u to v changes output odds by at most exp(d(u,v)))"
}

// dxExponentialResult is the --json output of dx exponential.
type dxExponentialResult struct {
	Metric    string   `json:"metric"`
	Note      string   `json:"note,omitempty"`
	Elements  int      `json:"elements"`
	Records   int64    `json:"records"`
	Chosen    string   `json:"chosen"`
	Scale     float64  `json:"scale"`
	Candidate []string `json:"candidates"`
	dxSeeded
}

func runDXExponential(ctx context.Context, e *env, args []string) error {
	fs, in := dxFlagSet(e, "exponential", "", "candidate (its utility coefficients: utility = sum of coefficient × count)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := in.load(ctx, fs); err != nil {
		return err
	}
	em, err := metricdp.NewExponential(ctx, in.m, in.q, in.n)
	if err != nil {
		return in.nameElements(err)
	}
	r := in.seed.rand(e)
	c, err := em.Choose(r, in.x)
	if err != nil {
		return err
	}
	res := dxExponentialResult{Metric: in.spec, Note: in.note, Elements: in.u.Len(), Records: in.n, Chosen: in.names[c], Scale: em.Scale(),
		Candidate: in.names, dxSeeded: in.story(r)}
	if in.asJSON {
		return writeJSON(e.stdout, res)
	}
	fmt.Fprintf(e.stdout, "metric %s on %d elements; %d records (public)\n", in.spec, in.u.Len(), in.n)
	if in.note != "" {
		fmt.Fprintf(e.stdout, "note: %s\n", in.note)
	}
	fmt.Fprintf(e.stdout, "chosen: %s (of %d candidates; weights exp(utility/(2b)), b = %s)\n", res.Chosen, len(in.names), fmtG(res.Scale))
	fmt.Fprintln(e.stdout, in.privacyLine(r))
	return nil
}

// dxSyntheticResult is the --json output of dx smalldb and dx mwem.
type dxSyntheticResult struct {
	Mechanism string  `json:"mechanism"`
	Metric    string  `json:"metric"`
	Note      string  `json:"note,omitempty"`
	Records   int64   `json:"records"`
	Size      int     `json:"size,omitempty"`
	Rounds    int     `json:"rounds,omitempty"`
	Scale     float64 `json:"scale,omitempty"`
	// Synthetic is the released histogram, by id.
	Synthetic []dxCount `json:"synthetic"`
	// Answers are the queries on the synthetic histogram scaled to the
	// number of records.
	Answers []dxCount `json:"answers"`
	// Measured are MWEM's noisy measurements, in round order.
	Measured []dxCount `json:"measured,omitempty"`
	dxSeeded
}

type dxCount struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

func runDXSmallDB(ctx context.Context, e *env, args []string) error {
	fs, in := dxFlagSet(e, "smalldb", " --size M", "query (its coefficients)")
	size := fs.Int("size", 0, "number of records `M` in the synthetic histogram (required, >= 1; the candidates are all C(N+M-1, M) histograms of M records over a universe of N elements)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *size < 1 {
		return usageErr(fs, "missing required flag --size (at least 1)")
	}
	if err := in.load(ctx, fs); err != nil {
		return err
	}
	db, err := metricdp.NewSmallDB(ctx, in.m, in.q, in.n, *size)
	if err != nil {
		return fmt.Errorf("--size %d: %w", *size, in.nameElements(err))
	}
	r := in.seed.rand(e)
	y, err := db.Release(r, in.x)
	if err != nil {
		return err
	}
	syn := make([]float64, len(y))
	for i, v := range y {
		syn[i] = float64(v) * float64(in.n) / float64(*size)
	}
	res := in.synthetic("smalldb", syn, r)
	res.Size, res.Scale = *size, db.Scale()
	for i, v := range y {
		res.Synthetic[i].Value = float64(v) // the released histogram of M records itself
	}
	return in.printSynthetic(e, res, r)
}

func runDXMWEM(ctx context.Context, e *env, args []string) error {
	fs, in := dxFlagSet(e, "mwem", " --rounds T", "query (its coefficients)")
	rounds := fs.Int("rounds", 0, "number of rounds `T` (required, >= 1); each spends d/T on every pair")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *rounds < 1 {
		return usageErr(fs, "missing required flag --rounds (at least 1)")
	}
	if err := in.load(ctx, fs); err != nil {
		return err
	}
	r := in.seed.rand(e)
	out, err := metricdp.MWEM(ctx, r, in.m, in.q, in.x, *rounds)
	if err != nil {
		return in.nameElements(err)
	}
	res := in.synthetic("mwem", out.Synthetic, r)
	res.Rounds = *rounds
	for t, l := range out.Selected {
		res.Measured = append(res.Measured, dxCount{Name: in.names[l], Value: out.Measured[t]})
	}
	return in.printSynthetic(e, res, r)
}

// synthetic fills a result with a synthetic histogram (scaled to the
// records) and the queries' answers on it.
func (in *dxInput) synthetic(mech string, syn []float64, r *noise.Rand) dxSyntheticResult {
	res := dxSyntheticResult{Mechanism: mech, Metric: in.spec, Note: in.note, Records: in.n, dxSeeded: in.story(r)}
	for i, id := range in.u.IDs() {
		res.Synthetic = append(res.Synthetic, dxCount{Name: id, Value: syn[i]})
	}
	for l, name := range in.names {
		var a float64
		for i, v := range syn {
			a += in.q.Coef(l, i) * v
		}
		res.Answers = append(res.Answers, dxCount{Name: name, Value: a})
	}
	return res
}

func (in *dxInput) printSynthetic(e *env, res dxSyntheticResult, r *noise.Rand) error {
	if in.asJSON {
		return writeJSON(e.stdout, res)
	}
	w := e.stdout
	fmt.Fprintf(w, "metric %s on %d elements; %d records (public)\n", in.spec, in.u.Len(), in.n)
	if in.note != "" {
		fmt.Fprintf(w, "note: %s\n", in.note)
	}
	switch res.Mechanism {
	case "smalldb":
		fmt.Fprintf(w, "SmallDB: synthetic histogram of %d records (exponential mechanism, b = %s)\n", res.Size, fmtG(res.Scale))
	case "mwem":
		fmt.Fprintf(w, "MWEM: %d rounds; synthetic histogram of %d records\n", res.Rounds, in.n)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "id\tsynthetic\t")
	for _, c := range res.Synthetic {
		fmt.Fprintf(tw, "%s\t%s\t\n", c.Name, fmtG(c.Value))
	}
	fmt.Fprintln(tw, "query\tanswer (scaled to the records)\t")
	for _, c := range res.Answers {
		fmt.Fprintf(tw, "%s\t%s\t\n", c.Name, fmtG(c.Value))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for t, c := range res.Measured {
		fmt.Fprintf(w, "round %d measured %s = %s\n", t+1, c.Name, fmtG(c.Value))
	}
	fmt.Fprintln(w, in.privacyLine(r))
	return nil
}

func fmtG(v float64) string {
	if math.IsInf(v, 1) {
		return "inf"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// fmtIF formats an improvement factor to 4 significant digits: the noise
// grid's rounding margin makes factors like 0.999996 that mean 1.
func fmtIF(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

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
