package server

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
	"sync"
	"sync/atomic"
	"time"
)

// entry is one answered query in the ledger.
type entry struct {
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
	// Measurements, when set, is the answer's measurementRecord as JSON:
	// stored with the answer (table measurements), never shown; it is
	// read back only to derive later answers of the same analyst (see
	// measurements.go).
	Measurements []byte `json:"-"`
}

// budgetState is an analyst's budget on one dataset, in steps.
type budgetState struct {
	Total, Spent int64
	// LedgerBytes is the size of the analyst's stored requests and
	// answers on the dataset (see Config.LedgerQuota).
	LedgerBytes int64
}

// budgetError is a refused charge. Its numbers are the analyst's own budget
// and the query's cost, which depend on public inputs only.
type budgetError struct {
	need, remaining int64
	unit            string // "epsilon" or "rho"
	// atLeast is set when need is a lower bound of the cost (a linear
	// query refused before it was planned).
	atLeast bool
}

func (e *budgetError) Error() string {
	need := e.unit
	if e.atLeast {
		need += " at least"
	}
	return fmt.Sprintf("insufficient budget: this query needs %s %.6g, remaining %.6g", need, stepsEpsilon(e.need), stepsEpsilon(e.remaining))
}

// errIdemConflict is returned when an idempotency key is reused for a
// different query.
var errIdemConflict = errors.New("idempotency key already used for a different query")

const entryColumns = `seq, id, analyst_id, dataset_id, query_hash, idempotency_key, kind, request_json, answer_json, charge_steps, spent_after_steps, created_at`

type rowScanner interface{ Scan(dest ...any) error }

func scanEntry(r rowScanner) (*entry, error) {
	var (
		e       entry
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
func (s *store) row(ctx context.Context, q querier, query string, args ...any) *sql.Row {
	if q == querier(s.r) {
		return s.readRow(ctx, query, args...)
	}
	return q.QueryRowContext(ctx, s.d.q(query), args...)
}

// findEntry returns the ledger entry of the analyst's query with this hash on
// the dataset, or of this idempotency key (if idem is set), or nil.
func (s *store) findEntry(ctx context.Context, q querier, analyst, dataset, hash, idem string) (*entry, error) {
	if idem != "" {
		e, err := scanEntry(s.row(ctx, q, `SELECT `+entryColumns+` FROM ledger WHERE analyst_id = ? AND idempotency_key = ?`, analyst, idem))
		switch {
		case err == nil:
			if e.DatasetID != dataset || e.Hash != hash {
				return nil, errIdemConflict
			}
			return e, nil
		case !errors.Is(err, sql.ErrNoRows):
			return nil, err
		}
	}
	e, err := scanEntry(s.row(ctx, q, `SELECT `+entryColumns+` FROM ledger WHERE analyst_id = ? AND dataset_id = ? AND query_hash = ?`, analyst, dataset, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return e, err
}

// entryByIdem returns the analyst's ledger entry of this idempotency key, or
// nil.
func (s *store) entryByIdem(ctx context.Context, analyst, idem string) (*entry, error) {
	e, err := scanEntry(s.readRow(ctx, `SELECT `+entryColumns+` FROM ledger WHERE analyst_id = ? AND idempotency_key = ?`, analyst, idem))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return e, err
}

// entrySize is what an entry counts against the analyst's ledger quota: its
// request, answer and kept measurements.
func entrySize(e *entry) int64 { return int64(len(e.Request) + len(e.Answer) + len(e.Measurements)) }

// costOf returns what plan p would cost on a budget whose per-cell losses
// are loss (largest: maxLoss), without changing them: the largest loss it
// adds under Protocol 1, plus its uniform charge.
func costOf(p *plan, loss []int64, maxLoss int64) int64 {
	after := maxLoss
	for _, c := range p.cells {
		after = max(after, loss[c.cell]+c.steps)
	}
	return p.uniform + after - maxLoss
}

// costNow returns what plan p would cost now on the analyst's budget b (read
// outside any transaction): to refuse an unaffordable query before
// computing anything. The charge transaction checks again.
func (s *store) costNow(ctx context.Context, analyst, dataset string, b budgetState, p *plan, cells int) (int64, error) {
	if len(p.cells) == 0 {
		return p.uniform, nil
	}
	c, err := s.losses.get(analyst, dataset, b.LedgerBytes, cells, func() (int64, []byte, []byte, error) {
		var lb int64
		var cols, runs []byte
		err := s.readRow(ctx, `SELECT ledger_bytes, columns, loss_runs FROM budgets WHERE analyst_id = ? AND dataset_id = ?`, analyst, dataset).Scan(&lb, &cols, &runs)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, nil, nil, nil
		}
		return lb, cols, runs, err
	})
	if err != nil {
		return 0, err
	}
	return costOf(p, c.loss, c.max), nil
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

// lossRange returns the smallest and largest per-cell Protocol 1 losses of
// the analyst's budget on a dataset with cells base cells, at ledgerBytes:
// from the loss cache, or read from the run-length encoding without
// expanding it.
func (s *store) lossRange(ctx context.Context, analyst, dataset string, ledgerBytes int64, cells int) (lo, hi int64, err error) {
	s.losses.mu.Lock()
	e := s.losses.m[budgetKey{analyst, dataset}]
	s.losses.mu.Unlock()
	if e != nil && e.ledgerBytes == ledgerBytes && len(e.loss) == cells {
		return e.lossMin(), e.max, nil
	}
	var cols, runs []byte
	err = s.readRow(ctx, `SELECT columns, loss_runs FROM budgets WHERE analyst_id = ? AND dataset_id = ?`, analyst, dataset).Scan(&cols, &runs)
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

// budget returns the analyst's budget on a dataset (the dataset's default if
// the analyst has not asked anything yet).
func (s *store) budget(ctx context.Context, analyst, dataset string, defaultTotal int64) (budgetState, error) {
	b := budgetState{Total: defaultTotal}
	err := s.readRow(ctx, `SELECT total_steps, spent_steps, ledger_bytes FROM budgets WHERE analyst_id = ? AND dataset_id = ?`, analyst, dataset).Scan(&b.Total, &b.Spent, &b.LedgerBytes)
	if errors.Is(err, sql.ErrNoRows) {
		return budgetState{Total: defaultTotal}, nil
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
