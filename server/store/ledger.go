package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/knowdp/knowdp/privacy"
)

// Entry is one answered query in the ledger: the request as the server
// normalised it and the answer as sent, with what it charged.
type Entry struct {
	Seq        int64           `json:"seq"`
	ID         string          `json:"id"`
	AnalystID  string          `json:"analyst_id"`
	DatasetID  string          `json:"dataset"`
	Hash       string          `json:"query_hash"`
	IdemKey    string          `json:"idempotency_key,omitempty"`
	Kind       string          `json:"kind"`
	Request    json.RawMessage `json:"request"`
	Answer     json.RawMessage `json:"answer"`
	Charge     int64           `json:"charge_steps"`
	SpentAfter int64           `json:"spent_after_steps"`
	Created    time.Time       `json:"created_at"`
	// Measurements, when set, is the answer's noisy measurements as the
	// server records them (JSON): stored with the answer, in the same
	// transaction (table measurements), never shown; the server reads them
	// back (Measurements) only to derive later answers of the same analyst.
	Measurements []byte `json:"-"`
}

// Budget is an analyst's budget on one dataset, in steps of
// privacy.EpsilonStep (of privacy.RhoStep, the same size, for a zCDP
// budget).
type Budget struct {
	Total, Spent int64
	// LedgerBytes is the size of the analyst's stored requests, answers
	// and measurements on the dataset (see Entry.Size). Every stored
	// answer increases it, in the transaction that stores the answer, and
	// nothing decreases it: it versions the budget's caches.
	LedgerBytes int64
}

// BudgetRow is one analyst's budget on one dataset.
type BudgetRow struct {
	Analyst, Dataset string
	Budget
}

// Cost is what an answer adds to a budget: Uniform steps that compose
// sequentially with everything else, and for a linear query the increments
// of the per-cell Protocol 1 losses, of which the budget is charged what
// they add to the largest. Unit ("epsilon" or "rho") names the steps in a
// refusal.
type Cost struct {
	Uniform int64
	Cells   []CellCharge
	Unit    string
}

// CellCharge is the increase, in steps, of one base cell's Protocol 1 loss.
type CellCharge struct {
	Cell  int
	Steps int64
}

// BudgetError is a refused charge. Its numbers are the analyst's own budget
// and the query's cost, which depend on public inputs only, so its message
// may be shown to the analyst.
type BudgetError struct {
	Need, Remaining int64
	Unit            string // "epsilon" or "rho"
	// AtLeast is set when Need is a lower bound of the cost (a query
	// refused before it was planned).
	AtLeast bool
}

func (e *BudgetError) Error() string {
	need := e.Unit
	if e.AtLeast {
		need += " at least"
	}
	return fmt.Sprintf("insufficient budget: this query needs %s %.6g, remaining %.6g", need, stepsValue(e.Need), stepsValue(e.Remaining))
}

// stepsValue is a count of steps as an epsilon or a rho.
func stepsValue(steps int64) float64 { return float64(steps) * privacy.EpsilonStep }

// Errors the server maps to responses.
var (
	// ErrIdemConflict is returned when an idempotency key is reused for
	// a different query.
	ErrIdemConflict = errors.New("idempotency key already used for a different query")
	// ErrNotFound is returned for an id that names nothing.
	ErrNotFound = errors.New("not found")
	// ErrExists is returned when a name to create is taken.
	ErrExists = errors.New("exists already")
)

const entryColumns = `seq, id, analyst_id, dataset_id, query_hash, idempotency_key, kind, request_json, answer_json, charge_steps, spent_after_steps, created_at`

type rowScanner interface{ Scan(dest ...any) error }

