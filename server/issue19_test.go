package server

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/knowdp/knowdp/internal/pgtest"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/server/store"
)

// TestDisconnectCharged: a client that goes away once its query has been
// admitted is charged, its answer is stored, and a retry with the same
// Idempotency-Key replays it free.
func TestDisconnectCharged(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerArrests("arrests", 1, []string{"year"})
	aid, key := s.analyst("leaver")
	entered := make(chan struct{}, 1)
	s.srv.afterAdmit = func(ctx, _ context.Context) {
		entered <- struct{}{}
		// Wait until the server has noticed that the client is gone.
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
	}
	for _, tc := range []struct {
		name, body, idem string
	}{
		{"cuboid", `{"kind":"cuboid","epsilon":0.25,"cuboid":["sex","agegroup"]}`, "gone-1"},
		{"workload", `{"kind":"cuboid","epsilon":0.25,"cuboids":[["sex"],["agegroup"]]}`, "gone-2"},
		{"linear", `{"kind":"linear","epsilon":0.25,"queries":[{"terms":[{"where":{"sex":["Male"]}}]}]}`, "gone-3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := s.budgetOf("arrests", key).SpentSteps
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, "POST", s.ts.URL+"/v1/datasets/arrests/queries", strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Idempotency-Key", tc.idem)
			done := make(chan error, 1)
			go func() {
				res, err := s.ts.Client().Do(req)
				if err == nil {
					res.Body.Close()
				}
				done <- err
			}()
			select {
			case <-entered:
			case <-time.After(10 * time.Second):
				t.Fatal("the query was never admitted")
			}
			cancel()
			if err := <-done; err == nil {
				t.Fatal("the client's request did not fail")
			}
			// The charge is committed after the client left: wait for it.
			var es []*store.Entry
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if es = s.ledger(aid, "arrests"); len(es) > 0 && es[0].IdemKey == tc.idem {
					break
				}
			}
			if len(es) == 0 || es[0].IdemKey != tc.idem || es[0].Charge != steps(0.25) {
				t.Fatalf("after the disconnect the ledger has %d entries (latest %+v); want the answer charged %d steps", len(es), es, steps(0.25))
			}
			if spent := s.budgetOf("arrests", key).SpentSteps; spent != before+steps(0.25) {
				t.Fatalf("spent %d steps, want %d", spent, before+steps(0.25))
			}
			st, r, raw := s.ask("arrests", key, tc.body, tc.idem)
			if st != http.StatusOK || !r.Repeat || r.ID != es[0].ID || !bytes.Equal(r.Answer, es[0].Answer) {
				t.Fatalf("retry with the key: %d %s", st, raw)
			}
			if spent := s.budgetOf("arrests", key).SpentSteps; spent != before+steps(0.25) {
				t.Fatalf("the retry was charged: spent %d steps", spent)
			}
		})
	}
}

// TestComputeTimeoutCharged: a computation that outlives the server's
// compute timeout is charged like a failed answer (whether it finishes in
// time may depend on the data), not refused for free.
func TestComputeTimeoutCharged(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir(), ComputeTimeout: 50 * time.Millisecond})
	s.registerArrests("arrests", 1, []string{"year"})
	aid, key := s.analyst("slow")
	// The computation starts only once its time is up.
	s.srv.afterAdmit = func(_, compute context.Context) { <-compute.Done() }
	st, _, raw := s.ask("arrests", key, `{"kind":"cuboid","epsilon":0.25,"cuboids":[["sex"],["agegroup"]],"split":"equal"}`, "slow-1") // equal: no search to outlast the timeout
	if st != http.StatusInternalServerError || !strings.Contains(errMsg(raw), "was charged") {
		t.Fatalf("timed-out computation: %d %s", st, raw)
	}
	if es := s.ledger(aid, "arrests"); len(es) != 1 || !failed(es[0]) || es[0].Charge != steps(0.25) {
		t.Fatalf("ledger %+v", es)
	}
}

