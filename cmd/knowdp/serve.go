package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/knowdp/knowdp/server"
)

func serveCommand() *command {
	return &command{
		name:    "serve",
		summary: "run the interactive query server (analysts, budgets, durable ledger)",
		run:     runServe,
	}
}

const serveHelp = `
The server keeps its state (datasets, analysts, hashed API keys, budgets and
the ledger of every answer) in an embedded SQLite database in --data-dir, or
in PostgreSQL with --db. It prints the address it listens on to stdout.

The curator's admin key comes from --admin-key-file (created with a new key
if the file does not exist) or, without that flag, is generated at the first
start and printed once to stderr. The curator's page is at /admin/ and the
API is described at /openapi.json.
`

func runServe(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "serve", "serve [--data-dir DIR | --db postgres://...] [--addr HOST:PORT] [--admin-key-file F] [--rate R] [--burst B]")
	usage := fs.Usage
	fs.Usage = func() { usage(); fmt.Fprint(e.stderr, serveHelp) }
	dataDir := fs.String("data-dir", "knowdp-data", "directory of the embedded SQLite database (used unless --db is given)")
	db := fs.String("db", "", "PostgreSQL DSN (postgres://user@host:port/db) for a shared deployment, instead of --data-dir")
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on; port 0 picks a free port")
	keyFile := fs.String("admin-key-file", "", "file holding the curator's admin key; created with a new key if missing")
	rateLimit := fs.Float64("rate", 20, "requests per second allowed per API key (0: no limit)")
	burst := fs.Int("burst", 40, "burst size of the per-key rate limit")
	cellLimit := fs.Int("cell-limit", server.DefaultCellLimit, "refuse datasets whose base cuboid has more cells than this")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *rateLimit < 0 || *burst < 1 || *cellLimit < 1 {
		return usageErr(fs, "--rate must be >= 0, --burst and --cell-limit >= 1")
	}
	cfg := server.Config{RateLimit: *rateLimit, RateBurst: *burst, CellLimit: *cellLimit, Log: e.log}
	if *db != "" {
		cfg.Postgres = *db
	} else {
		cfg.DataDir = *dataDir
	}
	if *keyFile != "" {
		key, err := adminKeyFromFile(*keyFile)
		if err != nil {
			return err
		}
		cfg.AdminKey = key
	}
	srv, shown, err := server.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	if shown != "" {
		fmt.Fprintf(e.stderr, "admin key (shown once; the server keeps only its hash):\n%s\n", shown)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	hs := srv.HTTPServer()
	fmt.Fprintf(e.stdout, "listening on http://%s\n", ln.Addr())
	fmt.Fprintf(e.stdout, "curator page: http://%s/admin/  API: http://%s/openapi.json\n", ln.Addr(), ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Requests in flight finish (their charges are committed or rolled
	// back as a whole either way).
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// adminKeyFromFile reads the admin key from path, or writes a new one there
// (mode 0600) if the file does not exist.
func adminKeyFromFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key := server.GenerateKey()
		if err := writeSecret(path, key+"\n"); err != nil {
			return "", fmt.Errorf("--admin-key-file: %w", err)
		}
		return key, nil
	}
	if err != nil {
		return "", fmt.Errorf("--admin-key-file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// writeSecret writes data to path atomically, readable by its owner only
// (fileio.WriteFileAtomic makes files world-readable).
func writeSecret(path, data string) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*") // mode 0600
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.WriteString(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
