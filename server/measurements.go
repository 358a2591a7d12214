package server

// Kept measurements. Every flat cuboid or workload answer (Laplace or
// Gaussian) is stored with its noisy measurements and their plan (cuboid,
// sensitivity, share, noise variance), in the measurements table beside
// the answer's ledger row, inserted in the transaction that commits its
// charge. A later one-cuboid query of the same analyst on the same dataset
// whose cuboid is contained in one of that analyst's measured cuboids is
// determined by those measurements and the invariants: it is answered by
// the least-squares estimate from all of the analyst's measurements of the
// query's mechanism (release.SavedMeasurements.Estimate), and charged
// nothing. That estimate is post-processing of answers the analyst already
// has: it looks at no private data, and whether a query is free depends
// only on the request and on what the analyst was answered before.

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"sync"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/release"
	"github.com/knowdp/knowdp/server/store"
)

// measurementsFormat names the layout of a stored measurementRecord.
const measurementsFormat = "knowdp-server-measurements/1"

// measurementRecord is what the ledger keeps of one answer's noisy
// measurements: they are exactly as private as the answer, which the
// analyst holds.
type measurementRecord struct {
	Format string `json:"format"`
	// Invariants identifies the dataset's invariants (their cuboids and
	// public counts, see invariantKey) when the answer was drawn: the
	// measurements are combined only under the same invariants.
	Invariants string `json:"invariants"`
	// Mechanism is "laplace" or "gaussian".
	Mechanism string `json:"mechanism"`
	// Guarantee is the answer's conditionalGuarantee, if any.
	Guarantee    string                     `json:"guarantee,omitempty"`
	Measurements []release.SavedMeasurement `json:"measurements"`
}

// measuredAnswer is a computed answer with the measurements it was
// estimated from, which the ledger keeps with it.
type measuredAnswer struct {
	answer any
	record *measurementRecord
}

// invariantKey identifies the dataset's flat invariants: their cuboids and
// their (public) counts.
func invariantKey(d *dataset) string {
	h := sha256.New()
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(d.inv)))
	for _, v := range d.inv {
		b = binary.AppendUvarint(b, uint64(v.Cuboid))
		b = binary.AppendUvarint(b, uint64(len(v.Counts)))
		for _, x := range v.Counts {
			b = binary.BigEndian.AppendUint64(b, math.Float64bits(x))
		}
		h.Write(b)
		b = b[:0]
	}
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// releaseMeasurements returns the record of a release's noisy
// measurements, kept for later derivations on a dataset whose invariants
// and tables all stand at their finest levels (nil otherwise, or when
// nothing was measured). The measurements are the mechanism's output
// before any post-processing: the answer is computed from them, so
// deriving more from them is post-processing of what was charged, whatever
// post-processing (non-negative, integer) the answer itself had.
func releaseMeasurements(d *dataset, rel *release.Release, guarantee string) (*measurementRecord, error) {
	if d.coarse || len(rel.Measurements) == 0 || d.units != nil {
		// Answers per unit keep no measurements: derivations are per row.
		return nil, nil
	}
	for _, t := range rel.Tables {
		// Derivations are of flat tables.
		if !t.TableView().Flat() {
			return nil, nil
		}
	}
	saved, err := rel.SaveMeasurements()
	if err != nil {
		return nil, err
	}
	return &measurementRecord{Format: measurementsFormat, Invariants: d.invKey, Mechanism: saved.Mechanism,
		Guarantee: guarantee, Measurements: saved.Measurements}, nil
}

// derivation is a query that the analyst's stored measurements determine:
// it is answered from them, free.
type derivation struct {
	cuboid domain.Cuboid
	// hash is the query's hash as a derived answer: it depends on the
	// cuboid, the mechanism and the invariants only, so every later
	// request for the cuboid gets the first derived answer back.
	hash string
	// from are the ledger ids of the answers whose measurements are used,
	// in ledger order, and meas their measurements.
	from      []string
	meas      []release.SavedMeasurement
	mechanism string
	guarantee string
}

// storedMeasurement is the measurements of one ledger entry.
type storedMeasurement struct {
	id     string
	record measurementRecord
}

// keptCache keeps the decoded measurements of recently asked budgets, so
// that a query decodes only the measurements stored since its analyst's
// previous one. An entry is up to date for one value of the budget's
// LedgerBytes: every stored answer increases it in the transaction that
// stores the answer (and its measurements), and nothing decreases it.
type keptCache struct {
	mu sync.Mutex
	m  map[keptKey]*keptEntry
}

