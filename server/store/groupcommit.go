package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// groupCommitter commits the charges of concurrent queries together: one
// transaction and one fsync for every charge waiting when the previous
// commit ended. Each charge gets exactly the checks of a transaction of its
// own (earlier answer of the same query, cost against the budget), in
// arrival order, so the batch is equivalent to running the charges one
// after another; a charge's caller gets its result only after the whole
// transaction is durable, and an error if the commit fails (then nothing
// of the batch was stored).
//
// On SQLite every write transaction holds the database's single write lock
// and each commit costs an fsync; on PostgreSQL the charges of one analyst
// on one dataset queue on their budget row's lock, each with its own WAL
// flush. Batching turns N commits into one.
type groupCommitter struct {
	st   *DB
	reqs chan *chargeReq
	stop chan struct{}
	// exited is closed when the loop has returned: a charge queued after
	// its last drain is never committed.
	exited chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
}

// chargeReq is one charge waiting to be committed.
type chargeReq struct {
	e     *Entry
	c     Cost
	cells int
	total int64
	done  chan chargeRes
}

type chargeRes struct {
	out    *Entry
	b      Budget
	repeat bool
	err    error
}

// maxBatch bounds the charges of one transaction, so that one commit's
// latency stays bounded under any load.
const maxBatch = 256

func newGroupCommitter(st *DB) *groupCommitter {
	g := &groupCommitter{st: st, reqs: make(chan *chargeReq, maxBatch), stop: make(chan struct{}), exited: make(chan struct{})}
	g.wg.Add(1)
	go g.loop()
	return g
}

func (g *groupCommitter) close() {
	g.once.Do(func() { close(g.stop) })
	g.wg.Wait()
}

// ErrClosed is the error of a charge made while, or after, the DB closes:
// nothing of it was stored.
var ErrClosed = errors.New("server: closed")

// ErrCommitFailed marks the error of a charge whose batch's transaction
// failed: nothing of it was stored (or, when the commit itself failed, the
// database may have stored it; a retry with the same idempotency key
// tells).
var ErrCommitFailed = errors.New("the charge could not be committed")

// Charge stores the answer e (its AnalystID, DatasetID, Hash, IdemKey,
// Kind, Request, Answer and Measurements) and charges its cost c to the
// analyst's budget on the dataset (of cells base cells, created with
// defaultTotal if the analyst has none yet), in one transaction, and
// returns the entry as stored and the budget after it. If the same query
// or idempotency key was answered before, nothing is charged and the
// stored entry is returned with repeat set; a charge that does not fit is
// a *BudgetError, and nothing is stored.
//
// Charge returns only once the transaction has committed (or failed:
// ErrCommitFailed, ErrClosed), so an answer written after it returns is
// durable, and one whose charge failed is never written. It takes no
// context on purpose: once queued, a charge is committed or not as a
// whole whatever the client does, and a client that went away finds its
// answer again with the same idempotency key.
func (db *DB) Charge(e *Entry, c Cost, cells int, defaultTotal int64) (stored *Entry, b Budget, repeat bool, err error) {
	return db.gc.charge(e, c, cells, defaultTotal)
}

// charge queues a charge and waits until its transaction has committed (or
// failed).
func (g *groupCommitter) charge(e *Entry, c Cost, cells int, total int64) (*Entry, Budget, bool, error) {
	r := &chargeReq{e: e, c: c, cells: cells, total: total, done: make(chan chargeRes, 1)}
	select {
	case g.reqs <- r:
	case <-g.stop:
		return nil, Budget{}, false, ErrClosed
	}
	select {
	case res := <-r.done:
		return res.out, res.b, res.repeat, res.err
	case <-g.exited:
		select {
		case res := <-r.done:
			return res.out, res.b, res.repeat, res.err
		default:
			return nil, Budget{}, false, ErrClosed
		}
	}
}

