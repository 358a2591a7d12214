package audit

import (
	"math"
	"testing"

	"github.com/knowdp/knowdp/noise"
)

func TestExactDiscreteLaplace(t *testing.T) {
	for _, tc := range []struct {
		scale   float64
		shift   int64
		claimed float64
		want    Verdict
	}{
		{1, 1, 1, Pass},        // eps = 1/t
		{2, 1, 0.5, Pass},      // eps = 1/2
		{0.8, 1, 1, Violation}, // one notch too little noise: 1.25
		{1, 2, 1, Violation},   // sensitivity 2 calibrated as 1: 2
		{3, 5, 5.0 / 3, Pass},  // d/t
	} {
		d, err := noise.NewDiscreteLaplace(tc.scale)
		if err != nil {
			t.Fatal(err)
		}
		p := func(z int64) float64 { return math.Log(d.Prob(z)) }
		q := func(z int64) float64 { return math.Log(d.Prob(z - tc.shift)) }
		ex, err := ExactIntegers(p, q, -3, tc.shift+3, tc.claimed)
		if err != nil {
			t.Fatal(err)
		}
		if want := float64(tc.shift) / tc.scale; math.Abs(ex.Epsilon-want) > 1e-12*want {
			t.Errorf("t=%v shift=%d: exact eps %v, want %v", tc.scale, tc.shift, ex.Epsilon, want)
		}
		if ex.Verdict != tc.want || !ex.Tail {
			t.Errorf("t=%v shift=%d claimed %v: verdict %v tail %v, want %v in the tails", tc.scale, tc.shift, tc.claimed, ex.Verdict, ex.Tail, tc.want)
		}
	}
}

func TestExactGridLaplace(t *testing.T) {
	for _, eps := range []float64{0.1, 1, 3} {
		lap, err := noise.NewLaplace(1, eps)
		if err != nil {
			t.Fatal(err)
		}
		ex, err := exactGrid(lap, []float64{0}, []float64{1}, eps)
		if err != nil {
			t.Fatal(err)
		}
		// Counts are on the grid: the loss is 1/Scale, within one grid step
		// (2^-20 relative) below the claim.
		if want := 1 / lap.Scale(); math.Abs(ex.Epsilon-want) > 1e-9*want || ex.Epsilon > eps || ex.Epsilon < eps*(1-0x1p-19) {
			t.Errorf("eps=%v: exact %v, want 1/scale = %v <= eps", eps, ex.Epsilon, want)
		}
		if ex.Verdict != Pass {
			t.Errorf("eps=%v: verdict %v", eps, ex.Verdict)
		}
		// Sensitivity 2 calibrated as 1 doubles the loss.
		ex, err = exactGrid(lap, []float64{0}, []float64{2}, eps)
		if err != nil {
			t.Fatal(err)
		}
		if ex.Verdict != Violation || math.Abs(ex.Epsilon-2/lap.Scale()) > 1e-9*eps {
			t.Errorf("eps=%v, shift 2: exact %v verdict %v, want %v VIOLATION", eps, ex.Epsilon, ex.Verdict, 2/lap.Scale())
		}
	}
}

// The exponential mechanism's worst case: the loss has a closed form that
// stays below eps and approaches it as the number of candidates grows;
// weights eps*u/sensitivity (the factor 2 forgotten) double it.
func TestExactExponentialMechanism(t *testing.T) {
	const eps = 1.0
	h := math.Exp(eps / 2)
	for _, R := range []int{2, 5, 20, 1000} {
		u, u2 := emUtilities(R)
		ex, err := ExactFinite(softmax(emWeights(u, eps, 1)), softmax(emWeights(u2, eps, 1)), eps)
		if err != nil {
			t.Fatal(err)
		}
		want := math.Log(h * (1 + float64(R-1)*h) / (h + float64(R-1)))
		if math.Abs(ex.Epsilon-want) > 1e-12 || ex.At != 0 || ex.Verdict != Pass {
			t.Errorf("R=%d: exact %v at %v (%v), want %v at candidate 0, pass", R, ex.Epsilon, ex.At, ex.Verdict, want)
		}
		broken, err := ExactFinite(softmax(emWeights(u, eps, 0.5)), softmax(emWeights(u2, eps, 0.5)), eps)
		if err != nil {
			t.Fatal(err)
		}
		if R >= 5 && broken.Verdict != Violation {
			t.Errorf("R=%d: weights eps*u/sensitivity give %v, not flagged", R, broken.Epsilon)
		}
	}
	u, u2 := emUtilities(1000)
	ex, _ := ExactFinite(softmax(emWeights(u, eps, 1)), softmax(emWeights(u2, eps, 1)), eps)
	if ex.Epsilon < 0.99*eps {
		t.Errorf("R=1000: exact %v, want close to eps", ex.Epsilon)
	}
}

