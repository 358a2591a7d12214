package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"strconv"
	"strings"
	"unicode"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/prior"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/source"
)

func queryCommand() *command {
	return &command{
		name:    "query",
		summary: "answer one query with prior-knowledge refinement (knowdp query prior)",
		run:     runQuery,
	}
}

const querySyntax = `
Mechanisms:
  prior   prior-knowledge refinement (Soria-Comas and Domingo-Ferrer 2012,
          Algorithm 1): the answer is drawn from your prior, reweighted
          towards the true value; no sensitivity is needed.

Queries (--query; keywords are case-insensitive, quote values with spaces):
  value(COL[, COL...]) where KEY=V [and ...]
        individual query: the attribute(s) of the one row the where clause
        selects. If it selects no row, or several, the individual is treated
        as absent and the answer is drawn from the prior; the output never
        says which (that would depend on the data).
  count [where ...]            number of matching rows
  fraction where ...           matching rows / all rows
  mean(COL) [where ...]        mean of a numeric column over matching rows
  sum(COL) [where ...]         sum of a numeric column over matching rows
  Statistical queries with no matching row (a mean of nothing) answer from
  the prior. Conditions are equalities joined by "and"; values of schema
  dimensions must belong to their declared domain.

Priors (--prior, JSON; categories of schema dimensions default to the
schema's domain, in its order):
  {"values": [0, 1], "probabilities": [0.99, 0.01]}
  {"level": "nominal", "values": ["No", "Yes"], "probabilities": [0.3, 0.7]}
  {"level": "ordinal", "values": ["18-24", "25-34"], "probabilities": [0.4, 0.6]}
  {"pieces": [{"lo": 0, "hi": 1, "density": 1}]}          (continuous)
  {"components": [{"name": "employed", "level": "nominal"}, ...],
   "joint": [{"value": ["Yes", "No"], "probability": 0.6}, ...]}
  {"independent": [{...}, {...}]}
  Statistical queries need a one-component numeric prior; value(...) needs
  one component per column, in order.
`

func runQuery(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] != "prior" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprintln(e.stdout, "Usage: knowdp query prior [flags]   (flags: 'knowdp help query prior')")
			fmt.Fprint(e.stdout, querySyntax)
			return flag.ErrHelp
		}
		return badSubcommand(e, "query", args, "prior")
	}
	return inSubcommand("query prior", runQueryPrior(ctx, e, args[1:]))
}

// queryResult is the --json output of query prior.
type queryResult struct {
	// Answers are the formatted answers and Points their coordinates at
	// full precision; one per --samples.
	Answers  []string      `json:"answers"`
	Points   []prior.Point `json:"points"`
	Query    string        `json:"query"`
	Kind     string        `json:"kind"`
	Epsilon  float64       `json:"epsilon"`
	Delta    float64       `json:"delta"`
	AlphaU   float64       `json:"alpha_u"`
	AlphaD   float64       `json:"alpha_d"`
	Distance string        `json:"distance"`
	Samples  int           `json:"samples"`
	Seeded   bool          `json:"seeded"`
	// Private is true only for one unseeded answer: several answers to
	// the same query compose (their losses add up).
	Private bool `json:"private"`
}

// loadQuerySchema reads --schema. A schema with no dimensions is allowed
// here (a purely numeric query has no categorical columns) and gives nil.
func loadQuerySchema(path string) (*domain.Schema, error) {
	if err := checkInput("--schema", path); err != nil {
		return nil, err
	}
	s, err := domain.LoadSchema(path)
	if err == nil {
		return s, nil
	}
	b, rerr := os.ReadFile(path)
	if rerr != nil {
		return nil, err
	}
	var doc struct {
		Dimensions []json.RawMessage `json:"dimensions"`
	}
	dec := json.NewDecoder(bytes.NewReader(bytes.TrimPrefix(b, []byte("\uFEFF"))))
	dec.DisallowUnknownFields()
	if dec.Decode(&doc) == nil && doc.Dimensions != nil && len(doc.Dimensions) == 0 {
		return nil, nil
	}
	return nil, err
}

// lookupDim is s.Lookup for a schema that may be nil (no dimensions).
func lookupDim(s *domain.Schema, col string) (int, bool) {
	if s == nil {
		return 0, false
	}
	return s.Lookup(col)
}

