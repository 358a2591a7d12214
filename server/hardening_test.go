package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/internal/pgtest"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/release"
	"github.com/knowdp/knowdp/server/store"
)

// TestBudgetBeforeCompute checks that a query the analyst cannot afford is
// refused before the server computes anything, and that a client that
// disconnects after the computation is charged (the answer exists and a
// retry with the same Idempotency-Key returns it).
func TestBudgetBeforeCompute(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerArrests("arrests", 0.5, []string{"year"})
	_, key := s.analyst("poor")
	q := func(coef int) map[string]any {
		return map[string]any{"kind": "linear", "epsilon": 0.5, "refine": true,
			"queries": []LinearQuery{countQuery(coef, map[string][]string{"year": {"1997"}})}}
	}
	if st, _, raw := s.ask("arrests", key, q(1), ""); st != http.StatusCreated {
		t.Fatalf("first query: %d %s", st, raw)
	}
	before := s.srv.computed.Load()
	for i := range 5 {
		if st, _, raw := s.ask("arrests", key, q(i+2), ""); st != http.StatusForbidden || !strings.Contains(errMsg(raw), "insufficient budget") {
			t.Fatalf("unaffordable query: %d %s", st, raw)
		}
	}
	if n := s.srv.computed.Load() - before; n != 0 {
		t.Fatalf("%d unaffordable queries were computed", n)
	}
}

// TestAnalystQuotas checks the per-analyst in-flight quota (429 beyond it,
// another analyst unaffected) and the ledger quota (429 once reached,
// nothing computed or charged).
func TestAnalystQuotas(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir(), AnalystInFlight: 2, LedgerQuota: 1})
	s.registerArrests("arrests", 1, []string{"year"})
	aid, key := s.analyst("busy")
	_, other := s.analyst("other")
	var leaves []func()
	for range 2 {
		_, leave, err := s.srv.adm.Enter(aid)
		if err != nil {
			t.Fatal(err)
		}
		leaves = append(leaves, leave)
	}
	q := map[string]any{"kind": "cuboid", "epsilon": 0.1, "cuboid": []string{"sex"}}
	if st, _, raw := s.ask("arrests", key, q, ""); st != http.StatusTooManyRequests || !strings.Contains(errMsg(raw), "at most 2") {
		t.Fatalf("third query in flight: %d %s", st, raw)
	}
	if st, _, raw := s.ask("arrests", other, q, ""); st != http.StatusCreated {
		t.Fatalf("another analyst: %d %s", st, raw)
	}
	for _, l := range leaves {
		l()
	}
	if st, _, raw := s.ask("arrests", key, q, ""); st != http.StatusCreated {
		t.Fatalf("after the others finished: %d %s", st, raw)
	}
	// The ledger quota (1 byte) is now used up: the next distinct query
	// is refused before computing, the stored one still comes back.
	before, spent := s.srv.computed.Load(), s.budgetOf("arrests", key).SpentSteps
	q2 := map[string]any{"kind": "cuboid", "epsilon": 0.1, "cuboid": []string{"colour"}}
	if st, _, raw := s.ask("arrests", key, q2, ""); st != http.StatusTooManyRequests || !strings.Contains(errMsg(raw), "ledger quota") {
		t.Fatalf("over the ledger quota: %d %s", st, raw)
	}
	if st, _, raw := s.ask("arrests", key, q, ""); st != http.StatusOK {
		t.Fatalf("stored answer over the quota: %d %s", st, raw)
	}
	if s.srv.computed.Load() != before || s.budgetOf("arrests", key).SpentSteps != spent {
		t.Fatal("a query refused by the ledger quota was computed or charged")
	}
}

