package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/server/store"
)

// auditOf returns the audit trail, oldest first, with optional filters in
// query ("analyst=...&dataset=...").
func (s *testServer) auditOf(query string) []store.AuditEvent {
	s.t.Helper()
	var out struct {
		Events []store.AuditEvent `json:"events"`
	}
	s.must(http.StatusOK, "GET", "/admin/v1/audit?limit=1000&"+query, s.admin, nil, &out)
	slices.Reverse(out.Events)
	return out.Events
}

// actions lists the audit events' actions.
func actions(evs []store.AuditEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Action)
	}
	return out
}

// budgetResponse is the answer to a budget change.
type budgetResponse struct {
	Budget budgetView       `json:"budget"`
	Event  store.AuditEvent `json:"event"`
}

// changeBudget sends a budget change and returns the status and response.
func (s *testServer) changeBudget(analyst, dataset string, change any) (int, budgetResponse, string) {
	s.t.Helper()
	var out budgetResponse
	st, raw := s.call("PATCH", "/admin/v1/analysts/"+analyst+"/budgets/"+dataset, s.admin, change, nil, nil)
	if st == http.StatusOK {
		mustUnmarshal(s.t, raw, &out)
	}
	return st, out, errMsg(raw)
}

// TestDatasetRetirement (issue 33): DELETE and PATCH on a dataset retire it
// and put it back in service. A retired dataset answers no new query (410),
// on this server and on another server sharing the store; its ledger, the
// analyst's answers and budget stay readable; its id is not reused; every
// change is in the audit trail with the admin key that made it.
func TestDatasetRetirement(t *testing.T) {
	forEachStore(t, func(t *testing.T, cfg Config) {
		cfg.AdminKey = GenerateKey()
		s := startServer(t, cfg)
		other := startServer(t, cfg) // a second server process on the same store
		s.registerArrests("arrests", 2, []string{"year"})
		_, key := s.analyst("alice")
		q := map[string]any{"kind": "cuboid", "epsilon": 0.5, "cuboid": []string{"sex"}}
		st, first, raw := s.ask("arrests", key, q, "")
		if st != http.StatusCreated {
			t.Fatalf("query: %d %s", st, raw)
		}
		// The other server has the dataset loaded (and cached) too.
		if st, _, raw := other.ask("arrests", key, map[string]any{"kind": "cuboid", "epsilon": 0.25, "cuboid": []string{"agegroup"}}, ""); st != http.StatusCreated {
			t.Fatalf("query on the other server: %d %s", st, raw)
		}

		var ds adminDatasetView
		s.must(http.StatusOK, "DELETE", "/admin/v1/datasets/arrests", s.admin, nil, &ds)
		if ds.Retired == nil {
			t.Fatalf("DELETE: retired_at not set: %+v", ds)
		}
		for _, srv := range []*testServer{s, other} {
			st, _, raw := srv.ask("arrests", key, map[string]any{"kind": "cuboid", "epsilon": 0.1, "cuboid": []string{"colour"}}, "")
			if st != http.StatusGone || !strings.Contains(errCode(raw), "dataset_retired") {
				t.Errorf("query on a retired dataset: %d %s", st, raw)
			}
		}
		// What the analyst has stays readable.
		var listed struct {
			Datasets []datasetView `json:"datasets"`
		}
		s.must(http.StatusOK, "GET", "/v1/datasets", key, nil, &listed)
		if len(listed.Datasets) != 1 || listed.Datasets[0].Retired == nil {
			t.Errorf("the analyst's list does not say the dataset is retired: %+v", listed.Datasets)
		}
		var mine struct {
			Queries []queryResponse `json:"queries"`
		}
		s.must(http.StatusOK, "GET", "/v1/datasets/arrests/queries", key, nil, &mine)
		if len(mine.Queries) != 2 {
			t.Errorf("the analyst sees %d answers on the retired dataset, want 2", len(mine.Queries))
		}
		s.must(http.StatusOK, "GET", "/v1/queries/"+first.ID, key, nil, nil)
		if b := s.budgetOf("arrests", key); b.SpentSteps != steps(0.75) {
			t.Errorf("budget after retirement: spent %d steps, want %d", b.SpentSteps, steps(0.75))
		}
		// An id is never reused.
		req := DatasetRequest{ID: "arrests", Schema: arrestsSchema(t), Source: Source{CSV: "arrests.csv"}, Policy: Policy{EpsilonPerAnalyst: 1}}
		s.must(http.StatusConflict, "POST", "/admin/v1/datasets", s.admin, req, nil)
		// Retiring twice changes and records nothing.
		s.must(http.StatusOK, "PATCH", "/admin/v1/datasets/arrests", s.admin, map[string]any{"retired": true}, nil)
		s.must(http.StatusBadRequest, "PATCH", "/admin/v1/datasets/arrests", s.admin, map[string]any{"note": "x"}, nil)
		s.must(http.StatusBadRequest, "PATCH", "/admin/v1/datasets/arrests", s.admin, map[string]any{"retired": false, "name": "x"}, nil)
		s.must(http.StatusNotFound, "PATCH", "/admin/v1/datasets/nothing", s.admin, map[string]any{"retired": true}, nil)
		s.must(http.StatusNotFound, "DELETE", "/admin/v1/datasets/nothing", s.admin, nil, nil)
		s.must(http.StatusForbidden, "DELETE", "/admin/v1/datasets/arrests", key, nil, nil)

		// Back in service, on both servers, with its budget as it was.
		var back adminDatasetView
		s.must(http.StatusOK, "PATCH", "/admin/v1/datasets/arrests", s.admin, map[string]any{"retired": false, "note": "the survey was re-weighted"}, &back)
		if back.Retired != nil {
			t.Fatalf("reinstated dataset still retired: %+v", ds)
		}
		if st, r, raw := other.ask("arrests", key, map[string]any{"kind": "cuboid", "epsilon": 0.5, "cuboid": []string{"colour"}}, ""); st != http.StatusCreated || r.Budget.SpentSteps != steps(1.25) {
			t.Errorf("query after reinstatement: %d %s", st, raw)
		}
		if n := len(s.ledger("", "arrests")); n != 3 {
			t.Errorf("the ledger holds %d answers, want 3", n)
		}

		adminID, _ := store.KeyID(s.admin)
		evs := s.auditOf("dataset=arrests")
		if got, want := actions(evs), []string{"dataset.registered", "dataset.retired", "dataset.reinstated"}; !slices.Equal(got, want) {
			t.Fatalf("audit trail of the dataset: %v, want %v", got, want)
		}
		for _, e := range evs {
			if e.Actor != adminID || e.Dataset != "arrests" {
				t.Errorf("audit record %+v: want actor %s on dataset arrests", e, adminID)
			}
		}
		if !strings.Contains(string(evs[2].Details), "re-weighted") {
			t.Errorf("the reinstatement's note is not recorded: %s", evs[2].Details)
		}
	})
}

