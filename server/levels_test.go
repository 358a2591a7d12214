package server

import (
	"encoding/json"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/domain"
)

// Queries and invariants at the levels of a hierarchy (issue 20 item 7):
// data/us-geo.schema.json has geo with levels region, division, state,
// place, crossed with sex and agegroup.

func usGeoSchema(t testing.TB) json.RawMessage {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "data", "us-geo.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// registerUSGeo registers the bundled US persons under id with an epsilon
// budget (or, with rho > 0, a rho budget) and the given invariants.
func (s *testServer) registerUSGeo(id string, eps, rho float64, invariants ...[]string) {
	s.t.Helper()
	req := DatasetRequest{
		ID: id, Schema: usGeoSchema(s.t),
		Source: Source{CSV: filepath.Join(repoRoot(s.t), "data", "us-persons.csv")},
		Policy: Policy{EpsilonPerAnalyst: eps, RhoPerAnalyst: rho, Invariants: invariants},
	}
	s.must(http.StatusCreated, "POST", "/admin/v1/datasets", s.admin, req, nil)
}

// levelTable is a released table at its levels, as the answer gives it.
type levelTable struct {
	Dimensions []string    `json:"dimensions"`
	Values     [][]string  `json:"values"`
	Counts     []float64   `json:"counts"`
	MOE90      float64     `json:"moe90"`
	MOE90s     []float64   `json:"moe90s"`
	Privacy    levelPolicy `json:"privacy"`
}

type levelPolicy struct {
	Mechanism string  `json:"mechanism"`
	Epsilon   float64 `json:"epsilon"`
	Rho       float64 `json:"rho"`
	Split     string  `json:"split"`
	Hierarchy string  `json:"hierarchy"`
	Levels    []struct {
		Level string `json:"level"`
	} `json:"levels"`
}

// geoHierarchy is the public schema of a dataset, as GET /v1/datasets/{id}
// gives it, with its invariants' counts.
type geoHierarchy struct {
	schema     *domain.Schema
	invariants []struct {
		Cuboid []string   `json:"cuboid"`
		Values [][]string `json:"values"`
		Counts []float64  `json:"counts"`
	}
}

func (s *testServer) hierarchyOf(id, key string) geoHierarchy {
	s.t.Helper()
	var view struct {
		Dimensions []domain.Dimension `json:"dimensions"`
	}
	s.must(http.StatusOK, "GET", "/v1/datasets/"+id, key, nil, &view)
	sc, err := domain.NewSchema(view.Dimensions)
	if err != nil {
		s.t.Fatalf("the published schema does not parse: %v", err)
	}
	var g geoHierarchy
	g.schema = sc
	var inv struct {
		Invariants json.RawMessage `json:"invariants"`
	}
	s.must(http.StatusOK, "GET", "/v1/datasets/"+id+"/invariants", key, nil, &inv)
	mustUnmarshal(s.t, inv.Invariants, &g.invariants)
	return g
}

// rollUp sums a table given at view from (by dimension names) into view to.
func (g geoHierarchy) rollUp(t testing.TB, from []string, counts []float64, to []string) []float64 {
	t.Helper()
	vf, err := g.schema.ViewOfNames(from...)
	if err != nil {
		t.Fatal(err)
	}
	vt, err := g.schema.ViewOfNames(to...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := g.schema.RollUp(vf, counts, vt)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func near(a, b []float64, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > tol*max(1, math.Abs(b[i])) {
			return false
		}
	}
	return true
}

// TestLevelsRegistration: a dataset with a hierarchical dimension and an
// invariant at a level is registered, publishes its levels, parents and
// the invariant labelled with the level's values, and is the same after a
// restart.
func TestLevelsRegistration(t *testing.T) {
	forEachStore(t, func(t *testing.T, cfg Config) {
		s := startServer(t, cfg)
		s.registerUSGeo("us", 2, 0, []string{"geo:state"})
		_, key := s.analyst("a")
		check := func(s *testServer) {
			t.Helper()
			var view datasetView
			s.must(http.StatusOK, "GET", "/v1/datasets/us", key, nil, &view)
			if view.Unavailable != "" {
				t.Fatalf("unavailable: %s", view.Unavailable)
			}
			geo := view.Dimensions[0]
			if !slices.Equal(geo.Levels, []string{"region", "division", "state", "place"}) || len(geo.Parents["state"]) != 842 || len(geo.Parents["region"]) != 9 {
				t.Fatalf("geo levels %v, %d state parents, %d region parents", geo.Levels, len(geo.Parents["state"]), len(geo.Parents["region"]))
			}
			if len(view.Invariants) != 1 || !slices.Equal(view.Invariants[0], []string{"geo:state"}) {
				t.Fatalf("invariants %v", view.Invariants)
			}
			if !strings.Contains(view.Neighbours, "{geo:state}") {
				t.Fatalf("neighbours %q", view.Neighbours)
			}
			g := s.hierarchyOf("us", key)
			inv := g.invariants
			if len(inv) != 1 || !slices.Equal(inv[0].Cuboid, []string{"geo:state"}) || len(inv[0].Values) != 1 || len(inv[0].Values[0]) != 50 || len(inv[0].Counts) != 50 {
				t.Fatalf("invariants %+v", inv)
			}
			var total float64
			for _, c := range inv[0].Counts {
				total += c
			}
			if total != 134935 {
				t.Fatalf("state totals add up to %v, want the 134935 rows", total)
			}
		}
		check(s)
		s.ts.Close()
		s.srv.Close()
		check(startServer(t, cfg))
	})
}

// TestLevelsCuboid: a Laplace and a Gaussian cuboid query at a level are
// charged their budget, labelled with the level's values, carry a margin
// of error per cell, and agree with the invariant at its level.
func TestLevelsCuboid(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerUSGeo("lap", 2, 0, []string{"geo:state"})
	s.registerUSGeo("gau", 0, 2, []string{"geo:state"})
	_, key := s.analyst("a")
	tests := []struct {
		name, dataset, query string
		cuboid               []string
		steps                int64
		integer              bool
	}{
		{"laplace division by sex", "lap", `{"kind":"cuboid","epsilon":0.5,"cuboid":["sex","geo:division"]}`,
			[]string{"geo:division", "sex"}, epsSteps(mustEps(t, 0.5)), false},
		{"laplace state by agegroup, integer", "lap", `{"kind":"cuboid","epsilon":0.5,"cuboid":["geo:state","agegroup"],"integer":true}`,
			[]string{"geo:state", "agegroup"}, epsSteps(mustEps(t, 0.5)), true},
		{"gaussian division by sex", "gau", `{"kind":"cuboid","mechanism":"gaussian","rho":0.5,"cuboid":["geo:division","sex"]}`,
			[]string{"geo:division", "sex"}, mustRho(t, 0.5).Steps(), false},
		{"gaussian places by sex under state totals", "gau", `{"kind":"cuboid","mechanism":"gaussian","rho":0.5,"cuboid":["geo","sex"]}`,
			[]string{"geo", "sex"}, mustRho(t, 0.5).Steps(), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := s.hierarchyOf(tc.dataset, key)
			st, r, raw := s.ask(tc.dataset, key, tc.query, "")
			if st != http.StatusCreated || r.Steps != tc.steps {
				t.Fatalf("status %d, charged %d steps (want %d): %s", st, r.Steps, tc.steps, raw)
			}
			var a levelTable
			mustUnmarshal(t, r.Answer, &a)
			if !slices.Equal(a.Dimensions, tc.cuboid) {
				t.Fatalf("dimensions %v, want %v", a.Dimensions, tc.cuboid)
			}
			v, _ := g.schema.ViewOfNames(tc.cuboid...)
			for k, i := range v.Dims.Dims() {
				if !slices.Equal(a.Values[k], g.schema.LevelValues(i, int(v.Up[i]))) {
					t.Fatalf("values of %s: %v", tc.cuboid[k], a.Values[k])
				}
			}
			if len(a.Counts) != g.schema.ViewSize(v) || len(a.MOE90s) != len(a.Counts) {
				t.Fatalf("%d counts, %d moe90s for a view of %d cells", len(a.Counts), len(a.MOE90s), g.schema.ViewSize(v))
			}
			for _, m := range a.MOE90s {
				if !(m > 0) || m > a.MOE90 {
					t.Fatalf("moe90 %v of a cell (largest %v)", m, a.MOE90)
				}
			}
			if a.Privacy.Hierarchy != "geo" || len(a.Privacy.Levels) == 0 {
				t.Fatalf("privacy: %+v", a.Privacy)
			}
			// The invariant at its level, and every coarser level, agree.
			for _, to := range [][]string{{"geo:state"}, {"geo:region"}, {}} {
				if vt, _ := g.schema.ViewOfNames(to...); !vt.RollUpOf(v) {
					continue
				}
				got := g.rollUp(t, tc.cuboid, a.Counts, to)
				want := g.rollUp(t, []string{"geo:state"}, g.invariants[0].Counts, to)
				if !near(got, want, 1e-9) {
					t.Fatalf("%v rolled up to %v: %v, want %v", tc.cuboid, to, got[:min(5, len(got))], want[:min(5, len(want))])
				}
			}
			if tc.integer {
				for _, c := range a.Counts {
					if c != math.Trunc(c) || c < 0 {
						t.Fatalf("integer answer has %v", c)
					}
				}
			}
		})
	}
}

// TestLevelsWorkload: a workload across levels under one budget gives
// tables that add up level by level and to the invariant; the optimal
// split is refused for views at coarser levels before anything is spent.
func TestLevelsWorkload(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerUSGeo("lap", 5, 0, []string{"geo:state"})
	s.registerUSGeo("gau", 0, 5, []string{"geo:state"})
	_, key := s.analyst("a")
	g := s.hierarchyOf("lap", key)
	cuboids := `[["geo:region"],["geo:division","sex"],["geo:state","sex"],["geo","sex","agegroup"]]`
	tests := []struct {
		name, dataset, query string
		split                string
		steps                int64
		tol                  float64
	}{
		{"laplace default", "lap", `{"kind":"cuboid","epsilon":1,"cuboids":` + cuboids + `}`, "optimal", epsSteps(mustEps(t, 1)), 1e-6},
		{"laplace equal integer", "lap", `{"kind":"cuboid","epsilon":1,"split":"equal","integer":true,"cuboids":` + cuboids + `}`, "equal", epsSteps(mustEps(t, 1)), 0},
		{"gaussian spine integer", "gau", `{"kind":"cuboid","mechanism":"gaussian","rho":1,"integer":true,"split":"spine","weights":[1,2,1,1],"cuboids":` + cuboids + `}`, "spine", mustRho(t, 1).Steps(), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, r, raw := s.ask(tc.dataset, key, tc.query, "")
			if st != http.StatusCreated || r.Steps != tc.steps {
				t.Fatalf("status %d, %d steps: %s", st, r.Steps, raw)
			}
			var a struct {
				Tables  []levelTable `json:"tables"`
				Privacy levelPolicy  `json:"privacy"`
			}
			mustUnmarshal(t, r.Answer, &a)
			if len(a.Tables) != 4 || a.Privacy.Split != tc.split || a.Privacy.Hierarchy != "geo" {
				t.Fatalf("%d tables, split %q, hierarchy %q", len(a.Tables), a.Privacy.Split, a.Privacy.Hierarchy)
			}
			// The region table is public: a roll-up of the state totals.
			want := g.rollUp(t, []string{"geo:state"}, g.invariants[0].Counts, []string{"geo:region"})
			if !slices.Equal(a.Tables[0].Counts, want) || a.Tables[0].MOE90 != 0 {
				t.Fatalf("regions %v (moe90 %v), want the exact %v", a.Tables[0].Counts, a.Tables[0].MOE90, want)
			}
			// Every finer table adds up to the coarser ones and to the
			// invariant.
			for _, p := range []struct{ fine, coarse int }{{1, 0}, {2, 1}, {3, 2}} {
				f, c := a.Tables[p.fine], a.Tables[p.coarse]
				got := g.rollUp(t, f.Dimensions, f.Counts, c.Dimensions)
				if !near(got, c.Counts, tc.tol) {
					t.Fatalf("%v does not add up to %v: %v vs %v", f.Dimensions, c.Dimensions, got[:4], c.Counts[:4])
				}
			}
			states := g.rollUp(t, a.Tables[2].Dimensions, a.Tables[2].Counts, []string{"geo:state"})
			if !near(states, g.invariants[0].Counts, max(tc.tol, 1e-9)) {
				t.Fatalf("states by sex do not add up to the state totals")
			}
		})
	}

	// The optimal split across the hierarchy, with its certificate.
	before := s.budgetOf("lap", key)
	st, raw := s.call("POST", "/v1/datasets/lap/queries", key, `{"kind":"cuboid","epsilon":0.5,"split":"optimal","cuboids":`+cuboids+`}`, nil, nil)
	if st != http.StatusCreated || !strings.Contains(string(raw), `"split_gap"`) || !strings.Contains(string(raw), `"split": "optimal"`) && !strings.Contains(string(raw), `"split":"optimal"`) {
		t.Fatalf("optimal split: %d %.300s", st, raw)
	}
	if after := s.budgetOf("lap", key); after.Spent-before.Spent > 0.5+1e-9 || after.Spent <= before.Spent {
		t.Fatalf("the optimal split spent %v of 0.5", after.Spent-before.Spent)
	}
}

