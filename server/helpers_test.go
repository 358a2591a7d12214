package server

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/knowdp/knowdp/internal/pgtest"
)

// repoRoot returns the repository root (for data/arrests.*).
func repoRoot(t testing.TB) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// forEachStore runs f against a fresh SQLite store and a fresh PostgreSQL
// schema. Without a PostgreSQL DSN the PostgreSQL run fails: the suite must
// cover both.
func forEachStore(t *testing.T, f func(t *testing.T, cfg Config)) {
	t.Run("sqlite", func(t *testing.T) {
		f(t, Config{DataDir: t.TempDir()})
	})
	t.Run("postgres", func(t *testing.T) {
		f(t, Config{Postgres: pgtest.Schema(t)})
	})
}

// testServer is a server on a loopback port with its admin key.
type testServer struct {
	t     testing.TB
	srv   *Server
	ts    *httptest.Server
	admin string
}

func startServer(t testing.TB, cfg Config) *testServer {
	t.Helper()
	if cfg.AdminKey == "" {
		cfg.AdminKey = GenerateKey()
	}
	if cfg.SourceDirs == nil {
		// The bundled data and the tests' temporary files.
		cfg.SourceDirs = []string{filepath.Join(repoRoot(t), "data"), os.TempDir()}
	}
	srv, shown, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if shown != "" {
		t.Fatalf("Open showed a generated admin key although one was given")
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
	})
	return &testServer{t: t, srv: srv, ts: ts, admin: cfg.AdminKey}
}

// call sends a request and decodes the JSON response into out (if not nil).
// It returns the status and the raw body.
func (s *testServer) call(method, path, key string, body any, header map[string]string, out any) (int, []byte) {
	s.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, s.ts.URL+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := s.ts.Client().Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			s.t.Fatalf("%s %s: decoding %s: %v", method, path, raw, err)
		}
	}
	return res.StatusCode, raw
}

// must is call that fails the test unless the status is want.
func (s *testServer) must(want int, method, path, key string, body any, out any) []byte {
	s.t.Helper()
	got, raw := s.call(method, path, key, body, nil, out)
	if got != want {
		s.t.Fatalf("%s %s: status %d, want %d: %s", method, path, got, want, raw)
	}
	return raw
}

