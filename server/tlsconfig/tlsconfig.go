// Package tlsconfig holds knowdp serve's transport security: the TLS
// configuration it serves (TLS 1.2 or 1.3, forward-secret AEAD suites only,
// from certificate files reloaded when they are renewed) and the check that
// refuses a PostgreSQL connection to another host without TLS. It is apart
// from the server because none of it knows about queries, budgets or the
// ledger, and the command that starts the server checks its flags with it
// before the server exists.
package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// tlsCipherSuites are the TLS 1.2 suites the server offers: ECDHE key
// exchange (forward secrecy) with an AEAD cipher only. TLS 1.3's suites are
// not configurable in crypto/tls and are all of this kind.
var tlsCipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// Load returns the TLS configuration of a server with the certificate
// chain in certFile and its private key in keyFile (PEM): TLS 1.2 or 1.3,
// TLS 1.2 with ECDHE and AEAD suites only. The files are read now, and read
// again when they change (checked at most every ten seconds, at a
// handshake), so that a renewed certificate is served without a restart; a
// renewal that cannot be loaded is logged to log (nil: discarded) and the
// previous certificate is kept. A certificate that has expired or is not
// yet valid is refused.
func Load(certFile, keyFile string, log *slog.Logger) (*tls.Config, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &certFiles{cert: certFile, key: keyFile, log: log, now: time.Now}
	if err := c.load(); err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		CipherSuites:   tlsCipherSuites,
		GetCertificate: c.get,
	}, nil
}

// certFiles serves a certificate from files, reloaded when they change.
type certFiles struct {
	cert, key string
	log       *slog.Logger
	now       func() time.Time

	mu      sync.Mutex
	current *tls.Certificate
	// stamp identifies the files' versions loaded (size and modification
	// time of each); checked is when they were last looked at.
	stamp   string
	checked time.Time
}

// reloadEvery is how often the files are looked at for a change.
const reloadEvery = 10 * time.Second

func (c *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := c.now(); now.Sub(c.checked) >= reloadEvery {
		c.checked = now
		if st, err := c.fileStamp(); err == nil && st != c.stamp {
			if err := c.loadLocked(); err != nil {
				c.log.Error("TLS certificate files changed but cannot be loaded; serving the previous certificate", "err", err)
				c.stamp = st // do not retry until they change again
			} else {
				c.log.Info("TLS certificate reloaded", "cert", c.cert, "not_after", c.current.Leaf.NotAfter)
			}
		}
	}
	return c.current, nil
}

func (c *certFiles) fileStamp() (string, error) {
	var parts []string
	for _, f := range []string{c.cert, c.key} {
		fi, err := os.Stat(f)
		if err != nil {
			return "", err
		}
		parts = append(parts, fmt.Sprint(fi.Size(), fi.ModTime().UnixNano()))
	}
	return strings.Join(parts, "/"), nil
}

func (c *certFiles) load() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checked = c.now()
	return c.loadLocked()
}

func (c *certFiles) loadLocked() error {
	st, err := c.fileStamp()
	if err != nil {
		return fmt.Errorf("TLS certificate: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(c.cert, c.key)
	if err != nil {
		return fmt.Errorf("TLS certificate %s with key %s: %w", c.cert, c.key, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return fmt.Errorf("TLS certificate %s: %w", c.cert, err)
		}
	}
	now := c.now()
	switch {
	case now.After(cert.Leaf.NotAfter):
		return fmt.Errorf("TLS certificate %s expired on %s", c.cert, cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(cert.Leaf.NotBefore):
		return fmt.Errorf("TLS certificate %s is not valid before %s", c.cert, cert.Leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	c.current, c.stamp = &cert, st
	return nil
}

// CheckPostgres refuses a PostgreSQL DSN that would connect to a host
// other than this machine without TLS: the password, the rows and the
// counts would cross the network in the clear, and a host on the way could
// pose as the database. Each host the DSN names (with PG* environment
// variables, as the driver reads them) must be local (a Unix socket,
// localhost or a loopback address) or be reached with sslmode=require,
// verify-ca or verify-full; disable, allow and prefer (the driver's default)
// are refused, since allow and prefer fall back to plain text. It decides
// from the DSN alone, without connecting.
func CheckPostgres(dsn string) error {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("PostgreSQL DSN: %w", err)
	}
	hosts := append([]*pgconn.FallbackConfig{{Host: cfg.Host, Port: cfg.Port, TLSConfig: cfg.TLSConfig}}, cfg.Fallbacks...)
	for _, h := range hosts {
		if localHost(h.Host) || h.TLSConfig != nil {
			continue
		}
		return &insecureDSNError{host: h.Host}
	}
	return nil
}

type insecureDSNError struct{ host string }

func (e *insecureDSNError) Error() string {
	return fmt.Sprintf("PostgreSQL host %q is not on this machine, so the connection must use TLS: add sslmode=verify-full "+
		"(with sslrootcert=FILE for a private certificate authority) or at least sslmode=require to the DSN "+
		"(it has sslmode disable, allow or prefer, or none, which means prefer and falls back to plain text)", e.host)
}

// ErrInsecurePostgres is matched by errors.Is on CheckPostgres's refusal.
var ErrInsecurePostgres = errors.New("PostgreSQL without TLS")

func (e *insecureDSNError) Is(target error) bool { return target == ErrInsecurePostgres }

// localHost reports whether a PostgreSQL host is this machine: a Unix
// socket directory, localhost, or a loopback address. Names are not
// resolved: a name that resolves to this machine needs TLS like any other.
func localHost(host string) bool {
	if strings.HasPrefix(host, "/") || strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
