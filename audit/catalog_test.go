package audit

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
)

// slowSampling names the cases whose sampled audit takes seconds (every
// sample is a cube release or an MWEM run): go test -short audits them
// exactly only (MWEM, which has no exact audit, not at all). Everything
// else, and everything in a full run, is audited both ways.
var slowSampling = []string{"cube release", "d_X MWEM"}

// TestCases audits every mechanism of the library on its representative
// neighbours: the correct ones pass, exactly and by sampling, the controls
// are flagged both ways, and the exact losses are the known ones. With
// -short the slow sampled audits (slowSampling) are left out.
func TestCases(t *testing.T) {
	eps, err := privacy.NewEpsilon(1)
	if err != nil {
		t.Fatal(err)
	}
	cases, err := Cases(bg, eps)
	if err != nil {
		t.Fatal(err)
	}
	// Exact losses known in closed form, by mechanism name prefix.
	h := math.Exp(0.5)
	known := map[string]float64{
		"grid Laplace (noise.NewLaplace)":             1,
		"discrete Laplace":                            1,
		"exponential mechanism":                       math.Log(h * (1 + 19*h) / (h + 19)), // 20 candidates
		"cube release, generic sensitivity 4":         1,
		"prior refinement, statistical, binomial":     1,
		"prior refinement, statistical, uniform":      1,
		"prior refinement, individual":                1,
		"grid Laplace with 0.8 times the scale":       1.25,
		"grid Laplace calibrated to sensitivity 1":    2,
		"cube release calibrated to sensitivity 1, n": 4,
		// Per unit: 3 rows of one unit (K = 3) against noise for K; with the
		// grand total exact, 3 rows moved against noise for 2K; per row, 5
		// rows against noise for one.
		"release per unit, at most 3 rows each (release.Plan.RunUnits), sensitivity 3": 1,
		"release per unit, at most 3 rows each (release.Plan.RunUnits), sensitivity 6": 1,
		"release per row on data with units":                                           5,
		// zCDP rows: rho = eps^2/2 = 0.5, and 4 rho for twice the sensitivity.
		"discrete Gaussian (noise.NewDiscreteGaussian)": 0.5,
		"grid discrete Gaussian (noise.NewGaussian)":    0.5,
		"discrete Gaussian with sigma 1% too small":     0.5 / (0.99 * 0.99),
		"grid discrete Gaussian calibrated to sensitiv": 2,
	}
	seen := map[string]bool{}
	r := noise.NewSeeded(2024)
	short := 0
	for _, c := range cases {
		if testing.Short() && slices.ContainsFunc(slowSampling, func(p string) bool { return strings.HasPrefix(c.Mechanism, p) }) {
			c.X, c.XPrime = nil, nil
			short++
		}
		rows, err := c.Run(bg, r, SampleConfig{Samples: 6000})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 0 && !(testing.Short() && c.Exact == nil) {
			t.Errorf("%s: nothing audited", c.Mechanism)
		}
		for _, row := range rows {
			t.Logf("%s (%s): %.4f against claim %.4f, %v", row.Mechanism, row.Method, row.Measured, row.Claimed, row.Elapsed)
			want := Pass
			if c.Control {
				want = Violation
			}
			if row.Verdict != want {
				t.Errorf("%s (%s): %s %v against claim %v, want %v", row.Mechanism, row.Method, row.VerdictText(), row.Measured, row.Claimed, want)
			}
			if row.Method == "sampled" && !c.Control && row.Measured > row.Claimed {
				t.Errorf("%s: sampled bound %v above the claim %v", row.Mechanism, row.Measured, row.Claimed)
			}
			if row.Method != "exact" {
				continue
			}
			for prefix, v := range known {
				if strings.HasPrefix(row.Mechanism, prefix) {
					seen[prefix] = true
					// Grid noise and the prior mechanism's safety margin
					// keep the loss a hair below the nominal value.
					if row.Measured > v*(1+1e-9) || row.Measured < v*(1-1e-5) {
						t.Errorf("%s: exact %v, want %v", row.Mechanism, row.Measured, v)
					}
				}
			}
		}
	}
	for prefix := range known {
		if !seen[prefix] {
			t.Errorf("no exact audit of %q", prefix)
		}
	}
	if testing.Short() {
		if short != 3 {
			t.Errorf("-short left out the sampled audits of %d cases, want 3 (slowSampling is out of date)", short)
		}
		t.Logf("-short: the sampled audits of %d slow cases were left out", short)
	}
}

func TestCasesRejectsUnsetEpsilon(t *testing.T) {
	if _, err := Cases(bg, privacy.Epsilon{}); err == nil {
		t.Error("zero eps accepted")
	}
}

// TestExactZCDP pins the zCDP audit: the summed divergence equals
// alpha D^2/(2 s^2) when (alpha-1) D is an integer (every order of
// zcdpAlphas for D = 4), the closed form used above s = 64 agrees with the
// summation at s = 64, and the measured rho is D^2/(2 s^2).
func TestExactZCDP(t *testing.T) {
	for _, s := range []float64{0.8, 3, 64} {
		for _, alpha := range zcdpAlphas {
			got := renyiDiscreteGaussian(s, 0, 4, alpha)
			if want := alpha * 16 / (2 * s * s); math.Abs(got-want) > 1e-9*want {
				t.Errorf("s %v alpha %v: D_alpha %v, want %v", s, alpha, got, want)
			}
		}
		ex, _ := exactZCDP(s, 3, 7, 1)
		if want := 16 / (2 * s * s); math.Abs(ex.Epsilon-want) > 1e-9*want {
			t.Errorf("s %v: measured rho %v, want %v", s, ex.Epsilon, want)
		}
	}
	// A non-integer (alpha-1) D gives strictly less: D = 1, alpha = 1.5 at
	// s = 0.7 (the theta ratio is visibly below 1 there).
	if got, bound := renyiDiscreteGaussian(0.7, 0, 1, 1.5), 1.5/(2*0.49); !(got < bound*(1-1e-6)) {
		t.Errorf("D_1.5 = %v, want below %v", got, bound)
	}
	if ex, _ := exactZCDP(100, 0, 1, 0.5*0.99/1e4); ex.Verdict != Violation {
		t.Errorf("closed form: rho 1/(2 10^4) against a smaller claim: %v", ex.Verdict)
	}
}