func arrestsSchema(t testing.TB) json.RawMessage {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "data", "arrests.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// registerArrests registers the bundled arrests data under id with the given
// budget and invariants.
func (s *testServer) registerArrests(id string, eps float64, invariants ...[]string) {
	s.t.Helper()
	req := DatasetRequest{
		ID: id, Name: "Toronto arrests", Schema: arrestsSchema(s.t),
		Source: Source{CSV: filepath.Join(repoRoot(s.t), "data", "arrests.csv")},
		Policy: Policy{EpsilonPerAnalyst: eps, Invariants: invariants},
	}
	s.must(http.StatusCreated, "POST", "/admin/v1/datasets", s.admin, req, nil)
}

// analyst creates an analyst and returns its id and key.
func (s *testServer) analyst(name string) (id, key string) {
	s.t.Helper()
	var out struct {
		Analyst analystView `json:"analyst"`
		Key     string      `json:"api_key"`
	}
	s.must(http.StatusCreated, "POST", "/admin/v1/analysts", s.admin, map[string]string{"name": name}, &out)
	return out.Analyst.ID, out.Key
}

// response is a decoded query response.
type response struct {
	Seq     int64           `json:"seq"`
	ID      string          `json:"query_id"`
	Repeat  bool            `json:"repeat"`
	Steps   int64           `json:"charged_steps"`
	Unit    string          `json:"unit"`
	Charged *float64        `json:"charged_epsilon"`
	Answer  json.RawMessage `json:"answer"`
	Budget  budgetView      `json:"budget"`
	Request json.RawMessage `json:"request"`
}

// ask posts a query and returns the status and response.
func (s *testServer) ask(dataset, key string, q any, idem string) (int, response, []byte) {
	s.t.Helper()
	var h map[string]string
	if idem != "" {
		h = map[string]string{"Idempotency-Key": idem}
	}
	var r response
	status, raw := s.call("POST", "/v1/datasets/"+dataset+"/queries", key, q, h, nil)
	if status == http.StatusOK || status == http.StatusCreated {
		if err := json.Unmarshal(raw, &r); err != nil {
			s.t.Fatal(err)
		}
	}
	return status, r, raw
}

// budgetOf returns the analyst's budget on a dataset.
func (s *testServer) budgetOf(dataset, key string) budgetView {
	s.t.Helper()
	var b budgetView
	s.must(http.StatusOK, "GET", "/v1/datasets/"+dataset+"/budget", key, nil, &b)
	return b
}

// ledger returns every ledger entry of an analyst on a dataset, straight from
// the store.
func (s *testServer) ledger(analyst, dataset string) []*entry {
	s.t.Helper()
	es, err := s.srv.st.entries(context.Background(), analyst, dataset, 0, 1<<30)
	if err != nil {
		s.t.Fatal(err)
	}
	return es
}

// countQuery is a linear query with one term.
func countQuery(coef int, where map[string][]string) LinearQuery {
	c := json.Number(fmt.Sprint(coef))
	return LinearQuery{Terms: []Term{{Where: where, Coef: &c}}}
}

// readArrests returns the rows of data/arrests.csv as maps from column to
// value, for the schema's dimensions.
func readArrests(t testing.TB) []map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "data", "arrests.csv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	header := strings.Split(lines[0], ",")
	var rows []map[string]string
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		r := map[string]string{}
		for i, h := range header {
			r[h] = f[i]
		}
		rows = append(rows, r)
	}
	return rows
}

// arrestsColumns are the schema's dimensions; year is stored as an integer
// to check that the GROUP BY source casts it.
var arrestsColumns = []string{"year", "colour", "sex", "agegroup", "employed", "citizen", "checks", "released"}

// loadTable creates the table arrests in the database and fills it.
func loadTable(t testing.TB, driver, dsn string, rows []map[string]string) {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cols := []string{"year INTEGER"}
	for _, c := range arrestsColumns[1:] {
		cols = append(cols, c+" TEXT")
	}
	if _, err := db.Exec("CREATE TABLE arrests (" + strings.Join(cols, ", ") + ")"); err != nil {
		t.Fatal(err)
	}
	const batch = 500
	for start := 0; start < len(rows); start += batch {
		end := min(start+batch, len(rows))
		var ph []string
		var args []any
		for _, r := range rows[start:end] {
			var p []string
			for _, c := range arrestsColumns {
				args = append(args, r[c])
				if driver == "pgx" {
					p = append(p, fmt.Sprintf("$%d", len(args)))
				} else {
					p = append(p, "?")
				}
			}
			ph = append(ph, "("+strings.Join(p, ",")+")")
		}
		q := "INSERT INTO arrests (" + strings.Join(arrestsColumns, ",") + ") VALUES " + strings.Join(ph, ",")
		if driver == "pgx" {
			q = strings.Replace(q, "($1,", "($1::integer,", 1)
			// every year placeholder needs the cast on PostgreSQL
			for i := len(arrestsColumns) + 1; i <= len(args); i += len(arrestsColumns) {
				q = strings.Replace(q, fmt.Sprintf("($%d,", i), fmt.Sprintf("($%d::integer,", i), 1)
			}
		}
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
}

// errMsg returns the message of an error response.
func errMsg(raw []byte) string {
	var e struct {
		Error struct{ Message string } `json:"error"`
	}
	json.Unmarshal(raw, &e)
	return e.Error.Message
}

func numberPtr(n int) *json.Number {
	v := json.Number(fmt.Sprint(n))
	return &v
}

func mustUnmarshal(t testing.TB, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes (a log sink).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
