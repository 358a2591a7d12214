package server

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/knowdp/knowdp/noise"
)

// fuzzDatasets are the datasets FuzzQueryPlanning plans on, registered
// once per process: flat (with an invariant), flat with zCDP budgets, and
// the US hierarchy with an invariant at a coarser level and without.
var fuzzDatasets struct {
	once sync.Once
	s    *testServer
}

// fuzzServer starts the fuzz target's server; it lives as long as the
// test binary (the fuzz engine runs the target in worker processes).
func fuzzServer(t testing.TB) *testServer {
	fuzzDatasets.once.Do(func() {
		dir, err := os.MkdirTemp("", "knowdp-fuzz-")
		if err != nil {
			t.Fatal(err)
		}
		s := startServer(&keepAlive{t}, Config{DataDir: dir})
		s.registerArrests("arrests", 4096, []string{"year"})
		s.must(http.StatusCreated, "POST", "/admin/v1/datasets", s.admin, DatasetRequest{
			ID: "arrests-rho", Schema: arrestsSchema(t), Source: arrestsSource(t), Policy: Policy{RhoPerAnalyst: 4096, Invariants: [][]string{{"year"}}},
		}, nil)
		s.registerUSGeo("geo", 4096, 0)
		s.registerUSGeo("geo-state", 4096, 0, []string{"geo:state"})
		s.registerUSGeo("geo-rho", 0, 4096)
		fuzzDatasets.s = s
	})
	return fuzzDatasets.s
}

// keepAlive is a testing.TB whose Cleanup never runs: the fuzz server
// outlives the test that started it (one per process), and the process's
// exit ends it.
type keepAlive struct{ testing.TB }

func (keepAlive) Cleanup(func()) {}

// fuzzCuboids returns the cuboids the fuzz target draws from, per
// dataset: every subset of the arrests dimensions, and every view of the
// US hierarchy (geo at one of its levels, named at its finest as "geo" or
// "geo:place", or absent; sex and agegroup in or out).
func fuzzCuboids(dataset string) [][]string {
	var out [][]string
	if strings.HasPrefix(dataset, "arrests") {
		for mask := range 1 << len(arrestsColumns) {
			c := []string{}
			for k, name := range arrestsColumns {
				if mask&(1<<k) != 0 {
					c = append(c, name)
				}
			}
			out = append(out, c)
		}
		return out
	}
	for _, g := range []string{"", "geo:region", "geo:division", "geo:state", "geo", "geo:place"} {
		for mask := range 4 {
			c := []string{}
			if g != "" {
				c = append(c, g)
			}
			if mask&1 != 0 {
				c = append(c, "sex")
			}
			if mask&2 != 0 {
				c = append(c, "agegroup")
			}
			out = append(out, c)
		}
	}
	return out
}

// fuzzBody builds a cuboid query from the fuzzer's numbers: 1 to 64
// distinct cuboids (drawn by a permutation seeded with sel), weights from
// three numbers, the budget, the split and the post-processing (on up to 8
// cuboids). Numbers
// are written as strconv formats them, so NaN and ±Inf reach the decoder
// as the (invalid) JSON an attacker could send.
func fuzzBody(dataset string, budget, w0, w1, w2 float64, sel uint64, count, opts uint8) string {
	all := fuzzCuboids(dataset)
	perm := rand.New(rand.NewPCG(sel, 0)).Perm(len(all))
	n := min(1+int(count)%64, len(all))
	var cuboids []string
	for _, k := range perm[:n] {
		c := make([]string, len(all[k]))
		for i, name := range all[k] {
			c[i] = strconv.Quote(name)
		}
		cuboids = append(cuboids, "["+strings.Join(c, ",")+"]")
	}
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	var b strings.Builder
	b.WriteString(`{"kind":"cuboid"`)
	if strings.HasSuffix(dataset, "-rho") {
		b.WriteString(`,"mechanism":"gaussian","rho":` + num(budget))
	} else {
		b.WriteString(`,"epsilon":` + num(budget))
	}
	if opts&1 != 0 || n > 1 {
		b.WriteString(`,"cuboids":[` + strings.Join(cuboids, ",") + `]`)
		if opts&2 != 0 {
			ws := []string{}
			for i := range n {
				ws = append(ws, num([]float64{w0, w1, w2}[i%3]))
			}
			b.WriteString(`,"weights":[` + strings.Join(ws, ",") + `]`)
		}
		switch (opts >> 2) & 3 {
		case 1:
			b.WriteString(`,"split":"optimal"`)
		case 2:
			b.WriteString(`,"split":"equal"`)
		case 3:
			b.WriteString(`,"split":"spine"`)
		}
	} else {
		b.WriteString(`,"cuboid":` + cuboids[0])
	}
	// Post-processing only on up to 8 tables: its cost is the
	// computation's, not the planner's, and on 64 large tables nonneg
	// takes seconds.
	switch post := (opts >> 4) & 3; {
	case n > 8:
	case post == 1:
		b.WriteString(`,"integer":true`)
	case post == 2:
		b.WriteString(`,"nonneg":true`)
	}
	if opts&64 != 0 {
		b.WriteString(`,"fresh":true`)
	}
	b.WriteString("}")
	return b.String()
}

