package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// outputCase is one output of one command: the arguments that write it
// (out is substituted for the token OUT), the flag that names it, and the
// path that exists beforehand (OUT itself, or the sidecar beside it).
type outputCase struct {
	name string
	args []string
	flag string
	// dir: the output is a directory; existing names what exists before
	// the run relative to OUT's directory ("" for OUT itself).
	dir      bool
	existing string
}

// TestOutputsNeverReplaced runs every command that writes files against
// an output that exists: each refuses (exit 2) before reading anything,
// naming the flag and the path, and leaves it as it was; with --force each
// replaces it. One rule, one flag, every command.
func TestOutputsNeverReplaced(t *testing.T) {
	arrests, schema := repoFile("data/arrests.csv"), repoFile("data/arrests.schema.json")
	tmp := t.TempDir()
	measurements := filepath.Join(tmp, "m.json")
	if code, _, stderr := runCLI(t, "release", "--data", arrests, "--schema", schema, "--epsilon", "1", "--seed", "1",
		"--cuboid", "year", "--cuboid", "sex", "--measurements", measurements, "--out", filepath.Join(tmp, "m-tables")); code != 0 {
		t.Fatalf("measurements: exit %d: %s", code, stderr)
	}
	edges := filepath.Join(tmp, "edges.csv")
	if err := os.WriteFile(edges, []byte("u,v\n0,1\n1,2\n2,3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rel := []string{"release", "--data", arrests, "--schema", schema, "--epsilon", "1", "--seed", "1"}
	cases := []outputCase{
		{name: "release table", args: append(rel, "--cuboid", "year,sex", "--out", "OUT.csv"), flag: "--out"},
		{name: "release sidecar", args: append(rel, "--cuboid", "year,sex", "--out", "OUT.csv"), flag: "sidecar", existing: "OUT.json"},
		{name: "release parquet", args: append(rel, "--cuboid", "year,sex", "--out", "OUT.parquet"), flag: "--out"},
		{name: "release directory", args: append(rel, "--cuboid", "year", "--cuboid", "sex", "--out", "OUT"), flag: "--out", dir: true},
		{name: "release measurements", args: append(rel, "--cuboid", "year", "--cuboid", "sex", "--measurements", "OUT.json", "--out", "OUT-tables"), flag: "--measurements"},
		{name: "estimate", args: []string{"estimate", "--measurements", measurements, "--cuboid", "year", "--out", "OUT"}, flag: "--out", dir: true},
		{name: "refine", args: []string{"refine", "--answers", repoFile("refine/testdata/grades-noisy.csv"), "--constraints", repoFile("refine/testdata/grades-equalities.json"), "--out", "OUT.csv"}, flag: "--out"},
		{name: "refine sidecar", args: []string{"refine", "--answers", repoFile("refine/testdata/grades-noisy.csv"), "--constraints", repoFile("refine/testdata/grades-equalities.json"), "--out", "OUT.csv"}, flag: "sidecar", existing: "OUT.json"},
		{name: "release-graph", args: []string{"release-graph", "--edges", edges, "--vertices", "4", "--epsilon", "1", "--seed", "1", "--out", "OUT.csv"}, flag: "--out"},
		{name: "release-graph sidecar", args: []string{"release-graph", "--edges", edges, "--vertices", "4", "--epsilon", "1", "--seed", "1", "--out", "OUT.csv"}, flag: "sidecar", existing: "OUT.json"},
		{name: "repro", args: []string{"repro", "zcdp", "--quick", "--out", "OUT"}, flag: "--out", dir: true},
		{name: "attack", args: []string{"attack", "mironov", "--quick", "--seed", "1", "--out", "OUT"}, flag: "--out", dir: true},
		{name: "report", args: []string{"report", filepath.Join(tmp, "m-tables"), "--out", "OUT.html"}, flag: "--out"},
		{name: "schema", args: []string{"schema", "--hierarchy", "geo=region,division,state,place", "--from", repoFile("data/us-geo-places.csv"), "--out", "OUT.json"}, flag: "--out"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			args := make([]string, len(tc.args))
			var target string
			for i, a := range tc.args {
				args[i] = strings.Replace(a, "OUT", out, 1)
				if strings.HasPrefix(a, "OUT") && target == "" {
					target = args[i]
				}
			}
			existing := target
			if tc.existing != "" {
				existing = filepath.Join(dir, strings.Replace(tc.existing, "OUT", "out", 1))
			}
			if tc.flag == "--measurements" {
				existing = out + ".json"
			}
			// What is there before: a file, or a directory holding one.
			mine := filepath.Join(existing, "mine.txt")
			if tc.dir {
				if err := os.Mkdir(existing, 0o755); err != nil {
					t.Fatal(err)
				}
			} else {
				mine = existing
			}
			if err := os.WriteFile(mine, []byte("mine"), 0o644); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := runCLI(t, args...)
			if code != 2 || !strings.Contains(stderr, tc.flag+" "+existing+":") || !strings.Contains(stderr, "exists") || !strings.Contains(stderr, "--force") {
				t.Fatalf("existing %s: exit %d (want 2)\nstdout %s\nstderr %s", tc.flag, code, stdout, stderr)
			}
			if b, err := os.ReadFile(mine); err != nil || string(b) != "mine" {
				t.Fatalf("the existing output changed: %q %v", b, err)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Fatalf("a refused run left files: %v", entries)
			}
			code, stdout, stderr = runCLI(t, append(args, "--force")...)
			if code != 0 {
				t.Fatalf("--force: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
			}
			if b, err := os.ReadFile(mine); err == nil && string(b) == "mine" {
				t.Fatalf("--force kept the old output %s", mine)
			}
			for _, e := range mustReadDir(t, dir) {
				if strings.HasPrefix(e.Name(), ".") {
					t.Errorf("--force left %s behind", e.Name())
				}
			}
		})
	}
}

func mustReadDir(t *testing.T, dir string) []os.DirEntry {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// TestOutputsCheckedBeforeData gives every command that reads data an
// output it cannot write and data with a bad row: the refusal names the
// output's flag, so it came before the data was read.
func TestOutputsCheckedBeforeData(t *testing.T) {
	ro := unwritableDir(t)
	tmp := t.TempDir()
	bad := filepath.Join(tmp, "bad.csv")
	data, err := os.ReadFile(repoFile("data/arrests.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, append(data, []byte("Yes,Purple,2002,21,18-24,Male,Yes,Yes,3\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	badEdges := filepath.Join(tmp, "edges.csv")
	if err := os.WriteFile(badEdges, []byte("u,v\n0,1\n0,99\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	schema := repoFile("data/arrests.schema.json")
	rel := []string{"release", "--data", bad, "--schema", schema, "--epsilon", "1"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"release --out", append(rel, "--out", filepath.Join(ro, "r.csv")), "--out " + filepath.Join(ro, "r.csv") + ": permission denied"},
		{"release directory", append(rel, "--cuboid", "year", "--cuboid", "sex", "--out", filepath.Join(ro, "tables")), "--out " + filepath.Join(ro, "tables") + ": permission denied"},
		{"release --measurements", append(rel, "--cuboid", "year", "--cuboid", "sex", "--out", filepath.Join(tmp, "t"), "--measurements", filepath.Join(ro, "m.json")), "--measurements " + filepath.Join(ro, "m.json") + ": permission denied"},
		{"release missing directory", append(rel, "--out", filepath.Join(tmp, "nodir", "r.csv")), "--out " + filepath.Join(tmp, "nodir", "r.csv") + ": directory " + filepath.Join(tmp, "nodir") + " does not exist"},
		{"release-graph", []string{"release-graph", "--edges", badEdges, "--vertices", "4", "--epsilon", "1", "--out", filepath.Join(ro, "g.csv")}, "--out " + filepath.Join(ro, "g.csv") + ": permission denied"},
		{"refine", []string{"refine", "--answers", repoFile("refine/testdata/grades-noisy.csv"), "--constraints", repoFile("refine/testdata/grades-equalities.json"), "--out", filepath.Join(ro, "r.csv")}, "--out " + filepath.Join(ro, "r.csv") + ": permission denied"},
		{"repro", []string{"repro", "zcdp", "--quick", "--out", filepath.Join(ro, "repro-out")}, "--out " + filepath.Join(ro, "repro-out") + ": permission denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "row") {
				t.Fatalf("exit %d (want 2), stderr %q, want %q (and no data error)\nstdout %s", code, stderr, tc.want, stdout)
			}
		})
	}
}

// unwritableDir returns a directory in which no file can be created, even
// by root (who ignores permissions): /sys, a read-only file system, for
// root, otherwise a directory of mode 0555.
func unwritableDir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() == 0 {
		if f, err := os.CreateTemp("/sys", "probe"); err == nil {
			f.Close()
			os.Remove(f.Name())
			t.Fatal("/sys is writable here: no read-only directory for the test")
		}
		return "/sys"
	}
	dir := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	return dir
}
