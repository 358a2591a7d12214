package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	splitplan "github.com/knowdp/knowdp/plan"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/server/admission"
)

// Issue 33: planning bounded and costed, derived answers honest.

// askWithin posts a query and fails the test unless the server answers
// within limit: a request that makes the server loop shows as a failure,
// not as a hung test binary.
func (s *testServer) askWithin(limit time.Duration, dataset, key, body string) (int, []byte) {
	s.t.Helper()
	type out struct {
		status int
		raw    []byte
	}
	done := make(chan out, 1)
	go func() {
		req, _ := http.NewRequest("POST", s.ts.URL+"/v1/datasets/"+dataset+"/queries", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := s.ts.Client().Do(req)
		if err != nil {
			done <- out{0, []byte(err.Error())}
			return
		}
		defer res.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(res.Body)
		done <- out{res.StatusCode, b.Bytes()}
	}()
	select {
	case o := <-done:
		return o.status, o.raw
	case <-time.After(limit):
		s.t.Fatalf("%s: no answer within %v", body, limit)
		return 0, nil
	}
}

// TestExtremeWeightsRefused (issue 33 items 1 and 3): weights that no
// arithmetic of the split can follow are refused with a 400 naming the
// field, from the request alone, before any planning and without a charge,
// on every path (optimal and equal splits, Laplace and Gaussian, flat
// workloads and views), from a key with budget and from a spent one.
// Before, [1e300, 1] made the server loop until restart, [1e308, 1e308]
// was an uncharged 500 (a caught panic), and [1e308, 1] on a Gaussian
// workload or on views was planned and then charged as a failed answer.
func TestExtremeWeightsRefused(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerArrests("arrests", 1)
	s.registerUSGeo("geo", 1, 0)
	s.registerUSGeo("geo-rho", 0, 1)
	s.must(http.StatusCreated, "POST", "/admin/v1/datasets", s.admin, DatasetRequest{
		ID: "arrests-rho", Schema: arrestsSchema(t), Source: arrestsSource(t), Policy: Policy{RhoPerAnalyst: 1},
	}, nil)
	_, key := s.analyst("rich")
	_, spent := s.analyst("spent")
	for _, ds := range []string{"arrests", "geo"} {
		if st, _, raw := s.ask(ds, spent, `{"kind":"cuboid","epsilon":1,"cuboid":["sex"]}`, ""); st != http.StatusCreated {
			t.Fatalf("spending %s: %d %s", ds, st, raw)
		}
	}
	for _, ds := range []string{"arrests-rho", "geo-rho"} {
		if st, _, raw := s.ask(ds, spent, `{"kind":"cuboid","mechanism":"gaussian","rho":1,"cuboid":["sex"]}`, ""); st != http.StatusCreated {
			t.Fatalf("spending %s: %d %s", ds, st, raw)
		}
	}
	const flat, views = `"cuboids":[["sex"],["year"]]`, `"cuboids":[["geo:state"],["geo","sex"]]`
	const flatRho, viewsRho = flat, views
	cases := []struct {
		name, dataset, body string
	}{
		{"the reported hang", "arrests", `{"kind":"cuboid","epsilon":0.01,` + flat + `,"weights":[1e300,1]}`},
		{"equal split", "arrests", `{"kind":"cuboid","epsilon":0.01,"split":"equal",` + flat + `,"weights":[1e300,1]}`},
		{"the 500", "arrests", `{"kind":"cuboid","epsilon":0.01,` + flat + `,"weights":[1e308,1e308]}`},
		{"tiny", "arrests", `{"kind":"cuboid","epsilon":0.01,` + flat + `,"weights":[1,1e-300]}`},
		{"gaussian", "arrests-rho", `{"kind":"cuboid","mechanism":"gaussian","rho":0.01,` + flatRho + `,"weights":[1e308,1]}`},
		{"views", "geo", `{"kind":"cuboid","epsilon":0.01,` + views + `,"weights":[1e308,1]}`},
		{"views optimal", "geo", `{"kind":"cuboid","epsilon":0.01,"split":"optimal",` + views + `,"weights":[1e300,1]}`},
		{"gaussian views", "geo-rho", `{"kind":"cuboid","mechanism":"gaussian","rho":0.01,` + viewsRho + `,"weights":[1e308,1]}`},
		{"zero", "arrests", `{"kind":"cuboid","epsilon":0.01,` + flat + `,"weights":[0,1]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{key, spent} {
				before := s.srv.prepared.Load()
				st, raw := s.askWithin(30*time.Second, tc.dataset, k, tc.body)
				if st != http.StatusBadRequest || !strings.Contains(errMsg(raw), "weights[") {
					t.Fatalf("status %d, want 400 naming the weight: %s", st, raw)
				}
				if n := s.srv.prepared.Load() - before; n != 0 {
					t.Fatalf("the refused query was planned (%d solver runs)", n)
				}
			}
		})
	}
	for _, ds := range []string{"arrests", "geo", "arrests-rho", "geo-rho"} {
		if b := s.budgetOf(ds, key); b.SpentSteps != 0 {
			t.Fatalf("%s: refused queries spent %d steps", ds, b.SpentSteps)
		}
	}
	// The ends of the accepted range are planned and answered.
	for _, w := range []string{"[1e6,1e-6]", "[1e-6,1e6]"} {
		if st, _, raw := s.ask("arrests", key, `{"kind":"cuboid","epsilon":0.5,`+flat+`,"weights":`+w+`}`, ""); st != http.StatusCreated {
			t.Fatalf("weights %s: %d %s", w, st, raw)
		}
	}
}

// arrestsSource is the bundled arrests CSV as a dataset source.
func arrestsSource(t testing.TB) Source {
	return Source{CSV: repoRoot(t) + "/data/arrests.csv"}
}

// threeWay is the workload of the 56 three-way cuboids of the arrests
// schema.
func threeWay() [][]string {
	dims := arrestsColumns
	var out [][]string
	for i := range dims {
		for j := i + 1; j < len(dims); j++ {
			for k := j + 1; k < len(dims); k++ {
				out = append(out, []string{dims[i], dims[j], dims[k]})
			}
		}
	}
	return out
}

// TestRefusalBeforePlanning (issue 33 item 2): a key whose budget is spent
// is refused without the split ever being solved, however large the
// workload, and a repeat of a stored workload is found without solving it
// again; an affordable workload is solved once.
func TestRefusalBeforePlanning(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerArrests("arrests", 1)
	_, key := s.analyst("a")
	q := mustJSON(t, map[string]any{"kind": "cuboid", "epsilon": 0.5, "cuboids": threeWay()})
	before := s.srv.prepared.Load()
	st, first, raw := s.ask("arrests", key, q, "")
	if st != http.StatusCreated {
		t.Fatalf("the 56 three-way cuboids: %d %.300s", st, raw)
	}
	if n := s.srv.prepared.Load() - before; n != 1 {
		t.Fatalf("an answered workload was solved %d times", n)
	}
	// A four-way cuboid, measured afresh (the strategy may have measured
	// cuboids that determine it).
	if st, _, raw := s.ask("arrests", key, `{"kind":"cuboid","epsilon":0.5,"cuboid":["year","colour","sex","agegroup"],"fresh":true}`, ""); st != http.StatusCreated {
		t.Fatalf("spending the rest: %d %.300s", st, raw)
	}
	before = s.srv.prepared.Load()
	other := mustJSON(t, map[string]any{"kind": "cuboid", "epsilon": 0.25, "cuboids": threeWay()})
	if st, _, raw := s.ask("arrests", key, other, ""); st != http.StatusForbidden {
		t.Fatalf("spent key: %d %.300s", st, raw)
	}
	st, again, raw := s.ask("arrests", key, q, "")
	if st != http.StatusOK || again.ID != first.ID {
		t.Fatalf("the repeat: %d %.300s", st, raw)
	}
	if n := s.srv.prepared.Load() - before; n != 0 {
		t.Fatalf("a refusal and a repeat solved the split %d times", n)
	}
}

// TestPlanningStops (issue 33 item 1): planning runs under the request's
// context, so the query timeout and a client that goes away stop it: the
// strategy's search and split for the 56 three-way cuboids of arrests (a
// second or so of solving) end at a 20 ms timeout with a 503 that charged
// nothing, and the request of a client that leaves an eighth of the way
// through ends soon after in the server's log.
func TestPlanningStops(t *testing.T) {
	logs := &syncBuffer{}
	s := startServer(t, Config{DataDir: t.TempDir(), Log: slog.New(slog.NewJSONHandler(logs, nil))})
	s.registerArrests("geo", 100)
	_, key := s.analyst("a")
	body := func(eps float64) string {
		return mustJSON(t, map[string]any{"kind": "cuboid", "epsilon": eps, "split": "optimal", "cuboids": threeWay()})
	}
	// How long the solver takes here, without a deadline.
	d := s.srv.sets["geo"]
	q, err := decodeQuery([]byte(body(1)))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	pl, err := planQuery(context.Background(), d, q)
	if err == nil {
		err = pl.prepare(context.Background())
	}
	solve := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if solve < 100*time.Millisecond {
		t.Fatalf("the split took %v: too fast to show that a deadline stops it", solve)
	}

	fast := startServer(t, Config{DataDir: t.TempDir(), QueryTimeout: 20 * time.Millisecond, ComputeTimeout: time.Minute})
	fast.registerArrests("geo", 100)
	_, fkey := fast.analyst("a")
	start = time.Now()
	st, raw := fast.askWithin(solve+30*time.Second, "geo", fkey, body(1))
	if took := time.Since(start); st != http.StatusServiceUnavailable || !strings.Contains(errMsg(raw), "nothing was charged") || took > solve/2+200*time.Millisecond {
		t.Fatalf("after %v (the split alone takes %v): %d %s", took, solve, st, raw)
	}
	if n := fast.srv.prepared.Load(); n != 1 {
		t.Fatalf("the split was started %d times, want once (and stopped)", n)
	}
	if b := fast.budgetOf("geo", fkey); b.SpentSteps != 0 {
		t.Fatalf("a timed-out planning spent %d steps", b.SpentSteps)
	}

	ctx, cancel := context.WithTimeout(context.Background(), solve/8)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", s.ts.URL+"/v1/datasets/geo/queries", strings.NewReader(body(0.5)))
	req.Header.Set("Authorization", "Bearer "+key)
	if res, err := s.ts.Client().Do(req); err == nil {
		res.Body.Close()
		t.Fatalf("the client's request did not fail: %d", res.StatusCode)
	}
	var ms float64
	for deadline := time.Now().Add(solve + 10*time.Second); time.Now().Before(deadline) && ms == 0; time.Sleep(10 * time.Millisecond) {
		for _, line := range strings.Split(logs.String(), "\n") {
			var rec struct {
				Msg, Path string
				Ms        float64
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "request" && strings.HasSuffix(rec.Path, "/queries") {
				ms = rec.Ms
			}
		}
	}
	if ms == 0 || ms > float64((solve/2+200*time.Millisecond).Milliseconds()) || s.srv.prepared.Load() != 1 {
		t.Fatalf("the abandoned request ran %v ms (the split takes %v), %d splits started", ms, solve, s.srv.prepared.Load())
	}
	if b := s.budgetOf("geo", key); b.SpentSteps != 0 {
		t.Fatalf("an abandoned planning spent %d steps", b.SpentSteps)
	}
}

// TestFinestLevelDerived (issue 33 item 4): a cuboid that names the finest
// level ("geo:place", the same table as "geo") is one query with the flat
// one: derived free from the analyst's measurements, and the same stored
// answer whichever way it is named.
func TestFinestLevelDerived(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerUSGeo("flat", 10, 0)
	_, key := s.analyst("a")
	if st, _, raw := s.ask("flat", key, `{"kind":"cuboid","epsilon":0.5,"cuboid":["geo","sex"]}`, ""); st != http.StatusCreated {
		t.Fatalf("measuring geo x sex: %d %.300s", st, raw)
	}
	var ids []string
	for i, c := range []string{`["geo:place"]`, `["geo"]`} {
		st, r, raw := s.ask("flat", key, `{"kind":"cuboid","epsilon":0.5,"cuboid":`+c+`}`, "")
		var a measuredView
		if st == http.StatusOK || st == http.StatusCreated {
			mustUnmarshal(t, r.Answer, &a)
		}
		if r.Steps != 0 || !a.Privacy.Derived || (i == 0) != (st == http.StatusCreated) {
			t.Fatalf("%s: want derived, free: %d %d steps: %.300s", c, st, r.Steps, raw)
		}
		ids = append(ids, r.ID)
	}
	if ids[0] != ids[1] {
		t.Fatalf("geo:place and geo were answered apart: %v", ids)
	}
	// geo:place x sex is the measured table itself: the same derived answer
	// as sex x geo.
	_, r1, raw := s.ask("flat", key, `{"kind":"cuboid","epsilon":0.25,"cuboid":["sex","geo:place"]}`, "")
	_, r2, _ := s.ask("flat", key, `{"kind":"cuboid","epsilon":0.25,"cuboid":["geo","sex"]}`, "")
	if r1.ID == "" || r1.ID != r2.ID || r1.Steps != 0 {
		t.Fatalf("geo:place x sex: %s", raw)
	}
}

// derivedInfo is what a response says about a derived answer.
type derivedInfo struct {
	Derived *struct {
		Note      string  `json:"note"`
		MOE90     float64 `json:"moe90"`
		Requested struct {
			Epsilon float64 `json:"epsilon"`
			Rho     float64 `json:"rho"`
		} `json:"requested"`
		Fresh struct {
			Epsilon float64 `json:"epsilon"`
			Rho     float64 `json:"rho"`
			Steps   int64   `json:"charged_steps"`
			MOE90   float64 `json:"moe90"`
			Request string  `json:"request"`
		} `json:"fresh"`
	} `json:"derived"`
}

// TestDerivedSaysWhatItIs (issue 33 item 5): a query for a cuboid that
// the analyst's measurements determine is answered from them, free, and
// the response says so: the epsilon asked for was not spent, the answer's
// margin of error is that of the earlier measurements, and a fresh
// measurement would cost the epsilon asked for (in steps) and have the
// margin of error of a one-cuboid release at it (cube's, from the
// mechanism alone). "fresh": true buys that measurement: charged, not
// derived, with that margin of error.
func TestDerivedSaysWhatItIs(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerArrests("arrests", 10, []string{"year"})
	s.must(http.StatusCreated, "POST", "/admin/v1/datasets", s.admin, DatasetRequest{
		ID: "z", Schema: arrestsSchema(t), Source: arrestsSource(t), Policy: Policy{RhoPerAnalyst: 10, Invariants: [][]string{{"year"}}},
	}, nil)
	_, key := s.analyst("a")
	for _, tc := range []struct {
		name, dataset, measure, ask, fresh string
		unit                               string
		amount                             float64
	}{
		{"laplace", "arrests", `{"kind":"cuboid","epsilon":0.05,"cuboid":["sex","agegroup"]}`,
			`{"kind":"cuboid","epsilon":5,"cuboid":["agegroup"]}`, `{"kind":"cuboid","epsilon":5,"cuboid":["agegroup"],"fresh":true}`, "epsilon", 5},
		{"gaussian", "z", `{"kind":"cuboid","mechanism":"gaussian","rho":0.01,"cuboid":["sex","agegroup"]}`,
			`{"kind":"cuboid","mechanism":"gaussian","rho":2,"cuboid":["agegroup"]}`, `{"kind":"cuboid","mechanism":"gaussian","rho":2,"cuboid":["agegroup"],"fresh":true}`, "rho", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if st, _, raw := s.ask(tc.dataset, key, tc.measure, ""); st != http.StatusCreated {
				t.Fatalf("measuring: %d %s", st, raw)
			}
			before := s.budgetOf(tc.dataset, key)
			st, r, raw := s.ask(tc.dataset, key, tc.ask, "")
			var a measuredView
			mustUnmarshal(t, r.Answer, &a)
			var info derivedInfo
			mustUnmarshal(t, raw, &info)
			if st != http.StatusCreated || r.Steps != 0 || !a.Privacy.Derived || info.Derived == nil {
				t.Fatalf("want a derived answer that says so: %d %s", st, raw)
			}
			moe := a.MOE90
			dv := info.Derived
			asked, fresh := dv.Requested.Epsilon, dv.Fresh.Epsilon
			if tc.unit == "rho" {
				asked, fresh = dv.Requested.Rho, dv.Fresh.Rho
			}
			wantSteps := steps(tc.amount)
			if dv.MOE90 != moe || asked != tc.amount || fresh != tc.amount || dv.Fresh.Steps != wantSteps ||
				!strings.Contains(dv.Note, "not spent") || !strings.Contains(dv.Note, strconv.FormatFloat(tc.amount, 'g', -1, 64)) ||
				!strings.Contains(dv.Fresh.Request, `"fresh": true`) {
				t.Fatalf("derived %+v (answer moe90 %v), want %v %s costing %d steps", *dv, moe, tc.amount, tc.unit, wantSteps)
			}
			if !(dv.Fresh.MOE90 > 0 && dv.Fresh.MOE90 < moe) {
				t.Fatalf("a fresh measurement at %v %s would have moe90 %v; the derived answer has %v", tc.amount, tc.unit, dv.Fresh.MOE90, moe)
			}
			if after := s.budgetOf(tc.dataset, key); after.SpentSteps != before.SpentSteps {
				t.Fatalf("the derived answer spent %d steps", after.SpentSteps-before.SpentSteps)
			}
			// Asked again: the same derived answer, saying the same.
			st, r2, raw2 := s.ask(tc.dataset, key, tc.ask, "")
			var info2 derivedInfo
			mustUnmarshal(t, raw2, &info2)
			if st != http.StatusOK || r2.ID != r.ID || info2.Derived == nil || info2.Derived.Fresh != dv.Fresh {
				t.Fatalf("asked again: %d %s", st, raw2)
			}
			// Fresh: charged what the derived answer said, not derived, with
			// the margin of error it said.
			st, r3, raw3 := s.ask(tc.dataset, key, tc.fresh, "")
			var a3 measuredView
			mustUnmarshal(t, r3.Answer, &a3)
			var info3 derivedInfo
			mustUnmarshal(t, raw3, &info3)
			moe3 := a3.MOE90
			if st != http.StatusCreated || r3.Steps != dv.Fresh.Steps || a3.Privacy.Derived || info3.Derived != nil || math.Abs(moe3-dv.Fresh.MOE90) > 1e-9*moe3 {
				t.Fatalf("fresh: %d, %d steps (said %d), moe90 %v (said %v): %.400s", st, r3.Steps, dv.Fresh.Steps, moe3, dv.Fresh.MOE90, raw3)
			}
			if !strings.Contains(string(r3.Request), `"fresh":true`) {
				t.Fatalf("the stored request does not say fresh: %s", r3.Request)
			}
		})
	}
	// fresh belongs to cuboid queries only.
	st, raw := s.call("POST", "/v1/datasets/arrests/queries", key, `{"kind":"linear","epsilon":0.1,"fresh":true,"queries":[{"terms":[{}]}]}`, nil, nil)
	if st != http.StatusBadRequest || !strings.Contains(errMsg(raw), "fresh") {
		t.Fatalf("fresh on a linear query: %d %s", st, raw)
	}
}

// TestClientGoneLogged: a client that goes away before its response is
// written is logged at INFO as what it is, not at ERROR as "store
// unavailable" (and the server writes nothing more to it).
func TestClientGoneLogged(t *testing.T) {
	logs := &syncBuffer{}
	s := startServer(t, Config{DataDir: t.TempDir(), Log: slog.New(slog.NewTextHandler(logs, nil))})
	s.registerArrests("arrests", 1)
	_, key := s.analyst("leaver")
	written := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	s.srv.afterAdmit = func(req, _ context.Context) {
		cancel()     // the client goes once the query is admitted, however long planning took
		<-req.Done() // the client has gone: the answer is written to nobody
		close(written)
	}
	// A large answer, so that writing it fails rather than fills a buffer.
	req, _ := http.NewRequestWithContext(ctx, "POST", s.ts.URL+"/v1/datasets/arrests/queries",
		strings.NewReader(`{"kind":"cuboid","epsilon":0.5,"cuboid":["year","agegroup","checks","colour","sex"]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	if res, err := s.ts.Client().Do(req); err == nil {
		res.Body.Close()
	}
	<-written
	var line string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if l := logs.String(); strings.Contains(l, "path=/v1/datasets/arrests/queries status=") {
			line = l
			break
		}
	}
	if strings.Contains(line, "store unavailable") || strings.Contains(line, "level=ERROR") || !strings.Contains(line, "client went away") {
		t.Fatalf("logs:\n%s", line)
	}
}

// TestRefusedSplitCostsRateLimit (issue 33 item 2): a query that the
// split's solver refuses (here the 56 three-way cuboids at 10 steps of
// epsilon, too small to share among them) costs no budget, and costs its
// key's rate limit the work the solver did, counted (a function of the
// request alone), beyond a burst if need be: the key then waits.
func TestRefusedSplitCostsRateLimit(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir(), RateLimit: 0.01, RateBurst: 2})
	s.registerArrests("arrests", 1)
	aid, key := s.analyst("a")
	keyID := strings.Split(key, "_")[1]
	body := mustJSON(t, map[string]any{"kind": "cuboid", "epsilon": 10 * privacy.EpsilonStep, "cuboids": threeWay()})
	// The solver's work, counted the same way outside the server.
	d := s.srv.sets["arrests"]
	q, err := decodeQuery([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	pl, err := planQuery(context.Background(), d, q)
	if err != nil {
		t.Fatal(err)
	}
	var meter splitplan.Meter
	var ie *inputError
	if err := pl.prepare(splitplan.WithMeter(context.Background(), &meter)); !errors.As(err, &ie) || !strings.Contains(ie.msg, "too small to share") {
		t.Fatalf("the split: %v", err)
	}
	want := splitCells(meter.Work()) / admission.WorkPerToken
	if want <= 2 {
		t.Fatalf("the split's work (%v units, %d tokens) is too small to show a charge beyond the burst", meter.Work(), want)
	}
	before := s.srv.adm.Tokens(keyID)
	st, raw := s.call("POST", "/v1/datasets/arrests/queries", key, body, nil, nil)
	if st != http.StatusBadRequest || !strings.Contains(errMsg(raw), "too small to share") {
		t.Fatalf("status %d: %s", st, raw)
	}
	// One token for the request itself, the split's work besides; the
	// bucket refills 0.01 a second.
	if drop := before - s.srv.adm.Tokens(keyID); math.Abs(drop-float64(1+want)) > 0.05 {
		t.Fatalf("the refusal cost %v tokens, want %d (1 + the split's %v units of work)", drop, 1+want, meter.Work())
	}
	if st, _ := s.call("GET", "/v1/datasets/arrests/budget", key, nil, nil, nil); st != http.StatusTooManyRequests {
		t.Fatalf("after the refusal the key's next request got %d, want 429", st)
	}
	if es := s.ledger(aid, "arrests"); len(es) != 0 {
		t.Fatalf("the refusal was stored: %+v", es)
	}
}

// TestFreshPlanningStops: the margin of error a derived answer quotes for
// a fresh measurement comes from planning that fresh query, strategy
// search included (under invariants it is not instant), and that planning
// runs under the request's context: a client that has gone stops it.
func TestFreshPlanningStops(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerArrests("arrests", 10, []string{"year"}, []string{"colour", "sex"})
	q, err := decodeQuery([]byte(`{"kind":"cuboid","epsilon":1,"cuboid":["agegroup","checks"]}`))
	if err != nil {
		t.Fatal(err)
	}
	pl, err := planQuery(context.Background(), s.srv.sets["arrests"], q)
	if err != nil || pl.fresh == nil {
		t.Fatalf("plan %v, fresh set %v", err, pl != nil && pl.fresh != nil)
	}
	if moe, err := pl.fresh(context.Background()); err != nil || !(moe > 0) {
		t.Fatalf("fresh moe90 %v, %v", moe, err)
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := pl.fresh(gone); !errors.Is(err, context.Canceled) {
		t.Fatalf("a fresh plan for a client that has gone: %v, want context.Canceled", err)
	}
}
