package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// instEvalSidecar releases the bundled InstEval ratings with args and
// returns the exit code, stderr and the sidecar.
func instEvalSidecar(t *testing.T, args ...string) (int, string, map[string]any) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "r.csv")
	code, _, stderr := runCLI(t, append([]string{"release", "--data", repoFile("data/insteval.csv"),
		"--schema", repoFile("data/insteval.schema.json"), "--out", out}, args...)...)
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

func TestReleasePerUnit(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		sens float64 // of the one measurement
		k    float64
		auto bool
	}{
		{"no invariant", []string{"--epsilon", "1", "--cuboid", "dept,rating", "--privacy-unit", "student", "--max-rows", "10"}, 10, 10, false},
		{"invariant", []string{"--epsilon", "1", "--cuboid", "dept,rating", "--exact", "dept", "--privacy-unit", "student", "--max-rows", "10"}, 20, 10, false},
		{"gaussian", []string{"--mechanism", "gaussian", "--rho", "0.5", "--cuboid", "dept,rating", "--privacy-unit", "student", "--max-rows", "5"}, 0, 5, false},
		{"auto", []string{"--epsilon", "1", "--cuboid", "dept,rating", "--exact", "dept", "--privacy-unit", "student", "--max-rows", "auto"}, -1, -1, true},
	} {
		code, stderr, meta := instEvalSidecar(t, append(tc.args, "--seed", "1")...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.name, code, stderr)
		}
		pu, ok := meta["privacy_unit"].(map[string]any)
		if !ok {
			t.Fatalf("%s: no privacy_unit in %v", tc.name, meta)
		}
		k := pu["max_rows"].(float64)
		if pu["column"] != "student" || (tc.k > 0 && k != tc.k) || !strings.Contains(meta["neighbours"].(string), `privacy unit (column "student")`) ||
			pu["neighbours"] != meta["neighbours"] {
			t.Errorf("%s: privacy_unit %v, neighbours %v", tc.name, pu, meta["neighbours"])
		}
		if _, has := pu["truncated_units"]; has != tc.auto || strings.HasPrefix(pu["max_rows_choice"].(string), "a private") != tc.auto {
			t.Errorf("%s: privacy_unit %v", tc.name, pu)
		}
		m := meta["measurements"].([]any)[0].(map[string]any)
		switch {
		case tc.sens > 0 && m["sensitivity"] != tc.sens:
			t.Errorf("%s: sensitivity %v, want %v", tc.name, m["sensitivity"], tc.sens)
		case tc.sens < 0 && m["sensitivity"] != 2*k:
			t.Errorf("%s: sensitivity %v at K = %v, want 2K", tc.name, m["sensitivity"], k)
		case tc.sens == 0 && m["l2_sensitivity"] != k:
			t.Errorf("%s: L2 sensitivity %v, want K = %v", tc.name, m["l2_sensitivity"], k)
		}
		if meta["seeded"] != true || meta["private"] != false {
			t.Errorf("%s: a seeded release per unit must say it is not private: %v", tc.name, meta)
		}
	}
}

func TestReleaseUnitRefusals(t *testing.T) {
	schema := repoFile("data/insteval.schema.json")
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"identifier column", []string{"--epsilon", "1", "--cuboid", "dept"}, 2, `column "student" of the fact table looks like`},
		{"max rows without unit", []string{"--epsilon", "1", "--max-rows", "3"}, 2, "--max-rows needs --privacy-unit"},
		{"unit without max rows", []string{"--epsilon", "1", "--privacy-unit", "student"}, 2, "--max-rows K"},
		{"bad max rows", []string{"--epsilon", "1", "--privacy-unit", "student", "--max-rows", "lots"}, 2, "auto"},
		{"unit is a dimension", []string{"--epsilon", "1", "--privacy-unit", "dept", "--max-rows", "3"}, 1, "is a dimension"},
		{"no such unit column", []string{"--epsilon", "1", "--privacy-unit", "pupil", "--max-rows", "3"}, 1, `"pupil"`},
	} {
		code, stderr, _ := instEvalSidecar(t, append(tc.args, "--schema", schema)...)
		if code != tc.code || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", tc.name, code, stderr, tc.code, tc.stderr)
		}
	}
	code, stderr, meta := instEvalSidecar(t, "--epsilon", "1", "--cuboid", "dept", "--row-level")
	if code != 0 || !strings.Contains(stderr, `--row-level: column "student" looks like an identifier`) || meta["privacy_unit"] != nil {
		t.Errorf("--row-level: exit %d, stderr %q", code, stderr)
	}
}

func TestDemoUnits(t *testing.T) {
	code, stdout, stderr := runCLI(t, "demo", "units", "--runs", "2", "--seed", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"73421 ratings by 2972 students", "1. Per rating (WRONG", "92 x epsilon", "2. Per student (right)",
		"\n92  ", "3. A private choice of K", "SEEDED RUN"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("demo units output lacks %q:\n%s", want, stdout)
		}
	}
}

// The summary says the unit, K and the private count of truncated units.
func TestReleasePerUnitSummary(t *testing.T) {
	out := filepath.Join(t.TempDir(), "r.csv")
	code, stdout, stderr := runCLI(t, "release", "--data", repoFile("data/insteval.csv"), "--schema", repoFile("data/insteval.schema.json"),
		"--epsilon", "1", "--cuboid", "rating", "--privacy-unit", "student", "--max-rows", "5", "--unit-share", "0.1", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{`privacy unit: column "student", at most 5 rows each (given); the guarantee is per unit`, "units with more than 5 rows (private count, eps 0.1):"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
}
