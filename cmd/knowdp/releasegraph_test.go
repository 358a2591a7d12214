package main

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func writeTemp(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReleaseGraphCommand(t *testing.T) {
	dir := t.TempDir()
	edges := writeTemp(t, dir, "edges.csv", "u,v\n0,1\n0,2\n1,2\n2,3\n3,4\n4,5\n1,5\n")
	known := writeTemp(t, dir, "known.csv", "vertex\n0\n2\n5\n")
	out := filepath.Join(dir, "graph.csv")
	code, stdout, stderr := runCLI(t, "release-graph", "--edges", edges, "--vertices", "6",
		"--known-degrees", known, "--epsilon", "1", "--seed", "4", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "NOT differentially private") {
		t.Errorf("seeded run not flagged: %s", stdout)
	}
	rows := readCSVFile(t, out)
	if strings.Join(rows[0], ",") != "u,v,edge" || len(rows) != 1+15 {
		t.Fatalf("header %v, %d rows", rows[0], len(rows))
	}
	// The known degrees hold in the file written, to 1e-9 (the CSV has
	// the released values in full): vertex 0 has degree 2, vertex 2
	// degree 3, vertex 5 degree 2.
	deg := map[string]float64{}
	for _, r := range rows[1:] {
		v, err := strconv.ParseFloat(r[2], 64)
		if err != nil {
			t.Fatal(err)
		}
		deg[r[0]] += v
		deg[r[1]] += v
	}
	for v, want := range map[string]float64{"0": 2, "2": 3, "5": 2} {
		if math.Abs(deg[v]-want) > 1e-9 {
			t.Errorf("released degree of vertex %s = %v, true %v", v, deg[v], want)
		}
	}
	meta, _ := readSidecar(t, filepath.Join(dir, "graph.json"))
	if meta["private"] != false || meta["seeded"] != true || meta["sensitivity"].(float64) < 1 {
		t.Errorf("sidecar %v", meta)
	}
	if kd := meta["known_degrees"].(map[string]any); kd["2"].(float64) != 3 {
		t.Errorf("known degrees %v", kd)
	}
}

func TestReleaseGraphCommandErrors(t *testing.T) {
	dir := t.TempDir()
	good := writeTemp(t, dir, "edges.csv", "u,v\n0,1\n1,2\n")
	for _, tc := range []struct {
		name  string
		files map[string]string
		args  []string
		code  int
		want  string
	}{
		{"missing edges flag", nil, []string{"--vertices", "3", "--epsilon", "1", "--out", "o.csv"}, 2, "missing required flag --edges"},
		{"bad vertices", nil, []string{"--edges", good, "--vertices", "0", "--epsilon", "1", "--out", "o.csv"}, 2, "--vertices"},
		{"vertex out of range", map[string]string{"e.csv": "u,v\n0,1\n1,7\n"}, []string{"--vertices", "3", "--epsilon", "1"}, 1, `row 3, column "v": "7" is not a vertex`},
		{"loop", map[string]string{"e.csv": "u,v\n2,2\n"}, []string{"--vertices", "3", "--epsilon", "1"}, 1, "a loop"},
		{"repeat", map[string]string{"e.csv": "u,v\n0,1\n1,0\n"}, []string{"--vertices", "3", "--epsilon", "1"}, 1, "repeats row 2"},
		{"no v column", map[string]string{"e.csv": "u,w\n0,1\n"}, []string{"--vertices", "3", "--epsilon", "1"}, 1, `no column "v"`},
		{"bad direction", map[string]string{"e.csv": "u,v\n0,1\n", "k.csv": "vertex,direction\n1,up\n"}, []string{"--vertices", "3", "--epsilon", "1", "--directed", "--known-degrees", "k.csv"}, 1, `"up": use out or in`},
		{"overwrite input", nil, []string{"--edges", good, "--vertices", "3", "--epsilon", "1", "--out", good}, 2, "--out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub := t.TempDir()
			args := []string{"release-graph"}
			for name, content := range tc.files {
				p := writeTemp(t, sub, name, content)
				if name == "e.csv" {
					args = append(args, "--edges", p)
				}
				for i, a := range tc.args {
					if a == name {
						tc.args[i] = p
					}
				}
			}
			args = append(args, tc.args...)
			if !strings.Contains(strings.Join(args, " "), "--out") {
				args = append(args, "--out", filepath.Join(sub, "o.csv"))
			}
			code, stdout, stderr := runCLI(t, args...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d (want %d), stderr %q, want %q; stdout %q", code, tc.code, stderr, tc.want, stdout)
			}
		})
	}
}
