package report

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/knowdp/knowdp/domain"
)

func mustLoad(t *testing.T, fsys fstest.MapFS, name string) *Release {
	t.Helper()
	rel, err := Load(fsys, name)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

func TestCheckFlat(t *testing.T) {
	rel := mustLoad(t, flatRelease(), "")
	c, err := Check(rel, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []PairCheck{
		{A: 0, B: 1, Margin: []string{"a"}, RollUp: "B", Cells: 2, MaxDeviation: 0.5, Tolerance: 7.5e-9, At: "y"},
		{A: 0, B: 2, Margin: []string{}, RollUp: "B", FixedBy: "{b}", Cells: 1, MaxDeviation: 0, Tolerance: 1e-8, At: "total"},
		{A: 1, B: 2, Margin: []string{}, RollUp: "B", FixedBy: "{b}", Cells: 1, MaxDeviation: 0.5, Tolerance: 1.05e-8, At: "total"},
	}
	if len(c.Pairs) != len(want) {
		t.Fatalf("%d pairs, want %d: %+v", len(c.Pairs), len(want), c.Pairs)
	}
	for i, w := range want {
		g := c.Pairs[i]
		if g.A != w.A || g.B != w.B || CuboidName(g.Margin) != CuboidName(w.Margin) || g.RollUp != w.RollUp || g.FixedBy != w.FixedBy ||
			g.Cells != w.Cells || g.MaxDeviation != w.MaxDeviation || g.At != w.At || !near(g.Tolerance, w.Tolerance) {
			t.Errorf("pair %d: %+v, want %+v", i, g, w)
		}
	}
	if c.Pairs[0].OK() || !c.Pairs[1].OK() || c.Pairs[2].OK() || c.Worst != 0 {
		t.Errorf("OK %v %v %v, worst %d", c.Pairs[0].OK(), c.Pairs[1].OK(), c.Pairs[2].OK(), c.Worst)
	}
	if len(c.Invariants) != 1 || len(c.Invariants[0].Tables) != 1 || c.Invariants[0].Public != -1 ||
		!strings.Contains(c.Invariants[0].Note, "only {a,b} holds it") {
		t.Errorf("invariants: %+v", c.Invariants)
	}
	if len(c.Notes) != 0 {
		t.Errorf("notes: %v", c.Notes)
	}
}

func near(a, b float64) bool { return a-b < 1e-15 && b-a < 1e-15 }

// TestCheckTolerance: real tables agree within 1e-9 of the margin's
// largest cell, integer tables only exactly.
func TestCheckTolerance(t *testing.T) {
	for _, c := range []struct {
		name    string
		integer bool
		yCount  string
		ok      bool
	}{
		{"real, rounding", false, "7.000000001", true}, // 1e-9 ≤ 7e-9
		{"real, too far", false, "7.0000001", false},   // 1e-7 > 7e-9
		{"integer, exact", true, "7", true},
		{"integer, off by one", true, "8", false},
	} {
		fsys := flatRelease()
		meta := workloadJSON
		if c.integer {
			meta = strings.ReplaceAll(meta, `"measured": true,`, `"measured": true, "integer": true, "integer_exact": true,`)
		}
		fsys["release.json"] = &fstest.MapFile{Data: []byte(meta)}
		fsys["a.csv"] = &fstest.MapFile{Data: []byte("a,count,moe90\nx,3,3\ny," + c.yCount + ",3\n")}
		chk, err := Check(mustLoad(t, fsys, ""), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := chk.Pairs[0].OK(); got != c.ok {
			t.Errorf("%s: pair {a,b}/{a} OK = %v (deviation %g, tolerance %g), want %v", c.name, got, chk.Pairs[0].MaxDeviation, chk.Pairs[0].Tolerance, c.ok)
		}
	}
}

// TestCheckIntegerClaims counts the cells of an integer table that are not
// non-negative integers.
func TestCheckIntegerClaims(t *testing.T) {
	fsys := flatRelease()
	fsys["release.json"] = &fstest.MapFile{Data: []byte(strings.Replace(workloadJSON, `"moe90": 4.5,`, `"moe90": 4.5, "integer": true, "nonneg": true,`, 1))}
	fsys["ab.csv"] = &fstest.MapFile{Data: []byte("a,b,count,moe90\nx,p,1.5,4.5\nx,q,-2,4.5\ny,p,3,4.5\ny,q,4,4.5\n")}
	chk, err := Check(mustLoad(t, fsys, ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	if tc := chk.Tables[0]; tc.NonInteger != 1 || tc.Negative != 1 || tc.MinCount != -2 {
		t.Errorf("%+v", tc)
	}
	if tc := chk.Tables[1]; tc.NonInteger != 0 || tc.Negative != 0 || tc.MinCount != 3 {
		t.Errorf("%+v", tc)
	}
}

// geoSchema has a two-level geography: states s1, s2 in region r1, s3 in
// r2.
const geoSchema = `{"dimensions":[
  {"name":"geo","levels":["region","state"],"values":["s1","s2","s3"],"parents":{"region":{"s1":"r1","s2":"r1","s3":"r2"}}},
  {"name":"sex","values":["F","M"]}]}`

// geoRelease has states by sex, regions (public, with r2 off by 2 from the
// states' sum) and sex, with regions exact.
func geoRelease() fstest.MapFS {
	meta := `{"mechanism": "m", "epsilon": 1, "neighbours": "n", "guarantee": "unconditional", "private": true, "seeded": false,
  "measurements": [{"cuboid": ["geo","sex"], "epsilon": 1, "sensitivity": 2, "scale": 2}],
  "tables": [{"cuboid": ["geo","sex"], "file": "geo-sex.csv", "measured": true, "moe90": 3, "variance": 8},
             {"cuboid": ["geo:region"], "file": "geo.region.csv", "public": true, "moe90": 0, "variance": 0},
             {"cuboid": ["sex"], "file": "sex.csv", "moe90": 4, "variance": 12}],
  "exact": [["geo:region"]], "hierarchy": "geo",
  "levels": [{"level": "total", "tables": ["{sex}"], "cells": 2, "expected_mean_abs_error": 2, "mean_moe90": 4, "max_moe90": 4},
             {"level": "region", "tables": ["{geo:region}"], "cells": 2, "expected_mean_abs_error": 0, "mean_moe90": 0, "max_moe90": 0},
             {"level": "state", "tables": ["{geo,sex}"], "cells": 6, "expected_mean_abs_error": 1.5, "mean_moe90": 3, "max_moe90": 3}]}`
	return fstest.MapFS{
		"release.json":   {Data: []byte(meta)},
		"geo-sex.csv":    {Data: []byte("state,sex,count,moe90\ns1,F,10,3\ns1,M,11,3\ns2,F,20,3\ns2,M,21,3\ns3,F,30,3\ns3,M,31,3\n")},
		"geo.region.csv": {Data: []byte("region,count,moe90\nr1,62,0\nr2,63,0\n")},
		"sex.csv":        {Data: []byte("sex,count,moe90\nF,60,4\nM,63,4\n")},
	}
}

func TestCheckHierarchy(t *testing.T) {
	s, err := domain.ParseSchema([]byte(geoSchema))
	if err != nil {
		t.Fatal(err)
	}
	rel := mustLoad(t, geoRelease(), "")
	c, err := Check(rel, s)
	if err != nil {
		t.Fatal(err)
	}
	// geo-sex vs regions: on {geo:region}, r2 = 61 against 63.
	p := c.Pairs[0]
	if CuboidName(p.Margin) != "{geo:region}" || p.RollUp != "B" || p.FixedBy != "{geo:region}" || p.MaxDeviation != 2 || p.At != "r2" || p.Cells != 2 {
		t.Errorf("with the schema, geo-sex/regions: %+v", p)
	}
	// geo-sex vs sex: on {sex}, equal.
	if p := c.Pairs[1]; CuboidName(p.Margin) != "{sex}" || p.MaxDeviation != 0 || p.FixedBy != "" {
		t.Errorf("geo-sex/sex: %+v", p)
	}
	// regions vs sex: the totals 125 and 123.
	if p := c.Pairs[2]; CuboidName(p.Margin) != "{}" || p.MaxDeviation != 2 || p.FixedBy != "{geo:region}" {
		t.Errorf("regions/sex: %+v", p)
	}
	ic := c.Invariants[0]
	if len(ic.Tables) != 2 || ic.Public != 1 || ic.MaxDeviation != 2 || ic.At != "r2" || ic.OK() {
		t.Errorf("invariant {geo:region}: %+v", ic)
	}
	if len(c.Notes) != 0 {
		t.Errorf("notes with the schema: %v", c.Notes)
	}

	// Without the schema the levels cannot be mapped: geo is left out of
	// the comparison (the totals still differ by 2), and a note says so.
	c, err = Check(rel, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Pairs[0]; CuboidName(p.Margin) != "{}" || p.MaxDeviation != 2 || p.RollUp != "" {
		t.Errorf("without the schema, geo-sex/regions: %+v", p)
	}
	if len(c.Notes) != 1 || !strings.Contains(c.Notes[0], `"geo"`) || !strings.Contains(c.Notes[0], "--schema") {
		t.Errorf("notes: %v", c.Notes)
	}
	if ic := c.Invariants[0]; len(ic.Tables) != 1 || ic.Note == "" {
		t.Errorf("invariant without the schema: %+v", ic)
	}

	// Levels group the tables as the metadata lists them.
	lv := rel.Levels()
	if len(lv) != 3 || lv[0].Level != "total" || len(lv[2].Tables) != 1 || lv[2].Tables[0] != 0 || lv[2].MeanAbsError != 1.5 {
		t.Errorf("levels: %+v", lv)
	}
}

func TestCheckValuesAgainstSchema(t *testing.T) {
	s, err := domain.ParseSchema([]byte(geoSchema))
	if err != nil {
		t.Fatal(err)
	}
	fsys := geoRelease()
	fsys["geo.region.csv"] = &fstest.MapFile{Data: []byte("region,count,moe90\nr1,62,0\ns3,63,0\n")}
	_, err = Check(mustLoad(t, fsys, ""), s)
	if err == nil || !strings.Contains(err.Error(), `geo.region.csv: row 3, column "region": "s3" is not a value of geo:region in the schema`) {
		t.Errorf("a state in the regions' table: %v", err)
	}
	fsys = geoRelease()
	fsys["release.json"] = &fstest.MapFile{Data: []byte(strings.Replace(string(fsys["release.json"].Data), `["geo:region"], "file"`, `["geo:county"], "file"`, 1))}
	_, err = Check(mustLoad(t, fsys, ""), s)
	if err == nil || !strings.Contains(err.Error(), `dimension "geo" has no level "county"`) {
		t.Errorf("an unknown level: %v", err)
	}
}
