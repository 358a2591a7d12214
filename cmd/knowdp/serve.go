package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/knowdp/knowdp/server"
	"github.com/knowdp/knowdp/server/tlsconfig"
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
if the file does not exist; refused unless only its owner may read and write
it) or, without that flag, is generated at the first
start and shown once: written to --admin-key-out F (created, mode 0600) if
given, else to the controlling terminal (/dev/tty), never to the log on
stderr; with neither, the server refuses to start rather than keep a key
nobody saw. Admin keys stay valid until revoked (GET /admin/v1/admin-keys,
DELETE /admin/v1/keys/ID); a revoked key stays revoked.

A curator's CSV file or SQLite database is read by the server on its own
machine, and only inside a directory given with --source-dir (repeatable;
symbolic links are resolved). Without --source-dir, file sources are refused.

Keys and answers must not cross a network in the clear: with --tls-cert and
--tls-key the server speaks only HTTPS (TLS 1.2 or 1.3, forward-secret AEAD
suites; renewed certificate files are picked up without a restart). Without
them it listens on a loopback address only, unless --insecure-behind-proxy
says that a reverse proxy on the way terminates TLS. A PostgreSQL database
(--db, or a dataset's source) on another host must be reached with TLS:
sslmode=verify-full (or require) in its DSN.

Each API key may make --rate requests per second (bursts of --burst); each
analyst may have --analyst-in-flight queries in the server, of which
--analyst-compute are computed at once. The operator's console is at /admin/
and the API is described at /openapi.json; docs/server.md has the details.
`

func runServe(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "serve", "serve [--data-dir DIR | --db postgres://...] [--addr HOST:PORT] [--tls-cert F --tls-key F | --insecure-behind-proxy] [--source-dir DIR]... [--admin-key-file F | --admin-key-out F] [--rate R] [--burst B]")
	usage := fs.Usage
	fs.Usage = func() { usage(); fmt.Fprint(e.stderr, serveHelp) }
	dataDir := fs.String("data-dir", "knowdp-data", "directory of the embedded SQLite database (used unless --db is given)")
	db := fs.String("db", "", "PostgreSQL DSN (postgres://user@host:port/db) for a shared deployment, instead of --data-dir")
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on; port 0 picks a free port; an address other than loopback needs TLS (or --insecure-behind-proxy)")
	tlsCert := fs.String("tls-cert", "", "PEM file of the server's certificate chain: serve HTTPS (with --tls-key)")
	tlsKey := fs.String("tls-key", "", "PEM file of the certificate's private key (with --tls-cert)")
	behindProxy := fs.Bool("insecure-behind-proxy", false, "serve plain HTTP on an address other than loopback: only behind a reverse proxy that terminates TLS")
	keyFile := fs.String("admin-key-file", "", "file holding the curator's admin key; created with a new key if missing")
	rateLimit := fs.Float64("rate", 20, "requests per second allowed per API key (0: no limit)")
	burst := fs.Int("burst", 40, "burst size of the per-key rate limit")
	cellLimit := fs.Int("cell-limit", server.DefaultCellLimit, "refuse datasets whose base cuboid has more cells than this")
	keyOut := fs.String("admin-key-out", "", "file (created, mode 0600) to write a newly generated admin key to, instead of the terminal")
	var sourceDirs dirList
	fs.Var(&sourceDirs, "source-dir", "directory whose CSV and SQLite files curators may register (repeatable); none: file sources are refused")
	compute := fs.Int("analyst-compute", server.DefaultAnalystCompute, "queries of one analyst computed at once (others wait)")
	inFlight := fs.Int("analyst-in-flight", server.DefaultAnalystInFlight, "queries of one analyst in the server at once (beyond: 429)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *rateLimit < 0 || *burst < 1 || *cellLimit < 1 || *compute < 1 || *inFlight < 1 {
		return usageErr(fs, "--rate must be >= 0; --burst, --cell-limit, --analyst-compute and --analyst-in-flight >= 1")
	}
	if *keyFile != "" && *keyOut != "" {
		return usageErr(fs, "give --admin-key-file or --admin-key-out, not both")
	}
	for _, d := range sourceDirs {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			return usageErr(fs, "--source-dir %s: not a directory", d)
		}
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		return usageErr(fs, "give --tls-cert and --tls-key together")
	}
	if *behindProxy && *tlsCert != "" {
		return usageErr(fs, "--insecure-behind-proxy is for a server without TLS; give it or --tls-cert and --tls-key, not both")
	}
	if *db != "" {
		if err := tlsconfig.CheckPostgres(*db); err != nil {
			return usageErr(fs, "--db: %v", err)
		}
	}
	var tlsConfig *tls.Config
	if *tlsCert != "" {
		var err error
		if tlsConfig, err = tlsconfig.Load(*tlsCert, *tlsKey, e.log); err != nil {
			return usageErr(fs, "--tls-cert, --tls-key: %v", err)
		}
	}
	// Listen first: a refused address leaves nothing behind (no store, no
	// admin key).
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	// Decided on the address actually bound (a name resolved, ":8080" being
	// every interface), before anything is served on it.
	loopback := isLoopback(ln.Addr())
	switch {
	case tlsConfig == nil && !loopback && !*behindProxy:
		return usageErr(fs, "--addr %s: %s is not a loopback address, and without TLS the API keys and the answers would cross the network in the clear; "+
			"give --tls-cert and --tls-key, or, behind a reverse proxy that terminates TLS, --insecure-behind-proxy", *addr, ln.Addr())
	case tlsConfig == nil && !loopback:
		e.log.Warn("serving plain HTTP on a non-loopback address (--insecure-behind-proxy): every client must reach it through a proxy that terminates TLS", "addr", ln.Addr().String())
	}
	cfg := server.Config{RateLimit: *rateLimit, RateBurst: *burst, CellLimit: *cellLimit, Log: e.log,
		SourceDirs: sourceDirs, AnalystCompute: *compute, AnalystInFlight: *inFlight}
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
	cfg.AdminKeyOut = func(key string) error { return showAdminKey(*keyOut, key) }
	srv, _, err := server.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	hs := srv.HTTPServer()
	scheme := "http"
	if tlsConfig != nil {
		hs.TLSConfig = tlsConfig
		scheme = "https"
	}
	fmt.Fprintf(e.stdout, "listening on %s://%s\n", scheme, ln.Addr())
	fmt.Fprintf(e.stdout, "operator's console: %s://%s/admin/  API: %s://%s/openapi.json\n", scheme, ln.Addr(), scheme, ln.Addr())
	errc := make(chan error, 1)
	go func() {
		if tlsConfig != nil {
			errc <- hs.ServeTLS(ln, "", "") // the certificate comes from tlsconfig.Load
			return
		}
		errc <- hs.Serve(ln)
	}()
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

// isLoopback reports whether a listener's address is a loopback address
// (127.0.0.0/8, ::1); the unspecified address (every interface) is not.
func isLoopback(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	return ok && t.IP.IsLoopback()
}

// dirList is a repeatable flag of directories.
type dirList []string

func (d *dirList) String() string { return strings.Join(*d, ",") }

func (d *dirList) Set(v string) error {
	if v == "" {
		return errors.New("empty directory")
	}
	*d = append(*d, v)
	return nil
}

// showAdminKey shows a newly generated admin key once: in the file out
// (created, mode 0600, never overwritten) if given, else on the controlling
// terminal. The request log goes to stderr, which is often a file or a
// journal: the key never goes there. With neither, it fails, and the server
// does not store the key.
func showAdminKey(out, key string) error {
	const note = "knowdp admin key (shown once; the server keeps only its hash):\n"
	if out != "" {
		f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return fmt.Errorf("--admin-key-out: %w", err)
		}
		if _, err := f.WriteString(key + "\n"); err != nil {
			f.Close()
			return fmt.Errorf("--admin-key-out: %w", err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return fmt.Errorf("--admin-key-out: %w", err)
		}
		return f.Close()
	}
	tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0)
	if err != nil {
		return errors.New("a new admin key was generated but there is no terminal to show it on (the log on stderr never gets it): " +
			"start with --admin-key-out FILE or --admin-key-file FILE")
	}
	defer tty.Close()
	_, err = fmt.Fprintf(tty, "%s%s\n", note, key)
	return err
}

// adminKeyFromFile reads the admin key from path, or writes a new one there
// (mode 0600) if the file does not exist. A file that users other than its
// owner may read or write is refused: the key would not be secret.
func adminKeyFromFile(path string) (string, error) {
	f, err := os.Open(path)
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
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("--admin-key-file: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("--admin-key-file: %s has mode %04o: users other than its owner may read or change the admin key; "+
			"restrict it (chmod 600 %s) and, if others may have read it, revoke the key (DELETE /admin/v1/keys/ID) and delete the file to have a new one generated", path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, 1<<10))
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