func (g *groupCommitter) loop() {
	defer g.wg.Done()
	defer close(g.exited)
	for {
		var batch []*chargeReq
		select {
		case r := <-g.reqs:
			batch = append(batch, r)
		case <-g.stop:
			// Fail whatever is still queued.
			for {
				select {
				case r := <-g.reqs:
					r.done <- chargeRes{err: ErrClosed}
				default:
					return
				}
			}
		}
	fill:
		for len(batch) < maxBatch {
			select {
			case r := <-g.reqs:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		g.commit(batch)
	}
}

// commit runs one batch in one transaction and reports every result.
//
// Each budget row of the batch is read once, kept in memory while the
// batch's charges are applied to it in order (with the per-cell Protocol 1
// losses decoded once), and written once; each charge costs one INSERT,
// whose unique constraints detect a query or idempotency key answered
// before (in an earlier transaction or earlier in this batch). The checks
// are those of a transaction of its own, in the same order: an earlier
// answer first, then the budget.
func (g *groupCommitter) commit(batch []*chargeReq) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := g.st
	res := make([]chargeRes, len(batch))
	type budgetAcc struct {
		b       Budget
		loss    []int64 // the per-cell losses, once a charge needs them
		maxLoss int64
		dirty   bool
	}
	accs := map[budgetKey]*budgetAcc{}
	err := st.tx(ctx, func(tx *sql.Tx) error {
		insert, err := tx.PrepareContext(ctx, st.d.q(`INSERT INTO ledger (id, analyst_id, dataset_id, query_hash, idempotency_key, kind, request_json, answer_json, charge_steps, spent_after_steps, created_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING seq`))
		if err != nil {
			return err
		}
		defer insert.Close()
		// Read (and on PostgreSQL lock) every budget row of the batch
		// first, in key order: two server processes sharing a PostgreSQL
		// database then always lock rows in the same order, and cannot
		// deadlock.
		var order []budgetKey
		for _, r := range batch {
			k := budgetKey{r.e.AnalystID, r.e.DatasetID}
			if accs[k] == nil {
				accs[k] = &budgetAcc{b: Budget{Total: r.total}}
				order = append(order, k)
			}
		}
		slices.SortFunc(order, func(a, b budgetKey) int {
			return cmp.Or(strings.Compare(a.analyst, b.analyst), strings.Compare(a.dataset, b.dataset))
		})
		for _, k := range order {
			acc := accs[k]
			if _, err := tx.ExecContext(ctx, st.d.q(`INSERT INTO budgets (analyst_id, dataset_id, total_steps, spent_steps) VALUES (?, ?, ?, 0) ON CONFLICT DO NOTHING`),
				k.analyst, k.dataset, acc.b.Total); err != nil {
				return err
			}
			if err := tx.QueryRowContext(ctx, st.d.q(`SELECT total_steps, spent_steps, ledger_bytes FROM budgets WHERE analyst_id = ? AND dataset_id = ?`+st.d.forUpdate),
				k.analyst, k.dataset).Scan(&acc.b.Total, &acc.b.Spent, &acc.b.LedgerBytes); err != nil {
				return err
			}
		}
		for i, r := range batch {
			k := budgetKey{r.e.AnalystID, r.e.DatasetID}
			acc := accs[k]
			charge := r.c.Uniform
			if len(r.c.Cells) > 0 {
				if acc.loss == nil {
					c, err := st.losses.get(k.analyst, k.dataset, acc.b.LedgerBytes, r.cells, func() (int64, []byte, []byte, error) {
						var cols, runs []byte
						err := tx.QueryRowContext(ctx, st.d.q(`SELECT columns, loss_runs FROM budgets WHERE analyst_id = ? AND dataset_id = ?`), k.analyst, k.dataset).Scan(&cols, &runs)
						return acc.b.LedgerBytes, cols, runs, err
					})
					if err != nil {
						return err
					}
					acc.loss, acc.maxLoss = slices.Clone(c.loss), c.max
				}
				m := acc.maxLoss
				for _, c := range r.c.Cells {
					m = max(m, acc.loss[c.Cell]+c.Steps)
				}
				charge += m - acc.maxLoss
			}
			if charge > acc.b.Total-acc.b.Spent {
				found, err := st.findEntry(ctx, tx, k.analyst, k.dataset, r.e.Hash, r.e.IdemKey)
				switch {
				case err != nil:
					res[i] = chargeRes{err: err}
				case found != nil:
					res[i] = chargeRes{out: found, b: acc.b, repeat: true}
				default:
					res[i] = chargeRes{err: &BudgetError{Need: charge, Remaining: acc.b.Total - acc.b.Spent, Unit: r.c.Unit}}
				}
				continue
			}
			e := *r.e
			e.Charge = charge
			e.SpentAfter = acc.b.Spent + charge
			e.Created = time.Now().UTC()
			e.ID = newEntryID()
			var idem any
			if e.IdemKey != "" {
				idem = e.IdemKey
			}
			err := insert.QueryRowContext(ctx, e.ID, e.AnalystID, e.DatasetID, e.Hash, idem, e.Kind, string(e.Request), string(e.Answer), e.Charge, e.SpentAfter, e.Created.UnixNano()).Scan(&e.Seq)
			if errors.Is(err, sql.ErrNoRows) {
				// The same query or idempotency key was answered before.
				found, err := st.findEntry(ctx, tx, k.analyst, k.dataset, e.Hash, e.IdemKey)
				switch {
				case err != nil:
					res[i] = chargeRes{err: err}
				case found == nil:
					return fmt.Errorf("ledger insert of %s conflicted with no stored entry", e.Hash)
				default:
					res[i] = chargeRes{out: found, b: acc.b, repeat: true}
				}
				continue
			}
			if err != nil {
				return err
			}
			if e.Measurements != nil {
				// The answer's measurements, with it or not at all.
				if _, err := tx.ExecContext(ctx, st.d.q(`INSERT INTO measurements (ledger_id, analyst_id, dataset_id, seq, record) VALUES (?, ?, ?, ?, ?)`),
					e.ID, e.AnalystID, e.DatasetID, e.Seq, string(e.Measurements)); err != nil {
					return err
				}
			}
			for _, c := range r.c.Cells {
				acc.loss[c.Cell] += c.Steps
				acc.maxLoss = max(acc.maxLoss, acc.loss[c.Cell])
			}
			acc.b.Spent = e.SpentAfter
			acc.b.LedgerBytes += e.Size()
			acc.dirty = true
			res[i] = chargeRes{out: &e, b: acc.b}
		}
		for _, k := range order {
			acc := accs[k]
			if !acc.dirty {
				continue
			}
			var err error
			if acc.loss != nil {
				_, err = tx.ExecContext(ctx, st.d.q(`UPDATE budgets SET spent_steps = ?, ledger_bytes = ?, columns = NULL, loss_runs = ? WHERE analyst_id = ? AND dataset_id = ?`),
					acc.b.Spent, acc.b.LedgerBytes, encodeRuns(acc.loss), k.analyst, k.dataset)
			} else {
				_, err = tx.ExecContext(ctx, st.d.q(`UPDATE budgets SET spent_steps = ?, ledger_bytes = ? WHERE analyst_id = ? AND dataset_id = ?`),
					acc.b.Spent, acc.b.LedgerBytes, k.analyst, k.dataset)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		// The committed losses are the cache's now; acc is not used again.
		for k, acc := range accs {
			if acc.dirty && acc.loss != nil {
				c := &cachedLoss{ledgerBytes: acc.b.LedgerBytes, loss: acc.loss, max: acc.maxLoss}
				c.min.Store(-1)
				st.losses.put(k, c)
			}
		}
	}
	for i, r := range batch {
		if err != nil {
			res[i] = chargeRes{err: fmt.Errorf("group commit of %d charges: %w: %w", len(batch), ErrCommitFailed, err)}
		}
		r.done <- res[i]
	}
}
