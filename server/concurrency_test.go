package server

import (
	"net/http"
	"sync"
	"testing"

	"github.com/knowdp/knowdp/internal/pgtest"
)

// TestConcurrentSpend has 64 clients race to spend one analyst's budget
// through the HTTP API, with some queries sent twice at once. The budget is
// never exceeded by any amount (exact integer steps), exactly as many
// queries are answered as fit, the answered queries' charges add up to what
// was spent, and concurrent duplicates resolve to one stored answer.
func TestConcurrentSpend(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped under -short: a 64-client load test")
	}
	forEachStore(t, func(t *testing.T, cfg Config) {
		s := startServer(t, cfg)
		s.registerArrests("arrests", 1, []string{"year"})
		aid, key := s.analyst("racer")

		// Every query weighs the same base cells (year 1997) with its own
		// coefficient, so each is distinct and costs exactly eps = 1/40
		// (Protocol 1: the cells' loss grows by eps each time). 40 fit in
		// a budget of 1, not 41: 40 * floor(2^40/40) <= 2^40 < 41 * ...
		eps := 1.0 / 40
		const clients, perClient = 64, 3
		type result struct {
			status int
			id     string
			steps  int64
			answer string
		}
		results := make([][]result, clients)
		var wg sync.WaitGroup
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range perClient {
					// Clients 2k and 2k+1 send the same queries.
					n := (c/2)*perClient + i
					q := map[string]any{"kind": "linear", "epsilon": eps,
						"queries": []LinearQuery{countQuery(n+1, map[string][]string{"year": {"1997"}})}}
					st, r, raw := s.ask("arrests", key, q, "")
					if st != http.StatusCreated && st != http.StatusOK && st != http.StatusForbidden {
						t.Errorf("status %d: %s", st, raw)
					}
					results[c] = append(results[c], result{st, r.ID, r.Steps, string(r.Answer)})
				}
			}()
		}
		wg.Wait()

		b := s.budgetOf("arrests", key)
		if b.SpentSteps > b.TotalSteps {
			t.Fatalf("overspent: %d > %d steps", b.SpentSteps, b.TotalSteps)
		}
		var charged int64
		answers := map[string]string{} // id -> answer
		created := 0
		for _, rs := range results {
			for _, r := range rs {
				if r.status == http.StatusCreated {
					created++
					charged += r.steps
				}
				if r.status == http.StatusOK || r.status == http.StatusCreated {
					if prev, ok := answers[r.id]; ok && prev != r.answer {
						t.Fatalf("query %s got two different answers", r.id)
					}
					answers[r.id] = r.answer
				}
			}
		}
		es := s.ledger(aid, "arrests")
		var ledgerSum int64
		for _, e := range es {
			ledgerSum += e.Charge
			if e.Charge != steps(eps) {
				t.Errorf("entry %s charged %d steps, want %d", e.ID, e.Charge, steps(eps))
			}
		}
		if created != 40 || len(es) != 40 || len(answers) != 40 || charged != b.SpentSteps || ledgerSum != b.SpentSteps || b.SpentSteps != 40*steps(eps) {
			t.Fatalf("created %d, ledger %d entries (sum %d), distinct answers %d, charged %d, spent %d, want 40 answers of %d steps",
				created, len(es), ledgerSum, len(answers), charged, b.SpentSteps, steps(eps))
		}
		if b.RemainingSteps >= steps(eps) {
			t.Fatalf("budget left %d steps, enough for another query", b.RemainingSteps)
		}
	})
}

// TestTwoServersOnePostgres has two server processes (two Servers) share one
// PostgreSQL database while 32 clients spend one analyst's budget through
// both, on two datasets at once: each group commit locks its budget rows in
// key order, so no batch deadlocks, and the budget is never exceeded.
func TestTwoServersOnePostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped under -short: a load test")
	}
	cfg := Config{Postgres: pgtest.Schema(t), AdminKey: GenerateKey()}
	a := startServer(t, cfg)
	a.registerArrests("one", 1, []string{"year"})
	a.registerArrests("two", 1, []string{"year"})
	_, key := a.analyst("shared")
	b := startServer(t, cfg)
	eps := 1.0 / 40
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := map[string]int{}
	for c := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			srv := []*testServer{a, b}[c%2]
			for i := range 4 {
				ds := []string{"one", "two"}[(c/2+i)%2]
				q := map[string]any{"kind": "linear", "epsilon": eps,
					"queries": []LinearQuery{countQuery(c*4+i+1, map[string][]string{"year": {"1997"}})}}
				st, _, raw := srv.ask(ds, key, q, "")
				switch st {
				case http.StatusCreated:
					mu.Lock()
					created[ds]++
					mu.Unlock()
				case http.StatusForbidden:
				default:
					t.Errorf("status %d: %s", st, raw)
				}
			}
		}()
	}
	wg.Wait()
	for _, ds := range []string{"one", "two"} {
		bv := a.budgetOf(ds, key)
		if created[ds] != 40 || bv.SpentSteps != 40*steps(eps) || bv.SpentSteps > bv.TotalSteps {
			t.Errorf("%s: %d answered, spent %d of %d steps; want 40 answers of %d", ds, created[ds], bv.SpentSteps, bv.TotalSteps, steps(eps))
		}
	}
}
