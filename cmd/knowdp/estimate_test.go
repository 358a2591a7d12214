package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// release --measurements writes the noisy measurements; estimate gives
// back the released tables, any cuboid they determine (a margin of a
// released table agrees with it) and refuses one they do not; release.json
// carries the split's objective and certificate.
func TestEstimateCommand(t *testing.T) {
	tmp := t.TempDir()
	dir, meas := filepath.Join(tmp, "tables"), filepath.Join(tmp, "m.json")
	code, stdout, stderr := runCLI(t, "release",
		"--data", repoFile("data/arrests.csv"), "--schema", repoFile("data/arrests.schema.json"),
		"--exact", "year", "--exact", "colour,sex",
		"--cuboid", "year,colour", "--cuboid", "sex,agegroup", "--cuboid", "year,released",
		"--epsilon", "1", "--seed", "5", "--measurements", meas, "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	var meta map[string]any
	b, err := os.ReadFile(filepath.Join(dir, "release.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	gap, _ := meta["split_gap"].(float64)
	if obj, _ := meta["objective"].(float64); !(obj > 0) || !(gap >= 0 && gap <= 1e-6) || meta["strategy"] != "lattice" {
		t.Errorf("release.json: objective %v, gap %v, strategy %v", meta["objective"], meta["split_gap"], meta["strategy"])
	}
	out := filepath.Join(tmp, "est")
	code, stdout, stderr = runCLI(t, "estimate", "--measurements", meas, "--cuboid", "year,colour", "--cuboid", "agegroup", "--out", out)
	if code != 0 {
		t.Fatalf("estimate: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "NOT differentially private") {
		t.Errorf("no warning for seeded measurements: %q", stderr)
	}
	released, _, moe := readTable(t, filepath.Join(dir, "year-colour.csv"))
	again, _, moe2 := readTable(t, filepath.Join(out, "year-colour.csv"))
	if math.Abs(moe-moe2) > 1e-6 {
		t.Errorf("moe90 %v, released %v", moe2, moe)
	}
	for k, v := range released {
		if math.Abs(again[k]-v) > 1e-5 {
			t.Errorf("year-colour %s: estimate %v, released %v", k, again[k], v)
		}
	}
	// {agegroup} was not released: its estimate is the margin of the
	// released {sex,agegroup}.
	sa, _, _ := readTable(t, filepath.Join(dir, "sex-agegroup.csv"))
	age, _, _ := readTable(t, filepath.Join(out, "agegroup.csv"))
	for k, v := range age {
		if m := sa["Female|"+k] + sa["Male|"+k]; math.Abs(m-v) > 1e-5 {
			t.Errorf("agegroup %s: %v, margin of sex-agegroup %v", k, v, m)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "estimate.json")); err != nil {
		t.Error(err)
	}
	code, _, stderr = runCLI(t, "estimate", "--measurements", meas, "--cuboid", "agegroup,released")
	if code != 1 || !strings.Contains(stderr, "not determined") {
		t.Errorf("undetermined cuboid: exit %d, %q", code, stderr)
	}
	code, _, _ = runCLI(t, "estimate", "--cuboid", "year")
	if code != 2 {
		t.Errorf("no --measurements: exit %d, want 2", code)
	}
	// One table is a release like any other: its measurement is saved too,
	// and estimating the table from it gives the release's own counts.
	code, _, stderr = runCLI(t, "release", "--data", repoFile("data/arrests.csv"), "--schema", repoFile("data/arrests.schema.json"),
		"--exact", "year", "--cuboid", "year,colour", "--epsilon", "1", "--seed", "2", "--measurements", filepath.Join(tmp, "one.json"), "--out", filepath.Join(tmp, "x.csv"))
	if code != 0 {
		t.Fatalf("--measurements with one cuboid: exit %d, %q", code, stderr)
	}
	code, _, stderr = runCLI(t, "estimate", "--measurements", filepath.Join(tmp, "one.json"), "--cuboid", "year,colour", "--out", filepath.Join(tmp, "one"))
	if code != 0 {
		t.Fatalf("estimate from one measurement: exit %d, %q", code, stderr)
	}
	rel, _, _ := readTable(t, filepath.Join(tmp, "x.csv"))
	est, _, _ := readTable(t, filepath.Join(tmp, "one", "year-colour.csv"))
	for k, v := range rel {
		if math.Abs(est[k]-v) > 1e-9*math.Max(1, math.Abs(v)) {
			t.Errorf("estimate of %s: %v, the release's %v", k, est[k], v)
		}
	}
	code, _, stderr = runCLI(t, "release", "--data", repoFile("data/arrests.csv"), "--schema", repoFile("data/arrests.schema.json"),
		"--cuboid", "year,colour", "--cuboid", "sex", "--epsilon", "1", "--strategy", "all", "--out", filepath.Join(tmp, "y"))
	if code != 2 || !strings.Contains(stderr, "--strategy") {
		t.Errorf("--strategy all: exit %d, %q", code, stderr)
	}
}

// TestEstimateAtLevels: a release's measurements round-trip at levels —
// one hierarchy and two crossed — and knowdp estimate gives the release's
// own tables back, to 1e-9, margins of error included.
func TestEstimateAtLevels(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		args         []string
		tables       []string
	}{
		{"one hierarchy", "data/us-geo.schema.json", []string{"--epsilon", "1", "--exact", "geo:state"},
			[]string{"geo:region", "geo:state,sex", "geo:division,agegroup"}},
		{"one hierarchy gaussian", "data/us-geo.schema.json", []string{"--mechanism", "gaussian", "--rho", "0.5", "--exact", "geo:state"},
			[]string{"geo:state,sex", "geo,agegroup"}},
		{"two hierarchies", "data/us-geo-age.schema.json", []string{"--epsilon", "1", "--exact", "geo:state"},
			[]string{"geo:state,agegroup:broad", "geo:division,agegroup", "geo:region,sex"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := append([]string{"release", "--data", repoFile("data/us-persons.csv"), "--schema", repoFile(tc.schema), "--seed", "4",
				"--measurements", filepath.Join(dir, "m.json"), "--out", filepath.Join(dir, "rel")}, tc.args...)
			for _, v := range tc.tables {
				args = append(args, "--cuboid", v)
			}
			if code, stdout, stderr := runCLI(t, args...); code != 0 {
				t.Fatalf("release: exit %d\n%s\n%s", code, stdout, stderr)
			}
			est := []string{"estimate", "--measurements", filepath.Join(dir, "m.json"), "--out", filepath.Join(dir, "est")}
			for _, v := range tc.tables {
				est = append(est, "--cuboid", v)
			}
			if code, stdout, stderr := runCLI(t, est...); code != 0 {
				t.Fatalf("estimate: exit %d\n%s\n%s", code, stdout, stderr)
			}
			entries, err := os.ReadDir(filepath.Join(dir, "est"))
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, e := range entries {
				if e.Name() == "estimate.json" {
					continue
				}
				n++
				rel := readCSVFile(t, filepath.Join(dir, "rel", e.Name()))
				got := readCSVFile(t, filepath.Join(dir, "est", e.Name()))
				if len(rel) != len(got) {
					t.Fatalf("%s: %d rows, the release has %d", e.Name(), len(got), len(rel))
				}
				for i := 1; i < len(rel); i++ {
					for j := len(rel[i]) - 2; j < len(rel[i]); j++ {
						a, _ := strconv.ParseFloat(rel[i][j], 64)
						b, _ := strconv.ParseFloat(got[i][j], 64)
						if math.Abs(a-b) > 1e-9*math.Max(1, math.Abs(a)) {
							t.Fatalf("%s row %d column %d: estimate %v, release %v", e.Name(), i+1, j+1, b, a)
						}
					}
				}
			}
			if n != len(tc.tables) {
				t.Fatalf("%d tables estimated, want %d", n, len(tc.tables))
			}
		})
	}
}
