package server

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/golden from the current code (only for a change explained in its commit)")

// TestGoldenAnswers keeps, as fixtures recorded before the release paths
// were unified, every number of a set of answers that does not depend on
// the noise (margins of error, variances, charges, sensitivities, shares):
// the server's answers may move only where a change explains it.
func TestGoldenAnswers(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerArrests("arrests", 100, []string{"year"}, []string{"colour", "sex"})
	s.must(http.StatusCreated, "POST", "/admin/v1/datasets", s.admin, DatasetRequest{
		ID: "arrests-rho", Schema: arrestsSchema(t),
		Source: Source{CSV: filepath.Join(repoRoot(t), "data", "arrests.csv")},
		Policy: Policy{RhoPerAnalyst: 100, Invariants: [][]string{{"year"}}},
	}, nil)
	s.registerUSGeo("geo", 100, 0, []string{"geo:state"})
	s.registerUSGeo("geo-rho", 0, 100, []string{"geo:state"})
	_, key := s.analyst("golden")
	queries := []struct{ name, dataset, query string }{
		{"cuboid", "arrests", `{"kind":"cuboid","epsilon":1,"cuboid":["year","colour","released"]}`},
		{"workload", "arrests", `{"kind":"cuboid","epsilon":1,"cuboids":[["year","colour"],["sex","agegroup"],["year","released"]]}`},
		{"workload-gaussian", "arrests-rho", `{"kind":"cuboid","mechanism":"gaussian","rho":0.5,"cuboids":[["year","colour"],["sex","agegroup"],["year","checks"]]}`},
		{"views", "geo", `{"kind":"cuboid","epsilon":1,"cuboids":[["geo:region"],["geo:division","sex"],["geo:state","sex"],["geo","sex"]]}`},
		{"views-optimal", "geo", `{"kind":"cuboid","epsilon":1,"split":"optimal","cuboids":[["geo:division","sex"],["geo:state","sex"],["geo","sex"]]}`},
		{"views-gaussian", "geo-rho", `{"kind":"cuboid","mechanism":"gaussian","rho":1,"cuboids":[["geo:division","sex"],["geo:state","agegroup"],["geo","sex"]]}`},
	}
	got := map[string]map[string]float64{}
	for _, q := range queries {
		st, r, raw := s.ask(q.dataset, key, q.query, "")
		if st != http.StatusCreated {
			t.Fatalf("%s: status %d: %s", q.name, st, raw)
		}
		var v any
		if err := json.Unmarshal(r.Answer, &v); err != nil {
			t.Fatal(err)
		}
		nums := map[string]float64{"charged_steps": float64(r.Steps)}
		answerNumbers("", v, nums)
		got[q.name] = nums
	}
	path := filepath.Join("testdata", "golden", "answers.json")
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
	var want map[string]map[string]float64
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	for name, w := range want {
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		bad := 0
		for _, k := range keys {
			g, ok := got[name][k]
			if !ok {
				continue // a field renamed or removed
			}
			if d := math.Abs(g - w[k]); d > 1e-9*math.Max(1, math.Abs(w[k])) {
				if bad++; bad <= 5 {
					t.Errorf("%s: %s = %v, want %v", name, k, g, w[k])
				}
			}
		}
		if bad > 5 {
			t.Errorf("%s: %d numbers differ", name, bad)
		}
	}
}

// answerNumbers records every number of an answer but its noisy counts,
// under its JSON path.
func answerNumbers(prefix string, v any, out map[string]float64) {
	switch x := v.(type) {
	case float64:
		out[prefix] = x
	case map[string]any:
		for k, y := range x {
			if k == "counts" || k == "count" {
				continue
			}
			answerNumbers(prefix+"/"+k, y, out)
		}
	case []any:
		for i, y := range x {
			key := strconv.Itoa(i)
			if m, ok := y.(map[string]any); ok {
				for _, f := range []string{"cuboid", "dimensions"} {
					if c, ok := m[f].([]any); ok {
						key = strings.Trim(fmt.Sprint(c), "[]")
					}
				}
			}
			answerNumbers(prefix+"/"+key, y, out)
		}
	}
}