func runQueryPrior(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "query prior", "query prior --data FILE --schema FILE --query QUERY --prior FILE --epsilon X [--delta X] [--alpha-u X] [--distance l1|l2|linf] [--weights WEIGHTS] [--samples N] [--seed N] [--json]")
	usage := fs.Usage
	fs.Usage = func() { usage(); fmt.Fprint(fs.Output(), querySyntax) }
	dataPath := fs.String("data", "", "fact table: CSV `FILE` with a header row (required)")
	countColumn := fs.String("count-column", "", "`NAME` of a column of counts in --data: each row stands for that many records (non-negative integers)")
	schemaPath := fs.String("schema", "", "schema JSON `FILE` "+`{"dimensions":[{"name":..,"values":[..]}]} declaring the domains of the categorical columns (required; {"dimensions":[]} if there are none)`)
	queryText := fs.String("query", "", "the `QUERY`; see below (required)")
	priorPath := fs.String("prior", "", "the prior knowledge about the answer, JSON `FILE`; see below (required)")
	epsilon := fs.Float64("epsilon", 0, "privacy loss eps > 0 (required)")
	delta := fs.Float64("delta", 0, "delta of the (eps, delta) variant; 0 for eps-differential privacy")
	alphaU := fs.Float64("alpha-u", 0, "statistical queries: the factor alpha_u in [1, e^eps] near the true value (default e^(eps/2); alpha_d = alpha_u e^-eps)")
	distName := fs.String("distance", "", "distance for a prior with several components: l1, l2 or linf (one component: Table 1's distance)")
	weightList := fs.String("weights", "", "with --distance: comma-separated `WEIGHTS` of the components")
	samples := fs.Int("samples", 1, "answers to draw (>= 1); more than one is for experiments and NOT private at --epsilon (the losses add up)")
	asJSON := fs.Bool("json", false, "print the result as JSON (answers at full precision)")
	var seed seedFlag
	fs.Var(&seed, "seed", seedUsage)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := requireFlags(fs, "data", *dataPath, "schema", *schemaPath, "query", *queryText, "prior", *priorPath); err != nil {
		return err
	}
	if *samples < 1 {
		return usageErr(fs, "--samples must be at least 1, got %d", *samples)
	}
	eps, err := privacy.NewEpsilon(*epsilon)
	if err != nil {
		return usageErr(fs, "--epsilon: %v", err)
	}
	del, err := privacy.NewDelta(*delta)
	if err != nil {
		return usageErr(fs, "--delta: %v", err)
	}
	q, err := parsePriorQuery(*queryText)
	if err != nil {
		return fmt.Errorf("--query: %w", err)
	}
	schema, err := loadQuerySchema(*schemaPath)
	if err != nil {
		return err
	}
	if err := checkInput("--prior", *priorPath); err != nil {
		return err
	}
	if kind, err := source.Kind(*dataPath); err == nil && kind != "CSV" {
		return usageErr(fs, "--data: query prior reads a CSV file, and %s is a %s %s; export the table to CSV (knowdp release reads Parquet, SQLite and PostgreSQL)",
			redactData(*dataPath), kind, map[bool]string{true: "URL", false: "file"}[kind == "postgres"])
	}
	if err := checkInput("--data", *dataPath); err != nil {
		return err
	}
	if err := q.checkDomains(schema); err != nil {
		return fmt.Errorf("--query: %w", err)
	}
	var domains [][]string
	for _, c := range q.cols {
		if i, ok := lookupDim(schema, c); ok && q.kind == prior.Individual {
			domains = append(domains, schema.Dim(i).Values)
		} else {
			domains = append(domains, nil)
		}
	}
	pr, err := prior.Load(*priorPath, domains)
	if err != nil {
		return err
	}
	comps := pr.Components()
	if err := q.checkPrior(comps, schema, *priorPath); err != nil {
		return err
	}
	cfg := prior.Config{Kind: q.kind, Epsilon: eps, Delta: del, AlphaU: *alphaU}
	if *distName != "" {
		norm, err := prior.ParseNorm(*distName)
		if err != nil {
			return fmt.Errorf("--distance: %w", err)
		}
		var w []float64
		for _, s := range splitList(*weightList) {
			x, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return fmt.Errorf("--weights: %q is not a number", s)
			}
			w = append(w, x)
		}
		if cfg.Distance, err = prior.Combine(comps, norm, w); err != nil {
			return fmt.Errorf("--distance: %w", err)
		}
	} else if *weightList != "" {
		return errors.New("--weights needs --distance")
	}
	m, err := prior.New(pr, cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", *priorPath, err)
	}
	truth, err := q.evaluate(ctx, *dataPath, *countColumn, schema, comps)
	if err != nil {
		return err
	}
	r := seed.rand(e)
	res := queryResult{Query: q.text, Kind: fmt.Sprint(q.kind), Epsilon: eps.Float64(), Delta: del.Float64(), AlphaU: m.AlphaU(), AlphaD: m.AlphaD(),
		Distance: fmt.Sprint(m.Distance()), Samples: *samples, Seeded: r.Seeded(), Private: !r.Seeded() && *samples == 1}
	for range *samples {
		x, err := m.Respond(r, truth)
		if err != nil {
			return err
		}
		res.Answers, res.Points = append(res.Answers, pr.Format(x)), append(res.Points, x)
	}
	if *samples > 1 {
		fmt.Fprintf(e.stderr, "WARNING: --samples %d draws %d answers to the same query; together they are NOT private at --epsilon (the losses add up)\n", *samples, *samples)
	}
	if *asJSON {
		return writeJSON(e.stdout, res)
	}
	w := e.stdout
	if *samples == 1 {
		fmt.Fprintf(w, "answer: %s\n", res.Answers[0])
	} else {
		fmt.Fprintf(w, "answers (%d samples): %s\n", *samples, strings.Join(res.Answers, " "))
	}
	fmt.Fprintf(w, "query: %s (%v)\n", q.text, q.kind)
	fmt.Fprintln(w, "mechanism: prior-knowledge refinement (Soria-Comas and Domingo-Ferrer, Algorithm 1)")
	fmt.Fprintf(w, "epsilon: %.6g\n", eps.Float64())
	fmt.Fprintf(w, "delta: %.6g\n", del.Float64())
	fmt.Fprintf(w, "alpha_u: %.6g\nalpha_d: %.6g\n", m.AlphaU(), m.AlphaD())
	fmt.Fprintf(w, "distance: %v\n", m.Distance())
	if p, ok := pr.(*prior.Piecewise); ok {
		fmt.Fprintf(w, "prior: continuous, pieces: %d (answers on a grid of %g)\n", len(p.Pieces()), p.Grid())
	} else {
		fmt.Fprintf(w, "prior: discrete, %d points\n", pr.(*prior.Discrete).Len())
	}
	if r.Seeded() {
		fmt.Fprintf(w, "seeded: yes (--seed %s): this answer is NOT differentially private\n", seed.String())
	} else {
		fmt.Fprintln(w, "seeded: no (secure randomness)")
	}
	if *samples > 1 {
		fmt.Fprintf(w, "private: no: %d answers to one query are not private at epsilon %g\n", *samples, eps.Float64())
	}
	return nil
}

