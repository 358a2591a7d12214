package server

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/server/admission"
	"github.com/knowdp/knowdp/server/ingest"
	"github.com/knowdp/knowdp/server/store"
	"github.com/knowdp/knowdp/server/tlsconfig"
)

// Config configures a Server.
type Config struct {
	// DataDir holds the embedded SQLite database (knowdp.db). It is used
	// when Postgres is empty.
	DataDir string
	// Postgres, if set, is the DSN of a PostgreSQL database that holds
	// the state instead (a shared deployment). A database on another host
	// must be reached with TLS (see tlsconfig.CheckPostgres).
	Postgres string
	// AdminKey, if set, is the curator's key (see GenerateKey); it is
	// registered if new. Otherwise a key is generated at the first start
	// and returned once by Open.
	AdminKey string
	// RateLimit is the number of requests per second each API key may
	// make, with bursts of RateBurst; RateLimit 0 disables the limit.
	RateLimit float64
	RateBurst int
	// CellLimit bounds the base cuboid of a registered dataset; 0 means
	// DefaultCellLimit.
	CellLimit int
	// QueryTimeout bounds an analyst request until its query is admitted
	// (its computation, which the client's going away does not stop, has
	// ComputeTimeout; see docs/server.md); AdminTimeout bounds a curator
	// request (registering a dataset counts its source). 0 means the
	// defaults, 1 minute and 10 minutes.
	QueryTimeout, AdminTimeout time.Duration
	// ComputeTimeout bounds the computation of an admitted query, from
	// its admission; 0 means QueryTimeout. It is a constant, so whether a
	// computation times out may depend on the data: a timed-out
	// computation is charged like a failed answer.
	ComputeTimeout time.Duration
	// Log receives one line per request (never a key or a secret); nil
	// discards.
	Log *slog.Logger
	// SourceDirs are the only directories whose files (CSV files, SQLite
	// databases) a curator may register as a dataset's source; symbolic
	// links are resolved before the check. Empty: file sources are refused.
	SourceDirs []string
	// AnalystCompute bounds how many of one analyst's queries are planned
	// and computed at once (others wait their turn); AnalystInFlight bounds
	// how many of one analyst's queries may be in the server at all, waiting
	// or running (beyond it: 429). 0 means DefaultAnalystCompute and
	// DefaultAnalystInFlight.
	AnalystCompute, AnalystInFlight int
	// LedgerQuota bounds the bytes of stored requests and answers of one
	// analyst on one dataset (beyond it: 429, nothing computed); 0 means
	// DefaultLedgerQuota.
	LedgerQuota int64
	// AdminKeyOut, if set, is called with an admin key that Open generates
	// (there is no AdminKey and no active admin key) before its hash is
	// stored: if it fails, nothing is stored and Open fails, so a key is
	// never kept that nobody saw.
	AdminKeyOut func(key string) error
}

// Defaults of the per-analyst quotas.
const (
	DefaultAnalystCompute  = 2
	DefaultAnalystInFlight = 64
	DefaultLedgerQuota     = 256 << 20
)

// DefaultCellLimit is the largest base cuboid a dataset may have unless
// Config.CellLimit says otherwise: 2^24 cells (128 MiB of counts).
const DefaultCellLimit = 1 << 24

// maxMessage bounds the length of an error message.
const maxMessage = 1024

// Body size limits.
const (
	maxQueryBody = 1 << 20
	maxAdminBody = 4 << 20
)

// Server is the interactive query server: curators register datasets and
// analysts, analysts query within their budgets, and every answer is in a
// durable ledger before it is sent.
type Server struct {
	cfg  Config
	st   *store.DB
	log  *slog.Logger
	mux  *http.ServeMux
	rts  []route
	mu   sync.Mutex
	sets map[string]*dataset
	// adm keeps the per-key rate limits and the per-analyst and heavy
	// planning slots.
	adm *admission.Controller
	// kept caches the analysts' decoded measurements (see keptCache).
	kept keptCache
	// computed counts the answers computed (prepared and drawn): what an
	// analyst made the server work on.
	computed atomic.Int64
	// planned counts the queries planned (expanded and hashed): planning
	// costs CPU before any budget is charged.
	planned atomic.Int64
	// prepared counts the queries whose costly preparation (a split's
	// solver, a refinement's SVDs) ran.
	prepared atomic.Int64
	// afterAdmit, if set (tests only), is called with the request's
	// context and the computation's once a query has been admitted, before
	// it is computed.
	afterAdmit func(req, compute context.Context)
	// life ends when the server closes: admitted computations stop then
	// (and nothing is charged for them).
	life     context.Context
	stopLife context.CancelFunc
}

