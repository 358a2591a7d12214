package server

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/release"
	"github.com/knowdp/knowdp/sensitivity"
	"github.com/knowdp/knowdp/server/ingest"
	"github.com/knowdp/knowdp/server/store"
)

// DatasetRequest is what a curator sends to register a dataset.
type DatasetRequest struct {
	// ID names the dataset in URLs: lower-case letters, digits, - and _.
	ID   string `json:"id"`
	Name string `json:"name"`
	// Schema declares every dimension and its domain (domain.ParseSchema).
	Schema json.RawMessage `json:"schema"`
	Source Source          `json:"source"`
	Policy Policy          `json:"policy"`
}

// Source says where a dataset's rows are. Exactly one field is set. The rows
// are counted into the cube once, at registration; the server keeps the
// counts and never reads the source again.
type Source struct {
	// CSV is the path of a CSV file on the server's machine, with a header
	// row naming every schema dimension.
	CSV string `json:"csv,omitempty"`
	// SQL is a table in an SQLite or PostgreSQL database, counted with
	// SELECT dims..., COUNT(*) ... GROUP BY dims... in that database.
	SQL *SQLSource `json:"sql,omitempty"`
	// CountColumn, if set, names a column of non-negative integer counts
	// in the CSV file or SQL table: each row stands for that many records.
	CountColumn string `json:"count_column,omitempty"`
}

// SQLSource is a table in a database the server can reach.
type SQLSource struct {
	// Driver is "sqlite" (DSN is a file path) or "postgres" (DSN is a
	// postgres:// URL).
	Driver string `json:"driver"`
	DSN    string `json:"dsn"`
	// Table is the table's name, optionally schema-qualified (a.b).
	Table string `json:"table"`
}

// Policy is a dataset's privacy policy.
type Policy struct {
	// EpsilonPerAnalyst is each analyst's total privacy budget on the
	// dataset.
	EpsilonPerAnalyst float64 `json:"epsilon_per_analyst"`
	// RhoPerAnalyst, instead of EpsilonPerAnalyst, gives each analyst a
	// zero-concentrated DP budget (rho): cuboid queries are then charged
	// rho, Gaussian ones their rho and Laplace ones eps^2/2; the kinds with
	// pure-epsilon accounting (linear, prior, dx) are not offered.
	RhoPerAnalyst float64 `json:"rho_per_analyst,omitempty"`
	// Invariants are cuboids (lists of dimension names) that are public
	// exactly: the server publishes them, and every answer's guarantee is
	// with respect to the neighbours they induce (paper 3). A
	// hierarchical dimension may stand at a coarser level: "geo:state".
	Invariants [][]string `json:"invariants,omitempty"`
	// Sensitivity, when > 0, replaces the generic sensitivity of the base
	// cuboid given the invariants. Where knowdp computes that sensitivity
	// (sensitivity.GenericSensitivity), a smaller value is refused at registration
	// and a larger one adds noise. Where it cannot (sensitivity.ErrNoClosedForm:
	// several invariants on a large domain) the value is the curator's
	// claim, and every answer's privacy metadata says its guarantee is
	// conditional on it.
	Sensitivity int `json:"sensitivity,omitempty"`
	// Metric, if set, enables d_X queries (paper 4) with this metric.
	Metric *MetricPolicy `json:"metric,omitempty"`
	// PrivacyUnit, if set, makes every answer's guarantee per unit: the
	// source's rows belong to units named by a column, each bounded to
	// max_rows rows (units.go).
	PrivacyUnit *UnitPolicy `json:"privacy_unit,omitempty"`
	// RowLevel says every row of the source is a different person (or
	// household...): a CSV source with a column that looks like an
	// identifier is refused without privacy_unit unless it is set.
	RowLevel bool `json:"row_level,omitempty"`
}

// maxRows bounds a dataset's number of rows so that every linear answer
// (integer coefficients of at most maxCoef in magnitude) is an exact integer
// in float64 and int64: maxCoef * maxRows = 2^52.
const (
	maxRows = 1 << 32
	maxCoef = 1 << 20
)

