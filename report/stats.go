package report

import (
	"cmp"
	"math"
	"slices"

	"github.com/knowdp/knowdp/sidecar"
)

// Summary is the distribution of a set of numbers: its extremes, mean and
// deciles.
type Summary struct {
	N                          int
	Min, P10, Median, P90, Max float64
	Mean                       float64
}

// Summarize summarises xs. Quantiles interpolate linearly between order
// statistics: the q-quantile of the sorted x_0 ≤ ... ≤ x_{n-1} is at
// position q(n−1).
func Summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	return Summary{
		N: len(s), Min: s[0], Max: s[len(s)-1], Mean: sum / float64(len(s)),
		P10: quantile(s, 0.1), Median: quantile(s, 0.5), P90: quantile(s, 0.9),
	}
}

// quantile is the q-quantile of sorted s (see Summarize).
func quantile(s []float64, q float64) float64 {
	p := q * float64(len(s)-1)
	i := int(math.Floor(p))
	if i >= len(s)-1 {
		return s[len(s)-1]
	}
	f := p - float64(i)
	return s[i] + f*(s[i+1]-s[i])
}

// CellError is one cell's margin of error relative to its released count.
type CellError struct {
	// Cell is the cell's index in its table and Label its values.
	Cell  int
	Label string
	Count float64
	MOE90 float64
	// Relative is MOE90 / Count: relative to the noisy count, not the true
	// one, which the report never sees. NaN for a count ≤ 0.
	Relative float64
}

// LargestCells returns the n cells of t with the largest released counts
// (ties in file order), each with its margin of error relative to the
// count.
func LargestCells(t *Table, n int) []CellError {
	idx := make([]int, t.Cells())
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(t.Counts[b], t.Counts[a]) })
	idx = idx[:min(n, len(idx))]
	out := make([]CellError, len(idx))
	for k, i := range idx {
		out[k] = CellError{Cell: i, Label: t.Label(i), Count: t.Counts[i], MOE90: t.Margins[i], Relative: relative(t.Margins[i], t.Counts[i])}
	}
	return out
}

// relative is moe/count, NaN for a count ≤ 0.
func relative(moe, count float64) float64 {
	if count <= 0 {
		return math.NaN()
	}
	return moe / count
}

// RelativeMargins returns the sorted margins of error relative to the
// counts of t's cells with a positive count, and how many cells were left
// out (count ≤ 0).
func RelativeMargins(t *Table) (rel []float64, skipped int) {
	for i, c := range t.Counts {
		if c <= 0 {
			skipped++
			continue
		}
		rel = append(rel, t.Margins[i]/c)
	}
	slices.Sort(rel)
	return rel, skipped
}

// FractionWithin returns the fraction of sorted xs that are ≤ x.
func FractionWithin(xs []float64, x float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	n, _ := slices.BinarySearchFunc(xs, x, func(a, b float64) int {
		if a <= b {
			return -1
		}
		return 1
	})
	return float64(n) / float64(len(xs))
}

// StdError is a table's standard error per cell, √variance, where the
// metadata states the variance.
func StdError(t TableMeta) (float64, bool) {
	if t.Variance == nil || *t.Variance < 0 {
		return 0, false
	}
	return math.Sqrt(*t.Variance), true
}

// Level is one level of a release across a hierarchy: the error the
// metadata states for it and the tables at it.
type Level struct {
	sidecar.LevelError
	// Tables are the indices of its tables in Release.Tables.
	Tables []int
}

// Levels groups the release's tables by the levels its metadata lists
// (none for a release without a hierarchy).
func (rel *Release) Levels() []Level {
	var out []Level
	for _, le := range rel.Meta.Levels {
		l := Level{LevelError: le}
		for i, t := range rel.Tables {
			if slices.Contains(le.Tables, t.Name()) {
				l.Tables = append(l.Tables, i)
			}
		}
		out = append(out, l)
	}
	return out
}

// MOE90s returns the margins of error of the cells of the given tables.
func (rel *Release) MOE90s(tables []int) []float64 {
	var out []float64
	for _, i := range tables {
		out = append(out, rel.Tables[i].Margins...)
	}
	return out
}