// TestStrictFieldNames: field names match exactly, in every request body
// and at every depth; case variants, unknown fields and numbers sent as
// strings are refused with a 400 naming the field, and nothing is charged
// or registered.
func TestStrictFieldNames(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerArrests("arrests", 1, []string{"year"})
	_, key := s.analyst("casey")
	for _, tc := range []struct{ body, want string }{
		{`{"kind":"cuboid","epsilon":0.1,"EPSILON":0.2,"cuboid":["sex"]}`, `"EPSILON"`},
		{`{"kind":"cuboid","Epsilon":0.2,"cuboid":["sex"]}`, `"Epsilon"`},
		{`{"KIND":"cuboid","epsilon":0.2,"cuboid":["sex"]}`, `"KIND"`},
		{`{"kind":"cuboid","epsilon":0.2,"cuboid":["sex"],"ſplit":"equal"}`, `"ſplit"`},
		{`{"kind":"linear","epsilon":0.1,"queries":[{"terms":[{"where":{"sex":["Male"]},"coef":"1"}]}]}`, "queries[0].terms[0].coef"},
		{`{"kind":"linear","epsilon":0.1,"queries":[{"terms":[{"where":{"sex":["Male"]},"COEF":3}]}]}`, `"COEF"`},
		{`{"kind":"linear","epsilon":0.1,"queries":[{"TERMS":[{"where":{"sex":["Male"]}}]}]}`, `"TERMS"`},
		{`{"kind":"linear","epsilon":0.1,"queries":[{"terms":[{"Where":{"sex":["Male"]}}]}]}`, `"Where"`},
		{`{"kind":"linear","epsilon":"0.1","queries":[{"terms":[{}]}]}`, "epsilon"},
		{`{"kind":"prior","epsilon":0.1,"query":{"terms":[{}]},"prior":{"values":[1,2],"probabilities":[0.5,0.5],"PROBABILITIES":[0.9,0.1]}}`, `"PROBABILITIES"`},
		{`{"kind":"cuboid","epsilon":0.1,"cuboid":["sex"],"unknown":1}`, `"unknown"`},
	} {
		st, _, raw := s.ask("arrests", key, tc.body, "")
		if st != http.StatusBadRequest || !strings.Contains(errMsg(raw), tc.want) {
			t.Errorf("%s: %d %s, want 400 naming %s", tc.body, st, raw, tc.want)
		}
	}
	if b := s.budgetOf("arrests", key); b.SpentSteps != 0 {
		t.Fatalf("refused requests were charged: %+v", b)
	}
	schema := string(arrestsSchema(t))
	csv, _ := json.Marshal(filepath.Join(repoRoot(t), "data", "arrests.csv"))
	for _, tc := range []struct{ path, body, want string }{
		{"/admin/v1/datasets", `{"id":"big","schema":` + schema + `,"source":{"csv":` + string(csv) + `},"policy":{"epsilon_per_analyst":1,"EPSILON_PER_ANALYST":1000}}`, `"EPSILON_PER_ANALYST"`},
		{"/admin/v1/datasets", `{"id":"big","schema":` + schema + `,"source":{"CSV":` + string(csv) + `},"policy":{"epsilon_per_analyst":1}}`, `"CSV"`},
		{"/admin/v1/datasets", `{"id":"big","Schema":` + schema + `,"schema":` + schema + `,"source":{"csv":` + string(csv) + `},"policy":{"epsilon_per_analyst":1}}`, `"Schema"`},
		{"/admin/v1/datasets", `{"id":"big","schema":{"dimensions":[{"name":"sex","values":["F","M"],"VALUES":["X"]}]},"source":{"csv":` + string(csv) + `},"policy":{"epsilon_per_analyst":1}}`, `"VALUES"`},
		{"/admin/v1/datasets", `{"id":"big","schema":` + schema + `,"source":{"csv":` + string(csv) + `},"policy":{"epsilon_per_analyst":1,"metric":{"default":1,"Default":9}}}`, `"Default"`},
		{"/admin/v1/analysts", `{"name":"x","NAME":"y"}`, `"NAME"`},
	} {
		st, raw := s.call("POST", tc.path, s.admin, tc.body, nil, nil)
		if st != http.StatusBadRequest || !strings.Contains(errMsg(raw), tc.want) {
			t.Errorf("%s %.120s: %d %s, want 400 naming %s", tc.path, tc.body, st, raw, tc.want)
		}
	}
	if st, _ := s.call("GET", "/admin/v1/datasets/big", s.admin, nil, nil, nil); st != http.StatusNotFound {
		t.Fatalf("a refused registration registered the dataset: %d", st)
	}
}

