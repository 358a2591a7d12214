package main

import (
	"bufio"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Block is one shell command block of a Markdown document: a fenced code
// block whose info string is sh, bash, shell or console.
type Block struct {
	// File and Line locate the opening fence.
	File string
	Line int
	// Text is the block's content, verbatim.
	Text string
	// Mode is how the block runs: Run (the default), Skip, Background or
	// Bench, from a <!-- doc-test: MODE ... --> comment on the line before
	// the fence.
	Mode Mode
	// Reason says why a Skip block is not run.
	Reason string
	// Port is the TCP port a Background block listens on when it is
	// ready.
	Port int
}

// Mode is how a block runs.
type Mode int

const (
	// Run runs the block and requires every command to succeed.
	Run Mode = iota
	// Skip does not run it (its comment gives the reason).
	Skip
	// Background starts it and waits until its port listens; it is
	// stopped when the document's blocks have run.
	Background
	// Bench runs it with "go test ... -bench RE" checked, not run: every
	// alternative of RE must name a benchmark of the packages.
	Bench
)

var fence = regexp.MustCompile("^ *```+ *([A-Za-z]*)")

// directive is <!-- doc-test: MODE [ARGS] -->.
var directive = regexp.MustCompile(`^\s*<!--\s*doc-test:\s*(\w+)\s*(.*?)\s*-->\s*$`)

// shellInfo are the info strings of the blocks that are run.
var shellInfo = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}

// ParseBlocks returns the shell blocks of a Markdown document, with the
// mode each one's preceding comment gives. A malformed or unknown
// directive, or a skip without its reason, is an error naming its line.
func ParseBlocks(file, text string) ([]Block, error) {
	var (
		out     []Block
		in      bool
		shell   bool
		cur     *Block
		body    strings.Builder
		pending *Block // the directive of the line before, if any
		prevDir bool
	)
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if in {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				in = false
				if shell {
					cur.Text = body.String()
					out = append(out, *cur)
				}
				continue
			}
			if shell {
				body.WriteString(line)
				body.WriteByte('\n')
			}
			continue
		}
		if m := directive.FindStringSubmatch(line); m != nil {
			b := &Block{File: file}
			switch m[1] {
			case "skip":
				if m[2] == "" {
					return nil, fmt.Errorf("%s:%d: doc-test: skip needs its reason", file, n)
				}
				b.Mode, b.Reason = Skip, m[2]
			case "background":
				p, err := strconv.Atoi(m[2])
				if err != nil || p < 1 || p > 65535 {
					return nil, fmt.Errorf("%s:%d: doc-test: background needs the port the block listens on, got %q", file, n, m[2])
				}
				b.Mode, b.Port = Background, p
			case "bench":
				b.Mode = Bench
			default:
				return nil, fmt.Errorf("%s:%d: unknown doc-test directive %q (want skip, background or bench)", file, n, m[1])
			}
			pending, prevDir = b, true
			continue
		}
		if m := fence.FindStringSubmatch(line); m != nil {
			in, shell = true, shellInfo[strings.ToLower(m[1])]
			body.Reset()
			cur = &Block{File: file, Line: n}
			if prevDir {
				cur = pending
				cur.Line = n
				if !shell {
					return nil, fmt.Errorf("%s:%d: a doc-test directive before a block that is not a shell block", file, n)
				}
			}
			pending, prevDir = nil, false
			continue
		}
		if prevDir {
			return nil, fmt.Errorf("%s:%d: a doc-test directive must be the line right before its block's fence", file, n-1)
		}
	}
	if in {
		return nil, fmt.Errorf("%s: a code block is not closed", file)
	}
	if prevDir {
		return nil, fmt.Errorf("%s: a doc-test directive at the end, with no block", file)
	}
	return out, sc.Err()
}

// BenchCheck is a "go test" command line of a Bench block, rewritten to
// list what it would run.
type BenchCheck struct {
	// Args are go's arguments: test, the packages and flags, with -bench
	// RE replaced by -list RE and the flags that run (-benchtime, -cpu,
	// -count, -timeout) dropped.
	Args []string
	// Patterns are the top-level alternatives of RE (before any "/" of a
	// sub-benchmark): each must match a listed benchmark.
	Patterns []string
}

// valueFlags are go test's flags that take a value as the next argument.
var valueFlags = map[string]bool{"-run": true, "-bench": true, "-benchtime": true, "-cpu": true, "-count": true, "-timeout": true, "-skip": true, "-list": true}

// ParseBench rewrites go's arguments for a Bench block; ok is false for a
// command that is not "go test ... -bench RE" (run as it is).
func ParseBench(args []string) (BenchCheck, bool) {
	if len(args) == 0 || args[0] != "test" {
		return BenchCheck{}, false
	}
	var c BenchCheck
	c.Args = []string{"test"}
	re := ""
	for i := 1; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(a, "=")
		name = "-" + strings.TrimLeft(name, "-")
		if !strings.HasPrefix(a, "-") {
			c.Args = append(c.Args, a)
			continue
		}
		if valueFlags[name] && !hasVal && i+1 < len(args) {
			val, hasVal = args[i+1], true
			i++
		}
		switch name {
		case "-bench":
			re = val
		case "-run", "-benchtime", "-cpu", "-count", "-timeout", "-skip", "-v":
		default:
			c.Args = append(c.Args, a)
		}
	}
	if re == "" {
		return BenchCheck{}, false
	}
	c.Args = append(c.Args, "-run", "^$", "-list", re)
	depth, start := 0, 0
	for i, r := range re + "|" {
		switch {
		case r == '(':
			depth++
		case r == ')':
			depth--
		case r == '|' && depth == 0:
			p, _, _ := strings.Cut(re[start:i], "/")
			c.Patterns = append(c.Patterns, p)
			start = i + 1
		}
	}
	return c, true
}

// MissingBenchmarks returns the patterns that match none of the
// benchmarks in go test -list's output.
func (c BenchCheck) MissingBenchmarks(listed string) []string {
	var names []string
	for _, l := range strings.Split(listed, "\n") {
		if strings.HasPrefix(l, "Benchmark") {
			names = append(names, strings.TrimSpace(l))
		}
	}
	var missing []string
	for _, p := range c.Patterns {
		re, err := regexp.Compile(p)
		found := false
		for _, n := range names {
			found = found || (err == nil && re.MatchString(n))
		}
		if !found {
			missing = append(missing, p)
		}
	}
	return missing
}
