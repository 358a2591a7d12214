package audit

import (
	"context"
	"errors"
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
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for range min(runtime.GOMAXPROCS(0), len(cases)) {
		wg.Go(func() {
			for i := range next {
				if ctx.Err() != nil {
					continue
				}
				rows[i], errs[i] = cases[i].Run(ctx, rands[i], cfg)
				if errs[i] != nil {
					cancel()
					continue
				}
				if done != nil {
					mu.Lock()
					done()
					mu.Unlock()
				}
			}
		})
	}
	// Longest first would finish sooner, but the order is the catalogue's:
	// its slow cases (the cube release, MWEM) are spread through it.
	for i := range cases {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := parent.Err(); err != nil {
		return nil, err
	}
	// The first failure in catalogue order, as a run in order reports it;
	// the cases it cancelled report only that.
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
	}
	var out []Row
	for _, rs := range rows {
		out = append(out, rs...)
	}
	return out, nil
}
