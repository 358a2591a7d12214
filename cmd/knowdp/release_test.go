package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// runCLI runs knowdp with args and returns the exit code, stdout and stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	code := run(context.Background(), e, args)
	return code, out.String(), errb.String()
}

// repoFile returns the path of a file of the repository from this package.
func repoFile(name string) string { return filepath.Join("..", "..", name) }

func TestReleaseCommand(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "rel.csv")
	code, stdout, stderr := runCLI(t, "release",
		"--data", repoFile("data/arrests.csv"), "--schema", repoFile("data/arrests.schema.json"),
		"--exact", "year,colour", "--epsilon", "1", "--cuboid", "year,colour,released", "--seed", "3", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "NOT differentially private") || !strings.Contains(stdout, "NOT differentially private") {
		t.Errorf("seeded run not flagged:\n%s\n%s", stdout, stderr)
	}
	rows := readCSVFile(t, out)
	if strings.Join(rows[0], ",") != "year,colour,released,count,moe90" || len(rows) != 1+6*2*2 {
		t.Fatalf("header %v, %d rows", rows[0], len(rows))
	}
	// The invariant {year,colour} holds exactly: 1997 Black, summed over
	// released, equals the true count (checked against the data file).
	var got float64
	for _, r := range rows[1:] {
		if r[0] == "1997" && r[1] == "Black" {
			v, _ := strconv.ParseFloat(r[3], 64)
			got += v
		}
	}
	want := countRows(t, repoFile("data/arrests.csv"), func(rec map[string]string) bool {
		return rec["year"] == "1997" && rec["colour"] == "Black"
	})
	if diff := got - float64(want); diff > 1e-5 || diff < -1e-5 {
		t.Errorf("invariant 1997/Black: released %v, true %d", got, want)
	}
	b, err := os.ReadFile(filepath.Join(dir, "rel.json"))
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"epsilon", "neighbours", "measurements", "tables", "exact", "seeded", "warnings"} {
		if _, ok := meta[k]; !ok {
			t.Errorf("sidecar lacks %q: %s", k, b)
		}
	}
	// One table is measured, with the generic sensitivity of one exact
	// cuboid.
	ms, _ := meta["measurements"].([]any)
	if len(ms) != 1 || ms[0].(map[string]any)["sensitivity"].(float64) != 2 || ms[0].(map[string]any)["scale"].(float64) <= 0 ||
		meta["seeded"] != true || meta["private"] != false || meta["guarantee"] != "none" {
		t.Errorf("sidecar %s", b)
	}
}

func countRows(t *testing.T, path string, keep func(map[string]string) bool) int {
	t.Helper()
	recs := readCSVFile(t, path)
	n := 0
	for _, r := range recs[1:] {
		m := map[string]string{}
		for i, h := range recs[0] {
			m[h] = r[i]
		}
		if keep(m) {
			n++
		}
	}
	return n
}

func TestReleaseCommandErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.csv")
	os.WriteFile(bad, []byte("released,colour,year,age,agegroup,sex,employed,citizen,checks\nYes,White,2002,21,18-24,Male,Yes,Yes,3\nNo,Purple,1999,17,12-17,Male,Yes,Yes,3\n"), 0o644)
	schema := repoFile("data/arrests.schema.json")
	data := repoFile("data/arrests.csv")
	out := filepath.Join(dir, "out.csv")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing data", []string{"--schema", schema, "--epsilon", "1", "--out", out}, 2, "knowdp release: missing required flag --data"},
		{"missing out", []string{"--data", data, "--schema", schema, "--epsilon", "1"}, 2, "knowdp release: missing required flag --out"},
		{"zero epsilon", []string{"--data", data, "--schema", schema, "--epsilon", "0", "--out", out}, 2, "epsilon must be > 0"},
		{"NaN epsilon", []string{"--data", data, "--schema", schema, "--epsilon", "NaN", "--out", out}, 2, "finite"},
		{"negative cell limit", []string{"--data", data, "--schema", schema, "--epsilon", "1", "--cell-limit", "-1", "--out", out}, 2, "--cell-limit must be at least 1, got -1"},
		{"negative sensitivity", []string{"--data", data, "--schema", schema, "--epsilon", "1", "--sensitivity", "-3", "--out", out}, 2, "--sensitivity must be positive"},
		{"bad tol", []string{"--data", data, "--schema", schema, "--epsilon", "1", "--tol", "0", "--out", out}, 2, "--tol must be a positive number"},
		{"unknown flag", []string{"--data", data, "--frob", "1"}, 2, "flag provided but not defined: --frob"},
		{"sensitivity below computed", []string{"--data", data, "--schema", schema, "--epsilon", "1", "--exact", "year", "--exact", "colour,sex", "--sensitivity", "1", "--out", out}, 1, "sensitivity 1 is below the generic sensitivity 8"},
		{"stdout", []string{"--data", data, "--schema", schema, "--epsilon", "1", "--out", "-"}, 2, "--out -: writing to standard output is not supported"},
		{"unknown dimension", []string{"--data", data, "--schema", schema, "--epsilon", "1", "--exact", "year,race", "--out", out}, 1, `unknown dimension "race"`},
		{"value outside domain", []string{"--data", bad, "--schema", schema, "--epsilon", "1", "--out", out}, 1, `bad.csv: row 3, column "colour": value "Purple" is not in the declared domain`},
		{"oversized domain", []string{"--data", data, "--schema", schema, "--epsilon", "1", "--cell-limit", "100", "--out", out}, 1, "6720 cells"},
		{"missing schema file", []string{"--data", data, "--schema", filepath.Join(dir, "nope.json"), "--epsilon", "1", "--out", out}, 1, "knowdp release: --schema: open " + filepath.Join(dir, "nope.json")},
		{"missing data file", []string{"--data", filepath.Join(dir, "nope.csv"), "--schema", schema, "--epsilon", "1", "--out", out}, 1, "knowdp release: --data: open " + filepath.Join(dir, "nope.csv")},
		{"stray argument", []string{"--data", data, "extra"}, 2, `unexpected argument "extra"`},
	} {
		code, _, stderr := runCLI(t, append([]string{"release"}, tc.args...)...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d (want %d), stderr:\n%s\nwant it to contain %q", tc.name, code, tc.code, stderr, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%s: output written despite the error", tc.name)
		}
	}
}

func TestReleaseInferDomainsWarns(t *testing.T) {
	out := filepath.Join(t.TempDir(), "r.csv")
	code, _, stderr := runCLI(t, "release", "--data", repoFile("data/arrests.csv"), "--infer-domains", "--dims", "sex,colour",
		"--epsilon", "1", "--out", out)
	if code != 0 || !strings.Contains(stderr, "NOT differentially private") {
		t.Errorf("exit %d, stderr %s", code, stderr)
	}
}

func TestDemoCommand(t *testing.T) {
	code, stdout, stderr := runCLI(t, "demo", "--runs", "2", "--seed", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"5226 people", "Scenario 1", "Scenario 2", "S = 8", "naive*", "NOT private"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, stdout)
		}
	}
	_, again, _ := runCLI(t, "demo", "--runs", "2", "--seed", "1")
	if again != stdout {
		t.Error("seeded demo is not reproducible")
	}
}