//go:embed openapi.json
var openapiJSON []byte

//go:embed web
var webFS embed.FS

// Open opens (creating and migrating if needed) the server's store and loads
// its datasets. adminKey is non-empty only when a new admin key was
// generated: it must be shown to the curator now, as it is never shown again.
func Open(ctx context.Context, cfg Config) (s *Server, adminKey string, err error) {
	if cfg.CellLimit == 0 {
		cfg.CellLimit = DefaultCellLimit
	}
	if cfg.QueryTimeout == 0 {
		cfg.QueryTimeout = time.Minute
	}
	if cfg.ComputeTimeout == 0 {
		cfg.ComputeTimeout = cfg.QueryTimeout
	}
	if cfg.AdminTimeout == 0 {
		cfg.AdminTimeout = 10 * time.Minute
	}
	if cfg.AnalystCompute == 0 {
		cfg.AnalystCompute = DefaultAnalystCompute
	}
	if cfg.AnalystInFlight == 0 {
		cfg.AnalystInFlight = DefaultAnalystInFlight
	}
	if cfg.LedgerQuota == 0 {
		cfg.LedgerQuota = DefaultLedgerQuota
	}
	if cfg.AnalystCompute < 0 || cfg.AnalystInFlight < 0 || cfg.LedgerQuota < 0 {
		return nil, "", fmt.Errorf("analyst quotas must be >= 0, got compute %d, in flight %d, ledger %d bytes", cfg.AnalystCompute, cfg.AnalystInFlight, cfg.LedgerQuota)
	}
	dirs, err := ingest.Dirs(cfg.SourceDirs)
	if err != nil {
		return nil, "", err
	}
	cfg.SourceDirs = dirs
	if cfg.RateLimit < 0 || math.IsNaN(cfg.RateLimit) {
		return nil, "", fmt.Errorf("rate limit must be >= 0, got %v", cfg.RateLimit)
	}
	if cfg.RateLimit > 0 && cfg.RateBurst < 1 {
		cfg.RateBurst = max(1, int(cfg.RateLimit))
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var st *store.DB
	switch {
	case cfg.Postgres != "":
		if err := tlsconfig.CheckPostgres(cfg.Postgres); err != nil {
			return nil, "", fmt.Errorf("PostgreSQL store: %w", err)
		}
		st, err = store.OpenPostgres(cfg.Postgres)
	case cfg.DataDir != "":
		st, err = store.OpenSQLite(cfg.DataDir)
	default:
		return nil, "", errors.New("give a data directory (SQLite) or a PostgreSQL DSN")
	}
	if err != nil {
		return nil, "", err
	}
	if err := st.Migrate(ctx); err != nil {
		st.Close()
		return nil, "", err
	}
	if adminKey, err = st.EnsureAdminKey(ctx, cfg.AdminKey, cfg.AdminKeyOut); err != nil {
		st.Close()
		return nil, "", err
	}
	if others, err := st.AdminKeys(ctx); err == nil {
		var active []string
		for _, k := range others {
			if k.Revoked == nil {
				active = append(active, k.ID)
			}
		}
		if len(active) > 1 {
			log.Warn("several admin keys are active; list them at GET /admin/v1/admin-keys and revoke the ones no longer used", "key_ids", strings.Join(active, ","))
		}
	}
	s = &Server{cfg: cfg, st: st, log: log, sets: map[string]*dataset{}}
	s.life, s.stopLife = context.WithCancel(context.Background())
	// Costly plannings (over admission.MaxProbeWork base cells) take at
	// most half the processors, whoever asks, so that planning never
	// takes every core from the other requests.
	s.adm = admission.New(admission.Config{Rate: cfg.RateLimit, Burst: cfg.RateBurst,
		Compute: cfg.AnalystCompute, InFlight: cfg.AnalystInFlight, Heavy: runtime.GOMAXPROCS(0) / 2})
	ids, err := st.DatasetIDs(ctx)
	if err != nil {
		st.Close()
		return nil, "", err
	}
	for _, id := range ids {
		d, err := s.dataset(ctx, id)
		if err != nil {
			st.Close()
			return nil, "", err
		}
		if d.unavailable != "" {
			log.Error("dataset unavailable: the server runs without it (GET /admin/v1/datasets/"+id+" says why)", "dataset", id, "reason", d.unavailable)
		}
	}
	s.routes()
	return s, adminKey, nil
}

// Close stops the admitted computations and closes the store (whose charges
// still waiting to be committed fail, uncharged).
func (s *Server) Close() error {
	s.stopLife()
	return s.st.Close()
}

// GenerateKey returns a new API key in knowdp's format, for an admin key file
// made outside the server (Config.AdminKey).
func GenerateKey() string { return store.GenerateKey() }

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.mux }