// dataset is a registered dataset, held in memory.
type dataset struct {
	id, name string
	schema   *domain.Schema
	cube     *cube.Cube
	// views are the policy's invariants, in its order, each at its level;
	// exact are those at their finest levels (cuboids), and coarse is set
	// when some invariant stands at a coarser level of a hierarchy (then
	// every cuboid query is released as views). inv are the flat
	// invariants' counts (for refinement) and pub every invariant's, in
	// the order of views (published).
	views  []domain.View
	exact  []domain.Cuboid
	coarse bool
	inv    []estimate.Invariant
	pub    []estimate.Invariant
	// invKey identifies the flat invariants and their counts (see
	// invariantKey): kept measurements are combined only under the same.
	invKey string
	// sens is the generic sensitivity S of the base cuboid given the
	// invariants: two induced neighbours' base cuboids are at most S apart
	// in L1, so a linear query set is charged S times its add/remove loss.
	sens sensitivity.Sensitivity
	// guarantee is conditionalGuarantee when sens is the curator's claim
	// that knowdp could not check, and empty otherwise.
	guarantee string
	budget    int64 // steps of privacy.EpsilonStep (or RhoStep) per analyst
	// zcdp is true when the budgets are zCDP rho (Policy.RhoPerAnalyst).
	// RhoStep equals EpsilonStep, so the ledger keeps both as the same
	// integer steps; the unit is the dataset's.
	zcdp    bool
	policy  Policy
	source  json.RawMessage
	total   int64
	created time.Time
	// samplers caches the noise samplers of linear queries by scale.
	samplers samplerCache
	// unavailable, when set, says why the stored dataset could not be
	// loaded (for the curator's eyes only): the server runs without it,
	// and only id, name, source and created are set.
	unavailable string
	// units is set for a dataset with a privacy unit (units.go).
	units *datasetUnits
	// retired is when the curator retired the dataset (Unix nanoseconds),
	// 0 while it is in service: read from the store on every access (see
	// Server.dataset), since another server process may retire it.
	retired atomic.Int64
}

// errUnavailable is the error of an analyst's request on a dataset that
// could not be loaded.
var errUnavailable = errors.New("dataset unavailable")

// usable returns errUnavailable for a dataset that could not be loaded.
func (d *dataset) usable() error {
	if d.unavailable != "" {
		return errUnavailable
	}
	return nil
}

// unit names the dataset's budget: "epsilon", or "rho" for zCDP budgets.
func (d *dataset) unit() string {
	if d.zcdp {
		return "rho"
	}
	return "epsilon"
}

var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// buildDataset validates a registration request and counts the source into a
// cube. Errors are for the curator and may name data values.
func buildDataset(ctx context.Context, req DatasetRequest, cellLimit int, sourceDirs []string) (*dataset, error) {
	if !idPattern.MatchString(req.ID) {
		return nil, fmt.Errorf("id %q: use 1 to 64 lower-case letters, digits, - and _, starting with a letter or digit", clip(req.ID))
	}
	if req.Name == "" {
		req.Name = req.ID
	}
	if len(req.Schema) == 0 {
		return nil, errors.New("schema is required")
	}
	schema, err := domain.ParseSchema(req.Schema)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	if err := schema.CheckCells(cellLimit); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	d := &dataset{id: req.ID, name: req.Name, schema: schema, policy: req.Policy, created: time.Now().UTC()}
	if err := d.applyPolicy(); err != nil {
		return nil, err
	}
	var c *cube.Cube
	switch {
	case req.Source.CSV != "" && req.Source.SQL != nil:
		return nil, errors.New("source: give csv or sql, not both")
	case req.Source.CSV != "":
		path, err := ingest.Path(sourceDirs, req.Source.CSV, "source.csv")
		if err != nil {
			return nil, err
		}
		if d.policy.PrivacyUnit != nil {
			c, err = d.countCSVUnits(ctx, path, req.Source.CountColumn, cellLimit)
		} else if err = d.checkIdentifiers(path); err == nil {
			c, err = ingest.CountCSV(ctx, path, req.Source.CountColumn, schema, cellLimit)
		}
		if err != nil {
			return nil, err
		}
		d.source, _ = json.Marshal(map[string]string{"csv": req.Source.CSV, "count_column": req.Source.CountColumn})
	case req.Source.SQL != nil && d.policy.PrivacyUnit != nil:
		return nil, errors.New("policy.privacy_unit: supported for a csv source only")
	case req.Source.SQL != nil:
		sq := req.Source.SQL
		c, err = ingest.CountSQL(ctx, ingest.Table{Driver: sq.Driver, DSN: sq.DSN, Name: sq.Table}, req.Source.CountColumn, schema, cellLimit, maxRows, sourceDirs)
		if err != nil {
			return nil, fmt.Errorf("source: %w", err)
		}
		d.source, _ = json.Marshal(map[string]any{"sql": map[string]string{
			"driver": req.Source.SQL.Driver, "dsn": ingest.RedactDSN(req.Source.SQL.DSN), "table": req.Source.SQL.Table}, "count_column": req.Source.CountColumn})
	default:
		return nil, errors.New("source: give csv (a file path) or sql {driver, dsn, table}")
	}
	if err := d.setCube(c); err != nil {
		return nil, err
	}
	return d, nil
}

