package audit

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/knowdp/knowdp/noise"
)

var bg = context.Background()

func gridSampler(t testing.TB, lap noise.Laplace, x float64) Sampler {
	t.Helper()
	return func(r *noise.Rand) (float64, error) { return lap.Add(r, x) }
}

// TestSampleCatchesBrokenLaplace: the sampling audit flags noise one notch
// too small and a sensitivity off by one, and passes the correct mechanism
// with a bound close to its eps.
func TestSampleCatchesBrokenLaplace(t *testing.T) {
	const eps = 1.0
	good, err := noise.NewLaplace(1, eps)
	if err != nil {
		t.Fatal(err)
	}
	small, err := noise.NewLaplaceScale(0.8*good.Scale(), 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		lap    noise.Laplace
		x2     float64
		want   Verdict
		minLow float64 // the bound must reach this (power)
	}{
		{"correct", good, 1, Pass, 0.85},
		{"scale 0.8/eps", small, 1, Violation, 1.1},
		{"sensitivity 2 calibrated as 1", good, 2, Violation, 1.8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Sample(bg, noise.NewSeeded(7), gridSampler(t, tc.lap, 0), gridSampler(t, tc.lap, tc.x2), eps, SampleConfig{Samples: 40000})
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict != tc.want || res.Lower < tc.minLow {
				t.Errorf("lower bound %v (%v, estimate %v): verdict %v, want %v with bound >= %v", res.Lower, res.Set, res.Estimate, res.Verdict, tc.want, tc.minLow)
			}
			// The true loss of every set is at most the mechanism's: the
			// estimate of a sound bound cannot be far above it.
			trueEps := tc.x2 / tc.lap.Scale()
			if res.Lower > trueEps {
				t.Errorf("lower bound %v above the true loss %v", res.Lower, trueEps)
			}
		})
	}
}

// TestSampleCoverage runs the audit many times on mechanisms whose loss
// is attained by many output sets at once, so that the selection half sees
// many candidates equally good and reusing it to estimate would overshoot
// (on the interleaved mechanism it does in about 27% of runs). The bound
// must exceed the true eps in at most an alpha share of the runs, up to
// binomial error: 200 runs at alpha = 0.1 exceed 40 with probability
// below 1e-6.
func TestSampleCoverage(t *testing.T) {
	const (
		eps   = 1.0
		runs  = 200
		alpha = 0.1
	)
	// Discrete Laplace on 0 and 1: every tail set {T >= v}, v >= 1, has
	// ratio exactly e^eps.
	d, err := noise.NewDiscreteLaplace(1 / eps)
	if err != nil {
		t.Fatal(err)
	}
	// Interleaved: x uniform on 64 outputs; x' gives the even ones e^-eps
	// times as much and the odd ones 2 - e^-eps times as much. Each even
	// output alone attains e^eps; no threshold set does.
	keepEven := uint64(math.Exp(-eps) / 2 * 0x1p64)
	interleaved := func(r *noise.Rand) (float64, error) {
		o := 2 * r.Uint64N(32)
		if r.Uint64() >= keepEven {
			o++
		}
		return float64(o), nil
	}
	for _, tc := range []struct {
		name    string
		x, x2   Sampler
		samples int
	}{
		{"discrete Laplace", func(r *noise.Rand) (float64, error) { return float64(d.Sample(r)), nil },
			func(r *noise.Rand) (float64, error) { return float64(1 + d.Sample(r)), nil }, 2000},
		{"interleaved", func(r *noise.Rand) (float64, error) { return float64(r.Uint64N(64)), nil }, interleaved, 10000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := noise.NewSeeded(11)
			over := 0
			var mean float64
			for range runs {
				res, err := Sample(bg, r, tc.x, tc.x2, eps, SampleConfig{Samples: tc.samples, Alpha: alpha})
				if err != nil {
					t.Fatal(err)
				}
				if res.Lower > eps {
					over++
				}
				mean += res.Lower / runs
			}
			if over > 40 {
				t.Errorf("lower bound above the true eps in %d of %d runs at alpha = %v", over, runs, alpha)
			}
			if mean < 0.3 {
				t.Errorf("mean lower bound %v: the audit has no power", mean)
			}
			t.Logf("bound > eps in %d/%d runs; mean bound %.3f", over, runs, mean)
		})
	}
}

