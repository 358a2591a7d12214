package server

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/knowdp/knowdp/internal/pgtest"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/server/store"
)

func steps(eps float64) int64 {
	e, err := privacy.NewEpsilon(eps)
	if err != nil {
		panic(err)
	}
	return epsSteps(e)
}

// TestLedger exercises the charge path end to end: a first answer is
// charged, a repeat (same query, however it is written) and a retry with the
// same idempotency key return the stored answer for free, refusals charge
// nothing, and spent is the sum of the ledger's charges.
func TestLedger(t *testing.T) {
	forEachStore(t, func(t *testing.T, cfg Config) {
		s := startServer(t, cfg)
		s.registerArrests("arrests", 1, []string{"year"}, []string{"colour"})
		aid, key := s.analyst("alice")

		q := map[string]any{"kind": "cuboid", "epsilon": 0.25, "cuboid": []string{"year", "sex"}}
		status, first, raw := s.ask("arrests", key, q, "k1")
		if status != http.StatusCreated || first.Repeat || first.Steps != steps(0.25) {
			t.Fatalf("first answer: status %d, repeat %v, charge %d steps: %s", status, first.Repeat, first.Steps, raw)
		}
		var ans tableAnswer
		if err := json.Unmarshal(first.Answer, &ans); err != nil || len(ans.Counts) != 12 || ans.Privacy.Epsilon != 0.25 {
			t.Fatalf("answer %s: %v", first.Answer, err)
		}

		// The same query written differently, and a retry with the key.
		for _, again := range []struct {
			q    any
			idem string
		}{
			{map[string]any{"kind": "cuboid", "epsilon": 0.25, "cuboid": []string{"sex", "year"}}, ""},
			{q, "k1"},
			{q, "k2"},
		} {
			status, r, raw := s.ask("arrests", key, again.q, again.idem)
			if status != http.StatusOK || !r.Repeat || r.ID != first.ID || !bytes.Equal(r.Answer, first.Answer) {
				t.Fatalf("repeat %v: status %d, repeat %v, id %s (want %s): %s", again, status, r.Repeat, r.ID, first.ID, raw)
			}
			if r.Budget.SpentSteps != steps(0.25) {
				t.Fatalf("repeat charged: spent %d steps, want %d", r.Budget.SpentSteps, steps(0.25))
			}
		}

		// An idempotency key may not be reused for another query, on this
		// dataset or another.
		other := map[string]any{"kind": "cuboid", "epsilon": 0.25, "cuboid": []string{"agegroup"}}
		if status, _, raw := s.ask("arrests", key, other, "k1"); status != http.StatusConflict {
			t.Fatalf("reused idempotency key: status %d: %s", status, raw)
		}
		s.registerArrests("again", 1)
		if status, _, raw := s.ask("again", key, q, "k1"); status != http.StatusConflict {
			t.Fatalf("idempotency key reused on another dataset: status %d: %s", status, raw)
		}

		// Over budget: refused, nothing charged, not cached.
		big := map[string]any{"kind": "cuboid", "epsilon": 0.8, "cuboid": []string{"agegroup"}}
		status, _, raw = s.ask("arrests", key, big, "k3")
		if status != http.StatusForbidden || errMsg(raw) != "insufficient budget: this query needs epsilon 0.8, remaining 0.75" {
			t.Fatalf("over budget: status %d: %s", status, raw)
		}
		if b := s.budgetOf("arrests", key); b.SpentSteps != steps(0.25) {
			t.Fatalf("refusal charged: spent %d", b.SpentSteps)
		}
		// A public cuboid (computable from the invariants) costs nothing
		// and is exact.
		status, pub, raw := s.ask("arrests", key, map[string]any{"kind": "cuboid", "epsilon": 3, "cuboid": []string{"year"}}, "")
		if status != http.StatusCreated || pub.Steps != 0 || !strings.Contains(string(pub.Answer), `"counts":[492,877,1099,1270,1211,277]`) {
			t.Fatalf("public cuboid: status %d: %s", status, raw)
		}
		// The refused query's idempotency key was not used up.
		status, r, raw := s.ask("arrests", key, other, "k3")
		if status != http.StatusCreated || r.Steps != steps(0.25) {
			t.Fatalf("after refusal: status %d: %s", status, raw)
		}

		es := s.ledger(aid, "arrests")
		var sum int64
		for _, e := range es {
			sum += e.Charge
		}
		b := s.budgetOf("arrests", key)
		if len(es) != 3 || sum != b.SpentSteps || b.SpentSteps != 2*steps(0.25) || b.TotalSteps != steps(1) {
			t.Fatalf("ledger: %d entries summing to %d, budget %+v", len(es), sum, b)
		}

		// History and single entries.
		var hist struct {
			Queries []response `json:"queries"`
		}
		s.must(http.StatusOK, "GET", "/v1/datasets/arrests/queries", key, nil, &hist)
		if len(hist.Queries) != 3 || hist.Queries[2].ID != first.ID || !bytes.Equal(hist.Queries[2].Answer, first.Answer) {
			t.Fatalf("history: %+v", hist.Queries)
		}
		s.must(http.StatusOK, "GET", "/v1/queries/"+first.ID, key, nil, nil)
	})
}