// TestPublicAnswersStoredOnce checks that free answers of public cuboids
// (and of linear queries on a table the invariants determine) are stored
// once, whatever the epsilon: distinct epsilons cannot grow the ledger
// without a charge.
func TestPublicAnswersStoredOnce(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerArrests("arrests", 1, []string{"year"})
	aid, key := s.analyst("spammer")
	for i := range 20 {
		q := map[string]any{"kind": "cuboid", "epsilon": 0.1 + float64(i)*1e-6, "cuboid": []string{"year"}}
		st, r, raw := s.ask("arrests", key, q, "")
		want := http.StatusOK
		if i == 0 {
			want = http.StatusCreated
		}
		if st != want || r.Steps != 0 {
			t.Fatalf("public cuboid, request %d: %d %s", i, st, raw)
		}
	}
	if es := s.ledger(aid, "arrests"); len(es) != 1 {
		t.Fatalf("20 requests for one public cuboid stored %d answers", len(es))
	}
	// A noisy cuboid at two epsilons is two queries.
	for _, eps := range []float64{0.1, 0.1 + 1e-6} {
		if st, _, raw := s.ask("arrests", key, map[string]any{"kind": "cuboid", "epsilon": eps, "cuboid": []string{"sex"}}, ""); st != http.StatusCreated {
			t.Fatalf("noisy cuboid at %v: %d %s", eps, st, raw)
		}
	}
}

// TestBudgetArithmetic checks charged and remaining in every answer: a new
// answer is charged its cost, a repeat nothing, and remaining is the budget
// left.
func TestBudgetArithmetic(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerArrests("arrests", 1, []string{"year"})
	_, key := s.analyst("counter")
	q := map[string]any{"kind": "cuboid", "epsilon": 0.25, "cuboid": []string{"sex"}}
	var out struct {
		Charged   *float64 `json:"charged"`
		Remaining *float64 `json:"remaining"`
	}
	for i, want := range [][2]float64{{0.25, 0.75}, {0, 0.75}} {
		_, _, raw := s.ask("arrests", key, q, "")
		mustUnmarshal(t, raw, &out)
		if out.Charged == nil || out.Remaining == nil || *out.Charged != want[0] || *out.Remaining != want[1] {
			t.Fatalf("request %d: %s; want charged %v remaining %v", i, raw, want[0], want[1])
		}
	}
}

// TestTinyEpsilon checks that an epsilon too small for the noise sampler is
// a 400 decided from the request, for cuboid queries as for linear ones.
func TestTinyEpsilon(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	req := DatasetRequest{ID: "arrests", Schema: arrestsSchema(t), Source: Source{CSV: filepath.Join(repoRoot(t), "data", "arrests.csv")},
		Policy: Policy{EpsilonPerAnalyst: 1, Invariants: [][]string{{"year"}}, Metric: &MetricPolicy{Default: 1}}}
	s.must(http.StatusCreated, "POST", "/admin/v1/datasets", s.admin, req, nil)
	_, key := s.analyst("tiny")
	for _, eps := range []float64{1e-9, 1e-11, 0x1p-39} {
		q := map[string]any{"kind": "cuboid", "epsilon": eps, "cuboid": []string{"sex", "agegroup"}}
		if st, _, raw := s.ask("arrests", key, q, ""); st != http.StatusBadRequest || !strings.Contains(errMsg(raw), "epsilon") {
			t.Fatalf("cuboid at epsilon %v: %d %s", eps, st, raw)
		}
		// Other kinds may answer or refuse, but never fail.
		for _, q := range []map[string]any{
			{"kind": "linear", "epsilon": eps, "queries": []LinearQuery{countQuery(1, map[string][]string{"sex": {"Male"}})}},
			{"kind": "prior", "epsilon": eps, "query": countQuery(1, map[string][]string{"sex": {"Male"}}), "prior": map[string]any{"values": []int{1, 2}, "probabilities": []float64{0.5, 0.5}}},
			{"kind": "dx", "epsilon": eps, "queries": []LinearQuery{countQuery(1, map[string][]string{"sex": {"Male"}})}},
		} {
			if st, _, raw := s.ask("arrests", key, q, ""); st != http.StatusBadRequest && st != http.StatusCreated {
				t.Errorf("%s at epsilon %v: %d %s", q["kind"], eps, st, raw)
			}
		}
	}
}

