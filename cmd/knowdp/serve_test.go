package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/knowdp/knowdp/internal/pgtest"
	"github.com/knowdp/knowdp/server"
)

func TestServeHelp(t *testing.T) {
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if code := run(context.Background(), e, []string{"serve", "--help"}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"--data-dir", "--db", "--addr", "--admin-key-file", "--admin-key-out", "--source-dir", "--rate", "--burst", "--analyst-in-flight", "--tls-cert", "--tls-key", "--insecure-behind-proxy", "/openapi.json", "/admin/"} {
		// Help goes to stderr today; the CLI conventions may move it to
		// stdout: either is fine here.
		if help := out.String() + errb.String(); !strings.Contains(help, want) {
			t.Errorf("help lacks %q:\n%s", want, help)
		}
	}
	errb.Reset()
	if code := run(context.Background(), e, []string{"serve", "--rate", "-1"}); code != 2 {
		t.Fatalf("--rate -1: exit %d", code)
	}
	errb.Reset()
	missing := filepath.Join(t.TempDir(), "nonexistent")
	if code := run(context.Background(), e, []string{"serve", "--data-dir", t.TempDir(), "--source-dir", missing}); code != 2 || !strings.Contains(errb.String(), "--source-dir "+missing+": not a directory") {
		t.Fatalf("--source-dir %s: exit %d, %s", missing, code, errb.String())
	}
}

// serverProc is a knowdp serve process.
type serverProc struct {
	cmd  *exec.Cmd
	url  string
	logs *syncWriter // the process's stderr
}

func startServe(t *testing.T, bin string, args ...string) *serverProc {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncWriter{w: &bytes.Buffer{}}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				line <- u
			}
		}
	}()
	select {
	case u := <-line:
		return &serverProc{cmd: cmd, url: u, logs: logs}
	case <-time.After(20 * time.Second):
		t.Fatalf("knowdp serve did not start: %s", logs.String())
	}
	return nil
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// String returns what was written so far, when w is a *bytes.Buffer.
func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.(*bytes.Buffer).String()
}

// client calls a server's API.
type client struct {
	t    *testing.T
	http *http.Client
	url  string
}

func (c *client) do(method, path, key, idem string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+key)
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

func (c *client) must(want int, method, path, key string, body, out any) {
	c.t.Helper()
	st, b, err := c.do(method, path, key, "", body)
	if err != nil || st != want {
		c.t.Fatalf("%s %s: %d %v: %s", method, path, st, err, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatal(err)
		}
	}
}

type answerResp struct {
	ID     string          `json:"query_id"`
	Repeat bool            `json:"repeat"`
	Steps  int64           `json:"charged_steps"`
	Answer json.RawMessage `json:"answer"`
}

type budgetResp struct {
	Total int64 `json:"total_steps"`
	Spent int64 `json:"spent_steps"`
}

// TestServeKill9 runs a real knowdp serve process under 64 concurrent clients,
// kills it with SIGKILL in the middle of the run, restarts it on the same
// data directory and checks the ledger: every answer a client saw is in it
// with the identical answer, a retry with the same idempotency key returns
// that answer without a new charge, and spent equals the sum of the ledger's
// charges and stays within the budget.
func TestServeKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped under -short: builds knowdp and kills it under a 64-client load")
	}
	bin := buildKnowdp(t)
	t.Run("sqlite", func(t *testing.T) {
		killAndAudit(t, bin, "--data-dir", filepath.Join(t.TempDir(), "data"))
	})
	t.Run("postgres", func(t *testing.T) {
		killAndAudit(t, bin, "--db", pgtest.Schema(t))
	})
}