func scanEntry(r rowScanner) (*Entry, error) {
	var (
		e       Entry
		idem    sql.NullString
		req     string
		ans     string
		created int64
	)
	if err := r.Scan(&e.Seq, &e.ID, &e.AnalystID, &e.DatasetID, &e.Hash, &idem, &e.Kind, &req, &ans, &e.Charge, &e.SpentAfter, &created); err != nil {
		return nil, err
	}
	e.IdemKey = idem.String
	e.Request, e.Answer = json.RawMessage(req), json.RawMessage(ans)
	e.Created = time.Unix(0, created).UTC()
	return &e, nil
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// row runs a one-row query on q: with a cached prepared statement when q is
// the read pool.
func (db *DB) row(ctx context.Context, q querier, query string, args ...any) *sql.Row {
	if q == querier(db.r) {
		return db.readRow(ctx, query, args...)
	}
	return q.QueryRowContext(ctx, db.d.q(query), args...)
}

// FindEntry returns the ledger entry of the analyst's query with this hash on
// the dataset, or of this idempotency key (if idem is set), or nil. A key
// used for another query is ErrIdemConflict.
func (db *DB) FindEntry(ctx context.Context, analyst, dataset, hash, idem string) (*Entry, error) {
	return db.findEntry(ctx, db.r, analyst, dataset, hash, idem)
}

// findEntry is FindEntry on q: the read pool or a transaction.
func (db *DB) findEntry(ctx context.Context, q querier, analyst, dataset, hash, idem string) (*Entry, error) {
	if idem != "" {
		e, err := scanEntry(db.row(ctx, q, `SELECT `+entryColumns+` FROM ledger WHERE analyst_id = ? AND idempotency_key = ?`, analyst, idem))
		switch {
		case err == nil:
			if e.DatasetID != dataset || e.Hash != hash {
				return nil, ErrIdemConflict
			}
			return e, nil
		case !errors.Is(err, sql.ErrNoRows):
			return nil, err
		}
	}
	e, err := scanEntry(db.row(ctx, q, `SELECT `+entryColumns+` FROM ledger WHERE analyst_id = ? AND dataset_id = ? AND query_hash = ?`, analyst, dataset, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return e, err
}

// EntryByIdem returns the analyst's ledger entry of this idempotency key, or
// nil.
func (db *DB) EntryByIdem(ctx context.Context, analyst, idem string) (*Entry, error) {
	e, err := scanEntry(db.readRow(ctx, `SELECT `+entryColumns+` FROM ledger WHERE analyst_id = ? AND idempotency_key = ?`, analyst, idem))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return e, err
}

// Size is what an entry counts against the analyst's ledger quota: its
// request, answer and kept measurements.
func (e *Entry) Size() int64 { return int64(len(e.Request) + len(e.Answer) + len(e.Measurements)) }

// charge returns what c would cost on a budget whose per-cell losses are
// loss (largest: maxLoss), without changing them: the largest loss it adds
// under Protocol 1, plus its uniform charge.
func (c Cost) charge(loss []int64, maxLoss int64) int64 {
	after := maxLoss
	for _, x := range c.Cells {
		after = max(after, loss[x.Cell]+x.Steps)
	}
	return c.Uniform + after - maxLoss
}

// Price returns what c would cost now on the analyst's budget b (read
// outside any transaction) on a dataset of cells base cells: to refuse an
// unaffordable query before computing anything. Charge checks again.
func (db *DB) Price(ctx context.Context, analyst, dataset string, b Budget, c Cost, cells int) (int64, error) {
	if len(c.Cells) == 0 {
		return c.Uniform, nil
	}
	cl, err := db.losses.get(analyst, dataset, b.LedgerBytes, cells, func() (int64, []byte, []byte, error) {
		var lb int64
		var cols, runs []byte
		err := db.readRow(ctx, `SELECT ledger_bytes, columns, loss_runs FROM budgets WHERE analyst_id = ? AND dataset_id = ?`, analyst, dataset).Scan(&lb, &cols, &runs)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, nil, nil, nil
		}
		return lb, cols, runs, err
	})
	if err != nil {
		return 0, err
	}
	return c.charge(cl.loss, cl.max), nil
}

// lossCache keeps the decoded per-cell Protocol 1 losses of recently
// charged budgets, so that neither the affordability check nor the group
// commit decodes them per query. An entry is valid for one value of the
// budget's ledger_bytes: every charge that changes the losses stores an
// entry and so increases ledger_bytes, in whatever process it ran.
type lossCache struct {
	mu sync.Mutex
	m  map[budgetKey]*cachedLoss
}

type budgetKey struct{ analyst, dataset string }

// cachedLoss is immutable once cached.
type cachedLoss struct {
	ledgerBytes int64
	loss        []int64
	max         int64
	// min is the smallest loss, or -1 when not computed yet.
	min atomic.Int64
}

// lossMin returns the smallest per-cell loss of c.
func (c *cachedLoss) lossMin() int64 {
	if m := c.min.Load(); m >= 0 {
		return m
	}
	m := minOf(c.loss)
	c.min.Store(m)
	return m
}

// LossRange returns the smallest and largest per-cell Protocol 1 losses of
// the analyst's budget on a dataset with cells base cells, at ledgerBytes:
// from the loss cache, or read from the run-length encoding without
// expanding it.
func (db *DB) LossRange(ctx context.Context, analyst, dataset string, ledgerBytes int64, cells int) (lo, hi int64, err error) {
	db.losses.mu.Lock()
	e := db.losses.m[budgetKey{analyst, dataset}]
	db.losses.mu.Unlock()
	if e != nil && e.ledgerBytes == ledgerBytes && len(e.loss) == cells {
		return e.lossMin(), e.max, nil
	}
	var cols, runs []byte
	err = db.readRow(ctx, `SELECT columns, loss_runs FROM budgets WHERE analyst_id = ? AND dataset_id = ?`, analyst, dataset).Scan(&cols, &runs)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, 0, nil
	case err != nil:
		return 0, 0, err
	case runs != nil:
		return rangeRuns(runs, cells)
	}
	loss, err := decodeColumns(cols, cells)
	if err != nil {
		return 0, 0, err
	}
	return minOf(loss), maxOf(loss), nil
}

// rangeRuns returns the smallest and largest value of run-length encoded
// losses (see encodeRuns) without expanding them.
func rangeRuns(b []byte, cells int) (lo, hi int64, err error) {
	lo = math.MaxInt64
	for i := 0; i < cells; {
		n, k := binary.Uvarint(b)
		if k <= 0 || n == 0 || n > uint64(cells-i) {
			return 0, 0, errors.New("budget loss runs: corrupt")
		}
		b = b[k:]
		v, k := binary.Uvarint(b)
		if k <= 0 || v > math.MaxInt64 {
			return 0, 0, errors.New("budget loss runs: corrupt")
		}
		b = b[k:]
		lo, hi = min(lo, int64(v)), max(hi, int64(v))
		i += int(n)
	}
	if cells == 0 {
		lo = 0
	}
	return lo, hi, nil
}

// Bounds of the loss cache: budgets of datasets with at most
// maxCachedCells base cells, at most maxCachedBudgets of them (64 MiB).
const (
	maxCachedCells   = 1 << 16
	maxCachedBudgets = 128
)

// get returns the losses of a budget at ledgerBytes, from the cache or
// decoded from what read returns (the ledger_bytes, columns and loss_runs
// read together). The result must not be modified.
func (c *lossCache) get(analyst, dataset string, ledgerBytes int64, cells int, read func() (int64, []byte, []byte, error)) (*cachedLoss, error) {
	k := budgetKey{analyst, dataset}
	c.mu.Lock()
	e := c.m[k]
	c.mu.Unlock()
	if e != nil && e.ledgerBytes == ledgerBytes && len(e.loss) == cells {
		return e, nil
	}
	lb, cols, runs, err := read()
	if err != nil {
		return nil, err
	}
	var loss []int64
	if runs != nil {
		loss, err = decodeRuns(runs, cells)
	} else {
		loss, err = decodeColumns(cols, cells)
	}
	if err != nil {
		return nil, err
	}
	e = &cachedLoss{ledgerBytes: lb, loss: loss, max: maxOf(loss)}
	e.min.Store(-1)
	c.put(k, e)
	return e, nil
}

// put caches e (which the caller no longer modifies).
func (c *lossCache) put(k budgetKey, e *cachedLoss) {
	if len(e.loss) > maxCachedCells {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[budgetKey]*cachedLoss{}
	}
	if _, ok := c.m[k]; !ok && len(c.m) >= maxCachedBudgets {
		for old := range c.m { // evict one at random
			delete(c.m, old)
			break
		}
	}
	c.m[k] = e
}

// Budget returns the analyst's budget on a dataset (the dataset's default
// total, defaultTotal, if the analyst has not asked anything yet).
func (db *DB) Budget(ctx context.Context, analyst, dataset string, defaultTotal int64) (Budget, error) {
	b := Budget{Total: defaultTotal}
	err := db.readRow(ctx, `SELECT total_steps, spent_steps, ledger_bytes FROM budgets WHERE analyst_id = ? AND dataset_id = ?`, analyst, dataset).Scan(&b.Total, &b.Spent, &b.LedgerBytes)
	if errors.Is(err, sql.ErrNoRows) {
		return Budget{Total: defaultTotal}, nil
	}
	return b, err
}

func newEntryID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return "q_" + hex.EncodeToString(b[:])
}

