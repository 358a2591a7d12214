package unit

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/sensitivity"
)

// Histogram counts units by their number of rows: h[n] units have n rows,
// for n below len(h)-1, and h[len(h)-1] units have len(h)-1 rows or more.
// It is private data, like the rows.
type Histogram []int64

// NewHistogram returns the histogram of perUnit (each unit's number of
// rows) with top+2 entries: exact up to top rows, then "more than top".
func NewHistogram(perUnit []int64, top int) Histogram {
	h := make(Histogram, top+2)
	for _, n := range perUnit {
		h[min(max(n, 0), int64(top)+1)]++
	}
	return h
}

// Add adds another histogram of the same length (a pipeline's partial
// histograms).
func (h Histogram) Add(o Histogram) error {
	if len(o) != len(h) {
		return fmt.Errorf("unit: adding a histogram of %d entries to one of %d", len(o), len(h))
	}
	for i, x := range o {
		h[i] += x
	}
	return nil
}

// Units returns the number of units.
func (h Histogram) Units() int64 {
	n := int64(0)
	for _, x := range h {
		n += x
	}
	return n
}

// ChooseMaxRows returns a private q-quantile of the number of rows per unit
// among the candidates Candidates(limit): the exponential mechanism with
// utility u(k) = -|#{units with at most k rows} - q N| (N units), which one
// unit added, removed or changed moves by at most 1, so choosing k with
// probability proportional to exp(eps u(k) / 2) is eps-differentially
// private per unit. h must be exact up to limit rows (len(h) >= limit+2),
// q in (0, 1] and limit in [1, MaxUnitRows]; these are the only errors,
// decided before the counts are looked at.
func ChooseMaxRows(r *noise.Rand, h Histogram, q float64, limit int, eps privacy.Epsilon) (int, error) {
	if err := checkChoice(q, limit, eps); err != nil {
		return 0, err
	}
	if len(h) < limit+2 {
		return 0, fmt.Errorf("unit: a histogram of %d entries for candidates up to %d rows", len(h), limit)
	}
	cands := Candidates(limit)
	at := h
	logw := make([]float64, len(cands))
	below := int64(at[0])
	target := q * float64(h.Units())
	e := eps.Float64()
	k := 0
	for i, c := range cands {
		for ; k < c; k++ {
			below += at[k+1]
		}
		logw[i] = -e * math.Abs(float64(below)-target) / 2
	}
	i, err := noise.Choose(r, logw)
	if err != nil {
		return 0, fmt.Errorf("unit: %w", err)
	}
	return cands[i], nil
}

// Candidates returns the values of K a private choice considers: every
// integer up to 10, then a geometric grid (each about 1.25 times the one
// before, rounded up), then limit. A geometric grid keeps the many values
// beyond the quantile from outweighing the right one, which they do on an
// integer grid when epsilon times the number of units is small.
func Candidates(limit int) []int {
	var out []int
	for k := 1; k <= limit; {
		out = append(out, k)
		if k < 10 {
			k++
		} else {
			k = int(math.Ceil(float64(k) * 1.25))
		}
	}
	if out[len(out)-1] != limit {
		out = append(out, limit)
	}
	return out
}

func checkChoice(q float64, limit int, eps privacy.Epsilon) error {
	switch {
	case !(q > 0 && q <= 1):
		return fmt.Errorf("unit: the quantile of rows per unit must be in (0, 1], got %v", q)
	case limit < 1 || limit > sensitivity.MaxUnitRows:
		return fmt.Errorf("unit: the largest candidate for the rows per unit must be in [1, %d], got %d", sensitivity.MaxUnitRows, limit)
	case eps.IsZero():
		return fmt.Errorf("unit: the choice of the rows per unit needs an epsilon > 0")
	}
	return nil
}

// Truncated is a private count of the units that have more than K rows:
// the units the bounding truncates, a private estimate of its bias.
type Truncated struct {
	// K is the bound; Count the true count plus discrete Laplace noise of
	// scale 1/Epsilon (one unit changes the count by at most 1); MOE90 the
	// half-width of the interval that holds the true count with
	// probability 90% under the noise.
	K       int
	Count   float64
	Epsilon float64
	MOE90   float64
}

// CountTruncated returns the private count of the units with more than k
// rows, eps-differentially private per unit; h must be exact up to k rows
// (len(h) >= k+2).
func CountTruncated(r *noise.Rand, h Histogram, k int, eps privacy.Epsilon) (Truncated, error) {
	if k < 1 || k > sensitivity.MaxUnitRows {
		return Truncated{}, fmt.Errorf("unit: rows per unit must be in [1, %d], got %d", sensitivity.MaxUnitRows, k)
	}
	if len(h) < k+2 {
		return Truncated{}, fmt.Errorf("unit: a histogram of %d entries for %d rows per unit", len(h), k)
	}
	if eps.IsZero() {
		return Truncated{}, fmt.Errorf("unit: the count of truncated units needs an epsilon > 0")
	}
	d, err := noise.NewDiscreteLaplace(1 / eps.Float64())
	if err != nil {
		return Truncated{}, fmt.Errorf("unit: %w", err)
	}
	n := int64(0)
	for _, x := range h[k+1:] {
		n += x
	}
	return Truncated{K: k, Count: float64(n + d.Sample(r)), Epsilon: eps.Float64(), MOE90: LaplaceMOE90(eps.Float64())}, nil
}

// LaplaceMOE90 returns the smallest integer m with P(|Z| <= m) >= 0.9 for
// discrete Laplace noise Z of scale 1/eps: P(|Z| > m) = 2 a^(m+1) / (1 + a)
// with a = exp(-eps).
func LaplaceMOE90(eps float64) float64 {
	a := math.Exp(-eps)
	// 2 a^(m+1) / (1+a) <= 0.1  <=>  m + 1 >= log(0.05 (1+a)) / log(a).
	m := math.Ceil(math.Log(0.05*(1+a))/math.Log(a)) - 1
	m = max(m, 0)
	for m > 0 && 2*math.Pow(a, m)/(1+a) <= 0.1 {
		m-- // guard against rounding up one step too many
	}
	return m
}

// identifierWords are words that name who a row is about; a column whose
// name has one as a word, or ends in "id" after one, looks like the
// identifier of a person or household.
var identifierWords = []string{
	"id", "ids", "uid", "pid", "sid", "ssn", "nin", "email", "mail", "phone", "login", "username",
	"person", "persons", "people", "individual", "student", "pupil", "user", "customer", "client",
	"patient", "member", "employee", "worker", "household", "hh", "family", "subject", "participant",
	"respondent", "account", "owner", "voter", "taxpayer", "beneficiary", "name",
}

// LooksLikeIdentifier reports whether a column named name looks like it
// identifies the person (or household...) a row is about: a word of the
// name (split at non-letters and at lower-to-upper case changes) is "id",
// "person", "student", "user", "household"... or ends in "id" after such a
// word ("studentid", "userId"). It reads the name only, never the data, so
// a refusal based on it depends on no private value.
func LooksLikeIdentifier(name string) bool {
	var words []string
	var cur []rune
	prevLower := false
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	for _, c := range name {
		switch {
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			flush()
			prevLower = false
			continue
		case unicode.IsUpper(c) && prevLower:
			flush()
		}
		cur = append(cur, c)
		prevLower = unicode.IsLower(c) || unicode.IsDigit(c)
	}
	flush()
	for _, w := range words {
		if slices.Contains(identifierWords, w) {
			return true
		}
		for _, p := range identifierWords {
			if len(p) > 3 && (w == p+"id" || w == p+"no" || w == p+"number") {
				return true
			}
		}
	}
	return false
}