// priorQuery is a parsed --query.
type priorQuery struct {
	text  string
	kind  prior.QueryKind
	op    string   // value, count, fraction, mean, sum
	cols  []string // value(...) columns, or the mean/sum column
	where []queryCond
}

type queryCond struct{ col, val string }

// queryToken is a word, a quoted value or one of ( ) , =.
type queryToken struct {
	text   string
	quoted bool
	pos    int
}

func tokenizeQuery(s string) ([]queryToken, error) {
	var toks []queryToken
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			i++
		case strings.IndexByte("(),=", c) >= 0:
			toks = append(toks, queryToken{text: string(c), pos: i})
			i++
		case c == '"' || c == '\'':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("unterminated quote at position %d", i+1)
			}
			toks = append(toks, queryToken{text: s[i+1 : i+1+j], quoted: true, pos: i})
			i += j + 2
		default:
			j := i
			for j < len(s) && !unicode.IsSpace(rune(s[j])) && strings.IndexByte("(),=\"'", s[j]) < 0 {
				j++
			}
			toks = append(toks, queryToken{text: s[i:j], pos: i})
			i = j
		}
	}
	return toks, nil
}

func parsePriorQuery(s string) (*priorQuery, error) {
	toks, err := tokenizeQuery(s)
	if err != nil {
		return nil, err
	}
	q := &priorQuery{text: strings.Join(strings.Fields(s), " ")}
	k := 0
	next := func() (queryToken, bool) {
		if k >= len(toks) {
			return queryToken{pos: len(s)}, false
		}
		k++
		return toks[k-1], true
	}
	expect := func(want string) error {
		t, ok := next()
		if !ok || t.quoted || t.text != want {
			return fmt.Errorf("expected %q at position %d", want, t.pos+1)
		}
		return nil
	}
	word := func(what string) (string, error) {
		t, ok := next()
		if !ok || (!t.quoted && strings.IndexByte("(),=", t.text[0]) >= 0) || t.text == "" {
			return "", fmt.Errorf("expected %s at position %d", what, t.pos+1)
		}
		return t.text, nil
	}
	op, err := word("value, count, fraction, mean or sum")
	if err != nil {
		return nil, err
	}
	q.op = strings.ToLower(op)
	switch q.op {
	case "value":
		q.kind = prior.Individual
		if err := expect("("); err != nil {
			return nil, err
		}
		for {
			c, err := word("a column name")
			if err != nil {
				return nil, err
			}
			q.cols = append(q.cols, c)
			t, _ := next()
			if t.text == ")" && !t.quoted {
				break
			}
			if t.text != "," || t.quoted {
				return nil, fmt.Errorf(`expected "," or ")" at position %d`, t.pos+1)
			}
		}
	case "mean", "sum":
		q.kind = prior.Statistical
		if err := expect("("); err != nil {
			return nil, err
		}
		c, err := word("a column name")
		if err != nil {
			return nil, err
		}
		q.cols = []string{c}
		if err := expect(")"); err != nil {
			return nil, err
		}
	case "count", "fraction":
		q.kind = prior.Statistical
	default:
		return nil, fmt.Errorf("unknown query %q (want value, count, fraction, mean or sum)", op)
	}
	if k < len(toks) {
		if t, _ := next(); t.quoted || !strings.EqualFold(t.text, "where") {
			return nil, fmt.Errorf(`expected "where" at position %d`, t.pos+1)
		}
		for {
			col, err := word("a column name")
			if err != nil {
				return nil, err
			}
			if err := expect("="); err != nil {
				return nil, err
			}
			val, err := word("a value")
			if err != nil {
				return nil, err
			}
			q.where = append(q.where, queryCond{col, val})
			t, ok := next()
			if !ok {
				break
			}
			if t.quoted || !strings.EqualFold(t.text, "and") {
				return nil, fmt.Errorf(`expected "and" at position %d`, t.pos+1)
			}
		}
	}
	if len(q.where) == 0 && (q.op == "value" || q.op == "fraction") {
		return nil, fmt.Errorf("%s needs a where clause", q.op)
	}
	return q, nil
}

