package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestHeaderOnlyData releases a fact table with a header and no rows, on
// every pipeline (the one-worker pipeline of --integer and --nonneg among
// them, which once found no element to run on and failed with "the
// release's release.json is missing"): each writes what knowdp release
// writes for the same flags and seed.
func TestHeaderOnlyData(t *testing.T) {
	dir, schema, _ := writeInputs(t, facts)
	empty := filepath.Join(dir, "empty.csv")
	if err := os.WriteFile(empty, []byte("town,sex,age\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		out  string
	}{
		{"integer", []string{"--integer", "--exact", "sex", "--cuboid", "sex,age"}, "i.csv"},
		{"nonneg", []string{"--nonneg", "--cuboid", "sex,age"}, "n.csv"},
		{"blocks", []string{"--cuboid", "sex,age"}, "b.csv"},
		{"workload integer", []string{"--integer", "--cuboid", "sex", "--cuboid", "town,age"}, "wi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"release", "--data", empty, "--schema", schema, "--epsilon", "1", "--seed", "3"}, tc.args...)
			bout, kout := filepath.Join(dir, "b-"+tc.out), filepath.Join(dir, "k-"+tc.out)
			if code, stdout, stderr := knowdpBeam(t, append(args, "--out", bout)...); code != 0 {
				t.Fatalf("knowdp-beam: exit %d\n%s\n%s", code, stdout, stderr)
			}
			if code, stdout, stderr := knowdp(t, append(args, "--out", kout)...); code != 0 {
				t.Fatalf("knowdp: exit %d\n%s\n%s", code, stdout, stderr)
			}
			files := []string{""}
			if !strings.HasSuffix(tc.out, ".csv") {
				files = []string{"sex.csv", "age-town.csv", "release.json"}
			}
			for _, f := range files {
				b, k := filepath.Join(bout, f), filepath.Join(kout, f)
				if f == "" {
					b, k = bout, kout
				}
				bb, err1 := os.ReadFile(b)
				kb, err2 := os.ReadFile(k)
				if err1 != nil || err2 != nil || !bytes.Equal(bb, kb) {
					t.Errorf("%s: knowdp-beam wrote\n%s\nknowdp\n%s (%v, %v)", filepath.Base(b), bb, kb, err1, err2)
				}
			}
		})
	}
}

