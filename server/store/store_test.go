package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/knowdp/knowdp/internal/pgtest"
)

// testDB is a migrated database for one test, with what the test needs to
// look at it from outside: a second handle on the same database, and the
// statements that make its next insert into measurements fail and stop
// doing so.
type testDB struct {
	*DB
	reopen        func(t *testing.T) *DB
	refuse, allow []string
}

// eachDB runs f on a fresh SQLite database and a fresh PostgreSQL schema
// (which needs $KNOWDP_TEST_POSTGRES: scripts/test.sh starts a cluster).
func eachDB(t *testing.T, f func(t *testing.T, db testDB)) {
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		open := func(t *testing.T) *DB {
			db, err := OpenSQLite(dir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		}
		db := open(t)
		if err := db.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		f(t, testDB{DB: db, reopen: open,
			refuse: []string{`CREATE TRIGGER refuse BEFORE INSERT ON measurements BEGIN SELECT RAISE(ABORT, 'disk full'); END`},
			allow:  []string{`DROP TRIGGER refuse`}})
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.Schema(t)
		open := func(t *testing.T) *DB {
			db, err := OpenPostgres(dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		}
		db := open(t)
		if err := db.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		f(t, testDB{DB: db, reopen: open,
			refuse: []string{`CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'disk full'; END $$ LANGUAGE plpgsql`,
				`CREATE TRIGGER refuse BEFORE INSERT ON measurements FOR EACH ROW EXECUTE FUNCTION refuse()`},
			allow: []string{`DROP TRIGGER refuse ON measurements`}})
	})
}

func (db testDB) exec(t *testing.T, stmts []string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := db.w.ExecContext(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
}

// seed creates an analyst and a dataset "d" whose analysts have total
// steps each; it returns the analyst's id.
func seed(t *testing.T, db *DB, name string, total int64) string {
	t.Helper()
	ctx := context.Background()
	a, _, err := db.CreateAnalyst(ctx, "test", name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Dataset(ctx, "d"); errors.Is(err, ErrNotFound) {
		rec := DatasetRecord{ID: "d", Name: "d", Schema: "{}", Policy: "{}", Source: "{}", Counts: []byte{0}, Budget: total, Created: time.Now()}
		if err := db.RegisterDataset(ctx, "test", rec, nil); err != nil {
			t.Fatal(err)
		}
	}
	return a.ID
}

// answer is an answer to store: the query hash, the idempotency key.
func answer(analyst, hash, idem string) *Entry {
	return &Entry{AnalystID: analyst, DatasetID: "d", Hash: hash, IdemKey: idem, Kind: "cuboid",
		Request: json.RawMessage(`{"q":"` + hash + `"}`), Answer: json.RawMessage(`{"answer":"` + hash + `"}`)}
}

// TestChargeDurable: Charge stores the answer, its measurements and the
// spend together, and they are in the database, for any other connection,
// by the time it returns.
func TestChargeDurable(t *testing.T) {
	eachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		alice := seed(t, db.DB, "alice", 40)
		e := answer(alice, "h1", "k1")
		e.Measurements = []byte(`{"noisy":[1,2,3]}`)
		stored, b, repeat, err := db.Charge(e, Cost{Uniform: 7, Unit: "epsilon"}, 4, 40)
		if err != nil || repeat {
			t.Fatalf("charge: %v, repeat %v", err, repeat)
		}
		if stored.Charge != 7 || stored.SpentAfter != 7 || b != (Budget{Total: 40, Spent: 7, LedgerBytes: e.Size()}) {
			t.Fatalf("stored %+v, budget %+v", stored, b)
		}
		other := db.reopen(t)
		got, err := other.EntryByID(ctx, stored.ID)
		if err != nil || string(got.Answer) != string(e.Answer) || got.Charge != 7 || got.IdemKey != "k1" || got.Seq != stored.Seq {
			t.Fatalf("from another connection: %+v, %v", got, err)
		}
		if b2, err := other.Budget(ctx, alice, "d", 40); err != nil || b2 != b {
			t.Fatalf("budget from another connection: %+v, %v; want %+v", b2, err, b)
		}
		ms, err := other.Measurements(ctx, alice, "d")
		if err != nil || len(ms) != 1 || ms[0].LedgerID != stored.ID || ms[0].Record != string(e.Measurements) {
			t.Fatalf("measurements from another connection: %+v, %v", ms, err)
		}
		if ids, err := other.MeasurementIDs(ctx, alice, "d"); err != nil || !slices.Equal(ids, []string{stored.ID}) {
			t.Fatalf("measurement ids: %v, %v", ids, err)
		}
		if rec, err := other.MeasurementRecord(ctx, stored.ID); err != nil || rec != string(e.Measurements) {
			t.Fatalf("measurement record: %q, %v", rec, err)
		}
	})
}

