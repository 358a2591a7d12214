package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/knowdp/knowdp/server/tlsconfig"
)

// TestPostgresTLSRefused (issue 33): a PostgreSQL store on another host
// without TLS is refused by Open before any connection is tried, and such a
// source by registration with a 400 that names the field and never the
// password (tlsconfig.CheckPostgres decides).
func TestPostgresTLSRefused(t *testing.T) {
	t.Setenv("PGSSLMODE", "")
	// The store is refused before any connection is tried.
	start := time.Now()
	if _, _, err := Open(context.Background(), Config{Postgres: "postgres://u@db.example.invalid/x?connect_timeout=30"}); !errors.Is(err, tlsconfig.ErrInsecurePostgres) {
		t.Errorf("Open with a remote store without TLS: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the refusal took %v: it must not wait for a connection", d)
	}
	// A source too, with a 400 that names the field.
	s := startServer(t, Config{DataDir: t.TempDir()})
	req := DatasetRequest{ID: "p", Schema: arrestsSchema(t), Source: Source{SQL: &SQLSource{Driver: "postgres", DSN: "postgres://u:secret@db.example.invalid/x", Table: "t"}}, Policy: Policy{EpsilonPerAnalyst: 1}}
	st, raw := s.call("POST", "/admin/v1/datasets", s.admin, req, nil, nil)
	if msg := errMsg(raw); st != http.StatusBadRequest || !strings.HasPrefix(msg, "source.sql.dsn: ") || !strings.Contains(msg, "must use TLS") || strings.Contains(msg, "secret") {
		t.Errorf("a remote source without TLS: %d %s", st, raw)
	}
}
