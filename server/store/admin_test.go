package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/knowdp/knowdp/noise"
)

// TestKeys: an issued key authenticates as its holder; a revoked key, a
// wrong secret and text that is not a key are all the one ErrBadKey; the
// admin key of a key file is registered once and refused once revoked.
func TestKeys(t *testing.T) {
	eachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		admin := GenerateKey()
		if shown, err := db.EnsureAdminKey(ctx, admin, nil); err != nil || shown != "" {
			t.Fatalf("admin key from a file: %q, %v", shown, err)
		}
		adminID, _ := KeyID(admin)
		if p, err := db.Authenticate(ctx, admin); err != nil || p != (Principal{KeyID: adminID, Role: RoleAdmin}) {
			t.Fatalf("admin: %+v, %v", p, err)
		}
		a, key, err := db.CreateAnalyst(ctx, adminID, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := db.CreateAnalyst(ctx, adminID, "alice"); !errors.Is(err, ErrExists) {
			t.Fatalf("a second alice: %v", err)
		}
		id, ok := KeyID(key)
		if p, err := db.Authenticate(ctx, key); !ok || err != nil || p != (Principal{KeyID: id, Role: RoleAnalyst, AnalystID: a.ID, Analyst: "alice"}) {
			t.Fatalf("analyst: %+v, %v", p, err)
		}
		other := GenerateKey()
		otherID, _ := KeyID(other)
		wrong := "kdp_" + id + other[len("kdp_")+len(otherID):] // alice's id, another secret
		if err := db.RevokeKey(ctx, adminID, id); err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{key, wrong, other, "kdp_short", "", strings.Repeat("x", 100)} {
			if _, err := db.Authenticate(ctx, bad); err != ErrBadKey {
				t.Errorf("%q: %v, want ErrBadKey", bad, err)
			}
		}
		if err := db.RevokeKey(ctx, adminID, "0000000000000000"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("revoking no key: %v", err)
		}
		if _, _, err := db.IssueKey(ctx, adminID, "a_none"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a key for no analyst: %v", err)
		}
		if err := db.RevokeKey(ctx, adminID, adminID); err != nil {
			t.Fatal(err)
		}
		if _, err := db.EnsureAdminKey(ctx, admin, nil); err == nil || !strings.Contains(err.Error(), "revoked") {
			t.Fatalf("a revoked admin key file: %v", err)
		}
		// No active admin key and no file: one is generated, shown once.
		var out string
		shown, err := db.EnsureAdminKey(ctx, "", func(k string) error { out = k; return nil })
		if err != nil || shown == "" || shown != out {
			t.Fatalf("generated: %q %q, %v", shown, out, err)
		}
		if again, err := db.EnsureAdminKey(ctx, "", nil); err != nil || again != "" {
			t.Fatalf("a second start: %q, %v", again, err)
		}
		ks, err := db.AdminKeys(ctx)
		if err != nil || len(ks) != 2 || ks[0].Revoked == nil || ks[1].Revoked != nil {
			t.Fatalf("admin keys: %+v, %v", ks, err)
		}
		as, err := db.Analysts(ctx)
		if err != nil || len(as) != 1 || len(as[0].Keys) != 1 || as[0].Keys[0].Revoked == nil {
			t.Fatalf("analysts: %+v, %v", as, err)
		}
		want := []string{"admin_key.registered", "analyst.created", "key.revoked", "admin_key.revoked", "admin_key.registered"}
		evs, err := db.AuditEvents(ctx, "", "", 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ev := range slices.Backward(evs) {
			got = append(got, ev.Action)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("audit trail %v, want %v", got, want)
		}
	})
}

