package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	for _, want := range []string{"1.62997", "1.29371", "2.45404", "10 records", "eps = min distance = 1, scale 4", "query", "dist", "far", "improvement factor (geometric mean over queries)"} {
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
		{nil, 2, "Usage"},
		{[]string{"help"}, 0, "metric SPEC"},
		{[]string{"frobnicate"}, 2, "unknown subcommand"},
		{[]string{"laplace", "--universe", td + "places.csv"}, 2, "--"},
		{with("--strategy", "best"), 1, "unknown strategy"},
		{with("--metric", "euclidean:scale=-1"), 1, "scale=-1"},
		{with("--queries", write("q1.csv", "id,q\na,1\nb,x\nc,2\n")), 1, "row 3, column \"q\": \"x\" is not a finite number"},
		{with("--queries", write("q2.csv", "id,q\na,1\nb,2\n")), 1, "no row for universe element \"c\""},
		{with("--queries", write("q3.csv", "id,q\na,1\nzz,2\n")), 1, "id \"zz\" is not in the universe"},
		{with("--queries", write("q4.csv", "id\na\nb\nc\n")), 1, "no query columns"},
		{with("--histogram", write("h1.csv", "id,count\na,-2\n")), 1, "row 2, column \"count\""},
		{with("--histogram", write("h2.csv", "id,count\na,1\na,2\n")), 1, "listed twice"},
		{with("--histogram", write("h3.csv", "id,n\na,1\n")), 1, "no column \"count\""},
		{with("--universe", filepath.Join(dir, "none.csv")), 1, "no such file"},
	}
	for _, c := range cases {
		code, out, errOut := runDXArgs(t, c.args...)
		if code != c.code || !strings.Contains(out+errOut, c.want) {
			t.Errorf("dx %v: exit %d, output %q; want exit %d and %q", c.args, code, out+errOut, c.code, c.want)
		}
	}
}
