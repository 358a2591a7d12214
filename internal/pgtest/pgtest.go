// Package pgtest gives tests a PostgreSQL schema of their own in the
// database that scripts/test.sh starts, and decides what a test does when an
// optional dependency (PostgreSQL, Chromium) is missing.
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

// RequireAllEnv names the environment variable that, set to 1, turns every
// skip for a missing dependency into a failure. scripts/test.sh sets it, so
// CI cannot pass while silently skipping the PostgreSQL or Chromium half.
const RequireAllEnv = "KNOWDP_TEST_REQUIRE_ALL"

// RequireAll reports whether $KNOWDP_TEST_REQUIRE_ALL is 1.
func RequireAll() bool { return os.Getenv(RequireAllEnv) == "1" }

// Missing ends the test because a dependency is unavailable: it skips with
// why, or fails when $KNOWDP_TEST_REQUIRE_ALL=1.
func Missing(t testing.TB, why string) {
	t.Helper()
	if RequireAll() {
		t.Fatalf("%s, and $%s=1 forbids skipping: run ./scripts/test.sh, which installs and starts what these tests need", why, RequireAllEnv)
	}
	t.Skipf("skipped: %s (./scripts/test.sh runs it; $%s=1 makes this a failure)", why, RequireAllEnv)
}

// DSN returns $KNOWDP_TEST_POSTGRES, or skips the test (fails it under
// $KNOWDP_TEST_REQUIRE_ALL=1) when it is unset.
func DSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(Env)
	if dsn == "" {
		Missing(t, "$"+Env+" is not set (no PostgreSQL)")
	}
	return dsn
}

// Schema creates a fresh schema in the database named by $KNOWDP_TEST_POSTGRES,
// drops it when the test ends, and returns a DSN whose search_path is that
// schema. Without the variable the test is skipped, or fails under
// $KNOWDP_TEST_REQUIRE_ALL=1 (see DSN).
func Schema(t testing.TB) string {
	t.Helper()
	dsn := DSN(t)
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