// HTTPServer returns an http.Server for the handler with conservative
// timeouts.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		WriteTimeout:      s.cfg.AdminTimeout + time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// dataset returns a registered dataset, loading it from the store if another
// server process registered it. Whether it is retired is read from the
// store every time: another server process may have retired it.
func (s *Server) dataset(ctx context.Context, id string) (*dataset, error) {
	s.mu.Lock()
	d := s.sets[id]
	s.mu.Unlock()
	if d == nil {
		rec, err := s.st.Dataset(ctx, id)
		if err != nil {
			return nil, err
		}
		d = loadDataset(rec)
		s.mu.Lock()
		if prev := s.sets[id]; prev != nil {
			d = prev
		} else {
			s.sets[id] = d
		}
		s.mu.Unlock()
	}
	retired, err := s.st.RetiredAt(ctx, id)
	if err != nil {
		return nil, err
	}
	d.retired.Store(retired)
	return d, nil
}

// Roles of API keys.
const (
	roleAdmin   = store.RoleAdmin
	roleAnalyst = store.RoleAnalyst
)

// principal is who made a request.
type principal struct {
	keyID     string
	role      string
	analystID string // empty for the admin
	analyst   string // the analyst's name
}

// route is one endpoint. The route table is the single source of truth for
// the mux, the auth checks and the OpenAPI test.
type route struct {
	method, path string
	auth         string // "", roleAnalyst or roleAdmin
	handle       func(w http.ResponseWriter, r *http.Request, p principal) error
}

func (s *Server) routes() {
	s.rts = []route{
		{"GET", "/healthz", "", s.health},
		{"GET", "/openapi.json", "", s.openapi},
		{"GET", "/admin/", "", s.web},

		{"GET", "/v1/me", roleAnalyst, s.me},
		{"GET", "/v1/datasets", roleAnalyst, s.listDatasets},
		{"GET", "/v1/datasets/{dataset}", roleAnalyst, s.getDataset},
		{"GET", "/v1/datasets/{dataset}/invariants", roleAnalyst, s.getInvariants},
		{"GET", "/v1/datasets/{dataset}/budget", roleAnalyst, s.getBudget},
		{"GET", "/v1/datasets/{dataset}/queries", roleAnalyst, s.listQueries},
		{"POST", "/v1/datasets/{dataset}/queries", roleAnalyst, s.ask},
		{"GET", "/v1/queries/{query}", roleAnalyst, s.getQuery},

		{"GET", "/admin/v1/datasets", roleAdmin, s.adminListDatasets},
		{"POST", "/admin/v1/datasets", roleAdmin, s.adminRegister},
		{"GET", "/admin/v1/datasets/{dataset}", roleAdmin, s.adminGetDataset},
		{"PATCH", "/admin/v1/datasets/{dataset}", roleAdmin, s.adminPatchDataset},
		{"DELETE", "/admin/v1/datasets/{dataset}", roleAdmin, s.adminRetireDataset},
		{"GET", "/admin/v1/analysts", roleAdmin, s.adminListAnalysts},
		{"POST", "/admin/v1/analysts", roleAdmin, s.adminCreateAnalyst},
		{"POST", "/admin/v1/analysts/{analyst}/keys", roleAdmin, s.adminIssueKey},
		{"PATCH", "/admin/v1/analysts/{analyst}/budgets/{dataset}", roleAdmin, s.adminChangeBudget},
		{"GET", "/admin/v1/analysts/{analyst}/spending", roleAdmin, s.adminSpending},
		{"GET", "/admin/v1/audit", roleAdmin, s.adminAudit},
		{"DELETE", "/admin/v1/keys/{key}", roleAdmin, s.adminRevokeKey},
		{"GET", "/admin/v1/admin-keys", roleAdmin, s.adminListAdminKeys},
		{"POST", "/admin/v1/admin-keys", roleAdmin, s.adminIssueAdminKey},
		{"GET", "/admin/v1/queries", roleAdmin, s.adminQueries},
	}
	s.mux = http.NewServeMux()
	for _, rt := range s.rts {
		s.mux.Handle(rt.method+" "+rt.path, s.wrap(rt))
	}
	s.mux.Handle("/", s.wrap(route{auth: "", handle: func(w http.ResponseWriter, r *http.Request, _ principal) error {
		return &apiError{http.StatusNotFound, "not_found", "no such endpoint; see /openapi.json"}
	}}))
}