// TestDemoDefaultShowsConsistencyHelps runs the demo at its default number
// of runs: least-squares consistency never increases the error of a noisy
// cuboid below the base (it is a projection onto a set containing the
// truth), and the table must show that rather than noise in the estimate.
func TestDemoDefaultShowsConsistencyHelps(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the full demo")
	}
	code, stdout, stderr := runCLI(t, "demo", "--seed", "11")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rows := 0
	for _, line := range strings.Split(stdout, "\n") {
		f := strings.Fields(line)
		if len(f) != 6 || !strings.HasPrefix(f[0], "{") || f[2] == "0" || f[2] == "S" {
			continue
		}
		noisy, _ := strconv.ParseFloat(strings.Split(f[3], "±")[0], 64)
		consistent, _ := strconv.ParseFloat(strings.Split(f[4], "±")[0], 64)
		if !(consistent < noisy) {
			t.Errorf("consistent %v >= noisy %v: %s", consistent, noisy, line)
		}
		rows++
	}
	if rows != 9 {
		t.Errorf("%d rows checked, want 9:\n%s", rows, stdout)
	}
}

func TestHelpAndUnknownCommand(t *testing.T) {
	code, stdout, _ := runCLI(t, "help")
	if code != 0 || !strings.Contains(stdout, "release") || !strings.Contains(stdout, "demo") {
		t.Errorf("help: exit %d\n%s", code, stdout)
	}
	code, _, stderr := runCLI(t, "frobnicate")
	if code != 2 || !strings.Contains(stderr, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: exit %d, %s", code, stderr)
	}
	code, _, stderr = runCLI(t)
	if code != 2 || !strings.Contains(stderr, "Usage: knowdp <command>") {
		t.Errorf("no command: exit %d, %s", code, stderr)
	}
}

// TestHelpConventions checks that every command and subcommand prints its
// help on stdout with exit 0, in the --flag VALUE style, that "knowdp help
// CMD" is "knowdp CMD --help", and that usage errors share one wording.
func TestHelpConventions(t *testing.T) {
	for _, cmd := range [][]string{{"demo"}, {"release"}, {"repro"}, {"query"}, {"query", "prior"}, {"dx"}, {"dx", "laplace"},
		{"dx", "exponential"}, {"dx", "smalldb"}, {"dx", "mwem"}, {"refine"}, {"refine", "rho"}, {"audit"}, {"attack"}} {
		name := strings.Join(cmd, " ")
		code, stdout, stderr := runCLI(t, append(cmd, "--help")...)
		if code != 0 || stderr != "" || !strings.Contains(stdout, "Usage: knowdp "+cmd[0]) {
			t.Errorf("%s --help: exit %d, stdout %q, stderr %q", name, code, stdout, stderr)
			continue
		}
		if regexpSingleDash.MatchString(stdout) {
			t.Errorf("%s --help lists a flag with one dash:\n%s", name, stdout)
		}
		code, viaHelp, _ := runCLI(t, append([]string{"help"}, cmd...)...)
		if code != 0 || viaHelp != stdout {
			t.Errorf("knowdp help %s differs from %s --help (exit %d)", name, name, code)
		}
	}
	code, stdout, _ := runCLI(t, "--version")
	if code != 0 || !strings.HasPrefix(stdout, "knowdp ") || !strings.Contains(stdout, "revision ") {
		t.Errorf("--version: exit %d, %q", code, stdout)
	}
	// One wording and exit status 2 for missing required flags.
	for _, cmd := range [][]string{{"release"}, {"query", "prior"}, {"dx", "laplace"}, {"dx", "exponential"}, {"dx", "smalldb"}, {"dx", "mwem"}, {"refine"}, {"refine", "rho"}} {
		code, _, stderr := runCLI(t, cmd...)
		want := "knowdp " + strings.Join(cmd, " ") + ": missing required flag --"
		if code != 2 || !strings.HasPrefix(stderr, want) {
			t.Errorf("%v without flags: exit %d, stderr %q, want it to start with %q", cmd, code, stderr, want)
		}
	}
}

var regexpSingleDash = regexp.MustCompile(`(?m)^\s+-[a-z]`)

