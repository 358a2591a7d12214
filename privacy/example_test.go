package privacy_test

import (
	"errors"
	"fmt"
	"math"

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

// A zCDP budget: Gaussian-noise queries charge rho, pure-eps ones charge
// eps^2/2, and the total converts to an (eps, delta) guarantee.
func ExampleConcentrated() {
	total, _ := privacy.NewRho(0.5)
	a := privacy.NewAccountant(privacy.Concentrated(total))
	quarter, _ := privacy.NewRho(0.25)
	fmt.Println(a.Spend(privacy.Concentrated(quarter)))
	one, _ := privacy.NewEpsilon(0.5)
	fmt.Println(a.Spend(privacy.PureAsRho(one))) // rho = 0.125
	fmt.Println(a.Spent())
	eps, _ := privacy.EpsilonFor(a.Spent().Rho(), 1e-6)
	fmt.Printf("(%.4f, 1e-06)-DP\n", eps)
	// Output:
	// <nil>
	// <nil>
	// rho=0.375
	// (4.4407, 1e-06)-DP
}

// The tight conversion of Canonne, Kamath and Steinke against the simple
// bound rho + 2 sqrt(rho log(1/delta)).
func ExampleEpsilonFor() {
	eps, _ := privacy.EpsilonFor(0.5, 1e-6)
	delta, _ := privacy.DeltaFor(0.5, 5)
	fmt.Printf("eps %.4f (simple bound %.4f)\n", eps, 0.5+2*math.Sqrt(0.5*math.Log(1e6)))
	fmt.Printf("delta %.4g\n", delta)
	// Output:
	// eps 5.2215 (simple bound 5.7565)
	// delta 2.896e-06
}

// A budget mixing a pure-eps part and a zCDP part, as one (eps, delta)
// guarantee: eps_b + EpsilonFor(rho_b, delta - delta_b).
func ExampleBudget_ApproxEpsilon() {
	e, _ := privacy.NewEpsilon(0.5)
	r, _ := privacy.NewRho(0.5)
	b := privacy.Sequential(privacy.Pure(e), privacy.Concentrated(r))
	eps, _ := b.ApproxEpsilon(1e-6)
	fmt.Printf("%v is (%.4f, 1e-06)-DP\n", b, eps)
	// Output: eps=0.5, rho=0.5 is (5.7215, 1e-06)-DP
}
