package server

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/metricdp"
)

// TestDXReduction checks that running the d_X mechanism on the cuboid of the
// dimensions the queries name is exact for the attribute metric: the
// single-query scale equals the one computed on the whole base universe, and
// the scales chosen on the cuboid pass metricdp's per-pair check on the
// whole universe.
func TestDXReduction(t *testing.T) {
	schema, err := domain.NewSchema([]domain.Dimension{
		{Name: "a", Values: []string{"x", "y", "z"}},
		{Name: "b", Values: []string{"0", "1"}},
		{Name: "c", Values: []string{"p", "q"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	d := &dataset{schema: schema, policy: Policy{EpsilonPerAnalyst: 1, Invariants: [][]string{{}},
		Metric: &MetricPolicy{Default: 0.7, Dimensions: map[string]DimensionBudgets{
			"a": {Values: map[string]float64{"x": 0.2, "z": 1.5}},
			"c": {Default: 0.4},
		}}}}
	if err := d.applyPolicy(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	all := domain.Base(3)
	attrs, _ := d.attributes(all, 1)
	full, err := metricdp.NewAttributeMetric(attrs, metricdp.FullProduct(attrs))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		queries []LinearQuery
	}{
		{"one dimension", []LinearQuery{countQuery(1, map[string][]string{"a": {"x"}})}},
		{"two dimensions", []LinearQuery{
			countQuery(2, map[string][]string{"a": {"x", "y"}, "b": {"1"}}),
			countQuery(-1, map[string][]string{"b": {"0"}}),
		}},
		{"skipping one", []LinearQuery{
			countQuery(1, map[string][]string{"a": {"z"}, "c": {"q"}}),
			countQuery(3, map[string][]string{"c": {"p"}}),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fullRows, err := expandQueries(schema, tc.queries, "q")
			if err != nil {
				t.Fatal(err)
			}
			var T domain.Cuboid
			for _, q := range tc.queries {
				for _, term := range q.Terms {
					for n := range term.Where {
						i, _ := schema.Lookup(n)
						T |= 1 << i
					}
				}
			}
			sub, _ := d.subSchema(T)
			subRows, _ := expandQueries(sub, tc.queries, "q")
			tattrs, _ := d.attributes(T, 1)
			tm, err := metricdp.NewAttributeMetric(tattrs, metricdp.FullProduct(tattrs))
			if err != nil {
				t.Fatal(err)
			}
			Ff, Ft := dense(fullRows, schema.Cells()), dense(subRows, sub.Cells())
			for l := range Ff {
				sf, err := metricdp.Scale(ctx, full, Ff[l])
				if err != nil {
					t.Fatal(err)
				}
				st, err := metricdp.Scale(ctx, tm, Ft[l])
				if err != nil {
					t.Fatal(err)
				}
				if math.Abs(sf-st) > 1e-12*sf {
					t.Fatalf("query %d: scale %v on the base universe, %v on the cuboid", l, sf, st)
				}
			}
			qt, _ := metricdp.NewQueries(Ft)
			lm, err := metricdp.NewLaplace(ctx, tm, qt, metricdp.Optimal, 10)
			if err != nil {
				t.Fatal(err)
			}
			qf, _ := metricdp.NewQueries(Ff)
			if _, err := metricdp.NewLaplaceScales(ctx, full, qf, lm.Scales(), 10); err != nil {
				t.Fatalf("the cuboid's scales fail on the base universe: %v", err)
			}
		})
	}
}

func dense(rows []sparseRow, n int) [][]float64 {
	out := make([][]float64, len(rows))
	for l, r := range rows {
		out[l] = make([]float64, n)
		for i, c := range r.cells {
			out[l][c] = float64(r.coefs[i])
		}
	}
	return out
}

// TestDXAndPrior asks d_X and prior-refinement queries through the API.
func TestDXAndPrior(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	req := DatasetRequest{
		ID: "arrests", Schema: arrestsSchema(t),
		Source: Source{CSV: filepath.Join(repoRoot(t), "data", "arrests.csv")},
		Policy: Policy{EpsilonPerAnalyst: 2, Invariants: [][]string{{"year"}},
			Metric: &MetricPolicy{Default: 1, Dimensions: map[string]DimensionBudgets{
				"agegroup": {Default: 0.5}, "sex": {Values: map[string]float64{"Female": 0.2}}}}},
	}
	s.must(http.StatusCreated, "POST", "/admin/v1/datasets", s.admin, req, nil)
	_, key := s.analyst("d")
	var view datasetView
	s.must(http.StatusOK, "GET", "/v1/datasets/arrests", key, nil, &view)
	if len(view.QueryKinds) != 4 {
		t.Fatalf("query kinds %v", view.QueryKinds)
	}

	dx := map[string]any{"kind": "dx", "epsilon": 0.5, "strategy": "optimal", "queries": []LinearQuery{
		countQuery(1, map[string][]string{"colour": {"Black"}, "sex": {"Female"}}),
		countQuery(1, map[string][]string{"sex": {"Male"}, "agegroup": {"45+"}}),
	}}
	st, r, raw := s.ask("arrests", key, dx, "")
	if st != http.StatusCreated || r.Steps != steps(0.5) {
		t.Fatalf("dx: %d %s", st, raw)
	}
	var da dxAnswer
	mustUnmarshal(t, r.Answer, &da)
	if len(da.Answers) != 2 || len(da.Privacy.Scales) != 2 || da.Privacy.Scales[0] <= 0 || da.Privacy.BaselineScale <= 0 ||
		len(da.Privacy.Universe) != 3 || da.Privacy.Universe[2] != "agegroup" {
		t.Fatalf("dx answer %+v", da)
	}
	if st, r2, _ := s.ask("arrests", key, dx, ""); st != http.StatusOK || !bytes.Equal(r2.Answer, r.Answer) {
		t.Fatalf("dx repeat: %d", st)
	}
	if st, _, raw := s.ask("arrests", key, map[string]any{"kind": "dx", "epsilon": 0.5, "queries": []LinearQuery{countQuery(1, nil)}}, ""); st != http.StatusBadRequest {
		t.Fatalf("dx on the total: %d %s", st, raw)
	}

	pq := map[string]any{"kind": "prior", "epsilon": 0.5, "fraction": true,
		"query": countQuery(1, map[string][]string{"released": {"Yes"}}),
		"prior": map[string]any{"pieces": []map[string]float64{{"lo": 0, "hi": 1, "density": 1}}}}
	st, r, raw = s.ask("arrests", key, pq, "")
	if st != http.StatusCreated || r.Steps != steps(0.5) {
		t.Fatalf("prior: %d %s", st, raw)
	}
	var pa priorAnswer
	mustUnmarshal(t, r.Answer, &pa)
	if !(pa.Answer >= 0 && pa.Answer <= 1) || math.Abs(math.Log(pa.Privacy.AlphaU/pa.Privacy.AlphaD)-0.5) > 1e-9 {
		t.Fatalf("prior answer %+v", pa)
	}
	// The same prior written with other spacing is the same query.
	pq["prior"] = map[string]any{"pieces": []map[string]float64{{"density": 1, "hi": 1, "lo": 0}}}
	if st, r2, _ := s.ask("arrests", key, pq, ""); st != http.StatusOK || !bytes.Equal(r2.Answer, r.Answer) {
		t.Fatalf("prior repeat: %d", st)
	}
	// A discrete prior on counts.
	pq = map[string]any{"kind": "prior", "epsilon": 0.5,
		"query": countQuery(1, map[string][]string{"year": {"2002"}, "colour": {"Black"}}),
		"prior": map[string]any{"values": []float64{50, 100, 150}, "probabilities": []float64{0.3, 0.4, 0.3}}}
	st, r, raw = s.ask("arrests", key, pq, "")
	mustUnmarshal(t, r.Answer, &pa)
	if st != http.StatusCreated || (pa.Answer != 50 && pa.Answer != 100 && pa.Answer != 150) {
		t.Fatalf("discrete prior: %d %s", st, raw)
	}
	if b := s.budgetOf("arrests", key); b.SpentSteps != 3*steps(0.5) {
		t.Fatalf("spent %d steps, want %d", b.SpentSteps, 3*steps(0.5))
	}
}

// TestCuboidIntegerAndMOE: a cuboid query may ask for integer counts; the
// answer keeps the invariant exactly and carries the margin of error.
func TestCuboidIntegerAndMOE(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerArrests("arrests", 4, []string{"year"})
	_, key := s.analyst("i")
	st, r, raw := s.ask("arrests", key, `{"kind":"cuboid","epsilon":0.5,"cuboid":["year","sex"],"integer":true}`, "")
	if st != http.StatusCreated {
		t.Fatalf("%d %s", st, raw)
	}
	var ans struct {
		Counts  []float64
		MOE90   float64 `json:"moe90"`
		Privacy struct {
			Tables []struct {
				Integer      bool `json:"integer"`
				IntegerExact bool `json:"integer_exact"`
			} `json:"tables"`
		}
	}
	if err := json.Unmarshal(r.Answer, &ans); err != nil {
		t.Fatal(err)
	}
	if len(ans.Privacy.Tables) != 1 || !ans.Privacy.Tables[0].Integer || !ans.Privacy.Tables[0].IntegerExact || ans.MOE90 <= 1 {
		t.Errorf("answer %s", r.Answer)
	}
	for _, v := range ans.Counts {
		if v < 0 || v != math.Round(v) {
			t.Fatalf("count %v is not a non-negative integer", v)
		}
	}
	if st, _, raw := s.ask("arrests", key, `{"kind":"cuboid","epsilon":0.5,"cuboid":["sex"],"integer":true,"nonneg":true}`, ""); st != http.StatusBadRequest || !strings.Contains(string(raw), "exclude each other") {
		t.Errorf("nonneg and integer: %d %s", st, raw)
	}
}

// TestCuboidWorkload: several cuboids under one epsilon, consistent with
// each other and the invariant, charged epsilon once; public-only workloads
// are free; bad workloads are refused from the request alone.
func TestCuboidWorkload(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerArrests("arrests", 4, []string{"year"})
	_, key := s.analyst("w")
	q := `{"kind":"cuboid","epsilon":1,"cuboids":[["year","sex"],["year","released"],["year"]],"weights":[1,2,1],"integer":true}`
	st, r, raw := s.ask("arrests", key, q, "")
	if st != http.StatusCreated {
		t.Fatalf("%d %s", st, raw)
	}
	var ans struct {
		Tables []struct {
			Dimensions []string
			Counts     []float64
			MOE90      float64
		}
		Privacy struct{ Epsilon float64 }
	}
	if err := json.Unmarshal(r.Answer, &ans); err != nil {
		t.Fatal(err)
	}
	if len(ans.Tables) != 3 || ans.Privacy.Epsilon > 1 || stepsEpsilon(r.Steps) != 1 {
		t.Fatalf("answer %s, charged %d steps", r.Answer, r.Steps)
	}
	// year x sex and year x released agree with the invariant {year}
	// (table 3, public) on every year.
	years := ans.Tables[2].Counts
	for y := range years {
		ys := ans.Tables[0].Counts[2*y] + ans.Tables[0].Counts[2*y+1]
		yr := ans.Tables[1].Counts[2*y] + ans.Tables[1].Counts[2*y+1]
		if ys != years[y] || yr != years[y] {
			t.Errorf("year %d: %v and %v, invariant %v", y, ys, yr, years[y])
		}
	}
	if ans.Tables[0].MOE90 <= 1 || ans.Tables[2].MOE90 != 0 {
		t.Errorf("moe90 %v (measured), %v (public)", ans.Tables[0].MOE90, ans.Tables[2].MOE90)
	}
	// The same workload again is free; a public-only one costs nothing.
	if st, r, _ := s.ask("arrests", key, q, ""); st != http.StatusOK || !r.Repeat {
		t.Errorf("repeat: %d %+v", st, r)
	}
	if st, r, raw := s.ask("arrests", key, `{"kind":"cuboid","epsilon":0.5,"cuboids":[["year"],[]]}`, ""); st != http.StatusCreated || r.Steps != 0 {
		t.Errorf("public workload: %d, %d steps, %s", st, r.Steps, raw)
	}
	for _, bad := range []struct{ q, want string }{
		{`{"kind":"cuboid","epsilon":1,"cuboids":[["year"],["age"]]}`, "cuboids[1]"},
		{`{"kind":"cuboid","epsilon":1,"cuboids":[["sex"]],"weights":[1,2]}`, "2 weights for 1 cuboids"},
		{`{"kind":"cuboid","epsilon":1,"cuboids":[["sex"]],"weights":[-1]}`, "weight"},
		{`{"kind":"cuboid","epsilon":1,"cuboids":[["sex"]],"split":"best"}`, "split"},
		{`{"kind":"cuboid","epsilon":1,"cuboid":["sex"],"split":"equal"}`, "apply to several tables"},
	} {
		if st, _, raw := s.ask("arrests", key, bad.q, ""); st != http.StatusBadRequest || !strings.Contains(string(raw), bad.want) {
			t.Errorf("%s: %d %s, want 400 with %q", bad.q, st, raw, bad.want)
		}
	}
}
