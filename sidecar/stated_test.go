package sidecar

import "testing"

// TestStatedUp pins how a loss is stated: the shortest decimal at least
// the exact spend and within a billionth of it (never understated).
func TestStatedUp(t *testing.T) {
	for _, tc := range []struct{ x, want float64 }{
		{0.9999999999990905, 1},  // the sum of shares on the 2^-40 grid of a budget of 1
		{0.499999999998181, 0.5}, // the same for rho 0.5
		{1, 1},
		{0.5, 0.5},
		{0.12180726190399582, 0.121807262},
		{5.221534444519444, 5.221534445},
		{0.1, 0.1},
		{3e-7, 3e-7},
		{0, 0},
	} {
		got := StatedUp(tc.x)
		if got != tc.want {
			t.Errorf("StatedUp(%v) = %v, want %v", tc.x, got, tc.want)
		}
		if got < tc.x || got-tc.x > 1e-9*tc.x {
			t.Errorf("StatedUp(%v) = %v is below it or more than a billionth above", tc.x, got)
		}
	}
}