// TestLevelsInvariantMakesFree: with state totals exact, queries for
// regions, divisions and the grand total are public (charged nothing and
// exact), even for an analyst whose budget is spent; a flat query at the
// finest level named as a level is the flat query.
func TestLevelsInvariantMakesFree(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerUSGeo("us", 1, 0, []string{"geo:state"})
	s.registerUSGeo("flat", 1, 0)
	_, key := s.analyst("a")
	g := s.hierarchyOf("us", key)
	if st, r, raw := s.ask("us", key, `{"kind":"cuboid","epsilon":1,"cuboid":["sex"]}`, ""); st != http.StatusCreated || r.Steps != epsSteps(mustEps(t, 1)) {
		t.Fatalf("spending the budget: %d %s", st, raw)
	}
	if b := s.budgetOf("us", key); b.Remaining > 0 {
		t.Fatalf("budget left: %+v", b)
	}
	for _, c := range [][]string{{"geo:region"}, {"geo:division"}, {"geo:state"}, {}} {
		for _, mech := range []string{`"epsilon":0.5`, `"epsilon":0.5,"integer":true`} {
			q := `{"kind":"cuboid",` + mech + `,"cuboid":` + mustJSON(t, c) + `}`
			st, r, raw := s.ask("us", key, q, "")
			if (st != http.StatusCreated && st != http.StatusOK) || r.Steps != 0 {
				t.Fatalf("%s: status %d, %d steps: %s", q, st, r.Steps, raw)
			}
			var a levelTable
			mustUnmarshal(t, r.Answer, &a)
			want := g.rollUp(t, []string{"geo:state"}, g.invariants[0].Counts, c)
			if !slices.Equal(a.Counts, want) || a.MOE90 != 0 {
				t.Fatalf("%v: %v (moe90 %v), want the exact %v", c, a.Counts, a.MOE90, want)
			}
		}
	}
	// "geo:place" is the finest level: the flat query, stored once.
	_, r1, raw := s.ask("flat", key, `{"kind":"cuboid","epsilon":0.5,"cuboid":["geo:place","sex"]}`, "")
	_, r2, _ := s.ask("flat", key, `{"kind":"cuboid","epsilon":0.5,"cuboid":["sex","geo"]}`, "")
	if r1.ID == "" || r2.ID != r1.ID || !r2.Repeat {
		t.Fatalf("geo:place and geo are not the same query: %s", raw)
	}
}

