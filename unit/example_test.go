package unit_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/source"
	"github.com/knowdp/knowdp/unit"
)

// Ratings by students: student a has five rows, b one. Counted through a
// collector, the table gives its true counts (for the invariants) and its
// rows per student; bounded to 2 rows per student, it gives the counts a
// release per student measures.
func Example() {
	s, _ := domain.NewSchema([]domain.Dimension{{Name: "grade", Values: []string{"low", "high"}}})
	csv := "student,grade\na,low\na,low\na,high\na,high\na,high\nb,low\n"
	t, _ := source.NewCSV("ratings.csv", strings.NewReader(csv))
	grade := domain.ViewOf(1)
	col, rec, err := unit.NewCollector(t, s, "student", grade.Dims)
	if err != nil {
		panic(err)
	}
	all, _, err := cube.AggregateViews(context.Background(), rec, s, []domain.View{grade}, cube.Options{})
	if err != nil {
		panic(err)
	}
	rows, _ := col.Rows()
	fmt.Println("all rows:", all[grade], "rows per student:", rows.RowsPerUnit())

	r := noise.NewSeeded(1) // reproducible, NOT private
	bounded, _ := rows.Bound(context.Background(), 2, unit.NewKey(r))
	counts, _ := bounded.Counts([]domain.View{grade})
	fmt.Println("at most 2 per student:", counts[grade], bounded.RowsPerUnit())
	// Output:
	// all rows: [3 3] rows per student: [5 1]
	// at most 2 per student: [2 1] [2 1]
}