// buildKnowdp builds the knowdp binary into a temporary directory.
func buildKnowdp(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "knowdp")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func killAndAudit(t *testing.T, bin string, store ...string) {
	keyFile := filepath.Join(t.TempDir(), "admin.key")
	root, _ := filepath.Abs("../..")
	args := append(store, "--addr", "127.0.0.1:0", "--admin-key-file", keyFile, "--rate", "0", "--source-dir", filepath.Join(root, "data"))
	srv := startServe(t, bin, args...)
	kb, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	admin := strings.TrimSpace(string(kb))
	c := &client{t: t, http: &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}, url: srv.url}

	schema, err := os.ReadFile(filepath.Join(root, "data", "arrests.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	c.must(http.StatusCreated, "POST", "/admin/v1/datasets", admin, map[string]any{
		"id": "arrests", "schema": json.RawMessage(schema),
		"source": map[string]string{"csv": filepath.Join(root, "data", "arrests.csv")},
		"policy": map[string]any{"epsilon_per_analyst": 1, "invariants": [][]string{{"colour"}}},
	}, nil)
	var created struct {
		Analyst struct{ ID string } `json:"analyst"`
		Key     string              `json:"api_key"`
	}
	c.must(http.StatusCreated, "POST", "/admin/v1/analysts", admin, map[string]string{"name": "loader"}, &created)
	key := created.Key

	// Query i weighs the cells of one year with coefficient i+1: distinct
	// queries, each charged 1/64 on its year's cells (Protocol 1).
	years := []string{"1997", "1998", "1999", "2000", "2001", "2002"}
	query := func(i int) map[string]any {
		return map[string]any{"kind": "linear", "epsilon": 1.0 / 64, "queries": []map[string]any{
			{"terms": []map[string]any{{"where": map[string][]string{"year": {years[i%6]}}, "coef": i + 1}}}}}
	}
	type outcome struct {
		status int
		resp   answerResp
	}
	var (
		mu       sync.Mutex
		answered = map[int]answerResp{} // seen answered by a client
		unknown  = map[int]bool{}       // in flight when the server died
		next     atomic.Int64
		nAns     atomic.Int64
	)
	load := func(stopAt int64, maxQueries int) {
		var wg sync.WaitGroup
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1) - 1)
					if i >= maxQueries || (stopAt > 0 && nAns.Load() >= stopAt) {
						return
					}
					st, b, err := c.do("POST", "/v1/datasets/arrests/queries", key, fmt.Sprint("q-", i), query(i))
					mu.Lock()
					switch {
					case err != nil:
						unknown[i] = true
					case st == http.StatusCreated || st == http.StatusOK:
						var r answerResp
						if err := json.Unmarshal(b, &r); err != nil {
							t.Errorf("query %d: %v", i, err)
						}
						answered[i] = r
						nAns.Add(1)
					case st != http.StatusForbidden:
						t.Errorf("query %d: status %d: %s", i, st, b)
					}
					mu.Unlock()
					if err != nil {
						return // the server is gone
					}
				}
			}()
		}
		wg.Wait()
	}

	// Phase 1: load, and kill -9 the server in the middle of it.
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		for nAns.Load() < 120 {
			time.Sleep(2 * time.Millisecond)
		}
		srv.cmd.Process.Kill() // SIGKILL
	}()
	load(0, 1<<30)
	<-killed
	srv.cmd.Wait()
	if len(unknown) == 0 {
		t.Logf("no request was in flight at the kill")
	}
	t.Logf("before the kill: %d answered, %d in flight", len(answered), len(unknown))

	// Phase 2: restart on the same data directory and audit.
	srv = startServe(t, bin, args...)
	c.url = srv.url
	budget := func() budgetResp {
		var b budgetResp
		c.must(http.StatusOK, "GET", "/v1/datasets/arrests/budget", key, nil, &b)
		return b
	}
	audit := func(stage string) budgetResp {
		b := budget()
		ids := map[string]int64{}
		before := int64(0)
		for {
			var page struct {
				Queries []struct {
					Seq   int64  `json:"seq"`
					ID    string `json:"id"`
					Steps int64  `json:"charged_steps"`
				} `json:"queries"`
			}
			path := "/admin/v1/queries?limit=1000&analyst=" + created.Analyst.ID
			if before > 0 {
				path += fmt.Sprint("&before=", before)
			}
			c.must(http.StatusOK, "GET", path, admin, nil, &page)
			if len(page.Queries) == 0 {
				break
			}
			for _, q := range page.Queries {
				ids[q.ID] = q.Steps
				before = q.Seq
			}
		}
		var sum int64
		for _, s := range ids {
			sum += s
		}
		if sum != b.Spent || b.Spent > b.Total {
			t.Fatalf("%s: ledger charges add up to %d steps, spent %d, total %d", stage, sum, b.Spent, b.Total)
		}
		mu.Lock()
		defer mu.Unlock()
		for i, r := range answered {
			if _, ok := ids[r.ID]; !ok {
				t.Fatalf("%s: query %d was answered (%s) but is not in the ledger", stage, i, r.ID)
			}
		}
		t.Logf("%s: %d ledger entries, spent %d of %d steps", stage, len(ids), b.Spent, b.Total)
		return b
	}
	b0 := audit("after restart")
	for i, r := range answered {
		st, body, err := c.do("POST", "/v1/datasets/arrests/queries", key, fmt.Sprint("q-", i), query(i))
		var again answerResp
		json.Unmarshal(body, &again)
		if err != nil || st != http.StatusOK || !again.Repeat || again.ID != r.ID || !bytes.Equal(again.Answer, r.Answer) {
			t.Fatalf("retry of answered query %d: %d %v repeat=%v id %s (want %s)\n%s\nwant %s", i, st, err, again.Repeat, again.ID, r.ID, again.Answer, r.Answer)
		}
	}
	if b := budget(); b.Spent != b0.Spent {
		t.Fatalf("retrying answered queries charged %d steps", b.Spent-b0.Spent)
	}
	// The requests in flight at the kill: each was either committed (its
	// retry returns the stored answer) or not (answered now, or refused).
	for i := range unknown {
		st, body, err := c.do("POST", "/v1/datasets/arrests/queries", key, fmt.Sprint("q-", i), query(i))
		if err != nil || (st != http.StatusOK && st != http.StatusCreated && st != http.StatusForbidden) {
			t.Fatalf("retry of in-flight query %d: %d %v %s", i, st, err, body)
		}
		if st != http.StatusForbidden {
			var r answerResp
			json.Unmarshal(body, &r)
			mu.Lock()
			answered[i] = r
			mu.Unlock()
		}
	}
	audit("after retrying the queries in flight")

	// Phase 3: load until the budget is gone; it is never exceeded.
	load(0, int(next.Load())+900)
	b := audit("after exhausting the budget")
	if b.Total-b.Spent >= b.Total/64 {
		t.Fatalf("the budget was not exhausted: %d of %d steps left", b.Total-b.Spent, b.Total)
	}
}

