package metricdp_test

import (
	"context"
	"fmt"

	"github.com/knowdp/knowdp/metricdp"
)

// The paper's Example 1: Native = Y is sensitive (budget 0.1), the other
// attribute values are not (budget 2). Counting natives needs ten times the
// noise of counting men.
func ExampleScale() {
	attrs := []metricdp.Attribute{
		{Name: "gender", Values: []string{"M", "F"}, Budgets: []float64{2, 2}},
		{Name: "native", Values: []string{"Y", "N"}, Budgets: []float64{0.1, 2}},
		{Name: "age", Values: []string{"A", "B"}, Budgets: []float64{2, 2}},
	}
	m, _ := metricdp.NewAttributeMetric(attrs, metricdp.FullProduct(attrs))
	// Universe order: MYA MYB MNA MNB FYA FYB FNA FNB.
	natives := []float64{1, 1, 0, 0, 1, 1, 0, 0}
	men := []float64{1, 1, 1, 1, 0, 0, 0, 0}
	bn, _ := metricdp.Scale(context.Background(), m, natives)
	bm, _ := metricdp.Scale(context.Background(), m, men)
	fmt.Printf("natives: scale %g, men: scale %g\n", bn, bm)
	// Output: natives: scale 10, men: scale 0.5
}

// Four strategies for sharing each pair's budget between two queries. The
// optimum, b_2 = 2^(1/3) b_1 on the binding pair 2 t_1 + t_2 = 2 (t = 1/b),
// can be checked by hand; strategy 3 favours the query whose stand-alone
// scale is smaller.
func ExampleAllocate() {
	ctx := context.Background()
	m, _ := metricdp.NewEuclidean([][]float64{{0}, {1}, {3}}, 1)
	q, _ := metricdp.NewQueries([][]float64{{0, 1, 3}, {0, 0, 1}})
	for _, s := range []metricdp.Strategy{metricdp.EqualShare, metricdp.SameScale, metricdp.Greedy, metricdp.Optimal} {
		b, _ := metricdp.Allocate(ctx, m, q, s)
		fmt.Printf("%-8s %.4f %.4f  sum of squares %.4f\n", s, b[0], b[1], b[0]*b[0]+b[1]*b[1])
	}
	// Output:
	// equal    2.0000 1.0000  sum of squares 5.0000
	// same     1.5000 1.5000  sum of squares 4.5000
	// greedy   3.0000 0.7500  sum of squares 9.5625
	// optimal  1.6300 1.2937  sum of squares 4.3304
}

// Queries of very different scales: a count of 100 at one element next to a
// 0/1 indicator. The optimal allocation gives the count the noise its pair
// (b, c) at distance 1 forces, 100, and the indicator what is left of pair
// (a, c)'s budget: 1/(sqrt(10001) - 1). Strategy is Optimal and Note empty;
// had the solver failed, Strategy would name the best of strategies 1-3
// used instead and Note would say why.
func ExampleNewAllocation() {
	m, _ := metricdp.NewEuclidean([][]float64{{0, 0}, {100, 0}, {100, 1}}, 1)
	q, _ := metricdp.NewQueries([][]float64{{0, 0, 100}, {0, 1, 1}})
	a, err := metricdp.NewAllocation(context.Background(), m, q, metricdp.Optimal)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%v %.6f %.7f %q\n", a.Strategy, a.Scales[0], a.Scales[1], a.Note)
	// Output: optimal 100.000000 0.0101005 ""
}