// The bounds of one case: the preparation (the split's solver) runs
// under a deadline, as in the server (its query and compute timeouts), and
// must return soon after it; the computation of an accepted query must
// end well within the server's compute timeout.
const (
	prepareLimit = time.Second
	prepareSlack = 2 * time.Second
	computeLimit = 30 * time.Second
)

// planAndCompute runs a request body through what ask runs before and
// after admission, without the ledger: decoding, the request checks,
// planning, the preparation (the split's solver, under a deadline) and the
// computation. It fails the test on anything but an answer, a refusal for
// what was asked (a 400) or a preparation stopped by its deadline (a 503
// that charged nothing): a panic, an internal error (a 500), an answer
// that cannot be encoded, or a stage that does not end when its context
// does.
func planAndCompute(t *testing.T, d *dataset, body string) {
	refused := func(ctx context.Context, stage string, err error) bool {
		var ie *inputError
		switch {
		case err == nil:
			return false
		case errors.As(err, &ie):
			t.Logf("refused at %s: %.200s", stage, ie.msg)
			return true
		case ctx.Err() != nil && errors.Is(err, ctx.Err()):
			t.Logf("%s stopped by its deadline (a 503, nothing charged)", stage)
			return true
		}
		t.Fatalf("%s: %s failed with an error that is not the analyst's (a 500): %v", body, stage, err)
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), prepareLimit)
	defer cancel()
	start := time.Now()
	defer func() {
		if took := time.Since(start); took > prepareLimit+prepareSlack+computeLimit {
			t.Fatalf("%s: took %v", body, took)
		}
	}()
	q, err := decodeQuery([]byte(body))
	if refused(ctx, "decoding", err) {
		return
	}
	if refused(ctx, "checking", checkRequest(d.schema, &q)) {
		return
	}
	pl, err := planQuery(ctx, d, q)
	if refused(ctx, "planning", err) {
		return
	}
	if pl.prepare != nil {
		err := pl.prepare(ctx)
		if took := time.Since(start); took > prepareLimit+prepareSlack {
			t.Fatalf("%s: planning and its split took %v: their context ended after %v", body, took, prepareLimit)
		}
		if refused(ctx, "preparing", err) {
			return
		}
	}
	if pl.fresh != nil {
		if moe, err := pl.fresh(context.Background()); err != nil || !(moe >= 0) || math.IsInf(moe, 0) {
			t.Fatalf("%s: a fresh measurement's moe90 %v, %v", body, moe, err)
		}
	}
	cctx, ccancel := context.WithTimeout(context.Background(), computeLimit)
	defer ccancel()
	ans, err := pl.compute(cctx, noise.NewSeeded(1))
	if err != nil {
		t.Fatalf("%s: planned, then the computation failed (a charged 500): %v", body, err)
	}
	if m, ok := ans.(measuredAnswer); ok {
		if _, err := json.Marshal(m.record); err != nil {
			t.Fatalf("%s: the measurements cannot be stored: %v", body, err)
		}
		ans = m.answer
	}
	if _, err := json.Marshal(ans); err != nil {
		t.Fatalf("%s: the answer cannot be encoded (a charged 500): %v", body, err)
	}
	t.Logf("answered: %.200s", body)
}

