package prior

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// Privacy of the discrete mechanism, checked exactly on the output
// distributions: for statistical queries between any two true values
// (including none, the prior), for individual queries against the prior.
func TestPrivacyDiscrete(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var used float64 // the largest hockey-stick divergence seen, over delta
	for trial := range 600 {
		c := randomDiscreteCase(t, rng)
		kind := []QueryKind{Individual, Statistical}[trial%2]
		cfg := Config{Kind: kind, Epsilon: mustEps(t, 0.02+3*rng.Float64()), Distance: c.dist}
		if trial%4 >= 2 {
			cfg.Delta = mustDelta(t, 0.95*rng.Float64())
		}
		if kind == Statistical && rng.IntN(2) == 0 {
			cfg.AlphaU = 1 + (math.Exp(cfg.Epsilon.Float64())-1)*rng.Float64()
		}
		m := mustNew(t, c.prior, cfg)
		eps, delta := cfg.Epsilon.Float64(), cfg.Delta.Float64()
		outs := [][]float64{c.prior.Probs()}
		for _, truth := range c.truths {
			outs = append(outs, mustRefine(t, m, truth).(*Discrete).Probs())
		}
		check := func(a, b []float64, what string) {
			t.Helper()
			if delta == 0 {
				for i := range a {
					if a[i] > math.Exp(eps)*b[i] {
						t.Fatalf("trial %d (%v): %s: P(%v) = %v > e^eps * %v", trial, m, what, c.prior.Point(i), a[i], b[i])
					}
				}
				return
			}
			h := hockeyStick(a, b, eps)
			if h > delta+1e-14 {
				t.Fatalf("trial %d (%v): %s: hockey-stick divergence %v > delta", trial, m, what, h)
			}
			used = max(used, h/delta)
		}
		prior := outs[0]
		for i, a := range outs {
			if kind == Individual {
				check(a, prior, "output vs prior")
				check(prior, a, "prior vs output")
				continue
			}
			for j, b := range outs {
				if i != j {
					check(a, b, "two true values")
				}
			}
		}
	}
	// The (eps, delta) variants use their delta: some divergence reaches it.
	if used < 0.99 {
		t.Errorf("the largest divergence is only %.3f delta", used)
	}
}

func TestPrivacyContinuous(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var used float64
	for trial := range 300 {
		p := randomPiecewise(t, rng)
		kind := []QueryKind{Individual, Statistical}[trial%2]
		cfg := Config{Kind: kind, Epsilon: mustEps(t, 0.02+3*rng.Float64())}
		if trial%4 >= 2 {
			cfg.Delta = mustDelta(t, 0.95*rng.Float64())
		}
		m := mustNew(t, p, cfg)
		eps, delta := cfg.Epsilon.Float64(), cfg.Delta.Float64()
		truths := []Point{{-4}, {9}}
		for _, pc := range p.Pieces() {
			truths = append(truths, Point{pc.Lo}, Point{pc.Hi}, Point{pc.Lo + rng.Float64()*(pc.Hi-pc.Lo)})
		}
		outs := []*Piecewise{p}
		for _, truth := range truths {
			outs = append(outs, mustRefine(t, m, truth).(*Piecewise))
		}
		check := func(a, b *Piecewise, what string) {
			t.Helper()
			if delta == 0 {
				if _, mass := a.Atom(); mass != 0 {
					t.Fatalf("trial %d: pure eps output has an atom", trial)
				}
				for _, r := range regions(a, b) {
					if r.da > math.Exp(eps)*r.db {
						t.Fatalf("trial %d (%v): %s: density %v > e^eps * %v on [%v, %v]", trial, m, what, r.da, r.db, r.lo, r.hi)
					}
				}
				return
			}
			h := hockeyStickPiecewise(a, b, eps)
			if h > delta+1e-12 {
				t.Fatalf("trial %d (%v): %s: hockey-stick divergence %v > delta %v", trial, m, what, h, delta)
			}
			used = max(used, h/delta)
		}
		for i, a := range outs {
			if math.Abs(a.Mass(-10, 20)-1) > 1e-12 {
				t.Fatalf("trial %d: output mass %v", trial, a.Mass(-10, 20))
			}
			if kind == Individual {
				check(a, p, "output vs prior")
				check(p, a, "prior vs output")
				continue
			}
			for j, b := range outs {
				if i != j {
					check(a, b, "two true values")
				}
			}
		}
	}
	if used < 0.99 {
		t.Errorf("the largest divergence is only %.3f delta", used)
	}
}

// literalShift is the paper's sketch of the (eps, delta) variants: start
// from the eps refinement q, add shift to the point nearest the truth and
// remove shift of output mass from the farthest points.
func literalShift(q []float64, byDistance []int, shift float64) []float64 {
	out := slices.Clone(q)
	out[byDistance[0]] += shift
	left := shift
	for k := len(byDistance) - 1; k >= 0 && left > 0; k-- {
		i := byDistance[k]
		take := min(out[i], left)
		out[i] -= take
		left -= take
	}
	return out
}

func TestPaperDeltaVariantsFail(t *testing.T) {
	vals := []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	probs := make([]float64, 10)
	for i := range probs {
		probs[i] = 0.1
	}
	p, _ := NewNumeric("x", vals, probs)
	const eps, delta = 1.0, 0.1
	up := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	down := []int{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}

	// Individual: "add delta to f(D), subtract delta from the tails".
	pure := mustNew(t, p, Config{Kind: Individual, Epsilon: mustEps(t, eps)})
	q0 := mustRefine(t, pure, Point{0}).(*Discrete).Probs()
	paper := literalShift(q0, up, delta)
	if h := hockeyStick(probs, paper, eps); h <= delta {
		t.Errorf("the paper's individual variant holds: divergence %v", h)
	} else {
		t.Logf("paper's individual (eps, delta) variant: divergence %.4f > delta = %v", h, delta)
	}
	ours := mustRefine(t, mustNew(t, p, Config{Kind: Individual, Epsilon: mustEps(t, eps), Delta: mustDelta(t, delta)}), Point{0}).(*Discrete).Probs()
	for _, h := range []float64{hockeyStick(probs, ours, eps), hockeyStick(ours, probs, eps)} {
		if h > delta+1e-15 {
			t.Errorf("our individual variant: divergence %v", h)
		}
	}

	// Statistical: delta' = delta/2, with f(D1) in the farthest set of f(D2).
	stat := mustNew(t, p, Config{Kind: Statistical, Epsilon: mustEps(t, eps)})
	a := mustRefine(t, stat, Point{0}).(*Discrete).Probs()
	b := mustRefine(t, stat, Point{9}).(*Discrete).Probs()
	if h := hockeyStick(literalShift(a, up, delta/2), literalShift(b, down, delta/2), eps); h <= delta {
		t.Errorf("the paper's delta/2 holds: divergence %v", h)
	} else {
		t.Logf("paper's statistical delta' = delta/2: divergence %.4f > delta = %v", h, delta)
	}
	fixed := delta / (1 + math.Exp(eps))
	if h := hockeyStick(literalShift(a, up, fixed), literalShift(b, down, fixed), eps); h > delta+1e-15 {
		t.Errorf("delta/(1+e^eps): divergence %v", h)
	}
}