// TestChargeAtomic: when the transaction of a charge fails (here: its
// measurements cannot be inserted), nothing of it is stored, neither the
// answer nor the spend, and the error says so; once the database takes it,
// the same charge is stored once.
func TestChargeAtomic(t *testing.T) {
	eachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		alice := seed(t, db.DB, "alice", 40)
		db.exec(t, db.refuse)
		e := answer(alice, "h1", "k1")
		e.Measurements = []byte(`{}`)
		stored, _, _, err := db.Charge(e, Cost{Uniform: 5, Unit: "epsilon"}, 1, 40)
		if !errors.Is(err, ErrCommitFailed) || stored != nil {
			t.Fatalf("a failed transaction: %+v, %v; want ErrCommitFailed", stored, err)
		}
		es, err := db.Entries(ctx, alice, "d", 0, 10)
		if err != nil || len(es) != 0 {
			t.Fatalf("after the failure the ledger holds %d entries, %v", len(es), err)
		}
		if b, err := db.Budget(ctx, alice, "d", 40); err != nil || b.Spent != 0 || b.LedgerBytes != 0 {
			t.Fatalf("after the failure: budget %+v, %v", b, err)
		}
		if ms, err := db.Measurements(ctx, alice, "d"); err != nil || len(ms) != 0 {
			t.Fatalf("after the failure: measurements %v, %v", ms, err)
		}
		db.exec(t, db.allow)
		for range 2 {
			if _, b, _, err := db.Charge(e, Cost{Uniform: 5, Unit: "epsilon"}, 1, 40); err != nil || b.Spent != 5 {
				t.Fatalf("retry: %+v, %v", b, err)
			}
		}
		if es, err := db.Entries(ctx, alice, "d", 0, 10); err != nil || len(es) != 1 {
			t.Fatalf("after the retries the ledger holds %d entries, %v", len(es), err)
		}
	})
}

// TestChargeRefusals: a charge over the remaining budget, a repeat (by
// query hash or idempotency key) and an idempotency key reused for another
// query, each decided in the transaction of the charge.
func TestChargeRefusals(t *testing.T) {
	eachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		alice := seed(t, db.DB, "alice", 10)
		first, _, _, err := db.Charge(answer(alice, "h1", "k1"), Cost{Uniform: 6, Unit: "rho"}, 1, 10)
		if err != nil {
			t.Fatal(err)
		}
		_, _, _, err = db.Charge(answer(alice, "h2", ""), Cost{Uniform: 5, Unit: "rho"}, 1, 10)
		var be *BudgetError
		if !errors.As(err, &be) || *be != (BudgetError{Need: 5, Remaining: 4, Unit: "rho"}) {
			t.Fatalf("over the budget: %v", err)
		}
		if want := fmt.Sprintf("insufficient budget: this query needs rho %.6g, remaining %.6g", 5*0x1p-40, 4*0x1p-40); be.Error() != want {
			t.Errorf("message %q, want %q", be.Error(), want)
		}
		for _, tc := range []struct {
			name      string
			hash, key string
		}{{"same query", "h1", ""}, {"same key", "h1", "k1"}, {"same query, over the budget", "h1", "k9"}} {
			// The repeat costs nothing, even when the charge would not fit.
			got, b, repeat, err := db.Charge(answer(alice, tc.hash, tc.key), Cost{Uniform: 9, Unit: "rho"}, 1, 10)
			if err != nil || !repeat || got.ID != first.ID || b.Spent != 6 {
				t.Errorf("%s: %+v %+v repeat %v, %v", tc.name, got, b, repeat, err)
			}
		}
		if _, _, _, err := db.Charge(answer(alice, "h3", "k1"), Cost{Uniform: 1, Unit: "rho"}, 1, 10); !errors.Is(err, ErrIdemConflict) {
			t.Fatalf("a key reused for another query: %v", err)
		}
		if e, err := db.FindEntry(ctx, alice, "d", "h3", "k1"); !errors.Is(err, ErrIdemConflict) || e != nil {
			t.Fatalf("FindEntry of a key reused: %+v, %v", e, err)
		}
		if e, err := db.EntryByIdem(ctx, alice, "k1"); err != nil || e.ID != first.ID {
			t.Fatalf("EntryByIdem: %+v, %v", e, err)
		}
		if e, err := db.FindEntry(ctx, alice, "d", "h2", ""); err != nil || e != nil {
			t.Fatalf("a refused query was stored: %+v, %v", e, err)
		}
		if _, err := db.EntryByID(ctx, "q_none"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("EntryByID of nothing: %v", err)
		}
	})
}

