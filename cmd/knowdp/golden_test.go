package main

import (
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/golden from the current code (only for a change explained in its commit)")

// goldenCase is one seeded command whose outputs are kept as a fixture, so
// that a change of the release path shows every number it moves.
type goldenCase struct {
	name string
	// args run with --seed 1 and --out OUT (a file for one table, a
	// directory for several); OUT in an argument is replaced by the output.
	args []string
	// dir says the output is a directory holding release.json.
	dir bool
	// then, if set, runs after args (OUT and DIR replaced): an estimate
	// from the release's measurements, writing into DIR/est.
	then []string
}

var arrests = []string{"--data", repoFile("data/arrests.csv"), "--schema", repoFile("data/arrests.schema.json")}
var usGeo = []string{"--data", repoFile("data/us-persons.csv"), "--schema", repoFile("data/us-geo.schema.json")}

func goldenCases() []goldenCase {
	rel := func(data []string, rest ...string) []string {
		return append(append([]string{"release"}, data...), rest...)
	}
	wl := []string{"--exact", "year", "--exact", "colour,sex", "--cuboid", "year,colour", "--cuboid", "sex,agegroup", "--cuboid", "year,released"}
	views := []string{"--exact", "geo:state", "--cuboid", "", "--cuboid", "geo:region", "--cuboid", "geo:division,sex", "--cuboid", "geo:state,sex", "--cuboid", "geo:division,sex,agegroup", "--cuboid", "geo,sex"}
	return []goldenCase{
		{name: "cuboid-laplace", args: rel(arrests, "--exact", "year,colour", "--epsilon", "1", "--cuboid", "year,colour,released")},
		{name: "cuboid-gaussian", args: rel(arrests, "--exact", "year", "--mechanism", "gaussian", "--rho", "0.5", "--cuboid", "sex,agegroup,year")},
		{name: "cuboid-integer", args: rel(arrests, "--exact", "year,colour", "--epsilon", "1", "--integer", "--cuboid", "year,colour,released")},
		{name: "cuboid-nonneg", args: rel(arrests, "--exact", "year", "--exact", "colour,sex", "--epsilon", "0.5", "--nonneg", "--cuboid", "year,colour,sex,released")},
		{name: "workload-laplace", dir: true, args: rel(arrests, append([]string{"--epsilon", "1"}, wl...)...)},
		{name: "workload-equal", dir: true, args: rel(arrests, append([]string{"--epsilon", "1", "--split", "equal", "--strategy", "requested"}, wl...)...)},
		{name: "workload-gaussian", dir: true, args: rel(arrests, append([]string{"--mechanism", "gaussian", "--rho", "1"}, wl...)...)},
		{name: "workload-integer", dir: true, args: rel(arrests, append([]string{"--epsilon", "1", "--integer"}, wl...)...)},
		{name: "workload-nonneg", dir: true, args: rel(arrests, append([]string{"--epsilon", "1", "--nonneg"}, wl...)...)},
		{name: "workload-measurements", dir: true,
			args: rel(arrests, append([]string{"--epsilon", "1", "--measurements", "DIR/m.json"}, wl...)...),
			then: []string{"estimate", "--measurements", "DIR/m.json", "--cuboid", "year", "--cuboid", "colour", "--cuboid", "sex,agegroup", "--out", "DIR/est"}},
		{name: "views-laplace", dir: true, args: rel(usGeo, append([]string{"--epsilon", "1"}, views...)...)},
		{name: "views-gaussian", dir: true, args: rel(usGeo, append([]string{"--mechanism", "gaussian", "--rho", "0.5"}, views...)...)},
		{name: "views-integer", dir: true, args: rel(usGeo, append([]string{"--epsilon", "1", "--integer"}, views...)...)},
		{name: "views-spine", dir: true, args: rel(usGeo, append([]string{"--epsilon", "1", "--split", "spine"}, views...)...)},
	}
}

// goldenRelease is what a fixture keeps of a release: every table's rows
// (labels, count, moe90), keyed by the table's view, and every number of
// its privacy story, keyed by its JSON path.
type goldenRelease struct {
	Tables  map[string][][]string `json:"tables"`
	Numbers map[string]float64    `json:"numbers"`
}

// TestGoldenReleases compares seeded releases with the fixtures recorded
// before the release paths were unified: every count and margin of error
// to 1e-9, every number of the sidecar that both still have. A difference
// that a change means to make is explained in its commit and in the docs,
// and the fixture rewritten with -update-golden.
func TestGoldenReleases(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 14 releases; skipped with -short")
	}
	for _, c := range goldenCases() {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			if !c.dir {
				out += ".csv"
			}
			sub := func(args []string) []string {
				var r []string
				for _, a := range args {
					r = append(r, strings.NewReplacer("DIR", dir, "OUT", out).Replace(a))
				}
				return r
			}
			args := append(sub(c.args), "--seed", "1", "--out", out)
			if code, stdout, stderr := runCLI(t, args...); code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
			}
			got := map[string]goldenRelease{"release": readGolden(t, out, c.dir)}
			if c.then != nil {
				if code, stdout, stderr := runCLI(t, sub(c.then)...); code != 0 {
					t.Fatalf("then: exit %d\n%s\n%s", code, stdout, stderr)
				}
				got["then"] = readGolden(t, filepath.Join(dir, "est"), true)
			}
			path := filepath.Join("testdata", "golden", c.name+".json")
			if *updateGolden {
				b, err := json.MarshalIndent(got, "", " ")
				if err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var want map[string]goldenRelease
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			for k, w := range want {
				compareGolden(t, k, w, got[k])
			}
		})
	}
}

