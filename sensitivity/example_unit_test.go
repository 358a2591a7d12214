package sensitivity_test

import (
	"context"
	"fmt"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/sensitivity"
)

// A table of ratings where each student (the privacy unit) keeps at most 2
// ratings, with the number of ratings per department public exactly. The
// release of {dept, grade} is calibrated to 2 times its row-level generic
// sensitivity. Worst-case induced neighbours made of whole students would
// need far more: the brute force on a small domain shows it.
func ExampleForUnits() {
	s, err := domain.NewSchema([]domain.Dimension{
		{Name: "dept", Values: []string{"maths", "physics"}},
		{Name: "grade", Values: []string{"low", "high"}},
	})
	if err != nil {
		panic(err)
	}
	dept, _ := s.ParseCuboid("dept")
	release := domain.Base(s.NumDims())
	row, _ := sensitivity.GenericSensitivity(s, []domain.Cuboid{dept}, release)
	unit, _ := sensitivity.ForUnits(row, 2)
	fmt.Println(row.Value, unit.Value)

	w, _ := sensitivity.BruteForceUnitSensitivity(context.Background(), s,
		[]domain.View{domain.ViewOf(dept)}, domain.ViewOf(release), 2)
	fmt.Println(w.Replacement, w.Induced)
	// Output:
	// 2 4
	// 4 8
}