// copyFile copies a repository file into dir, so that tests of output-path
// checks never put the repository's own files at risk.
func copyFile(t *testing.T, src, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestReleaseRefusesToOverwriteInputs checks every way an output could land
// on an input: the same name, the sidecar's name, a symlink, a new file
// through a symlinked directory, a sidecar that is a directory.
func TestReleaseRefusesToOverwriteInputs(t *testing.T) {
	dir := t.TempDir()
	data := copyFile(t, repoFile("data/arrests.csv"), dir, "data.csv")
	schema := copyFile(t, repoFile("data/arrests.schema.json"), dir, "ok.schema.json")
	if err := os.Symlink(dir, filepath.Join(dir, "via")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "side.json", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := map[string][]byte{}
	for _, p := range []string{data, schema} {
		before[p], _ = os.ReadFile(p)
	}
	for _, tc := range []struct{ out, want string }{
		{data, "is the same file as --data"},
		{schema, "is the same file as --schema"},
		{filepath.Join(dir, "ok.schema.csv"), "sidecar " + filepath.Join(dir, "ok.schema.json") + " is the same file as --schema"},
		{filepath.Join(dir, "via", "data.csv"), "is the same file as --data"},
		{filepath.Join(dir, "via", "ok.schema.txt"), "is the same file as --schema"},
		{filepath.Join(dir, "data.json"), "sidecar " + filepath.Join(dir, "data.json") + " is the same file as --out"},
		{filepath.Join(dir, "side.csv"), "is a directory"},
	} {
		code, _, stderr := runCLI(t, "release", "--data", data, "--schema", schema, "--epsilon", "1", "--out", tc.out)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("--out %s: exit %d, stderr %q, want %q", tc.out, code, stderr, tc.want)
		}
	}
	for p, b := range before {
		if now, _ := os.ReadFile(p); !bytes.Equal(now, b) {
			t.Errorf("%s was changed", p)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "side.csv")); err == nil {
		t.Error("side.csv written although its sidecar could not be")
	}
}

// readSidecar runs a release and returns its exit code, stderr and sidecar.
func releaseSidecar(t *testing.T, args ...string) (int, string, map[string]any) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "r.csv")
	code, _, stderr := runCLI(t, append([]string{"release", "--data", repoFile("data/arrests.csv"), "--epsilon", "1", "--out", out}, args...)...)
	if code != 0 {
		return code, stderr, nil
	}
	b, err := os.ReadFile(sidecarPath(out))
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	return code, stderr, meta
}

// TestReleasePrivacyStory pins the sidecar's privacy fields for the cases
// issue 10 found wrong: domains from the data, a cuboid determined by the
// exact cuboids, a sensitivity above the computed one.
func TestReleasePrivacyStory(t *testing.T) {
	schema := repoFile("data/arrests.schema.json")
	for _, tc := range []struct {
		name      string
		args      []string
		private   bool
		guarantee string
		exactly   bool
		stderr    string
	}{
		{"plain", []string{"--schema", schema}, true, "unconditional", false, ""},
		{"domains from data", []string{"--infer-domains", "--dims", "sex,colour"}, false, "none", false, "NOT differentially private"},
		{"base cuboid exact", []string{"--schema", schema, "--exact", "year,colour,sex,agegroup,employed,citizen,checks,released"}, true, "unconditional", true, "TRUE counts"},
		{"ancestor of an exact cuboid", []string{"--schema", schema, "--exact", "year,colour", "--cuboid", "year"}, true, "unconditional", true, "TRUE counts"},
		{"sensitivity above computed", []string{"--schema", schema, "--exact", "year", "--exact", "colour,sex", "--sensitivity", "10"}, true, "unconditional", false, ""},
	} {
		code, stderr, meta := releaseSidecar(t, tc.args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.name, code, stderr)
		}
		tables, _ := meta["tables"].([]any)
		if len(tables) != 1 {
			t.Fatalf("%s: tables %v", tc.name, meta["tables"])
		}
		exactly := tables[0].(map[string]any)["public"]
		if meta["private"] != tc.private || meta["guarantee"] != tc.guarantee || exactly != tc.exactly || meta["domains_from_data"] != (tc.guarantee == "none") {
			t.Errorf("%s: sidecar %v", tc.name, meta)
		}
		if !strings.Contains(stderr, tc.stderr) {
			t.Errorf("%s: stderr %q lacks %q", tc.name, stderr, tc.stderr)
		}
	}
}