// FuzzQueryPlanning drives the planner through the server's request
// decoding with extreme weights, budgets and sizes (up to 64 cuboids, at
// levels or not, every split and post-processing, Laplace and Gaussian):
// no case hangs, panics or fails with anything but a 400 (or a 503 when
// its deadline stops the split's solver). The seed corpus
// holds the requests and the ends of every range, and runs as a
// normal test; go test -fuzz FuzzQueryPlanning ./server explores further.
func FuzzQueryPlanning(f *testing.F) {
	const all = ^uint64(0)
	for _, seed := range []struct {
		dataset     uint8
		budget      float64
		w0, w1, w2  float64
		sel         uint64
		count, opts uint8
	}{
		{0, 0.01, 1e300, 1, 1, 0b0100_0100, 1, 3},                     // the reported hang: [["sex"],["year"]] weighted [1e300, 1]
		{0, 0.01, 1e308, 1e308, 1, 0b0100_0100, 1, 3},                 // the 500
		{1, 0.01, 1e308, 1, 1, 0b0100_0100, 1, 3},                     // Gaussian, planned then charged as a failure
		{2, 0.01, 1e308, 1, 1, 0x2002, 1, 3},                          // views
		{2, 0.01, 1e300, 1, 1, 0x6002, 1, 3 | 1<<2},                   // views, optimal split
		{0, 1, 1e6, 1e-6, 1, 0x0f0f0f0f0f0f0f0f, 55, 3},               // the ends of the weights' range, 56 cuboids
		{0, 1, 1e-6, 1e6, 1e6, 0x1122448811224488, 5, 3},              // a small Laplace workload: branch-and-bound
		{0, 9.094947017729282e-13, 1, 1, 1, all, 63, 1},               // the smallest epsilon, 64 cuboids
		{0, 4096, 1, 1, 1, all, 63, 1 | 2<<2},                         // the largest, equal split
		{0, 4096, 1, 1, 1, all, 4, 1 | 2<<2 | 1<<4},                   // integer
		{1, 9.094947017729282e-13, 1, 1, 1, 0xff, 7, 1},               // the smallest rho
		{1, 4096, 3, 1e-6, 1e6, all, 63, 3},                           // the largest rho
		{1, 4096, 3, 1e-6, 1e6, all, 4, 3 | 1<<4},                     // integer
		{3, 0.5, 1, 2, 3, 0x0102040810204080, 7, 3 | 3<<2},            // views under a coarse invariant, spine
		{4, 1, 1, 1, 1, 0x7f6f5f4f3f2f1f0f, 19, 1 | 1<<2},             // Gaussian views, optimal
		{0, 0.5, 1, 1, 1, 0b100, 0, 1 << 6},                           // one cuboid, fresh
		{60, 2.4253192047278085e-12, -99, -10.7, -62.8, 142, 5, 0x14}, // a branch-and-bound of seconds, then too small to share
		{0, 0.01, 1e300, 1, 1.0 / 9, 38, 0, 0x1c},                     // one cuboid, integer: no fresh measurement to price
		{1, 0.01, 1e6, 1e-6, 1, 5, 5, 3},                              // Gaussian, the ends of the weights' range
		{2, 0.01, 1e6, 1e-6, 1e6, 6, 5, 3 | 1<<2},                     // views, optimal, the same
		{3, 0.01, 1e-6, 1e6, 1, 7, 3, 3},                              // views under a coarse invariant, the same
		{4, 1e-3, 1e-6, 1, 1e6, 8, 9, 3 | 1<<2 | 1<<4},                // Gaussian views, optimal, integer, the same
		{0, math.NaN(), math.Inf(1), math.Inf(-1), 0, 1, 1, 3},
		{0, -1, -1, 0, 5e-324, 3, 1, 3},
		{2, 1e-5, 1, 1, 1, 0x5555, 2, 2 | 1<<2 | 2<<4},
	} {
		f.Add(seed.dataset, seed.budget, seed.w0, seed.w1, seed.w2, seed.sel, seed.count, seed.opts)
	}
	ids := []string{"arrests", "arrests-rho", "geo", "geo-state", "geo-rho"}
	f.Fuzz(func(t *testing.T, dataset uint8, budget, w0, w1, w2 float64, sel uint64, count, opts uint8) {
		s := fuzzServer(t)
		id := ids[int(dataset)%len(ids)]
		d := s.srv.sets[id]
		if d == nil {
			t.Fatalf("dataset %s not loaded", id)
		}
		planAndCompute(t, d, fuzzBody(id, budget, w0, w1, w2, sel, count, opts))
	})
}
