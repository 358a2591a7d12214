// Package store is knowdp serve's durable state, behind database/sql on
// SQLite (embedded, the default) or PostgreSQL (shared deployments): the
// registered datasets, analysts and their API keys, budgets, the ledger of
// answers, the noisy measurements kept with them and the curator's audit
// trail, in one schema migrated forward at start.
//
// It keeps the ledger's two standards. A spend is never recorded without its
// answer: Charge inserts the answer, its measurements and the budget's new
// state in one transaction, after checking that the charge fits, so either
// all of them are stored or none is. An answer is never released before its
// spend is durable: Charge returns only after that transaction has committed
// (SQLite with synchronous=FULL; PostgreSQL's commit), and the caller writes
// the answer only then. Concurrent charges are committed together, one
// transaction and one fsync per batch, with the checks of a transaction of
// their own (groupcommit.go).
//
// The package is apart from the server because it is where every row of
// that state is read and written, and nothing else is: the server decides
// what a query costs and what an answer is; the store decides nothing about
// privacy and knows no query kind. Budgets and charges are integer counts of
// privacy.EpsilonStep (2^-40) so that sums are exact; the per-cell Protocol 1
// losses of linear queries are kept per budget, run-length encoded.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	_ "modernc.org/sqlite"             // registers the "sqlite" database/sql driver
)

// DB is the server's durable state. Everything dialect specific lives in
// dialect; the SQL itself is written once, with ? placeholders. A DB is safe
// for concurrent use.
type DB struct {
	d dialect
	// w runs every write transaction. On SQLite it holds one connection,
	// so writers queue in Go instead of spinning on SQLITE_BUSY, and each
	// of its transactions is BEGIN IMMEDIATE. On PostgreSQL w and r are
	// the same pool and the ledger locks the analyst's budget row with
	// SELECT ... FOR UPDATE.
	w, r *sql.DB
	// stmts caches prepared statements on r, by query text: parsing SQL
	// is a large part of a small read.
	stmts sync.Map
	// losses caches decoded Protocol 1 losses (see lossCache).
	losses lossCache
	// gc batches the charges of concurrent queries into one transaction.
	gc *groupCommitter
}

// readRow runs a one-row query on the read pool with a cached prepared
// statement. query has ? placeholders.
func (db *DB) readRow(ctx context.Context, query string, args ...any) *sql.Row {
	query = db.d.q(query)
	if v, ok := db.stmts.Load(query); ok {
		return v.(*sql.Stmt).QueryRowContext(ctx, args...)
	}
	st, err := db.r.PrepareContext(ctx, query)
	if err != nil {
		return db.r.QueryRowContext(ctx, query, args...) // reports the error
	}
	if v, loaded := db.stmts.LoadOrStore(query, st); loaded {
		st.Close()
		st = v.(*sql.Stmt)
	}
	return st.QueryRowContext(ctx, args...)
}

// dialect is what differs between SQLite and PostgreSQL.
type dialect struct {
	name string
	// blob and serial are the column types for bytes and for an
	// auto-incrementing primary key.
	blob, serial string
	// forUpdate is appended to the SELECT that reads a budget row inside
	// the charge transaction: a row lock on PostgreSQL; nothing on SQLite,
	// where BEGIN IMMEDIATE already holds the database's write lock.
	forUpdate string
	// numbered placeholders ($1, $2, ...) instead of ?.
	numbered bool
}

var (
	sqliteDialect   = dialect{name: "sqlite", blob: "BLOB", serial: "INTEGER PRIMARY KEY AUTOINCREMENT"}
	postgresDialect = dialect{name: "postgres", blob: "BYTEA", serial: "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", forUpdate: " FOR UPDATE", numbered: true}
)