// TestBadInput checks that bad queries are refused with a clear error and
// charge nothing.
func TestBadInput(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerArrests("arrests", 1, []string{"year"})
	_, key := s.analyst("bob")
	uniform := `{"pieces":[{"lo":0,"hi":1,"density":1}]}`
	where := `{"terms":[{"where":{"year":["1997"]}}]}`
	for _, tc := range []struct {
		name, body, want string
	}{
		{"nan epsilon", `{"kind":"cuboid","epsilon":"NaN","cuboid":["year"]}`, "epsilon"},
		{"huge epsilon", `{"kind":"cuboid","epsilon":1e999,"cuboid":["year"]}`, "epsilon"},
		{"zero epsilon", `{"kind":"cuboid","epsilon":0,"cuboid":["year"]}`, "epsilon must be > 0"},
		{"negative epsilon", `{"kind":"linear","epsilon":-1,"queries":[` + where + `]}`, "epsilon must be > 0"},
		{"missing epsilon", `{"kind":"cuboid","cuboid":["year"]}`, "epsilon must be > 0"},
		{"missing cuboid", `{"kind":"cuboid","epsilon":1}`, "cuboid: required"},
		{"too many queries", `{"kind":"linear","epsilon":1,"queries":[` + strings.Repeat(where+",", 1024) + where + `]}`, "1025 queries; at most 1024"},
		{"too many cells", `{"kind":"linear","epsilon":1,"queries":[` + strings.Repeat(`{"terms":[{}]},`, 200) + `{"terms":[{}]}]}`, "more than 1048576 base cells"},
		{"unknown kind", `{"kind":"median","epsilon":1}`, `kind: "median"`},
		{"unknown field", `{"kind":"cuboid","epsilon":1,"cuboid":["year"],"sigma":2}`, `unknown field "sigma"`},
		{"field of another kind", `{"kind":"cuboid","epsilon":1,"cuboid":["year"],"refine":true}`, "refine: not a field of a cuboid query"},
		{"trailing data", `{"kind":"cuboid","epsilon":1,"cuboid":["year"]} {}`, "trailing data"},
		{"not json", `kind=cuboid`, "request body"},
		{"unknown dimension in cuboid", `{"kind":"cuboid","epsilon":1,"cuboid":["height"]}`, `unknown dimension "height"`},
		{"unknown dimension in where", `{"kind":"linear","epsilon":1,"queries":[{"terms":[{"where":{"height":["1"]}}]}]}`, `queries[0].terms[0].where: unknown dimension "height"`},
		{"unknown value", `{"kind":"linear","epsilon":1,"queries":[{"terms":[{"where":{"year":["1996"]}}]}]}`, `unknown value "1996"`},
		{"empty values", `{"kind":"linear","epsilon":1,"queries":[{"terms":[{"where":{"year":[]}}]}]}`, "empty list of values"},
		{"fractional coefficient", `{"kind":"linear","epsilon":1,"queries":[{"terms":[{"coef":0.5}]}]}`, "coef: 0.5"},
		{"zero coefficient", `{"kind":"linear","epsilon":1,"queries":[{"terms":[{"coef":0}]}]}`, "coef: 0"},
		{"cancelling terms", `{"kind":"linear","epsilon":1,"queries":[{"terms":[{"coef":1},{"coef":-1}]}]}`, "every coefficient is zero"},
		{"no queries", `{"kind":"linear","epsilon":1,"queries":[]}`, "at least one query"},
		{"no terms", `{"kind":"linear","epsilon":1,"queries":[{"terms":[]}]}`, "at least one term"},
		{"prior without prior", `{"kind":"prior","epsilon":1,"query":` + where + `}`, "prior: required"},
		{"malformed prior", `{"kind":"prior","epsilon":1,"query":` + where + `,"prior":{"values":[0,1],"probabilities":[0.5]}}`, "prior:"},
		{"prior with negative mass", `{"kind":"prior","epsilon":1,"query":` + where + `,"prior":{"values":[0,1],"probabilities":[1.5,-0.5]}}`, "prior:"},
		{"nominal prior", `{"kind":"prior","epsilon":1,"query":` + where + `,"prior":{"level":"nominal","values":["a","b"],"probabilities":[0.5,0.5]}}`, "one numeric component"},
		{"bad alpha_u", `{"kind":"prior","epsilon":1,"query":` + where + `,"prior":` + uniform + `,"alpha_u":0.5}`, "alpha_u"},
		{"dx without metric", `{"kind":"dx","epsilon":1,"queries":[` + where + `]}`, "no d_X metric"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, raw := s.ask("arrests", key, tc.body, "")
			if status != http.StatusBadRequest || !strings.Contains(errMsg(raw), tc.want) {
				t.Fatalf("status %d, want 400 with %q: %s", status, tc.want, raw)
			}
		})
	}
	if b := s.budgetOf("arrests", key); b.SpentSteps != 0 {
		t.Fatalf("bad input charged %d steps", b.SpentSteps)
	}
	if st, _ := s.call("POST", "/v1/datasets/nope/queries", key, `{"kind":"cuboid","epsilon":1}`, nil, nil); st != http.StatusNotFound {
		t.Fatalf("unknown dataset: status %d", st)
	}
}

