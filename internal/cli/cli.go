// Package cli holds what knowdp's commands share about their command
// lines, so that knowdp and knowdp-beam print help and versions alike.
package cli

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
)

// HelpRequested reports whether args ask for help: -h, -help or --help
// before any "--". (A flag value spelt --help counts too; that is the
// price of help working wherever it is typed.)
func HelpRequested(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// PrintVersion prints the command's name and module version and the VCS
// revision the binary was built from, as recorded by the Go toolchain.
func PrintVersion(w io.Writer, name string) {
	version, rev, when, dirty := "(unknown)", "not recorded (built without VCS information: go run, or -buildvcs=false)", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		version = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	fmt.Fprintf(w, "%s %s\n", name, version)
	fmt.Fprintf(w, "revision %s", rev)
	if when != "" {
		fmt.Fprintf(w, " (%s)", when)
	}
	if dirty {
		fmt.Fprint(w, " with uncommitted changes")
	}
	fmt.Fprintf(w, "\n%s\n", runtime.Version())
}

// PrintFlags lists the flags of fs as "--name VALUE" lines with their
// usage, in the style of flag.PrintDefaults but with two dashes. The value
// name is the back-quoted word of the usage text if any (flag.UnquoteUsage),
// else N for integers, X for floats, STRING for strings.
func PrintFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, text := flag.UnquoteUsage(f)
		switch name {
		case "int", "uint", "int64", "uint64":
			name = "N"
		case "float":
			name = "X"
		case "string", "value":
			name = strings.ToUpper(name)
		case "duration":
			name = "DURATION"
		}
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		fmt.Fprintf(w, "%s\n    \t%s", line, strings.ReplaceAll(text, "\n", "\n    \t"))
		if d := f.DefValue; d != "" && d != "0" && d != "false" && d != "[]" {
			if name == "STRING" {
				d = strconv.Quote(d)
			}
			fmt.Fprintf(w, " (default %s)", d)
		}
		fmt.Fprintln(w)
	})
}