// apiError is an error with its HTTP status and a stable code.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

// statusRecorder captures the status for the request log.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// wrap adds, around a route's handler: panic recovery, the body limit, the
// deadline, authentication, the per-key rate limit, error responses and the
// request log.
func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		var p principal
		defer func() {
			if v := recover(); v != nil {
				s.log.Error("panic", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v))
				if rec.status == 0 {
					writeError(rec, &apiError{http.StatusInternalServerError, "internal", "internal error"})
				}
			}
			s.log.Info("request", "method", r.Method, "path", r.URL.Path, "status", rec.status,
				"ms", float64(time.Since(start).Microseconds())/1000, "key", p.keyID, "analyst", p.analystID, "remote", r.RemoteAddr)
		}()
		limit, timeout := int64(maxQueryBody), s.cfg.QueryTimeout
		if rt.auth == roleAdmin {
			limit, timeout = maxAdminBody, s.cfg.AdminTimeout
		}
		r.Body = http.MaxBytesReader(rec, r.Body, limit)
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		r = r.WithContext(ctx)
		err := func() error {
			if rt.auth != "" {
				var err error
				if p, err = s.authorize(r, rt.auth); err != nil {
					return err
				}
			}
			return rt.handle(rec, r, p)
		}()
		if err != nil {
			s.fail(rec, r, err)
		}
	})
}

// authorize authenticates the request's bearer key and checks its role and
// rate limit.
func (s *Server) authorize(r *http.Request, role string) (principal, error) {
	auth := r.Header.Get("Authorization")
	key, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok || key == "" {
		return principal{}, &apiError{http.StatusUnauthorized, "unauthorized", "send the API key as Authorization: Bearer <key>"}
	}
	k, err := s.st.Authenticate(r.Context(), strings.TrimSpace(key))
	if errors.Is(err, store.ErrBadKey) {
		return principal{}, &apiError{http.StatusUnauthorized, "unauthorized", err.Error()}
	}
	if err != nil {
		return principal{}, err
	}
	p := principal{keyID: k.KeyID, role: k.Role, analystID: k.AnalystID, analyst: k.Analyst}
	if p.role != role {
		if role == roleAdmin {
			return p, &apiError{http.StatusForbidden, "forbidden", "this endpoint needs the curator's admin key"}
		}
		return p, &apiError{http.StatusForbidden, "forbidden", "this endpoint needs an analyst's key"}
	}
	if !s.adm.Allow(p.keyID) {
		return p, &apiError{http.StatusTooManyRequests, "rate_limited", fmt.Sprintf("rate limit of %g requests per second per key exceeded; retry later", s.cfg.RateLimit)}
	}
	return p, nil
}

