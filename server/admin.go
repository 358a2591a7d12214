package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/server/ingest"
	"github.com/knowdp/knowdp/server/store"
	"github.com/knowdp/knowdp/server/tlsconfig"
)

// analystView is an analyst as the admin API shows it.
type analystView struct {
	ID      string       `json:"id"`
	Name    string       `json:"name"`
	Created time.Time    `json:"created_at"`
	Keys    []store.Key  `json:"keys"`
	Budgets []budgetView `json:"budgets"`
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

func viewBudget(b store.Budget, unit string) budgetView {
	return budgetView{Unit: unit,
		Total: stepsEpsilon(b.Total), Spent: stepsEpsilon(b.Spent), Remaining: stepsEpsilon(b.Total - b.Spent),
		TotalSteps: b.Total, SpentSteps: b.Spent, RemainingSteps: b.Total - b.Spent,
	}
}

// errNotFound is a path the server does not serve; an id the store does
// not hold is store.ErrNotFound. Both are 404.
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

// --- curator ---

func (s *Server) adminView(d *dataset, budgets []store.BudgetRow) adminDatasetView {
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
			spent += b.Spent
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
	budgets, err := s.st.Budgets(r.Context())
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
	budgets, err := s.st.Budgets(r.Context())
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
	} else if !errors.Is(err, store.ErrNotFound) {
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
		var se *ingest.Error
		if errors.As(err, &se) {
			s.log.Warn("registering a dataset: its source failed", "dataset", req.ID, "err", se.Detail)
			return &inputError{msg: "source: " + se.Msg}
		}
		// Curator-facing: the message may name the file and data values.
		return &inputError{msg: err.Error()}
	}
	rec, err := d.record()
	if err != nil {
		return err
	}
	err = s.st.RegisterDataset(r.Context(), p.keyID, rec, map[string]any{"name": d.name, "source": d.source, "policy": d.policy})
	if err != nil {
		if _, lerr := s.st.Dataset(r.Context(), d.id); lerr == nil {
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
	as, err := s.st.Analysts(r.Context())
	if err != nil {
		return err
	}
	budgets, err := s.st.Budgets(r.Context())
	if err != nil {
		return err
	}
	views := make([]analystView, len(as))
	byID := map[string]*analystView{}
	for i, a := range as {
		views[i] = analystView{ID: a.ID, Name: a.Name, Created: a.Created, Keys: a.Keys, Budgets: []budgetView{}}
		byID[a.ID] = &views[i]
	}
	for _, b := range budgets {
		if v := byID[b.Analyst]; v != nil {
			d, err := s.dataset(r.Context(), b.Dataset)
			if err != nil {
				return err
			}
			bv := viewBudget(b.Budget, d.unit())
			bv.Dataset = b.Dataset
			v.Budgets = append(v.Budgets, bv)
		}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"analysts": views})
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
	a, key, err := s.st.CreateAnalyst(r.Context(), p.keyID, req.Name)
	if errors.Is(err, store.ErrExists) {
		return badInput("an analyst named %q exists already", req.Name)
	}
	if err != nil {
		return err
	}
	v := analystView{ID: a.ID, Name: a.Name, Created: a.Created, Keys: a.Keys, Budgets: []budgetView{}}
	return writeJSON(w, http.StatusCreated, map[string]any{"analyst": v, "api_key": key,
		"note": "the API key is shown only now; the server keeps only its hash"})
}

func (s *Server) adminIssueKey(w http.ResponseWriter, r *http.Request, p principal) error {
	k, key, err := s.st.IssueKey(r.Context(), p.keyID, r.PathValue("analyst"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, map[string]any{"key": k, "api_key": key,
		"note": "the API key is shown only now; the server keeps only its hash"})
}

func (s *Server) adminListAdminKeys(w http.ResponseWriter, r *http.Request, _ principal) error {
	ks, err := s.st.AdminKeys(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"keys": ks})
}

func (s *Server) adminIssueAdminKey(w http.ResponseWriter, r *http.Request, p principal) error {
	k, key, err := s.st.IssueAdminKey(r.Context(), p.keyID)
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
	if err := s.st.RevokeKey(r.Context(), p.keyID, id); err != nil {
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
	es, err := s.st.Entries(r.Context(), analyst, dataset, before, int(limit))
	if err != nil {
		return err
	}
	names, err := s.st.AnalystNames(r.Context())
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
	if err := s.st.SetRetired(r.Context(), p.keyID, d.id, retire, note); err != nil {
		return err
	}
	if d, err = s.dataset(r.Context(), d.id); err != nil {
		return err
	}
	budgets, err := s.st.Budgets(r.Context())
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
	unit, maxSteps := d.unit(), maxBudgetSteps(d)
	// The total must stay within [spent, maxSteps]; the store checks it
	// against the budget row it locks.
	newTotal := func(b store.Budget) (int64, error) {
		after := change(b.Total)
		switch {
		case after < b.Spent:
			return 0, badInput("the new total, %s %.6g (%d steps), is below what the analyst has spent on dataset %s, %.6g (%d steps): a budget can be lowered to what was spent, not below",
				unit, stepsEpsilon(after), after, d.id, stepsEpsilon(b.Spent), b.Spent)
		case after > maxSteps:
			return 0, badInput("the new total, %s %.6g (%d steps), is above the largest budget, %g (%d steps)", unit, stepsEpsilon(after), after, stepsEpsilon(maxSteps), maxSteps)
		}
		return after, nil
	}
	b, ev, err := s.st.ChangeBudget(r.Context(), p.keyID, analyst, d.id, d.budget, unit, newTotal, req.Note)
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
	evs, err := s.st.AuditEvents(r.Context(), r.URL.Query().Get("analyst"), r.URL.Query().Get("dataset"), before, int(limit))
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

// spendingSeries is an analyst's spending on one dataset over time.
type spendingSeries struct {
	Dataset string                `json:"dataset"`
	Unit    string                `json:"unit"`
	Budget  budgetView            `json:"budget"`
	Points  []store.SpendingPoint `json:"points"`
	// Truncated is set when older points were left out (see limit).
	Truncated bool `json:"truncated"`
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
	name, err := s.st.AnalystName(r.Context(), analyst)
	if err != nil {
		return err
	}
	only := r.URL.Query().Get("dataset")
	if only != "" {
		if _, err := s.dataset(r.Context(), only); err != nil {
			return err
		}
	}
	events, budgets, err := s.st.Spending(r.Context(), analyst, only)
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
			b = store.Budget{Total: d.budget}
		}
		v := viewBudget(b, d.unit())
		v.Dataset = id
		points, truncated := store.Series(events[id], b, bucket, int(limit))
		out = append(out, spendingSeries{Dataset: id, Unit: d.unit(), Budget: v, Points: points, Truncated: truncated})
	}
	return writeJSON(w, http.StatusOK, map[string]any{
		"analyst": map[string]string{"id": analyst, "name": name}, "bucket": bucket, "datasets": out})
}