// TestLevelsBadInput: bad level names, fields that do not apply and
// case-variant or unknown fields are refused with a 400 naming them,
// before anything is spent.
func TestLevelsBadInput(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerUSGeo("us", 1, 0, []string{"geo:state"}, []string{"sex"})
	_, key := s.analyst("a")
	queries := []struct {
		name, query string
		want        []string
	}{
		{"unknown level", `{"kind":"cuboid","epsilon":0.1,"cuboid":["geo:county"]}`, []string{"cuboid", `"geo"`, `"county"`, "region, division, state, place"}},
		{"flat dimension at a level", `{"kind":"cuboid","epsilon":0.1,"cuboid":["sex:state"]}`, []string{"cuboid", `"sex"`, "no levels"}},
		{"unknown dimension", `{"kind":"cuboid","epsilon":0.1,"cuboid":["place:state"]}`, []string{"cuboid", `"place"`}},
		{"dimension twice", `{"kind":"cuboid","epsilon":0.1,"cuboid":["geo:state","geo:region"]}`, []string{"cuboid", `"geo"`, "twice"}},
		{"workload level", `{"kind":"cuboid","epsilon":0.1,"cuboids":[["geo:state"],["geo:stat","sex"]]}`, []string{"cuboids[1]", `"stat"`}},
		{"duplicate view", `{"kind":"cuboid","epsilon":0.1,"cuboids":[["geo:state","sex"],["sex","geo:state"]]}`, []string{"cuboids", "twice"}},
		{"integer views that cannot be rounded", `{"kind":"cuboid","epsilon":0.1,"integer":true,"cuboids":[["geo:region","agegroup"],["geo:state","sex"]]}`, []string{"integer", "cannot round", "region"}},
		{"unknown split", `{"kind":"cuboid","epsilon":0.1,"split":"tree","cuboids":[["geo:division"]]}`, []string{"split", "tree"}},
		{"refine", `{"kind":"linear","epsilon":0.1,"refine":true,"queries":[{"terms":[{"where":{"sex":["F"]}}]}]}`, []string{"refine", "coarser levels"}},
		{"case variant", `{"kind":"cuboid","epsilon":0.1,"Cuboid":["geo:state"]}`, []string{"Cuboid", "case-sensitive"}},
		{"unknown field", `{"kind":"cuboid","epsilon":0.1,"cuboid":["geo:state"],"level":"state"}`, []string{"unknown field", "level"}},
	}
	for _, tc := range queries {
		t.Run(tc.name, func(t *testing.T) {
			st, raw := s.call("POST", "/v1/datasets/us/queries", key, tc.query, nil, nil)
			msg := errMsg(raw)
			if st != http.StatusBadRequest {
				t.Fatalf("status %d: %s", st, raw)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Fatalf("error %q does not name %q", msg, w)
				}
			}
		})
	}
	if b := s.budgetOf("us", key); b.Spent != 0 {
		t.Fatalf("refused queries spent %v", b.Spent)
	}

	const small = `{"dimensions":[{"name":"geo","levels":["state","county"],"values":["c1","c2","c3"],"parents":{"state":{"c1":"s1","c2":"s1","c3":"s2"}}},{"name":"sex","values":["F","M"]}]}`
	dir := t.TempDir()
	csv := filepath.Join(dir, "small.csv")
	if err := os.WriteFile(csv, []byte("geo,sex\nc1,F\nc2,M\nc3,F\nc3,M\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	register := func(schema string, invariants string) (int, string) {
		body := `{"id":"small","schema":` + schema + `,"source":{"csv":` + mustJSON(t, csv) + `},"policy":{"epsilon_per_analyst":1,"invariants":` + invariants + `}}`
		st, raw := s.call("POST", "/admin/v1/datasets", s.admin, body, nil, nil)
		return st, errMsg(raw)
	}
	regs := []struct {
		name, schema, invariants string
		want                     []string
	}{
		{"invariant at an unknown level", small, `[["geo:town"]]`, []string{"policy.invariants[0]", `"geo"`, `"town"`}},
		{"invariant level of a flat dimension", small, `[["sex:state"]]`, []string{"policy.invariants[0]", `"sex"`}},
		{"case-variant levels", strings.Replace(small, `"levels"`, `"Levels"`, 1), `[]`, []string{"Levels", "case-sensitive"}},
		{"unknown field in a dimension", strings.Replace(small, `"parents"`, `"parent"`, 1), `[]`, []string{"unknown field", "parent"}},
		{"parents given twice in different case", strings.Replace(small, `"c2":"s1"`, `"c2":"s1","C1":"s2"`, 1), `[]`, []string{"C1"}},
		{"value without a parent", strings.Replace(small, `,"c3":"s2"`, ``, 1), `[]`, []string{`"c3"`, "no parent"}},
	}
	for _, tc := range regs {
		t.Run(tc.name, func(t *testing.T) {
			st, msg := register(tc.schema, tc.invariants)
			if st != http.StatusBadRequest {
				t.Fatalf("status %d: %s", st, msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Fatalf("error %q does not name %q", msg, w)
				}
			}
		})
	}
	if st, msg := register(small, `[["geo:state"]]`); st != http.StatusCreated {
		t.Fatalf("the small hierarchy: %d %s", st, msg)
	}
}

