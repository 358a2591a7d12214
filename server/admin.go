package server

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/server/tlsconfig"
)

// analystView is an analyst as the admin API shows it.
type analystView struct {
	ID      string       `json:"id"`
	Name    string       `json:"name"`
	Created time.Time    `json:"created_at"`
	Keys    []keyView    `json:"keys"`
	Budgets []budgetView `json:"budgets"`
}

type keyView struct {
	ID      string     `json:"id"`
	Created time.Time  `json:"created_at"`
	Revoked *time.Time `json:"revoked_at,omitempty"`
}

// budgetView is a budget in epsilon and in exact steps of 2^-40.
type budgetView struct {
	Dataset        string  `json:"dataset,omitempty"`
	Analyst        string  `json:"analyst,omitempty"`
	Unit           string  `json:"unit"` // "epsilon", or "rho" for zCDP budgets
	Total          float64 `json:"total"`
	Spent          float64 `json:"spent"`
	Remaining      float64 `json:"remaining"`
	TotalSteps     int64   `json:"total_steps"`
	SpentSteps     int64   `json:"spent_steps"`
	RemainingSteps int64   `json:"remaining_steps"`
}

func viewBudget(b budgetState, unit string) budgetView {
	return budgetView{Unit: unit,
		Total: stepsEpsilon(b.Total), Spent: stepsEpsilon(b.Spent), Remaining: stepsEpsilon(b.Total - b.Spent),
		TotalSteps: b.Total, SpentSteps: b.Spent, RemainingSteps: b.Total - b.Spent,
	}
}

var errNotFound = errors.New("not found")

var namePattern = func(name string) error {
	if name == "" || len(name) > 128 || strings.TrimSpace(name) != name {
		return fmt.Errorf("name %q: use 1 to 128 characters without leading or trailing spaces", name)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("name %q: control characters are not allowed", name)
		}
	}
	return nil
}

// createAnalyst creates an analyst with a first API key and returns the key.
// actor is the admin key that asked, for the audit trail.
func (s *store) createAnalyst(ctx context.Context, actor, name string) (analystView, string, error) {
	var idb [8]byte
	if _, err := rand.Read(idb[:]); err != nil {
		panic(err)
	}
	a := analystView{ID: "a_" + hex.EncodeToString(idb[:]), Name: name, Created: time.Now().UTC()}
	var key string
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, s.d.q(`SELECT COUNT(*) FROM analysts WHERE name = ?`), name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return &inputError{msg: fmt.Sprintf("an analyst named %q exists already", name)}
		}
		if _, err := tx.ExecContext(ctx, s.d.q(`INSERT INTO analysts (id, name, created_at) VALUES (?, ?, ?)`), a.ID, a.Name, a.Created.UnixNano()); err != nil {
			return err
		}
		id, k, h := newKey()
		key = k
		a.Keys = []keyView{{ID: id, Created: a.Created}}
		if err := s.insertKey(ctx, tx, id, roleAnalyst, a.ID, h); err != nil {
			return err
		}
		return s.audit(ctx, tx, auditEvent{Actor: actor, Action: "analyst.created", Analyst: a.ID, Key: id,
			details: map[string]any{"name": name}})
	})
	if err != nil {
		return analystView{}, "", err
	}
	a.Budgets = []budgetView{}
	return a, key, nil
}

// issueKey issues another key to an analyst.
func (s *store) issueKey(ctx context.Context, actor, analyst string) (keyView, string, error) {
	var kv keyView
	var key string
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, s.d.q(`SELECT COUNT(*) FROM analysts WHERE id = ?`), analyst).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return errNotFound
		}
		id, k, h := newKey()
		key = k
		kv = keyView{ID: id, Created: time.Now().UTC()}
		if err := s.insertKey(ctx, tx, id, roleAnalyst, analyst, h); err != nil {
			return err
		}
		return s.audit(ctx, tx, auditEvent{Actor: actor, Action: "key.issued", Analyst: analyst, Key: id})
	})
	return kv, key, err
}

// revokeKey revokes a key; revoking twice is not an error (and is recorded
// once, when it revoked the key).
func (s *store) revokeKey(ctx context.Context, actor, id string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		var role string
		var analyst sql.NullString
		var revoked sql.NullInt64
		err := tx.QueryRowContext(ctx, s.d.q(`SELECT role, analyst_id, revoked_at FROM api_keys WHERE id = ?`), id).Scan(&role, &analyst, &revoked)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return errNotFound
		case err != nil:
			return err
		case revoked.Valid:
			return nil
		}
		if _, err := tx.ExecContext(ctx, s.d.q(`UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`), time.Now().UnixNano(), id); err != nil {
			return err
		}
		action := "key.revoked"
		if role == roleAdmin {
			action = "admin_key.revoked"
		}
		return s.audit(ctx, tx, auditEvent{Actor: actor, Action: action, Analyst: analyst.String, Key: id})
	})
}