// applyPolicy validates the policy and derives the invariant cuboids, the
// generic sensitivity and the budget.
func (d *dataset) applyPolicy() error {
	p := d.policy
	switch {
	case p.RhoPerAnalyst != 0 && p.EpsilonPerAnalyst != 0:
		return errors.New("policy: give epsilon_per_analyst or rho_per_analyst, not both")
	case p.RhoPerAnalyst != 0:
		rho, err := privacy.NewRho(p.RhoPerAnalyst)
		if err != nil {
			return fmt.Errorf("policy.rho_per_analyst: %w", err)
		}
		d.budget, d.zcdp = rho.Steps(), true
	default:
		eps, err := privacy.NewBudget(p.EpsilonPerAnalyst, 0)
		if err != nil || p.EpsilonPerAnalyst <= 0 {
			return fmt.Errorf("policy.epsilon_per_analyst: must be a number in (0, %d], got %v", privacy.MaxEpsilon, p.EpsilonPerAnalyst)
		}
		d.budget, _ = eps.Steps()
		d.zcdp = false
	}
	d.exact, d.views, d.coarse = nil, nil, false
	for i, names := range p.Invariants {
		// "geo:state" declares state totals exact; a bare hierarchical
		// dimension stands at its finest level. Lists without a level are
		// read as they always were (CuboidOf), so that a stored policy
		// still loads.
		var v domain.View
		if slices.ContainsFunc(names, func(n string) bool { return strings.Contains(n, ":") }) {
			var err error
			if v, err = d.schema.ViewOfNames(names...); err != nil {
				return fmt.Errorf("policy.invariants[%d]: %w", i, err)
			}
		} else {
			cb, err := d.schema.CuboidOf(names...)
			if err != nil {
				return fmt.Errorf("policy.invariants[%d]: %w", i, err)
			}
			v = domain.ViewOf(cb)
		}
		d.views = append(d.views, v)
		if v.Flat() {
			d.exact = append(d.exact, v.Dims)
		} else {
			d.coarse = true
		}
	}
	// With flat invariants only this is sensitivity.GenericSensitivity.
	computed, err := sensitivity.GenericSensitivityViews(d.schema, d.views, domain.ViewOf(domain.Base(d.schema.NumDims())))
	d.guarantee = ""
	switch {
	case p.Sensitivity < 0:
		return fmt.Errorf("policy.sensitivity: must be positive, got %d", p.Sensitivity)
	case p.Sensitivity == 0 && err != nil:
		return fmt.Errorf("policy.invariants: %w (set policy.sensitivity explicitly)", err)
	case p.Sensitivity == 0:
		d.sens = computed
	case err == nil && p.Sensitivity < computed.Value:
		// A smaller value would make every epsilon a lie.
		return fmt.Errorf("policy.sensitivity: %d is below the generic sensitivity knowdp computes for these invariants, %d (%s); give at least %d, or leave it out", p.Sensitivity, computed.Value, computed.Rule, computed.Value)
	case err == nil:
		d.sens = sensitivity.Sensitivity{Value: p.Sensitivity, Rule: fmt.Sprintf("given by the curator (at least the computed %d: %s)", computed.Value, computed.Rule)}
	case errors.Is(err, sensitivity.ErrNoClosedForm):
		d.sens = sensitivity.Sensitivity{Value: p.Sensitivity, Rule: "given by the curator; knowdp cannot compute it for these invariants"}
		d.guarantee = conditionalGuarantee
	default:
		return fmt.Errorf("policy.invariants: %w", err)
	}
	if err := d.applyUnitPolicy(); err != nil {
		return err
	}
	return d.checkMetric()
}

