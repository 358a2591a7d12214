// Command doctest runs every shell command block of README.md and
// docs/*.md verbatim, so that the documentation's examples cannot drift
// from the code. Each document runs in a fresh copy of the repository (its
// files as git lists them, uncommitted changes included), with the knowdp
// command built as ./knowdp and on PATH, its blocks in order in one
// directory, each block in its own bash with -e and -o pipefail: every
// command of every block must succeed.
//
// A comment on the line before a block's fence changes how it runs:
//
//	<!-- doc-test: skip REASON -->    not run (the reason is required)
//	<!-- doc-test: background PORT --> started, then waited for until PORT
//	                                  listens; stopped after the document
//	<!-- doc-test: bench -->           "go test ... -bench RE" is checked,
//	                                  not run: every alternative of RE must
//	                                  name a benchmark of the packages
//
// Usage, from the repository root (scripts/test.sh runs it):
//
//	go run ./scripts/doctest [-run REGEXP] [FILE.md ...]
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// blockTimeout bounds one block; the slowest (repro all) takes under a
// minute on the 2-core machine the project is built on.
const blockTimeout = 10 * time.Minute

func main() {
	// Started by a Bench block as "go": check, do not run, the benchmarks.
	if filepath.Base(os.Args[0]) == "go" {
		os.Exit(goShim(os.Args[1:]))
	}
	only := flag.String("run", "", "run only the documents whose path matches this `REGEXP`")
	flag.Parse()
	// An interrupt stops the block that runs (its process group) and
	// removes the copies.
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	if err := run(ctx, *only, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "doctest:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, only string, files []string) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(root, "cmd", "knowdp")); err != nil {
		return errors.New("run from the repository root")
	}
	if len(files) == 0 {
		files = []string{"README.md"}
		docs, _ := filepath.Glob(filepath.Join("docs", "*.md"))
		files = append(files, docs...)
	}
	var sel *regexp.Regexp
	if only != "" {
		if sel, err = regexp.Compile(only); err != nil {
			return err
		}
	}
	tmp, err := os.MkdirTemp("", "knowdp-doctest")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "bin")
	fmt.Println("building knowdp")
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "knowdp"), "./cmd/knowdp")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/knowdp: %v\n%s", err, out)
	}
	// The "go" of Bench blocks: this program under that name, which calls
	// the real go.
	realGo, err := exec.LookPath("go")
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	shim := filepath.Join(tmp, "shim")
	if err := os.MkdirAll(shim, 0o755); err != nil {
		return err
	}
	if err := os.Symlink(self, filepath.Join(shim, "go")); err != nil {
		return err
	}
	listed, err := gitFiles(root)
	if err != nil {
		return err
	}
	var failed, ran, skipped int
	start := time.Now()
	for _, f := range files {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if sel != nil && !sel.MatchString(f) {
			continue
		}
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return err
		}
		blocks, err := ParseBlocks(f, string(text))
		if err != nil {
			return err
		}
		if len(blocks) == 0 {
			continue
		}
		dir := filepath.Join(tmp, strings.NewReplacer("/", "_", ".", "_").Replace(f))
		if err := copyFiles(root, dir, listed); err != nil {
			return err
		}
		if err := copyFile(filepath.Join(bin, "knowdp"), filepath.Join(dir, "knowdp"), 0o755); err != nil {
			return err
		}
		env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		var background []*exec.Cmd
		for _, b := range blocks {
			where := fmt.Sprintf("%s:%d", b.File, b.Line)
			switch b.Mode {
			case Skip:
				fmt.Printf("SKIP %s: %s\n", where, b.Reason)
				skipped++
				continue
			case Background:
				cmd, err := startBackground(dir, env, b)
				if cmd != nil {
					background = append(background, cmd)
				}
				if err != nil {
					fmt.Printf("FAIL %s\n%s\n%v\n", where, indent(b.Text), err)
					failed++
				} else {
					fmt.Printf("ok   %s (background, listening on %d)\n", where, b.Port)
					ran++
				}
				continue
			}
			benv := env
			if b.Mode == Bench {
				benv = append(env, "PATH="+shim+string(os.PathListSeparator)+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "KNOWDP_DOCTEST_GO="+realGo)
			}
			t0 := time.Now()
			out, err := runBlock(ctx, dir, benv, b.Text)
			if err != nil {
				fmt.Printf("FAIL %s\n%s\n--- output:\n%s\n%v\n", where, indent(b.Text), indent(tail(out, 4000)), err)
				failed++
				continue
			}
			fmt.Printf("ok   %s (%.1f s)\n", where, time.Since(t0).Seconds())
			ran++
		}
		for _, c := range background {
			stop(c)
		}
		os.RemoveAll(dir)
	}
	fmt.Printf("%d passed, %d failed, %d skipped (documented reasons) in %.0f s\n", ran, failed, skipped, time.Since(start).Seconds())
	if failed > 0 {
		return fmt.Errorf("%d blocks failed", failed)
	}
	return nil
}

// runBlock runs a block's text in bash -e -o pipefail in dir.
func runBlock(ctx context.Context, dir string, env []string, text string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, blockTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", text)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("stopped (%v; a block may take %v)", context.Cause(ctx), blockTimeout)
	}
	return out.String(), err
}

// startBackground starts a block and waits until its port listens. The
// port must be free before: a server already there would answer for it.
func startBackground(dir string, env []string, b Block) (*exec.Cmd, error) {
	addr := "127.0.0.1:" + strconv.Itoa(b.Port)
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("port %d is in use before the block starts; stop what listens there", b.Port)
	}
	cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", b.Text)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("exited (%v) before listening on %d:\n%s", err, b.Port, out.String())
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return cmd, nil
		}
		if time.Now().After(deadline) {
			return cmd, fmt.Errorf("not listening on %d after a minute:\n%s", b.Port, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop ends a background block's process group (it was started in a
// group of its own).
func stop(cmd *exec.Cmd) {
	syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	time.Sleep(200 * time.Millisecond)
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// goShim is "go" for a Bench block: go test -bench RE is listed, and each
// alternative of RE checked to name a benchmark; anything else runs.
func goShim(args []string) int {
	real := os.Getenv("KNOWDP_DOCTEST_GO")
	c, ok := ParseBench(args)
	if !ok {
		cmd := exec.Command(real, args...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return ee.ExitCode()
			}
			return 1
		}
		return 0
	}
	out, err := exec.Command(real, c.Args...).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "go %s: %v\n%s", strings.Join(c.Args, " "), err, out)
		return 1
	}
	if missing := c.MissingBenchmarks(string(out)); len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "go %s: no benchmark matches %s\n%s", strings.Join(args, " "), strings.Join(missing, ", "), out)
		return 1
	}
	fmt.Printf("doc-test: the benchmarks of go %s exist (listed, not run)\n", strings.Join(args, " "))
	return 0
}

// gitFiles lists the repository's files: tracked and untracked, not
// ignored, as a fresh clone with the working tree's changes would have.
func gitFiles(root string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w", err)
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	return files, nil
}

func copyFiles(root, dir string, files []string) error {
	for _, f := range files {
		src := filepath.Join(root, f)
		st, err := os.Lstat(src)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the working tree
		}
		if err != nil {
			return err
		}
		if !st.Mode().IsRegular() {
			continue
		}
		if err := copyFile(src, filepath.Join(dir, f), st.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