type keptKey struct{ analyst, dataset string }

// keptEntry is immutable once cached.
type keptEntry struct {
	ledgerBytes int64
	kept        []storedMeasurement
	cells       int
}

// Bounds of the kept cache: at most maxKeptBudgets budgets, each with at
// most maxKeptCells noisy counts.
const (
	maxKeptCells   = 1 << 20
	maxKeptBudgets = 128
)

// get returns the analyst's stored measurements on the dataset, in ledger
// order, given their budget b read before (so that the result holds every
// measurement committed by then, and maybe later ones): from the cache when
// it is up to date for b; otherwise the ids are listed from db and only the
// measurements the cache lacks are read. The result must not be modified.
func (c *keptCache) get(ctx context.Context, db *store.DB, analyst, dataset string, b store.Budget) ([]storedMeasurement, error) {
	if b.LedgerBytes == 0 {
		return nil, nil // nothing stored yet
	}
	k := keptKey{analyst, dataset}
	c.mu.Lock()
	e := c.m[k]
	c.mu.Unlock()
	if e != nil && e.ledgerBytes == b.LedgerBytes {
		return e.kept, nil
	}
	var kept []storedMeasurement
	var err error
	if e == nil {
		kept, err = measurementsOf(ctx, db, analyst, dataset)
	} else {
		kept, err = refreshMeasurements(ctx, db, analyst, dataset, e.kept)
	}
	if err != nil {
		return nil, err
	}
	n := &keptEntry{ledgerBytes: b.LedgerBytes, kept: kept}
	for _, m := range kept {
		for _, x := range m.record.Measurements {
			n.cells += len(x.Counts)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n.cells > maxKeptCells {
		delete(c.m, k)
		return kept, nil
	}
	if c.m == nil {
		c.m = map[keptKey]*keptEntry{}
	}
	if _, ok := c.m[k]; !ok && len(c.m) >= maxKeptBudgets {
		for old := range c.m { // evict one at random
			delete(c.m, old)
			break
		}
	}
	if old := c.m[k]; old == nil || old.ledgerBytes < n.ledgerBytes {
		c.m[k] = n
	}
	return kept, nil
}

// refreshMeasurements lists the ids of the analyst's measurements on the
// dataset and returns them in ledger order, taking those in have (decoded
// before) as they are and reading the others.
func refreshMeasurements(ctx context.Context, db *store.DB, analyst, dataset string, have []storedMeasurement) ([]storedMeasurement, error) {
	ids, err := db.MeasurementIDs(ctx, analyst, dataset)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*storedMeasurement, len(have))
	for i := range have {
		byID[have[i].id] = &have[i]
	}
	out := make([]storedMeasurement, 0, len(ids))
	for _, id := range ids {
		if m := byID[id]; m != nil {
			out = append(out, *m)
			continue
		}
		raw, err := db.MeasurementRecord(ctx, id)
		if err != nil {
			return nil, err
		}
		m, ok, err := decodeMeasurement(id, raw)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, m)
		}
	}
	return out, nil
}

// measurementsOf reads and decodes all of the analyst's stored measurements
// on the dataset, in ledger order.
func measurementsOf(ctx context.Context, db *store.DB, analyst, dataset string) ([]storedMeasurement, error) {
	stored, err := db.Measurements(ctx, analyst, dataset)
	if err != nil {
		return nil, err
	}
	var out []storedMeasurement
	for _, x := range stored {
		m, ok, err := decodeMeasurement(x.LedgerID, x.Record)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, m)
		}
	}
	return out, nil
}

// decodeMeasurement decodes a stored measurementRecord; ok is false for a
// layout this server does not read (it is then not used).
func decodeMeasurement(id, raw string) (m storedMeasurement, ok bool, err error) {
	m.id = id
	if err := json.Unmarshal([]byte(raw), &m.record); err != nil {
		return m, false, fmt.Errorf("measurements of %s: %w", id, err)
	}
	return m, m.record.Format == measurementsFormat, nil
}