// TestServeAdminKeyOut checks where a generated admin key goes: never to
// stderr (the log). Without a terminal and without --admin-key-out the
// server refuses to start, and keeps no key nobody saw; with
// --admin-key-out the key is in that file, mode 0600, and works.
func TestServeAdminKeyOut(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped under -short: builds knowdp")
	}
	bin := buildKnowdp(t)
	dir := filepath.Join(t.TempDir(), "data")
	// setsid: no controlling terminal, as under a service manager.
	cmd := exec.Command(bin, "serve", "--data-dir", dir, "--addr", "127.0.0.1:0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--admin-key-out") || strings.Contains(string(out), "kdp_") {
		t.Fatalf("without a terminal or --admin-key-out: %v\n%s", err, out)
	}
	keyOut := filepath.Join(t.TempDir(), "admin.key")
	srv := startServe(t, bin, "--data-dir", dir, "--addr", "127.0.0.1:0", "--admin-key-out", keyOut)
	if fi, err := os.Stat(keyOut); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("--admin-key-out file: %v %v", err, fi)
	}
	kb, _ := os.ReadFile(keyOut)
	key := strings.TrimSpace(string(kb))
	c := &client{t: t, http: &http.Client{Timeout: 15 * time.Second}, url: srv.url}
	c.must(http.StatusOK, "GET", "/admin/v1/admin-keys", key, nil, nil)
	if logs := srv.logs.String(); strings.Contains(logs, key) || strings.Contains(logs, "kdp_") {
		t.Fatalf("the admin key is in the log:\n%s", logs)
	}
	// The database and its WAL hold the exact counts: owner-only.
	for _, name := range []string{"knowdp.db", "knowdp.db-wal", "knowdp.db-shm"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", name, err, fi)
		}
	}
}

// TestAdminKeyFileMode: an admin key file that other users may read (or
// write) is refused with an error naming its mode and the fix; a file of
// its owner's alone is read.
func TestAdminKeyFileMode(t *testing.T) {
	for _, tc := range []struct {
		mode os.FileMode
		ok   bool
	}{
		{0o600, true},
		{0o400, true},
		{0o644, false},
		{0o640, false},
		{0o604, false},
		{0o620, false},
	} {
		path := filepath.Join(t.TempDir(), "admin.key")
		key := server.GenerateKey()
		if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tc.mode); err != nil {
			t.Fatal(err)
		}
		got, err := adminKeyFromFile(path)
		switch {
		case tc.ok && (err != nil || got != key):
			t.Errorf("mode %04o: %q, %v", tc.mode, got, err)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%04o", tc.mode)) || !strings.Contains(err.Error(), "chmod 600")):
			t.Errorf("mode %04o: accepted or unclear: %v", tc.mode, err)
		}
	}
}