// TestChangeBudget: a change is checked against the locked budget row by
// the caller's function, recorded with its totals, and read back as
// spending over time; a refused change changes and records nothing.
func TestChangeBudget(t *testing.T) {
	eachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		alice := seed(t, db.DB, "alice", 10)
		if _, _, _, err := db.Charge(answer(alice, "h", ""), Cost{Uniform: 4}, 1, 10); err != nil {
			t.Fatal(err)
		}
		refused := errors.New("below what was spent")
		floor := func(to int64) func(Budget) (int64, error) {
			return func(b Budget) (int64, error) {
				if to < b.Spent {
					return 0, refused
				}
				return to, nil
			}
		}
		if _, _, err := db.ChangeBudget(ctx, "k", alice, "d", 10, "epsilon", floor(3), ""); err != refused {
			t.Fatalf("a refused change: %v", err)
		}
		b, ev, err := db.ChangeBudget(ctx, "k", alice, "d", 10, "epsilon", floor(20), "top-up")
		if err != nil || b.Total != 20 || b.Spent != 4 || ev.Action != "budget.changed" || ev.Actor != "k" {
			t.Fatalf("a change: %+v %+v, %v", b, ev, err)
		}
		if !strings.Contains(string(ev.Details), `"total_before_steps":10`) || !strings.Contains(string(ev.Details), `"note":"top-up"`) {
			t.Fatalf("details %s", ev.Details)
		}
		if _, _, err := db.ChangeBudget(ctx, "k", "a_none", "d", 10, "epsilon", floor(20), ""); !errors.Is(err, ErrNotFound) {
			t.Fatalf("no such analyst: %v", err)
		}
		events, budgets, err := db.Spending(ctx, alice, "")
		if err != nil || budgets["d"] != (Budget{Total: 20, Spent: 4}) || len(events["d"]) != 2 {
			t.Fatalf("spending: %v %v, %v", events, budgets, err)
		}
		points, truncated := Series(events["d"], budgets["d"], "query", 10)
		if truncated || len(points) != 2 {
			t.Fatalf("series: %+v", points)
		}
		if p := points[0]; p.Queries != 1 || p.ChargedSteps != 4 || p.SpentSteps != 4 || p.TotalSteps != 10 {
			t.Errorf("the answer: %+v", p)
		}
		if p := points[1]; p.BudgetChanges != 1 || p.SpentSteps != 4 || p.TotalSteps != 20 || p.Total != 20*0x1p-40 {
			t.Errorf("the change: %+v", p)
		}
		if points, truncated := Series(events["d"], budgets["d"], "day", 1); truncated || len(points) != 1 || points[0].Queries != 1 || points[0].BudgetChanges != 1 {
			t.Errorf("one day: %+v %v", points, truncated)
		}
		if points, truncated := Series(events["d"], budgets["d"], "query", 1); !truncated || len(points) != 1 || points[0].TotalSteps != 20 {
			t.Errorf("the last point only: %+v %v", points, truncated)
		}
	})
}

// TestRetire: retiring and reinstating a dataset is recorded once each;
// the dataset and its ledger stay.
func TestRetire(t *testing.T) {
	eachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		seed(t, db.DB, "alice", 10)
		for i, retire := range []bool{true, true, false, false} {
			if err := db.SetRetired(ctx, "k", "d", retire, fmt.Sprint("note ", i)); err != nil {
				t.Fatal(err)
			}
			at, err := db.RetiredAt(ctx, "d")
			if err != nil || (at != 0) != retire {
				t.Fatalf("step %d: retired at %d, %v", i, at, err)
			}
		}
		evs, err := db.AuditEvents(ctx, "", "d", 0, 10)
		if err != nil || len(evs) != 3 || evs[0].Action != "dataset.reinstated" || evs[1].Action != "dataset.retired" || string(evs[1].Details) != `{"note":"note 0"}` {
			t.Fatalf("audit of the dataset: %+v, %v", evs, err)
		}
		if err := db.SetRetired(ctx, "k", "none", true, ""); !errors.Is(err, ErrNotFound) {
			t.Fatalf("no such dataset: %v", err)
		}
		if _, err := db.RetiredAt(ctx, "none"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("no such dataset: %v", err)
		}
		if ids, err := db.DatasetIDs(ctx); err != nil || !slices.Equal(ids, []string{"d"}) {
			t.Fatalf("datasets: %v, %v", ids, err)
		}
		if err := db.RegisterDataset(ctx, "k", DatasetRecord{ID: "d", Schema: "{}", Policy: "{}", Source: "{}", Counts: []byte{0}}, nil); err == nil {
			t.Fatal("an id registered twice")
		}
	})
}

// TestMigrations: migrating twice changes nothing; a database of a newer
// schema is refused.
func TestMigrations(t *testing.T) {
	eachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		if err := db.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		db.exec(t, []string{fmt.Sprintf(`INSERT INTO schema_migrations (version, applied_at) VALUES (%d, 0)`, len(migrations)+1)})
		if err := db.Migrate(ctx); err == nil || !strings.Contains(err.Error(), "newer than this knowdp") {
			t.Fatalf("a newer schema: %v", err)
		}
	})
}

