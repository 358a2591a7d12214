package resbasis_test

import (
	"fmt"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate/resbasis"
)

// A 2×3 table measured once with noise of variance 1 per cell, its grand
// total published exactly (21, which the noisy cells happen to add up to,
// so the estimate keeps them). A row total sums 3 noisy cells (variance 3)
// less what the exact total explains: 3 - 3·3/6 = 1.5; a cell keeps
// 1 - 1/6 of its variance.
func Example() {
	sizes := []int{2, 3}
	table, rows := domain.Cuboid(0b11), domain.Cuboid(0b01)
	meas := []resbasis.Measurement{{Cuboid: table, Variance: 1}}
	b := resbasis.New(sizes, []domain.Cuboid{0}, []resbasis.Table{{Cuboid: table, Weight: 1}, {Cuboid: rows, Weight: 1}}, meas)
	b.Cover(meas)
	est := b.Estimate([]domain.Cuboid{rows, table},
		[]resbasis.Marginal{{Cuboid: 0, Counts: []float64{21}}},
		[][]float64{{1, 2, 3, 4, 5, 6}})
	fmt.Printf("%v %.4f\n", est[0], b.CellVariance(rows))
	fmt.Printf("%v %.4f\n", est[1], b.CellVariance(table))
	// Output:
	// [6 15] 1.5000
	// [1 2 3 4 5 6] 0.8333
}
