package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/domain"
)

// TestReleaseViews releases the bundled US places at three levels with
// state totals exact, as integers, and checks the files: one per view,
// named with the level, whose every level adds up to the one above and to
// the invariant, with a margin of error on every row and the error by level
// in release.json.
func TestReleaseViews(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "geo")
	code, stdout, stderr := runCLI(t, "release",
		"--data", repoFile("data/us-persons.csv"), "--schema", repoFile("data/us-geo.schema.json"),
		"--epsilon", "1", "--exact", "geo:state", "--integer", "--seed", "4", "--split", "spine",
		"--cuboid", "geo:region", "--cuboid", "geo:state,sex", "--cuboid", "geo,sex,agegroup", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	for _, want := range []string{"split spine", "error by level", "region", "state", "place"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
	sum := func(file string, key func(row []string) string) map[string]float64 {
		rows := readCSVFile(t, filepath.Join(dir, file))
		out := map[string]float64{}
		for _, r := range rows[1:] {
			n, err := strconv.ParseFloat(r[len(r)-2], 64)
			if err != nil || n < 0 || n != float64(int64(n)) {
				t.Fatalf("%s: count %q is not a non-negative integer", file, r[len(r)-2])
			}
			if m, err := strconv.ParseFloat(r[len(r)-1], 64); err != nil || !(m > 0) {
				t.Fatalf("%s: moe90 %q", file, r[len(r)-1])
			}
			out[key(r)] += n
		}
		return out
	}
	states := sum("state-sex.csv", func(r []string) string { return r[0] })
	places := sum("place-sex-agegroup.csv", func(r []string) string { return strings.SplitN(r[0], "/", 2)[0] })
	if len(states) != 50 {
		t.Fatalf("%d states", len(states))
	}
	truth := map[string]float64{}
	for _, r := range readCSVFile(t, repoFile("data/us-persons.csv"))[1:] {
		truth[strings.SplitN(r[0], "/", 2)[0]]++
	}
	for st, n := range states {
		if places[st] != n || truth[st] != n {
			t.Errorf("state %s: state table %v, places add up to %v, invariant %v", st, n, places[st], truth[st])
		}
	}
	// Every table's hierarchy column is named by its level, and so is its
	// file.
	for file, header := range map[string]string{"region.csv": "region,count,moe90", "state-sex.csv": "state,sex,count,moe90", "place-sex-agegroup.csv": "place,sex,agegroup,count,moe90"} {
		rows := readCSVFile(t, filepath.Join(dir, file))
		if got := strings.Join(rows[0], ","); got != header {
			t.Errorf("%s: header %s, want %s", file, got, header)
		}
	}
	if regions := readCSVFile(t, filepath.Join(dir, "region.csv")); len(regions) != 5 {
		t.Fatalf("region.csv: %v", regions)
	}
	// The summary by level states the margins the tables publish (integer
	// tables add 1 for the rounding), in release.json and in the summary.
	maxMOE := func(file string) float64 {
		m := 0.0
		for _, r := range readCSVFile(t, filepath.Join(dir, file))[1:] {
			x, _ := strconv.ParseFloat(r[len(r)-1], 64)
			m = max(m, x)
		}
		return m
	}
	b, err := os.ReadFile(filepath.Join(dir, "release.json"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Hierarchy string `json:"hierarchy"`
		Private   bool   `json:"private"`
		Levels    []struct {
			Level     string  `json:"level"`
			MeanMOE90 float64 `json:"mean_moe90"`
			MaxMOE90  float64 `json:"max_moe90"`
		} `json:"levels"`
		Tables []struct {
			File         string `json:"file"`
			IntegerExact bool   `json:"integer_exact"`
			Public       bool   `json:"public"`
		} `json:"tables"`
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Hierarchy != "geo" || meta.Private || len(meta.Levels) != 3 || meta.Levels[0].Level != "region" || meta.Levels[2].Level != "place" {
		t.Fatalf("release.json: %s", b)
	}
	for _, tb := range meta.Tables {
		if !tb.Public && !tb.IntegerExact {
			t.Errorf("%s: integer_exact false", tb.File)
		}
	}
	for i, file := range map[int]string{1: "state-sex.csv", 2: "place-sex-agegroup.csv"} {
		if got, want := meta.Levels[i].MaxMOE90, maxMOE(file); got != want {
			t.Errorf("level %s: max_moe90 %v, the table's largest moe90 %v", meta.Levels[i].Level, got, want)
		}
		if !strings.Contains(stdout, fmt.Sprintf("%.4g", maxMOE(file))) {
			t.Errorf("the summary does not state %s's largest moe90 %.4g", file, maxMOE(file))
		}
	}
}

// TestReleaseViewsOptimal releases views with the optimal split (the
// default) and checks that release.json carries its certificate.
func TestReleaseViewsOptimal(t *testing.T) {
	for _, mech := range [][]string{{"--epsilon", "1"}, {"--mechanism", "gaussian", "--rho", "0.5"}} {
		dir := filepath.Join(t.TempDir(), "geo")
		args := append([]string{"release", "--data", repoFile("data/us-persons.csv"), "--schema", repoFile("data/us-geo.schema.json"),
			"--exact", "geo:state", "--seed", "4", "--cuboid", "geo:division,sex", "--cuboid", "geo:state,sex", "--cuboid", "geo,agegroup", "--out", dir}, mech...)
		code, stdout, stderr := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", mech, code, stdout, stderr)
		}
		b, err := os.ReadFile(filepath.Join(dir, "release.json"))
		if err != nil {
			t.Fatal(err)
		}
		var meta struct {
			Split     string   `json:"split"`
			Objective float64  `json:"objective"`
			Bound     *float64 `json:"split_lower_bound"`
			Gap       *float64 `json:"split_gap"`
		}
		if err := json.Unmarshal(b, &meta); err != nil {
			t.Fatal(err)
		}
		if meta.Split != "optimal" || meta.Gap == nil || meta.Bound == nil || *meta.Bound > meta.Objective || !(meta.Objective > 0) {
			t.Fatalf("%v: %s", mech, b)
		}
		if mech[0] == "--mechanism" && *meta.Gap > 1e-6 {
			t.Errorf("zCDP split not certified: gap %v", *meta.Gap)
		}
	}
}

// TestReleaseViewsNonNegative: --nonneg across a hierarchy publishes real
// counts that are never negative, keep the invariant and add up from level
// to level.
func TestReleaseViewsNonNegative(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nn")
	code, stdout, stderr := runCLI(t, "release", "--data", repoFile("data/us-persons.csv"), "--schema", repoFile("data/us-geo.schema.json"),
		"--epsilon", "0.5", "--exact", "geo:state", "--nonneg", "--seed", "6",
		"--cuboid", "geo:division,sex", "--cuboid", "geo:state,sex", "--cuboid", "geo,sex", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	sum := func(file string, key func(r []string) string) map[string]float64 {
		out := map[string]float64{}
		for _, r := range readCSVFile(t, filepath.Join(dir, file))[1:] {
			n, err := strconv.ParseFloat(r[len(r)-2], 64)
			// Non-negative to the least-squares step's tolerance.
			if err != nil || n < -1e-6 {
				t.Fatalf("%s: count %q is negative", file, r[len(r)-2])
			}
			out[key(r)] += n
		}
		return out
	}
	states := sum("state-sex.csv", func(r []string) string { return r[0] })
	places := sum("place-sex.csv", func(r []string) string { return strings.SplitN(r[0], "/", 2)[0] })
	truth := map[string]float64{}
	for _, r := range readCSVFile(t, repoFile("data/us-persons.csv"))[1:] {
		truth[strings.SplitN(r[0], "/", 2)[0]]++
	}
	for st, n := range truth {
		if math.Abs(states[st]-n) > 1e-6 || math.Abs(places[st]-n) > 1e-6 {
			t.Errorf("state %s: state table %v, places %v, invariant %v", st, states[st], places[st], n)
		}
	}
	meta, b := readSidecar(t, filepath.Join(dir, "release.json"))
	for _, x := range meta["tables"].([]any) {
		tm := x.(map[string]any)
		if tm["nonneg"] != true {
			t.Errorf("table not marked non-negative: %s", b)
		}
	}
}

// TestReleaseViewsErrors: bad levels and unsupported combinations are
// refused with a message naming what is wrong, and nothing is written.
func TestReleaseViewsErrors(t *testing.T) {
	dir := t.TempDir()
	base := []string{"release", "--data", repoFile("data/us-persons.csv"), "--schema", repoFile("data/us-geo.schema.json"), "--epsilon", "1"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cuboid", "geo:county"}, `dimension "geo" has no level "county" (its levels: region, division, state, place)`},
		{[]string{"--cuboid", "sex:broad", "--cuboid", "geo:state"}, `dimension "sex" has no levels`},
		{[]string{"--cuboid", "geo:state", "--exact", "geo:town"}, `no level "town"`},
	} {
		out := filepath.Join(dir, "out")
		code, _, stderr := runCLI(t, append(append(append([]string{}, base...), tc.args...), "--out", out)...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, stderr, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: wrote %s", tc.args, out)
		}
	}
	// A leaf the hierarchy does not have: file, row and column named.
	data := filepath.Join(dir, "persons.csv")
	if err := os.WriteFile(data, []byte("geo,sex,agegroup\nAL/Birmingham,F,65+\nVT/Burlington,M,65+\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "release", "--data", data, "--schema", repoFile("data/us-geo.schema.json"), "--epsilon", "1",
		"--cuboid", "geo:state", "--cuboid", "geo", "--out", filepath.Join(dir, "x"))
	if code == 0 || !strings.Contains(stderr, "VT/Burlington") || !strings.Contains(stderr, "row 3") || !strings.Contains(stderr, "geo") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// TestDemoHierarchy runs the hierarchy demo and checks that it shows
// tables that add up where separate releases do not.
func TestDemoHierarchy(t *testing.T) {
	if testing.Short() {
		t.Skip("runs several releases of the 842-place hierarchy")
	}
	code, stdout, stderr := runCLI(t, "demo", "hierarchy", "--runs", "2", "--seed", "5")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"largest gap between a table and the sum of a finer one, over every pair of levels: 0", "{geo:state,sex}", "each level separately"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, stdout)
		}
	}
}

// TestReleaseViewsPrintedSumsHold: real-valued tables across levels are
// printed in full, so the printed places add up to the printed states and
// to the state totals to 1e-9.
func TestReleaseViewsPrintedSumsHold(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "geo")
	code, stdout, stderr := runCLI(t, "release",
		"--data", repoFile("data/us-persons.csv"), "--schema", repoFile("data/us-geo.schema.json"),
		"--epsilon", "1", "--exact", "geo:state", "--seed", "6",
		"--cuboid", "geo:state,sex", "--cuboid", "geo,sex", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	read := func(file string) map[string]float64 {
		out := map[string]float64{}
		for _, r := range readCSVFile(t, filepath.Join(dir, file))[1:] {
			n, err := strconv.ParseFloat(r[2], 64)
			if err != nil {
				t.Fatal(err)
			}
			out[strings.SplitN(r[0], "/", 2)[0]+","+r[1]] += n
		}
		return out
	}
	states, places := read("state-sex.csv"), read("place-sex.csv")
	truth := map[string]float64{}
	for _, r := range readCSVFile(t, repoFile("data/us-persons.csv"))[1:] {
		truth[strings.SplitN(r[0], "/", 2)[0]]++
	}
	byState := map[string]float64{}
	for k, n := range states {
		if math.Abs(places[k]-n) > 1e-9*math.Max(1, n) {
			t.Errorf("%s: places add up to %v, state table %v", k, places[k], n)
		}
		byState[strings.SplitN(k, ",", 2)[0]] += n
	}
	for st, n := range byState {
		if math.Abs(n-truth[st]) > 1e-9*truth[st] {
			t.Errorf("%s: %v, invariant %v", st, n, truth[st])
		}
	}
}

// TestReleaseCrossingHierarchies: tables at the levels of two hierarchies
// (geography and age bands), released together as non-negative integers
// that keep the state totals and add up on every common roll-up.
func TestReleaseCrossingHierarchies(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cross")
	code, stdout, stderr := runCLI(t, "release", "--data", repoFile("data/us-persons.csv"), "--schema", repoFile("data/us-geo-age.schema.json"),
		"--epsilon", "1", "--exact", "geo:state", "--integer", "--seed", "9",
		"--cuboid", "geo:state,agegroup:broad", "--cuboid", "geo:division,agegroup", "--cuboid", "geo,agegroup:broad", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "split spine") || !strings.Contains(stdout, "state x broad") {
		t.Errorf("summary:\n%s", stdout)
	}
	schema, err := domain.LoadSchema(repoFile("data/us-geo-age.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	read := func(file, view string) (domain.View, []float64) {
		v, err := schema.ParseView(view)
		if err != nil {
			t.Fatal(err)
		}
		rows := readCSVFile(t, filepath.Join(dir, file))[1:]
		if len(rows) != schema.ViewSize(v) {
			t.Fatalf("%s: %d rows, want %d", file, len(rows), schema.ViewSize(v))
		}
		x := make([]float64, len(rows))
		for i, r := range rows {
			if x[i], err = strconv.ParseFloat(r[len(r)-2], 64); err != nil || x[i] < 0 || x[i] != math.Round(x[i]) {
				t.Fatalf("%s row %d: count %q", file, i+2, r[len(r)-2])
			}
		}
		return v, x
	}
	sb, sbx := read("state-broad.csv", "geo:state,agegroup:broad")
	da, dax := read("division-agegroup.csv", "geo:division,agegroup")
	pb, pbx := read("place-broad.csv", "geo,agegroup:broad")
	same := func(a domain.View, x []float64, b domain.View, y []float64, to string) {
		m, err := schema.ParseView(to)
		if err != nil {
			t.Fatal(err)
		}
		ra, err := schema.RollUp(a, x, m)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := schema.RollUp(b, y, m)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ra, rb) {
			t.Errorf("%s and %s disagree on %s", schema.FormatView(a), schema.FormatView(b), to)
		}
	}
	same(sb, sbx, pb, pbx, "geo:state,agegroup:broad")
	same(sb, sbx, da, dax, "geo:division,agegroup:broad")
	same(da, dax, pb, pbx, "geo:division,agegroup:broad")
	states, err := schema.RollUp(sb, sbx, mustParseView(t, schema, "geo:state"))
	if err != nil {
		t.Fatal(err)
	}
	truth := map[string]float64{}
	for _, r := range readCSVFile(t, repoFile("data/us-persons.csv"))[1:] {
		truth[strings.SplitN(r[0], "/", 2)[0]]++
	}
	for i, st := range schema.LevelValues(0, 1) {
		if states[i] != truth[st] {
			t.Errorf("state %s: %v, invariant %v", st, states[i], truth[st])
		}
	}
}

func mustParseView(t *testing.T, s *domain.Schema, x string) domain.View {
	t.Helper()
	v, err := s.ParseView(x)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
