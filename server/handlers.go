package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/server/admission"
	"github.com/knowdp/knowdp/server/store"
)

// datasetView is a dataset as analysts see it: everything public about it.
type datasetView struct {
	ID                 string             `json:"id"`
	Name               string             `json:"name"`
	Dimensions         []domain.Dimension `json:"dimensions"`
	Cells              int                `json:"cells"`
	Invariants         [][]string         `json:"invariants"`
	Neighbours         string             `json:"neighbours"`
	GenericSensitivity int                `json:"generic_sensitivity"`
	SensitivityRule    string             `json:"sensitivity_rule"`
	// Guarantee qualifies every answer's guarantee when the sensitivity is
	// the curator's claim (see Policy.Sensitivity).
	Guarantee         string    `json:"guarantee,omitempty"`
	EpsilonPerAnalyst float64   `json:"epsilon_per_analyst,omitempty"`
	RhoPerAnalyst     float64   `json:"rho_per_analyst,omitempty"`
	QueryKinds        []string  `json:"query_kinds"`
	Created           time.Time `json:"created_at"`
	// Unavailable is set when the server could not load the dataset: it
	// answers no query (the curator's view says why).
	Unavailable string `json:"unavailable,omitempty"`
	// Retired is when the curator retired the dataset: it answers no new
	// query; its ledger stays readable.
	Retired *time.Time `json:"retired_at,omitempty"`
}

// unavailableText is what analysts see of an unavailable dataset.
const unavailableText = "the server could not load this dataset and answers no query on it; its curator can see why on the admin API"

func viewDataset(d *dataset) datasetView {
	if d.unavailable != "" {
		return datasetView{ID: d.id, Name: d.name, Dimensions: []domain.Dimension{}, Invariants: [][]string{}, QueryKinds: []string{},
			Created: d.created, Unavailable: unavailableText, Retired: d.retiredAt()}
	}
	v := datasetView{
		ID: d.id, Name: d.name, Cells: d.schema.Cells(), Invariants: [][]string{},
		Neighbours: d.neighbourText(), GenericSensitivity: d.sens.Value, SensitivityRule: d.sens.Rule, Guarantee: d.guarantee,
		QueryKinds: d.queryKinds(), Created: d.created, Retired: d.retiredAt(),
	}
	if d.zcdp {
		v.RhoPerAnalyst = stepsEpsilon(d.budget) // RhoStep == EpsilonStep
	} else {
		v.EpsilonPerAnalyst = stepsEpsilon(d.budget)
	}
	for i := range d.schema.NumDims() {
		v.Dimensions = append(v.Dimensions, d.schema.Dim(i))
	}
	for _, e := range d.views {
		v.Invariants = append(v.Invariants, nonNilNames(d.schema.ViewNames(e)))
	}
	return v
}

// adminDatasetView adds what only the curator sees.
type adminDatasetView struct {
	datasetView
	Source json.RawMessage `json:"source"`
	Rows   int64           `json:"rows"`
	Policy Policy          `json:"policy"`
	// Analysts is the number of analysts who have queried it, Spent their
	// total spending and Queries the number of answers in the ledger.
	Analysts int     `json:"analysts"`
	Spent    float64 `json:"spent"`
}

// queryResponse is the answer to a query, from the ledger.
type queryResponse struct {
	Seq     int64  `json:"seq"`
	ID      string `json:"query_id"`
	Dataset string `json:"dataset"`
	Kind    string `json:"kind"`
	Repeat  bool   `json:"repeat"`
	// Charged is what the ledger entry charged, in epsilon (absent on a
	// dataset with zCDP budgets, where Unit is "rho" and Steps count rho).
	Charged *float64        `json:"charged_epsilon,omitempty"`
	Unit    string          `json:"unit"`
	Steps   int64           `json:"charged_steps"`
	Created time.Time       `json:"created_at"`
	Request json.RawMessage `json:"request"`
	Answer  json.RawMessage `json:"answer"`
	Budget  *budgetView     `json:"budget,omitempty"`
	// Now and Remaining are the budget arithmetic of this request (only
	// in the response to a query): what it cost (0 when the stored answer
	// was returned) and the epsilon left afterwards.
	Now       *float64 `json:"charged,omitempty"`
	Remaining *float64 `json:"remaining,omitempty"`
}

