package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/knowdp/knowdp/internal/fileio"

	"github.com/knowdp/knowdp/repro"
)

func reproCommand() *command {
	return &command{
		name:    "repro",
		summary: "regenerate the papers' tables and figures (CSV, PNG, SVG)",
		run:     runRepro,
	}
}

func runRepro(ctx context.Context, e *env, args []string) error {
	var names []string
	for _, x := range repro.All() {
		names = append(names, x.Name)
	}
	fs := newFlagSet(e, "repro", "repro [flags] <"+strings.Join(append(names, "all"), "|")+">")
	out := fs.String("out", "repro-out", "output `DIR`, created when the run has finished (an existing one is refused unless --force); a knowdp-run.json there says how the files were made")
	force := fs.Bool("force", false, forceUsage)
	quick := fs.Bool("quick", false, "reduced sample sizes (as in CI)")
	seed := fs.Uint64("seed", 1, "seed of the random generator (repro outputs are always seeded and never private)")
	which, err := parseNamedFlags(fs, args)
	if err != nil {
		return err
	}
	var run []repro.Experiment
	for _, x := range repro.All() {
		if which == "all" || which == x.Name {
			run = append(run, x)
		}
	}
	if len(run) == 0 {
		return usageErr(fs, "unknown experiment %q; choose one of %s or all", which, strings.Join(names, ", "))
	}
	stage, err := stageOutDir(fs, *out, *force)
	if err != nil {
		return err
	}
	defer os.RemoveAll(stage)
	if err := writeRunManifest(stage, runManifest{Command: commandLine("repro", args), Seeded: true, Seed: seed,
		Note: "reproductions of the papers' tables and figures with a seeded generator: not differentially private"}); err != nil {
		return err
	}
	for _, x := range run {
		e.log.Info("repro", "experiment", x.Name, "out", *out, "quick", *quick)
		cfg := repro.Config{Dir: stage, Seed: *seed, Quick: *quick, Log: e.log}
		if err := x.Run(ctx, cfg); err != nil {
			return fmt.Errorf("%s: %w", x.Name, err)
		}
	}
	if err := fileio.CommitDir(stage, *out, *force); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	fmt.Fprintf(e.stdout, "wrote %s (seeded: outputs are reproducible and NOT private)\n", *out)
	return nil
}
