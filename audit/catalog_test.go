package audit

import (
	"math"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
)

// TestCases audits every mechanism of the library on its representative
// neighbours: the correct ones pass, exactly and by sampling, the controls
// are flagged both ways, and the exact losses are the known ones.
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
	}
	seen := map[string]bool{}
	r := noise.NewSeeded(2024)
	for _, c := range cases {
		rows, err := c.Run(bg, r, SampleConfig{Samples: 6000})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 0 {
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
}

func TestCasesRejectsUnsetEpsilon(t *testing.T) {
	if _, err := Cases(bg, privacy.Epsilon{}); err == nil {
		t.Error("zero eps accepted")
	}
}