// TestSecurity checks keys, roles, isolation between analysts and limits.
func TestSecurity(t *testing.T) {
	forEachStore(t, func(t *testing.T, cfg Config) {
		cfg.RateLimit, cfg.RateBurst = 1, 30
		logs := &syncBuffer{}
		cfg.Log = slog.New(slog.NewTextHandler(logs, nil))
		s := startServer(t, cfg)
		s.registerArrests("arrests", 1, []string{"year"})
		aliceID, alice := s.analyst("alice")
		_, bob := s.analyst("bob")
		_, r, _ := s.ask("arrests", alice, map[string]any{"kind": "cuboid", "epsilon": 0.5, "cuboid": []string{"sex"}}, "shared-key")

		// Bob cannot see Alice's answer, history or budget, and her
		// idempotency key means nothing for him.
		if st, raw := s.call("GET", "/v1/queries/"+r.ID, bob, nil, nil, nil); st != http.StatusNotFound || strings.Contains(string(raw), "counts") {
			t.Fatalf("bob read alice's answer: %d %s", st, raw)
		}
		var hist struct{ Queries []response }
		s.must(http.StatusOK, "GET", "/v1/datasets/arrests/queries", bob, nil, &hist)
		if len(hist.Queries) != 0 {
			t.Fatalf("bob's history shows %d queries", len(hist.Queries))
		}
		if b := s.budgetOf("arrests", bob); b.SpentSteps != 0 {
			t.Fatalf("bob's budget shows alice's spending")
		}
		st, rb, raw := s.ask("arrests", bob, map[string]any{"kind": "cuboid", "epsilon": 0.5, "cuboid": []string{"sex"}}, "shared-key")
		if st != http.StatusCreated || rb.ID == r.ID || rb.Repeat {
			t.Fatalf("bob's query was served alice's answer: %d %s", st, raw)
		}

		for _, tc := range []struct {
			name, method, path, key string
			want                    int
		}{
			{"no key", "GET", "/v1/datasets", "", http.StatusUnauthorized},
			{"garbage key", "GET", "/v1/datasets", "hello", http.StatusUnauthorized},
			{"wrong secret", "GET", "/v1/datasets", alice[:len(alice)-4] + "AAAA", http.StatusUnauthorized},
			{"unknown key id", "GET", "/v1/datasets", "kdp_0000000000000000_" + alice[len(alice)-43:], http.StatusUnauthorized},
			{"analyst on admin route", "GET", "/admin/v1/analysts", alice, http.StatusForbidden},
			{"admin on analyst route", "GET", "/v1/datasets", s.admin, http.StatusForbidden},
			{"unknown route", "GET", "/v2/anything", alice, http.StatusNotFound},
		} {
			if got, raw := s.call(tc.method, tc.path, tc.key, nil, nil, nil); got != tc.want {
				t.Errorf("%s: status %d, want %d: %s", tc.name, got, tc.want, raw)
			}
		}

		// Revocation takes effect at once; other keys still work.
		var k struct {
			Key    store.Key `json:"key"`
			APIKey string    `json:"api_key"`
		}
		s.must(http.StatusCreated, "POST", "/admin/v1/analysts/"+aliceID+"/keys", s.admin, nil, &k)
		s.must(http.StatusOK, "GET", "/v1/me", k.APIKey, nil, nil)
		s.must(http.StatusOK, "DELETE", "/admin/v1/keys/"+k.Key.ID, s.admin, nil, nil)
		if got, _ := s.call("GET", "/v1/me", k.APIKey, nil, nil, nil); got != http.StatusUnauthorized {
			t.Fatalf("revoked key: status %d", got)
		}
		s.must(http.StatusOK, "GET", "/v1/me", alice, nil, nil)

		// Oversized bodies are refused.
		huge := `{"kind":"cuboid","epsilon":1,"cuboid":["` + strings.Repeat("x", maxQueryBody) + `"]}`
		if got, raw := s.call("POST", "/v1/datasets/arrests/queries", alice, huge, nil, nil); got != http.StatusRequestEntityTooLarge {
			t.Fatalf("huge body: status %d: %s", got, raw)
		}

		// The rate limit: a burst of 30, then 429 (at 1 request/s the
		// bucket cannot refill 30 tokens during the loop).
		limited := 0
		for range 40 {
			if got, _ := s.call("GET", "/v1/me", bob, nil, nil, nil); got == http.StatusTooManyRequests {
				limited++
			}
		}
		if limited < 5 {
			t.Fatalf("rate limit: only %d of 40 requests limited", limited)
		}

		// A request past its deadline is abandoned and charges nothing.
		s.srv.cfg.QueryTimeout = time.Nanosecond
		st, _, raw = s.ask("arrests", alice, map[string]any{"kind": "cuboid", "epsilon": 0.1, "cuboid": []string{"checks"}}, "")
		s.srv.cfg.QueryTimeout = time.Minute
		if st != http.StatusServiceUnavailable {
			t.Fatalf("past the deadline: status %d: %s", st, raw)
		}
		if b := s.budgetOf("arrests", alice); b.SpentSteps != steps(0.5) {
			t.Fatalf("a timed-out request charged: spent %d", b.SpentSteps)
		}

		// The request log names keys by id and never shows a secret.
		text := logs.String()
		if !strings.Contains(text, "key="+k.Key.ID) {
			t.Fatalf("the log does not name key ids:\n%s", text)
		}
		for _, secret := range []string{alice, bob, s.admin, k.APIKey} {
			if strings.Contains(text, secret[len(secret)-43:]) {
				t.Fatalf("the log shows a secret")
			}
		}
	})
}

