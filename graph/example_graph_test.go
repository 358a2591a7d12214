package graph_test

import (
	"fmt"

	"github.com/knowdp/knowdp/graph"
)

// With the out-degree of one vertex public and nothing else, replacing one
// of its out-edges by another is an induced neighbour two edges away
// (Lemma 5.1(ii) says 1).
func ExampleDirectedGraphSensitivity() {
	sens, _ := graph.DirectedGraphSensitivity(10, []int{0}, nil)
	fmt.Println(sens.Value)
	// Output: 2
}