// derivable returns the derivation of q from the analyst's stored
// measurements on d, or nil when q is not a query that can be derived, is
// not determined by them, or asks for a fresh measurement. Only one-cuboid queries without
// post-processing on a flat dataset are derived; a public cuboid is left
// to the usual path (it is free already). The decision reads the request,
// the public schema and invariants and the analyst's own earlier answers,
// never the data.
func (s *Server) derivable(ctx context.Context, d *dataset, analyst string, b store.Budget, q QueryRequest) (*derivation, error) {
	mech := "laplace"
	switch {
	case d.units != nil:
		// Answers per unit keep no measurements.
		return nil, nil
	case q.Kind != "cuboid" || q.Cuboid == nil || q.Cuboids != nil || q.NonNeg || q.Integer || q.Weights != nil || q.Split != "" || q.Fresh:
		return nil, nil
	case q.Mechanism == "gaussian":
		mech = "gaussian"
	case q.Mechanism != "" && q.Mechanism != "laplace":
		return nil, nil
	}
	if d.coarse || d.coarseQuery(q) || d.publicCuboids(q) {
		return nil, nil
	}
	cb, err := d.schema.CuboidOf(q.Cuboid...)
	if err != nil {
		return nil, nil // planning refuses it
	}
	stored, err := s.kept.get(ctx, s.st, analyst, d.id, b)
	if err != nil || len(stored) == 0 {
		return nil, err
	}
	key := d.invKey
	dv := &derivation{cuboid: cb, mechanism: mech}
	determined := false
	for _, m := range stored {
		if m.record.Invariants != key || m.record.Mechanism != mech {
			continue
		}
		dv.from = append(dv.from, m.id)
		dv.meas = append(dv.meas, m.record.Measurements...) // Estimate reads their counts, never writes them
		if m.record.Guarantee != "" {
			dv.guarantee = m.record.Guarantee
		}
		for _, x := range m.record.Measurements {
			if mc, err := d.schema.CuboidOf(x.Cuboid...); err == nil && cb&^mc == 0 {
				determined = true
			}
		}
	}
	if !determined {
		return nil, nil
	}
	h := &hasher{}
	h.str("knowdp query v1")
	h.str("cuboid/derived")
	h.str(mech)
	h.str(key)
	h.int(int64(cb))
	dv.hash = h.sum()
	return dv, nil
}

// derivedAnswer is the answer to a cuboid query derived from the analyst's
// earlier measurements.
type derivedAnswer struct {
	viewTable
	Privacy derivedPrivacy `json:"privacy"`
}

// derivedPrivacy is a derived answer's privacy story: no new noise, no
// charge, and the earlier answers it is computed from.
type derivedPrivacy struct {
	// Derived is always true; DerivedFrom lists the query ids of the
	// answers whose measurements the estimate uses.
	Derived     bool     `json:"derived"`
	DerivedFrom []string `json:"derived_from"`
	Mechanism   string   `json:"mechanism"`
	// Epsilon is the privacy loss of this answer: 0 (in rho as well).
	Epsilon    float64    `json:"epsilon"`
	Neighbours string     `json:"neighbours"`
	Cuboid     []string   `json:"cuboid"`
	Exact      [][]string `json:"exact"`
	// Variance and MOE90 are the error of every cell of the estimate
	// under the earlier answers' noise.
	Variance  float64 `json:"variance"`
	MOE90     float64 `json:"moe90"`
	Note      string  `json:"note"`
	Guarantee string  `json:"guarantee,omitempty"`
}

// derivedNote says why a derived answer is free.
const derivedNote = "least-squares estimate from the noisy measurements of your earlier answers listed in derived_from and the invariants: " +
	"post-processing of answers you already have, so no new noise and no charge; its privacy is theirs"

// apply turns pl into the derived answer: free, under the derivation's
// hash, computed from the stored measurements and public invariants only.
func (dv *derivation) apply(d *dataset, pl *plan) {
	pl.hash, pl.uniform, pl.cells, pl.prepare = dv.hash, 0, nil, nil
	pl.compute = func(ctx context.Context, _ *noise.Rand) (any, error) {
		s := d.schema
		sm := &release.SavedMeasurements{Format: release.MeasurementsFormat, Mechanism: dv.mechanism, Measurements: dv.meas, Invariants: []release.SavedTable{}}
		for _, v := range d.inv {
			sm.Invariants = append(sm.Invariants, release.SavedTable{Cuboid: nonNilNames(s.Names(v.Cuboid)), Counts: v.Counts})
		}
		tables, err := sm.Estimate(s, []domain.Cuboid{dv.cuboid})
		if err != nil {
			return nil, fmt.Errorf("derived answer: %w", err)
		}
		t := tables[0]
		exact := make([][]string, len(d.exact))
		for i, e := range d.exact {
			exact[i] = nonNilNames(s.Names(e))
		}
		names := nonNilNames(s.Names(dv.cuboid))
		return derivedAnswer{viewTable: viewTableOf(s, t), Privacy: derivedPrivacy{
			Derived: true, DerivedFrom: dv.from, Mechanism: "none: " + dv.mechanism + " measurements of earlier answers, estimated by least squares",
			Neighbours: d.neighbourText(), Cuboid: names, Exact: exact,
			Variance: t.Variance, MOE90: t.MOE90, Note: derivedNote, Guarantee: dv.guarantee,
		}}, nil
	}
}