// TestAdminKey checks that a generated admin key is shown once and works,
// and that the store keeps only hashes.
func TestAdminKey(t *testing.T) {
	dir := t.TempDir()
	srv, shown, err := Open(context.Background(), Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := store.KeyID(shown); !ok {
		t.Fatalf("first start showed %q", shown)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "knowdp.db"))
	if err != nil {
		t.Fatal(err)
	}
	var n int
	err = db.QueryRow(`SELECT COUNT(*) FROM api_keys WHERE secret_sha256 LIKE ?`, "%"+shown[len(shown)-43:]+"%").Scan(&n)
	db.Close()
	if err != nil || n != 0 {
		t.Fatalf("the secret is stored in clear: %d rows, %v", n, err)
	}
	if _, err := srv.st.Authenticate(context.Background(), shown); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	srv, again, err := Open(context.Background(), Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if again != "" {
		t.Fatalf("second start showed a key again")
	}
	if _, _, err := Open(context.Background(), Config{DataDir: t.TempDir(), AdminKey: "not a key"}); err == nil {
		t.Fatal("a malformed admin key was accepted")
	}
}

// TestRestart checks that datasets, keys, budgets and the ledger survive a
// restart.
func TestRestart(t *testing.T) {
	forEachStore(t, func(t *testing.T, cfg Config) {
		cfg.AdminKey = GenerateKey()
		s := startServer(t, cfg)
		s.registerArrests("arrests", 1, []string{"year"})
		_, key := s.analyst("alice")
		q := map[string]any{"kind": "linear", "epsilon": 0.5, "queries": []LinearQuery{countQuery(1, map[string][]string{"sex": {"Female"}})}}
		_, first, _ := s.ask("arrests", key, q, "")
		s.ts.Close()
		s.srv.Close()

		s2 := startServer(t, cfg)
		st, again, raw := s2.ask("arrests", key, q, "")
		if st != http.StatusOK || !again.Repeat || !bytes.Equal(again.Answer, first.Answer) || again.Budget.SpentSteps != steps(0.5) {
			t.Fatalf("after restart: %d %s", st, raw)
		}
		// The Protocol 1 state survived too: the same cells cost again.
		q2 := map[string]any{"kind": "linear", "epsilon": 0.5, "queries": []LinearQuery{countQuery(2, map[string][]string{"sex": {"Female"}})}}
		if st, r, raw := s2.ask("arrests", key, q2, ""); st != http.StatusCreated || r.Steps != steps(0.5) {
			t.Fatalf("second linear query: %d %s", st, raw)
		}
	})
}

// TestSources registers the arrests data from an SQLite table and a
// PostgreSQL table (aggregated with GROUP BY in the database) and checks that
// the counts equal the CSV's.
func TestSources(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerArrests("csv", 1)
	want := s.srv.sets["csv"].cube.Counts

	rows := readArrests(t)
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			src := SQLSource{Driver: driver, Table: "arrests"}
			if driver == "sqlite" {
				src.DSN = t.TempDir() + "/src.db"
				loadTable(t, "sqlite", src.DSN, rows)
			} else {
				src.DSN = pgtest.Schema(t)
				loadTable(t, "pgx", src.DSN, rows)
			}
			id := "from-" + src.Driver
			req := DatasetRequest{ID: id, Schema: arrestsSchema(t), Source: Source{SQL: &src}, Policy: Policy{EpsilonPerAnalyst: 1}}
			s.must(http.StatusCreated, "POST", "/admin/v1/datasets", s.admin, req, nil)
			got := s.srv.sets[id].cube.Counts
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%s: cell %d has %v, CSV has %v", src.Driver, i, got[i], want[i])
				}
			}
			// A value outside the declared domain is a clear error.
			bad := `{"dimensions":[{"name":"year","values":["1997"]},{"name":"sex","values":["Female","Male"]}]}`
			req = DatasetRequest{ID: id + "-bad", Schema: json.RawMessage(bad), Source: Source{SQL: &src}, Policy: Policy{EpsilonPerAnalyst: 1}}
			st, raw := s.call("POST", "/admin/v1/datasets", s.admin, req, nil, nil)
			if msg := errMsg(raw); st != http.StatusBadRequest || !strings.Contains(msg, `column "year" has a value outside its declared domain`) || strings.Contains(msg, `"1998"`) {
				t.Fatalf("%s: out-of-domain value: %d %s", src.Driver, st, raw)
			}
			// The stored DSN is redacted.
			if d := s.srv.sets[id]; strings.Contains(string(d.source), "password=") {
				t.Fatalf("source keeps a password: %s", d.source)
			}
		})
	}
}

