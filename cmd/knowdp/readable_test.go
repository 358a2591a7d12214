package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// TestParquetIntegerCounts checks that an integer table's counts are
// stored as INT64 in Parquet, and a real table's as DOUBLE: the type says
// what the release made, whatever the values.
func TestParquetIntegerCounts(t *testing.T) {
	dir := t.TempDir()
	base := []string{"release", "--data", repoFile("data/arrests.csv"), "--schema", repoFile("data/arrests.schema.json"),
		"--exact", "year", "--epsilon", "1", "--seed", "2"}
	countKind := func(path string) parquet.Kind {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		fields := f.Schema().Fields()
		if fields[len(fields)-2].Name() != "count" {
			t.Fatalf("%s: columns %v", path, fields)
		}
		return fields[len(fields)-2].Type().Kind()
	}
	for _, tc := range []struct {
		name string
		args []string
		file string
		want parquet.Kind
	}{
		{"integer table", []string{"--integer", "--cuboid", "year,sex", "--out", filepath.Join(dir, "i.parquet")}, "i.parquet", parquet.Int64},
		{"real table", []string{"--cuboid", "year,sex", "--out", filepath.Join(dir, "r.parquet")}, "r.parquet", parquet.Double},
		{"integer tables", []string{"--integer", "--format", "parquet", "--cuboid", "year,sex", "--cuboid", "colour", "--out", filepath.Join(dir, "it")}, "it/year-sex.parquet", parquet.Int64},
		{"real tables", []string{"--format", "parquet", "--cuboid", "year,sex", "--cuboid", "colour", "--out", filepath.Join(dir, "rt")}, "rt/colour.parquet", parquet.Double},
	} {
		if code, stdout, stderr := runCLI(t, append(base, tc.args...)...); code != 0 {
			t.Fatalf("%s: exit %d\n%s\n%s", tc.name, code, stdout, stderr)
		}
		if got := countKind(filepath.Join(dir, tc.file)); got != tc.want {
			t.Errorf("%s: count column %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestEpsilonReadsAsSpent checks that release.json states the loss so that
// it reads as the budget spent (1, not 0.9999999999990905, the sum of the
// shares on the 2^-40 grid), never below the exact spend, which it keeps
// beside it; and rho likewise.
func TestEpsilonReadsAsSpent(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args      []string
		key, want string
		budget    float64
	}{
		{[]string{"--epsilon", "1"}, "epsilon", "epsilon_exact", 1},
		{[]string{"--mechanism", "gaussian", "--rho", "0.5"}, "rho", "rho_exact", 0.5},
	} {
		out := filepath.Join(dir, tc.key)
		args := append([]string{"release", "--data", repoFile("data/us-persons.csv"), "--schema", repoFile("data/us-geo.schema.json"),
			"--exact", "geo:state", "--cuboid", "geo:division,sex", "--cuboid", "geo:state,sex", "--cuboid", "geo,sex", "--seed", "1", "--out", out}, tc.args...)
		if code, stdout, stderr := runCLI(t, args...); code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
		}
		b, err := os.ReadFile(filepath.Join(out, "release.json"))
		if err != nil {
			t.Fatal(err)
		}
		var meta map[string]any
		if err := json.Unmarshal(b, &meta); err != nil {
			t.Fatal(err)
		}
		stated, _ := meta[tc.key].(float64)
		exact, _ := meta[tc.want].(float64)
		if stated != tc.budget || !(exact <= stated) || !(exact > tc.budget*(1-1e-9)) {
			t.Errorf("%s %v (exact %v), want %v stated and the exact spend beside it", tc.key, stated, exact, tc.budget)
		}
		if exact == stated {
			t.Errorf("%s: the exact spend %v is the budget itself: this test no longer shows the rounding", tc.key, exact)
		}
	}
}
