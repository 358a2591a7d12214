package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/knowdp/knowdp/audit"
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
	out := fs.String("out", "attack-out", "output directory (created if missing)")
	quick := fs.Bool("quick", false, "reduced settings that run in seconds (as in CI)")
	var seed seedFlag
	fs.Var(&seed, "seed", seedUsage)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "Usage: knowdp attack [flags] <%s>\n\nAttacks:\n", strings.Join(append(names, "all"), "|"))
		for _, a := range attacks {
			fmt.Fprintf(e.stderr, "  %-10s %s\n", a.Name, a.Summary)
		}
		fmt.Fprintln(e.stderr, "\nFlags:")
		fs.PrintDefaults()
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
		fmt.Fprintf(e.stderr, "unknown attack %q; choose one of %s or all\n", which, strings.Join(names, ", "))
		return errUsage
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	r := seed.rand(e)
	for i, a := range run {
		if i > 0 {
			fmt.Fprintln(e.stdout)
		}
		e.log.Info("attack", "name", a.Name, "out", *out, "quick", *quick)
		rep, err := a.Run(ctx, audit.AttackConfig{Dir: *out, Quick: *quick, Rand: r})
		if err != nil {
			return fmt.Errorf("%s: %w", a.Name, err)
		}
		fmt.Fprintf(e.stdout, "== %s: %s\n\n", a.Name, a.Summary)
		wrap(e.stdout, a.Explanation, 100)
		fmt.Fprintln(e.stdout)
		for _, h := range rep.Headline {
			fmt.Fprintln(e.stdout, h)
		}
		fmt.Fprintf(e.stdout, "wrote %s\n", strings.Join(rep.Files, ", "))
	}
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