// errCode returns the error code of an error response.
func errCode(raw []byte) string {
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	json.Unmarshal(raw, &e)
	return e.Error.Code
}

// TestBudgetChange (issue 33): an operator tops up, cuts and sets an
// analyst's budget, in the dataset's unit or in exact steps; the accounting
// stays exact (integer steps), a budget cannot go below what was spent,
// and each change is in the audit trail with its totals before and after.
func TestBudgetChange(t *testing.T) {
	forEachStore(t, func(t *testing.T, cfg Config) {
		s := startServer(t, cfg)
		s.registerArrests("arrests", 1, []string{"year"})
		alice, key := s.analyst("alice")
		if st, _, raw := s.ask("arrests", key, map[string]any{"kind": "cuboid", "epsilon": 0.5, "cuboid": []string{"sex"}}, ""); st != http.StatusCreated {
			t.Fatalf("query: %d %s", st, raw)
		}
		unit := int64(1) << 40
		st, r, msg := s.changeBudget(alice, "arrests", map[string]any{"add": 0.25, "note": "grant 7"})
		if st != http.StatusOK || r.Budget.TotalSteps != unit+unit/4 || r.Budget.SpentSteps != unit/2 || r.Budget.RemainingSteps != unit*3/4 || r.Budget.Unit != "epsilon" {
			t.Fatalf("add 0.25: %d %+v %s", st, r, msg)
		}
		if r.Event.Action != "budget.changed" || r.Event.Analyst != alice || r.Event.Dataset != "arrests" {
			t.Errorf("the change's audit record: %+v", r.Event)
		}
		var det struct {
			Before int64  `json:"total_before_steps"`
			After  int64  `json:"total_after_steps"`
			Spent  int64  `json:"spent_steps"`
			Note   string `json:"note"`
		}
		mustUnmarshal(t, r.Event.Details, &det)
		if det.Before != unit || det.After != unit+unit/4 || det.Spent != unit/2 || det.Note != "grant 7" {
			t.Errorf("the change's details: %s", r.Event.Details)
		}
		if b := s.budgetOf("arrests", key); b.TotalSteps != unit+unit/4 {
			t.Errorf("the analyst sees a total of %d steps, want %d", b.TotalSteps, unit+unit/4)
		}

		// Refusals change nothing.
		for _, tc := range []struct {
			change any
			want   string
		}{
			{map[string]any{"total": 0.4}, "below what the analyst has spent"},
			{map[string]any{"add": -1}, "below what the analyst has spent"},
			{map[string]any{"total_steps": unit/2 - 1}, "below what the analyst has spent"},
			{map[string]any{"total": 5000}, "not a epsilon within"},
			{map[string]any{"total_steps": privacy.MaxEpsilon<<40 + 1}, "above the largest budget"},
			{map[string]any{"add": 0.25, "total": 2}, "exactly one of"},
			{map[string]any{}, "exactly one of"},
			{map[string]any{"add": 0}, "changes nothing"},
			{map[string]any{"add_steps": 0}, "add_steps"},
			{map[string]any{"add_steps": 1.5}, "request body"},
			{map[string]any{"add": 1, "note": "a\nb"}, "note"},
			{map[string]any{"Add": 1}, "Add"},
		} {
			st, _, msg := s.changeBudget(alice, "arrests", tc.change)
			if st != http.StatusBadRequest || !strings.Contains(msg, tc.want) {
				t.Errorf("%v: %d %q, want 400 saying %q", tc.change, st, msg, tc.want)
			}
		}
		if st, _, _ := s.changeBudget("a_nobody", "arrests", map[string]any{"add": 1}); st != http.StatusNotFound {
			t.Errorf("unknown analyst: %d", st)
		}
		if st, _, _ := s.changeBudget(alice, "nothing", map[string]any{"add": 1}); st != http.StatusNotFound {
			t.Errorf("unknown dataset: %d", st)
		}
		if b := s.budgetOf("arrests", key); b.TotalSteps != unit+unit/4 || b.SpentSteps != unit/2 {
			t.Fatalf("refused changes changed the budget: %+v", b)
		}

		// Down to exactly what was spent: nothing left, and a query is refused.
		if st, r, msg := s.changeBudget(alice, "arrests", map[string]any{"total_steps": unit / 2}); st != http.StatusOK || r.Budget.RemainingSteps != 0 {
			t.Fatalf("total = spent: %d %+v %s", st, r, msg)
		}
		q := map[string]any{"kind": "cuboid", "epsilon": 0.125, "cuboid": []string{"agegroup"}}
		if st, _, raw := s.ask("arrests", key, q, ""); st != http.StatusForbidden {
			t.Fatalf("query with nothing left: %d %s", st, raw)
		}
		if st, _, msg := s.changeBudget(alice, "arrests", map[string]any{"add_steps": unit / 8}); st != http.StatusOK {
			t.Fatalf("add_steps: %d %s", st, msg)
		}
		if st, r, raw := s.ask("arrests", key, q, ""); st != http.StatusCreated || r.Budget.RemainingSteps != 0 || r.Budget.SpentSteps != unit/2+unit/8 {
			t.Fatalf("query after the top-up: %d %s", st, raw)
		}

		// An analyst who never asked: the budget is created from the
		// dataset's default.
		bob, bobKey := s.analyst("bob")
		if st, r, msg := s.changeBudget(bob, "arrests", map[string]any{"add": 1}); st != http.StatusOK || r.Budget.TotalSteps != 2*unit || r.Budget.SpentSteps != 0 {
			t.Fatalf("bob's top-up: %d %+v %s", st, r, msg)
		}
		if b := s.budgetOf("arrests", bobKey); b.TotalSteps != 2*unit {
			t.Errorf("bob sees %d steps, want %d", b.TotalSteps, 2*unit)
		}

		// A zCDP dataset's budget is rho.
		rhoReq := DatasetRequest{ID: "rho", Schema: arrestsSchema(t), Source: Source{CSV: "arrests.csv"}, Policy: Policy{RhoPerAnalyst: 0.5}}
		s.must(http.StatusCreated, "POST", "/admin/v1/datasets", s.admin, rhoReq, nil)
		if st, r, msg := s.changeBudget(alice, "rho", map[string]any{"total": 1.5}); st != http.StatusOK || r.Budget.Unit != "rho" || r.Budget.TotalSteps != 3*unit/2 {
			t.Fatalf("rho budget: %d %+v %s", st, r, msg)
		}

		// The totals the trail records chain exactly: each change starts
		// where the previous one ended.
		evs := s.auditOf("analyst=" + alice + "&dataset=arrests")
		prev := unit
		for _, e := range evs {
			if e.Action != "budget.changed" {
				continue
			}
			mustUnmarshal(t, e.Details, &det)
			if det.Before != prev {
				t.Errorf("change %d starts at %d steps, the previous ended at %d", e.Seq, det.Before, prev)
			}
			prev = det.After
		}
		if b := s.budgetOf("arrests", key); b.TotalSteps != prev {
			t.Errorf("the budget's total %d is not the last change's %d", b.TotalSteps, prev)
		}
	})
}

