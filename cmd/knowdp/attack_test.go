package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAttackCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "attack-out")
	code, stdout, stderr := runCLI(t, "attack", "km", "--quick", "--seed", "1", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	for _, want := range []string{"== km", "Kifer and Machanavajjhala", "reconstructed", "NOT private"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, manifestName)); err != nil || !strings.Contains(string(b), `"seeded": true`) || !strings.Contains(string(b), `"private": false`) {
		t.Errorf("%s: %s %v", manifestName, b, err)
	}
	for _, name := range []string{"km.csv", "km.png", "km.svg"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	if !strings.Contains(stdout, "wrote "+filepath.Join(dir, "km.csv")) {
		t.Errorf("the files are not named where they are:\n%s", stdout)
	}
	// The directory exists now: a second run is refused before it starts,
	// unless --force, which replaces it whole (km's files are gone).
	if code, _, stderr := runCLI(t, "attack", "--quick", "--seed", "2", "--out", dir, "mironov"); code != 2 || !strings.Contains(stderr, "--out "+dir+": the directory exists") {
		t.Errorf("existing --out: exit %d (want 2)\n%s", code, stderr)
	}
	// The name may follow the flags.
	if code, stdout, stderr := runCLI(t, "attack", "--quick", "--seed", "2", "--out", dir, "--force", "mironov"); code != 0 || !strings.Contains(stdout, "== mironov") {
		t.Errorf("mironov: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "km.csv")); !os.IsNotExist(err) {
		t.Errorf("--force kept the old run's km.csv: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Dir(dir))
	if len(entries) != 1 {
		t.Errorf("left beside the output: %v", entries)
	}
}

func TestAttackCommandErrors(t *testing.T) {
	for _, args := range [][]string{{"attack"}, {"attack", "nope"}, {"attack", "km", "yww"}} {
		if code, _, _ := runCLI(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	code, stdout, _ := runCLI(t, "attack", "--help")
	if code != 0 || !strings.Contains(stdout, "averaging") || !strings.Contains(stdout, "--out DIR") {
		t.Errorf("--help: exit %d, %s", code, stdout)
	}
	if code, _, stderr := runCLI(t, "attack", "km", "--out", "-"); code != 2 || !strings.Contains(stderr, "standard output is not supported") {
		t.Errorf("--out -: exit %d, %s", code, stderr)
	}
}