// TestQuietByDefault checks that a data error is reported by its cause
// alone (no Beam log, no pipeline plan before it), and that --verbose
// shows the runner's log.
func TestQuietByDefault(t *testing.T) {
	dir, schema, _ := writeInputs(t, facts)
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte(facts+"Ash,X,18-64\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"release", "--data", bad, "--schema", schema, "--epsilon", "1", "--cuboid", "sex,age"}
	code, stdout, stderr := knowdpBeam(t, append(args, "--out", filepath.Join(dir, "q.csv"))...)
	want := "knowdp-beam release: release pipeline failed: " + bad + `: row 9, column "sex": value "X" is not in the declared domain of "sex" (F, M)` + "\n"
	if code != 1 || stderr != want {
		t.Errorf("exit %d (want 1); stderr (%d bytes)\n%s\nwant only\n%s", code, len(stderr), stderr, want)
	}
	if stdout != "" {
		t.Errorf("stdout %q", stdout)
	}
	// A release that succeeds prints nothing on stderr either.
	code, _, stderr = knowdpBeam(t, "release", "--data", filepath.Join(dir, "facts.csv"), "--schema", schema, "--epsilon", "1", "--out", filepath.Join(dir, "ok.csv"))
	if code != 0 || stderr != "" {
		t.Errorf("a private release: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = knowdpBeam(t, append(args, "--out", filepath.Join(dir, "v.csv"), "--verbose")...)
	if code != 1 || !strings.Contains(stderr, "level=INFO") || !strings.HasSuffix(stderr, want) {
		t.Errorf("--verbose: exit %d, stderr\n%s", code, stderr)
	}
}

// TestPortableRunnerCommand submits the command to a Prism job server
// started as a process of its own, as the README says:
// --runner=universal --endpoint=localhost:PORT, no --environment_type (the
// workers then run in this process, LOOPBACK, which a job server on this
// machine reaches). An endpoint elsewhere without --environment_type is a
// usage error naming the choices, decided before anything is contacted.
func TestPortableRunnerCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts a Prism job server; skipped with -short")
	}
	dir, schema, table := writeInputs(t, facts)
	prism := filepath.Join(dir, "prism")
	if out, err := exec.Command("go", "build", "-o", prism, "github.com/apache/beam/sdks/v2/go/cmd/prism").CombinedOutput(); err != nil {
		t.Fatalf("building the Prism job server: %v\n%s", err, out)
	}
	free := func() int {
		l, err := net.Listen("tcp", "localhost:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port
	}
	port := free()
	srv := exec.Command(prism, "-job_port", strconv.Itoa(port), "-web_port", strconv.Itoa(free()), "-serve_http=false")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Process.Kill()
		srv.Wait()
	})
	endpoint := "localhost:" + strconv.Itoa(port)
	for deadline := time.Now().Add(time.Minute); ; {
		if c, err := net.Dial("tcp", endpoint); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job server did not listen on %s", endpoint)
		}
		time.Sleep(100 * time.Millisecond)
	}
	args := []string{"release", "--data", table, "--schema", schema, "--epsilon", "1", "--seed", "5", "--exact", "sex", "--integer", "--cuboid", "sex,age"}
	code, stdout, stderr := knowdpBeam(t, append(args, "--out", filepath.Join(dir, "u.csv"), "--runner=universal", "--endpoint="+endpoint)...)
	if code != 0 {
		t.Fatalf("--runner=universal --endpoint=%s: exit %d\n%s\n%s", endpoint, code, stdout, stderr)
	}
	if code, _, stderr := knowdp(t, append(args, "--out", filepath.Join(dir, "k.csv"))...); code != 0 {
		t.Fatalf("knowdp: exit %d: %s", code, stderr)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "u.csv"))
	want, _ := os.ReadFile(filepath.Join(dir, "k.csv"))
	if !bytes.Equal(got, want) {
		t.Errorf("the job server's release differs from knowdp release's:\n%s\nwant\n%s", got, want)
	}
	code, _, stderr = knowdpBeam(t, append(args, "--out", filepath.Join(dir, "r.csv"), "--runner=universal", "--endpoint=192.0.2.1:8099")...)
	if code != 2 || !strings.Contains(stderr, "--endpoint 192.0.2.1:8099: give --environment_type: LOOPBACK") {
		t.Errorf("remote endpoint without --environment_type: exit %d: %s", code, stderr)
	}
}

// TestForce checks knowdp release's output rule in knowdp-beam: an output
// that exists (the table, its sidecar, a directory) is refused before
// anything runs, and replaced with --force.
func TestForce(t *testing.T) {
	dir, schema, table := writeInputs(t, facts)
	base := []string{"release", "--data", table, "--schema", schema, "--epsilon", "1", "--seed", "1"}
	for _, tc := range []struct {
		name, out, existing string
		args                []string
	}{
		{"table", "t.csv", "t.csv", []string{"--cuboid", "sex"}},
		{"sidecar", "s.csv", "s.json", []string{"--cuboid", "sex"}},
		{"directory", "d", "d/mine.txt", []string{"--cuboid", "sex", "--cuboid", "age"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mine := filepath.Join(dir, tc.existing)
			os.MkdirAll(filepath.Dir(mine), 0o755)
			if err := os.WriteFile(mine, []byte("mine"), 0o644); err != nil {
				t.Fatal(err)
			}
			args := append(append(base, tc.args...), "--out", filepath.Join(dir, tc.out))
			code, _, stderr := knowdpBeam(t, args...)
			if b, _ := os.ReadFile(mine); code != 2 || !strings.Contains(stderr, "exists; nothing is overwritten: give --force") || string(b) != "mine" {
				t.Fatalf("existing output: exit %d (want 2), file %q: %s", code, b, stderr)
			}
			if code, _, stderr := knowdpBeam(t, append(args, "--force")...); code != 0 {
				t.Fatalf("--force: exit %d: %s", code, stderr)
			}
			if b, err := os.ReadFile(mine); err == nil && string(b) == "mine" {
				t.Fatalf("--force kept %s", mine)
			}
		})
	}
}
