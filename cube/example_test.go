package cube_test

import (
	"context"
	"fmt"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
)

// Release a sex x age table when the age totals are published exactly.
func ExampleReleaseCube() {
	s, _ := cube.NewSchema([]cube.Dimension{
		{Name: "sex", Values: []string{"F", "M"}},
		{Name: "age", Values: []string{"0-17", "18-64", "65+"}},
	})
	c, _ := cube.New(s, cube.DefaultCellLimit)
	copy(c.Counts, []float64{10, 40, 7, 12, 35, 5})
	age, _ := s.CuboidOf("age")
	eps, _ := privacy.NewEpsilon(1)
	rel, err := cube.ReleaseCube(context.Background(), c, cube.ReleaseSpec{
		Epsilon: eps,
		Exact:   []cube.Cuboid{age},
		Cuboid:  cube.Base(s.NumDims()),
	}, noise.NewSeeded(1)) // seeded: reproducible, NOT private
	if err != nil {
		panic(err)
	}
	fmt.Println("sensitivity:", rel.Sensitivity, "-", rel.SensitivityRule)
	// The age totals hold exactly in the release.
	for j := range 3 {
		fmt.Printf("age %s: %s\n", s.Dim(1).Values[j], cube.FormatCount(rel.Counts[j]+rel.Counts[3+j]))
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
	s, _ := cube.NewSchema([]cube.Dimension{
		{Name: "a", Values: []string{"a1", "a2"}},
		{Name: "b", Values: []string{"b1", "b2"}},
	})
	noisy := []float64{5.5, 4.1, 2.2, 8.9}
	rows := cube.Invariant{Cuboid: 1, Counts: []float64{10, 10}} // a1, a2 totals
	cols := cube.Invariant{Cuboid: 2, Counts: []float64{8, 12}}  // b1, b2 totals
	if err := cube.Consistent(s, cube.Base(2), noisy, []cube.Invariant{rows, cols}); err != nil {
		panic(err)
	}
	for _, v := range noisy {
		fmt.Print(cube.FormatCount(v), " ")
	}
	fmt.Println()
	// Output: 6.025 3.975 1.975 8.025
}

// PlanRelease gives the privacy story of a release before its counts exist.
func ExamplePlanRelease() {
	s, _ := cube.NewSchema([]cube.Dimension{
		{Name: "sex", Values: []string{"F", "M"}},
		{Name: "age", Values: []string{"young", "middle", "old"}},
	})
	eps, _ := privacy.NewEpsilon(1)
	plan, err := cube.PlanRelease(s, cube.ReleaseSpec{Epsilon: eps, Cuboid: 3, Exact: []cube.Cuboid{1}}, false)
	if err != nil {
		fmt.Println(err)
		return
	}
	m := plan.Metadata()
	fmt.Println(m.Sensitivity, m.Private, m.Guarantee)
	// Output:
	// 2 true unconditional
}