// decodeColumns decodes the per-cell Protocol 1 losses (steps, one uvarint
// per base cell); nil means all zero.
func decodeColumns(b []byte, cells int) ([]int64, error) {
	loss := make([]int64, cells)
	if b == nil {
		return loss, nil
	}
	for i := range loss {
		v, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, errors.New("budget columns: corrupt")
		}
		loss[i] = int64(v)
		b = b[k:]
	}
	if len(b) != 0 {
		return nil, errors.New("budget columns: trailing bytes")
	}
	return loss, nil
}

// encodeRuns encodes per-cell losses as runs of equal values: the length
// of each run and its value, as uvarints.
func encodeRuns(loss []int64) []byte {
	var b []byte
	for i := 0; i < len(loss); {
		j := i + 1
		for j < len(loss) && loss[j] == loss[i] {
			j++
		}
		b = binary.AppendUvarint(b, uint64(j-i))
		b = binary.AppendUvarint(b, uint64(loss[i]))
		i = j
	}
	return b
}

// decodeRuns is the inverse of encodeRuns, for cells cells.
func decodeRuns(b []byte, cells int) ([]int64, error) {
	loss := make([]int64, cells)
	for i := 0; i < cells; {
		n, k := binary.Uvarint(b)
		if k <= 0 || n == 0 || n > uint64(cells-i) {
			return nil, errors.New("budget loss runs: corrupt")
		}
		b = b[k:]
		v, k := binary.Uvarint(b)
		if k <= 0 || v > math.MaxInt64 {
			return nil, errors.New("budget loss runs: corrupt")
		}
		b = b[k:]
		for j := range int(n) {
			loss[i+j] = int64(v)
		}
		i += int(n)
	}
	if len(b) != 0 {
		return nil, errors.New("budget loss runs: trailing bytes")
	}
	return loss, nil
}

