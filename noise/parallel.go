package noise

import (
	"context"
	"runtime"
	"sync"
)

// BlockSize is the number of cells AddParallel noises from one split
// generator.
const BlockSize = 1 << 18

// Adder is a noise distribution that adds independent noise to every
// element of a slice: Laplace or Gaussian.
type Adder interface {
	AddTo(r *Rand, xs []float64) error
}

// AddParallel adds noise from d to every element of x: in blocks of
// BlockSize cells, block i noised from the i-th Split of r (a slice of at
// most BlockSize cells from r itself), on GOMAXPROCS goroutines, so the
// result depends on r alone and not on the schedule.
func AddParallel(ctx context.Context, d Adder, r *Rand, x []float64) error {
	n := (len(x) + BlockSize - 1) / BlockSize
	if n <= 1 {
		return d.AddTo(r, x)
	}
	rands := make([]*Rand, n)
	for i := range rands {
		rands[i] = r.Split()
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		next     = make(chan int)
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range next {
				chunk := x[i*BlockSize : min((i+1)*BlockSize, len(x))]
				if err := d.AddTo(rands[i], chunk); err != nil {
					mu.Lock()
					firstErr = firstError(firstErr, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	return firstErr
}

func firstError(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
