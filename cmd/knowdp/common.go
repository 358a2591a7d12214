package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/knowdp/knowdp/noise"
)

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// seedFlag is the --seed flag: unset means secure randomness, set means a
// reproducible and therefore non-private run.
type seedFlag struct {
	set  bool
	seed uint64
}

func (s *seedFlag) String() string {
	if !s.set {
		return ""
	}
	return strconv.FormatUint(s.seed, 10)
}

func (s *seedFlag) Set(v string) error {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return fmt.Errorf("seed must be a non-negative integer, got %q", v)
	}
	s.seed, s.set = n, true
	return nil
}

const seedUsage = "seed `N` for reproducible runs; the output is then NOT differentially private"

// forceUsage is the --force flag's help, the same for every command that
// writes files.
const forceUsage = "replace outputs that exist (atomically); without it an output that exists is refused before anything is read"

// rand returns the generator the flag asks for and, for a seeded one, warns
// on stderr that the output is not private.
func (s *seedFlag) rand(e *env) *noise.Rand {
	if !s.set {
		return noise.NewRand()
	}
	fmt.Fprintf(e.stderr, "WARNING: --seed %d makes the noise predictable; this output is NOT differentially private\n", s.seed)
	return noise.NewSeeded(s.seed)
}

// progress draws a progress bar on stderr when it is a terminal and the work
// has taken more than two seconds; otherwise it does nothing.
type progress struct {
	e      *env
	label  string
	total  int64
	start  time.Time
	mu     sync.Mutex
	done   int64
	drawn  bool
	lastAt time.Time
}

func newProgress(e *env, label string, total int64) *progress {
	return &progress{e: e, label: label, total: total, start: time.Now()}
}

// Add records n more units of work done.
func (p *progress) Add(n int64) {
	if p == nil || !p.e.stderrTTY {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	now := time.Now()
	if now.Sub(p.start) < 2*time.Second || now.Sub(p.lastAt) < 100*time.Millisecond {
		return
	}
	p.lastAt, p.drawn = now, true
	const width = 30
	frac := 0.0
	if p.total > 0 {
		frac = min(float64(p.done)/float64(p.total), 1)
	}
	filled := int(frac * width)
	bar := make([]byte, width)
	for i := range bar {
		bar[i] = ' '
		if i < filled {
			bar[i] = '='
		}
	}
	fmt.Fprintf(p.e.stderr, "\r%s [%s] %3.0f%%", p.label, bar, 100*frac)
}

// Done clears the bar if one was drawn.
func (p *progress) Done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprintf(p.e.stderr, "\r%s done in %v\n", p.label, time.Since(p.start).Round(time.Millisecond))
	}
}
