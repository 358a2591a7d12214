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

	"github.com/knowdp/knowdp/internal/cli"
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
		schemaCommand(),
		releaseCommand(),
		estimateCommand(),
		releaseGraphCommand(),
		reproCommand(),
		queryCommand(),
		dxCommand(),
		refineCommand(),
		reportCommand(),
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
// 0 on success (and for --help), 2 for a usage error (a missing, unknown or
// invalid flag or argument), 1 for any other failure.
func run(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 {
		usage(e.stderr)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) == 1 {
			usage(e.stdout)
			return 0
		}
		// "knowdp help CMD [SUB]" is "knowdp CMD [SUB] --help".
		return run(ctx, e, append(append([]string(nil), args[1:]...), "--help"))
	case "version", "-version", "--version":
		cli.PrintVersion(e.stdout, "knowdp")
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		ce := e
		if cli.HelpRequested(args[1:]) {
			// Help is what the user asked for: it goes to stdout, whoever
			// prints it.
			cp := *e
			cp.stderr = e.stdout
			ce = &cp
		}
		err := c.run(ctx, ce, args[1:])
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			return 2
		default:
			name := c.name
			var se *subcommandError
			if errors.As(err, &se) {
				name = se.name
			}
			fmt.Fprintf(e.stderr, "knowdp %s: %s\n", name, errorMessage(err, c.name, name))
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
		fmt.Fprintf(w, "  %-14s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'knowdp help <command>' (or 'knowdp <command> --help') for a command's flags,")
	fmt.Fprintln(w, "'knowdp --version' for the version.")
}

// errUsage marks an error already reported to the user; run exits with
// status 2 without printing it again.
var errUsage = errors.New("usage error")

// subcommandError is the failure of a subcommand ("refine rho", "dx
// laplace"): run reports it under the subcommand's name, as the
// subcommand's usage errors are.
type subcommandError struct {
	name string
	err  error
}

func (e *subcommandError) Error() string { return e.err.Error() }
func (e *subcommandError) Unwrap() error { return e.err }

// inSubcommand attributes err, the result of the subcommand name, to it.
// Help and usage errors (already printed) pass through.
func inSubcommand(name string, err error) error {
	if err == nil || errors.Is(err, errUsage) || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return &subcommandError{name, err}
}

// errorMessage is err's text without a leading "CMD: " that repeats the
// command run names it by (the library's packages prefix their errors
// with the operation, "release: ..."): "knowdp release: sensitivity 1 is
// below ...", not "knowdp release: release: sensitivity ...".
func errorMessage(err error, names ...string) string {
	msg := err.Error()
	for _, n := range names {
		msg = strings.TrimPrefix(msg, n+": ")
	}
	return msg
}

// badSubcommand reports a missing or unknown subcommand of cmd (args as
// given after cmd; want lists the subcommands) in the one wording every
// command with subcommands uses, and returns errUsage (exit status 2).
func badSubcommand(e *env, cmd string, args []string, want string) error {
	switch {
	case len(args) == 0:
		fmt.Fprintf(e.stderr, "knowdp %s: missing subcommand (want %s)\n", cmd, want)
	case strings.HasPrefix(args[0], "-"):
		fmt.Fprintf(e.stderr, "knowdp %s: missing subcommand before %s (want %s)\n", cmd, args[0], want)
	default:
		fmt.Fprintf(e.stderr, "knowdp %s: unknown subcommand %q (want %s)\n", cmd, args[0], want)
	}
	fmt.Fprintf(e.stderr, "Run 'knowdp help %s' for usage.\n", cmd)
	return errUsage
}

// newFlagSet returns a flag set whose usage (printed by --help) is the
// command's usage line and its flags in the --flag VALUE style, and that
// does not exit the process.
func newFlagSet(e *env, name, usageLine string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: knowdp %s\n\nFlags:\n", usageLine)
		cli.PrintFlags(fs.Output(), fs)
	}
	return fs
}

// parseFlags parses args. --help anywhere prints the usage and returns
// flag.ErrHelp; a parse failure or a stray argument is reported as a usage
// error (see usageErr).
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr(fs, "unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// parse parses args with the flag package's own messages rewritten to the
// --flag style and reported as usage errors.
func parse(fs *flag.FlagSet, args []string) error {
	if cli.HelpRequested(args) {
		fs.Usage()
		return flag.ErrHelp
	}
	full, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.Usage = full
	fs.SetOutput(out)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.Usage()
			return err
		}
		msg := err.Error()
		for _, p := range []string{"flag -", "defined: -", "argument: -"} {
			msg = strings.Replace(msg, p, p+"-", 1)
		}
		return usageErr(fs, "%s", msg)
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
	if err := parse(fs, args); err != nil {
		return "", err
	}
	switch {
	case name == "" && fs.NArg() == 1:
		name = fs.Arg(0)
	case name == "" && fs.NArg() == 0:
		return "", usageErr(fs, "missing argument: what to run")
	case fs.NArg() > 0:
		return "", usageErr(fs, "unexpected argument %q", fs.Arg(0))
	}
	return name, nil
}

// usageErr reports a usage problem (a missing or invalid flag or argument)
// in the one wording every command uses, "knowdp CMD: problem", points to
// the command's help, and returns errUsage (exit status 2).
func usageErr(fs *flag.FlagSet, format string, a ...any) error {
	fmt.Fprintf(fs.Output(), "knowdp %s: %s\nRun 'knowdp help %s' for usage.\n", fs.Name(), fmt.Sprintf(format, a...), fs.Name())
	return errUsage
}

// requireFlags reports the first of the named flags left empty as a usage
// error ("missing required flag --NAME"). Pairs are name, value.
func requireFlags(fs *flag.FlagSet, pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			return usageErr(fs, "missing required flag --%s", pairs[i])
		}
	}
	return nil
}
