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

// readTable reads a released CSV into a map from the dimension values
// (joined with "|") to the count, and returns the moe90 column's value.
func readTable(t *testing.T, path string) (map[string]float64, []string, float64) {
	t.Helper()
	rows := readCSVFile(t, path)
	head := rows[0]
	if len(head) < 2 || head[len(head)-2] != "count" || head[len(head)-1] != "moe90" {
		t.Fatalf("%s: header %v", path, head)
	}
	out := map[string]float64{}
	var moe float64
	for _, r := range rows[1:] {
		v, err := strconv.ParseFloat(r[len(r)-2], 64)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.Join(r[:len(r)-2], "|")] = v
		moe, _ = strconv.ParseFloat(r[len(r)-1], 64)
	}
	return out, head[:len(head)-2], moe
}

func TestReleaseWorkloadCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tables")
	code, stdout, stderr := runCLI(t, "release",
		"--data", repoFile("data/arrests.csv"), "--schema", repoFile("data/arrests.schema.json"),
		"--exact", "year", "--exact", "colour,sex",
		"--cuboid", "year,colour", "--cuboid", "sex,agegroup", "--cuboid", "year,released", "--cuboid", "sex",
		"--epsilon", "1", "--integer", "--seed", "5", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"{year,colour}", "public (exact)", "NOT differentially private"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
	yc, _, moe := readTable(t, filepath.Join(dir, "year-colour.csv"))
	yr, _, _ := readTable(t, filepath.Join(dir, "year-released.csv"))
	sex, _, sexMOE := readTable(t, filepath.Join(dir, "sex.csv"))
	if moe <= 1 || sexMOE != 0 {
		t.Errorf("moe90 %v for a measured table, %v for a public one", moe, sexMOE)
	}
	// Integer, non-negative, and the invariant {year} holds in both tables
	// that contain year: they agree with each other and with the data.
	for _, tab := range []map[string]float64{yc, yr, sex} {
		for k, v := range tab {
			if v < 0 || v != math.Round(v) {
				t.Fatalf("cell %s = %v: not a non-negative integer", k, v)
			}
		}
	}
	for _, year := range []string{"1997", "1998", "1999", "2000", "2001", "2002"} {
		a := yc[year+"|Black"] + yc[year+"|White"]
		b := yr[year+"|No"] + yr[year+"|Yes"]
		want := float64(countRows(t, repoFile("data/arrests.csv"), func(rec map[string]string) bool { return rec["year"] == year }))
		if a != want || b != want {
			t.Errorf("year %s: %v in year-colour, %v in year-released, true %v", year, a, b, want)
		}
	}
	meta, _ := readSidecar(t, filepath.Join(dir, "release.json"))
	if meta["private"] != false || meta["guarantee"] != "none" || meta["epsilon"].(float64) > 1 {
		t.Errorf("release.json: private %v guarantee %v epsilon %v", meta["private"], meta["guarantee"], meta["epsilon"])
	}
	var shares float64
	for _, m := range meta["measurements"].([]any) {
		shares += m.(map[string]any)["epsilon"].(float64)
	}
	if shares > 1 || len(meta["tables"].([]any)) != 4 {
		t.Errorf("shares sum to %v; %d tables", shares, len(meta["tables"].([]any)))
	}
}