func encodeColumns(loss []int64) []byte {
	b := make([]byte, 0, len(loss)+16)
	for _, v := range loss {
		b = binary.AppendUvarint(b, uint64(v))
	}
	return b
}

func minOf(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	m := v[0]
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

func maxOf(v []int64) int64 {
	var m int64
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// Budgets lists every budget row, by analyst and dataset.
func (db *DB) Budgets(ctx context.Context) ([]BudgetRow, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT analyst_id, dataset_id, total_steps, spent_steps FROM budgets ORDER BY analyst_id, dataset_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []BudgetRow
	for rows.Next() {
		var b BudgetRow
		if err := rows.Scan(&b.Analyst, &b.Dataset, &b.Total, &b.Spent); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// Entries lists ledger entries, newest first: of one analyst and/or dataset
// when given, before a sequence number when before > 0, at most limit.
func (db *DB) Entries(ctx context.Context, analyst, dataset string, before int64, limit int) ([]*Entry, error) {
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
	rows, err := db.r.QueryContext(ctx, db.d.q(q), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*Entry{}
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// EntryByID returns one ledger entry, or ErrNotFound.
func (db *DB) EntryByID(ctx context.Context, id string) (*Entry, error) {
	e, err := scanEntry(db.r.QueryRowContext(ctx, db.d.q(`SELECT `+entryColumns+` FROM ledger WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return e, err
}
