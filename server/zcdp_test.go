package server

import (
	"encoding/json"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/privacy"
)

// The ledger keeps rho in the same integer steps as epsilon.
func TestRhoStepIsEpsilonStep(t *testing.T) {
	if privacy.RhoStep != privacy.EpsilonStep {
		t.Fatalf("RhoStep %v != EpsilonStep %v: the ledger's steps would mean different amounts", privacy.RhoStep, privacy.EpsilonStep)
	}
}

// TestZCDPDataset: a dataset whose policy gives each analyst a rho budget
// answers Gaussian cuboid queries charged their rho and Laplace ones charged
// eps^2/2, refuses the pure-epsilon kinds, says "rho" in its budgets and
// errors, and keeps all of it across a restart.
func TestZCDPDataset(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, Config{DataDir: dir})
	req := DatasetRequest{
		ID: "z", Schema: arrestsSchema(t),
		Source: Source{CSV: filepath.Join(repoRoot(t), "data", "arrests.csv")},
		Policy: Policy{RhoPerAnalyst: 0.5, Invariants: [][]string{{"year"}}},
	}
	s.must(http.StatusCreated, "POST", "/admin/v1/datasets", s.admin, req, nil)
	s.registerArrests("e", 1, []string{"year"})
	_, key := s.analyst("z")

	st, r, raw := s.ask("z", key, `{"kind":"cuboid","mechanism":"gaussian","rho":0.1,"cuboid":["year","sex"],"integer":true}`, "")
	if st != http.StatusCreated || r.Unit != "rho" || r.Steps != mustRho(t, 0.1).Steps() {
		t.Fatalf("gaussian: %d unit %q steps %d: %s", st, r.Unit, r.Steps, raw)
	}
	var ans struct {
		Counts  []float64
		MOE90   float64 `json:"moe90"`
		Privacy struct {
			Mechanism    string  `json:"mechanism"`
			Rho          float64 `json:"rho"`
			Epsilon      float64 `json:"epsilon"`
			Delta        float64 `json:"delta"`
			Measurements []struct {
				L2Sensitivity float64 `json:"l2_sensitivity"`
				Sigma         float64 `json:"sigma"`
			} `json:"measurements"`
		}
	}
	if err := json.Unmarshal(r.Answer, &ans); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ans.Privacy.Mechanism, "Gaussian") || len(ans.Privacy.Measurements) != 1 || ans.Privacy.Measurements[0].L2Sensitivity != math.Sqrt2 ||
		ans.Privacy.Measurements[0].Sigma <= 0 || ans.Privacy.Delta != defaultGaussianDelta || ans.Privacy.Epsilon <= 0 || ans.MOE90 <= 1 {
		t.Errorf("answer %s", r.Answer)
	}
	for _, v := range ans.Counts {
		if v < 0 || v != math.Round(v) {
			t.Fatalf("count %v", v)
		}
	}
	// A Laplace cuboid at eps 0.5 costs 0.5^2/2 = 0.125 rho.
	st, r, raw = s.ask("z", key, `{"kind":"cuboid","epsilon":0.5,"cuboid":["sex"]}`, "")
	if st != http.StatusCreated || r.Steps != privacy.PureAsRho(mustEps(t, 0.5)).RhoSteps() || r.Charged != nil {
		t.Fatalf("laplace on rho: %d %d %s", st, r.Steps, raw)
	}
	if b := s.budgetOf("z", key); b.Unit != "rho" || math.Abs(b.Remaining-(0.5-0.1-0.125)) > 1e-9 {
		t.Errorf("budget %+v", b)
	}
	for _, bad := range []struct {
		ds, q, want string
	}{
		{"z", `{"kind":"linear","epsilon":0.1,"queries":[{"terms":[{}]}]}`, "zCDP (rho): only cuboid queries"},
		{"e", `{"kind":"cuboid","mechanism":"gaussian","rho":0.1,"cuboid":["sex"]}`, "budgets are in epsilon"},
		{"z", `{"kind":"cuboid","mechanism":"gaussian","rho":0.1,"epsilon":1,"cuboid":["sex"]}`, "leave epsilon out"},
		{"z", `{"kind":"cuboid","mechanism":"gaussian","rho":0.1,"cuboid":["sex"],"split":"equal"}`, "apply to several tables"},
		{"z", `{"kind":"cuboid","epsilon":0.1,"rho":0.1,"cuboid":["sex"]}`, "only for mechanism gaussian"},
		{"z", `{"kind":"cuboid","mechanism":"poisson","rho":0.1,"cuboid":["sex"]}`, "mechanism"},
		{"z", `{"kind":"cuboid","mechanism":"gaussian","rho":0.3,"cuboid":["agegroup"]}`, "needs rho"},
	} {
		st, _, raw := s.ask(bad.ds, key, bad.q, "")
		if st/100 != 4 || !strings.Contains(string(raw), bad.want) {
			t.Errorf("%s on %s: %d %s, want 4xx with %q", bad.q, bad.ds, st, raw, bad.want)
		}
	}
	// After a restart the dataset's budgets are still in rho.
	s.srv.Close()
	s2 := startServer(t, Config{DataDir: dir, AdminKey: s.admin})
	if b := s2.budgetOf("z", key); b.Unit != "rho" || math.Abs(b.Remaining-0.275) > 1e-9 {
		t.Errorf("after restart: %+v", b)
	}
	var v datasetView
	s2.must(http.StatusOK, "GET", "/v1/datasets/z", key, nil, &v)
	if v.RhoPerAnalyst != 0.5 || v.EpsilonPerAnalyst != 0 || strings.Join(v.QueryKinds, ",") != "cuboid" {
		t.Errorf("dataset view %+v", v)
	}
}

func mustRho(t *testing.T, x float64) privacy.Rho {
	t.Helper()
	r, err := privacy.NewRho(x)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustEps(t *testing.T, x float64) privacy.Epsilon {
	t.Helper()
	e, err := privacy.NewEpsilon(x)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
