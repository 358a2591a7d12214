package tlsconfig

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// writeCert writes a self-signed certificate for 127.0.0.1 and localhost,
// valid from notBefore to notAfter, and its key, to dir/name.crt and
// dir/name.key, and returns their paths and the certificate.
func writeCert(t *testing.T, dir, name string, serial int64, notBefore, notAfter time.Time) (certFile, keyFile string, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "knowdp test"},
		NotBefore:    notBefore, NotAfter: notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, cert
}

// TestTLSServer (issue 33) serves over TLS with a certificate made here, as
// knowdp serve does: a client that trusts it gets answers over TLS 1.2 or
// later (1.3 by default); a client that offers only TLS 1.1, or only CBC suites without
// forward secrecy, is refused at the handshake; a client that does not
// trust the certificate is refused.
func TestTLSServer(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	certFile, keyFile, cert := writeCert(t, dir, "server", 1, now.Add(-time.Hour), now.Add(24*time.Hour))
	cfg, err := Load(certFile, keyFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
		TLSConfig: cfg,
		ErrorLog:  log.New(io.Discard, "", 0), // the refused handshakes
	}
	go hs.ServeTLS(ln, "", "")
	defer hs.Close()
	url := "https://" + ln.Addr().String()

	roots := x509.NewCertPool()
	roots.AddCert(cert)
	client := func(c *tls.Config) *http.Client {
		c.RootCAs = roots
		return &http.Client{Transport: &http.Transport{TLSClientConfig: c}, Timeout: 10 * time.Second}
	}
	for _, tc := range []struct {
		name    string
		cfg     *tls.Config
		version uint16 // 0: refused
	}{
		{"default client", &tls.Config{}, tls.VersionTLS13},
		{"TLS 1.2 client", &tls.Config{MaxVersion: tls.VersionTLS12}, tls.VersionTLS12},
		{"TLS 1.2, ChaCha20 only", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}}, tls.VersionTLS12},
		{"TLS 1.1 only", &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}, 0},
		{"TLS 1.2, CBC only", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA}}, 0},
	} {
		res, err := client(tc.cfg).Get(url + "/")
		if tc.version == 0 {
			if err == nil {
				res.Body.Close()
				t.Errorf("%s: answered (TLS %x), want the handshake refused", tc.name, res.TLS.Version)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || res.TLS == nil || res.TLS.Version != tc.version {
			t.Errorf("%s: status %d, TLS %+v; want 200 over version %x", tc.name, res.StatusCode, res.TLS, tc.version)
		}
	}
	// A client that does not trust the certificate.
	if res, err := (&http.Client{Timeout: 10 * time.Second}).Get(url + "/"); err == nil {
		res.Body.Close()
		t.Errorf("a client without the certificate's authority was answered")
	}
}

// TestTLSCertificateFiles: an expired, not yet valid or mismatched
// certificate is refused at start with an error naming the file; renewed
// files are served after the next check, and renewed files that cannot be
// loaded leave the previous certificate in place, logged.
func TestTLSCertificateFiles(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	expired, expiredKey, _ := writeCert(t, dir, "expired", 1, now.Add(-48*time.Hour), now.Add(-time.Hour))
	future, futureKey, _ := writeCert(t, dir, "future", 2, now.Add(time.Hour), now.Add(48*time.Hour))
	good, goodKey, _ := writeCert(t, dir, "good", 3, now.Add(-time.Hour), now.Add(48*time.Hour))
	for _, tc := range []struct {
		name, cert, key, want string
	}{
		{"expired", expired, expiredKey, "expired.crt expired on"},
		{"not yet valid", future, futureKey, "future.crt is not valid before"},
		{"another key", good, expiredKey, "good.crt with key"},
		{"missing", filepath.Join(dir, "none.crt"), goodKey, "none.crt"},
	} {
		if _, err := Load(tc.cert, tc.key, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}

	// Renewal: the files are replaced; the next check after reloadEvery
	// serves the new certificate.
	var logs syncBuffer
	clock := now
	c := &certFiles{cert: good, key: goodKey, log: slog.New(slog.NewTextHandler(&logs, nil)), now: func() time.Time { return clock }}
	if err := c.load(); err != nil {
		t.Fatal(err)
	}
	serial := func() int64 {
		got, err := c.get(nil)
		if err != nil {
			t.Fatal(err)
		}
		return got.Leaf.SerialNumber.Int64()
	}
	renewDir := t.TempDir()
	_, _, _ = writeCert(t, renewDir, "good", 4, now.Add(-time.Hour), now.Add(96*time.Hour))
	for _, ext := range []string{".crt", ".key"} {
		b, err := os.ReadFile(filepath.Join(renewDir, "good"+ext))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "good"+ext), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got := serial(); got != 3 {
		t.Errorf("before the next check: serial %d, want 3", got)
	}
	clock = clock.Add(reloadEvery)
	if got := serial(); got != 4 {
		t.Errorf("after the check: serial %d, want the renewed 4", got)
	}
	// A broken renewal keeps the certificate served and says so.
	if err := os.WriteFile(good, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(reloadEvery)
	if got := serial(); got != 4 || !strings.Contains(logs.String(), "cannot be loaded") {
		t.Errorf("after a broken renewal: serial %d, log %q", got, logs.String())
	}
}

// TestPostgresTLS (issue 33): a PostgreSQL DSN for another host must ask for
// TLS without a plain-text fallback; a local one need not. Decided from the
// DSN (and the PG* environment) alone.
func TestPostgresTLS(t *testing.T) {
	t.Setenv("PGSSLMODE", "")
	for _, tc := range []struct {
		dsn string
		ok  bool
	}{
		{"postgres://u@db.example.org/x", false}, // sslmode prefer by default: falls back to plain text
		{"postgres://u@db.example.org/x?sslmode=disable", false},
		{"postgres://u@db.example.org/x?sslmode=allow", false},
		{"postgres://u@db.example.org/x?sslmode=prefer", false},
		{"postgres://u:secret@10.0.0.5:5433/x?sslmode=disable", false},
		{"host=db.example.org user=u dbname=x sslmode=disable", false},
		{"postgres://u@127.0.0.1,db.example.org/x?sslmode=disable", false},
		{"postgres://u@db.example.org/x?sslmode=require", true},
		{"postgres://u@db.example.org/x?sslmode=verify-ca", true},
		{"postgres://u@db.example.org/x?sslmode=verify-full", true},
		{"postgres://u@127.0.0.1:5432/x?sslmode=disable", true},
		{"postgres://u@127.9.9.9/x", true},
		{"postgres://u@localhost/x?sslmode=disable", true},
		{"postgres://u@[::1]:5432/x?sslmode=disable", true},
		{"host=/var/run/postgresql user=u dbname=x", true},
	} {
		err := CheckPostgres(tc.dsn)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.dsn, err, tc.ok)
		}
		if err != nil && !tc.ok && (!errors.Is(err, ErrInsecurePostgres) || !strings.Contains(err.Error(), "sslmode=verify-full") || strings.Contains(err.Error(), "secret")) {
			t.Errorf("%s: the refusal should say what to add and never the password: %v", tc.dsn, err)
		}
	}
	t.Setenv("PGSSLMODE", "verify-full")
	if err := CheckPostgres("postgres://u@db.example.org/x"); err != nil {
		t.Errorf("with PGSSLMODE=verify-full: %v", err)
	}
	t.Setenv("PGSSLMODE", "")
}

// syncBuffer is a bytes.Buffer safe for concurrent writes (a log sink).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