// setCube checks the counts (non-negative integers, fewer than maxRows in
// all) and installs them and the invariants computed from them.
func (d *dataset) setCube(c *cube.Cube) error {
	var t float64
	for i, v := range c.Counts {
		switch {
		case v < 0:
			return fmt.Errorf("counts: base cell %d has a negative count; a source must give every cell a count of rows >= 0", i)
		case v != math.Trunc(v) || math.IsInf(v, 0):
			return fmt.Errorf("counts: base cell %d has a count that is not an integer; a source must count rows", i)
		}
		if t += v; t >= maxRows {
			return fmt.Errorf("counts: more than %d rows; at most %d are supported", int64(maxRows-1), int64(maxRows-1))
		}
	}
	d.cube, d.total = c, int64(t)
	d.inv = release.CubeInvariants(c, d.exact)
	d.invKey = invariantKey(d)
	d.pub = make([]estimate.Invariant, len(d.views))
	for i, v := range d.views {
		x := c.Project(v.Dims)
		if !v.Flat() {
			var err error
			if x, err = d.schema.RollUp(domain.LeafView(v), x, v); err != nil {
				return fmt.Errorf("invariant %s: %w", d.schema.FormatView(v), err)
			}
		}
		d.pub[i] = estimate.Invariant{Cuboid: v.Dims, View: v, Counts: x}
	}
	return nil
}

// encodeCounts stores a cube's counts sparsely: the number of non-zero cells,
// then for each the gap from the previous one and the count, as varints.
func encodeCounts(counts []float64) []byte {
	var b []byte
	nz := 0
	for _, v := range counts {
		if v != 0 {
			nz++
		}
	}
	b = binary.AppendUvarint(b, uint64(nz))
	prev := -1
	for i, v := range counts {
		if v == 0 {
			continue
		}
		b = binary.AppendUvarint(b, uint64(i-prev))
		b = binary.AppendUvarint(b, uint64(v))
		prev = i
	}
	return b
}

// decodeCounts is the inverse of encodeCounts.
func decodeCounts(b []byte, counts []float64) error {
	nz, k := binary.Uvarint(b)
	if k <= 0 {
		return errors.New("counts: corrupt header")
	}
	b = b[k:]
	i := -1
	for range nz {
		gap, k := binary.Uvarint(b)
		if k <= 0 {
			return errors.New("counts: corrupt")
		}
		b = b[k:]
		v, k := binary.Uvarint(b)
		if k <= 0 {
			return errors.New("counts: corrupt")
		}
		b = b[k:]
		i += int(gap)
		if i < 0 || i >= len(counts) || v > math.MaxInt64 {
			return errors.New("counts: cell out of range")
		}
		counts[i] = float64(v)
	}
	if len(b) != 0 {
		return errors.New("counts: trailing bytes")
	}
	return nil
}

// record is the dataset as the store keeps it.
func (d *dataset) record() (store.DatasetRecord, error) {
	schemaJSON, err := d.schema.MarshalJSON()
	if err != nil {
		return store.DatasetRecord{}, err
	}
	policyJSON, err := json.Marshal(d.policy)
	if err != nil {
		return store.DatasetRecord{}, err
	}
	return store.DatasetRecord{ID: d.id, Name: d.name, Schema: string(schemaJSON), Policy: string(policyJSON), Source: string(d.source),
		Counts: d.encodedCounts(), Rows: d.total, Budget: d.budget, Created: d.created}, nil
}

// loadDataset rebuilds a dataset the store kept. One whose stored form
// cannot be used (its schema, policy or counts fail the checks of
// registration) is returned marked unavailable, with the reason: one
// dataset must not keep the server from starting.
func loadDataset(rec store.DatasetRecord) *dataset {
	d := &dataset{id: rec.ID, name: rec.Name, source: json.RawMessage(rec.Source), total: rec.Rows, budget: rec.Budget, created: rec.Created}
	if err := d.restore(rec.Schema, rec.Policy, rec.Counts); err != nil {
		stub := &dataset{id: d.id, name: d.name, source: d.source, created: d.created, policy: d.policy, unavailable: err.Error()}
		if d.schema != nil {
			stub.zcdp = d.zcdp
		}
		return stub
	}
	return d
}

// restore rebuilds a stored dataset with the checks of registration.
func (d *dataset) restore(schemaJSON, policyJSON string, counts []byte) error {
	var err error
	if d.schema, err = domain.ParseSchema([]byte(schemaJSON)); err != nil {
		return fmt.Errorf("stored schema: %w", err)
	}
	if err := json.Unmarshal([]byte(policyJSON), &d.policy); err != nil {
		return fmt.Errorf("stored policy: %w", err)
	}
	if err := d.applyPolicy(); err != nil {
		return fmt.Errorf("stored policy: %w", err)
	}
	c, err := cube.New(d.schema, math.MaxInt)
	if err != nil {
		return fmt.Errorf("stored schema: %w", err)
	}
	if d.policy.PrivacyUnit != nil {
		if err := d.restoreUnits(counts, c); err != nil {
			return err
		}
	} else if err := decodeCounts(counts, c.Counts); err != nil {
		return err
	}
	return d.setCube(c)
}
