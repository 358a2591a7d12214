package release_test

import (
	"context"
	"fmt"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/data"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/release"
)

// The one release path: plan from the schema and the spec alone (every
// refusal comes here, before any data), count only what the plan needs,
// then run it.
func ExampleNewPlan() {
	ctx := context.Background()
	records, schema, err := data.Arrests()
	if err != nil {
		panic(err)
	}
	view := func(x string) domain.View {
		v, err := schema.ParseView(x)
		if err != nil {
			panic(err)
		}
		return v
	}
	eps, _ := privacy.NewEpsilon(1)
	plan, err := release.NewPlan(schema, release.Spec{
		Tables:  []domain.View{view("year,colour"), view("sex,agegroup"), view("year,released")},
		Exact:   []domain.View{view("year"), view("colour,sex")}, // published exactly
		Epsilon: eps, Split: release.SplitAuto, Strategy: release.MeasureBest,
		Integer: true,
	})
	if err != nil {
		panic(err)
	}
	counts, _, err := cube.AggregateViews(ctx, records, schema, plan.Needs(), cube.Options{})
	if err != nil {
		panic(err)
	}
	rel, err := plan.Run(ctx, counts, noise.NewSeeded(1)) // seeded: NOT private, for the example
	if err != nil {
		panic(err)
	}
	meta := rel.Metadata()
	fmt.Println("private:", meta.Private, "epsilon spent:", meta.Epsilon)
	for _, t := range meta.Tables {
		fmt.Printf("%v: %d cells, public %v, moe90 %.2f\n", t.Cuboid, t.Cells, t.Public, t.MOE90)
	}
	// Output:
	// private: false epsilon spent: 1
	// [year colour]: 12 cells, public false, moe90 29.98
	// [sex agegroup]: 10 cells, public false, moe90 40.32
	// [year released]: 12 cells, public false, moe90 32.76
}
