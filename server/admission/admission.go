// Package admission decides whether a request may use the server's
// processors now, from public numbers alone (the key, the analyst, and
// bounds of the work a request asks for, known from the request before any
// of it is done): per-key token buckets, which also pay for the planning
// work of requests that end in a refusal, so that refusals are not a free
// way to make the server work; per-analyst bounds on the queries in the
// server and computing at once; and a bound on the costly plannings in
// progress at once, whoever asks, so that they never take every core.
//
// It is apart from the server because none of it looks at a query, a budget
// or the data: the server says how much work a request is and when it
// ended in a refusal, and admission keeps the counts.
package admission

import (
	"context"
	"errors"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// MaxProbeWork bounds the planning work, in base cells, spent on a query
// that the analyst's budget cannot pay to look for its stored answer;
// planning more than it waits for a heavy slot (Controller.Heavy).
const MaxProbeWork = 1 << 12

// WorkPerToken is the planning work, in base cells, that costs a refused
// request one more token of its key's rate limit.
const WorkPerToken = 1 << 16

// HeavyPrepare is the bound of a query's preparation (its optimal split),
// in base cells of planning, beyond which it waits for a heavy slot: about
// 70 ms of CPU at its bound, which a branch-and-bound over up to six
// Laplace measurements or a split of dozens of Gaussian ones can reach, and
// ordinary splits of a few cuboids cannot.
const HeavyPrepare = 1 << 20

// maxRefusedTokens caps what one refused request costs its key's rate
// limit: 2^16 tokens, more than any planning costs (a split at the bound of
// a branch-and-bound over six cuboids, about 5e9 units of work or 12 s of
// CPU, is about 2,800).
const maxRefusedTokens = 1 << 16

// Config bounds what the server's users may ask of it at once.
type Config struct {
	// Rate is the number of requests per second each key may make, with
	// bursts of Burst; Rate 0 disables the limit.
	Rate  float64
	Burst int
	// Compute bounds how many of one analyst's queries are planned and
	// computed at once; InFlight how many may be in the server at all.
	Compute, InFlight int
	// Heavy bounds the costly plannings in progress at once.
	Heavy int
}

// Controller keeps the counts. It is safe for concurrent use.
type Controller struct {
	cfg      Config
	mu       sync.Mutex
	keys     map[string]*rate.Limiter
	analysts map[string]*Slots
	heavy    chan struct{}
}

// New returns a Controller with nothing admitted yet.
func New(cfg Config) *Controller {
	return &Controller{cfg: cfg, keys: map[string]*rate.Limiter{}, analysts: map[string]*Slots{}, heavy: make(chan struct{}, max(1, cfg.Heavy))}
}

// limiter returns the key's token bucket.
func (c *Controller) limiter(key string) *rate.Limiter {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.keys[key]
	if l == nil {
		l = rate.NewLimiter(rate.Limit(c.cfg.Rate), c.cfg.Burst)
		c.keys[key] = l
	}
	return l
}

// Allow takes one token from the key's bucket for a request, or reports
// that it is empty.
func (c *Controller) Allow(key string) bool {
	if c.cfg.Rate == 0 {
		return true
	}
	return c.limiter(key).Allow()
}

// Tokens returns what the key's bucket holds now (below zero after a
// refusal's work was charged).
func (c *Controller) Tokens(key string) float64 { return c.limiter(key).TokensAt(time.Now()) }

// Afford returns what planning work base cells would cost the key's rate
// limit if the request were refused (one token per WorkPerToken, at most a
// burst), and whether the key's bucket holds that now: a request whose
// planning the key could not pay is refused before it is planned.
func (c *Controller) Afford(key string, work int) (tokens int, ok bool) {
	n := work / WorkPerToken
	if c.cfg.Rate == 0 || n == 0 {
		return 0, true
	}
	n = min(n, c.cfg.Burst)
	return n, c.limiter(key).TokensAt(time.Now()) >= float64(n)
}

// ChargeRefused counts the planning work (base cells) of a request that
// ended in a refusal against its key's rate limit: one token per
// WorkPerToken, reserved a burst at a time, at most 2^16 tokens. The bucket
// goes below zero; the key's next requests then wait for it to refill.
func (c *Controller) ChargeRefused(key string, work int) {
	n := min(work/WorkPerToken, maxRefusedTokens)
	if c.cfg.Rate == 0 || n == 0 {
		return
	}
	l, now := c.limiter(key), time.Now()
	for n > 0 {
		k := min(n, c.cfg.Burst)
		l.ReserveN(now, k)
		n -= k
	}
}

// Slots is one analyst's share of the server: how many of their queries
// are in it, and a semaphore for computing.
type Slots struct {
	inFlight int
	compute  chan struct{}
}

// Acquire waits for one of the analyst's compute slots, or for ctx.
func (a *Slots) Acquire(ctx context.Context) error {
	select {
	case a.compute <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Release gives back a compute slot taken by Acquire.
func (a *Slots) Release() { <-a.compute }

// ErrInFlight is Enter's refusal: Config.InFlight of the analyst's queries
// are in the server already.
var ErrInFlight = errors.New("too many queries in flight")

// Enter admits one more query of the analyst into the server, or refuses
// it with ErrInFlight. leave must be called when the query is done.
func (c *Controller) Enter(analyst string) (slots *Slots, leave func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.analysts[analyst]
	if a == nil {
		a = &Slots{compute: make(chan struct{}, c.cfg.Compute)}
		c.analysts[analyst] = a
	}
	if a.inFlight >= c.cfg.InFlight {
		return nil, nil, ErrInFlight
	}
	a.inFlight++
	return a, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if a.inFlight--; a.inFlight == 0 {
			delete(c.analysts, analyst)
		}
	}, nil
}

// Heavy waits for one of the Config.Heavy slots of costly planning, or for
// ctx; release gives it back.
func (c *Controller) Heavy(ctx context.Context) (release func(), err error) {
	select {
	case c.heavy <- struct{}{}:
		return func() { <-c.heavy }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