func TestExactFinite(t *testing.T) {
	ex, err := ExactFinite([]float64{0.5, 0.5, 0}, []float64{0.25, 0.75, 0}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(ex.Epsilon-math.Ln2) > 1e-15 || ex.At != 0 {
		t.Errorf("got %v at %v, want ln 2 at 0", ex.Epsilon, ex.At)
	}
	ex, err = ExactFinite([]float64{1, 0}, []float64{0.5, 0.5}, math.Inf(1))
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsInf(ex.Epsilon, 1) || ex.At != 1 || ex.Verdict != Pass {
		t.Errorf("disjoint support: got %v at %v (%v), want +Inf at 1, pass against +Inf", ex.Epsilon, ex.At, ex.Verdict)
	}
}

func TestExactDensities(t *testing.T) {
	// Uniform on [0, 1) against density 1.5 on [0, 0.5) and 0.5 on [0.5, 1).
	ex, err := ExactDensities([]float64{0, 1}, []float64{1}, []float64{0, 0.5, 1}, []float64{1.5, 0.5}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(ex.Epsilon-math.Log(2)) > 1e-15 || ex.At != 0.5 {
		t.Errorf("got %v at %v, want ln 2 from 0.5", ex.Epsilon, ex.At)
	}
	// A piece one density lacks: infinite loss.
	ex, err = ExactDensities([]float64{0, 1}, []float64{1}, []float64{0, 2}, []float64{0.5}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsInf(ex.Epsilon, 1) || ex.At != 1 || ex.Verdict != Violation {
		t.Errorf("got %v at %v (%v), want +Inf from 1", ex.Epsilon, ex.At, ex.Verdict)
	}
}

func TestExactErrors(t *testing.T) {
	d, _ := noise.NewDiscreteLaplace(1)
	p := func(z int64) float64 { return math.Log(d.Prob(z)) }
	q := func(z int64) float64 { return math.Log(d.Prob(z - 10)) }
	cases := map[string]func() error{
		"lengths":        func() error { _, err := ExactFinite([]float64{1}, []float64{0.5, 0.5}, 1); return err },
		"empty":          func() error { _, err := ExactFinite(nil, nil, 1); return err },
		"negative":       func() error { _, err := ExactFinite([]float64{-0.1, 1.1}, []float64{0.5, 0.5}, 1); return err },
		"all zero":       func() error { _, err := ExactFinite([]float64{0, 0}, []float64{0, 0}, 1); return err },
		"NaN claim":      func() error { _, err := ExactFinite([]float64{1}, []float64{1}, math.NaN()); return err },
		"negative claim": func() error { _, err := ExactFinite([]float64{1}, []float64{1}, -1); return err },
		"tiny window":    func() error { _, err := ExactIntegers(p, q, 0, 2, 1); return err },
		// Between the two inputs the ratio still changes: the tails are
		// not covered.
		"window inside": func() error { _, err := ExactIntegers(p, q, 2, 8, 1); return err },
		"bad prob":      func() error { _, err := ExactIntegers(func(int64) float64 { return 0.5 }, q, 0, 5, 1); return err },
		"impossible": func() error {
			inf := func(int64) float64 { return math.Inf(-1) }
			_, err := ExactIntegers(inf, inf, 0, 5, 1)
			return err
		},
		"density shape": func() error {
			_, err := ExactDensities([]float64{0}, []float64{1}, []float64{0, 1}, []float64{1}, 1)
			return err
		},
		"density order": func() error {
			_, err := ExactDensities([]float64{1, 0}, []float64{1}, []float64{0, 1}, []float64{1}, 1)
			return err
		},
	}
	for name, f := range cases {
		if f() == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
