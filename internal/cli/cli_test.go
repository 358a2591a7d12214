package cli

import (
	"bytes"
	"flag"
	"strings"
	"testing"
)

func TestHelpRequested(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--data", "x"}, false},
		{[]string{"--data", "x", "--help"}, true},
		{[]string{"-h"}, true},
		{[]string{"-help"}, true},
		{[]string{"--", "--help"}, false},
		{[]string{"--helpful"}, false},
	} {
		if got := HelpRequested(tc.args); got != tc.want {
			t.Errorf("HelpRequested(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

func TestPrintFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("out", "", "output `FILE`")
	fs.String("mode", "fast", "the mode")
	fs.Int("n", 3, "how many")
	fs.Float64("eps", 0, "epsilon")
	fs.Bool("json", false, "print JSON")
	var b bytes.Buffer
	PrintFlags(&b, fs)
	want := strings.Join([]string{
		"  --eps X\n    \tepsilon",
		"  --json\n    \tprint JSON",
		"  --mode STRING\n    \tthe mode (default \"fast\")",
		"  --n N\n    \thow many (default 3)",
		"  --out FILE\n    \toutput FILE",
		"",
	}, "\n")
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestPrintVersion(t *testing.T) {
	var b bytes.Buffer
	PrintVersion(&b, "knowdp-test")
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "knowdp-test ") || !strings.HasPrefix(lines[1], "revision ") || !strings.HasPrefix(lines[2], "go") {
		t.Errorf("version output %q", b.String())
	}
}
