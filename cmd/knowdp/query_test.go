package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/prior"
	"github.com/knowdp/knowdp/privacy"
)

const queryTestdata = "../../prior/testdata"

func runQueryCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	code = run(context.Background(), e, args)
	return out.String(), errb.String(), code
}

func queryArgs(query, priorFile string, extra ...string) []string {
	return append([]string{"query", "prior",
		"--data", filepath.Join(queryTestdata, "people.csv"),
		"--schema", filepath.Join(queryTestdata, "people.schema.json"),
		"--query", query,
		"--prior", filepath.Join(queryTestdata, priorFile),
	}, extra...)
}

// answerOf returns the "answer:" line of the output.
func answerOf(t *testing.T, out string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if a, ok := strings.CutPrefix(l, "answer: "); ok {
			return a
		}
	}
	t.Fatalf("no answer in %q", out)
	return ""
}

func TestQueryPriorReport(t *testing.T) {
	out, stderr, code := runQueryCLI(t, queryArgs("value(employed) where id=3", "employed.json", "--epsilon", "1", "--seed", "4")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"query: value(employed) where id=3 (individual)",
		"mechanism: prior-knowledge refinement",
		"epsilon: 1\n", "delta: 0\n",
		"alpha_u: 2.71828\nalpha_d: 0.367879\n",
		"distance: nominal",
		"prior: discrete, 2 points",
		"seeded: yes (--seed 4): this answer is NOT differentially private",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if a := answerOf(t, out); a != "Yes" && a != "No" {
		t.Errorf("answer %q", a)
	}
	if !strings.Contains(stderr, "NOT differentially private") {
		t.Errorf("no warning on stderr: %q", stderr)
	}
}

// The CLI answers from the right distribution: over many seeds, the
// frequency of "Yes" for a present individual is the refined probability,
// and for an absent one the prior's.
func TestQueryPriorDistribution(t *testing.T) {
	p, err := prior.Load(filepath.Join(queryTestdata, "employed.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	eps, _ := privacy.NewEpsilon(1)
	m, _ := prior.New(p, prior.Config{Kind: prior.Individual, Epsilon: eps})
	q, _ := m.Refine(prior.Point{0}) // individual 2 is not employed
	for _, c := range []struct {
		id    string
		pYes  float64
		label string
	}{
		{"2", q.(*prior.Discrete).Prob(1), "present"},
		{"99", 0.7, "absent (prior)"},
	} {
		const n = 300
		yes := 0
		for seed := range n {
			out, stderr, code := runQueryCLI(t, queryArgs("value(employed) where id="+c.id, "employed.json", "--epsilon", "1", "--seed", strconv.Itoa(seed))...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if answerOf(t, out) == "Yes" {
				yes++
			}
		}
		se := math.Sqrt(n * c.pYes * (1 - c.pYes))
		if math.Abs(float64(yes)-n*c.pYes) > 5*se {
			t.Errorf("%s: %d of %d Yes, expected %.1f", c.label, yes, n, n*c.pYes)
		}
	}
}

func TestQueryPriorKinds(t *testing.T) {
	tmp := t.TempDir()
	counts := filepath.Join(tmp, "counts.json")
	if err := os.WriteFile(counts, []byte(`{"values": [0, 1, 2, 3, 4, 5, 6, 7, 8], "probabilities": [0.1, 0.1, 0.1, 0.1, 0.2, 0.1, 0.1, 0.1, 0.1]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		query, prior string
		extra        []string
		check        func(string) bool
	}{
		{"count where employed=Yes and agegroup=25-34", counts, nil, func(a string) bool {
			x, err := strconv.Atoi(a)
			return err == nil && x >= 0 && x <= 8
		}},
		{"mean(age) where benefits=No", "age.json", nil, inRange(12, 66)},
		{"sum(score)", "uniform01.json", []string{"--delta", "0.1"}, inRange(0, 1)},
		{"fraction where benefits=Yes", "uniform01.json", []string{"--alpha-u", "1.5"}, inRange(0, 1)},
		{"MEAN(age) WHERE employed = 'Yes'", "age.json", nil, inRange(12, 66)},
		{"value(agegroup) where id=5", "agegroup.json", nil, func(a string) bool { return a == "18-24" || a == "25-34" || a == "35-44" }},
		{"value(employed, benefits) where id=2", "employed-benefits.json", []string{"--distance", "l1"}, func(a string) bool {
			return a != "(Yes, Yes)" && strings.HasPrefix(a, "(")
		}},
		{"value(employed, benefits) where id=1", "employed-benefits.json", []string{"--distance", "linf", "--weights", "1,2"}, func(a string) bool { return a != "(Yes, Yes)" }},
		{"value(age) where id=4", "age.json", []string{"--delta", "0.01"}, inRange(12, 66)},
	} {
		p := c.prior
		if !filepath.IsAbs(p) {
			p = filepath.Join(queryTestdata, p)
		}
		args := []string{"query", "prior", "--data", filepath.Join(queryTestdata, "people.csv"),
			"--schema", filepath.Join(queryTestdata, "people.schema.json"), "--query", c.query, "--prior", p, "--epsilon", "1"}
		out, stderr, code := runQueryCLI(t, append(args, c.extra...)...)
		if code != 0 {
			t.Errorf("%s: exit %d: %s", c.query, code, stderr)
			continue
		}
		if a := answerOf(t, out); !c.check(a) {
			t.Errorf("%s: answer %q", c.query, a)
		}
		if !strings.Contains(out, "seeded: no (secure randomness)") {
			t.Errorf("%s: unseeded run not reported:\n%s", c.query, out)
		}
	}
}

func inRange(lo, hi float64) func(string) bool {
	return func(a string) bool {
		x, err := strconv.ParseFloat(a, 64)
		return err == nil && x >= lo && x <= hi
	}
}

func TestQueryPriorArrests(t *testing.T) {
	out, stderr, code := runQueryCLI(t, "query", "prior", "--data", "../../data/arrests.csv", "--schema", "../../data/arrests.schema.json",
		"--query", "fraction where released=No", "--prior", filepath.Join(queryTestdata, "uniform01.json"), "--epsilon", "2", "--seed", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if a := answerOf(t, out); !inRange(0, 1)(a) || !strings.Contains(out, "(statistical)") {
		t.Errorf("output:\n%s", out)
	}
}

func TestQueryPriorErrors(t *testing.T) {
	tmp := t.TempDir()
	bad := filepath.Join(tmp, "bad.csv")
	os.WriteFile(bad, []byte("id,employed,benefits,agegroup,age,score\n1,Yes,No,18-24,21,0.4\n2,Maybe,No,18-24,22,0.5\n"), 0o644)
	badAge := filepath.Join(tmp, "badage.csv")
	os.WriteFile(badAge, []byte("id,employed,benefits,agegroup,age,score\n1,Yes,No,18-24,NA,0.4\n2,No,No,18-24,22,0.5\n"), 0o644)
	schema := filepath.Join(queryTestdata, "people.schema.json")
	data := filepath.Join(queryTestdata, "people.csv")
	pr := func(f string) string { return filepath.Join(queryTestdata, f) }
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no subcommand", []string{"query"}, 2, "knowdp query: missing subcommand (want prior)"},
		{"missing data", []string{"query", "prior", "--schema", schema, "--query", "count", "--prior", pr("boolean.json"), "--epsilon", "1"}, 2, "knowdp query prior: missing required flag --data"},
		{"bad epsilon", append(queryArgs("count", "boolean.json"), "--epsilon", "-1"), 2, "--epsilon: epsilon must be > 0"},
		{"bad delta", append(queryArgs("count", "boolean.json"), "--epsilon", "1", "--delta", "1"), 2, "--delta"},
		{"bad samples", append(queryArgs("count", "boolean.json"), "--epsilon", "1", "--samples", "0"), 2, "--samples must be at least 1, got 0"},
		{"missing data file", []string{"query", "prior", "--data", filepath.Join(tmp, "none.csv"), "--schema", schema, "--query", "count", "--prior", pr("boolean.json"), "--epsilon", "1"}, 1, "--data: open "},
		{"syntax", append(queryArgs("mean age", "boolean.json"), "--epsilon", "1"), 1, `--query: expected "(" at position 6`},
		{"unknown op", append(queryArgs("median(age)", "boolean.json"), "--epsilon", "1"), 1, `unknown query "median"`},
		{"value needs where", append(queryArgs("value(age)", "age.json"), "--epsilon", "1"), 1, "value needs a where clause"},
		{"dangling and", append(queryArgs("count where id=1 and", "boolean.json"), "--epsilon", "1"), 1, "expected a column name at position 21"},
		{"quote", append(queryArgs("count where id='1", "boolean.json"), "--epsilon", "1"), 1, "unterminated quote"},
		{"domain", append(queryArgs("count where employed=Maybe", "boolean.json"), "--epsilon", "1"), 1, `"Maybe" is not in the domain of employed (No, Yes)`},
		{"unknown column", append(queryArgs("mean(height)", "age.json"), "--epsilon", "1"), 1, `people.csv: no column "height"`},
		{"categorical prior for a count", append(queryArgs("count", "employed.json"), "--epsilon", "1"), 1, "employed.json: count is a number; its prior must have one numeric component"},
		{"components", append(queryArgs("value(employed) where id=1", "employed-benefits.json"), "--epsilon", "1"), 1, "the prior has 2 components; value(employed) has 1"},
		{"component name", append(queryArgs("value(benefits) where id=1", "employed.json"), "--epsilon", "1"), 1, `component 1 is named "employed" but the query asks for "benefits"`},
		{"numeric prior for a categorical domain", append(queryArgs("value(employed) where id=1", "boolean.json"), "--epsilon", "1"), 1, `domain has the value "No"`},
		{"joint without distance", append(queryArgs("value(employed, benefits) where id=1", "employed-benefits.json"), "--epsilon", "1"), 1, "needs a distance"},
		{"bad norm", append(queryArgs("value(employed, benefits) where id=1", "employed-benefits.json"), "--epsilon", "1", "--distance", "l7"), 1, `--distance: unknown norm "l7"`},
		{"weights alone", append(queryArgs("count", "boolean.json"), "--epsilon", "1", "--weights", "1"), 1, "--weights needs --distance"},
		{"alpha for individual", append(queryArgs("value(age) where id=1", "age.json"), "--epsilon", "1", "--alpha-u", "2"), 1, "alpha_u is fixed"},
		{"alpha out of range", append(queryArgs("mean(age)", "age.json"), "--epsilon", "1", "--alpha-u", "9"), 1, "alpha_u must be in [1, e^epsilon]"},
		{"missing prior", append(queryArgs("count", "nope.json"), "--epsilon", "1"), 1, "nope.json"},
		{"bad schema", []string{"query", "prior", "--data", data, "--schema", pr("boolean.json"), "--query", "count", "--prior", pr("boolean.json"), "--epsilon", "1"}, 1, "schema"},
		{"out-of-domain data", []string{"query", "prior", "--data", bad, "--schema", schema, "--query", "value(employed) where id=1", "--prior", pr("employed.json"), "--epsilon", "1"}, 1, `bad.csv: row 3, column "employed": "Maybe" is not in the declared domain`},
		{"non-numeric data", []string{"query", "prior", "--data", badAge, "--schema", schema, "--query", "mean(age) where id=2", "--prior", pr("age.json"), "--epsilon", "1"}, 1, `badage.csv: row 2, column "age": "NA" is not a finite number`},
	} {
		out, stderr, code := runQueryCLI(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d and %q", c.name, code, stderr, c.code, c.want)
		}
		if code != 0 && strings.Contains(out, "answer:") {
			t.Errorf("%s: printed an answer despite the error", c.name)
		}
	}
}

// Errors do not depend on the private data the query selects: the same
// malformed table fails the same way whichever individual is asked about,
// and an absent individual is not an error.
func TestQueryPriorErrorsIgnoreTruth(t *testing.T) {
	tmp := t.TempDir()
	badAge := filepath.Join(tmp, "badage.csv")
	os.WriteFile(badAge, []byte("id,employed,benefits,agegroup,age,score\n1,Yes,No,18-24,NA,0.4\n2,No,No,18-24,22,0.5\n"), 0o644)
	var errs []string
	for _, id := range []string{"1", "2", "77"} {
		_, stderr, code := runQueryCLI(t, "query", "prior", "--data", badAge, "--schema", filepath.Join(queryTestdata, "people.schema.json"),
			"--query", "value(age) where id="+id, "--prior", filepath.Join(queryTestdata, "age.json"), "--epsilon", "1")
		if code != 1 {
			t.Errorf("id %s: exit %d", id, code)
		}
		errs = append(errs, stderr)
	}
	if errs[0] != errs[1] || errs[1] != errs[2] {
		t.Errorf("errors differ by individual: %q", errs)
	}
	// Duplicate keys select several rows: treated as absent, no error.
	_, stderr, code := runQueryCLI(t, queryArgs("value(employed) where employed=Yes", "employed.json", "--epsilon", "1")...)
	if code != 0 {
		t.Errorf("a where clause selecting several rows failed: %s", stderr)
	}
}

func TestQueryPriorHelp(t *testing.T) {
	stdout, _, code := runQueryCLI(t, "query", "prior", "--help")
	if code != 0 || !strings.Contains(stdout, "value(COL[, COL...]) where KEY=V") || !strings.Contains(stdout, "--epsilon X") {
		t.Errorf("exit %d, help %q", code, stdout)
	}
	stdout, _, code = runQueryCLI(t, "query", "--help")
	if code != 0 || !strings.Contains(stdout, "Priors (--prior, JSON") {
		t.Errorf("exit %d, help %q", code, stdout)
	}
}

// TestQueryPriorNumericNoSchema checks that a purely numeric query runs
// with a schema of no dimensions, and --samples: N answers, private only
// for one unseeded answer.
func TestQueryPriorNumericNoSchema(t *testing.T) {
	schema := filepath.Join(t.TempDir(), "empty.json")
	if err := os.WriteFile(schema, []byte(`{"dimensions":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	args := func(extra ...string) []string {
		return append([]string{"query", "prior", "--data", filepath.Join(queryTestdata, "people.csv"), "--schema", schema,
			"--query", "mean(age)", "--prior", filepath.Join(queryTestdata, "age.json"), "--epsilon", "1", "--json"}, extra...)
	}
	for _, tc := range []struct {
		extra   []string
		n       int
		private bool
	}{
		{nil, 1, true},
		{[]string{"--samples", "7"}, 7, false},
		{[]string{"--seed", "3"}, 1, false},
	} {
		stdout, stderr, code := runQueryCLI(t, args(tc.extra...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.extra, code, stderr)
		}
		var res queryResult
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatalf("%v\n%s", err, stdout)
		}
		if len(res.Answers) != tc.n || len(res.Points) != tc.n || res.Samples != tc.n || res.Private != tc.private {
			t.Errorf("%v: %+v", tc.extra, res)
		}
		if tc.n > 1 && !strings.Contains(stderr, "NOT private") {
			t.Errorf("%v: no warning for several samples: %q", tc.extra, stderr)
		}
	}
}
