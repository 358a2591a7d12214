package release_test

import (
	"context"
	"fmt"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/release"
)

// Release a sex x age table when the age totals are published exactly.
func ExamplePlan_Run() {
	s, _ := domain.NewSchema([]domain.Dimension{
		{Name: "sex", Values: []string{"F", "M"}},
		{Name: "age", Values: []string{"0-17", "18-64", "65+"}},
	})
	c, _ := cube.New(s, cube.DefaultCellLimit)
	copy(c.Counts, []float64{10, 40, 7, 12, 35, 5})
	age, _ := s.ParseView("age")
	eps, _ := privacy.NewEpsilon(1)
	plan, err := release.NewPlan(s, release.Spec{
		Epsilon: eps,
		Exact:   []domain.View{age},
		Tables:  []domain.View{domain.ViewOf(domain.Base(s.NumDims()))},
	})
	if err != nil {
		panic(err)
	}
	counts, err := c.ProjectViews(plan.Needs())
	if err != nil {
		panic(err)
	}
	rel, err := plan.Run(context.Background(), counts, noise.NewSeeded(1)) // seeded: reproducible, NOT private
	if err != nil {
		panic(err)
	}
	t := rel.Tables[0]
	fmt.Println("sensitivity:", t.Sensitivity, "-", t.SensitivityRule)
	// The age totals hold exactly in the release.
	x := t.Counts
	for j := range 3 {
		fmt.Printf("age %s: %s\n", s.Dim(1).Values[j], domain.FormatCount(x[j]+x[3+j]))
	}
	// Output:
	// sensitivity: 2 - Lemma 4.2(i): one exact cuboid {age}
	// age 0-17: 22
	// age 18-64: 75
	// age 65+: 12
}

// Make noisy counts agree with two overlapping published margins, by least
// squares, in two passes per margin.
func ExampleConsistent() {
	s, _ := domain.NewSchema([]domain.Dimension{
		{Name: "a", Values: []string{"a1", "a2"}},
		{Name: "b", Values: []string{"b1", "b2"}},
	})
	noisy := []float64{5.5, 4.1, 2.2, 8.9}
	rows := estimate.Invariant{Cuboid: 1, Counts: []float64{10, 10}} // a1, a2 totals
	cols := estimate.Invariant{Cuboid: 2, Counts: []float64{8, 12}}  // b1, b2 totals
	if err := estimate.Consistent(s, domain.Base(2), noisy, []estimate.Invariant{rows, cols}); err != nil {
		panic(err)
	}
	for _, v := range noisy {
		fmt.Print(domain.FormatCount(v), " ")
	}
	fmt.Println()
	// Output: 6.025 3.975 1.975 8.025
}

// A plan gives the privacy story of a release before its counts exist; a
// release of one cuboid measured itself also gives its noise (Cuboid), for
// pipelines that draw it block by block.
func ExamplePlan_Cuboid() {
	s, _ := domain.NewSchema([]domain.Dimension{
		{Name: "sex", Values: []string{"F", "M"}},
		{Name: "age", Values: []string{"young", "middle", "old"}},
	})
	eps, _ := privacy.NewEpsilon(1)
	sex, _ := s.ParseView("sex")
	plan, err := release.NewPlan(s, release.Spec{Epsilon: eps, Tables: []domain.View{domain.ViewOf(3)}, Exact: []domain.View{sex}})
	if err != nil {
		fmt.Println(err)
		return
	}
	m := plan.Cuboid().Metadata()
	fmt.Printf("sensitivity %d, private %v, %s, Laplace scale %.2f\n", m.Sensitivity, m.Private, m.Guarantee, m.Scale)
	// Output:
	// sensitivity 2, private true, unconditional, Laplace scale 2.00
}