// checkDomains checks the where clause's values of schema dimensions
// against their declared domains (public information).
func (q *priorQuery) checkDomains(s *domain.Schema) error {
	for _, c := range q.where {
		if i, ok := lookupDim(s, c.col); ok {
			if _, ok := s.ValueIndex(i, c.val); !ok {
				return fmt.Errorf("%q is not in the domain of %s (%s)", c.val, c.col, strings.Join(s.Dim(i).Values, ", "))
			}
		}
	}
	return nil
}

// checkPrior matches the prior's components to the query.
func (q *priorQuery) checkPrior(comps []prior.Component, s *domain.Schema, path string) error {
	if q.kind == prior.Statistical {
		if len(comps) != 1 || comps[0].Level != prior.Numeric {
			return fmt.Errorf("%s: %s is a number; its prior must have one numeric component", path, q.op)
		}
	} else if len(comps) != len(q.cols) {
		return fmt.Errorf("%s: the prior has %d components; value(%s) has %d", path, len(comps), strings.Join(q.cols, ", "), len(q.cols))
	}
	for i, col := range q.cols {
		c := comps[min(i, len(comps)-1)]
		if q.kind == prior.Individual && c.Name != "" && c.Name != col {
			return fmt.Errorf("%s: component %d is named %q but the query asks for %q", path, i+1, c.Name, col)
		}
		if d, ok := lookupDim(s, col); ok && c.Level == prior.Numeric {
			for _, v := range s.Dim(d).Values {
				if _, err := strconv.ParseFloat(v, 64); err != nil {
					return fmt.Errorf("%s: %s is treated as numeric, but its domain has the value %q; use an ordinal or nominal prior", path, col, v)
				}
			}
		}
	}
	return nil
}

