package server

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/data"
)

// registerInstEval registers the bundled lecture evaluations with the
// student as privacy unit.
func (s *testServer) registerInstEval(id string, eps, rho float64, maxRows int, invariants ...[]string) {
	s.t.Helper()
	schema, err := os.ReadFile(filepath.Join(repoRoot(s.t), "data", "insteval.schema.json"))
	if err != nil {
		s.t.Fatal(err)
	}
	req := DatasetRequest{
		ID: id, Schema: schema, Source: Source{CSV: filepath.Join(repoRoot(s.t), "data", "insteval.csv")},
		Policy: Policy{EpsilonPerAnalyst: eps, RhoPerAnalyst: rho, Invariants: invariants, PrivacyUnit: &UnitPolicy{Column: "student", MaxRows: maxRows}},
	}
	s.must(http.StatusCreated, "POST", "/admin/v1/datasets", s.admin, req, nil)
}

// unitTableOf is one table of an answer.
type unitTableOf struct {
	Dimensions []string   `json:"dimensions"`
	Values     [][]string `json:"values"`
	Counts     []float64  `json:"counts"`
	MOE90      float64    `json:"moe90"`
}

// unitAnswerOf is an answer per unit as the client reads it: one table
// (its fields at the top) or several (tables).
type unitAnswerOf struct {
	unitTableOf
	Tables  []unitTableOf `json:"tables"`
	Privacy struct {
		Epsilon      float64 `json:"epsilon"`
		Neighbours   string  `json:"neighbours"`
		Measurements []struct {
			Sensitivity   int     `json:"sensitivity"`
			L2Sensitivity float64 `json:"l2_sensitivity"`
		} `json:"measurements"`
		PrivacyUnit *struct {
			Column  string `json:"column"`
			MaxRows int    `json:"max_rows"`
		} `json:"privacy_unit"`
		Private bool `json:"private"`
	} `json:"privacy"`
}

