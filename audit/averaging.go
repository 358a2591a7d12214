package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/server"
)

// AveragingSettings are the parameters of the averaging attack.
type AveragingSettings struct {
	Eps float64
	// Count is the true answer of the query the attacker repeats.
	Count float64
	// MaxRepeats is the largest number of times one query is asked; the
	// error is reported for every power of two up to it.
	MaxRepeats int
	// Trials is the number of independent attacks on the non-caching
	// server, and ServeTrials on knowdp serve (one analyst each); the
	// latter are fewer because each needs an analyst and a durable charge.
	Trials, ServeTrials int
}

// AveragingDefaults returns the full settings (up to 1024 repeats, 200
// trials, 50 on knowdp serve) or the quick ones (up to 64 repeats, 40
// trials, 10 on knowdp serve), eps = 1.
func AveragingDefaults(quick bool) AveragingSettings {
	if quick {
		return AveragingSettings{Eps: 1, Count: 42, MaxRepeats: 64, Trials: 40, ServeTrials: 10}
	}
	return AveragingSettings{Eps: 1, Count: 42, MaxRepeats: 1024, Trials: 200, ServeTrials: 50}
}

// Oracle is a server as the attacker sees it: each call asks the same
// query once more and returns the answer. trial numbers independent runs
// of the attack; an oracle gives each its own server state (a fresh
// analyst, a fresh query), so that trials are independent.
type Oracle func(ctx context.Context, trial int) (float64, error)

// AveragingPoint is the attacker's error after a number of repeats.
type AveragingPoint struct {
	Repeats int
	// RMSE is the root mean squared error of the mean of the answers,
	// over the trials.
	RMSE float64
	// Predicted is the error if every answer carried fresh Lap(1/eps)
	// noise: sqrt(2/repeats)/eps.
	Predicted float64
}

// Averaging asks oracle the same query up to s.MaxRepeats times in each of
// s.Trials trials, and reports the error of the mean of the first R
// answers for R = 1, 2, 4, ...: against a server that adds fresh noise to
// every repeat, the error falls as 1/sqrt(R) and eps-DP for one answer
// becomes R eps for R answers; against one that returns its first answer
// again (knowdp serve caches answers), it stays put.
func Averaging(ctx context.Context, oracle Oracle, s AveragingSettings) ([]AveragingPoint, error) {
	if !(s.Eps > 0) || math.IsInf(s.Eps, 0) {
		return nil, fmt.Errorf("audit: averaging attack: eps must be finite and > 0, got %v", s.Eps)
	}
	if s.MaxRepeats < 1 || s.Trials < 1 || oracle == nil {
		return nil, errors.New("audit: averaging attack needs an oracle, at least one repeat and one trial")
	}
	var rs []int
	for R := 1; R <= s.MaxRepeats; R *= 2 {
		rs = append(rs, R)
	}
	sq := make([]float64, len(rs))
	for t := range s.Trials {
		var sum float64
		next := 0
		for R := 1; R <= rs[len(rs)-1]; R++ {
			v, err := oracle(ctx, t)
			if err != nil {
				return nil, fmt.Errorf("audit: averaging attack, trial %d, repeat %d: %w", t, R, err)
			}
			sum += v
			if R == rs[next] {
				e := sum/float64(R) - s.Count
				sq[next] += e * e
				next++
			}
		}
	}
	out := make([]AveragingPoint, len(rs))
	for i, R := range rs {
		out[i] = AveragingPoint{Repeats: R, RMSE: math.Sqrt(sq[i] / float64(s.Trials)), Predicted: math.Sqrt(2/float64(R)) / s.Eps}
	}
	return out, nil
}

// toyCounter is the victim: an HTTP endpoint that answers GET /count with
// the count plus fresh grid Laplace noise every time, keeping no state:
// no cache, no budget. It is safe for concurrent use.
type toyCounter struct {
	count float64
	lap   noise.Laplace
	mu    sync.Mutex
	r     *noise.Rand
}

func (c *toyCounter) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet || req.URL.Path != "/count" {
		http.NotFound(w, req)
		return
	}
	c.mu.Lock()
	v, err := c.lap.Add(c.r, c.count)
	c.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]float64{"answer": v})
}

