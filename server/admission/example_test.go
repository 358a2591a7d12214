package admission_test

import (
	"fmt"

	"github.com/knowdp/knowdp/server/admission"
)

// A key may make a burst of requests; a refused request's planning work is
// charged to its key, which then waits for its bucket to refill.
func Example() {
	c := admission.New(admission.Config{Rate: 0.001, Burst: 2, Compute: 1, InFlight: 4})
	fmt.Println(c.Allow("key"), c.Allow("key"), c.Allow("key"))
	fmt.Println(c.Allow("another"))
	// A request that would plan 2^20 base cells costs 16 tokens if it is
	// refused: more than a burst, so the key must hold a full burst.
	tokens, ok := c.Afford("another", 1<<20)
	fmt.Println(tokens, ok)
	c.ChargeRefused("another", 1<<20)
	fmt.Println(c.Allow("another"))
	// Output:
	// true true false
	// true
	// 2 false
	// false
}
