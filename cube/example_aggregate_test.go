package cube_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/source"
)

// Count a fact table into two cuboids in one pass, without the base cube.
func ExampleAggregate() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "people.csv")
	os.WriteFile(path, []byte("sex,age,tenure\nF,30,own\nM,41,rent\nF,41,own\nF,30,rent\n"), 0o644)

	s, _ := domain.NewSchema([]domain.Dimension{
		{Name: "sex", Values: []string{"F", "M"}},
		{Name: "age", Values: []string{"30", "41"}},
		{Name: "tenure", Values: []string{"own", "rent"}},
	})
	sexAge, _ := s.CuboidOf("sex", "age")
	tenure, _ := s.CuboidOf("tenure")

	ctx := context.Background()
	t, err := source.Open(ctx, source.Spec{Path: path}) // CSV, Parquet or a database table
	if err != nil {
		fmt.Println(err)
		return
	}
	defer t.Close()
	tables, rows, err := cube.Aggregate(ctx, t, s, []domain.Cuboid{sexAge, tenure}, cube.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rows, "rows")
	fmt.Println("{sex,age}:", tables[sexAge])
	fmt.Println("{tenure}:", tables[tenure])
	// Output:
	// 4 rows
	// {sex,age}: [2 1 0 1]
	// {tenure}: [2 2]
}
