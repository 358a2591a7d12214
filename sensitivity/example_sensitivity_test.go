package sensitivity_test

import (
	"fmt"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/sensitivity"
)

// Example 4.1 of paper 3: with {Sex,Age} and {Age,Salary} public exactly,
// the base cuboid {Sex,Age,Salary} has generic sensitivity
// 2 min(|Sex|, |Salary|) = 4, so its Laplace noise has scale 4/eps.
func ExampleGenericSensitivity() {
	s, err := domain.NewSchema([]domain.Dimension{
		{Name: "Sex", Values: []string{"F", "M"}},
		{Name: "Age", Values: []string{"0-10", "11-20", "21-30", "31-40", "41-50", "51-60", "60+"}},
		{Name: "Salary", Values: []string{"0-10k", "10-50k", "50-200k", "200-500k", "500k+"}},
	})
	if err != nil {
		panic(err)
	}
	sexAge, _ := s.ParseCuboid("Sex,Age")
	ageSalary, _ := s.ParseCuboid("Age,Salary")
	exact := []domain.Cuboid{sexAge, ageSalary}

	base, _ := sensitivity.GenericSensitivity(s, exact, domain.Base(s.NumDims()))
	fmt.Println(base.Value, base.Rule)

	sexSalary, _ := s.ParseCuboid("Sex,Salary")
	rel, _ := sensitivity.GenericSensitivity(s, exact, sexSalary)
	fmt.Println(rel.Value)

	age, _ := s.ParseCuboid("Age")
	public, _ := sensitivity.GenericSensitivity(s, exact, age)
	fmt.Println(public.Value, public.Rule)
	// Output:
	// 4 Lemma 4.2(ii): exact cuboids {Sex,Age} and {Age,Salary}, 2*min(2, 5)
	// 4
	// 0 public: {Age} is computable from exact cuboid {Sex,Age}
}

// Exact cells of two cuboids (Lemma 4.3, corrected): every row sum of a 3x3
// table and one column sum. Moving rows (0,1) and (1,0) to (0,0) and (1,2)
// keeps them all, and no part of that move does: 4 rows change.
func ExampleCellSensitivity() {
	s, _ := domain.NewSchema([]domain.Dimension{
		{Name: "row", Values: []string{"0", "1", "2"}},
		{Name: "col", Values: []string{"0", "1", "2"}},
	})
	rows, _ := s.ParseCuboid("row")
	cols, _ := s.ParseCuboid("col")
	sens, _ := sensitivity.CellSensitivity(s, []sensitivity.ExactCells{
		{Cuboid: rows, Cells: []int{0, 1, 2}},
		{Cuboid: cols, Cells: []int{0}},
	})
	fmt.Println(sens.Value)
	// Output: 4
}