// TestBudgetChangeConcurrent: top-ups and charges committed at the same time
// are all counted, exactly: the total is the default plus every top-up, the
// spent amount the sum of the ledger's charges, never above the total.
func TestBudgetChangeConcurrent(t *testing.T) {
	forEachStore(t, func(t *testing.T, cfg Config) {
		cfg.RateLimit = 0
		s := startServer(t, cfg)
		s.registerArrests("arrests", 0.25)
		alice, key := s.analyst("alice")
		const n = 16
		step := int64(1) << 36 // 1/16
		var wg sync.WaitGroup
		codes := make(chan int, 2*n)
		for i := range n {
			wg.Add(2)
			go func() {
				defer wg.Done()
				st, _, _ := s.changeBudget(alice, "arrests", map[string]any{"add_steps": step})
				codes <- st
			}()
			go func() {
				defer wg.Done()
				q := map[string]any{"kind": "cuboid", "epsilon": 0.0625, "cuboid": []string{"year"}, "nonneg": i%2 == 0}
				if i%4 >= 2 {
					q["cuboid"] = []string{"sex"}
				}
				st, _, _ := s.ask("arrests", key, q, fmt.Sprint("k", i))
				codes <- st
			}()
		}
		wg.Wait()
		close(codes)
		for st := range codes {
			if st != http.StatusOK && st != http.StatusCreated && st != http.StatusForbidden {
				t.Errorf("status %d", st)
			}
		}
		b := s.budgetOf("arrests", key)
		if want := int64(1)<<38 + n*step; b.TotalSteps != want {
			t.Errorf("total %d steps, want %d (the default and %d top-ups)", b.TotalSteps, want, n)
		}
		var charged int64
		for _, e := range s.ledger(alice, "arrests") {
			charged += e.Charge
		}
		if b.SpentSteps != charged || b.SpentSteps > b.TotalSteps {
			t.Errorf("spent %d steps, the ledger charged %d, total %d", b.SpentSteps, charged, b.TotalSteps)
		}
	})
}