// evaluate reads the fact table and computes the true answer. Every
// referenced column is validated over the whole table (schema dimensions
// against their domains, numeric columns as numbers), so that an error is
// a property of the table, not of the rows the query selects.
//
// With a count column each row stands for that many records.
func (q *priorQuery) evaluate(ctx context.Context, path, countColumn string, s *domain.Schema, comps []prior.Component) (prior.Point, error) {
	t, err := source.OpenCSV(path)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	countIdx := -1
	if countColumn != "" {
		if countIdx, err = t.Column(countColumn); err != nil {
			return nil, err
		}
	}
	type ref struct {
		idx     int
		dim     int // schema dimension, or -1
		numeric bool
	}
	var refs []ref
	resolve := func(col string, numeric bool) (int, error) {
		i, err := t.Column(col)
		if err != nil {
			return 0, err
		}
		d, ok := lookupDim(s, col)
		if !ok {
			d = -1
		}
		refs = append(refs, ref{i, d, numeric})
		return i, nil
	}
	colIdx := make([]int, len(q.cols))
	for k, c := range q.cols {
		numeric := q.kind == prior.Statistical || comps[k].Level == prior.Numeric
		if colIdx[k], err = resolve(c, numeric); err != nil {
			return nil, err
		}
	}
	whereIdx := make([]int, len(q.where))
	for k, c := range q.where {
		if whereIdx[k], err = resolve(c.col, false); err != nil {
			return nil, err
		}
	}
	var rows, matches int
	var sum float64
	var first []string
	for {
		if rows%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		row, err := t.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		w := 1
		if countIdx >= 0 {
			k, ok := source.ParseCount(row[countIdx])
			if !ok || k > math.MaxInt64-int64(rows) {
				return nil, t.Errorf(countIdx, "the count %q is not a non-negative integer below 2^63 (or the counts add up to 2^63 or more)", row[countIdx])
			}
			w = int(k)
		}
		rows += w
		for _, r := range refs {
			v := row[r.idx]
			if r.dim >= 0 {
				if _, ok := s.ValueIndex(r.dim, v); !ok {
					return nil, t.Errorf(r.idx, "%q is not in the declared domain of %s", v, s.Dim(r.dim).Name)
				}
			}
			if r.numeric {
				if x, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
					return nil, t.Errorf(r.idx, "%q is not a finite number", v)
				}
			}
		}
		match := true
		for k, c := range q.where {
			if row[whereIdx[k]] != c.val {
				match = false
				break
			}
		}
		if !match || w == 0 {
			continue
		}
		matches += w
		switch q.op {
		case "value":
			if first == nil {
				first = make([]string, len(colIdx))
				for k, i := range colIdx {
					first[k] = row[i]
				}
			}
		case "mean", "sum":
			x, _ := strconv.ParseFloat(strings.TrimSpace(row[colIdx[0]]), 64)
			sum += float64(w) * x
		}
	}
	switch q.op {
	case "value":
		if matches != 1 {
			return nil, nil // absent (or not an individual): the prior answers
		}
		truth := make(prior.Point, len(first))
		for k, v := range first {
			truth[k] = comps[k].Coordinate(v)
		}
		return truth, nil
	case "count":
		return prior.Point{float64(matches)}, nil
	case "fraction":
		return prior.Point{float64(matches) / float64(rows)}, nil // NaN for an empty table
	case "mean":
		return prior.Point{sum / float64(matches)}, nil // NaN when nothing matches
	}
	return prior.Point{sum}, nil
}

// redactData hides the password of a database URL given as --data.
func redactData(p string) string {
	if !source.IsPostgresURL(p) {
		return p
	}
	u, err := url.Parse(p)
	if err != nil {
		return "(an unparsable database URL)"
	}
	return u.Redacted()
}
