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

	"github.com/knowdp/knowdp/metricdp"
)

func runDXArgs(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	code := run(context.Background(), e, append([]string{"dx"}, args...))
	return code, out.String(), errb.String()
}

const td = "../../metricdp/testdata/"

func TestDXLaplace(t *testing.T) {
	code, out, errOut := runDXArgs(t, "laplace", "--universe", td+"places.csv", "--metric", "euclidean:scale=1",
		"--queries", td+"queries.csv", "--histogram", td+"histogram.csv", "--strategy", "optimal", "--seed", "7")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "NOT differentially private") {
		t.Errorf("no seeded warning: %q", errOut)
	}
	// Points 0, 1, 3 on a line (budget 1 per unit): the "dist" query
	// (0, 1, 3) has d_X scale 1 alone; with "far" (0, 0, 1) the optimal
	// allocation shares the budget. The baseline scale is the L1
	// sensitivity 4 over eps = 1.
	// Optimal scales by hand: (2 + 2^(1/3))/2 = 1.62996 and that over
	// 2^(1/3) = 1.29371, plus the grid's 2^-18.
	for _, want := range []string{"1.62997", "1.29371", "2.454", "10 records", "eps = min distance = 1, scale 4", "query", "dist", "far", "improvement factor (geometric mean over the 2 queries that need noise): 2.755"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Same seed, same output; no seed, a warning-free private run.
	_, out2, _ := runDXArgs(t, "laplace", "--universe", td+"places.csv", "--metric", "euclidean:scale=1",
		"--queries", td+"queries.csv", "--histogram", td+"histogram.csv", "--seed", "7")
	if out2 != out {
		t.Errorf("seeded runs differ:\n%s\n%s", out, out2)
	}
	code, _, errOut = runDXArgs(t, "laplace", "--universe", td+"places.csv", "--metric", "threshold:theta=1.5,eps=1",
		"--queries", td+"queries.csv", "--histogram", td+"histogram.csv", "--strategy", "greedy")
	if code != 0 || strings.Contains(errOut, "WARNING") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// TestDXLaplaceNoNoise checks the output for a query that needs no noise
// (the number of records, public in bounded DP): no infinite factor.
func TestDXLaplaceNoNoise(t *testing.T) {
	q := filepath.Join(t.TempDir(), "q.csv")
	if err := os.WriteFile(q, []byte("id,total,dist\na,1,0\nb,1,1\nc,1,3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"laplace", "--universe", td + "places.csv", "--metric", "euclidean:scale=1", "--queries", q, "--histogram", td + "histogram.csv"}
	code, out, errOut := runDXArgs(t, args...)
	if code != 0 || !strings.Contains(out, "no noise needed") || strings.Contains(out, "inf") || !strings.Contains(out, "over the 1 queries that need noise") {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	_, out, _ = runDXArgs(t, append(args, "--json")...)
	var res dxLaplaceResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Queries[0].Scale != 0 || res.Queries[0].Improvement != nil || res.Queries[0].Answer != 10 || res.GeoMeanImprovement == nil {
		t.Errorf("%s", out)
	}
}

func TestDXErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := []string{"--universe", td + "places.csv", "--metric", "euclidean:scale=1", "--queries", td + "queries.csv", "--histogram", td + "histogram.csv"}
	with := func(flag, v string) []string {
		a := append([]string{"laplace"}, base...)
		for i := range a {
			if a[i] == flag {
				a[i+1] = v
				return a
			}
		}
		return append(a, flag, v)
	}
	cases := []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "knowdp dx: missing subcommand (want laplace, exponential, smalldb or mwem)"},
		{[]string{"help"}, 0, "metric SPEC"},
		{[]string{"frobnicate"}, 2, "unknown subcommand"},
		{[]string{"laplace", "--universe", td + "places.csv"}, 2, "knowdp dx laplace: missing required flag --metric"},
		{with("--strategy", "best"), 2, "--strategy: "},
		{with("--metric", "euclidean:scale=-1"), 1, "scale=-1"},
		{with("--queries", write("q1.csv", "id,q\na,1\nb,x\nc,2\n")), 1, "row 3, column \"q\": \"x\" is not a finite number"},
		{with("--queries", write("q2.csv", "id,q\na,1\nb,2\n")), 1, "no row for universe element \"c\""},
		{with("--queries", write("q3.csv", "id,q\na,1\nzz,2\n")), 1, "id \"zz\" is not in the universe"},
		{with("--queries", write("q4.csv", "id\na\nb\nc\n")), 1, "no query columns"},
		{with("--histogram", write("h1.csv", "id,count\na,-2\n")), 1, "row 2, column \"count\""},
		{with("--histogram", write("h2.csv", "id,count\na,1\na,2\n")), 1, "listed twice"},
		{with("--histogram", write("h3.csv", "id,n\na,1\n")), 1, "no column \"count\""},
		{with("--universe", filepath.Join(dir, "none.csv")), 1, "knowdp dx laplace: --universe: open " + filepath.Join(dir, "none.csv") + ": no such file"},
		{with("--queries", filepath.Join(dir, "none.csv")), 1, "knowdp dx laplace: --queries: open "},
		{with("--histogram", filepath.Join(dir, "none.csv")), 1, "knowdp dx laplace: --histogram: open "},
		// Elements are named by id and universe row, not by position.
		{append(with("--universe", write("u.csv", "id,lat,lon\nparis,48.9,2.35\nmars,95,0\n")), "--metric", "greatcircle:eps_per_km=1"), 1, `place "mars" (universe row 3) latitude 95`},
		{[]string{"smalldb", "--universe", td + "places.csv"}, 2, "missing required flag --size"},
		{[]string{"mwem", "--universe", td + "places.csv", "--rounds", "-1"}, 2, "missing required flag --rounds (at least 1)"},
	}
	for _, c := range cases {
		code, out, errOut := runDXArgs(t, c.args...)
		if code != c.code || !strings.Contains(out+errOut, c.want) {
			t.Errorf("dx %v: exit %d, output %q; want exit %d and %q", c.args, code, out+errOut, c.code, c.want)
		}
	}
}

// TestDXMechanisms runs every dx mechanism: seeded runs are reproducible
// and say they are not private, --json parses with the documented fields.
func TestDXMechanisms(t *testing.T) {
	files := []string{"--universe", td + "places.csv", "--metric", "euclidean:scale=1", "--queries", td + "queries.csv", "--histogram", td + "histogram.csv"}
	for _, mech := range [][]string{{"laplace"}, {"exponential"}, {"smalldb", "--size", "4"}, {"mwem", "--rounds", "3"}} {
		args := append(append(append([]string{}, mech...), files...), "--seed", "5", "--json")
		code, out, errOut := runDXArgs(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", mech, code, errOut)
		}
		var res map[string]any
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%v: %v\n%s", mech, err, out)
		}
		if res["seeded"] != true || res["private"] != false {
			t.Errorf("%v: seeded run not marked: %s", mech, out)
		}
		if _, again, _ := runDXArgs(t, args...); again != out {
			t.Errorf("%v: seeded runs differ", mech)
		}
		code, text, _ := runDXArgs(t, append(append([]string{}, mech...), files...)...)
		if code != 0 || !strings.Contains(text, "privacy: d_X-private") {
			t.Errorf("%v: unseeded text output %q", mech, text)
		}
	}
	// SmallDB's synthetic histogram has --size records; MWEM's has the
	// histogram's 10, and its answers are the queries on it.
	_, out, _ := runDXArgs(t, append(append([]string{"smalldb", "--size", "4"}, files...), "--json")...)
	var syn dxSyntheticResult
	if err := json.Unmarshal([]byte(out), &syn); err != nil {
		t.Fatal(err)
	}
	var total float64
	for _, c := range syn.Synthetic {
		total += c.Value
	}
	if total != 4 || len(syn.Answers) != 2 {
		t.Errorf("smalldb: %+v", syn)
	}
	_, out, _ = runDXArgs(t, append(append([]string{"mwem", "--rounds", "2"}, files...), "--json")...)
	syn = dxSyntheticResult{}
	if err := json.Unmarshal([]byte(out), &syn); err != nil {
		t.Fatal(err)
	}
	total = 0
	dist := 0.0
	for i, c := range syn.Synthetic {
		total += c.Value
		dist += []float64{0, 1, 3}[i] * c.Value
	}
	if math.Abs(total-10) > 1e-9 || math.Abs(dist-syn.Answers[0].Value) > 1e-9 || len(syn.Measured) != 2 {
		t.Errorf("mwem: total %v, dist %v: %+v", total, dist, syn)
	}
}