func mustJSON(t testing.TB, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestLevelsErrorsIndependentOfData sends the same queries at levels to
// two datasets with the same schema and policy but different rows: every
// status and message (and every charge) is the same.
func TestLevelsErrorsIndependentOfData(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerUSGeo("full", 1, 0, []string{"geo:state"})
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "data", "us-persons.csv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	part := filepath.Join(t.TempDir(), "part.csv")
	if err := os.WriteFile(part, []byte(strings.Join(lines[:500], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	req := DatasetRequest{ID: "part", Schema: usGeoSchema(t), Source: Source{CSV: part}, Policy: Policy{EpsilonPerAnalyst: 1, Invariants: [][]string{{"geo:state"}}}}
	s.must(http.StatusCreated, "POST", "/admin/v1/datasets", s.admin, req, nil)
	_, key := s.analyst("e")
	bodies := []string{
		`{"kind":"cuboid","epsilon":0.5,"cuboid":["geo:division","sex"]}`,
		`{"kind":"cuboid","epsilon":0.5,"split":"optimal","cuboids":[["geo:division"],["geo:state","sex"]]}`,
		`{"kind":"cuboid","epsilon":0.4,"integer":true,"cuboids":[["geo:division","sex"],["geo","agegroup"]]}`,
		`{"kind":"cuboid","epsilon":0.1,"integer":true,"cuboids":[["geo:region","agegroup"],["geo:state","sex"]]}`,
		`{"kind":"cuboid","epsilon":1e-9,"cuboid":["geo:division","sex"]}`, // too small for the noise
		`{"kind":"cuboid","epsilon":1e-9,"cuboid":["geo:division"]}`,       // public: free
		`{"kind":"cuboid","epsilon":0.5,"cuboid":["geo:region"]}`,
		`{"kind":"cuboid","epsilon":0.5,"cuboid":["geo","sex"]}`, // over budget now
		`{"kind":"cuboid","epsilon":0.1,"cuboid":["geo:county"]}`,
	}
	for _, body := range bodies {
		var got [2]string
		for i, ds := range []string{"full", "part"} {
			st, r, raw := s.ask(ds, key, body, "")
			if st == http.StatusCreated {
				got[i] = "answered, charged " + mustJSON(t, r.Steps)
				continue
			}
			got[i] = http.StatusText(st) + ": " + errMsg(raw)
		}
		t.Logf("%s -> %s", body, got[0])
		if got[0] != got[1] {
			t.Errorf("%s:\n full: %s\n part: %s", body, got[0], got[1])
		}
	}
}
