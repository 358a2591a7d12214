// Package pgtest gives tests a PostgreSQL schema of their own in the
// database that scripts/test.sh starts.
package pgtest

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// Env names the environment variable with the PostgreSQL DSN the tests use;
// scripts/test.sh starts a throwaway cluster and sets it.
const Env = "KNOWDP_TEST_POSTGRES"

// Schema creates a fresh schema in the database named by $KNOWDP_TEST_POSTGRES,
// drops it when the test ends, and returns a DSN whose search_path is that
// schema. Without the variable the test fails, saying how to get it: the
// PostgreSQL half of a suite is never skipped silently.
func Schema(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(Env)
	if dsn == "" {
		t.Fatalf("$%s is not set: run ./scripts/test.sh, which installs and starts PostgreSQL for these tests", Env)
	}
	var b [6]byte
	rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE SCHEMA " + schema); err != nil {
		db.Close()
		t.Fatalf("postgres at $%s: %v (run ./scripts/test.sh)", Env, err)
	}
	t.Cleanup(func() {
		db.Exec("DROP SCHEMA " + schema + " CASCADE")
		db.Close()
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
