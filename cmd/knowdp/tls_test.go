package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCert writes a self-signed certificate for 127.0.0.1 and its key into
// dir and returns the files and a pool that trusts the certificate.
func testCert(t *testing.T, dir string) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "knowdp serve test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return certFile, keyFile, roots
}

// TestServeTLS (issue 33): knowdp serve with --tls-cert and --tls-key speaks
// HTTPS only: a client that trusts the certificate gets answers over TLS
// (on a non-loopback address too), and plain HTTP is not answered.
func TestServeTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped under -short: builds knowdp")
	}
	bin := buildKnowdp(t)
	certFile, keyFile, roots := testCert(t, t.TempDir())
	keyOut := filepath.Join(t.TempDir(), "admin.key")
	// Every interface: allowed with TLS.
	srv := startServe(t, bin, "--data-dir", filepath.Join(t.TempDir(), "data"), "--addr", "0.0.0.0:0",
		"--tls-cert", certFile, "--tls-key", keyFile, "--admin-key-out", keyOut)
	port := srv.url[strings.LastIndex(srv.url, ":")+1:]
	if !strings.HasPrefix(srv.url, "https://") {
		t.Fatalf("listening on %s, want https", srv.url)
	}
	kb, err := os.ReadFile(keyOut)
	if err != nil {
		t.Fatal(err)
	}
	c := &client{t: t, url: "https://127.0.0.1:" + port, http: &http.Client{Timeout: 15 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}}
	c.must(http.StatusOK, "GET", "/admin/v1/admin-keys", strings.TrimSpace(string(kb)), nil, nil)
	res, err := (&http.Client{Timeout: 15 * time.Second}).Get("http://127.0.0.1:" + port + "/healthz")
	if err == nil {
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP was answered: %s", body)
		}
	}
}

// TestServeListenRefusal (issue 33): without TLS, knowdp serve refuses an
// address other than loopback (exit 2, saying why and what to do) before
// it creates anything, unless --insecure-behind-proxy says a proxy
// terminates TLS, which it then logs; the TLS flags go together, and a
// PostgreSQL store on another host without TLS is refused.
func TestServeListenRefusal(t *testing.T) {
	runServeArgs := func(ctx context.Context, args ...string) (int, string, string, string) {
		var out, errb, logs bytes.Buffer
		e := &env{stdout: &syncWriter{w: &out}, stderr: &errb, log: slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil))}
		code := run(ctx, e, append([]string{"serve"}, args...))
		return code, out.String(), errb.String(), logs.String()
	}
	dir := t.TempDir()
	certFile, keyFile, _ := testCert(t, t.TempDir())
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"every interface", []string{"--addr", "0.0.0.0:0"}, "is not a loopback address"},
		{"every interface, no host", []string{"--addr", ":0"}, "--insecure-behind-proxy"},
		{"cert without key", []string{"--tls-cert", certFile}, "give --tls-cert and --tls-key together"},
		{"key without cert", []string{"--tls-key", keyFile}, "give --tls-cert and --tls-key together"},
		{"TLS and proxy", []string{"--tls-cert", certFile, "--tls-key", keyFile, "--insecure-behind-proxy"}, "not both"},
		{"bad certificate", []string{"--tls-cert", keyFile, "--tls-key", keyFile}, "--tls-cert, --tls-key:"},
		{"remote PostgreSQL", []string{"--db", "postgres://u:secret@db.example.org/knowdp"}, "--db: PostgreSQL host \"db.example.org\" is not on this machine"},
	} {
		data := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
		keyOut := filepath.Join(data + "-key")
		args := append([]string{"--data-dir", data, "--admin-key-out", keyOut}, tc.args...)
		code, _, stderr, _ := runServeArgs(context.Background(), args...)
		if code != 2 || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "secret") {
			t.Errorf("%s: exit %d, %q; want 2 saying %q", tc.name, code, stderr, tc.want)
		}
		for _, left := range []string{data, keyOut} {
			if _, err := os.Stat(left); err == nil {
				t.Errorf("%s: refused, yet %s was created", tc.name, left)
			}
		}
	}

	// Behind a proxy: served, and logged.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, logs bytes.Buffer
	sout, logw := &syncWriter{w: &out}, &syncWriter{w: &logs}
	e := &env{stdout: sout, stderr: io.Discard, log: slog.New(slog.NewTextHandler(logw, nil))}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, e, []string{"serve", "--data-dir", filepath.Join(dir, "proxy"), "--admin-key-out", filepath.Join(dir, "proxy.key"),
			"--addr", "0.0.0.0:0", "--insecure-behind-proxy"})
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(sout.String(), "listening on http://") {
		select {
		case code := <-done:
			t.Fatalf("--insecure-behind-proxy: exit %d before listening: %s", code, logw.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("--insecure-behind-proxy: not listening: %s", logw.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	u := strings.TrimSpace(strings.SplitN(strings.TrimPrefix(sout.String(), "listening on "), "\n", 2)[0])
	port := u[strings.LastIndex(u, ":")+1:]
	res, err := (&http.Client{Timeout: 15 * time.Second}).Get("http://127.0.0.1:" + port + "/healthz")
	if err != nil || res.StatusCode != http.StatusOK {
		t.Errorf("--insecure-behind-proxy: healthz: %v %v", res, err)
	}
	if res != nil {
		res.Body.Close()
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("--insecure-behind-proxy: exit %d", code)
	}
	if !strings.Contains(logw.String(), "insecure-behind-proxy") || !strings.Contains(logw.String(), "level=WARN") {
		t.Errorf("--insecure-behind-proxy is not logged as a warning: %s", logw.String())
	}
}
