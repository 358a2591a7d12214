package strategy

import (
	"context"
	"testing"
)

// wide20 is a domain of 20 attributes of sizes 2 to 6.
var wide20 = []int{2, 3, 4, 5, 6, 2, 3, 4, 5, 6, 2, 3, 4, 5, 6, 2, 3, 4, 5, 6}

// BenchmarkOptimize20 plans all 190 two-way marginals of 20 attributes.
// go test ./strategy -run '^$' -bench BenchmarkOptimize20 -benchtime 3x
func BenchmarkOptimize20(b *testing.B) {
	w := kway(wide20, 2)
	for _, mech := range []Mechanism{Gaussian, Laplace} {
		b.Run(mech.String(), func(b *testing.B) {
			for b.Loop() {
				st, err := Optimize(context.Background(), wide20, w, mech, 1, Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(st.Objective, "objective")
				b.ReportMetric(float64(len(st.Measurements)), "measurements")
			}
		})
	}
}
