package server

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/knowdp/knowdp/internal/pgtest"
	"github.com/knowdp/knowdp/server/store"
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
	db    *sql.DB // see sqlite
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
	h := srv.Handler()
	if tt, ok := t.(*testing.T); ok {
		// Every request and response of a test is checked against
		// openapi.json; benchmarks measure the server alone.
		h = specChecked(tt, h)
	}
	ts := httptest.NewServer(h)
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
func (s *testServer) ledger(analyst, dataset string) []*store.Entry {
	s.t.Helper()
	es, err := s.srv.st.Entries(context.Background(), analyst, dataset, 0, 1<<30)
	if err != nil {
		s.t.Fatal(err)
	}
	return es
}

// sqlite returns a connection of the test's own to the server's SQLite
// database (Config.DataDir), closed when the test ends: to look at the
// stored rows, or to break the store, beside the server.
func (s *testServer) sqlite() *sql.DB {
	s.t.Helper()
	if s.db != nil {
		return s.db
	}
	if s.srv.cfg.DataDir == "" {
		s.t.Fatal("sqlite: the server's store is not SQLite")
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(s.srv.cfg.DataDir, "knowdp.db")+"?_busy_timeout=10000")
	if err != nil {
		s.t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	s.t.Cleanup(func() { db.Close() })
	s.db = db
	return db
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

// The OpenAPI document as the tests read it, loaded and validated once.
var spec struct {
	once   sync.Once
	doc    *openapi3.T
	router routers.Router
	err    error
}

// loadSpec loads openapi.json, validates it as OpenAPI and returns it with a
// router over its paths. The copy the tests use is stricter than the served
// one: every object schema that lists properties and says nothing about
// others forbids them, so that a field the server sends or accepts and the
// document does not list fails a test (the served document leaves clients
// free to ignore fields added later).
func loadSpec(t testing.TB) (*openapi3.T, routers.Router) {
	t.Helper()
	spec.once.Do(func() {
		// The console's page, script and style sheet are checked as text.
		for _, ct := range []string{"text/html", "text/css", "text/javascript"} {
			openapi3filter.RegisterBodyDecoder(ct, openapi3filter.FileBodyDecoder)
		}
		doc, err := openapi3.NewLoader().LoadFromData(openapiJSON)
		if err != nil {
			spec.err = fmt.Errorf("openapi.json: %w", err)
			return
		}
		if err := doc.Validate(context.Background()); err != nil {
			spec.err = fmt.Errorf("openapi.json is not valid OpenAPI %s: %w", doc.OpenAPI, err)
			return
		}
		if err := closeObjects(doc); err != nil {
			spec.err = err
			return
		}
		router, err := legacy.NewRouter(doc)
		if err != nil {
			spec.err = fmt.Errorf("openapi.json: routes: %w", err)
			return
		}
		spec.doc, spec.router = doc, router
	})
	if spec.err != nil {
		t.Fatal(spec.err)
	}
	return spec.doc, spec.router
}

// closeObjects sets additionalProperties false on every object schema of doc
// that lists properties and leaves additionalProperties unset. It refuses
// allOf, whose members could then not be combined.
func closeObjects(doc *openapi3.T) error {
	seen := map[*openapi3.Schema]bool{}
	closed := false
	var walk func(path string, r *openapi3.SchemaRef) error
	walk = func(path string, r *openapi3.SchemaRef) error {
		if r == nil || r.Value == nil || seen[r.Value] {
			return nil
		}
		s := r.Value
		seen[s] = true
		if len(s.AllOf) > 0 {
			return fmt.Errorf("openapi.json: %s uses allOf; list the properties instead (the tests close every object)", path)
		}
		if len(s.Properties) > 0 && s.AdditionalProperties.Has == nil && s.AdditionalProperties.Schema == nil {
			s.AdditionalProperties.Has = &closed
		}
		for name, p := range s.Properties {
			if err := walk(path+"."+name, p); err != nil {
				return err
			}
		}
		for i, sub := range append(append(slices.Clone(s.AnyOf), s.OneOf...), s.Items, s.AdditionalProperties.Schema, s.Not) {
			if err := walk(fmt.Sprintf("%s[%d]", path, i), sub); err != nil {
				return err
			}
		}
		return nil
	}
	for name, r := range doc.Components.Schemas {
		if err := walk(name, r); err != nil {
			return err
		}
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				for _, mt := range op.RequestBody.Value.Content {
					if err := walk(method+" "+path+" request", mt.Schema); err != nil {
						return err
					}
				}
			}
			for status, resp := range op.Responses.Map() {
				if resp.Value == nil {
					continue
				}
				for _, mt := range resp.Value.Content {
					if err := walk(method+" "+path+" "+status, mt.Schema); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// specChecked wraps the server's handler so that every request a test sends
// and every response it gets is checked against openapi.json: a request the
// document accepts must get a documented response that matches it, and a
// request the document refuses (a missing key, a field it does not list, a
// value outside its bounds) must be refused by the server too (4xx). Any
// mismatch fails the test.
func specChecked(t *testing.T, h http.Handler) http.Handler {
	doc, router := loadSpec(t)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
		if err != nil {
			// The client went away while sending: nothing to check.
			h.ServeHTTP(w, r)
			return
		}
		rec := &recordingWriter{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		if err := checkExchange(doc, router, r, body, rec); err != nil {
			t.Errorf("openapi.json: %s %s -> %d: %v\nrequest body: %s\nresponse body: %s",
				r.Method, r.URL.RequestURI(), rec.status, err, clipBytes(body), clipBytes(rec.body.Bytes()))
		}
	})
}

// checkExchange checks one request and its response against the document.
func checkExchange(doc *openapi3.T, router routers.Router, r *http.Request, body []byte, rec *recordingWriter) error {
	ctx := context.Background()
	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	// The request as the validator sees it: its own body, and JSON when it
	// has no Content-Type (the server reads every body as JSON).
	vr := r.Clone(ctx)
	vr.Body = io.NopCloser(bytes.NewReader(body))
	vr.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	if len(body) > 0 && vr.Header.Get("Content-Type") == "" {
		vr.Header.Set("Content-Type", "application/json")
	}
	if p := vr.URL.Path; strings.HasPrefix(p, "/admin/") && !strings.HasPrefix(p, "/admin/v1/") {
		// The page's files are all served by the one /admin/ operation.
		vr.URL.Path = "/admin/"
	}
	vr.Host, vr.URL.Host, vr.URL.Scheme = "", "", ""
	route, params, err := router.FindRoute(vr)
	if err != nil {
		// Not a documented operation: the server must say so.
		if status != http.StatusNotFound {
			return fmt.Errorf("no documented operation (%v), yet the server answered %d", err, status)
		}
		var v any
		if err := json.Unmarshal(rec.body.Bytes(), &v); err != nil {
			return fmt.Errorf("404 body: %w", err)
		}
		return doc.Components.Schemas["Error"].Value.VisitJSON(v)
	}
	opts := &openapi3filter.Options{
		MultiError:            true,
		SkipSettingDefaults:   true,
		IncludeResponseStatus: true,
		AuthenticationFunc: func(_ context.Context, in *openapi3filter.AuthenticationInput) error {
			if !strings.HasPrefix(in.RequestValidationInput.Request.Header.Get("Authorization"), "Bearer ") {
				return errors.New("no bearer key")
			}
			return nil
		},
	}
	in := &openapi3filter.RequestValidationInput{Request: vr, PathParams: params, Route: route, Options: opts}
	reqErr := openapi3filter.ValidateRequest(ctx, in)
	if reqErr != nil && status < 400 {
		return fmt.Errorf("the document refuses the request (%v), yet the server answered %d", reqErr, status)
	}
	if reqErr != nil && status >= 500 {
		return fmt.Errorf("the document refuses the request (%v): the server should refuse it with a 4xx, not %d", reqErr, status)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: rec.Header(), Options: opts}
	out.SetBodyBytes(rec.body.Bytes())
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return fmt.Errorf("response: %w", err)
	}
	return nil
}

// recordingWriter passes a response through and keeps a copy of it.
type recordingWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *recordingWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recordingWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.body.Write(b)
	return w.ResponseWriter.Write(b)
}

// Flush lets the handler flush through the recorder.
func (w *recordingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// clipBytes shortens a body for a failure message.
func clipBytes(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + fmt.Sprintf("... (%d bytes)", len(b))
	}
	return string(b)
}