// TestDXExponentialDistribution checks that dx exponential chooses each
// candidate with the mechanism's probabilities, over fixed seeds.
func TestDXExponentialDistribution(t *testing.T) {
	if testing.Short() {
		t.Skip("statistical test of 600 CLI runs")
	}
	files := []string{"exponential", "--universe", td + "places.csv", "--metric", "euclidean:scale=1", "--queries", td + "queries.csv", "--histogram", td + "histogram.csv", "--json"}
	u, err := metricdp.LoadUniverse(td + "places.csv")
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := metricdp.ParseSpec(context.Background(), "euclidean:scale=1", u)
	if err != nil {
		t.Fatal(err)
	}
	q, err := metricdp.NewQueries([][]float64{{0, 1, 3}, {0, 0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	em, err := metricdp.NewExponential(context.Background(), m, q, 10)
	if err != nil {
		t.Fatal(err)
	}
	p, err := em.Probabilities([]int64{3, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	const n = 600
	dist := 0
	for seed := range n {
		_, out, _ := runDXArgs(t, append(files, "--seed", strconv.Itoa(seed))...)
		var res dxExponentialResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		if res.Chosen == "dist" {
			dist++
		}
	}
	got := float64(dist) / n
	if tol := 4 * math.Sqrt(p[0]*(1-p[0])/n); math.Abs(got-p[0]) > tol {
		t.Errorf("chose dist %v of the time, want %v ± %v", got, p[0], tol)
	}
}