// analysts lists every analyst with keys and budgets.
func (s *store) analysts(ctx context.Context) ([]analystView, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, name, created_at FROM analysts ORDER BY name`)
	if err != nil {
		return nil, err
	}
	var out []analystView
	byID := map[string]int{}
	for rows.Next() {
		var a analystView
		var created int64
		if err := rows.Scan(&a.ID, &a.Name, &created); err != nil {
			rows.Close()
			return nil, err
		}
		a.Created = time.Unix(0, created).UTC()
		a.Keys, a.Budgets = []keyView{}, []budgetView{}
		byID[a.ID] = len(out)
		out = append(out, a)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = s.r.QueryContext(ctx, s.d.q(`SELECT id, analyst_id, created_at, revoked_at FROM api_keys WHERE role = ? ORDER BY created_at`), roleAnalyst)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var k keyView
		var analyst string
		var created int64
		var revoked sql.NullInt64
		if err := rows.Scan(&k.ID, &analyst, &created, &revoked); err != nil {
			rows.Close()
			return nil, err
		}
		k.Created = time.Unix(0, created).UTC()
		if revoked.Valid {
			t := time.Unix(0, revoked.Int64).UTC()
			k.Revoked = &t
		}
		if i, ok := byID[analyst]; ok {
			out[i].Keys = append(out[i].Keys, k)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	budgets, err := s.budgets(ctx)
	if err != nil {
		return nil, err
	}
	for _, b := range budgets {
		if i, ok := byID[b.Analyst]; ok {
			b.Analyst = ""
			out[i].Budgets = append(out[i].Budgets, b)
		}
	}
	return out, nil
}

// budgets lists every budget row.
func (s *store) budgets(ctx context.Context) ([]budgetView, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT analyst_id, dataset_id, total_steps, spent_steps FROM budgets ORDER BY analyst_id, dataset_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []budgetView
	for rows.Next() {
		var a, d string
		var b budgetState
		if err := rows.Scan(&a, &d, &b.Total, &b.Spent); err != nil {
			return nil, err
		}
		v := viewBudget(b, "") // the caller knows the datasets' units
		v.Analyst, v.Dataset = a, d
		out = append(out, v)
	}
	return out, rows.Err()
}

// entries lists ledger entries, newest first: of one analyst and/or dataset
// when given, before a sequence number when before > 0.
func (s *store) entries(ctx context.Context, analyst, dataset string, before int64, limit int) ([]*entry, error) {
	var where []string
	var args []any
	if analyst != "" {
		where, args = append(where, "analyst_id = ?"), append(args, analyst)
	}
	if dataset != "" {
		where, args = append(where, "dataset_id = ?"), append(args, dataset)
	}
	if before > 0 {
		where, args = append(where, "seq < ?"), append(args, before)
	}
	q := `SELECT ` + entryColumns + ` FROM ledger`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY seq DESC LIMIT ?"
	args = append(args, limit)
	rows, err := s.r.QueryContext(ctx, s.d.q(q), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*entry{}
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// entryByID returns one ledger entry.
func (s *store) entryByID(ctx context.Context, id string) (*entry, error) {
	e, err := scanEntry(s.r.QueryRowContext(ctx, s.d.q(`SELECT `+entryColumns+` FROM ledger WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errNotFound
	}
	return e, err
}