// TestProtocol1: linear queries' per-cell losses: a charge costs what it
// adds to the largest loss, as Price says beforehand, and LossRange reads
// the losses' range back.
func TestProtocol1(t *testing.T) {
	eachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		alice := seed(t, db.DB, "alice", 100)
		const cells = 5
		for i, step := range []struct {
			cost   Cost
			charge int64
			lo, hi int64
		}{
			{Cost{Cells: []CellCharge{{0, 5}, {1, 3}}}, 5, 0, 5},
			{Cost{Cells: []CellCharge{{1, 2}}}, 0, 0, 5},                     // cell 1 reaches 5: the largest is unchanged
			{Cost{Cells: []CellCharge{{2, 7}}}, 2, 0, 7},                     // cell 2 goes past it
			{Cost{Uniform: 3, Cells: []CellCharge{{3, 1}, {4, 1}}}, 3, 1, 7}, // a uniform part adds on
		} {
			b, err := db.Budget(ctx, alice, "d", 100)
			if err != nil {
				t.Fatal(err)
			}
			price, err := db.Price(ctx, alice, "d", b, step.cost, cells)
			if err != nil || price != step.charge {
				t.Fatalf("step %d: price %d, %v; want %d", i, price, err, step.charge)
			}
			e, after, _, err := db.Charge(answer(alice, fmt.Sprint("h", i), ""), step.cost, cells, 100)
			if err != nil || e.Charge != step.charge || after.Spent != b.Spent+step.charge {
				t.Fatalf("step %d: charged %+v, %v; want %d", i, e, err, step.charge)
			}
			// Both from the cache and from the stored runs.
			for _, d := range []*DB{db.DB, db.reopen(t)} {
				lo, hi, err := d.LossRange(ctx, alice, "d", after.LedgerBytes, cells)
				if err != nil || lo != step.lo || hi != step.hi {
					t.Fatalf("step %d: range [%d, %d] %v, want [%d, %d]", i, lo, hi, err, step.lo, step.hi)
				}
			}
		}
	})
}

// TestConcurrentCharges: charges racing on one budget are committed as if
// one after another: exactly as many fit as the budget allows, the spent
// never passes the total, and every spent-after value is taken once.
func TestConcurrentCharges(t *testing.T) {
	eachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		const total, n = 40, 64
		alice := seed(t, db.DB, "alice", total)
		bob := seed(t, db.DB, "bob", total)
		var wg sync.WaitGroup
		errs := make([]error, 2*n)
		for i := range 2 * n {
			wg.Go(func() {
				who := alice
				if i%2 == 1 {
					who = bob
				}
				_, b, repeat, err := db.Charge(answer(who, fmt.Sprint("h", i/2), ""), Cost{Uniform: 1, Unit: "epsilon"}, 1, total)
				switch {
				case err == nil && (repeat || b.Spent > total):
					err = fmt.Errorf("repeat %v, budget %+v", repeat, b)
				case err != nil && !errors.As(err, new(*BudgetError)):
					err = fmt.Errorf("not a refusal: %w", err)
				case err != nil:
					err = nil
				}
				errs[i] = err
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		for _, who := range []string{alice, bob} {
			es, err := db.Entries(ctx, who, "d", 0, 2*n)
			if err != nil {
				t.Fatal(err)
			}
			var after []int64
			for _, e := range es {
				after = append(after, e.SpentAfter)
			}
			slices.Sort(after)
			want := make([]int64, total)
			for i := range want {
				want[i] = int64(i + 1)
			}
			b, err := db.Budget(ctx, who, "d", total)
			if err != nil || b.Spent != total || !slices.Equal(after, want) {
				t.Fatalf("%s: budget %+v %v, spent-after values %v", who, b, err, after)
			}
		}
	})
}

// TestClosed: a charge after Close fails, uncharged, instead of waiting.
func TestClosed(t *testing.T) {
	db, err := OpenSQLite(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	alice := seed(t, db, "alice", 10)
	db.Close()
	if _, _, _, err := db.Charge(answer(alice, "h", ""), Cost{Uniform: 1}, 1, 10); !errors.Is(err, ErrClosed) {
		t.Fatalf("charge after close: %v", err)
	}
}
