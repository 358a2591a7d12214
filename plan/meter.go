package plan

import (
	"context"
	"sync"
)

// Meter adds up the work of the solves run under a context that carries
// it (WithMeter), whether they succeed, fail or are stopped: what a caller
// that prices work, such as a rate limiter, charges for a computation that
// did not end in a result. It is safe for concurrent use.
type Meter struct {
	mu   sync.Mutex
	work float64
}

// Add adds work (Result.Work's unit) to the meter: Solve adds its own, and
// another solver can add its own work converted to that unit.
func (m *Meter) Add(work float64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.work += work
	m.mu.Unlock()
}

// Work returns the work added so far.
func (m *Meter) Work() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.work
}

type meterKey struct{}

// WithMeter returns a context under which Solve adds its work to m.
func WithMeter(ctx context.Context, m *Meter) context.Context {
	return context.WithValue(ctx, meterKey{}, m)
}

// MeterFrom returns the context's meter, or nil (whose Add does nothing).
func MeterFrom(ctx context.Context) *Meter {
	m, _ := ctx.Value(meterKey{}).(*Meter)
	return m
}