// q rewrites the ? placeholders of query for the dialect. No query in this
// package has a ? inside a string literal.
func (d dialect) q(query string) string {
	if !d.numbered {
		return query
	}
	var b strings.Builder
	n := 0
	for _, c := range query {
		if c == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// OpenSQLite opens (creating if needed) the database knowdp.db in dir, with
// mode 0600: WAL journal, synchronous=FULL (a commit is on disk before it
// returns), a busy timeout for other processes, foreign keys on. Migrate
// brings its schema up to date.
func OpenSQLite(dir string) (*DB, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	path := filepath.Join(dir, "knowdp.db")
	if err := privateFiles(path); err != nil {
		return nil, err
	}
	common := "_busy_timeout=10000&_foreign_keys=1&_journal_mode=WAL&_synchronous=FULL"
	w, err := sql.Open("sqlite", "file:"+path+"?"+common+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	r, err := sql.Open("sqlite", "file:"+path+"?"+common)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	r.SetMaxOpenConns(8)
	r.SetMaxIdleConns(8)
	return newDB(sqliteDialect, w, r), nil
}

// privateFiles makes the database file exist with mode 0600 before SQLite
// opens it, and tightens an existing database and its -wal and -shm files to
// 0600: they hold the exact counts. SQLite creates the -wal and -shm files
// with the mode of the database file.
func privateFiles(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("data dir: %w", err)
		}
	}
	return nil
}

// OpenPostgres connects to the PostgreSQL database named by dsn (a
// postgres:// URL or key=value string understood by pgx). It does not
// connect yet, and does not check that a remote host is reached with TLS
// (the caller does: tlsconfig.CheckPostgres). Migrate brings its schema up
// to date.
func OpenPostgres(dsn string) (*DB, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(32)
	return newDB(postgresDialect, db, db), nil
}

func newDB(d dialect, w, r *sql.DB) *DB {
	db := &DB{d: d, w: w, r: r}
	db.gc = newGroupCommitter(db)
	return db
}

// Dialect names the database: "sqlite" or "postgres".
func (db *DB) Dialect() string { return db.d.name }

// Ping checks that the database answers.
func (db *DB) Ping(ctx context.Context) error { return db.r.PingContext(ctx) }

// Close fails the charges still waiting to be committed (ErrClosed), waits
// for the batch being committed, and closes the connection pools.
func (db *DB) Close() error {
	db.gc.close()
	db.stmts.Range(func(_, v any) bool {
		v.(*sql.Stmt).Close()
		return true
	})
	err := db.w.Close()
	if db.r != db.w {
		err = errors.Join(err, db.r.Close())
	}
	return err
}

// migrations are applied in order, each once, at start. Never edit one
// that has shipped; append a new one.
var migrations = []string{
	// 1: the initial schema. Budgets and charges are integer counts of
	// privacy.EpsilonStep (2^-40): sums are exact and the CHECK on budgets
	// makes an overspend impossible even for a buggy caller.
	`CREATE TABLE datasets (
		id TEXT PRIMARY KEY,
		name TEXT NOT NULL,
		schema_json TEXT NOT NULL,
		policy_json TEXT NOT NULL,
		source_json TEXT NOT NULL,
		counts {{BLOB}} NOT NULL,
		total_rows BIGINT NOT NULL,
		budget_steps BIGINT NOT NULL CHECK (budget_steps >= 0),
		created_at BIGINT NOT NULL
	);
	CREATE TABLE analysts (
		id TEXT PRIMARY KEY,
		name TEXT NOT NULL UNIQUE,
		created_at BIGINT NOT NULL
	);
	CREATE TABLE api_keys (
		id TEXT PRIMARY KEY,
		analyst_id TEXT REFERENCES analysts(id),
		role TEXT NOT NULL CHECK (role IN ('admin', 'analyst')),
		secret_sha256 {{BLOB}} NOT NULL,
		created_at BIGINT NOT NULL,
		revoked_at BIGINT,
		CHECK ((role = 'admin') = (analyst_id IS NULL))
	);
	CREATE TABLE budgets (
		analyst_id TEXT NOT NULL REFERENCES analysts(id),
		dataset_id TEXT NOT NULL REFERENCES datasets(id),
		total_steps BIGINT NOT NULL,
		spent_steps BIGINT NOT NULL,
		columns {{BLOB}},
		PRIMARY KEY (analyst_id, dataset_id),
		CHECK (spent_steps >= 0 AND spent_steps <= total_steps)
	);
	CREATE TABLE ledger (
		seq {{SERIAL}},
		id TEXT NOT NULL UNIQUE,
		analyst_id TEXT NOT NULL REFERENCES analysts(id),
		dataset_id TEXT NOT NULL REFERENCES datasets(id),
		query_hash TEXT NOT NULL,
		idempotency_key TEXT,
		kind TEXT NOT NULL,
		request_json TEXT NOT NULL,
		answer_json TEXT NOT NULL,
		charge_steps BIGINT NOT NULL CHECK (charge_steps >= 0),
		spent_after_steps BIGINT NOT NULL,
		created_at BIGINT NOT NULL,
		UNIQUE (analyst_id, dataset_id, query_hash),
		UNIQUE (analyst_id, idempotency_key)
	);
	CREATE INDEX ledger_dataset ON ledger (dataset_id, seq);`,
	// 2: the bytes of stored requests and answers per analyst and
	// dataset, bounded by Config.LedgerQuota.
	`ALTER TABLE budgets ADD COLUMN ledger_bytes BIGINT NOT NULL DEFAULT 0`,
	// 3: the per-cell Protocol 1 losses run-length encoded (see
	// encodeRuns): neighbouring cells often carry the same loss, and the
	// row is rewritten by every batch of charges. When set, it replaces
	// columns (which is then NULL).
	`ALTER TABLE budgets ADD COLUMN loss_runs {{BLOB}}`,
	// 4: the noisy measurements of an answer (the server's record, JSON),
	// inserted with its ledger row in the transaction of its charge: a
	// later cuboid they determine is derived from them for the same
	// analyst, free. The index lists an analyst's measurements on a
	// dataset, in ledger order, without reading them.
	`CREATE TABLE measurements (
		ledger_id TEXT PRIMARY KEY REFERENCES ledger(id),
		analyst_id TEXT NOT NULL,
		dataset_id TEXT NOT NULL,
		seq BIGINT NOT NULL,
		record TEXT NOT NULL
	);
	CREATE INDEX measurements_owner ON measurements (analyst_id, dataset_id, seq, ledger_id)`,
	// 5: the operator's side. A dataset may be retired (retired_at set):
	// it answers no new query, and its ledger, budgets and measurements
	// stay. admin_audit records every change an admin key made (and the
	// admin keys registered at start), in the transaction of the change;
	// rows are only ever inserted. The actions before this migration are
	// recorded from the tables that hold them, with an empty actor (not
	// known) and recorded_by set.
	`ALTER TABLE datasets ADD COLUMN retired_at BIGINT;
	CREATE TABLE admin_audit (
		seq {{SERIAL}},
		created_at BIGINT NOT NULL,
		actor TEXT NOT NULL,
		action TEXT NOT NULL,
		analyst_id TEXT,
		dataset_id TEXT,
		key_id TEXT,
		details TEXT NOT NULL
	);
	CREATE INDEX admin_audit_analyst ON admin_audit (analyst_id, dataset_id, seq);
	CREATE INDEX admin_audit_dataset ON admin_audit (dataset_id, seq);
	INSERT INTO admin_audit (created_at, actor, action, analyst_id, dataset_id, key_id, details)
	SELECT t, '', a, an, ds, k, '{"recorded_by":"migration 5, from the stored tables"}' FROM (
		SELECT created_at AS t, 'dataset.registered' AS a, CAST(NULL AS TEXT) AS an, id AS ds, CAST(NULL AS TEXT) AS k FROM datasets
		UNION ALL SELECT created_at, 'analyst.created', id, NULL, NULL FROM analysts
		UNION ALL SELECT created_at, CASE WHEN role = 'admin' THEN 'admin_key.issued' ELSE 'key.issued' END, analyst_id, NULL, id FROM api_keys
		UNION ALL SELECT revoked_at, CASE WHEN role = 'admin' THEN 'admin_key.revoked' ELSE 'key.revoked' END, analyst_id, NULL, id FROM api_keys WHERE revoked_at IS NOT NULL
	) past ORDER BY t, a`,
}

// Migrate applies the migrations that have not been applied yet, all in one
// transaction. On PostgreSQL an advisory lock keeps two servers starting at
// once from racing; on SQLite BEGIN IMMEDIATE does. A database of a newer
// schema than this knowdp's is refused.
func (db *DB) Migrate(ctx context.Context) error { return db.migrateTo(ctx, len(migrations)) }

// migrateTo applies the migrations up to version n (tests make stores of an
// earlier version with it).
func (db *DB) migrateTo(ctx context.Context, n int) error {
	err := db.tx(ctx, func(tx *sql.Tx) error {
		if db.d.name == "postgres" {
			if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7240617)`); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
			return err
		}
		var have int
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
			return err
		}
		if have > len(migrations) {
			return fmt.Errorf("the database has schema version %d, newer than this knowdp (%d): upgrade knowdp", have, len(migrations))
		}
		for i := have; i < n; i++ {
			ddl := strings.NewReplacer("{{BLOB}}", db.d.blob, "{{SERIAL}}", db.d.serial).Replace(migrations[i])
			for _, stmt := range strings.Split(ddl, ";") {
				if strings.TrimSpace(stmt) == "" {
					continue
				}
				if _, err := tx.ExecContext(ctx, stmt); err != nil {
					return fmt.Errorf("migration %d: %w", i+1, err)
				}
			}
			if _, err := tx.ExecContext(ctx, db.d.q(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`), i+1, time.Now().UnixNano()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// tx runs f in a write transaction and commits it if f returns nil.
func (db *DB) tx(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}
