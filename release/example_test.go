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
func ExampleReleaseCube() {
	s, _ := domain.NewSchema([]domain.Dimension{
		{Name: "sex", Values: []string{"F", "M"}},
		{Name: "age", Values: []string{"0-17", "18-64", "65+"}},
	})
	c, _ := cube.New(s, cube.DefaultCellLimit)
	copy(c.Counts, []float64{10, 40, 7, 12, 35, 5})
	age, _ := s.CuboidOf("age")
	eps, _ := privacy.NewEpsilon(1)
	rel, err := release.ReleaseCube(context.Background(), c, release.ReleaseSpec{
		Epsilon: eps,
		Exact:   []domain.Cuboid{age},
		Cuboid:  domain.Base(s.NumDims()),
	}, noise.NewSeeded(1)) // seeded: reproducible, NOT private
	if err != nil {
		panic(err)
	}
	fmt.Println("sensitivity:", rel.Sensitivity, "-", rel.SensitivityRule)
	// The age totals hold exactly in the release.
	for j := range 3 {
		fmt.Printf("age %s: %s\n", s.Dim(1).Values[j], domain.FormatCount(rel.Counts[j]+rel.Counts[3+j]))
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

// PlanRelease gives the privacy story of a release before its counts exist.
func ExamplePlanRelease() {
	s, _ := domain.NewSchema([]domain.Dimension{
		{Name: "sex", Values: []string{"F", "M"}},
		{Name: "age", Values: []string{"young", "middle", "old"}},
	})
	eps, _ := privacy.NewEpsilon(1)
	plan, err := release.PlanRelease(s, release.ReleaseSpec{Epsilon: eps, Cuboid: 3, Exact: []domain.Cuboid{1}}, false)
	if err != nil {
		fmt.Println(err)
		return
	}
	m := plan.Metadata()
	fmt.Println(m.Sensitivity, m.Private, m.Guarantee)
	// Output:
	// 2 true unconditional
}