func viewEntry(e *store.Entry, repeat bool, b *store.Budget, unit string) queryResponse {
	q := queryResponse{Seq: e.Seq, ID: e.ID, Dataset: e.DatasetID, Kind: e.Kind, Repeat: repeat, Unit: unit, Steps: e.Charge,
		Created: e.Created, Request: e.Request, Answer: e.Answer}
	if unit == "epsilon" {
		charged := stepsEpsilon(e.Charge)
		q.Charged = &charged
	}
	if b != nil {
		v := viewBudget(*b, unit)
		q.Budget = &v
		now := 0.0
		if !repeat {
			now = stepsEpsilon(e.Charge)
		}
		q.Now, q.Remaining = &now, &v.Remaining
	}
	return q
}

func (s *Server) me(w http.ResponseWriter, r *http.Request, p principal) error {
	return writeJSON(w, http.StatusOK, map[string]string{"analyst_id": p.analystID, "name": p.analyst, "key_id": p.keyID})
}

func (s *Server) allDatasets(r *http.Request) ([]*dataset, error) {
	ids, err := s.st.DatasetIDs(r.Context())
	if err != nil {
		return nil, err
	}
	out := make([]*dataset, 0, len(ids))
	for _, id := range ids {
		d, err := s.dataset(r.Context(), id)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func (s *Server) listDatasets(w http.ResponseWriter, r *http.Request, _ principal) error {
	sets, err := s.allDatasets(r)
	if err != nil {
		return err
	}
	views := make([]datasetView, len(sets))
	for i, d := range sets {
		views[i] = viewDataset(d)
	}
	return writeJSON(w, http.StatusOK, map[string]any{"datasets": views})
}

func (s *Server) pathDataset(r *http.Request) (*dataset, error) {
	id := r.PathValue("dataset")
	if !idPattern.MatchString(id) {
		return nil, errNotFound
	}
	return s.dataset(r.Context(), id)
}

// analystDataset is pathDataset for analysts' routes: a dataset the server
// could not load is unavailable to them.
func (s *Server) analystDataset(r *http.Request) (*dataset, error) {
	d, err := s.pathDataset(r)
	if err != nil {
		return nil, err
	}
	return d, d.usable()
}

func (s *Server) getDataset(w http.ResponseWriter, r *http.Request, _ principal) error {
	d, err := s.analystDataset(r)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, viewDataset(d))
}

// invariantView is one published exact cuboid. An invariant at a coarser
// level of a hierarchy ("geo:state") also lists, for each dimension, its
// values at the invariant's level: the counts are row-major over them.
type invariantView struct {
	Cuboid []string   `json:"cuboid"`
	Values [][]string `json:"values,omitempty"`
	Counts []float64  `json:"counts"`
}

func (s *Server) getInvariants(w http.ResponseWriter, r *http.Request, _ principal) error {
	d, err := s.analystDataset(r)
	if err != nil {
		return err
	}
	out := map[string]any{}
	invs := []invariantView{}
	for _, inv := range d.pub {
		iv := invariantView{Cuboid: nonNilNames(d.schema.ViewNames(inv.View)), Counts: inv.Counts}
		if !inv.View.Flat() {
			for _, i := range inv.View.Dims.Dims() {
				iv.Values = append(iv.Values, d.schema.LevelValues(i, int(inv.View.Up[i])))
			}
		}
		invs = append(invs, iv)
	}
	out["invariants"] = invs
	if len(d.pub) > 0 {
		// Any exact cuboid reveals the number of rows.
		out["rows"] = d.total
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) getBudget(w http.ResponseWriter, r *http.Request, p principal) error {
	d, err := s.analystDataset(r)
	if err != nil {
		return err
	}
	b, err := s.st.Budget(r.Context(), p.analystID, d.id, d.budget)
	if err != nil {
		return err
	}
	v := viewBudget(b, d.unit())
	v.Dataset = d.id
	return writeJSON(w, http.StatusOK, v)
}

func (s *Server) listQueries(w http.ResponseWriter, r *http.Request, p principal) error {
	d, err := s.analystDataset(r)
	if err != nil {
		return err
	}
	limit, err := intParam(r, "limit", 50, 1, 500)
	if err != nil {
		return err
	}
	before, err := intParam(r, "before", 0, 0, 1<<62)
	if err != nil {
		return err
	}
	es, err := s.st.Entries(r.Context(), p.analystID, d.id, before, int(limit))
	if err != nil {
		return err
	}
	out := make([]queryResponse, len(es))
	for i, e := range es {
		out[i] = viewEntry(e, true, nil, d.unit())
	}
	return writeJSON(w, http.StatusOK, map[string]any{"queries": out})
}

func (s *Server) getQuery(w http.ResponseWriter, r *http.Request, p principal) error {
	e, err := s.st.EntryByID(r.Context(), r.PathValue("query"))
	if err != nil {
		return err
	}
	if e.AnalystID != p.analystID {
		return errNotFound // the same answer as for an id that does not exist
	}
	d, err := s.dataset(r.Context(), e.DatasetID)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, viewEntry(e, true, nil, d.unit()))
}

// idempotencyKey returns the request's Idempotency-Key header, validated.
func idempotencyKey(r *http.Request) (string, error) {
	k := r.Header.Get("Idempotency-Key")
	if len(k) > 200 {
		return "", badInput("Idempotency-Key: at most 200 characters")
	}
	for _, c := range k {
		if c < 0x21 || c > 0x7e {
			return "", badInput("Idempotency-Key: use printable ASCII without spaces")
		}
	}
	return k, nil
}

// ask answers a query. The order is what makes the ledger's guarantees
// hold and keeps an analyst from spending the server's CPU for free:
// validate the request; within the analyst's compute quota, price it from
// the request alone (floorCharge), refusing before any planning a query
// that the analyst's budget cannot pay and that cannot be a cheap repeat;
// plan it from the request and public data (refusals charge nothing, but
// refused planning work is charged to the key's rate limit); return the
// stored answer if this query or idempotency key was answered before (free,
// and the same answer); refuse if the analyst's budget or ledger quota
// cannot take it, before touching the data; only then prepare it (the
// optimal split: costly but data-independent, under the request's context,
// so a client that leaves stops it, and charged to the rate limit by its
// bound if it ends in no answer). Once past these checks the query is
// admitted: it is computed whatever the client does (under
// computeContext), its charge and answer are committed in one transaction,
// and only then is the response written.
func (s *Server) ask(w http.ResponseWriter, r *http.Request, p principal) (err error) {
	d, err := s.analystDataset(r)
	if err != nil {
		return err
	}
	if err := d.inService(); err != nil {
		return err
	}
	idem, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	q, err := decodeQuery(body)
	if err != nil {
		return err
	}
	if err := checkRequest(d.schema, &q); err != nil {
		return err
	}
	slots, leave, err := s.adm.Enter(p.analystID)
	if err != nil { // admission.ErrInFlight
		return &apiError{http.StatusTooManyRequests, "too_many_in_flight", fmt.Sprintf("at most %d of your queries may be in progress at once; wait for some to finish", s.cfg.AnalystInFlight)}
	}
	defer leave()
	ctx := r.Context()
	work := planWork(d, q)
	if n, ok := s.adm.Afford(p.keyID, work); !ok {
		// The key's rate limit could not pay the planning were the query
		// refused: refused before it is planned.
		return &apiError{http.StatusTooManyRequests, "rate_limited", fmt.Sprintf(
			"rate limit: this request selects about %d base cells, whose planning costs %d requests of your key's rate limit (%g per second) if the query is refused; retry later", work, n, s.cfg.RateLimit)}
	}
	if err := slots.Acquire(ctx); err != nil {
		return err
	}
	computing := true
	defer func() {
		if computing {
			slots.Release()
		}
	}()
	b, err := s.st.Budget(ctx, p.analystID, d.id, d.budget)
	if err != nil {
		return err
	}
	// Free or charged is decided here, before planning, from the request
	// and the analyst's own earlier answers: a cuboid their stored
	// measurements determine is derived from them, free.
	drv, err := s.derivable(ctx, d, p.analystID, b, q)
	if err != nil {
		return err
	}
	floor, linearEps := floorCharge(d, q)
	if drv != nil {
		floor, linearEps = 0, 0
	}
	if linearEps > b.Total-b.Spent {
		lo, hi, err := s.st.LossRange(ctx, p.analystID, d.id, b.LedgerBytes, d.schema.Cells())
		if err != nil {
			return err
		}
		floor = linearFloor(linearEps, lo, hi)
	}
	if floor > b.Total-b.Spent && work > admission.MaxProbeWork {
		// Only a stored answer could be returned; look for it by its
		// idempotency key, not by planning.
		var found *store.Entry
		if idem != "" {
			if found, err = s.st.EntryByIdem(ctx, p.analystID, idem); err != nil {
				return err
			}
		}
		if found == nil {
			return &store.BudgetError{Need: floor, Remaining: b.Total - b.Spent, Unit: d.unit(), AtLeast: linearEps > 0}
		}
	}
	defer func() {
		if refusal(err) {
			s.adm.ChargeRefused(p.keyID, work)
		}
	}()
	s.planned.Add(1)
	release := func() {}
	if work > admission.MaxProbeWork {
		if release, err = s.adm.Heavy(ctx); err != nil {
			return err
		}
	}
	pl, err := planQuery(ctx, d, q)
	release()
	if err != nil {
		return err
	}
	found, err := s.findAnswer(ctx, p.analystID, d.id, pl.hash, drv, idem)
	if err != nil {
		return err
	}
	var notice *derivedNotice
	if drv != nil {
		if notice, err = drv.notice(ctx, d, q, pl); err != nil {
			return err
		}
	}
	if found != nil {
		if failed(found) {
			return failedError(found)
		}
		return writeJSON(w, http.StatusOK, respond(viewEntry(found, true, &b, d.unit()), found, drv, notice))
	}
	if drv != nil {
		drv.apply(d, pl)
	}
	charge, err := s.st.Price(ctx, p.analystID, d.id, b, pl.cost(), d.schema.Cells())
	if err != nil {
		return err
	}
	if charge > b.Total-b.Spent {
		return &store.BudgetError{Need: charge, Remaining: b.Total - b.Spent, Unit: pl.unit}
	}
	if b.LedgerBytes >= s.cfg.LedgerQuota {
		return &apiError{http.StatusTooManyRequests, "ledger_quota", fmt.Sprintf("your stored answers on this dataset reached the ledger quota of %d bytes; ask the curator", s.cfg.LedgerQuota)}
	}
	// Affordable, new and within quota: now the costly, data-independent
	// part of planning (the optimal split), which the client can stop.
	if pl.prepare != nil {
		if err := s.prepare(ctx, p.keyID, pl); err != nil {
			return err
		}
	}
	// Admitted. From here the query is computed and its charge committed
	// even if the client goes away: the answer exists, and a retry with the
	// same Idempotency-Key returns it.
	cctx, cancel := s.computeContext(ctx)
	defer cancel()
	if s.afterAdmit != nil {
		s.afterAdmit(ctx, cctx)
	}
	ans, meas, err := s.computeAnswer(cctx, pl)
	computing = false
	slots.Release()
	if err != nil {
		return err
	}
	e := &store.Entry{AnalystID: p.analystID, DatasetID: d.id, Hash: pl.hash, IdemKey: idem, Kind: pl.kind, Request: pl.request, Answer: ans, Measurements: meas}
	stored, b, repeat, err := s.st.Charge(e, pl.cost(), d.schema.Cells(), d.budget)
	if err != nil {
		return err
	}
	if failed(stored) {
		return failedError(stored)
	}
	status := http.StatusCreated
	if repeat {
		status = http.StatusOK
	}
	return writeJSON(w, status, respond(viewEntry(stored, repeat, &b, d.unit()), stored, drv, notice))
}

// refusal reports whether err refuses a request for what it asked (as
// opposed to a failure of the server).
func refusal(err error) bool {
	var (
		ie *inputError
		be *store.BudgetError
		ae *apiError
	)
	return errors.As(err, &ie) || errors.As(err, &be) || errors.Is(err, store.ErrIdemConflict) ||
		(errors.As(err, &ae) && ae.status >= 400 && ae.status < 500)
}

// computeAnswer draws the plan's answer and encodes it, under ctx (see
// Server.computeContext), once the plan is prepared (Server.prepare). Any
// failure of the computation, its timeout included, becomes a stored
// failure: whether and when the computation fails might depend on the
// data, so a failure is charged like an answer and reported the same way
// whatever the cause. Only the server's closing is not
// charged (store.ErrClosed). The answer's noisy measurements, when it keeps them
// (measuredAnswer), are returned encoded beside it, to be stored with it.
func (s *Server) computeAnswer(ctx context.Context, pl *plan) (answer, measurements []byte, err error) {
	s.computed.Add(1)
	ans, err := pl.compute(ctx, newRand())
	if err == nil {
		var rec *measurementRecord
		if m, ok := ans.(measuredAnswer); ok {
			ans, rec = m.answer, m.record
		}
		b, merr := json.Marshal(ans)
		if merr == nil && rec != nil {
			measurements, merr = json.Marshal(rec)
		}
		if merr == nil {
			return b, measurements, nil
		}
		err = merr
	}
	if s.life != nil && s.life.Err() != nil {
		return nil, nil, store.ErrClosed
	}
	s.log.Error("query computation failed; charged as an answer", "kind", pl.kind, "err", err)
	return []byte(failedAnswer), nil, nil
}

// findAnswer returns the analyst's stored answer to this query on the
// dataset: the one of its idempotency key, of its hash, or, when the query
// is derivable (drv), the earlier derived answer of its cuboid. An
// idempotency key used for another query is store.ErrIdemConflict.
func (s *Server) findAnswer(ctx context.Context, analyst, dataset, hash string, drv *derivation, idem string) (*store.Entry, error) {
	if drv == nil {
		return s.st.FindEntry(ctx, analyst, dataset, hash, idem)
	}
	if idem != "" {
		e, err := s.st.EntryByIdem(ctx, analyst, idem)
		switch {
		case err != nil:
			return nil, err
		case e != nil && e.DatasetID == dataset && (e.Hash == hash || e.Hash == drv.hash):
			return e, nil
		case e != nil:
			return nil, store.ErrIdemConflict
		}
	}
	// The same request answered before (charged, before its cuboid was
	// determined) keeps its answer; otherwise the cuboid's derived answer.
	for _, h := range []string{hash, drv.hash} {
		e, err := s.st.FindEntry(ctx, analyst, dataset, h, "")
		if err != nil || e != nil {
			return e, err
		}
	}
	return nil, nil
}

// failedAnswer is the stored answer of a computation that failed.
const failedAnswer = `{"error":"internal error: no answer was produced"}`

// failed reports whether e is the stored failure of a computation.
func failed(e *store.Entry) bool { return string(e.Answer) == failedAnswer }

// cost is what the plan charges, as the store counts it.
func (p *plan) cost() store.Cost { return store.Cost{Uniform: p.uniform, Cells: p.cells, Unit: p.unit} }

// failedError is the response to a query whose computation failed: the same
// status and text whatever the cause.
func failedError(e *store.Entry) error {
	return &apiError{http.StatusInternalServerError, "internal", fmt.Sprintf("internal error: no answer was produced; query %s was charged %.6g (whether a computation fails may depend on the data, so a failure is not free)", e.ID, stepsEpsilon(e.Charge))}
}

// queryKinds lists the kinds a dataset answers.
func (d *dataset) queryKinds() []string {
	var out []string
	for _, k := range queryKinds() {
		if (k == "dx" && !d.hasMetric()) || (d.zcdp && k != "cuboid") {
			continue
		}
		out = append(out, k)
	}
	return out
}
