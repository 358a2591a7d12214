package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/knowdp/knowdp/audit"
	"github.com/knowdp/knowdp/privacy"
)

func auditCommand() *command {
	return &command{
		name:    "audit",
		summary: "measure every mechanism's privacy loss: exactly, and a sampled lower bound",
		run:     runAudit,
	}
}

// Sample sizes of knowdp audit: the default, and --quick (as in CI).
const (
	auditSamples      = 1_000_000
	auditQuickSamples = 20_000
)

// auditHelp says what a run costs, measured with the command it names.
const auditHelp = `
The cases run on GOMAXPROCS goroutines (their samples too), each with a
generator split off the run's in a fixed order: a --seed run prints the same
table on any number of cores. TIME is a row's own wall time, shared with
the cases running beside it.

How long it takes, measured with '/usr/bin/time knowdp audit --seed 1' on a
2-core AMD EPYC machine shared with other jobs: the full run (10^6 samples per input) took 13.5 to
14 minutes of wall time in three runs, in which it got 0.5 to 0.7 of one
core, and 7.3 minutes of CPU time in the last (9.2 before the noise tables
were made cheaper to build); on a machine with both cores free, half the
CPU time, about 4 minutes, is the estimate (not measured). Nearly all of it
is the sampled cube release and MWEM rows, which run a whole release, noise
tables included, per output. --quick took 11 to 20 seconds. Issue 30
reported 28 minutes for the full run before the cases ran in parallel.
`

func runAudit(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "audit", "audit [--samples N] [--alpha X] [--eps X] [--quick] [--seed N]")
	samples := fs.Int("samples", auditSamples, "outputs drawn on each of the two inputs by the sampling audit (at least 100)")
	quick := fs.Bool("quick", false, fmt.Sprintf("reduced settings for CI: %d samples (overrides --samples)", auditQuickSamples))
	alpha := fs.Float64("alpha", 0.05, "a sampled lower bound exceeds the true loss with probability at most alpha")
	epsFlag := fs.Float64("eps", 1, "eps the mechanisms are calibrated to")
	var seed seedFlag
	fs.Var(&seed, "seed", seedUsage)
	flagsUsage := fs.Usage
	fs.Usage = func() { flagsUsage(); fmt.Fprint(fs.Output(), auditHelp) }
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *quick {
		*samples = auditQuickSamples
	}
	if *samples < 100 {
		return usageErr(fs, "--samples must be at least 100, got %d", *samples)
	}
	if !(*alpha > 0 && *alpha < 0.5) {
		return usageErr(fs, "--alpha must be in (0, 0.5), got %v", *alpha)
	}
	eps, err := privacy.NewEpsilon(*epsFlag)
	if err != nil {
		return usageErr(fs, "--eps: %v", err)
	}
	cases, err := audit.Cases(ctx, eps)
	if err != nil {
		return err
	}
	r := seed.rand(e)
	cfg := audit.SampleConfig{Samples: *samples, Alpha: *alpha}
	prog := newProgress(e, "audit", int64(len(cases)))
	rows, err := audit.RunAll(ctx, cases, r, cfg, func() { prog.Add(1) })
	prog.Done()
	if err != nil {
		return err
	}
	if err := writeAuditTable(e.stdout, rows); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "\nexact: the largest |ln P(o|x) - ln P(o|x')| over outputs o, from the output distributions.\n"+
		"sampled: a lower confidence bound on eps (Clopper-Pearson, confidence %g) from %d outputs per input;\n"+
		"it exceeds the true loss with probability at most %g, so a VIOLATION is certain at that level.\n", 1-*alpha, *samples, *alpha)
	var broken, missed int
	for _, rw := range rows {
		switch {
		case !rw.Control && rw.Verdict == audit.Violation:
			broken++
		case rw.Control && rw.Verdict != audit.Violation:
			missed++
		}
	}
	if missed > 0 {
		fmt.Fprintf(e.stderr, "note: %d control row(s) not flagged: too few samples to detect that breakage\n", missed)
	}
	if broken > 0 {
		return fmt.Errorf("%d audit row(s) found a mechanism exceeding its claimed eps (or rho)", broken)
	}
	return nil
}

func writeAuditTable(w io.Writer, rows []audit.Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	// Gaussian (zCDP) rows claim and measure rho, the others eps.
	fmt.Fprintln(tw, "MECHANISM\tNEIGHBOURS\tMETHOD\tCLAIMED EPS/RHO\tMEASURED\tVERDICT\tSAMPLES\tTIME\tWHERE")
	for _, r := range rows {
		n := "-"
		if r.Samples > 0 {
			n = strconv.Itoa(r.Samples)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.6g\t%.6g\t%s\t%s\t%v\t%s\n", r.Mechanism, r.Neighbours, r.Method,
			r.Claimed, r.Measured, r.VerdictText(), n, r.Elapsed.Round(time.Millisecond), r.Detail)
	}
	return tw.Flush()
}
