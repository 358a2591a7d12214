package audit_test

import (
	"context"
	"fmt"
	"math"

	"github.com/knowdp/knowdp/audit"
	"github.com/knowdp/knowdp/noise"
)

// A Laplace mechanism with 0.8 times the noise it needs for eps = 1 is
// caught by sampling: the lower confidence bound on its loss exceeds 1.
func ExampleSample() {
	correct, _ := noise.NewLaplace(1, 1)
	broken, _ := noise.NewLaplaceScale(0.8*correct.Scale(), 1)
	for _, lap := range []noise.Laplace{correct, broken} {
		x := func(r *noise.Rand) (float64, error) { return lap.Add(r, 0) }
		x2 := func(r *noise.Rand) (float64, error) { return lap.Add(r, 1) }
		// Seeded for a reproducible example: not private.
		res, err := audit.Sample(context.Background(), noise.NewSeeded(1), x, x2, 1, audit.SampleConfig{Samples: 100000})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("scale %.1f: eps >= %.2f with confidence 95%%: %v\n", lap.Scale(), res.Lower, res.Verdict)
	}
	// Output:
	// scale 1.0: eps >= 0.99 with confidence 95%: pass
	// scale 0.8: eps >= 1.23 with confidence 95%: VIOLATION
}

// Randomized response with eps = ln 3 tells the truth with probability
// 3/4: the exact audit finds ln 3 at either output.
func ExampleExactFinite() {
	ex, err := audit.ExactFinite([]float64{0.75, 0.25}, []float64{0.25, 0.75}, math.Log(3))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("exact eps %.4f (ln 3 = %.4f) at output %v: %v\n", ex.Epsilon, math.Log(3), ex.At, ex.Verdict)
	// Output:
	// exact eps 1.0986 (ln 3 = 1.0986) at output 0: pass
}

func ExampleClopperPearson() {
	lo, hi, err := audit.ClopperPearson(5, 10, 0.025)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("5 of 10: p in [%.4f, %.4f] with confidence 95%%\n", lo, hi)
	// Output:
	// 5 of 10: p in [0.1871, 0.8129] with confidence 95%
}

// RunAll audits a catalogue on every core; a seeded run gives the same
// rows, in the catalogue's order, however many there are.
func ExampleRunAll() {
	correct, _ := noise.NewLaplace(1, 1)
	broken, _ := noise.NewLaplaceScale(0.8*correct.Scale(), 1)
	var cases []audit.Case
	for _, m := range []struct {
		name string
		lap  noise.Laplace
	}{{"correct", correct}, {"broken", broken}} {
		cases = append(cases, audit.Case{
			Mechanism: m.name,
			Claimed:   1,
			X:         func(r *noise.Rand) (float64, error) { return m.lap.Add(r, 0) },
			XPrime:    func(r *noise.Rand) (float64, error) { return m.lap.Add(r, 1) },
		})
	}
	// Seeded for a reproducible example: not private.
	rows, err := audit.RunAll(context.Background(), cases, noise.NewSeeded(1), audit.SampleConfig{Samples: 100000}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range rows {
		fmt.Printf("%s, %s: %v\n", r.Mechanism, r.Method, r.Verdict)
	}
	// Output:
	// correct, sampled: pass
	// broken, sampled: VIOLATION
}