// TestPostgresOutage: PostgreSQL connections killed by the administrator
// (SQLSTATE 57P01) and cut at the network mid-load give 503s with
// Retry-After, never a 500; a 503 charged nothing that its retry with the
// same Idempotency-Key does not return.
func TestPostgresOutage(t *testing.T) {
	dsn := pgtest.Schema(t)
	proxy := newCutProxy(t, dsn)
	u, _ := url.Parse(dsn)
	q := u.Query()
	q.Set("application_name", "knowdp_outage_test")
	u.RawQuery = q.Encode()
	u.Host = proxy.addr
	s := startServer(t, Config{Postgres: u.String(), RateLimit: 0})
	s.registerArrests("arrests", 1000, []string{"year"})
	aid, key := s.analyst("outage")
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()

	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		failures []string
		charged  = map[string]int64{} // idempotency key -> charge, from 201s
		retry    []string
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var n atomic.Int64
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := n.Add(1)
				idem := fmt.Sprintf("o-%d-%d", w, i)
				// A workload of one cuboid: always measured afresh and
				// charged (a one-cuboid query of {sex} would be derived
				// from the first answer's kept measurement, free), and
				// its measurements are stored with it under the outage.
				body := fmt.Sprintf(`{"kind":"cuboid","epsilon":%g,"cuboids":[["sex"]]}`, 0.001+float64(i)*1e-6)
				st, r, raw := s.ask("arrests", key, body, idem)
				mu.Lock()
				statuses[st]++
				switch st {
				case http.StatusCreated:
					charged[idem] = r.Steps
				case http.StatusServiceUnavailable:
					if !strings.Contains(string(raw), `"unavailable"`) && !strings.Contains(string(raw), `"timeout"`) {
						failures = append(failures, fmt.Sprintf("503 with %s", raw))
					}
					retry = append(retry, idem+" "+body)
				default:
					failures = append(failures, fmt.Sprintf("%d %s", st, raw))
				}
				mu.Unlock()
			}
		}()
	}
	time.Sleep(150 * time.Millisecond)
	for range 2 {
		// The administrator terminates the server's backends (57P01).
		if _, err := admin.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'knowdp_outage_test'`); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		// The network fails: every connection is cut and new ones are
		// refused for a while.
		proxy.cut(true)
		time.Sleep(150 * time.Millisecond)
		proxy.cut(false)
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	// Check the Retry-After header on a 503 directly.
	proxy.cut(true)
	req, _ := http.NewRequest("POST", s.ts.URL+"/v1/datasets/arrests/queries", strings.NewReader(`{"kind":"cuboid","epsilon":0.5,"cuboid":["sex"]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := s.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Errorf("with the database cut off: %d, Retry-After %q", res.StatusCode, res.Header.Get("Retry-After"))
	}
	proxy.cut(false)
	t.Logf("statuses under the outage: %v", statuses)
	if statuses[http.StatusServiceUnavailable] == 0 || statuses[http.StatusCreated] == 0 {
		t.Errorf("the outage was not exercised: %v", statuses)
	}
	for _, f := range failures {
		t.Error(f)
	}
	// A 503 charged nothing, except where the failure hid a committed
	// charge; then the retry with its key returns that answer free. So
	// every ledger entry is an answer the client got or can get with its
	// key, and spent is their sum.
	unavailable := map[string]string{}
	for _, r := range retry {
		idem, body, _ := strings.Cut(r, " ")
		unavailable[idem] = body
	}
	var es []*store.Entry
	for range 100 {
		// The pool still holds connections the outage killed.
		if es, err = s.srv.st.Entries(context.Background(), aid, "arrests", 0, 1<<30); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	ambiguous := 0
	for _, e := range es {
		sum += e.Charge
		if c, ok := charged[e.IdemKey]; ok {
			if c != e.Charge {
				t.Errorf("%s: charged %d, the ledger says %d", e.IdemKey, c, e.Charge)
			}
			continue
		}
		body, ok := unavailable[e.IdemKey]
		if !ok {
			t.Errorf("ledger entry %s (key %q) was never answered", e.ID, e.IdemKey)
			continue
		}
		ambiguous++
		var st int
		var r response
		for range 50 {
			if st, r, _ = s.ask("arrests", key, body, e.IdemKey); st != http.StatusServiceUnavailable {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if st != http.StatusOK || !r.Repeat || r.ID != e.ID {
			t.Errorf("retry of %s, whose charge committed behind a 503: %d %+v", e.IdemKey, st, r)
		}
	}
	t.Logf("%d answers whose 503 hid a committed charge", ambiguous)
	if spent := s.budgetOf("arrests", key).SpentSteps; spent != sum {
		t.Fatalf("spent %d steps, the ledger's charges sum to %d", spent, sum)
	}
}

// cutProxy forwards TCP connections to a PostgreSQL server until it is cut.
type cutProxy struct {
	addr   string
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]bool
}

func newCutProxy(t *testing.T, dsn string) *cutProxy {
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{addr: ln.Addr().String(), target: u.Host, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { ln.Close(); p.cut(true) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			down := p.down
			p.mu.Unlock()
			if down {
				c.Close()
				continue
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *cutProxy) serve(c net.Conn) {
	b, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[b] = true, true
	p.mu.Unlock()
	go func() { io.Copy(b, c); b.Close() }()
	io.Copy(c, b)
	c.Close()
}

// cut closes every forwarded connection and, while down, every new one.
func (p *cutProxy) cut(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			c.Close()
		}
		clear(p.conns)
	}
}

// bigSchema has 2^20 base cells.
func bigSchema() json.RawMessage {
	var dims []string
	for d := range 5 {
		var vals []string
		for v := range 16 {
			vals = append(vals, fmt.Sprintf(`"v%d"`, v))
		}
		dims = append(dims, fmt.Sprintf(`{"name":"d%d","values":[%s]}`, d, strings.Join(vals, ",")))
	}
	return json.RawMessage(`{"dimensions":[` + strings.Join(dims, ",") + `]}`)
}

// registerBig registers a dataset of a few rows on bigSchema.
func (s *testServer) registerBig(id string, eps float64) {
	s.t.Helper()
	path := filepath.Join(s.t.(*testing.T).TempDir(), id+".csv")
	if err := os.WriteFile(path, []byte("d0,d1,d2,d3,d4\nv1,v2,v3,v4,v5\nv0,v0,v0,v0,v0\n"), 0o600); err != nil {
		s.t.Fatal(err)
	}
	req := DatasetRequest{ID: id, Schema: bigSchema(), Source: Source{CSV: path}, Policy: Policy{EpsilonPerAnalyst: eps}}
	s.must(http.StatusCreated, "POST", "/admin/v1/datasets", s.admin, req, nil)
}

// TestRefusedBeforePlanning: a query the analyst's budget cannot pay is
// refused from the request and the budget alone, before it is planned (a
// linear query over 2^20 cells is not expanded); free answers (a repeat, a
// public answer) still come back; and refused work is counted against the
// key's rate limit.
func TestRefusedBeforePlanning(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerBig("big", 1)
	s.registerArrests("arrests", 1, []string{"year"})
	_, key := s.analyst("exhausted")
	small := `{"kind":"linear","epsilon":0.5,"queries":[{"terms":[{"where":{"d0":["v1"],"d1":["v2"],"d2":["v3"],"d3":["v4"]}}]}]}`
	if st, _, raw := s.ask("big", key, small, "small-1"); st != http.StatusCreated {
		t.Fatalf("%d %s", st, raw)
	}
	if st, _, raw := s.ask("big", key, `{"kind":"cuboid","epsilon":0.5,"cuboid":["d0"]}`, ""); st != http.StatusCreated {
		t.Fatalf("%d %s", st, raw)
	}
	// The linear losses are 0.5 on 16 cells and 0 elsewhere: a linear
	// query at epsilon 1 costs at least 0.5, and 0 are left.
	all := `{"kind":"linear","epsilon":1,"queries":[{"terms":[{}]}]}`
	for _, tc := range []struct {
		name, ds, body, idem string
		want                 int
		planned              bool
	}{
		{"linear over 2^20 cells", "big", all, "", http.StatusForbidden, false},
		{"cuboid of 2^16 cells", "big", `{"kind":"cuboid","epsilon":0.1,"cuboid":["d0","d1","d2","d3"]}`, "", http.StatusForbidden, false},
		{"small cuboid: planned to look for its stored answer", "big", `{"kind":"cuboid","epsilon":0.1,"cuboid":["d1"]}`, "", http.StatusForbidden, true},
		{"prior", "big", `{"kind":"prior","epsilon":0.1,"query":{"terms":[{}]},"prior":{"values":[1,2],"probabilities":[0.5,0.5]}}`, "", http.StatusForbidden, false},
		{"repeat by key", "big", small, "small-1", http.StatusOK, true},
		{"repeat by text", "big", small, "", http.StatusOK, true},
	} {
		before := s.srv.planned.Load()
		st, _, raw := s.ask(tc.ds, key, tc.body, tc.idem)
		if st != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, st, raw, tc.want)
		}
		if planned := s.srv.planned.Load() != before; planned != tc.planned {
			t.Errorf("%s: planned %v, want %v", tc.name, planned, tc.planned)
		}
	}
	// Rate limit: refused planning work costs tokens (16 for 2^20 cells),
	// and a request whose planning the bucket could not pay if it were
	// refused is refused before planning. With a bucket of 30 and no
	// refill to speak of, one planned refusal of a 2^20-cell query leaves
	// too little for another.
	r := startServer(t, Config{DataDir: t.TempDir(), RateLimit: 1e-6, RateBurst: 30})
	r.registerBig("big", 1)
	_, rkey := r.analyst("prober")
	// 0.6 on a few cells: a later query on every cell at 1 passes the
	// pre-check (it might cost only 0.4) but costs 1 once planned.
	if st, _, raw := r.ask("big", rkey, `{"kind":"linear","epsilon":0.6,"queries":[{"terms":[{"where":{"d0":["v1"]}}]}]}`, ""); st != http.StatusCreated {
		t.Fatalf("%d %s", st, raw)
	}
	for i, want := range []struct {
		status  int
		planned bool
	}{{http.StatusForbidden, true}, {http.StatusTooManyRequests, false}} {
		body := fmt.Sprintf(`{"kind":"linear","epsilon":1,"queries":[{"terms":[{"coef":%d}]}]}`, i+1)
		before := r.srv.planned.Load()
		st, _, raw := r.ask("big", rkey, body, "")
		if planned := r.srv.planned.Load() != before; st != want.status || planned != want.planned {
			t.Fatalf("costly request %d: %d %s (planned %v); want %d, planned %v", i, st, raw, planned, want.status, want.planned)
		}
	}
	// A cheap request still gets through.
	if st, _, raw := r.ask("big", rkey, `{"kind":"linear","epsilon":0.1,"queries":[{"terms":[{"where":{"d0":["v2"],"d1":["v2"]}}]}]}`, ""); st != http.StatusCreated {
		t.Fatalf("a cheap request after the costly refusals: %d %s", st, raw)
	}
}

// TestImpossibleCounts: a source whose counts are not non-negative integers
// is refused at registration; a stored dataset that cannot be loaded does
// not stop the server from starting: it is marked unavailable, the curator
// is told why, and the other datasets are served.
func TestImpossibleCounts(t *testing.T) {
	t.Run("postgres source", func(t *testing.T) {
		dsn := pgtest.Schema(t)
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		loadTable(t, "pgx", dsn, readArrests(t)[:50])
		// A count(*) that counts down, found before pg_catalog's.
		for _, stmt := range []string{
			`CREATE FUNCTION down(bigint) RETURNS bigint LANGUAGE sql IMMUTABLE AS 'SELECT $1 - 1'`,
			`CREATE AGGREGATE count(*) (sfunc = down, stype = bigint, initcond = '0')`,
		} {
			if _, err := db.Exec(stmt); err != nil {
				t.Fatal(err)
			}
		}
		u, _ := url.Parse(dsn)
		q := u.Query()
		q.Set("search_path", q.Get("search_path")+",pg_catalog")
		u.RawQuery = q.Encode()
		s := startServer(t, Config{DataDir: t.TempDir()})
		req := DatasetRequest{ID: "neg0", Schema: arrestsSchema(t), Source: Source{SQL: &SQLSource{Driver: "postgres", DSN: u.String(), Table: "arrests"}}, Policy: Policy{EpsilonPerAnalyst: 1}}
		st, raw := s.call("POST", "/admin/v1/datasets", s.admin, req, nil, nil)
		if st != http.StatusBadRequest || !strings.Contains(errMsg(raw), "negative count") {
			t.Fatalf("negative counts: %d %s", st, raw)
		}
	})
	t.Run("stored", func(t *testing.T) {
		dir := t.TempDir()
		s := startServer(t, Config{DataDir: dir})
		s.registerArrests("good", 1, []string{"year"})
		s.registerArrests("bad", 1, []string{"year"})
		_, key := s.analyst("reader")
		s.ts.Close()
		s.srv.Close()
		// Corrupt the stored counts of "bad": a cell out of range.
		db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "knowdp.db"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`UPDATE datasets SET counts = ? WHERE id = 'bad'`, []byte{1, 0xff, 0xff, 0xff, 0xff, 0x0f, 1}); err != nil {
			t.Fatal(err)
		}
		db.Close()
		s2 := startServer(t, Config{DataDir: dir, AdminKey: s.admin})
		var v struct {
			ID          string `json:"id"`
			Unavailable string `json:"unavailable"`
		}
		s2.must(http.StatusOK, "GET", "/admin/v1/datasets/bad", s2.admin, nil, &v)
		if !strings.Contains(v.Unavailable, "counts") {
			t.Fatalf("the curator is not told why: %+v", v)
		}
		var list struct {
			Datasets []struct {
				ID          string `json:"id"`
				Unavailable string `json:"unavailable"`
			} `json:"datasets"`
		}
		s2.must(http.StatusOK, "GET", "/admin/v1/datasets", s2.admin, nil, &list)
		if len(list.Datasets) != 2 || list.Datasets[0].Unavailable == "" || list.Datasets[1].Unavailable != "" {
			t.Fatalf("admin list %+v", list)
		}
		for _, path := range []string{"/v1/datasets/bad", "/v1/datasets/bad/invariants", "/v1/datasets/bad/budget"} {
			if st, raw := s2.call("GET", path, key, nil, nil, nil); st != http.StatusServiceUnavailable || strings.Contains(string(raw), "counts") {
				t.Errorf("GET %s: %d %s", path, st, raw)
			}
		}
		if st, _, raw := s2.ask("bad", key, `{"kind":"cuboid","epsilon":0.1,"cuboid":["sex"]}`, ""); st != http.StatusServiceUnavailable {
			t.Errorf("query on the bad dataset: %d %s", st, raw)
		}
		s2.must(http.StatusOK, "GET", "/v1/datasets", key, nil, nil)
		if st, _, raw := s2.ask("good", key, `{"kind":"cuboid","epsilon":0.1,"cuboid":["sex"]}`, ""); st != http.StatusCreated {
			t.Errorf("query on the good dataset: %d %s", st, raw)
		}
	})
	t.Run("validate", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			counts []float64
			want   string
		}{
			{"negative", []float64{1, -14}, "negative"},
			{"fraction", []float64{1.5, 2}, "integer"},
			{"nan", []float64{0, nan()}, "integer"},
		} {
			s := startServer(t, Config{DataDir: t.TempDir()})
			s.registerArrests("x", 1)
			d := s.srv.sets["x"]
			c := *d.cube
			c.Counts = make([]float64, len(d.cube.Counts))
			copy(c.Counts, tc.counts)
			if err := d.setCube(&c); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v", tc.name, err)
			}
		}
	})
}