// TestHugeCounts asks the same queries of two datasets with the same schema
// and policy, one of which has a cell of 2^40 + 5 rows (synthetic, in
// memory): statuses and error texts must be the same, since no error after
// planning may depend on the data.
func TestHugeCounts(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerArrests("small", 4, []string{"year"})
	s.registerArrests("huge", 4, []string{"year"})
	d := s.srv.sets["huge"]
	// Above what registration accepts, as a dataset larger than today's
	// limits could be: errors must not depend on the counts at any size.
	d.cube.Counts[0] += 1<<40 + 5
	d.total += 1<<40 + 5
	d.inv = release.CubeInvariants(d.cube, d.exact)
	_, key := s.analyst("prober")
	bodies := []string{
		`{"kind":"cuboid","epsilon":0.5,"cuboid":["year","colour"]}`,
		`{"kind":"cuboid","epsilon":0.5,"cuboid":["sex"],"nonneg":true}`,
		`{"kind":"cuboid","epsilon":0.5,"cuboid":[]}`,
		`{"kind":"linear","epsilon":0.5,"queries":[{"terms":[{"where":{"year":["1997"]}}]}]}`,
		`{"kind":"linear","epsilon":0.5,"refine":true,"queries":[{"terms":[{"where":{"year":["1997"],"colour":["Black"]}}]},{"terms":[{"where":{"year":["1997"],"colour":["White"]}}]}]}`,
		`{"kind":"prior","epsilon":0.5,"query":{"terms":[{"where":{"year":["1997"]}}]},"prior":{"values":[1,2],"probabilities":[0.5,0.5]}}`,
	}
	for _, body := range bodies {
		var got [2]string
		for i, ds := range []string{"small", "huge"} {
			st, r, raw := s.ask(ds, key, body, "")
			got[i] = fmt.Sprintf("%d %s", st, errMsg(raw))
			if st == http.StatusCreated {
				got[i] = fmt.Sprintf("%d charged %d", st, r.Steps)
			}
		}
		if got[0] != got[1] {
			t.Errorf("%s:\n small: %s\n huge:  %s", body, got[0], got[1])
		}
	}
}

// TestDuplicateKeys checks that a JSON key given twice, at any depth, is
// refused in every request body.
func TestDuplicateKeys(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerArrests("arrests", 1, []string{"year"})
	_, key := s.analyst("dup")
	for _, body := range []string{
		`{"kind":"cuboid","epsilon":5,"epsilon":0.1,"cuboid":["sex"]}`,
		`{"kind":"linear","epsilon":0.1,"queries":[{"terms":[{"where":{"year":["1997"],"year":["1998"]}}]}]}`,
		`{"kind":"prior","epsilon":0.1,"query":{"terms":[{}]},"prior":{"values":[1,2],"probabilities":[0.5,0.5],"values":[3,4]}}`,
	} {
		if st, _, raw := s.ask("arrests", key, body, ""); st != http.StatusBadRequest || !strings.Contains(errMsg(raw), "duplicate key") {
			t.Errorf("%s: %d %s", body, st, raw)
		}
	}
	st, raw := s.call("POST", "/admin/v1/analysts", s.admin, `{"name":"a","name":"b"}`, nil, nil)
	if st != http.StatusBadRequest || !strings.Contains(errMsg(raw), `duplicate key "name"`) {
		t.Errorf("admin body: %d %s", st, raw)
	}
}