// readGolden reads a release's tables and sidecar: out is a CSV with its
// sidecar beside it, or a directory with release.json (or, for an
// estimate, estimate.json) naming its tables.
func readGolden(t *testing.T, out string, dir bool) goldenRelease {
	t.Helper()
	g := goldenRelease{Tables: map[string][][]string{}, Numbers: map[string]float64{}}
	var meta map[string]any
	read := func(path string) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &meta); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	if !dir {
		read(sidecarPath(out))
		g.Tables["table"] = goldenRows(t, out)
	} else {
		path := filepath.Join(out, "release.json")
		if _, err := os.Stat(path); err != nil {
			path = filepath.Join(out, "estimate.json")
		}
		read(path)
		tables, _ := meta["tables"].([]any)
		for _, x := range tables {
			tm := x.(map[string]any)
			var names []string
			for _, n := range tm["cuboid"].([]any) {
				names = append(names, n.(string))
			}
			file, _ := tm["file"].(string)
			g.Tables[strings.Join(names, ",")] = goldenRows(t, filepath.Join(out, file))
		}
	}
	flattenNumbers("", meta, g.Numbers)
	return g
}

// goldenRows reads a table's rows without its header.
func goldenRows(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rows[1:]
}

// flattenNumbers records every number of v under its JSON path; list
// elements are keyed by their index, objects in a list by their cuboid
// where they have one.
func flattenNumbers(prefix string, v any, out map[string]float64) {
	switch x := v.(type) {
	case float64:
		out[prefix] = x
	case map[string]any:
		for k, y := range x {
			flattenNumbers(prefix+"/"+k, y, out)
		}
	case []any:
		for i, y := range x {
			key := strconv.Itoa(i)
			if m, ok := y.(map[string]any); ok {
				if c, ok := m["cuboid"].([]any); ok {
					key = fmt.Sprint(c)
				}
			}
			flattenNumbers(prefix+"/"+key, y, out)
		}
	}
}

func compareGolden(t *testing.T, key string, want, got goldenRelease) {
	t.Helper()
	names := make([]string, 0, len(want.Tables))
	for n := range want.Tables {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		w, g := want.Tables[n], got.Tables[n]
		if g == nil {
			t.Errorf("%s: table %q is gone", key, n)
			continue
		}
		if len(w) != len(g) {
			t.Errorf("%s: table %q has %d rows, want %d", key, n, len(g), len(w))
			continue
		}
		bad := 0
		for i := range w {
			if len(w[i]) != len(g[i]) {
				t.Errorf("%s: table %q row %d: %v, want %v", key, n, i+1, g[i], w[i])
				break
			}
			for j := range w[i] {
				if !goldenEqual(w[i][j], g[i][j]) {
					if bad++; bad <= 3 {
						t.Errorf("%s: table %q row %d column %d: %s, want %s", key, n, i+1, j+1, g[i][j], w[i][j])
					}
				}
			}
		}
		if bad > 3 {
			t.Errorf("%s: table %q: %d values differ", key, n, bad)
		}
	}
	paths := make([]string, 0, len(want.Numbers))
	for p := range want.Numbers {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		g, ok := got.Numbers[p]
		if !ok {
			continue // a field renamed or removed: the tables above still pin the numbers
		}
		if w := want.Numbers[p]; !closeTo(w, g) {
			t.Errorf("%s: %s = %v, want %v", key, p, g, w)
		}
	}
}

// goldenEqual compares two cells: numbers to 1e-9 (relative to their size
// where that is above 1), labels exactly.
func goldenEqual(w, g string) bool {
	if w == g {
		return true
	}
	a, err1 := strconv.ParseFloat(w, 64)
	b, err2 := strconv.ParseFloat(g, 64)
	return err1 == nil && err2 == nil && closeTo(a, b)
}

func closeTo(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}