// derivedNotice is what the response to a derivable query says beside a
// derived answer: that the budget asked for was not spent, the accuracy
// the answer has (that of the earlier measurements), and what a fresh
// measurement would cost and how accurate it would be, so that the analyst
// can choose to buy it ("fresh": true) knowing its price. It depends on
// the request, the public schema and policy and the stored answer only.
type derivedNotice struct {
	Note string `json:"note"`
	// MOE90 is the derived answer's margin of error (its privacy.moe90).
	MOE90 float64 `json:"moe90"`
	// Requested is the budget the query asked for, not spent.
	Requested budgetAmount `json:"requested"`
	// Fresh is what a fresh measurement at that budget would be.
	Fresh freshMeasurement `json:"fresh"`
}

// budgetAmount is an epsilon (Laplace noise) or a rho (Gaussian noise).
type budgetAmount struct {
	Epsilon float64 `json:"epsilon,omitempty"`
	Rho     float64 `json:"rho,omitempty"`
}

// freshMeasurement is the price and accuracy of a fresh measurement.
type freshMeasurement struct {
	budgetAmount
	// Unit and Steps are its charge in the dataset's budget unit (an
	// epsilon is charged as its rho on a dataset with zCDP budgets).
	Unit  string `json:"unit"`
	Steps int64  `json:"charged_steps"`
	// MOE90 is the margin of error its cells would have, from the
	// mechanism alone.
	MOE90 float64 `json:"moe90"`
	// Request says how to ask for it.
	Request string `json:"request"`
}

// notice returns the notice of a derived answer to q, whose plan pl is the
// fresh measurement's (before apply makes it the derivation).
func (dv *derivation) notice(ctx context.Context, d *dataset, q QueryRequest, pl *plan) (*derivedNotice, error) {
	if pl.fresh == nil {
		return nil, fmt.Errorf("derivable query %s without a fresh plan", pl.kind)
	}
	moe, err := pl.fresh(ctx)
	if err != nil {
		return nil, fmt.Errorf("the margin of error of a fresh measurement: %w", err)
	}
	n := &derivedNotice{Fresh: freshMeasurement{Unit: d.unit(), Steps: pl.uniform, MOE90: moe,
		Request: `ask again with "fresh": true: a new measurement at this budget, charged it`}}
	what := fmt.Sprintf("epsilon %v", q.Epsilon)
	if q.Mechanism == "gaussian" {
		n.Requested.Rho = q.Rho
		what = fmt.Sprintf("rho %v", q.Rho)
	} else {
		n.Requested.Epsilon = q.Epsilon
	}
	n.Fresh.budgetAmount = n.Requested
	// %%.4g is filled with the answer's own margin of error (respond).
	n.Note = fmt.Sprintf("derived from your earlier measurements (privacy.derived_from), free: the %s you asked for was not spent, "+
		"and this answer's accuracy is theirs (moe90 %%.4g), not what %s would buy. "+
		"A fresh measurement at %s would be charged %d steps of %s and its cells would have moe90 %.4g; "+
		`to buy it, ask again with "fresh": true`, what, what, what, pl.uniform, d.unit(), moe)
	return n, nil
}

// derivedResponse is a query response with the notice of a derived answer.
type derivedResponse struct {
	queryResponse
	Derived *derivedNotice `json:"derived,omitempty"`
}

// respond returns the response for entry e: with the derivation's notice
// when e is its derived answer (a query answered earlier by a measurement
// of its own, fresh or charged before it was derivable, is not derived).
func respond(r queryResponse, e *store.Entry, dv *derivation, n *derivedNotice) any {
	if dv == nil || n == nil || e.Hash != dv.hash {
		return r
	}
	var a struct {
		Privacy struct {
			MOE90 float64 `json:"moe90"`
		} `json:"privacy"`
	}
	if json.Unmarshal(e.Answer, &a) != nil {
		return r
	}
	with := *n
	with.MOE90 = a.Privacy.MOE90
	with.Note = fmt.Sprintf(n.Note, a.Privacy.MOE90)
	return derivedResponse{queryResponse: r, Derived: &with}
}
