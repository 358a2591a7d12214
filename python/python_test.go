// Package python holds the Go test that runs the tests of the Python package
// in this directory (knowdp/, tests/), so that go test ./... runs them.
package python

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/knowdp/knowdp/internal/pgtest"
)

// debianPython is the interpreter the package is tested with: Debian's, whose
// python3-pandas is the pandas the DataFrame path is checked against.
const debianPython = "/usr/bin/python3"

// python3 returns Debian's python3, else python3 on PATH; without either the
// test skips, or fails under $KNOWDP_TEST_REQUIRE_ALL=1.
func python3(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(debianPython); err == nil {
		return debianPython
	}
	if p, err := exec.LookPath("python3"); err == nil {
		return p
	}
	pgtest.Missing(t, "python3 is not installed (Debian's python3 package)")
	return ""
}

// buildKnowdp builds the knowdp command into a temporary directory: the
// Python tests run the real binary, built from this checkout.
func buildKnowdp(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "knowdp")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", bin, "github.com/knowdp/knowdp/cmd/knowdp")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/knowdp: %v\n%s", err, out)
	}
	return bin
}

// skipped matches unittest's summary of a run that skipped tests.
var skipped = regexp.MustCompile(`skipped=\d+`)

// TestPythonPackage runs python/tests with python3 -m unittest, twice: with
// pandas as installed, and as if it were not (KNOWDP_TEST_NO_PANDAS=1), so
// that both the DataFrame and the plain-rows paths are checked. Under -short
// only the tests that need no knowdp binary and no server run.
func TestPythonPackage(t *testing.T) {
	py := python3(t)
	env := append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONPATH=.")
	if testing.Short() {
		env = append(env, "KNOWDP_TEST_SHORT=1")
	} else {
		env = append(env, "KNOWDP_TEST_BINARY="+buildKnowdp(t))
	}
	for _, pass := range []struct {
		name string
		env  []string
	}{
		{"pandas", []string{"KNOWDP_TEST_NO_PANDAS=0"}},
		{"without-pandas", []string{"KNOWDP_TEST_NO_PANDAS=1"}},
	} {
		t.Run(pass.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, py, "-m", "unittest", "discover", "-s", "tests", "-t", ".", "-v")
			cmd.Env = append(append([]string(nil), env...), pass.env...)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			switch {
			case errors.As(err, &exit):
				t.Fatalf("%s -m unittest (%s): %v\n%s", py, pass.name, err, out)
			case err != nil:
				t.Fatalf("%s -m unittest (%s): %v", py, pass.name, err)
			}
			summary := string(out)
			if i := strings.LastIndex(summary, "\nRan "); i >= 0 {
				summary = summary[i+1:]
			}
			t.Logf("%s", strings.TrimSpace(summary))
			if pgtest.RequireAll() && !testing.Short() && skipped.MatchString(summary) {
				t.Fatalf("Python tests were skipped and $%s=1 forbids it:\n%s", pgtest.RequireAllEnv, out)
			}
		})
	}
}
