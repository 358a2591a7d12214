package audit

import (
	"context"
	"runtime"
	"sync"

	"github.com/knowdp/knowdp/noise"
)

// RunAll runs every case (Case.Run) on GOMAXPROCS goroutines and returns
// their rows in the order of cases. Each case draws from a generator of
// its own, split off r in the order of cases before any runs, so a seeded
// r gives the same rows however the cases are scheduled (and with any
// GOMAXPROCS: Sample splits its chunks' generators the same way). done,
// if not nil, is called after each case, from one goroutine at a time. A
// row's Elapsed is the wall time of its own work, which shares the
// machine with the cases running beside it.
func RunAll(ctx context.Context, cases []Case, r *noise.Rand, cfg SampleConfig, done func()) ([]Row, error) {
	rands := make([]*noise.Rand, len(cases))
	for i := range cases {
		rands[i] = r.Split()
	}
	rows := make([][]Row, len(cases))
	errs := make([]error, len(cases))
	// A failure cancels the cases after it in the catalogue, not those
	// before: one of them may fail too, and a run in order reports the
	// first.
	ctxs := make([]context.Context, len(cases))
	cancels := make([]context.CancelFunc, len(cases))
	for i := range cases {
		ctxs[i], cancels[i] = context.WithCancel(ctx)
		defer cancels[i]()
	}
	first := len(cases) // the first failed case
	next := make(chan int)
	var (
		mu sync.Mutex // guards first and done
		wg sync.WaitGroup
	)
	for range min(runtime.GOMAXPROCS(0), len(cases)) {
		wg.Go(func() {
			for i := range next {
				mu.Lock()
				skip := i > first
				mu.Unlock()
				if skip || ctx.Err() != nil {
					continue
				}
				rows[i], errs[i] = cases[i].Run(ctxs[i], rands[i], cfg)
				mu.Lock()
				if errs[i] != nil && i < first {
					first = i
					for _, c := range cancels[i+1:] {
						c()
					}
				}
				if errs[i] == nil && done != nil {
					done()
				}
				mu.Unlock()
			}
		})
	}
	for i := range cases {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if first < len(cases) {
		return nil, errs[first]
	}
	var out []Row
	for _, rs := range rows {
		out = append(out, rs...)
	}
	return out, nil
}