func nan() float64 { var z float64; return z / z }

// TestPostgresSourceErrorsSayLess: a PostgreSQL source that cannot be
// reached gets the same answer whatever listens at its address (nothing,
// an HTTP server, an unknown host), so registration cannot probe the
// server's network.
func TestPostgresSourceErrorsSayLess(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	// Something else listens: it answers like an HTTP server and hangs up.
	web, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	go func() {
		for {
			c, err := web.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n"))
			c.Close()
		}
	}()
	var msgs []string
	for _, host := range []string{closed, web.Addr().String(), "nosuchhost.invalid:5432"} {
		// sslmode=require: a host that is not local must be reached with TLS.
		dsn := "postgres://u:secret@" + host + "/db?sslmode=require&connect_timeout=1"
		req := DatasetRequest{ID: "p", Schema: arrestsSchema(t), Source: Source{SQL: &SQLSource{Driver: "postgres", DSN: dsn, Table: "t"}}, Policy: Policy{EpsilonPerAnalyst: 1}}
		st, raw := s.call("POST", "/admin/v1/datasets", s.admin, req, nil, nil)
		msg := errMsg(raw)
		if st != http.StatusBadRequest || !strings.Contains(msg, "cannot connect to the PostgreSQL source") {
			t.Errorf("%s: %d %s", host, st, raw)
		}
		for _, leak := range []string{"refused", "dial", "EOF", "127.0.0.1", "nosuchhost", "secret", "HTTP"} {
			if strings.Contains(msg, leak) {
				t.Errorf("%s: the message says %q: %s", host, leak, msg)
			}
		}
		msgs = append(msgs, msg)
	}
	if msgs[0] != msgs[1] || msgs[1] != msgs[2] {
		t.Errorf("the messages differ with what listens:\n%s", strings.Join(msgs, "\n"))
	}
}