// fail writes err as a JSON error. Internal errors are logged and shown only
// as "internal error": their text might depend on private data.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var (
		ae *apiError
		ie *inputError
		be *store.BudgetError
		me *http.MaxBytesError
	)
	if errors.Is(err, errClientGone) {
		// Nobody to answer: say what happened, not that the store failed.
		s.log.Info("client went away before its response was written", "method", r.Method, "path", r.URL.Path, "err", err)
		return
	}
	switch {
	case errors.As(err, &ae):
	case errors.Is(r.Context().Err(), context.Canceled) && !errors.Is(err, store.ErrCommitFailed):
		// The client went away: whatever the store or the computation
		// then said (a connection's read interrupted, SQLite's
		// "interrupted") is not a failure of the server. A failed group
		// commit runs on its own context and is one.
		s.log.Info("client went away", "method", r.Method, "path", r.URL.Path, "err", err)
		ae = &apiError{499, "canceled", "request canceled"}
	case errors.As(err, &ie):
		ae = &apiError{http.StatusBadRequest, "bad_request", ie.msg}
	case errors.As(err, &be):
		ae = &apiError{http.StatusForbidden, "insufficient_budget", be.Error()}
	case errors.As(err, &me):
		ae = &apiError{http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body over %d bytes", me.Limit)}
	case errors.Is(err, store.ErrIdemConflict):
		ae = &apiError{http.StatusConflict, "idempotency_conflict", err.Error()}
	case errors.Is(err, errNotFound), errors.Is(err, store.ErrNotFound):
		ae = &apiError{http.StatusNotFound, "not_found", "not found"}
	case errors.Is(err, errUnavailable):
		ae = &apiError{http.StatusServiceUnavailable, "dataset_unavailable", "this dataset is unavailable: the server could not load it; its curator can see why on the admin API"}
	case errors.Is(err, store.ErrCommitFailed):
		s.log.Error("store unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", "5")
		ae = &apiError{http.StatusServiceUnavailable, "unavailable", unavailableMsg}
	case errors.Is(err, context.DeadlineExceeded):
		w.Header().Set("Retry-After", "5")
		ae = &apiError{http.StatusServiceUnavailable, "timeout", "the request took too long and was abandoned before its query was computed; nothing was charged"}
	case errors.Is(err, context.Canceled):
		ae = &apiError{499, "canceled", "request canceled"}
	case errors.Is(err, store.ErrClosed):
		w.Header().Set("Retry-After", "5")
		ae = &apiError{http.StatusServiceUnavailable, "unavailable", "the server is shutting down; nothing was charged; retry later (with the same Idempotency-Key for a query)"}
	case store.Unavailable(err):
		s.log.Error("store unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", "5")
		ae = &apiError{http.StatusServiceUnavailable, "unavailable", unavailableMsg}
	default:
		s.log.Error("internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		ae = &apiError{http.StatusInternalServerError, "internal", "internal error"}
	}
	writeError(w, ae)
}

func writeError(w http.ResponseWriter, ae *apiError) {
	msg := ae.msg
	if len(msg) > maxMessage {
		// Messages may quote client input; never echo a huge one back.
		cut := maxMessage
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "... (message truncated)"
	}
	writeJSON(w, ae.status, map[string]any{"error": map[string]string{"code": ae.code, "message": msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("%w: %w", errClientGone, err)
	}
	return nil
}

// errClientGone marks a response that could not be written: the client
// went away (its connection is closed), which is no failure of the server.
var errClientGone = errors.New("the client went away before its response was written")

// readBody reads a request body up to its limit.
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var me *http.MaxBytesError
		if errors.As(err, &me) {
			return nil, err
		}
		return nil, badInput("reading the request body: %v", err)
	}
	return b, nil
}

// unavailableMsg is the text of a storage failure's 503.
const unavailableMsg = "the database is unavailable; nothing was charged (if the failure hid a committed charge, a retry with the same Idempotency-Key returns its answer free); retry later"

// clip shortens a client-supplied string for an error message.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("... (%d bytes)", len(s))
}

// intParam parses an optional integer query parameter within [lo, hi].
func intParam(r *http.Request, name string, def, lo, hi int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, badInput("%s: %q; use an integer from %d to %d", name, v, lo, hi)
	}
	return n, nil
}

func (s *Server) health(w http.ResponseWriter, r *http.Request, _ principal) error {
	if err := s.st.Ping(r.Context()); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "store": s.st.Dialect()})
}

func (s *Server) openapi(w http.ResponseWriter, r *http.Request, _ principal) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(openapiJSON)
	return err
}

// web serves the curator's page. The page is public; everything it shows
// comes from the admin API with the key the curator types in.
func (s *Server) web(w http.ResponseWriter, r *http.Request, _ principal) error {
	sub, _ := fs.Sub(webFS, "web")
	name := strings.TrimPrefix(r.URL.Path, "/admin/")
	if name == "" {
		name = "index.html"
	}
	b, err := fs.ReadFile(sub, name)
	if err != nil {
		return errNotFound
	}
	switch {
	case strings.HasSuffix(name, ".html"):
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
	case strings.HasSuffix(name, ".js"):
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case strings.HasSuffix(name, ".css"):
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	}
	w.Header().Set("Content-Security-Policy", "default-src 'self'; connect-src 'self'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	_, err = w.Write(b)
	return err
}

// newRand returns the randomness for one query's noise.
func newRand() *noise.Rand { return noise.NewRand() }
