package noise

import (
	"math"
	"slices"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// checkFit tests sorted integer samples zs against their exact law,
// cdf(z) = P(Z <= z): chi-square over the bins (edges[k-1], edges[k]]
// (increasing edges, bins of about equal probability) at level 1e-4, and
// the Kolmogorov-Smirnov distance against 1.95/sqrt(n), which is
// conservative for a discrete law. label starts each error.
func checkFit(t *testing.T, label string, zs, edges []int64, cdf func(int64) float64) {
	t.Helper()
	n := len(zs)
	var stat float64
	prev, pos := 0.0, 0
	for k := 0; k <= len(edges); k++ {
		c, cnt := 1.0, n-pos
		if k < len(edges) {
			c = cdf(edges[k])
			end, _ := slices.BinarySearch(zs, edges[k]+1)
			cnt, pos = end-pos, end
		}
		e := (c - prev) * float64(n)
		prev = c
		stat += (float64(cnt) - e) * (float64(cnt) - e) / e
	}
	if crit := (distuv.ChiSquared{K: float64(len(edges))}).Quantile(1 - 1e-4); stat > crit {
		t.Errorf("%s: chi-square %.1f over %d bins > %.1f", label, stat, len(edges)+1, crit)
	}
	var ks float64
	for i := 0; i < n; {
		j := i
		for j < n && zs[j] == zs[i] {
			j++
		}
		ks = max(ks, math.Abs(float64(j)/float64(n)-cdf(zs[i])), math.Abs(float64(i)/float64(n)-cdf(zs[i]-1)))
		i = j
	}
	if crit := 1.95 / math.Sqrt(float64(n)); ks > crit {
		t.Errorf("%s: KS %v > %v", label, ks, crit)
	}
}
