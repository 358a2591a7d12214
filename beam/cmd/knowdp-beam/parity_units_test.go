package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// writeUnitData writes the geo schema's facts with a person column, split
// into three shards with every person's rows spread over them (so that
// only the GroupByKey on the person brings them together): person i has
// 1 + i%9 rows.
func writeUnitData(t *testing.T) (schema, glob string) {
	t.Helper()
	dir := t.TempDir()
	schema = filepath.Join(dir, "geo.schema.json")
	if err := os.WriteFile(schema, []byte(geoSchemaJSON()), 0o644); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	ages := []string{"0-17", "18-34", "35-64", "65-79", "80+"}
	var shards [3]strings.Builder
	for i := range shards {
		shards[i].WriteString("geo,person,sex,age\n")
	}
	for p := range 1500 {
		for j := range 1 + p%9 {
			c := 1 + int(40*math.Pow(r.Float64(), 2))
			fmt.Fprintf(&shards[(p+j)%3], "c%d,p%d,%s,%s\n", c, p, []string{"F", "M"}[r.IntN(2)], ages[r.IntN(5)])
		}
	}
	for i := range shards {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("facts-%d.csv", i)), []byte(shards[i].String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return schema, filepath.Join(dir, "facts-*.csv")
}

// TestParityUnits: a release per unit by knowdp-beam (rows grouped by
// unit across shards) equals knowdp release's on the same rows (one file,
// the shards concatenated) with the same seed, with and without
// invariants.
func TestParityUnits(t *testing.T) {
	schema, glob := writeUnitData(t)
	shards, _ := filepath.Glob(glob)
	slices.Sort(shards)
	one := filepath.Join(t.TempDir(), "all.csv")
	var all strings.Builder
	for i, p := range shards {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if i > 0 {
			_, s, _ = strings.Cut(s, "\n")
		}
		all.WriteString(s)
	}
	if err := os.WriteFile(one, []byte(all.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	buildKnowdp(t)
	unit := []string{"--privacy-unit", "person", "--max-rows", "3"}
	cat := func(xs ...[]string) []string { return slices.Concat(xs...) }
	cases := []parityCase{
		{name: "one cuboid", args: cat(unit, []string{"--epsilon", "1", "--cuboid", "geo,sex"})},
		{name: "one cuboid under invariants", args: cat(unit, []string{"--epsilon", "1", "--cuboid", "geo,age", "--exact", "age", "--exact", "geo"})},
		{name: "public table", args: cat(unit, []string{"--epsilon", "1", "--cuboid", "geo:state", "--exact", "geo"})},
		{name: "workload with a count of truncated units", args: cat(unit, []string{"--epsilon", "1", "--cuboid", "geo,sex", "--cuboid", "sex,age", "--exact", "sex", "--unit-share", "0.2"}), kout: "rel", bout: "rel"},
		{name: "gaussian views", args: cat(unit, []string{"--mechanism", "gaussian", "--rho", "0.5", "--cuboid", "geo:state,sex", "--cuboid", "geo:region"}), kout: "rel", bout: "rel"},
		{name: "integer", args: cat(unit, []string{"--epsilon", "1", "--cuboid", "geo,age", "--exact", "age", "--integer"})},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			kdir, bdir := filepath.Join(dir, "k"), filepath.Join(dir, "b")
			os.Mkdir(kdir, 0o755)
			os.Mkdir(bdir, 0o755)
			kout, bout := filepath.Join(kdir, cmpOr(tc.kout, "rel.csv")), filepath.Join(bdir, cmpOr(tc.bout, "rel.csv"))
			seed := strconv.Itoa(40 + i)
			kargs := cat([]string{"release", "--data", one, "--schema", schema, "--seed", seed}, tc.args, []string{"--out", kout})
			bargs := cat([]string{"release", "--data", glob, "--schema", schema, "--seed", seed}, tc.args, []string{"--out", bout})
			kc, kstdout, kstderr := knowdp(t, kargs...)
			if kc != 0 {
				t.Fatalf("knowdp %q: exit %d\n%s\n%s", kargs, kc, kstdout, kstderr)
			}
			bc, bstdout, bstderr := knowdpBeam(t, bargs...)
			if bc != 0 {
				t.Fatalf("knowdp-beam %q: exit %d\n%s\n%s", bargs, bc, bstdout, bstderr)
			}
			got, want := readOutput(t, bout), readOutput(t, kout)
			if _, ok := want.sidecar["privacy_unit"]; !ok {
				t.Fatalf("knowdp's sidecar has no privacy_unit: %s", want.rawSidecar)
			}
			compareOutputs(t, got, want)
		})
	}
}

// TestUnitRefusals: knowdp-beam refuses what knowdp refuses for units,
// with a usage error, and --max-rows auto, which it cannot do in one pass.
func TestUnitRefusals(t *testing.T) {
	schema, glob := writeUnitData(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"identifier column", []string{"--epsilon", "1", "--cuboid", "geo"}, `column "person" of the fact table looks like`},
		{"auto", []string{"--epsilon", "1", "--privacy-unit", "person", "--max-rows", "auto"}, "--max-rows auto"},
		{"max rows without unit", []string{"--epsilon", "1", "--max-rows", "2", "--row-level"}, "--max-rows needs --privacy-unit"},
	} {
		out := filepath.Join(t.TempDir(), "rel.csv")
		code, stdout, stderr := knowdpBeam(t, slices.Concat([]string{"release", "--data", glob, "--schema", schema, "--out", out}, tc.args)...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 2 and %q", tc.name, code, stdout, stderr, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s: wrote %s", tc.name, out)
		}
	}
}
