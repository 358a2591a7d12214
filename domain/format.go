package domain

import (
	"math"
	"strconv"
	"strings"
)

// FormatExact formats a count as the shortest decimal that parses back to
// the same float64, in fixed notation (12345678, not 1.2345678e+07),
// without a negative zero: printed tables keep their sums exactly.
func FormatExact(v float64) string {
	return string(AppendExact(nil, v))
}

// AppendExact appends FormatExact(v) to b, for writers of many rows.
func AppendExact(b []byte, v float64) []byte {
	if v == 0 {
		v = 0
	}
	return strconv.AppendFloat(b, v, 'f', -1, 64)
}

// FormatCount formats a count rounded to 6 decimal places, without a
// negative zero, for display; files write counts in full (FormatExact), so
// that their sums hold. From 2^33 on, float64 values are spaced more
// than 1e-6 apart, so the shortest decimal that identifies v already has at
// most 6 decimals and v is printed as it is: rounding v*1e6 there would
// round twice and could print a neighbouring value (2^53-1 as 2^53).
func FormatCount(v float64) string {
	if math.Abs(v) < 0x1p33 {
		v = math.Round(v*1e6) / 1e6 // below 2^53, where math.Round is exact
	}
	if v == 0 {
		v = 0
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func CsvField(s string) string {
	if strings.ContainsAny(s, ",\"\n\r") {
		return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
	}
	return s
}
