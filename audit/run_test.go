package audit

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/noise"
)

// lapCases are n sampled cases of grid Laplace at different scales,
// cheap enough to run many times.
func lapCases(t *testing.T, n int) []Case {
	t.Helper()
	var cs []Case
	for i := range n {
		lap, err := noise.NewLaplace(1, 0.5+0.25*float64(i))
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, Case{
			Mechanism: fmt.Sprintf("case %d", i),
			Claimed:   0.5 + 0.25*float64(i),
			X:         func(r *noise.Rand) (float64, error) { return lap.Add(r, 0) },
			XPrime:    func(r *noise.Rand) (float64, error) { return lap.Add(r, 1) },
		})
	}
	return cs
}

// TestRunAllDoesNotDependOnScheduling: a seeded run gives the same rows,
// in catalogue order, on 1 to 4 goroutines.
func TestRunAllDoesNotDependOnScheduling(t *testing.T) {
	cases := lapCases(t, 6)
	cfg := SampleConfig{Samples: 10_000}
	var want []Row
	for procs := 1; procs <= 4; procs++ {
		var rows []Row
		var err error
		done := 0
		func() {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			rows, err = RunAll(context.Background(), cases, noise.NewSeeded(9), cfg, func() { done++ })
		}()
		if err != nil {
			t.Fatal(err)
		}
		if done != len(cases) || len(rows) != len(cases) {
			t.Fatalf("%d goroutines: %d cases done, %d rows", procs, done, len(rows))
		}
		for i := range rows {
			rows[i].Elapsed = 0
			if rows[i].Mechanism != cases[i].Mechanism {
				t.Fatalf("row %d is %q", i, rows[i].Mechanism)
			}
		}
		if want == nil {
			want = rows
			continue
		}
		for i := range rows {
			if rows[i] != want[i] {
				t.Fatalf("%d goroutines, row %d: %+v, one goroutine gives %+v", procs, i, rows[i], want[i])
			}
		}
	}
}

// TestRunAllReportsTheFirstFailure: the error is the first failing case's
// in catalogue order, not a cancellation.
func TestRunAllReportsTheFirstFailure(t *testing.T) {
	cases := lapCases(t, 5)
	for _, i := range []int{1, 3} {
		cases[i].X = func(*noise.Rand) (float64, error) { return 0, errors.New("broken " + fmt.Sprint(i)) }
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	_, err := RunAll(context.Background(), cases, noise.NewSeeded(1), SampleConfig{Samples: 1000}, nil)
	if err == nil || !strings.Contains(err.Error(), "case 1: sampling audit") || !strings.Contains(err.Error(), "broken 1") {
		t.Fatalf("error %v, want case 1's", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := RunAll(ctx, lapCases(t, 2), noise.NewSeeded(1), SampleConfig{Samples: 1000}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v", err)
	}
}
