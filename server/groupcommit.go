package server

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"
)

// groupCommitter commits the charges of concurrent queries together: one
// transaction and one fsync for every charge waiting when the previous
// commit ended. Each charge runs inside its own savepoint, with exactly the
// checks of a transaction of its own (budget row, earlier answer of the same
// query, cost), in arrival order, so the batch is equivalent to running the
// charges one after another; a charge's caller gets its result only after
// the whole transaction is durable, and sees an error if the commit fails.
//
// It is used on SQLite, where every write transaction holds the database's
// single write lock and each commit costs an fsync: batching turns N fsyncs
// into one.
type groupCommitter struct {
	st   *store
	reqs chan *chargeReq
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

// chargeReq is one charge waiting to be committed.
type chargeReq struct {
	e     *entry
	p     *plan
	cells int
	total int64
	done  chan chargeRes
}

type chargeRes struct {
	out    *entry
	b      budgetState
	repeat bool
	err    error
}

// maxBatch bounds the charges of one transaction, so that one commit's
// latency stays bounded under any load.
const maxBatch = 256

func newGroupCommitter(st *store) *groupCommitter {
	g := &groupCommitter{st: st, reqs: make(chan *chargeReq, maxBatch), stop: make(chan struct{})}
	g.wg.Add(1)
	go g.loop()
	return g
}

func (g *groupCommitter) close() {
	g.once.Do(func() { close(g.stop) })
	g.wg.Wait()
}

var errClosed = errors.New("server: closed")

// charge queues a charge and waits until its transaction has committed (or
// failed). The wait ignores the request's cancellation: once queued, the
// charge is committed or not as a whole, and a client that went away finds
// its answer again with the same Idempotency-Key.
func (g *groupCommitter) charge(e *entry, p *plan, cells int, total int64) (*entry, budgetState, bool, error) {
	r := &chargeReq{e: e, p: p, cells: cells, total: total, done: make(chan chargeRes, 1)}
	select {
	case g.reqs <- r:
	case <-g.stop:
		return nil, budgetState{}, false, errClosed
	}
	res := <-r.done
	return res.out, res.b, res.repeat, res.err
}

func (g *groupCommitter) loop() {
	defer g.wg.Done()
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
					r.done <- chargeRes{err: errClosed}
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
func (g *groupCommitter) commit(batch []*chargeReq) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res := make([]chargeRes, len(batch))
	err := g.st.tx(ctx, func(tx *sql.Tx) error {
		for i, r := range batch {
			if _, err := tx.ExecContext(ctx, "SAVEPOINT charge"); err != nil {
				return err
			}
			// chargeIn fills in the entry; work on a copy so that a
			// rolled-back attempt leaves nothing behind.
			e := *r.e
			out, b, repeat, err := g.st.chargeIn(ctx, tx, &e, r.p, r.cells, r.total)
			if err != nil {
				if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO charge"); rerr != nil {
					return rerr
				}
			}
			if _, err := tx.ExecContext(ctx, "RELEASE charge"); err != nil {
				return err
			}
			res[i] = chargeRes{out: out, b: b, repeat: repeat, err: err}
		}
		return nil
	})
	for i, r := range batch {
		if err != nil {
			res[i] = chargeRes{err: fmt.Errorf("group commit of %d charges: %w", len(batch), err)}
		}
		r.done <- res[i]
	}
}