// TestReleaseSchemaBOM checks that a schema saved with a UTF-8 byte order
// mark is read.
func TestReleaseSchemaBOM(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile(repoFile("data/arrests.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	schema := filepath.Join(dir, "bom.json")
	if err := os.WriteFile(schema, append([]byte("\xef\xbb\xbf"), b...), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, "release", "--data", repoFile("data/arrests.csv"), "--schema", schema, "--epsilon", "1", "--out", filepath.Join(dir, "r.csv")); code != 0 {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

// TestReleaseMemoryCheck raises --cell-limit past any machine's memory: the
// release must fail with an error naming the flag and the sizes, not crash.
func TestReleaseMemoryCheck(t *testing.T) {
	dir := t.TempDir()
	var dims []string
	for i := range 4 {
		vals := make([]string, 1000)
		for j := range vals {
			vals[j] = fmt.Sprintf("%q", strconv.Itoa(j))
		}
		dims = append(dims, fmt.Sprintf(`{"name":"d%d","values":[%s]}`, i, strings.Join(vals, ",")))
	}
	schema := filepath.Join(dir, "big.json")
	if err := os.WriteFile(schema, []byte(`{"dimensions":[`+strings.Join(dims, ",")+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "d.csv")
	if err := os.WriteFile(data, []byte("d0,d1,d2,d3\n1,2,3,4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "release", "--data", data, "--schema", schema, "--epsilon", "1", "--cell-limit", "2000000000000", "--out", filepath.Join(dir, "r.csv"))
	if code != 1 || !strings.Contains(stderr, "releasing {d0,d1,d2,d3} would run out of memory") || !strings.Contains(stderr, "TiB needed") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	// A two-dimensional cuboid of the same 10^12-cell domain is released
	// from the rows without the base cube (with an invariant on one of its
	// dimensions).
	out := filepath.Join(dir, "d01.csv")
	code, stdout, stderr := runCLI(t, "release", "--data", data, "--schema", schema, "--epsilon", "1", "--cuboid", "d0,d1", "--exact", "d0", "--seed", "1", "--out", out)
	if code != 0 {
		t.Fatalf("2-D release: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if rows := readCSVFile(t, out); len(rows) != 1+1000*1000 {
		t.Errorf("2-D release: %d rows", len(rows))
	}
}

// readCSVFile returns every row of a CSV file, the header first.
func readCSVFile(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestReleaseJSONSummary checks release --json: the summary carries the
// sidecar's privacy fields at full precision.
func TestReleaseJSONSummary(t *testing.T) {
	out := filepath.Join(t.TempDir(), "r.csv")
	code, stdout, stderr := runCLI(t, "release", "--data", repoFile("data/arrests.csv"), "--schema", repoFile("data/arrests.schema.json"),
		"--exact", "year", "--exact", "colour,sex", "--epsilon", "0.3", "--cuboid", "agegroup", "--out", out, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res releaseSummary
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	m := res.Metadata
	if len(m.Measurements) != 1 {
		t.Fatalf("measurements %+v", m.Measurements)
	}
	// The scale is 8/eps, rounded up slightly by the grid noise's margin.
	ms := m.Measurements[0]
	if want := 8 / m.Epsilon; res.Cells != 5 || res.Out != out || ms.Sensitivity != 8 || ms.Scale < want || ms.Scale > want*(1+1e-5) || !m.Private || m.Guarantee != "unconditional" {
		t.Errorf("summary %+v", res)
	}
}
