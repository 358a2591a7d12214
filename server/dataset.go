package server

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/release"
	"github.com/knowdp/knowdp/sensitivity"
	"github.com/knowdp/knowdp/server/store"
	"github.com/knowdp/knowdp/source"
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
		path, err := sourcePath(sourceDirs, req.Source.CSV, "source.csv")
		if err != nil {
			return nil, err
		}
		if d.policy.PrivacyUnit != nil {
			c, err = d.countCSVUnits(ctx, path, req.Source.CountColumn, cellLimit)
		} else if err = d.checkIdentifiers(path); err == nil {
			c, err = countCSV(ctx, path, req.Source.CountColumn, schema, cellLimit)
		}
		if err != nil {
			return nil, err
		}
		d.source, _ = json.Marshal(map[string]string{"csv": req.Source.CSV, "count_column": req.Source.CountColumn})
	case req.Source.SQL != nil && d.policy.PrivacyUnit != nil:
		return nil, errors.New("policy.privacy_unit: supported for a csv source only")
	case req.Source.SQL != nil:
		c, err = countSQL(ctx, *req.Source.SQL, req.Source.CountColumn, schema, cellLimit, sourceDirs)
		if err != nil {
			return nil, fmt.Errorf("source: %w", err)
		}
		d.source, _ = json.Marshal(map[string]any{"sql": map[string]string{
			"driver": req.Source.SQL.Driver, "dsn": redactDSN(req.Source.SQL.DSN), "table": req.Source.SQL.Table}, "count_column": req.Source.CountColumn})
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

// resolveDirs returns the absolute, symlink-free form of each source
// directory, refusing one that is not a directory.
func resolveDirs(dirs []string) ([]string, error) {
	out := make([]string, 0, len(dirs))
	for _, dir := range dirs {
		abs, err := filepath.Abs(dir)
		if err == nil {
			abs, err = filepath.EvalSymlinks(abs)
		}
		if err != nil {
			return nil, fmt.Errorf("source dir %s: %w", dir, err)
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("source dir %s: not a directory", dir)
		}
		out = append(out, abs)
	}
	return out, nil
}

// sourcePath resolves a curator's file source (symbolic links included) and
// checks that it lies inside one of the source directories: the server reads
// files on its own machine, with its own rights, so a curator may name only
// the files the operator exposed at start. A relative name is taken inside
// the source directories, the first that holds it, never from the server's
// working directory.
func sourcePath(dirs []string, name, field string) (string, error) {
	if len(dirs) == 0 {
		return "", fmt.Errorf("%s: file sources are disabled: the server was started without a source directory (knowdp serve --source-dir DIR, Config.SourceDirs)", field)
	}
	candidates := []string{name}
	if !filepath.IsAbs(name) {
		candidates = candidates[:0]
		for _, dir := range dirs {
			candidates = append(candidates, filepath.Join(dir, name))
		}
	}
	var abs string
	var err error
	for _, c := range candidates {
		if abs, err = filepath.EvalSymlinks(c); err == nil {
			break
		}
	}
	if err != nil {
		return "", fmt.Errorf("%s: %s: %w", field, name, errors.Unwrap(err))
	}
	if abs, err = filepath.Abs(abs); err != nil {
		return "", fmt.Errorf("%s: %s: %w", field, name, err)
	}
	for _, dir := range dirs {
		if rel, err := filepath.Rel(dir, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && rel != "." {
			return abs, nil
		}
	}
	return "", fmt.Errorf("%s: %s is outside the source directories (%s)", field, name, strings.Join(dirs, ", "))
}

// countCSV counts a CSV source into a cube. Its errors name the file, row
// and column but never quote the file's contents (not even its header): a
// server error must not become a way to read files.
// With a count column each row stands for that many records.
func countCSV(ctx context.Context, path, countColumn string, s *domain.Schema, cellLimit int) (*cube.Cube, error) {
	t, err := source.OpenCSV(path)
	if err != nil {
		return nil, fmt.Errorf("source.csv: %s: not a readable CSV file with a header row", path)
	}
	defer t.Close()
	header := map[string]bool{}
	for _, h := range t.Header() {
		header[h] = true
	}
	for i := range s.NumDims() {
		if name := s.Dim(i).Name; !header[name] {
			return nil, fmt.Errorf("source.csv: %s: the header row has no column %q", path, name)
		}
	}
	if countColumn != "" && !header[countColumn] {
		return nil, fmt.Errorf("source.count_column: %s: the header row has no column %q", path, countColumn)
	}
	c, err := cube.Build(ctx, source.WithCountColumn(t, countColumn), s, cube.Options{CellLimit: cellLimit})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if countColumn != "" {
			return nil, fmt.Errorf("source.csv: %s: row %d is malformed, has a value outside its column's declared domain, or its %q is not a non-negative integer below 2^63 (values are not quoted)", path, t.Row(), countColumn)
		}
		return nil, fmt.Errorf("source.csv: %s: row %d is malformed or has a value outside its column's declared domain (values are not quoted)", path, t.Row())
	}
	return c, nil
}

// quoteIdent quotes a possibly schema-qualified SQL identifier.
func quoteIdent(name string) (string, error) {
	if name == "" {
		return "", errors.New("empty identifier")
	}
	parts := strings.Split(name, ".")
	for i, p := range parts {
		if p == "" || strings.ContainsRune(p, 0) {
			return "", fmt.Errorf("bad identifier %q", name)
		}
		parts[i] = `"` + strings.ReplaceAll(p, `"`, `""`) + `"`
	}
	return strings.Join(parts, "."), nil
}

