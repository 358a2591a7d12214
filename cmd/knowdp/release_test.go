package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
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
	if !strings.Contains(stderr, "NOT differentially private") || !strings.Contains(stdout, "SEEDED RUN") {
		t.Errorf("seeded run not flagged:\n%s\n%s", stdout, stderr)
	}
	rows := readCSVFile(t, out)
	if strings.Join(rows[0], ",") != "year,colour,released,count" || len(rows) != 1+6*2*2 {
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
	for _, k := range []string{"epsilon", "neighbours", "sensitivity", "scale", "exact", "seeded"} {
		if _, ok := meta[k]; !ok {
			t.Errorf("sidecar lacks %q: %s", k, b)
		}
	}
	if meta["sensitivity"].(float64) != 2 || meta["seeded"] != true {
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
		{"missing data", []string{"--schema", schema, "--epsilon", "1", "--out", out}, 2, "--data is required"},
		{"zero epsilon", []string{"--data", data, "--schema", schema, "--epsilon", "0", "--out", out}, 1, "epsilon must be > 0"},
		{"NaN epsilon", []string{"--data", data, "--schema", schema, "--epsilon", "NaN", "--out", out}, 1, "finite"},
		{"unknown dimension", []string{"--data", data, "--schema", schema, "--epsilon", "1", "--exact", "year,race", "--out", out}, 1, `unknown dimension "race"`},
		{"value outside domain", []string{"--data", bad, "--schema", schema, "--epsilon", "1", "--out", out}, 1, `bad.csv: row 3, column "colour": value "Purple" is not in the declared domain`},
		{"oversized domain", []string{"--data", data, "--schema", schema, "--epsilon", "1", "--cell-limit", "100", "--out", out}, 1, "6720 cells"},
		{"missing schema file", []string{"--data", data, "--schema", filepath.Join(dir, "nope.json"), "--epsilon", "1", "--out", out}, 1, "nope.json"},
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

func TestHelpAndUnknownCommand(t *testing.T) {
	code, stdout, _ := runCLI(t, "help")
	if code != 0 || !strings.Contains(stdout, "release") || !strings.Contains(stdout, "demo") {
		t.Errorf("help: exit %d\n%s", code, stdout)
	}
	code, _, stderr := runCLI(t, "frobnicate")
	if code != 2 || !strings.Contains(stderr, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: exit %d, %s", code, stderr)
	}
	code, _, stderr = runCLI(t, "release", "--help")
	if code != 0 || !strings.Contains(stderr, "--exact") {
		t.Errorf("release --help: exit %d, %s", code, stderr)
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
