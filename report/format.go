package report

import (
	"math"
	"strconv"
	"strings"
)

// Up formats x ≥ 0 with at most sig (≤ 7) significant digits, rounded up: the
// number shown is never below the number meant. A privacy loss stated as
// 0.9999999999990905 reads as 1, and an ε of 0.46091294814 as 0.460913;
// a margin of error or a deviation is never made to look smaller than it
// is. Negative numbers, infinities and NaN are formatted as they are.
func Up(x float64, sig int) string {
	if sig < 1 {
		sig = 1
	}
	if x <= 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return Num(roundUp(x, sig))
}

// roundUp returns the float64 nearest to the smallest decimal of sig
// significant digits that is ≥ x (x > 0, finite). That float is itself ≥ x:
// x is a float64 no greater than the decimal, and rounding to the nearest
// float64 is monotone.
func roundUp(x float64, sig int) float64 { return roundDecimal(x, sig, true) }

// roundDown returns the float64 nearest to the largest decimal of sig
// significant digits that is ≤ x (x > 0, finite).
func roundDown(x float64, sig int) float64 { return roundDecimal(x, sig, false) }

// roundDecimal cuts the shortest decimal that reads back as x to sig
// digits, adding one unit of the last digit kept when rounding up. Where
// digits are cut, the cut is at least one unit of the last kept digit
// away from x, far more than x's own rounding error, so the direction
// holds for x itself and not only for its decimal form.
func roundDecimal(x float64, sig int, up bool) float64 {
	s := strconv.FormatFloat(x, 'e', -1, 64) // "d.ddde±XX"
	mant, exp, _ := strings.Cut(s, "e")
	digits := strings.Replace(mant, ".", "", 1)
	if len(digits) <= sig {
		return x
	}
	m, _ := strconv.ParseInt(digits[:sig], 10, 64)
	if up {
		m++ // 999 + 1 carries into one more digit, at the same scale
	}
	e, _ := strconv.Atoi(exp)
	v, _ := strconv.ParseFloat(strconv.FormatInt(m, 10)+"e"+strconv.Itoa(e-(sig-1)), 64)
	return v
}

// Sig formats x to at most sig significant digits, to the nearest: for
// numbers that describe the mechanism (a sensitivity, a noise scale),
// where neither direction of rounding is the safe one.
func Sig(x float64, sig int) string {
	r := strconv.FormatFloat(x, 'g', sig, 64)
	v, _ := strconv.ParseFloat(r, 64)
	return Num(v)
}

// Num formats a released count or a statistic of counts for reading: an
// integer in full, anything else to 7 significant digits, nearest (a count
// is what it is, neither a loss nor an error to be bounded), without an
// exponent from 1e-4 up.
func Num(x float64) string {
	a := math.Abs(x)
	if x == math.Trunc(x) && a < 1e15 {
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	r := strconv.FormatFloat(x, 'g', 7, 64)
	if strings.Contains(r, "e") && a >= 1 && a < 1e15 {
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	return r
}

// Percent formats a fraction f ≥ 0 as a percentage of at most 3
// significant digits, rounded up ("46.1%" for 0.46091): for shares of a
// loss and errors relative to a count, which are never understated.
func Percent(f float64) string { return percent(f, roundUp) }

// PercentDown is Percent rounded down: for the fraction of cells that meet
// a standard, which is never overstated.
func PercentDown(f float64) string { return percent(f, roundDown) }

// PercentNear is Percent rounded to the nearest: for a proportion that
// describes, such as a measurement's part of the total (its share itself
// is shown rounded up).
func PercentNear(f float64) string {
	return percent(f, func(x float64, sig int) float64 {
		v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', sig, 64), 64)
		return v
	})
}

func percent(f float64, round func(float64, int) float64) string {
	if f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return strconv.FormatFloat(100*f, 'g', -1, 64) + "%"
	}
	// Round the fraction, not 100 f: 100 × 0.5 may be 50.000000000000007,
	// which would round up to 50.1.
	p := 100 * round(f, 3)
	s := strconv.FormatFloat(p, 'g', 3, 64)
	if strings.Contains(s, "e") && p >= 1 {
		s = strconv.FormatFloat(p, 'f', 0, 64)
	}
	return s + "%"
}
