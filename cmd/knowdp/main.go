// Command knowdp releases differentially private statistics that account
// for public knowledge: exact invariants, analysts' constraints and priors,
// and unequal protection across the data universe.
//
// Usage:
//
//	knowdp <command> [flags]
//
// Run "knowdp help" for the list of commands and "knowdp <command> --help"
// for each command's flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// command is one knowdp subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *env, args []string) error
}

// env is what a command may touch besides its flags: its output streams and
// logger. Tests run commands with buffers.
type env struct {
	stdout, stderr io.Writer
	log            *slog.Logger
	// stderrTTY is true when stderr is a terminal: progress bars are drawn
	// only then.
	stderrTTY bool
}

// commands lists the subcommands in the order "knowdp help" shows them.
func commands() []*command {
	return []*command{
		demoCommand(),
		releaseCommand(),
		reproCommand(),
		queryCommand(),
		dxCommand(),
		refineCommand(),
		auditCommand(),
		attackCommand(),
		serveCommand(),
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	e := &env{
		stdout:    os.Stdout,
		stderr:    os.Stderr,
		log:       slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
		stderrTTY: isTerminal(os.Stderr),
	}
	os.Exit(run(ctx, e, os.Args[1:]))
}

// run executes the command named by args[0] and returns the exit code:
// 0 on success, 2 for a usage error, 1 for any other failure.
func run(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(e.stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, e, args[1:])
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			return 2
		default:
			fmt.Fprintf(e.stderr, "knowdp %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(e.stderr, "knowdp: unknown command %q\n\n", args[0])
	usage(e.stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "knowdp: differential privacy that accounts for public knowledge")
	fmt.Fprintln(w, "\nUsage: knowdp <command> [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'knowdp <command> --help' for a command's flags.")
}

// errUsage marks an error already reported to the user together with the
// command's usage; run exits with status 2 without printing it again.
var errUsage = errors.New("usage error")

// newFlagSet returns a flag set that reports errors and --help to stderr
// with the command's usage line, and does not exit the process.
func newFlagSet(e *env, name, usageLine string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "Usage: knowdp %s\n\nFlags:\n", usageLine)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args and converts a parse failure into errUsage (the
// flag package has already printed the problem and the usage).
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	return nil
}

// parseNamedFlags parses "NAME [flags]" or "[flags] NAME": a command whose
// one positional argument names what to run. It returns the name.
func parseNamedFlags(fs *flag.FlagSet, args []string) (string, error) {
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return "", err
		}
		return "", errUsage
	}
	if name == "" && fs.NArg() == 1 {
		name = fs.Arg(0)
	} else if fs.NArg() > 0 || name == "" {
		fs.Usage()
		return "", errUsage
	}
	return name, nil
}