// httpOracle asks GET url and reads {"answer": v}.
func httpOracle(client *http.Client, url string) Oracle {
	return func(ctx context.Context, _ int) (float64, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		var body struct {
			Answer *float64 `json:"answer"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			return 0, fmt.Errorf("GET %s: %w", url, err)
		}
		if body.Answer == nil {
			return 0, fmt.Errorf("GET %s: no answer in the response", url)
		}
		return *body.Answer, nil
	}
}

// serveTarget is knowdp serve run in process (package server, SQLite in a
// temporary directory) with one dataset, whose count of rows in group "a"
// is the attacked count, and one analyst per trial with budget eps on it.
// It records what the server said about the repeats.
type serveTarget struct {
	srv   *server.Server
	ts    *httptest.Server
	dir   string
	admin string
	eps   float64

	mu      sync.Mutex
	keys    map[int]string
	first   map[int]float64
	asked   int     // queries sent
	repeats int     // responses marked as repeats of a stored answer
	changed int     // repeats whose answer differed from the first one
	spent   float64 // largest budget an analyst had spent
}

func startServe(ctx context.Context, s AveragingSettings) (_ *serveTarget, err error) {
	if s.Count < 0 || s.Count != math.Trunc(s.Count) || s.Count > 1<<20 {
		return nil, fmt.Errorf("audit: averaging attack on knowdp serve: count must be an integer in 0..2^20, got %v", s.Count)
	}
	dir, err := os.MkdirTemp("", "knowdp-averaging-*")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	// The data: s.Count rows in group a, 8 in group b.
	var b strings.Builder
	b.WriteString("group\n")
	b.WriteString(strings.Repeat("a\n", int(s.Count)))
	b.WriteString(strings.Repeat("b\n", 8))
	csvPath := filepath.Join(dir, "rows.csv")
	if err := os.WriteFile(csvPath, []byte(b.String()), 0o600); err != nil {
		return nil, err
	}
	admin := server.GenerateKey()
	srv, _, err := server.Open(ctx, server.Config{DataDir: dir, AdminKey: admin, SourceDirs: []string{dir}})
	if err != nil {
		return nil, err
	}
	t := &serveTarget{srv: srv, ts: httptest.NewServer(srv.Handler()), dir: dir, admin: admin, eps: s.Eps,
		keys: map[int]string{}, first: map[int]float64{}}
	req := server.DatasetRequest{
		ID: "rows", Name: "averaging attack",
		Schema: json.RawMessage(`{"dimensions":[{"name":"group","values":["a","b"]}]}`),
		Source: server.Source{CSV: csvPath},
		Policy: server.Policy{EpsilonPerAnalyst: s.Eps},
	}
	if err := t.call(ctx, http.MethodPost, "/admin/v1/datasets", admin, req, nil); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// Close stops the server and removes its directory.
func (t *serveTarget) Close() {
	t.ts.Close()
	t.srv.Close()
	os.RemoveAll(t.dir)
}

// call sends a JSON request and decodes a 200 or 201 response into out.
func (t *serveTarget) call(ctx context.Context, method, path, key string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, t.ts.URL+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.ts.Client().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, raw)
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// oracle asks, for each trial, that trial's analyst's count of group a.
func (t *serveTarget) oracle() Oracle {
	query := map[string]any{"kind": "linear", "epsilon": t.eps,
		"queries": []server.LinearQuery{{Terms: []server.Term{{Where: map[string][]string{"group": {"a"}}}}}}}
	return func(ctx context.Context, trial int) (float64, error) {
		t.mu.Lock()
		key, ok := t.keys[trial]
		t.mu.Unlock()
		if !ok {
			var out struct {
				Key string `json:"api_key"`
			}
			if err := t.call(ctx, http.MethodPost, "/admin/v1/analysts", t.admin, map[string]string{"name": fmt.Sprintf("attacker %d", trial)}, &out); err != nil {
				return 0, err
			}
			key = out.Key
			t.mu.Lock()
			t.keys[trial] = key
			t.mu.Unlock()
		}
		var resp struct {
			Repeat bool `json:"repeat"`
			Answer struct {
				Answers []float64 `json:"answers"`
			} `json:"answer"`
			Budget struct {
				Spent float64 `json:"spent"`
			} `json:"budget"`
		}
		if err := t.call(ctx, http.MethodPost, "/v1/datasets/rows/queries", key, query, &resp); err != nil {
			return 0, err
		}
		if len(resp.Answer.Answers) != 1 {
			return 0, fmt.Errorf("knowdp serve returned %d answers, want 1", len(resp.Answer.Answers))
		}
		v := resp.Answer.Answers[0]
		t.mu.Lock()
		defer t.mu.Unlock()
		t.asked++
		t.spent = math.Max(t.spent, resp.Budget.Spent)
		if resp.Repeat {
			t.repeats++
		}
		if f, ok := t.first[trial]; !ok {
			t.first[trial] = v
		} else if f != v {
			t.changed++
		}
		return v, nil
	}
}

// AveragingAttack repeats a query against a server that does not cache,
// and against knowdp serve (package server), which does.
func AveragingAttack() Attack {
	return Attack{
		Name:    "averaging",
		Summary: "repeating a query against a server without caching averages the noise away",
		Explanation: "A server that adds fresh Lap(1/eps) noise every time a query is asked, and keeps no record of " +
			"what it answered, gives an attacker R independent answers for R requests: their mean has error " +
			"sqrt(2/R)/eps, and the privacy loss is R eps, not eps. The attack asks a toy HTTP endpoint of that kind " +
			"the same count up to a thousand times; the error falls as 1/sqrt(R). It then runs the same loop against " +
			"knowdp serve (started in process, with SQLite in a temporary directory, one analyst per trial with budget " +
			"eps): the server stores every answer in its ledger and returns the stored answer when the same query is " +
			"asked again, charging nothing more, so repeating gains nothing: the error stays that of one answer and " +
			"the budget spent stays eps. (knowdp serve draws its noise from its own secure generator, so that part " +
			"of a seeded run is not reproducible.)",
		Run: runAveraging,
	}
}

func runAveraging(ctx context.Context, cfg AttackConfig) (*Report, error) {
	if err := checkAttackConfig(cfg); err != nil {
		return nil, err
	}
	s := AveragingDefaults(cfg.Quick)
	lap, err := noise.NewLaplace(1, s.Eps)
	if err != nil {
		return nil, err
	}
	toy := httptest.NewServer(&toyCounter{count: s.Count, lap: lap, r: cfg.Rand.Split()})
	defer toy.Close()
	pts, err := Averaging(ctx, httpOracle(toy.Client(), toy.URL+"/count"), s)
	if err != nil {
		return nil, err
	}
	serve, err := startServe(ctx, s)
	if err != nil {
		return nil, fmt.Errorf("knowdp serve: %w", err)
	}
	defer serve.Close()
	onServe := s
	onServe.Trials = s.ServeTrials
	served, err := Averaging(ctx, serve.oracle(), onServe)
	if err != nil {
		return nil, fmt.Errorf("knowdp serve: %w", err)
	}
	rep := &Report{}
	var rows [][]string
	var toyXY, serveXY, predXY plotter.XYs
	for i, p := range pts {
		q := served[i]
		rows = append(rows, []string{strconv.Itoa(p.Repeats), f(s.Eps), f(p.RMSE), f(q.RMSE), f(p.Predicted),
			strconv.Itoa(s.Trials), strconv.Itoa(s.ServeTrials)})
		toyXY = append(toyXY, plotter.XY{X: float64(p.Repeats), Y: p.RMSE})
		serveXY = append(serveXY, plotter.XY{X: float64(p.Repeats), Y: q.RMSE})
		predXY = append(predXY, plotter.XY{X: float64(p.Repeats), Y: p.Predicted})
	}
	if err := rep.writeCSV(cfg.Dir, "averaging.csv", []string{"repeats", "eps", "rmse_non_caching_server",
		"rmse_knowdp_serve", "predicted_sqrt(2/R)/eps", "trials_non_caching", "trials_knowdp_serve"}, rows); err != nil {
		return nil, err
	}
	p, err := linePlot(fmt.Sprintf("Averaging attack: error of the mean of R answers (eps = %g)", s.Eps), "R (times the query is asked)",
		"RMSE of the attacker's estimate", true,
		series{"server without caching (fresh noise each time)", toyXY, vulnerable},
		series{"knowdp serve (the stored answer again)", serveXY, protected},
		series{"predicted sqrt(2/R)/eps", predXY, predicted})
	if err != nil {
		return nil, err
	}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = logTicks{}
	p.Y.Max *= 4 // room for the legend
	if err := rep.savePlot(p, cfg.Dir, "averaging"); err != nil {
		return nil, err
	}
	first, last := pts[0], pts[len(pts)-1]
	sFirst, sLast := served[0], served[len(served)-1]
	rep.Headline = []string{
		fmt.Sprintf("server without caching: error %.3g after 1 answer, %.3g after %d (predicted %.3g): %d answers cost %d eps, not eps",
			first.RMSE, last.RMSE, last.Repeats, last.Predicted, last.Repeats, last.Repeats),
		fmt.Sprintf("knowdp serve: error %.3g after 1 answer, %.3g after %d; %d of %d requests were answered from the ledger (%d with a different answer), largest budget spent %g of %g",
			sFirst.RMSE, sLast.RMSE, sLast.Repeats, serve.repeats, serve.asked, serve.changed, serve.spent, s.Eps),
	}
	return rep, nil
}
