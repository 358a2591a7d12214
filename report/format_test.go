package report

import (
	"math"
	"strconv"
	"testing"
)

func TestUp(t *testing.T) {
	for _, c := range []struct {
		x    float64
		sig  int
		want string
	}{
		{0.9999999999990905, 6, "1"},           // issue 31: a spent budget of 1 reads as 1
		{0.46091294814050343, 6, "0.460913"},   // nearest would be 0.460913 too
		{0.12345400000000001, 5, "0.12346"},    // nearest is 0.12345: below x
		{0.5, 3, "0.5"},                        // exact stays exact
		{9.99991, 5, "10"},                     // the carry adds a digit
		{26.84598205795642, 4, "26.85"},        // a moe90
		{2.571115243810369e-10, 3, "2.58e-10"}, // a tiny gap keeps its exponent
		{123456789, 3, "124000000"},            // no exponent for large numbers
		{0, 4, "0"},
		{-1.5, 4, "-1.5"},
		{math.Inf(1), 4, "+Inf"},
	} {
		got := Up(c.x, c.sig)
		if got != c.want {
			t.Errorf("Up(%v, %d) = %q, want %q", c.x, c.sig, got, c.want)
		}
		if c.x > 0 && !math.IsInf(c.x, 0) {
			if v, _ := strconv.ParseFloat(got, 64); v < c.x {
				t.Errorf("Up(%v, %d) = %q is below x", c.x, c.sig, got)
			}
		}
	}
}

// TestUpNeverBelow checks the rounding direction on many numbers, against
// the value the printed text parses to.
func TestUpNeverBelow(t *testing.T) {
	x := 1e-7
	for i := 0; i < 20000; i++ {
		x *= 1.0023
		for _, sig := range []int{1, 3, 6} {
			s := Up(x, sig)
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || v < x {
				t.Fatalf("Up(%v, %d) = %q, below x", x, sig, s)
			}
			if v > x*(1+2*math.Pow(10, float64(1-sig))) {
				t.Fatalf("Up(%v, %d) = %q, more than one unit of the last digit above", x, sig, s)
			}
			if d := roundDown(x, sig); d > x || d < x*(1-2*math.Pow(10, float64(1-sig))) {
				t.Fatalf("roundDown(%v, %d) = %v", x, sig, d)
			}
		}
	}
}

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		f              float64
		up, near, down string
	}{
		{0.5, "50%", "50%", "50%"},
		{0.46091294814050343, "46.1%", "46.1%", "46%"},
		{0.75 / 0.9999999999990905, "75.1%", "75%", "75%"},
		{0.99999, "100%", "100%", "99.9%"},
		{12.3456, "1240%", "1230%", "1230%"},
		{2.571115243810369e-10, "2.58e-08%", "2.57e-08%", "2.57e-08%"},
		{0, "0%", "0%", "0%"},
	} {
		if got := Percent(c.f); got != c.up {
			t.Errorf("Percent(%v) = %q, want %q", c.f, got, c.up)
		}
		if got := PercentNear(c.f); got != c.near {
			t.Errorf("PercentNear(%v) = %q, want %q", c.f, got, c.near)
		}
		if got := PercentDown(c.f); got != c.down {
			t.Errorf("PercentDown(%v) = %q, want %q", c.f, got, c.down)
		}
	}
}

func TestNumAndSig(t *testing.T) {
	for _, c := range []struct {
		x    float64
		want string
	}{
		{5226, "5226"},
		{134935, "134935"},
		{1e8, "100000000"},
		{882.6696089506149, "882.6696"},
		{12345678.9, "12345679"},
		{-3.25, "-3.25"},
		{1.5e-7, "1.5e-07"},
	} {
		if got := Num(c.x); got != c.want {
			t.Errorf("Num(%v) = %q, want %q", c.x, got, c.want)
		}
	}
	if got := Sig(2.000000000001819, 6); got != "2" {
		t.Errorf("Sig(2.000000000001819, 6) = %q, want 2 (the nearest, not rounded up)", got)
	}
	if got := Sig(1.4142135623730951, 6); got != "1.41421" {
		t.Errorf("Sig(√2, 6) = %q", got)
	}
}