// spendingResponse is the answer of the spending endpoint.
type spendingResponse struct {
	Analyst struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"analyst"`
	Bucket   string           `json:"bucket"`
	Datasets []spendingSeries `json:"datasets"`
}

// TestSpending (issue 33): an analyst's spending over time follows the
// ledger and the budget changes exactly: per answer (bucket query), each
// point's spent is the ledger's spent after it and its total the budget's
// total then; per day, one point sums them.
func TestSpending(t *testing.T) {
	forEachStore(t, func(t *testing.T, cfg Config) {
		s := startServer(t, cfg)
		s.registerArrests("arrests", 1)
		s.registerArrests("other", 1)
		alice, key := s.analyst("alice")
		unit := int64(1) << 40
		for _, c := range []string{"sex", "agegroup"} {
			if st, _, raw := s.ask("arrests", key, map[string]any{"kind": "cuboid", "epsilon": 0.25, "cuboid": []string{c}}, ""); st != http.StatusCreated {
				t.Fatalf("query: %d %s", st, raw)
			}
		}
		if st, _, msg := s.changeBudget(alice, "arrests", map[string]any{"add": 0.5}); st != http.StatusOK {
			t.Fatalf("top-up: %d %s", st, msg)
		}
		if st, _, raw := s.ask("arrests", key, map[string]any{"kind": "cuboid", "epsilon": 0.125, "cuboid": []string{"colour"}}, ""); st != http.StatusCreated {
			t.Fatalf("query: %d %s", st, raw)
		}

		var sp spendingResponse
		s.must(http.StatusOK, "GET", "/admin/v1/analysts/"+alice+"/spending?bucket=query", s.admin, nil, &sp)
		if sp.Analyst.Name != "alice" || sp.Bucket != "query" || len(sp.Datasets) != 1 || sp.Datasets[0].Dataset != "arrests" {
			t.Fatalf("spending: %+v", sp)
		}
		type pt struct {
			q, c                  int
			charged, spent, total int64
		}
		var got []pt
		for _, p := range sp.Datasets[0].Points {
			got = append(got, pt{p.Queries, p.BudgetChanges, p.ChargedSteps, p.SpentSteps, p.TotalSteps})
			if p.Spent != stepsEpsilon(p.SpentSteps) || p.Total != stepsEpsilon(p.TotalSteps) {
				t.Errorf("point %+v: epsilon and steps disagree", p)
			}
		}
		want := []pt{
			{1, 0, unit / 4, unit / 4, unit},
			{1, 0, unit / 4, unit / 2, unit},
			{0, 1, 0, unit / 2, unit + unit/2},
			{1, 0, unit / 8, unit/2 + unit/8, unit + unit/2},
		}
		if !slices.Equal(got, want) {
			t.Errorf("points per answer:\n got %v\nwant %v", got, want)
		}
		if b := sp.Datasets[0].Budget; b.SpentSteps != unit/2+unit/8 || b.TotalSteps != unit+unit/2 {
			t.Errorf("current budget %+v", b)
		}

		s.must(http.StatusOK, "GET", "/admin/v1/analysts/"+alice+"/spending?dataset=arrests", s.admin, nil, &sp)
		if ps := sp.Datasets[0].Points; sp.Bucket != "day" || len(ps) != 1 || ps[0].Queries != 3 || ps[0].BudgetChanges != 1 ||
			ps[0].ChargedSteps != unit/2+unit/8 || ps[0].SpentSteps != unit/2+unit/8 || ps[0].TotalSteps != unit+unit/2 {
			t.Errorf("one day: %+v", sp.Datasets[0])
		}
		s.must(http.StatusOK, "GET", "/admin/v1/analysts/"+alice+"/spending?bucket=query&limit=2", s.admin, nil, &sp)
		if ps := sp.Datasets[0].Points; len(ps) != 2 || !sp.Datasets[0].Truncated || ps[1].SpentSteps != unit/2+unit/8 {
			t.Errorf("the last 2 points: %+v", sp.Datasets[0])
		}
		// A dataset the analyst never used: the default budget, no points.
		s.must(http.StatusOK, "GET", "/admin/v1/analysts/"+alice+"/spending?dataset=other", s.admin, nil, &sp)
		if len(sp.Datasets) != 1 || len(sp.Datasets[0].Points) != 0 || sp.Datasets[0].Budget.TotalSteps != unit {
			t.Errorf("an unused dataset: %+v", sp.Datasets)
		}
		s.must(http.StatusBadRequest, "GET", "/admin/v1/analysts/"+alice+"/spending?bucket=week", s.admin, nil, nil)
		s.must(http.StatusBadRequest, "GET", "/admin/v1/analysts/"+alice+"/spending?limit=0", s.admin, nil, nil)
		s.must(http.StatusNotFound, "GET", "/admin/v1/analysts/a_nobody/spending", s.admin, nil, nil)
		s.must(http.StatusNotFound, "GET", "/admin/v1/analysts/"+alice+"/spending?dataset=nothing", s.admin, nil, nil)
	})
}

// TestAuditTrail (issue 33): every change an admin key makes is recorded,
// with the key that made it, durably (it survives a restart), and the admin
// key registered at start is recorded too.
func TestAuditTrail(t *testing.T) {
	forEachStore(t, func(t *testing.T, cfg Config) {
		cfg.AdminKey = GenerateKey()
		s := startServer(t, cfg)
		adminID, _ := store.KeyID(s.admin)
		s.registerArrests("arrests", 1)
		alice, _ := s.analyst("alice")
		var issued struct {
			Key store.Key `json:"key"`
		}
		s.must(http.StatusCreated, "POST", "/admin/v1/analysts/"+alice+"/keys", s.admin, nil, &issued)
		s.must(http.StatusOK, "DELETE", "/admin/v1/keys/"+issued.Key.ID, s.admin, nil, nil)
		s.must(http.StatusOK, "DELETE", "/admin/v1/keys/"+issued.Key.ID, s.admin, nil, nil) // again: nothing to record
		var second struct {
			Key store.Key `json:"key"`
			API string    `json:"api_key"`
		}
		s.must(http.StatusCreated, "POST", "/admin/v1/admin-keys", s.admin, nil, &second)
		if st, _, msg := s.changeBudget(alice, "arrests", map[string]any{"add": 1}); st != http.StatusOK {
			t.Fatalf("budget: %d %s", st, msg)
		}
		// The second admin key retires the dataset and revokes the first.
		s.must(http.StatusOK, "DELETE", "/admin/v1/datasets/arrests", second.API, nil, nil)
		s.must(http.StatusOK, "DELETE", "/admin/v1/keys/"+adminID, second.API, nil, nil)
		// Refused requests record nothing.
		s.must(http.StatusBadRequest, "POST", "/admin/v1/analysts", second.API, map[string]string{"name": ""}, nil)

		s.ts.Close()
		s.srv.Close()
		cfg.AdminKey = second.API
		s = startServer(t, cfg)
		evs := s.auditOf("")
		want := []struct{ action, actor string }{
			{"admin_key.registered", store.ActorStart},
			{"dataset.registered", adminID},
			{"analyst.created", adminID},
			{"key.issued", adminID},
			{"key.revoked", adminID},
			{"admin_key.issued", adminID},
			{"budget.changed", adminID},
			{"dataset.retired", second.Key.ID},
			{"admin_key.revoked", second.Key.ID},
		}
		if len(evs) != len(want) {
			t.Fatalf("audit trail %v, want %d records", actions(evs), len(want))
		}
		for i, w := range want {
			if e := evs[i]; e.Action != w.action || e.Actor != w.actor {
				t.Errorf("record %d: %s by %q, want %s by %q", i, e.Action, e.Actor, w.action, w.actor)
			}
		}
		if evs[0].Key != adminID || evs[3].Key != issued.Key.ID || evs[3].Analyst != alice || evs[8].Key != adminID {
			t.Errorf("records name the wrong keys or analysts: %+v", evs)
		}
		for i := 1; i < len(evs); i++ {
			if evs[i].Seq <= evs[i-1].Seq {
				t.Errorf("records out of order: %d after %d", evs[i].Seq, evs[i-1].Seq)
			}
		}
		if got := actions(s.auditOf("analyst=" + alice)); !slices.Equal(got, []string{"analyst.created", "key.issued", "key.revoked", "budget.changed"}) {
			t.Errorf("alice's records: %v", got)
		}
		var page struct {
			Events []store.AuditEvent `json:"events"`
		}
		s.must(http.StatusOK, "GET", fmt.Sprintf("/admin/v1/audit?limit=2&before=%d", evs[4].Seq), s.admin, nil, &page)
		if len(page.Events) != 2 || page.Events[0].Seq != evs[3].Seq || page.Events[1].Seq != evs[2].Seq {
			t.Errorf("a page before %d: %+v", evs[4].Seq, page.Events)
		}
		s.must(http.StatusBadRequest, "GET", "/admin/v1/audit?limit=0", s.admin, nil, nil)
	})
}