func instEvalTruth(t *testing.T, list string) []float64 {
	t.Helper()
	tab, s, err := data.InstEval()
	if err != nil {
		t.Fatal(err)
	}
	c, err := cube.Build(context.Background(), tab, s, cube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.ParseView(list)
	if err != nil {
		t.Fatal(err)
	}
	return c.Project(v.Dims)
}

func TestUnitDataset(t *testing.T) {
	forEachStore(t, func(t *testing.T, cfg Config) {
		s := startServer(t, cfg)
		s.registerInstEval("ie", 5, 0, 10, []string{"dept"})
		s.registerInstEval("ier", 0, 2, 4)
		_, key := s.analyst("a")

		// The invariants are the true counts of every rating.
		var inv struct {
			Invariants []struct {
				Counts []float64 `json:"counts"`
			} `json:"invariants"`
		}
		s.must(http.StatusOK, "GET", "/v1/datasets/ie/invariants", key, nil, &inv)
		if len(inv.Invariants) != 1 || !slices.Equal(inv.Invariants[0].Counts, instEvalTruth(t, "dept")) {
			t.Fatalf("invariants %v, want the true ratings per department", inv.Invariants)
		}
		for _, tc := range []struct {
			name, dataset, query string
			tables, sens         int
			l2                   float64
		}{
			{"one cuboid", "ie", `{"kind":"cuboid","epsilon":1,"cuboid":["dept","rating"]}`, 1, 20, 0},
			{"workload", "ie", `{"kind":"cuboid","epsilon":1,"cuboids":[["dept","rating"],["studage"]],"weights":[1,2]}`, 2, 0, 0},
			{"gaussian", "ier", `{"kind":"cuboid","mechanism":"gaussian","rho":0.5,"cuboid":["rating"]}`, 1, 0, 4},
		} {
			st, r, raw := s.ask(tc.dataset, key, tc.query, "")
			if st != http.StatusCreated {
				t.Fatalf("%s: status %d: %s", tc.name, st, raw)
			}
			var a unitAnswerOf
			if err := json.Unmarshal(r.Answer, &a); err != nil {
				t.Fatal(err)
			}
			if a.Tables == nil {
				a.Tables = []unitTableOf{a.unitTableOf}
			}
			pu := a.Privacy.PrivacyUnit
			if len(a.Tables) != tc.tables || pu == nil || pu.Column != "student" || !strings.Contains(a.Privacy.Neighbours, "privacy unit") || !a.Privacy.Private {
				t.Fatalf("%s: answer %s", tc.name, r.Answer)
			}
			m := a.Privacy.Measurements[0]
			switch {
			case tc.sens > 0 && m.Sensitivity != tc.sens:
				t.Errorf("%s: sensitivity %d, want %d (K times the row-level 2)", tc.name, m.Sensitivity, tc.sens)
			case tc.l2 > 0 && m.L2Sensitivity != tc.l2:
				t.Errorf("%s: L2 sensitivity %v, want %v", tc.name, m.L2Sensitivity, tc.l2)
			}
			for _, tab := range a.Tables {
				if len(tab.Values) != len(tab.Dimensions) || tab.MOE90 <= 0 {
					t.Errorf("%s: table %+v", tc.name, tab)
				}
			}
		}
		// A table the invariant determines: the true counts, free.
		st, r, raw := s.ask("ie", key, `{"kind":"cuboid","epsilon":1,"cuboid":["dept"]}`, "")
		var a unitAnswerOf
		if st != http.StatusCreated || json.Unmarshal(r.Answer, &a) != nil || r.Steps != 0 || !slices.Equal(a.Counts, instEvalTruth(t, "dept")) {
			t.Errorf("public table: status %d, charged %d: %s", st, r.Steps, raw)
		}
		// Per-row kinds are refused, from the policy.
		if st, _, raw := s.ask("ie", key, `{"kind":"linear","epsilon":1,"queries":[{"terms":[{"where":{"dept":["1"]}}]}]}`, ""); st != http.StatusBadRequest || !strings.Contains(string(raw), "per unit") {
			t.Errorf("linear query: status %d: %s", st, raw)
		}

		// A restarted server answers from the stored bounded counts.
		s.srv.Close()
		s2 := startServer(t, Config{DataDir: cfg.DataDir, Postgres: cfg.Postgres, AdminKey: s.admin})
		if st, r, raw := s2.ask("ie", key, `{"kind":"cuboid","epsilon":0.5,"cuboid":["rating"]}`, ""); st != http.StatusCreated || !strings.Contains(string(r.Answer), `"privacy_unit"`) {
			t.Errorf("after a restart: status %d: %s", st, raw)
		}
	})
}

func TestUnitDatasetRefusals(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	schema, err := os.ReadFile(filepath.Join(repoRoot(t), "data", "insteval.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	csv := Source{CSV: filepath.Join(repoRoot(t), "data", "insteval.csv")}
	for _, tc := range []struct {
		name string
		pol  Policy
		src  Source
		want string
	}{
		{"identifier column per row", Policy{EpsilonPerAnalyst: 1}, csv, `looks like it names who each row is about`},
		{"row level and unit", Policy{EpsilonPerAnalyst: 1, RowLevel: true, PrivacyUnit: &UnitPolicy{Column: "student", MaxRows: 3}}, csv, "exclude each other"},
		{"unit is a dimension", Policy{EpsilonPerAnalyst: 1, PrivacyUnit: &UnitPolicy{Column: "dept", MaxRows: 3}}, csv, "is a dimension"},
		{"no rows", Policy{EpsilonPerAnalyst: 1, PrivacyUnit: &UnitPolicy{Column: "student"}}, csv, "max_rows"},
		{"no column", Policy{EpsilonPerAnalyst: 1, PrivacyUnit: &UnitPolicy{Column: "pupil", MaxRows: 3}}, csv, "pupil"},
		{"sensitivity", Policy{EpsilonPerAnalyst: 1, Sensitivity: 4, PrivacyUnit: &UnitPolicy{Column: "student", MaxRows: 3}}, csv, "policy.sensitivity"},
		{"sql", Policy{EpsilonPerAnalyst: 1, PrivacyUnit: &UnitPolicy{Column: "student", MaxRows: 3}}, Source{SQL: &SQLSource{Driver: "sqlite", DSN: "x.db", Table: "t"}}, "csv source only"},
	} {
		req := DatasetRequest{ID: "x", Schema: schema, Source: tc.src, Policy: tc.pol}
		st, raw := s.call("POST", "/admin/v1/datasets", s.admin, req, nil, nil)
		if st != http.StatusBadRequest || !strings.Contains(string(raw), tc.want) {
			t.Errorf("%s: status %d: %s", tc.name, st, raw)
		}
	}
	// Per row when the curator says every row is a different person.
	req := DatasetRequest{ID: "perrow", Schema: schema, Source: csv, Policy: Policy{EpsilonPerAnalyst: 1, RowLevel: true}}
	s.must(http.StatusCreated, "POST", "/admin/v1/datasets", s.admin, req, nil)
}