// countSQL aggregates a table in its own database with GROUP BY and fills the
// counts into a dense cube, rejecting values outside the declared domains.
// With a count column the groups sum it instead of counting rows.
func countSQL(ctx context.Context, src SQLSource, countColumn string, s *domain.Schema, cellLimit int, sourceDirs []string) (*cube.Cube, error) {
	var driver string
	switch src.Driver {
	case "sqlite":
		driver = "sqlite"
	case "postgres":
		driver = "pgx"
	default:
		return nil, fmt.Errorf("sql.driver: %q; use sqlite or postgres", src.Driver)
	}
	table, err := quoteIdent(src.Table)
	if err != nil {
		return nil, fmt.Errorf("sql.table: %w", err)
	}
	n := s.NumDims()
	cols := make([]string, n)
	for i := range n {
		if cols[i], err = quoteIdent(s.Dim(i).Name); err != nil {
			return nil, fmt.Errorf("schema dimension %d: %w", i, err)
		}
	}
	dsn := src.DSN
	if driver == "sqlite" {
		path, err := sourcePath(sourceDirs, dsn, "source.sql.dsn")
		if err != nil {
			return nil, err
		}
		dsn = "file:" + path + "?mode=ro&_pragma=query_only(1)"
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, fmt.Errorf("sql: %w", err)
	}
	defer db.Close()
	if driver == "pgx" {
		if err := db.PingContext(ctx); err != nil {
			// Whether something listens at the address, and what, is
			// none of the curator's business: the server may reach hosts
			// the curator cannot. The details go to the server's log.
			return nil, &sourceError{msg: pgConnectError, detail: err}
		}
	}
	list := strings.Join(cols, ", ")
	// The dimensions are cast to text so that integer and text columns
	// compare with the schema's values alike.
	casts := make([]string, n)
	for i, c := range cols {
		casts[i] = "CAST(" + c + " AS TEXT)"
	}
	agg := "COUNT(*)"
	if countColumn != "" {
		q, err := quoteIdent(countColumn)
		if err != nil || strings.Contains(countColumn, ".") {
			return nil, fmt.Errorf("source.count_column: bad column name %q", countColumn)
		}
		var bad int64
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table+" WHERE "+source.BadCount(src.Driver, countColumn)).Scan(&bad); err != nil {
			return nil, fmt.Errorf("sql %s: count column %q: %w", src.Table, countColumn, err)
		}
		if bad > 0 {
			return nil, fmt.Errorf("sql %s: count column %q is not a non-negative integer below 2^63 in %d rows (values are not quoted)", src.Table, countColumn, bad)
		}
		agg = "CAST(SUM(CAST(CAST(" + q + " AS TEXT) AS BIGINT)) AS BIGINT)"
	}
	query := "SELECT " + strings.Join(casts, ", ") + ", " + agg + " FROM " + table + " GROUP BY " + list
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		var pe *pgconn.PgError
		var ce *pgconn.ConnectError
		if driver == "pgx" && (errors.As(err, &ce) || !errors.As(err, &pe)) {
			return nil, &sourceError{msg: pgConnectError, detail: err}
		}
		if pe != nil {
			// Connected and authenticated: the database's own answer.
			return nil, fmt.Errorf("sql %s: %s (SQLSTATE %s)", src.Table, pe.Message, pe.Code)
		}
		return nil, fmt.Errorf("sql %s: %w", src.Table, err)
	}
	defer rows.Close()
	c, err := cube.New(s, cellLimit)
	if err != nil {
		return nil, err
	}
	vals := make([]sql.NullString, n)
	dest := make([]any, n+1)
	for i := range vals {
		dest[i] = &vals[i]
	}
	var count int64
	dest[n] = &count
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("sql %s: a group's values or count cannot be read (a count must be an integer): %w", src.Table, err)
		}
		if count < 0 {
			return nil, fmt.Errorf("sql %s: COUNT(*) gave a negative count for a group; a source must give every cell a count of rows >= 0", src.Table)
		}
		cell := 0
		for i, v := range vals {
			dim := s.Dim(i)
			if !v.Valid {
				return nil, fmt.Errorf("sql %s: column %q is NULL in %d rows; every row needs a value in the declared domain", src.Table, dim.Name, count)
			}
			k, ok := s.ValueIndex(i, v.String)
			if !ok {
				// The value itself is not quoted: error messages never echo
				// the source's contents.
				return nil, fmt.Errorf("sql %s: column %q has a value outside its declared domain (%d rows)", src.Table, dim.Name, count)
			}
			cell += k * s.Stride(i)
		}
		if c.Counts[cell] += float64(count); c.Counts[cell] >= maxRows {
			return nil, fmt.Errorf("sql %s: more than %d rows; at most %d are supported", src.Table, int64(maxRows-1), int64(maxRows-1))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sql %s: %w", src.Table, err)
	}
	return c, nil
}

// pgConnectError is the one answer to a PostgreSQL source that cannot be
// reached, whatever the cause.
const pgConnectError = "cannot connect to the PostgreSQL source (its address, credentials or database may be wrong; the server's log has the details)"

// sourceError is a registration error whose details stay in the server's
// log: the curator sees msg only.
type sourceError struct {
	msg    string
	detail error
}

func (e *sourceError) Error() string { return e.msg }
func (e *sourceError) Unwrap() error { return e.detail }

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

// redactDSN removes a password from a database URL before it is stored or
// shown.
func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		if strings.Contains(dsn, "password") {
			return "(redacted)"
		}
		return dsn
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "REDACTED")
	}
	return u.String()
}
