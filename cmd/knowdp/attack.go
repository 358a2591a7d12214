package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/knowdp/knowdp/audit"
	"github.com/knowdp/knowdp/internal/cli"
	"github.com/knowdp/knowdp/internal/fileio"
)

func attackCommand() *command {
	return &command{
		name:    "attack",
		summary: "run the papers' attacks on naive mechanisms, and on knowdp's (CSV, PNG, SVG)",
		run:     runAttack,
	}
}

func runAttack(ctx context.Context, e *env, args []string) error {
	attacks := audit.Attacks()
	var names []string
	for _, a := range attacks {
		names = append(names, a.Name)
	}
	fs := newFlagSet(e, "attack", "attack [flags] <"+strings.Join(append(names, "all"), "|")+">")
	out := fs.String("out", "attack-out", "output `DIR`, created when the run has finished (an existing one is refused unless --force); a knowdp-run.json there says how the files were made")
	force := fs.Bool("force", false, forceUsage)
	quick := fs.Bool("quick", false, "reduced settings that run in seconds (as in CI)")
	var seed seedFlag
	fs.Var(&seed, "seed", seedUsage)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: knowdp attack [flags] <%s>\n\nAttacks:\n", strings.Join(append(names, "all"), "|"))
		for _, a := range attacks {
			fmt.Fprintf(w, "  %-10s %s\n", a.Name, a.Summary)
		}
		fmt.Fprintln(w, "\nFlags:")
		cli.PrintFlags(fs.Output(), fs)
	}
	which, err := parseNamedFlags(fs, args)
	if err != nil {
		return err
	}
	var run []audit.Attack
	for _, a := range attacks {
		if which == "all" || which == a.Name {
			run = append(run, a)
		}
	}
	if len(run) == 0 {
		return usageErr(fs, "unknown attack %q; choose one of %s or all", which, strings.Join(names, ", "))
	}
	stage, err := stageOutDir(fs, *out, *force)
	if err != nil {
		return err
	}
	defer os.RemoveAll(stage)
	r := seed.rand(e)
	m := runManifest{Command: commandLine("attack", args), Seeded: r.Seeded(),
		Note: "attack demonstrations on bundled or synthetic data: the files are experiment results, not differentially private releases"}
	if seed.set {
		m.Seed = &seed.seed
	}
	if err := writeRunManifest(stage, m); err != nil {
		return err
	}
	var reports []string
	for _, a := range run {
		e.log.Info("attack", "name", a.Name, "out", *out, "quick", *quick)
		rep, err := a.Run(ctx, audit.AttackConfig{Dir: stage, Quick: *quick, Rand: r})
		if err != nil {
			return fmt.Errorf("%s: %w", a.Name, err)
		}
		// The files are in the staging directory until the run ends: they
		// are named where they will be.
		var files []string
		for _, f := range rep.Files {
			if rel, err := filepath.Rel(stage, f); err == nil {
				f = filepath.Join(*out, rel)
			}
			files = append(files, f)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "== %s: %s\n\n", a.Name, a.Summary)
		wrap(&b, a.Explanation, 100)
		fmt.Fprintln(&b)
		for _, h := range rep.Headline {
			fmt.Fprintln(&b, h)
		}
		fmt.Fprintf(&b, "wrote %s\n", strings.Join(files, ", "))
		reports = append(reports, b.String())
	}
	if err := fileio.CommitDir(stage, *out, *force); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	fmt.Fprint(e.stdout, strings.Join(reports, "\n"))
	if r.Seeded() {
		fmt.Fprintln(e.stdout, "\n(seeded run: the noise is reproducible and NOT private)")
	}
	return nil
}

// wrap writes text as lines of at most width characters.
func wrap(w io.Writer, text string, width int) {
	line := 0
	for i, word := range strings.Fields(text) {
		if i > 0 && line+1+len(word) > width {
			fmt.Fprintln(w)
			line = 0
		} else if i > 0 {
			fmt.Fprint(w, " ")
			line++
		}
		fmt.Fprint(w, word)
		line += len(word)
	}
	fmt.Fprintln(w)
}

// runManifest is knowdp-run.json, written into the output directory of the
// commands that write a directory of files (attack, repro): what made them
// and that they are not private.
type runManifest struct {
	// Command is the command line as given, after "knowdp".
	Command string `json:"command"`
	Seeded  bool   `json:"seeded"`
	// Seed is the seed of a seeded run (repro's default included).
	Seed *uint64 `json:"seed,omitempty"`
	// Private is always false: these files are experiments, not releases.
	Private bool   `json:"private"`
	Note    string `json:"note"`
}

// commandLine is the command line as given, what follows "knowdp": name
// and args, each argument quoted for a POSIX shell where it needs it.
func commandLine(name string, args []string) string {
	parts := []string{name}
	for _, a := range args {
		if a == "" || strings.ContainsFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
		}) {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// manifestName is the file name of a runManifest.
const manifestName = "knowdp-run.json"

func writeRunManifest(dir string, m runManifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return fileio.WriteFileAtomic(filepath.Join(dir, manifestName), append(b, '\n'))
}

// stageOutDir checks the output directory of a command that writes a
// directory of files (attack, repro) as every output is checked, and
// returns a staging directory beside it to write them into; CommitDir puts
// it in place when the run has finished, so that an interrupted run leaves
// nothing and a finished one never mixes its files with an older run's.
func stageOutDir(fs *flag.FlagSet, dir string, force bool) (string, error) {
	if err := fileio.CheckOutputs(nil, []fileio.Named{{Flag: "--out", Path: dir, Dir: true}}, force); err != nil {
		return "", usageErr(fs, "%v", err)
	}
	stage, err := fileio.StageDir(dir)
	if err != nil {
		return "", fmt.Errorf("--out: %w", err)
	}
	return stage, nil
}
