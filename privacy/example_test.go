package privacy_test

import (
	"errors"
	"fmt"

	"github.com/knowdp/knowdp/privacy"
)

func ExampleAccountant() {
	one, _ := privacy.NewEpsilon(1)
	a := privacy.NewAccountant(privacy.Pure(one))
	tenth, _ := privacy.NewEpsilon(0.1)
	for range 10 {
		if err := a.Spend(privacy.Pure(tenth)); err != nil {
			fmt.Println(err)
		}
	}
	err := a.Spend(privacy.Pure(tenth))
	fmt.Println(errors.Is(err, privacy.ErrOverspend))
	fmt.Println(err)
	// Output:
	// true
	// privacy budget exceeded: spending eps=0.1 would exceed the remaining eps=5.45697e-12 by eps=0.1
}

// Queries over disjoint parts of the data compose in parallel: the loss is
// the largest of theirs, not the sum.
func ExampleParallel() {
	a, _ := privacy.NewEpsilon(0.3)
	b, _ := privacy.NewEpsilon(0.5)
	fmt.Println(privacy.Parallel(privacy.Pure(a), privacy.Pure(b)))
	fmt.Println(privacy.Sequential(privacy.Pure(a), privacy.Pure(b)))
	// Output:
	// eps=0.5
	// eps=0.8
}