// TestGaussianWorkload: on a dataset with zCDP budgets a workload may use
// the Gaussian mechanism, as release --workload --mechanism gaussian does:
// charged its rho, with nonneg or integer counts consistent with the
// invariants, and the release's metadata (the CLI's release.json) in the
// answer.
func TestGaussianWorkload(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	req := DatasetRequest{ID: "z", Schema: arrestsSchema(t), Source: Source{CSV: filepath.Join(repoRoot(t), "data", "arrests.csv")},
		Policy: Policy{RhoPerAnalyst: 1, Invariants: [][]string{{"year"}}}}
	s.must(http.StatusCreated, "POST", "/admin/v1/datasets", s.admin, req, nil)
	s.registerArrests("e", 1, []string{"year"})
	_, key := s.analyst("g")
	for _, tc := range []struct {
		name, q string
		steps   int64
		integer bool
	}{
		{"integer", `{"kind":"cuboid","mechanism":"gaussian","rho":0.25,"cuboids":[["year","sex"],["year","released"],["year"]],"weights":[1,2,1],"integer":true}`, mustRho(t, 0.25).Steps(), true},
		{"nonneg equal", `{"kind":"cuboid","mechanism":"gaussian","rho":0.125,"delta":1e-9,"cuboids":[["year","sex"],["sex"]],"split":"equal","nonneg":true}`, mustRho(t, 0.125).Steps(), false},
		{"public", `{"kind":"cuboid","mechanism":"gaussian","rho":0.125,"cuboids":[["year"],[]]}`, 0, false},
	} {
		st, r, raw := s.ask("z", key, tc.q, "")
		if st != http.StatusCreated || r.Unit != "rho" || r.Steps != tc.steps {
			t.Fatalf("%s: %d, %d steps (want %d): %s", tc.name, st, r.Steps, tc.steps, raw)
		}
		var ans struct {
			Tables []struct {
				Dimensions []string
				Counts     []float64
				MOE90      float64
			}
			Privacy struct {
				Mechanism    string  `json:"mechanism"`
				Rho          float64 `json:"rho"`
				RhoBudget    float64 `json:"rho_budget"`
				Delta        float64 `json:"delta"`
				Epsilon      float64 `json:"epsilon"`
				Measurements []struct {
					Rho           float64 `json:"rho"`
					L2Sensitivity float64 `json:"l2_sensitivity"`
					Sigma         float64 `json:"sigma"`
				} `json:"measurements"`
			}
		}
		mustUnmarshal(t, r.Answer, &ans)
		if tc.steps == 0 {
			if ans.Privacy.Rho != 0 {
				t.Errorf("%s: public workload spent rho %v", tc.name, ans.Privacy.Rho)
			}
			continue
		}
		p := ans.Privacy
		if !strings.HasPrefix(p.Mechanism, "Gaussian") || p.Rho <= 0 || p.Rho > stepsEpsilon(tc.steps) || p.Epsilon <= 0 || p.Delta <= 0 || len(p.Measurements) == 0 {
			t.Errorf("%s: privacy %+v", tc.name, p)
		}
		for _, m := range p.Measurements {
			if m.Sigma <= 0 || m.L2Sensitivity <= 0 || m.Rho <= 0 {
				t.Errorf("%s: measurement %+v", tc.name, m)
			}
		}
		for _, tb := range ans.Tables {
			for _, v := range tb.Counts {
				if v < 0 || (tc.integer && v != float64(int64(v))) {
					t.Fatalf("%s: table %v count %v", tc.name, tb.Dimensions, v)
				}
			}
		}
		if tc.name == "integer" {
			years := ans.Tables[2].Counts
			for y := range years {
				if ys := ans.Tables[0].Counts[2*y] + ans.Tables[0].Counts[2*y+1]; ys != years[y] {
					t.Errorf("year %d: %v, invariant %v", y, ys, years[y])
				}
			}
		}
	}
	for _, bad := range []struct{ ds, q, want string }{
		{"e", `{"kind":"cuboid","mechanism":"gaussian","rho":0.1,"cuboids":[["sex"]]}`, "budgets are in epsilon"},
		{"z", `{"kind":"cuboid","mechanism":"gaussian","rho":0.1,"cuboids":[["sex"],["sex"]]}`, "twice"},
		{"z", `{"kind":"cuboid","mechanism":"gaussian","rho":0.1,"cuboids":[["sex"]],"weights":[1,2]}`, "weights"},
		{"z", `{"kind":"cuboid","mechanism":"gaussian","rho":0.1,"cuboid":["sex"],"cuboids":[["sex"]]}`, "exclude each other"},
		{"z", `{"kind":"cuboid","mechanism":"gaussian","rho":5,"cuboids":[["sex"]]}`, "needs rho"},
	} {
		if st, _, raw := s.ask(bad.ds, key, bad.q, ""); st/100 != 4 || !strings.Contains(string(raw), bad.want) {
			t.Errorf("%s: %d %s, want 4xx with %q", bad.q, st, raw, bad.want)
		}
	}
}

// TestSortCells: the linear-time sort of (cell, coefficient) pairs agrees
// with a comparison sort. (The range of run-length encoded losses is
// tested in package store.)
func TestSortCells(t *testing.T) {
	r := noise.NewSeeded(19)
	for _, n := range []int{0, 1, 5, 255, 256, 3000, 1 << 16} {
		for _, top := range []int{1, 7, 1 << 11, 1 << 24} {
			pairs := make([]cellCoef, n)
			for i := range pairs {
				pairs[i] = cellCoef{int(r.Uint64() % uint64(top)), int64(i)}
			}
			want := slices.Clone(pairs)
			slices.SortStableFunc(want, func(a, b cellCoef) int { return a.cell - b.cell })
			sortCells(pairs)
			if !slices.Equal(pairs, want) {
				t.Fatalf("%d pairs below %d: sortCells differs from a stable sort", n, top)
			}
		}
	}
}