// analystNames maps analyst ids to names.
func (s *store) analystNames(ctx context.Context) (map[string]string, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, name FROM analysts`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	m := map[string]string{}
	for rows.Next() {
		var id, name string
		if err := rows.Scan(&id, &name); err != nil {
			return nil, err
		}
		m[id] = name
	}
	return m, rows.Err()
}

// --- curator ---

func (s *Server) adminView(d *dataset, budgets []budgetView) adminDatasetView {
	v := adminDatasetView{datasetView: viewDataset(d), Source: d.source, Rows: d.total, Policy: d.policy}
	if d.unavailable != "" {
		v.Unavailable = "the server could not load this dataset and answers no query on it: " + d.unavailable
	}
	if v.Policy.Invariants == nil {
		v.Policy.Invariants = [][]string{}
	}
	var spent int64
	for _, b := range budgets {
		if b.Dataset == d.id {
			v.Analysts++
			spent += b.SpentSteps
		}
	}
	v.Spent = stepsEpsilon(spent)
	return v
}

func (s *Server) adminListDatasets(w http.ResponseWriter, r *http.Request, _ principal) error {
	sets, err := s.allDatasets(r)
	if err != nil {
		return err
	}
	budgets, err := s.st.budgets(r.Context())
	if err != nil {
		return err
	}
	views := make([]adminDatasetView, len(sets))
	for i, d := range sets {
		views[i] = s.adminView(d, budgets)
	}
	return writeJSON(w, http.StatusOK, map[string]any{"datasets": views})
}

func (s *Server) adminGetDataset(w http.ResponseWriter, r *http.Request, _ principal) error {
	d, err := s.pathDataset(r)
	if err != nil {
		return err
	}
	budgets, err := s.st.budgets(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, s.adminView(d, budgets))
}

func (s *Server) adminRegister(w http.ResponseWriter, r *http.Request, p principal) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	var req DatasetRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	if _, err := s.dataset(r.Context(), req.ID); err == nil {
		return &apiError{http.StatusConflict, "exists", "a dataset with id " + req.ID + " exists already (perhaps retired: ids are never reused); datasets are immutable, register a new id"}
	} else if !errors.Is(err, errNotFound) {
		return err
	}
	if sq := req.Source.SQL; sq != nil && sq.Driver == "postgres" {
		// Decided from the DSN alone, before any connection.
		if err := tlsconfig.CheckPostgres(sq.DSN); err != nil {
			return badInput("source.sql.dsn: %v", err)
		}
	}
	d, err := buildDataset(r.Context(), req, s.cfg.CellLimit, s.cfg.SourceDirs)
	if err != nil {
		var se *sourceError
		if errors.As(err, &se) {
			s.log.Warn("registering a dataset: its source failed", "dataset", req.ID, "err", se.detail)
			return &inputError{msg: "source: " + se.msg}
		}
		// Curator-facing: the message may name the file and data values.
		return &inputError{msg: err.Error()}
	}
	err = s.st.tx(r.Context(), func(tx *sql.Tx) error {
		if err := s.st.insertDataset(r.Context(), tx, d); err != nil {
			return err
		}
		return s.st.audit(r.Context(), tx, auditEvent{Actor: p.keyID, Action: "dataset.registered", Dataset: d.id,
			details: map[string]any{"name": d.name, "source": d.source, "policy": d.policy}})
	})
	if err != nil {
		if _, lerr := s.st.loadDataset(r.Context(), d.id); lerr == nil {
			return &apiError{http.StatusConflict, "exists", "a dataset with id " + req.ID + " exists already"}
		}
		return err
	}
	s.mu.Lock()
	s.sets[d.id] = d
	s.mu.Unlock()
	return writeJSON(w, http.StatusCreated, s.adminView(d, nil))
}

func (s *Server) adminListAnalysts(w http.ResponseWriter, r *http.Request, _ principal) error {
	as, err := s.st.analysts(r.Context())
	if err != nil {
		return err
	}
	if as == nil {
		as = []analystView{}
	}
	for _, a := range as {
		for i, b := range a.Budgets {
			d, err := s.dataset(r.Context(), b.Dataset)
			if err != nil {
				return err
			}
			a.Budgets[i].Unit = d.unit()
		}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"analysts": as})
}

func (s *Server) adminCreateAnalyst(w http.ResponseWriter, r *http.Request, p principal) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	var req struct {
		Name string `json:"name"`
	}
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	if err := namePattern(req.Name); err != nil {
		return badInput("%v", err)
	}
	a, key, err := s.st.createAnalyst(r.Context(), p.keyID, req.Name)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, map[string]any{"analyst": a, "api_key": key,
		"note": "the API key is shown only now; the server keeps only its hash"})
}

func (s *Server) adminIssueKey(w http.ResponseWriter, r *http.Request, p principal) error {
	k, key, err := s.st.issueKey(r.Context(), p.keyID, r.PathValue("analyst"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, map[string]any{"key": k, "api_key": key,
		"note": "the API key is shown only now; the server keeps only its hash"})
}

func (s *Server) adminListAdminKeys(w http.ResponseWriter, r *http.Request, _ principal) error {
	ks, err := s.st.adminKeys(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"keys": ks})
}

func (s *Server) adminIssueAdminKey(w http.ResponseWriter, r *http.Request, p principal) error {
	k, key, err := s.st.issueAdminKey(r.Context(), p.keyID)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, map[string]any{"key": k, "api_key": key,
		"note": "the admin key is shown only now; the server keeps only its hash. Revoke the old one with DELETE /admin/v1/keys/{id}"})
}

func (s *Server) adminRevokeKey(w http.ResponseWriter, r *http.Request, p principal) error {
	id := r.PathValue("key")
	if id == p.keyID {
		return badInput("this is the key of the current request; revoke it with another admin key")
	}
	if err := s.st.revokeKey(r.Context(), p.keyID, id); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"revoked": id})
}

// adminEntry is a ledger entry in the curator's list of recent queries.
type adminEntry struct {
	Seq     int64           `json:"seq"`
	ID      string          `json:"id"`
	Analyst string          `json:"analyst"`
	Dataset string          `json:"dataset"`
	Kind    string          `json:"kind"`
	Charged float64         `json:"charged_epsilon"`
	Unit    string          `json:"unit"`
	Steps   int64           `json:"charged_steps"`
	Spent   int64           `json:"spent_after_steps"`
	Created time.Time       `json:"created_at"`
	Request json.RawMessage `json:"request"`
}

func (s *Server) adminQueries(w http.ResponseWriter, r *http.Request, _ principal) error {
	limit, err := intParam(r, "limit", 50, 1, 1000)
	if err != nil {
		return err
	}
	before, err := intParam(r, "before", 0, 0, 1<<62)
	if err != nil {
		return err
	}
	analyst := r.URL.Query().Get("analyst")
	dataset := r.URL.Query().Get("dataset")
	es, err := s.st.entries(r.Context(), analyst, dataset, before, int(limit))
	if err != nil {
		return err
	}
	names, err := s.st.analystNames(r.Context())
	if err != nil {
		return err
	}
	out := make([]adminEntry, len(es))
	units := map[string]string{}
	for i, e := range es {
		unit, ok := units[e.DatasetID]
		if !ok {
			d, err := s.dataset(r.Context(), e.DatasetID)
			if err != nil {
				return err
			}
			unit = d.unit()
			units[e.DatasetID] = unit
		}
		out[i] = adminEntry{Seq: e.Seq, ID: e.ID, Analyst: names[e.AnalystID], Dataset: e.DatasetID, Kind: e.Kind,
			Charged: stepsEpsilon(e.Charge), Unit: unit, Steps: e.Charge, Spent: e.SpentAfter, Created: e.Created, Request: e.Request}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"queries": out})
}

// --- the operator's side: retirement, budgets, spending, the audit trail ---

// execer runs a statement: a transaction or a pool.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// actorStart is the audit trail's actor for what the server does at start:
// registering the admin key of --admin-key-file, or one it generated.
const actorStart = "start"

// auditEvent is one record of the admin audit trail: who (the admin key's
// id), when, what, on which analyst, dataset or key, with the action's
// details.
type auditEvent struct {
	Seq     int64           `json:"seq"`
	Created time.Time       `json:"created_at"`
	Actor   string          `json:"actor"`
	Action  string          `json:"action"`
	Analyst string          `json:"analyst_id,omitempty"`
	Dataset string          `json:"dataset,omitempty"`
	Key     string          `json:"key_id,omitempty"`
	Details json.RawMessage `json:"details"`
	// details, when set, is recorded as Details.
	details any
}

// audit records ev in tx, the transaction of the change it describes, and
// returns it as recorded.
func (s *store) audit(ctx context.Context, tx *sql.Tx, ev auditEvent) error {
	_, err := s.auditRecord(ctx, tx, ev)
	return err
}

func (s *store) auditRecord(ctx context.Context, tx *sql.Tx, ev auditEvent) (auditEvent, error) {
	ev.Details = json.RawMessage("{}")
	if ev.details != nil {
		b, err := json.Marshal(ev.details)
		if err != nil {
			return auditEvent{}, err
		}
		ev.Details = b
	}
	ev.Created = time.Now().UTC()
	null := func(v string) any {
		if v == "" {
			return nil
		}
		return v
	}
	err := tx.QueryRowContext(ctx, s.d.q(`INSERT INTO admin_audit (created_at, actor, action, analyst_id, dataset_id, key_id, details) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING seq`),
		ev.Created.UnixNano(), ev.Actor, ev.Action, null(ev.Analyst), null(ev.Dataset), null(ev.Key), string(ev.Details)).Scan(&ev.Seq)
	return ev, err
}

// auditEvents lists the audit trail, newest first: of one analyst and/or
// dataset when given, before a sequence number when before > 0.
func (s *store) auditEvents(ctx context.Context, analyst, dataset string, before int64, limit int) ([]auditEvent, error) {
	var where []string
	var args []any
	if analyst != "" {
		where, args = append(where, "analyst_id = ?"), append(args, analyst)
	}
	if dataset != "" {
		where, args = append(where, "dataset_id = ?"), append(args, dataset)
	}
	if before > 0 {
		where, args = append(where, "seq < ?"), append(args, before)
	}
	q := `SELECT seq, created_at, actor, action, analyst_id, dataset_id, key_id, details FROM admin_audit`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY seq DESC LIMIT ?"
	rows, err := s.r.QueryContext(ctx, s.d.q(q), append(args, limit)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []auditEvent{}
	for rows.Next() {
		var ev auditEvent
		var created int64
		var analyst, dataset, key sql.NullString
		var details string
		if err := rows.Scan(&ev.Seq, &created, &ev.Actor, &ev.Action, &analyst, &dataset, &key, &details); err != nil {
			return nil, err
		}
		ev.Created = time.Unix(0, created).UTC()
		ev.Analyst, ev.Dataset, ev.Key = analyst.String, dataset.String, key.String
		ev.Details = json.RawMessage(details)
		out = append(out, ev)
	}
	return out, rows.Err()
}

// setRetired retires a dataset (retire) or puts it back in service, and
// records it. Retiring a retired dataset, or reinstating one in service,
// changes and records nothing.
func (s *store) setRetired(ctx context.Context, actor, id string, retire bool, note string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		var retired sql.NullInt64
		err := tx.QueryRowContext(ctx, s.d.q(`SELECT retired_at FROM datasets WHERE id = ?`+s.d.forUpdate), id).Scan(&retired)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return errNotFound
		case err != nil:
			return err
		case retired.Valid == retire:
			return nil
		}
		var at any
		action := "dataset.reinstated"
		if retire {
			at, action = time.Now().UnixNano(), "dataset.retired"
		}
		if _, err := tx.ExecContext(ctx, s.d.q(`UPDATE datasets SET retired_at = ? WHERE id = ?`), at, id); err != nil {
			return err
		}
		var details any
		if note != "" {
			details = map[string]string{"note": note}
		}
		return s.audit(ctx, tx, auditEvent{Actor: actor, Action: action, Dataset: id, details: details})
	})
}

// budgetChange is a change of one analyst's budget on one dataset: exactly
// one of its four amounts, in the dataset's unit (epsilon or rho) or in
// exact steps of 2^-40.
type budgetChange struct {
	// Add is added to the total (negative: taken away).
	Add *float64 `json:"add"`
	// Total replaces the total.
	Total *float64 `json:"total"`
	// AddSteps and TotalSteps are Add and Total in steps.
	AddSteps   *int64 `json:"add_steps"`
	TotalSteps *int64 `json:"total_steps"`
	// Note is recorded in the audit trail.
	Note string `json:"note"`
}

// steps returns the change as a function of the current total, after
// checking it from the request alone. A number in the dataset's unit is
// rounded down to the step grid (a top-up never gives more than asked, a
// cut never takes less).
func (c budgetChange) steps(unit string, maxSteps int64) (func(total int64) int64, error) {
	n := 0
	for _, set := range []bool{c.Add != nil, c.Total != nil, c.AddSteps != nil, c.TotalSteps != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, badInput("give exactly one of add, total (in %s), add_steps and total_steps (in steps of 2^-40)", unit)
	}
	maxUnit := float64(maxSteps) * privacy.EpsilonStep
	toSteps := func(name string, x float64) (int64, error) {
		if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > maxUnit {
			return 0, badInput("%s: %v is not a %s within [-%g, %g]", name, x, unit, maxUnit, maxUnit)
		}
		// x / EpsilonStep is exact (a power-of-two scaling) and below 2^61.
		return int64(math.Floor(x / privacy.EpsilonStep)), nil
	}
	switch {
	case c.Add != nil:
		d, err := toSteps("add", *c.Add)
		if err != nil {
			return nil, err
		}
		if d == 0 {
			return nil, badInput("add: %v changes nothing (a budget counts steps of 2^-40)", *c.Add)
		}
		return func(t int64) int64 { return t + d }, nil
	case c.Total != nil:
		t, err := toSteps("total", *c.Total)
		if err != nil {
			return nil, err
		}
		return func(int64) int64 { return t }, nil
	case c.AddSteps != nil:
		d := *c.AddSteps
		if d == 0 || d > maxSteps || d < -maxSteps {
			return nil, badInput("add_steps: %d; give a non-zero integer within [-%d, %d]", d, maxSteps, maxSteps)
		}
		return func(t int64) int64 { return t + d }, nil
	default:
		t := *c.TotalSteps
		return func(int64) int64 { return t }, nil
	}
}

// maxBudgetSteps is the largest budget of a dataset's unit: MaxEpsilon or
// MaxRho, in steps.
func maxBudgetSteps(d *dataset) int64 {
	if d.zcdp {
		return privacy.MaxRho << 40
	}
	return privacy.MaxEpsilon << 40
}

// changeBudget applies a budget change to the analyst's budget on a dataset
// (created with the dataset's default total if the analyst has none yet)
// and records it, in one transaction that locks the budget row: a charge
// committed at the same time is checked against the old total or the new
// one, never a mix. The total must stay within [spent, maxSteps].
func (s *store) changeBudget(ctx context.Context, actor, analyst string, d *dataset, change func(int64) int64, note string) (budgetState, auditEvent, error) {
	var b budgetState
	var ev auditEvent
	unit, maxSteps := d.unit(), maxBudgetSteps(d)
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, s.d.q(`SELECT COUNT(*) FROM analysts WHERE id = ?`), analyst).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return errNotFound
		}
		if _, err := tx.ExecContext(ctx, s.d.q(`INSERT INTO budgets (analyst_id, dataset_id, total_steps, spent_steps) VALUES (?, ?, ?, 0) ON CONFLICT DO NOTHING`),
			analyst, d.id, d.budget); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, s.d.q(`SELECT total_steps, spent_steps, ledger_bytes FROM budgets WHERE analyst_id = ? AND dataset_id = ?`+s.d.forUpdate),
			analyst, d.id).Scan(&b.Total, &b.Spent, &b.LedgerBytes); err != nil {
			return err
		}
		before := b.Total
		after := change(before)
		switch {
		case after < b.Spent:
			return badInput("the new total, %s %.6g (%d steps), is below what the analyst has spent on dataset %s, %.6g (%d steps): a budget can be lowered to what was spent, not below",
				unit, stepsEpsilon(after), after, d.id, stepsEpsilon(b.Spent), b.Spent)
		case after > maxSteps:
			return badInput("the new total, %s %.6g (%d steps), is above the largest budget, %g (%d steps)", unit, stepsEpsilon(after), after, stepsEpsilon(maxSteps), maxSteps)
		}
		if _, err := tx.ExecContext(ctx, s.d.q(`UPDATE budgets SET total_steps = ? WHERE analyst_id = ? AND dataset_id = ?`), after, analyst, d.id); err != nil {
			return err
		}
		b.Total = after
		details := map[string]any{"unit": unit, "total_before_steps": before, "total_after_steps": after, "spent_steps": b.Spent,
			"total_before": stepsEpsilon(before), "total_after": stepsEpsilon(after)}
		if note != "" {
			details["note"] = note
		}
		var err error
		ev, err = s.auditRecord(ctx, tx, auditEvent{Actor: actor, Action: "budget.changed", Analyst: analyst, Dataset: d.id, details: details})
		return err
	})
	return b, ev, err
}

// checkNote checks an operator's note for the audit trail.
func checkNote(note string) error {
	if len(note) > 1000 {
		return badInput("note: at most 1000 bytes")
	}
	for _, r := range note {
		if r < 0x20 || r == 0x7f {
			return badInput("note: control characters are not allowed")
		}
	}
	return nil
}

func (s *Server) adminPatchDataset(w http.ResponseWriter, r *http.Request, p principal) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	var req struct {
		Retired *bool  `json:"retired"`
		Note    string `json:"note"`
	}
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	if req.Retired == nil {
		return badInput("retired: required (true retires the dataset, false puts it back in service)")
	}
	if err := checkNote(req.Note); err != nil {
		return err
	}
	return s.retire(w, r, p, *req.Retired, req.Note)
}

func (s *Server) adminRetireDataset(w http.ResponseWriter, r *http.Request, p principal) error {
	return s.retire(w, r, p, true, "")
}

// retire retires the path's dataset or puts it back in service. Nothing is
// deleted: its ledger, budgets and measurements stay, and its id is never
// reused.
func (s *Server) retire(w http.ResponseWriter, r *http.Request, p principal, retire bool, note string) error {
	d, err := s.pathDataset(r)
	if err != nil {
		return err
	}
	if err := s.st.setRetired(r.Context(), p.keyID, d.id, retire, note); err != nil {
		return err
	}
	if d, err = s.dataset(r.Context(), d.id); err != nil {
		return err
	}
	budgets, err := s.st.budgets(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, s.adminView(d, budgets))
}

func (s *Server) adminChangeBudget(w http.ResponseWriter, r *http.Request, p principal) error {
	d, err := s.pathDataset(r)
	if err != nil {
		return err
	}
	if err := d.usable(); err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	var req budgetChange
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	if err := checkNote(req.Note); err != nil {
		return err
	}
	change, err := req.steps(d.unit(), maxBudgetSteps(d))
	if err != nil {
		return err
	}
	analyst := r.PathValue("analyst")
	b, ev, err := s.st.changeBudget(r.Context(), p.keyID, analyst, d, change, req.Note)
	if err != nil {
		return err
	}
	v := viewBudget(b, d.unit())
	v.Analyst, v.Dataset = analyst, d.id
	return writeJSON(w, http.StatusOK, map[string]any{"budget": v, "event": ev})
}

func (s *Server) adminAudit(w http.ResponseWriter, r *http.Request, _ principal) error {
	limit, err := intParam(r, "limit", 100, 1, 1000)
	if err != nil {
		return err
	}
	before, err := intParam(r, "before", 0, 0, 1<<62)
	if err != nil {
		return err
	}
	evs, err := s.st.auditEvents(r.Context(), r.URL.Query().Get("analyst"), r.URL.Query().Get("dataset"), before, int(limit))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"events": evs})
}

// retiredAt returns when the dataset was retired, or nil.
func (d *dataset) retiredAt() *time.Time {
	n := d.retired.Load()
	if n == 0 {
		return nil
	}
	t := time.Unix(0, n).UTC()
	return &t
}

// inService refuses a new query on a retired dataset.
func (d *dataset) inService() error {
	if t := d.retiredAt(); t != nil {
		return &apiError{http.StatusGone, "dataset_retired", "this dataset was retired by its curator on " + t.Format(time.RFC3339) +
			" and answers no new query; your answers on it stay readable (GET /v1/datasets/" + d.id + "/queries)"}
	}
	return nil
}

// spendingPoint is an analyst's budget on a dataset over one interval (or
// at one answer or budget change): the answers and changes in it, what
// they charged, and the budget at its end.
type spendingPoint struct {
	Start         time.Time `json:"start"`
	Queries       int       `json:"queries"`
	BudgetChanges int       `json:"budget_changes"`
	ChargedSteps  int64     `json:"charged_steps"`
	Charged       float64   `json:"charged"`
	SpentSteps    int64     `json:"spent_steps"`
	Spent         float64   `json:"spent"`
	TotalSteps    int64     `json:"total_steps"`
	Total         float64   `json:"total"`
}

// spendingSeries is an analyst's spending on one dataset over time.
type spendingSeries struct {
	Dataset string          `json:"dataset"`
	Unit    string          `json:"unit"`
	Budget  budgetView      `json:"budget"`
	Points  []spendingPoint `json:"points"`
	// Truncated is set when older points were left out (see limit).
	Truncated bool `json:"truncated"`
}

// spendingEvent is one answer (charge) or budget change, in time order.
type spendingEvent struct {
	at          int64
	charge      int64
	spentAfter  int64
	totalBefore int64
	totalAfter  int64
	change      bool
}

// spending returns the analyst's answers and budget changes, per dataset
// (one dataset when given), in time order, and their current budgets.
func (s *store) spending(ctx context.Context, analyst, dataset string) (map[string][]spendingEvent, map[string]budgetState, error) {
	filter, args := "analyst_id = ?", []any{analyst}
	if dataset != "" {
		filter, args = filter+" AND dataset_id = ?", append(args, dataset)
	}
	events := map[string][]spendingEvent{}
	rows, err := s.r.QueryContext(ctx, s.d.q(`SELECT dataset_id, created_at, charge_steps, spent_after_steps FROM ledger WHERE `+filter+` ORDER BY seq`), args...)
	if err != nil {
		return nil, nil, err
	}
	for rows.Next() {
		var ds string
		var e spendingEvent
		if err := rows.Scan(&ds, &e.at, &e.charge, &e.spentAfter); err != nil {
			rows.Close()
			return nil, nil, err
		}
		events[ds] = append(events[ds], e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	rows, err = s.r.QueryContext(ctx, s.d.q(`SELECT dataset_id, created_at, details FROM admin_audit WHERE action = 'budget.changed' AND `+filter+` ORDER BY seq`), args...)
	if err != nil {
		return nil, nil, err
	}
	for rows.Next() {
		var ds, details string
		e := spendingEvent{change: true}
		if err := rows.Scan(&ds, &e.at, &details); err != nil {
			rows.Close()
			return nil, nil, err
		}
		var d struct {
			Before int64 `json:"total_before_steps"`
			After  int64 `json:"total_after_steps"`
		}
		if err := json.Unmarshal([]byte(details), &d); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("audit trail: budget change: %w", err)
		}
		e.totalBefore, e.totalAfter = d.Before, d.After
		events[ds] = append(events[ds], e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	budgets := map[string]budgetState{}
	rows, err = s.r.QueryContext(ctx, s.d.q(`SELECT dataset_id, total_steps, spent_steps FROM budgets WHERE `+filter), args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var ds string
		var b budgetState
		if err := rows.Scan(&ds, &b.Total, &b.Spent); err != nil {
			return nil, nil, err
		}
		budgets[ds] = b
	}
	return events, budgets, rows.Err()
}

// series buckets one dataset's events (in time order once sorted here):
// bucket "query" gives every answer and budget change its own point,
// "hour" and "day" sum them per UTC hour or day. Only the last limit points
// are kept.
func series(events []spendingEvent, current budgetState, bucket string, limit int) ([]spendingPoint, bool) {
	slices.SortStableFunc(events, func(a, b spendingEvent) int { return cmp.Compare(a.at, b.at) })
	total := current.Total
	for _, e := range events {
		if e.change {
			total = e.totalBefore // the total before the first change
			break
		}
	}
	var spent int64
	points := []spendingPoint{}
	truncated := false
	for _, e := range events {
		start := time.Unix(0, e.at).UTC()
		switch bucket {
		case "hour":
			start = start.Truncate(time.Hour)
		case "day":
			start = time.Date(start.Year(), start.Month(), start.Day(), 0, 0, 0, 0, time.UTC)
		}
		if n := len(points); n == 0 || bucket == "query" || !points[n-1].Start.Equal(start) {
			points = append(points, spendingPoint{Start: start})
			if len(points) > 2*limit {
				points, truncated = append(points[:0], points[len(points)-limit:]...), true
			}
		}
		p := &points[len(points)-1]
		if e.change {
			p.BudgetChanges++
			total = e.totalAfter
		} else {
			p.Queries++
			p.ChargedSteps += e.charge
			spent = e.spentAfter
		}
		p.SpentSteps, p.TotalSteps = spent, total
	}
	if len(points) > limit {
		points, truncated = points[len(points)-limit:], true
	}
	for i := range points {
		p := &points[i]
		p.Charged, p.Spent, p.Total = stepsEpsilon(p.ChargedSteps), stepsEpsilon(p.SpentSteps), stepsEpsilon(p.TotalSteps)
	}
	return points, truncated
}

func (s *Server) adminSpending(w http.ResponseWriter, r *http.Request, _ principal) error {
	bucket := r.URL.Query().Get("bucket")
	switch bucket {
	case "":
		bucket = "day"
	case "query", "hour", "day":
	default:
		return badInput("bucket: %q; use query, hour or day", clip(bucket))
	}
	limit, err := intParam(r, "limit", 500, 1, 10000)
	if err != nil {
		return err
	}
	analyst := r.PathValue("analyst")
	var name string
	err = s.st.readRow(r.Context(), `SELECT name FROM analysts WHERE id = ?`, analyst).Scan(&name)
	if errors.Is(err, sql.ErrNoRows) {
		return errNotFound
	}
	if err != nil {
		return err
	}
	only := r.URL.Query().Get("dataset")
	if only != "" {
		if _, err := s.dataset(r.Context(), only); err != nil {
			return err
		}
	}
	events, budgets, err := s.st.spending(r.Context(), analyst, only)
	if err != nil {
		return err
	}
	ids := []string{}
	for id := range budgets {
		ids = append(ids, id)
	}
	if only != "" && len(ids) == 0 {
		ids = append(ids, only)
	}
	slices.Sort(ids)
	out := []spendingSeries{}
	for _, id := range ids {
		d, err := s.dataset(r.Context(), id)
		if err != nil {
			return err
		}
		b, ok := budgets[id]
		if !ok {
			b = budgetState{Total: d.budget}
		}
		v := viewBudget(b, d.unit())
		v.Dataset = id
		points, truncated := series(events[id], b, bucket, int(limit))
		out = append(out, spendingSeries{Dataset: id, Unit: d.unit(), Budget: v, Points: points, Truncated: truncated})
	}
	return writeJSON(w, http.StatusOK, map[string]any{
		"analyst": map[string]string{"id": analyst, "name": name}, "bucket": bucket, "datasets": out})
}