func TestReleaseWorkloadFileAndErrors(t *testing.T) {
	tmp := t.TempDir()
	wl := writeTemp(t, tmp, "workload.json", `[["year"], {"cuboid": ["sex","agegroup"], "weight": 3}]`)
	out := filepath.Join(tmp, "out")
	base := []string{"release", "--data", repoFile("data/arrests.csv"), "--schema", repoFile("data/arrests.schema.json"), "--epsilon", "0.5"}
	code, stdout, stderr := runCLI(t, append(base, "--workload", wl, "--split", "equal", "--json", "--out", out)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	var sum struct {
		Files   []string
		Privacy struct {
			Split    string
			Private  bool
			Epsilon  float64
			Tables   []struct{ Weight float64 }
			Measured []any
		}
	}
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatal(err)
	}
	if strings.Join(sum.Files, " ") != "year.csv sex-agegroup.csv release.json" || sum.Privacy.Split != "equal" || !sum.Privacy.Private || sum.Privacy.Tables[1].Weight != 3 {
		t.Errorf("summary %+v", sum)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"existing directory", []string{"--cuboid", "year", "--cuboid", "sex", "--out", out}, 2, "exists"},
		{"bad split", []string{"--cuboid", "year", "--cuboid", "sex", "--split", "best", "--out", filepath.Join(tmp, "o2")}, 2, "--split"},
		{"bad workload", []string{"--workload", writeTemp(t, tmp, "bad.json", `[["age"]]`), "--out", filepath.Join(tmp, "o3")}, 1, "workload entry 1"},
		{"nonneg and integer", []string{"--cuboid", "year", "--nonneg", "--integer", "--out", filepath.Join(tmp, "o4.csv")}, 2, "exclude each other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, append(base, tc.args...)...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d (want %d), stderr %q, want %q", code, tc.code, stderr, tc.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(tmp, "o3")); err == nil {
		t.Error("a failed release left its directory behind")
	}
}

func TestReleaseGaussianCommand(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "g.csv")
	base := []string{"release", "--data", repoFile("data/arrests.csv"), "--schema", repoFile("data/arrests.schema.json"),
		"--exact", "year", "--exact", "colour,sex", "--cuboid", "year,colour,released"}
	code, stdout, stderr := runCLI(t, append(base, "--mechanism", "gaussian", "--rho", "0.5", "--delta", "1e-5", "--out", out)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	meta, b := readSidecar(t, filepath.Join(dir, "g.json"))
	ms, _ := meta["measurements"].([]any)
	if len(ms) != 1 {
		t.Fatalf("sidecar %s", b)
	}
	m := ms[0].(map[string]any)
	if meta["rho"] != 0.5 || meta["delta"] != 1e-5 || m["l2_sensitivity"].(float64) <= 0 || m["sigma"].(float64) <= 0 || meta["private"] != true {
		t.Errorf("sidecar %s", b)
	}
	if !strings.Contains(stdout, "rho 0.5 (zCDP;") {
		t.Errorf("summary: %s", stdout)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--mechanism", "gaussian", "--rho", "0.5", "--epsilon", "1"}, "--epsilon does not apply"},
		{[]string{"--mechanism", "gaussian"}, "--rho"},
		{[]string{"--rho", "0.5", "--epsilon", "1"}, "--rho needs --mechanism gaussian"},
		{[]string{"--mechanism", "poisson", "--epsilon", "1"}, "--mechanism"},
	} {
		code, _, stderr := runCLI(t, append(append(base, tc.args...), "--out", filepath.Join(dir, "x.csv"))...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, stderr, tc.want)
		}
	}
}

func TestReleaseGaussianWorkloadCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "g")
	code, stdout, stderr := runCLI(t, "release", "--data", repoFile("data/arrests.csv"), "--schema", repoFile("data/arrests.schema.json"),
		"--exact", "year", "--cuboid", "year,sex", "--cuboid", "sex,released", "--mechanism", "gaussian", "--rho", "0.3", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	meta, b := readSidecar(t, filepath.Join(dir, "release.json"))
	if meta["rho"].(float64) > 0.3 || math.Abs(meta["rho_budget"].(float64)-0.3) > 1e-9 || meta["delta"] != 1e-6 || meta["private"] != true || !strings.Contains(stdout, "rho share") {
		t.Errorf("release.json %s\nstdout %s", b, stdout)
	}
	for _, m := range meta["measurements"].([]any) {
		mm := m.(map[string]any)
		if mm["l2_sensitivity"].(float64) <= 0 || mm["sigma"].(float64) <= 0 || mm["rho"].(float64) <= 0 {
			t.Errorf("measurement %v", mm)
		}
	}
}

// readSidecar reads a JSON sidecar into a map, and returns its bytes too.
func readSidecar(t *testing.T, path string) (map[string]any, []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	return meta, b
}
