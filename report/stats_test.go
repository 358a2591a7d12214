package report

import (
	"math"
	"testing"
)

func TestSummarize(t *testing.T) {
	s := Summarize([]float64{4, 1, 3, 2, 5})
	// Quantile q at position q(n-1) of 1 2 3 4 5: the 10th percentile at
	// 0.4 (1.4), the 90th at 3.6 (4.6).
	want := Summary{N: 5, Min: 1, P10: 1.4, Median: 3, P90: 4.6, Max: 5, Mean: 3}
	if !near(s.P10, want.P10) || !near(s.P90, want.P90) || s.N != 5 || s.Min != 1 || s.Median != 3 || s.Max != 5 || s.Mean != 3 {
		t.Errorf("Summarize = %+v, want %+v", s, want)
	}
	if s := Summarize([]float64{6.2}); s.P10 != 6.2 || s.P90 != 6.2 || s.Median != 6.2 {
		t.Errorf("one value: %+v", s)
	}
	if s := Summarize(nil); s.N != 0 {
		t.Errorf("no value: %+v", s)
	}
}

func TestLargestCells(t *testing.T) {
	tab := &Table{
		TableMeta: TableMeta{Cuboid: []string{"a"}},
		Values:    [][]string{{"w", "x", "y", "z"}},
		Counts:    []float64{40, 0, 200, 40},
		Margins:   []float64{4, 4, 5, 6},
	}
	got := LargestCells(tab, 3)
	// 200 first, then the two 40s in file order; z's 6/40 = 15%.
	if len(got) != 3 || got[0].Label != "y" || got[0].Relative != 0.025 || got[1].Label != "w" || got[1].Relative != 0.1 ||
		got[2].Label != "z" || got[2].Relative != 0.15 {
		t.Errorf("LargestCells = %+v", got)
	}
	if got := LargestCells(tab, 10); len(got) != 4 || !math.IsNaN(got[3].Relative) || got[3].Label != "x" {
		t.Errorf("a zero count has no relative margin: %+v", got)
	}
	rel, skipped := RelativeMargins(tab)
	if skipped != 1 || len(rel) != 3 || rel[0] != 0.025 || rel[1] != 0.1 || rel[2] != 0.15 {
		t.Errorf("RelativeMargins = %v, %d skipped", rel, skipped)
	}
	for _, c := range []struct{ x, want float64 }{{0.1, 2.0 / 3}, {0.09, 1.0 / 3}, {0.01, 0}, {1, 1}} {
		if got := FractionWithin(rel, c.x); got != c.want {
			t.Errorf("FractionWithin(%v) = %v, want %v", c.x, got, c.want)
		}
	}
}

func TestStdError(t *testing.T) {
	v := 6.25
	if se, ok := StdError(TableMeta{Variance: &v}); !ok || se != 2.5 {
		t.Errorf("StdError = %v, %v", se, ok)
	}
	if _, ok := StdError(TableMeta{}); ok {
		t.Error("a variance not stated gives a standard error")
	}
}
