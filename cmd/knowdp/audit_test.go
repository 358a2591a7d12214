package main

import (
	"strings"
	"testing"
)

// TestAuditCommand checks the command: its table, notes and verdicts. The
// audits themselves are package audit's tests (TestCases, with enough
// samples to flag every control); 200 samples keep this one fast.
func TestAuditCommand(t *testing.T) {
	code, stdout, stderr := runCLI(t, "audit", "--samples", "200", "--seed", "1")
	if code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "NOT differentially private") {
		t.Errorf("seeded run not flagged: %s", stderr)
	}
	for _, want := range []string{"MECHANISM", "grid Laplace (noise.NewLaplace)", "exponential mechanism", "cube release, generic sensitivity 4",
		"prior refinement, individual", "d_X MWEM", "VIOLATION (control: expected)", "sampled", "exact", "Clopper-Pearson"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	// Every row of a correct mechanism passes.
	table, _, _ := strings.Cut(stdout, "\n\n")
	for _, line := range strings.Split(table, "\n") {
		if strings.Contains(line, "VIOLATION") && !strings.Contains(line, "control: expected") {
			t.Errorf("unexpected violation: %s", line)
		}
	}
}

func TestAuditCommandErrors(t *testing.T) {
	for _, args := range [][]string{
		{"audit", "--samples", "50"},
		{"audit", "--alpha", "0.7"},
		{"audit", "--eps", "-1"},
	} {
		code, _, stderr := runCLI(t, args...)
		if code != 2 || !strings.HasPrefix(stderr, "knowdp audit: --") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
	if code, _, _ := runCLI(t, "audit", "extra"); code != 2 {
		t.Errorf("extra argument: exit %d, want 2", code)
	}
}
