package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/knowdp/knowdp/domain"
)

// syntheticRelease is a release across a geography of counties in states
// (60 each) in 4 regions, by sex and 18 age groups: the total, regions,
// states by sex and counties by sex and age (about cells cells), state
// totals exact, integer counts. It returns the release's files and its
// schema.
func syntheticRelease(tb testing.TB, cells int) (fstest.MapFS, *domain.Schema) {
	counties := max(cells/(2*18), 4*60)
	states := counties / 60
	ages := make([]string, 18)
	for i := range ages {
		ages[i] = fmt.Sprintf("a%02d", i)
	}
	var countyNames []string
	stateOf, regionOf := map[string]string{}, map[string]string{}
	for c := range counties {
		n := fmt.Sprintf("c%06d", c)
		countyNames = append(countyNames, n)
		stateOf[n] = fmt.Sprintf("s%04d", c%states)
	}
	for s := range states {
		regionOf[fmt.Sprintf("s%04d", s)] = fmt.Sprintf("r%d", s%4)
	}
	schema, err := json.Marshal(map[string]any{"dimensions": []any{
		map[string]any{"name": "geo", "levels": []string{"region", "state", "county"}, "values": countyNames,
			"parents": map[string]any{"state": stateOf, "region": regionOf}},
		map[string]any{"name": "sex", "values": []string{"F", "M"}},
		map[string]any{"name": "age", "values": ages},
	}})
	if err != nil {
		tb.Fatal(err)
	}
	s, err := domain.ParseSchema(schema)
	if err != nil {
		tb.Fatal(err)
	}
	// Counts that add up: every county cell 10, so a state-sex cell is
	// 60 × 18 × 10 and a region the sum of its states.
	var county, state, region strings.Builder
	county.WriteString("county,sex,age,count,moe90\n")
	for _, c := range countyNames {
		for _, sx := range []string{"F", "M"} {
			for _, a := range ages {
				fmt.Fprintf(&county, "%s,%s,%s,10,6.5\n", c, sx, a)
			}
		}
	}
	state.WriteString("state,sex,count,moe90\n")
	perRegion := map[string]int{}
	for st := range states {
		n := fmt.Sprintf("s%04d", st)
		for _, sx := range []string{"F", "M"} {
			fmt.Fprintf(&state, "%s,%s,%d,25.5\n", n, sx, 60*18*10)
		}
		perRegion[regionOf[n]] += 2 * 60 * 18 * 10
	}
	region.WriteString("region,count,moe90\n")
	for r := range 4 {
		fmt.Fprintf(&region, "r%d,%d,0\n", r, perRegion[fmt.Sprintf("r%d", r)])
	}
	meta := fmt.Sprintf(`{"mechanism": "Laplace noise", "composition": "sequential", "epsilon": 1, "neighbours": "n", "guarantee": "unconditional",
  "private": true, "seeded": false, "domains_from_data": false,
  "measurements": [{"cuboid": ["geo:state","sex"], "epsilon": 0.2, "sensitivity": 2, "scale": 10},
                   {"cuboid": ["geo","sex","age"], "epsilon": 0.8, "sensitivity": 2, "scale": 2.5}],
  "tables": [{"cuboid": [], "file": "total.csv", "public": true, "moe90": 0, "variance": 0},
             {"cuboid": ["geo:region"], "file": "geo.region.csv", "public": true, "moe90": 0, "variance": 0},
             {"cuboid": ["geo:state","sex"], "file": "geo.state-sex.csv", "measured": true, "moe90": 25.5, "variance": 200, "integer": true, "integer_exact": true},
             {"cuboid": ["geo","sex","age"], "file": "geo-sex-age.csv", "measured": true, "moe90": 6.5, "variance": 12, "integer": true, "integer_exact": true}],
  "exact": [["geo:state"]], "hierarchy": "geo",
  "levels": [{"level": "total", "tables": ["{}"], "cells": 1}, {"level": "region", "tables": ["{geo:region}"], "cells": 4},
             {"level": "state", "tables": ["{geo:state,sex}"], "cells": %d, "expected_mean_abs_error": 9, "mean_moe90": 20, "max_moe90": 24.5},
             {"level": "county", "tables": ["{geo,sex,age}"], "cells": %d, "expected_mean_abs_error": 2.3, "mean_moe90": 5.5, "max_moe90": 5.5}]}`,
		2*states, 36*counties)
	return fstest.MapFS{
		"release.json":      {Data: []byte(meta)},
		"total.csv":         {Data: []byte(fmt.Sprintf("count,moe90\n%d,0\n", 36*10*counties))},
		"geo.region.csv":    {Data: []byte(region.String())},
		"geo.state-sex.csv": {Data: []byte(state.String())},
		"geo-sex-age.csv":   {Data: []byte(county.String())},
	}, s
}

// TestSyntheticRelease checks the benchmark's release: its tables add up.
func TestSyntheticRelease(t *testing.T) {
	fsys, s := syntheticRelease(t, 5000)
	c, err := Check(mustLoad(t, fsys, ""), s)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range c.Pairs {
		if p.MaxDeviation != 0 {
			t.Errorf("%+v", p)
		}
	}
	if len(c.Pairs) != 6 || len(c.Invariants[0].Tables) != 2 {
		t.Errorf("%d pairs, invariant %+v", len(c.Pairs), c.Invariants[0])
	}
}

// BenchmarkReport loads, checks and renders a release of about 10^4, 10^5
// and 10^6 cells (see syntheticRelease), with the schema: reading the
// tables, every pair of tables summed to their common margin, and the
// page.
func BenchmarkReport(b *testing.B) {
	for _, cells := range []int{1e4, 1e5, 1e6} {
		b.Run(fmt.Sprintf("cells=%d", cells), func(b *testing.B) {
			fsys, s := syntheticRelease(b, cells)
			b.ReportAllocs()
			for b.Loop() {
				rel, err := Load(fsys, "")
				if err != nil {
					b.Fatal(err)
				}
				if err := Render(io.Discard, rel, Options{Schema: s}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