func TestRegisterErrors(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	schema := arrestsSchema(t)
	csv := repoRoot(t) + "/data/arrests.csv"
	for _, tc := range []struct {
		name string
		req  DatasetRequest
		want string
	}{
		{"bad id", DatasetRequest{ID: "Bad Id", Schema: schema, Source: Source{CSV: csv}, Policy: Policy{EpsilonPerAnalyst: 1}}, "id"},
		{"no budget", DatasetRequest{ID: "a", Schema: schema, Source: Source{CSV: csv}}, "epsilon_per_analyst"},
		{"unknown invariant", DatasetRequest{ID: "a", Schema: schema, Source: Source{CSV: csv}, Policy: Policy{EpsilonPerAnalyst: 1, Invariants: [][]string{{"height"}}}}, `unknown dimension "height"`},
		{"no source", DatasetRequest{ID: "a", Schema: schema, Policy: Policy{EpsilonPerAnalyst: 1}}, "source"},
		{"missing file", DatasetRequest{ID: "a", Schema: schema, Source: Source{CSV: "/nonexistent.csv"}, Policy: Policy{EpsilonPerAnalyst: 1}}, "nonexistent.csv"},
		{"bad driver", DatasetRequest{ID: "a", Schema: schema, Source: Source{SQL: &SQLSource{Driver: "mysql", Table: "t"}}, Policy: Policy{EpsilonPerAnalyst: 1}}, "mysql"},
		{"metric without invariants", DatasetRequest{ID: "a", Schema: schema, Source: Source{CSV: csv}, Policy: Policy{EpsilonPerAnalyst: 1, Metric: &MetricPolicy{Default: 1}}}, "at least one invariant"},
		{"bad metric budget", DatasetRequest{ID: "a", Schema: schema, Source: Source{CSV: csv}, Policy: Policy{EpsilonPerAnalyst: 1, Invariants: [][]string{{}}, Metric: &MetricPolicy{Default: 1, Dimensions: map[string]DimensionBudgets{"sex": {Values: map[string]float64{"Female": -1}}}}}}, "sex.values.Female"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, raw := s.call("POST", "/admin/v1/datasets", s.admin, tc.req, nil, nil)
			if st != http.StatusBadRequest || !strings.Contains(errMsg(raw), tc.want) {
				t.Fatalf("status %d, want 400 with %q: %s", st, tc.want, raw)
			}
		})
	}
	s.registerArrests("dup", 1)
	if st, _ := s.call("POST", "/admin/v1/datasets", s.admin, DatasetRequest{ID: "dup", Schema: schema, Source: Source{CSV: csv}, Policy: Policy{EpsilonPerAnalyst: 1}}, nil, nil); st != http.StatusConflict {
		t.Fatalf("duplicate id: status %d", st)
	}
	if st, _ := s.call("POST", "/admin/v1/analysts", s.admin, map[string]string{"name": " x"}, nil, nil); st != http.StatusBadRequest {
		t.Fatalf("bad analyst name: status %d", st)
	}
	s.analyst("carol")
	if st, _ := s.call("POST", "/admin/v1/analysts", s.admin, map[string]string{"name": "carol"}, nil, nil); st != http.StatusBadRequest {
		t.Fatalf("duplicate analyst: status %d", st)
	}
}

// TestCounts checks the sparse count encoding round trip.
func TestCounts(t *testing.T) {
	for _, counts := range [][]float64{{}, {0, 0, 0}, {5}, {0, 3, 0, 0, 1 << 40, 7}} {
		b := encodeCounts(counts)
		got := make([]float64, len(counts))
		if err := decodeCounts(b, got); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(counts) {
			t.Fatalf("round trip %v -> %v", counts, got)
		}
	}
	if err := decodeCounts([]byte{1, 9, 1}, make([]float64, 3)); err == nil {
		t.Fatal("an out-of-range cell was accepted")
	}
}