// A categorical mechanism: randomized response with eps = ln 3. The best
// set is a single output, found among the Equal candidates.
func TestSampleRandomizedResponse(t *testing.T) {
	eps := math.Log(3)
	rr := func(truth uint64) Sampler {
		return func(r *noise.Rand) (float64, error) {
			if r.Uint64N(4) < 3 {
				return float64(truth), nil
			}
			return float64(1 - truth), nil
		}
	}
	res, err := Sample(bg, noise.NewSeeded(3), rr(0), rr(1), eps, SampleConfig{Samples: 20000})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Pass || res.Lower < 0.9*eps || res.Lower > eps {
		t.Errorf("randomized response: bound %v (%v), want in [0.9 eps, eps] = [%v, %v]", res.Lower, res.Set, 0.9*eps, eps)
	}
	// Claiming less than it spends is caught.
	res, err = Sample(bg, noise.NewSeeded(3), rr(0), rr(1), 0.8, SampleConfig{Samples: 20000})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Violation {
		t.Errorf("claim 0.8 for eps ln 3: bound %v, not flagged", res.Lower)
	}
}

func TestSampleDeterministic(t *testing.T) {
	lap, _ := noise.NewLaplace(1, 1)
	run := func() Sampled {
		res, err := Sample(bg, noise.NewSeeded(5), gridSampler(t, lap, 0), gridSampler(t, lap, 1), 1, SampleConfig{Samples: 10000})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if a, b := run(), run(); a != b {
		t.Errorf("same seed, different results: %+v and %+v", a, b)
	}
}

func TestSampleIdenticalInputs(t *testing.T) {
	lap, _ := noise.NewLaplace(1, 1)
	res, err := Sample(bg, noise.NewSeeded(5), gridSampler(t, lap, 0), gridSampler(t, lap, 0), 0, SampleConfig{Samples: 10000})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Pass || res.Lower > 0.2 {
		t.Errorf("identical inputs: bound %v (%v), want near 0 and pass even against eps 0", res.Lower, res.Set)
	}
}

func TestSampleErrors(t *testing.T) {
	ok := func(*noise.Rand) (float64, error) { return 0, nil }
	boom := errors.New("boom")
	failing := func(*noise.Rand) (float64, error) { return 0, boom }
	nan := func(*noise.Rand) (float64, error) { return math.NaN(), nil }
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	for name, tc := range map[string]struct {
		ctx     context.Context
		x, x2   Sampler
		claimed float64
		cfg     SampleConfig
		is      error
	}{
		"few samples": {bg, ok, ok, 1, SampleConfig{Samples: 99}, nil},
		"alpha":       {bg, ok, ok, 1, SampleConfig{Samples: 1000, Alpha: 0.7}, nil},
		"claim":       {bg, ok, ok, math.NaN(), SampleConfig{Samples: 1000}, nil},
		"nil sampler": {bg, ok, nil, 1, SampleConfig{Samples: 1000}, nil},
		"sampler":     {bg, ok, failing, 1, SampleConfig{Samples: 1000}, boom},
		"NaN":         {bg, nan, ok, 1, SampleConfig{Samples: 1000}, nil},
		"cancelled":   {cancelled, ok, ok, 1, SampleConfig{Samples: 100000}, context.Canceled},
	} {
		_, err := Sample(tc.ctx, noise.NewSeeded(1), tc.x, tc.x2, tc.claimed, tc.cfg)
		if err == nil || (tc.is != nil && !errors.Is(err, tc.is)) {
			t.Errorf("%s: error %v, want one (matching %v)", name, err, tc.is)
		}
	}
}

func TestSetString(t *testing.T) {
	for _, tc := range []struct {
		s    Set
		want string
	}{
		{Set{Op: AtLeast, Value: 1.5}, "T >= 1.5"},
		{Set{Op: AtMost, Value: -2}, "T <= -2"},
		{Set{Op: Equal, Value: 3, Swapped: true}, "T == 3 (x' over x)"},
	} {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("%#v: %q, want %q", tc.s, got, tc.want)
		}
	}
}