// TestAuditMigration: a store made before the audit trail gets one, recorded
// from the tables that hold the earlier actions, in time order and with no
// actor (it is not known).
func TestAuditMigration(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := OpenSQLite(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.migrateTo(ctx, 4); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO analysts (id, name, created_at) VALUES ('a_1', 'alice', 200)`,
		`INSERT INTO api_keys (id, analyst_id, role, secret_sha256, created_at, revoked_at) VALUES ('k1', 'a_1', 'analyst', x'00', 300, 500)`,
		`INSERT INTO api_keys (id, analyst_id, role, secret_sha256, created_at) VALUES ('k0', NULL, 'admin', x'00', 100)`,
		`INSERT INTO datasets (id, name, schema_json, policy_json, source_json, counts, total_rows, budget_steps, created_at) VALUES ('d', 'd', '{}', '{}', '{}', x'', 0, 1, 400)`,
	} {
		if _, err := st.w.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := st.AuditEvents(ctx, "", "", 0, 100)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(evs)
	var got []string
	for _, e := range evs {
		got = append(got, fmt.Sprintf("%d %s %s%s%s %q", e.Created.UnixNano(), e.Action, e.Analyst, e.Dataset, e.Key, e.Actor))
	}
	want := []string{
		`100 admin_key.issued k0 ""`,
		`200 analyst.created a_1 ""`,
		`300 key.issued a_1k1 ""`,
		`400 dataset.registered d ""`,
		`500 key.revoked a_1k1 ""`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("records from before the trail:\n got %q\nwant %q", got, want)
	}
}

// TestStorageErrorsUnavailable: every way a database connection fails is a
// storage failure (which the server answers 503 with Retry-After), and a
// constraint or a bug is not.
func TestStorageErrorsUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"conn closed", fmt.Errorf("group commit of 3 charges: %w", pgconn.ErrConnClosed), true},
		{"unexpected EOF", fmt.Errorf("authenticate: %w", io.ErrUnexpectedEOF), true},
		{"EOF", io.EOF, true},
		{"admin shutdown", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}, true},
		{"crash shutdown", &pgconn.PgError{Code: "57P02"}, true},
		{"starting up", &pgconn.PgError{Code: "57P03"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"too many connections", &pgconn.PgError{Code: "53300"}, true},
		{"serialization", &pgconn.PgError{Code: "40001"}, true},
		{"read only", &pgconn.PgError{Code: "25006"}, true},
		{"conn done", sql.ErrConnDone, true},
		{"broken pipe", &net.OpError{Op: "write", Err: syscall.EPIPE}, true},
		{"sqlite busy", sqliteCodeErr(5), true},
		{"sqlite ioerr", sqliteCodeErr(10 | 3<<8), true},
		{"sqlite full", sqliteCodeErr(13), true},
		{"constraint", &pgconn.PgError{Code: "23505"}, false},
		{"a bug", errors.New("index out of range"), false},
	} {
		if got := Unavailable(tc.err); got != tc.want {
			t.Errorf("%s (%v): unavailable %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// sqliteCodeErr is an error with an SQLite result code, as modernc.org/sqlite
// reports them.
type sqliteCodeErr int

func (e sqliteCodeErr) Error() string { return fmt.Sprintf("sqlite error %d", int(e)) }
func (e sqliteCodeErr) Code() int     { return int(e) }

// TestLossEncodings checks that the run-length encoding of the per-cell
// losses round-trips, refuses corrupt input, that its range is read
// without expanding it, and that budgets stored in the earlier
// one-varint-per-cell form still decode to the same losses.
func TestLossEncodings(t *testing.T) {
	r := noise.NewSeeded(3)
	for _, loss := range [][]int64{{}, {0}, {0, 0, 0}, {5, 5, 7, 0, 0, 1 << 40}, nil} {
		if loss == nil {
			loss = make([]int64, 1000)
			for i := range loss {
				loss[i] = int64(r.Uint64()%3) << 30
				if i > 0 && r.Uint64()%3 > 0 {
					loss[i] = loss[i-1]
				}
			}
		}
		got, err := decodeRuns(encodeRuns(loss), len(loss))
		if err != nil || fmt.Sprint(got) != fmt.Sprint(loss) {
			t.Fatalf("runs round trip of %d losses: %v", len(loss), err)
		}
		lo, hi, err := rangeRuns(encodeRuns(loss), len(loss))
		if err != nil || lo != minOf(loss) || hi != maxOf(loss) {
			t.Fatalf("%d losses: range [%d, %d] %v, want [%d, %d]", len(loss), lo, hi, err, minOf(loss), maxOf(loss))
		}
		var c lossCache
		old, err := c.get("a", "d", 1, len(loss), func() (int64, []byte, []byte, error) { return 1, encodeColumns(loss), nil, nil })
		if err != nil || fmt.Sprint(old.loss) != fmt.Sprint(loss) || old.max != maxOf(loss) {
			t.Fatalf("the earlier encoding of %d losses: %v", len(loss), err)
		}
	}
	for _, bad := range [][]byte{{0, 1}, {3, 1}, {2}, {1, 1, 1, 1, 9}} {
		if _, err := decodeRuns(bad, 2); err == nil {
			t.Errorf("corrupt runs %v accepted", bad)
		}
		// The range reads the runs, not what follows them.
		if _, _, err := rangeRuns(bad, 2); err == nil && len(bad) < 5 {
			t.Errorf("corrupt runs %v: range accepted", bad)
		}
	}
}