// TestLongInputsClipped checks that oversized client strings are not echoed
// in full in error messages.
func TestLongInputsClipped(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerArrests("arrests", 1, []string{"year"})
	_, key := s.analyst("long")
	long := strings.Repeat("x", 100_000)
	for _, body := range []any{
		map[string]any{"kind": long, "epsilon": 0.1},
		map[string]any{"kind": "linear", "epsilon": 0.1, "queries": []LinearQuery{{Terms: []Term{{Where: map[string][]string{long: {"a"}}}}}}},
		map[string]any{"kind": "cuboid", "epsilon": 0.1, "cuboid": []string{long}},
	} {
		st, _, raw := s.ask("arrests", key, body, "")
		if st != http.StatusBadRequest || len(raw) > 2*maxMessage {
			t.Errorf("%d, %d bytes: %.200s", st, len(raw), raw)
		}
	}
	st, raw := s.call("POST", "/admin/v1/datasets", s.admin, DatasetRequest{ID: long, Schema: arrestsSchema(t), Policy: Policy{EpsilonPerAnalyst: 1}}, nil, nil)
	if st != http.StatusBadRequest || len(raw) > 2*maxMessage {
		t.Errorf("long dataset id: %d, %d bytes", st, len(raw))
	}
}

// TestSourceDirs checks that file sources are confined to the source
// directories (symbolic links resolved), refused altogether without one, and
// that errors never quote a file's contents.
func TestSourceDirs(t *testing.T) {
	allowed := t.TempDir()
	outside := t.TempDir()
	secret := "root:SECRET-HASH:19000:0:99999:7:::"
	if err := os.WriteFile(filepath.Join(outside, "shadow"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(allowed, "notcsv"), []byte(secret+"\nmore\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "shadow"), filepath.Join(allowed, "link.csv")); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(repoRoot(t), "data", "arrests.csv"))
	lines := strings.SplitAfter(string(data), "\n")
	bad := lines[0] + strings.Replace(lines[1], "Male", "SECRET-VALUE", 1)
	if err := os.WriteFile(filepath.Join(allowed, "bad.csv"), []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(allowed, "ok.csv"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	reg := func(s *testServer, src Source) (int, string) {
		req := DatasetRequest{ID: "d", Schema: arrestsSchema(t), Source: src, Policy: Policy{EpsilonPerAnalyst: 1}}
		st, raw := s.call("POST", "/admin/v1/datasets", s.admin, req, nil, nil)
		return st, errMsg(raw)
	}
	none := startServer(t, Config{DataDir: t.TempDir(), SourceDirs: []string{}})
	if st, msg := reg(none, Source{CSV: filepath.Join(allowed, "ok.csv")}); st != http.StatusBadRequest || !strings.Contains(msg, "--source-dir") {
		t.Fatalf("no source dirs: %d %s", st, msg)
	}
	s := startServer(t, Config{DataDir: t.TempDir(), SourceDirs: []string{allowed}})
	for _, tc := range []struct {
		name string
		src  Source
		want string
	}{
		{"outside", Source{CSV: filepath.Join(outside, "shadow")}, "outside the source directories"},
		{"dot-dot", Source{CSV: filepath.Join(allowed, "..", filepath.Base(outside), "shadow")}, "outside the source directories"},
		{"symlink out", Source{CSV: filepath.Join(allowed, "link.csv")}, "outside the source directories"},
		{"sqlite outside", Source{SQL: &SQLSource{Driver: "sqlite", DSN: filepath.Join(outside, "shadow"), Table: "t"}}, "outside the source directories"},
		{"not a csv", Source{CSV: filepath.Join(allowed, "notcsv")}, `no column "year"`},
		{"bad value", Source{CSV: filepath.Join(allowed, "bad.csv")}, "row 2"},
	} {
		st, msg := reg(s, tc.src)
		if st != http.StatusBadRequest || !strings.Contains(msg, tc.want) || strings.Contains(msg, "SECRET") {
			t.Errorf("%s: %d %s", tc.name, st, msg)
		}
	}
	if st, msg := reg(s, Source{CSV: filepath.Join(allowed, "ok.csv")}); st != http.StatusCreated {
		t.Fatalf("a file inside the source directory: %d %s", st, msg)
	}
	// A relative name is taken inside the source directory, never from
	// the server's working directory, and cannot climb out of it.
	for _, tc := range []struct {
		id, csv string
		status  int
		want    string
	}{
		{"rel", "ok.csv", http.StatusCreated, ""},
		{"relout", filepath.Join("..", filepath.Base(outside), "shadow"), http.StatusBadRequest, "outside the source directories"},
	} {
		req := DatasetRequest{ID: tc.id, Schema: arrestsSchema(t), Source: Source{CSV: tc.csv}, Policy: Policy{EpsilonPerAnalyst: 1}}
		st, raw := s.call("POST", "/admin/v1/datasets", s.admin, req, nil, nil)
		if st != tc.status || !strings.Contains(errMsg(raw), tc.want) || strings.Contains(string(raw), "SECRET") {
			t.Errorf("relative %s: %d %s", tc.csv, st, raw)
		}
	}
}

// TestSensitivityPolicy checks the curator's sensitivity override: below
// the value knowdp computes it is refused (naming that value), above it is
// used, and where knowdp cannot compute it the answers say that their
// guarantee rests on the curator's claim.
func TestSensitivityPolicy(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	csv := filepath.Join(repoRoot(t), "data", "arrests.csv")
	reg := func(id string, sens int, inv ...[]string) (int, string) {
		req := DatasetRequest{ID: id, Schema: arrestsSchema(t), Source: Source{CSV: csv}, Policy: Policy{EpsilonPerAnalyst: 1, Invariants: inv, Sensitivity: sens}}
		st, raw := s.call("POST", "/admin/v1/datasets", s.admin, req, nil, nil)
		return st, errMsg(raw)
	}
	d, _ := buildDataset(context.Background(), DatasetRequest{ID: "x", Schema: arrestsSchema(t), Source: Source{CSV: csv}, Policy: Policy{EpsilonPerAnalyst: 1, Invariants: [][]string{{"year"}}}}, DefaultCellLimit, []string{filepath.Dir(csv)})
	computed := d.sens.Value
	if st, msg := reg("low", computed-1, []string{"year"}); st != http.StatusBadRequest || !strings.Contains(msg, fmt.Sprintf("generic sensitivity knowdp computes for these invariants, %d", computed)) {
		t.Fatalf("override %d below the computed %d: %d %s", computed-1, computed, st, msg)
	}
	if st, msg := reg("high", computed+3, []string{"year"}); st != http.StatusCreated {
		t.Fatalf("override above: %d %s", st, msg)
	}
	if st, msg := reg("claim", 5, []string{"year", "colour"}, []string{"colour", "sex"}, []string{"sex", "year"}); st != http.StatusCreated {
		t.Fatalf("override without a closed form: %d %s", st, msg)
	}
	_, key := s.analyst("checker")
	lin := map[string]any{"kind": "linear", "epsilon": 0.1, "queries": []LinearQuery{countQuery(1, map[string][]string{"agegroup": {"12-17"}})}}
	type priv struct {
		// Guarantee qualifies a cuboid answer; Privacy.Guarantee a linear
		// one.
		Guarantee string `json:"guarantee"`
		Privacy   struct {
			Guarantee          string `json:"guarantee"`
			GenericSensitivity int    `json:"generic_sensitivity"`
			Sensitivity        int    `json:"sensitivity"`
		} `json:"privacy"`
	}
	var p priv
	st, r, raw := s.ask("high", key, lin, "")
	if mustUnmarshal(t, r.Answer, &p); st != http.StatusCreated || p.Privacy.GenericSensitivity != computed+3 || p.Privacy.Guarantee != "" {
		t.Fatalf("high: %d %s", st, raw)
	}
	var view datasetView
	s.must(http.StatusOK, "GET", "/v1/datasets/claim", key, nil, &view)
	if !strings.Contains(view.Guarantee, "conditional") || view.GenericSensitivity != 5 {
		t.Fatalf("the dataset view does not say the guarantee is conditional: %+v", view)
	}
	for _, q := range []any{lin, map[string]any{"kind": "cuboid", "epsilon": 0.1, "cuboid": []string{"agegroup"}}} {
		p = priv{}
		st, r, raw := s.ask("claim", key, q, "")
		if mustUnmarshal(t, r.Answer, &p); st != http.StatusCreated || !strings.Contains(p.Privacy.Guarantee+p.Guarantee, "conditional on the curator's sensitivity claim") {
			t.Fatalf("claim: %d %s", st, raw)
		}
	}
}

// TestAdminKeys checks that admin keys are listable, rotatable and
// revocable, and that a revoked admin key stays revoked across a restart
// that names it as the admin key.
func TestAdminKeys(t *testing.T) {
	forEachStore(t, func(t *testing.T, cfg Config) {
		first := GenerateKey()
		cfg.AdminKey = first
		s := startServer(t, cfg)
		var issued struct {
			Key struct{ ID string } `json:"key"`
			API string              `json:"api_key"`
		}
		s.must(http.StatusCreated, "POST", "/admin/v1/admin-keys", first, nil, &issued)
		var list struct {
			Keys []store.Key `json:"keys"`
		}
		s.must(http.StatusOK, "GET", "/admin/v1/admin-keys", issued.API, nil, &list)
		if len(list.Keys) != 2 {
			t.Fatalf("%d admin keys listed, want 2", len(list.Keys))
		}
		firstID, _ := store.KeyID(first)
		s.must(http.StatusOK, "DELETE", "/admin/v1/keys/"+firstID, issued.API, nil, nil)
		if st, _ := s.call("GET", "/admin/v1/admin-keys", first, nil, nil, nil); st != http.StatusUnauthorized {
			t.Fatalf("revoked admin key: status %d", st)
		}
		s.ts.Close()
		s.srv.Close()
		// Restarting with the revoked key as the admin key fails; with the
		// other one, the revoked key is still refused.
		if _, _, err := Open(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "revoked") {
			t.Fatalf("restart with a revoked admin key: %v", err)
		}
		cfg.AdminKey = issued.API
		s2 := startServer(t, cfg)
		if st, _ := s2.call("GET", "/admin/v1/admin-keys", first, nil, nil, nil); st != http.StatusUnauthorized {
			t.Fatalf("revoked admin key after restart: status %d", st)
		}
		s2.must(http.StatusOK, "GET", "/admin/v1/admin-keys", issued.API, nil, &list)
		if len(list.Keys) != 2 || list.Keys[0].Revoked == nil || list.Keys[1].Revoked != nil {
			t.Fatalf("after restart: %+v", list.Keys)
		}
	})
}

// TestGeneratedAdminKeyOut checks that a generated admin key is passed to
// AdminKeyOut before it is stored, and not stored if that fails.
func TestGeneratedAdminKeyOut(t *testing.T) {
	dir := t.TempDir()
	fail := errors.New("no terminal")
	if _, _, err := Open(context.Background(), Config{DataDir: dir, AdminKeyOut: func(string) error { return fail }}); !errors.Is(err, fail) {
		t.Fatalf("AdminKeyOut failing: %v", err)
	}
	var got string
	srv, shown, err := Open(context.Background(), Config{DataDir: dir, AdminKeyOut: func(k string) error { got = k; return nil }})
	if err != nil || got == "" || shown != got {
		t.Fatalf("second start: %v, out %q, shown %q", err, got, shown)
	}
	srv.Close()
}

// TestPrivateFiles checks that the SQLite database and its WAL files are
// readable by their owner only.
func TestPrivateFiles(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, Config{DataDir: dir})
	s.registerArrests("arrests", 1)
	for _, name := range []string{"knowdp.db", "knowdp.db-wal", "knowdp.db-shm"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", name, fi.Mode().Perm())
		}
	}
}

// TestStoreDown checks that an unreachable PostgreSQL gives 503 with
// Retry-After, not 500.
func TestStoreDown(t *testing.T) {
	cfg := Config{Postgres: pgtest.Schema(t)}
	s := startServer(t, cfg)
	s.registerArrests("arrests", 1)
	_, key := s.analyst("waiting")
	// Point the store at a port where nothing listens.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dead, err := store.OpenPostgres("postgres://nobody@" + addr + "/x?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	live := s.srv.st
	t.Cleanup(func() { s.srv.st = live })
	s.srv.st = dead
	req, _ := http.NewRequest("POST", s.ts.URL+"/v1/datasets/arrests/queries", strings.NewReader(`{"kind":"cuboid","epsilon":0.1,"cuboid":["sex"]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := s.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body struct {
		Error struct{ Code string } `json:"error"`
	}
	json.NewDecoder(res.Body).Decode(&body)
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" || body.Error.Code != "unavailable" {
		t.Fatalf("store down: %d Retry-After %q code %q", res.StatusCode, res.Header.Get("Retry-After"), body.Error.Code)
	}
}

// TestRefineWorkBound checks that a refinement too costly to compute is
// refused from the request alone, before budget or data are touched.
func TestRefineWorkBound(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerArrests("arrests", 1, []string{"year"})
	_, key := s.analyst("heavy")
	qs := make([]LinearQuery, 600)
	for i := range qs {
		qs[i] = countQuery(i+1, map[string][]string{"year": {"1997"}})
	}
	q := map[string]any{"kind": "linear", "epsilon": 0.5, "refine": true, "queries": qs}
	before := s.srv.computed.Load()
	if st, _, raw := s.ask("arrests", key, q, ""); st != http.StatusBadRequest || !strings.Contains(errMsg(raw), "too many to refine together") {
		t.Fatalf("600 refined queries: %d %s", st, raw)
	}
	if s.srv.computed.Load() != before || s.budgetOf("arrests", key).SpentSteps != 0 {
		t.Fatal("a refused refinement was computed or charged")
	}
}

// TestFailureCharged checks that a computation failing after planning is
// stored and charged like an answer, and reported with a text that does not
// depend on the cause.
func TestFailureCharged(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerArrests("arrests", 1, []string{"year"})
	aid, _ := s.analyst("unlucky")
	d := s.srv.sets["arrests"]
	var texts []string
	for i, cause := range []string{"noise: element 0 = 2147483653 cannot be noised", "something else"} {
		pl := &plan{kind: "cuboid", hash: fmt.Sprint("h", i), request: []byte(`{}`), uniform: steps(0.125),
			compute: func(context.Context, *noise.Rand) (any, error) { return nil, errors.New(cause) }}
		ans, meas, err := s.srv.computeAnswer(context.Background(), pl)
		if err != nil || string(ans) != failedAnswer || meas != nil {
			t.Fatalf("%s: %s %v", cause, ans, err)
		}
		e := &store.Entry{AnalystID: aid, DatasetID: d.id, Hash: pl.hash, Kind: pl.kind, Request: pl.request, Answer: ans}
		stored, _, _, err := s.srv.st.Charge(e, pl.cost(), d.schema.Cells(), d.budget)
		if err != nil || !failed(stored) || stored.Charge != steps(0.125) {
			t.Fatalf("%s: stored %+v, %v", cause, stored, err)
		}
		texts = append(texts, strings.Replace(failedError(stored).Error(), stored.ID, "ID", 1))
	}
	if texts[0] != texts[1] || strings.Contains(texts[0], "noise") {
		t.Fatalf("failure texts differ or name the cause: %q", texts)
	}
}
