package release_test

import (
	"context"
	"fmt"
	"os"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/release"
)

// Release three tables under one budget from the exact counts of the
// cuboids they need (no base cube), with the age totals public: the tables
// agree with each other and with the age totals, and each carries its
// margin of error. The optimal split gives {sex} no share of its own: the
// {sex,age} measurement already covers it, and the budget does more there.
func ExampleNewPlan_workload() {
	s, _ := domain.NewSchema([]domain.Dimension{
		{Name: "sex", Values: []string{"F", "M"}},
		{Name: "age", Values: []string{"0-17", "18-64", "65+"}},
		{Name: "region", Values: []string{"N", "S"}},
	})
	view := func(x string) domain.View {
		v, err := s.ParseView(x)
		if err != nil {
			panic(err)
		}
		return v
	}
	sex, age, sexAge, ageRegion := view("sex"), view("age"), view("sex,age"), view("age,region")
	eps, _ := privacy.NewEpsilon(1)
	plan, err := release.NewPlan(s, release.Spec{
		Epsilon: eps,
		Exact:   []domain.View{age},
		Tables:  []domain.View{sexAge, ageRegion, sex},
	})
	if err != nil {
		panic(err)
	}
	// The counts a database would return for each needed view.
	counts := map[domain.View][]float64{
		age:       {22, 75, 12},
		sexAge:    {10, 40, 7, 12, 35, 5},
		ageRegion: {12, 10, 30, 45, 8, 4},
		sex:       {57, 52},
	}
	for _, v := range plan.Needs() {
		fmt.Println("needs", s.FormatView(v))
	}
	rel, err := plan.Run(context.Background(), counts, noise.NewSeeded(1)) // seeded: NOT private
	if err != nil {
		panic(err)
	}
	for _, t := range rel.Tables {
		fmt.Printf("%s: measured %v, epsilon %.3f, moe90 %.2f\n", release.TableFileName(s, t.Cuboid), t.Measured, t.Share, t.MOE90)
	}
	fmt.Printf("total epsilon %.3f\n", rel.Epsilon)
	// The tables agree: the sex totals of {sex,age} are the {sex} table.
	t0, t2 := rel.Tables[0].Counts, rel.Tables[2].Counts
	fmt.Println(domain.FormatCount(t0[0]+t0[1]+t0[2]-t2[0]), domain.FormatCount(t0[3]+t0[4]+t0[5]-t2[1]))
	_ = rel.Tables[1].WriteCSV(os.Stdout, s)
	// Output:
	// needs {age}
	// needs {sex,age}
	// needs {age,region}
	// sex-age.csv: measured true, epsilon 0.558, moe90 5.87
	// age-region.csv: measured true, epsilon 0.442, moe90 7.39
	// sex.csv: measured false, epsilon 0.000, moe90 10.18
	// total epsilon 1.000
	// 0 0
	// age,region,count,moe90
	// 0-17,N,14.202402114868164,7.3939909218336135
	// 0-17,S,7.797597885131836,7.3939909218336135
	// 18-64,N,39.3546257019043,7.3939909218336135
	// 18-64,S,35.6453742980957,7.3939909218336135
	// 65+,N,1.8109750747680655,7.3939909218336135
	// 65+,S,10.189024925231934,7.3939909218336135
}

// The margin of error of a single-cuboid release: with the age totals
// public, each cell's error is a combination of Laplace variables, and 90%
// of the time the true count is within the margin of the released one.
func ExamplePlan_Cuboid_moe90() {
	s, _ := domain.NewSchema([]domain.Dimension{
		{Name: "sex", Values: []string{"F", "M"}},
		{Name: "age", Values: []string{"0-17", "18-64", "65+"}},
	})
	age, _ := s.ParseView("age")
	eps, _ := privacy.NewEpsilon(1)
	for _, exact := range [][]domain.View{nil, {age}} {
		plan, err := release.NewPlan(s, release.Spec{Epsilon: eps, Exact: exact, Tables: []domain.View{domain.ViewOf(domain.Base(2))}})
		if err != nil {
			panic(err)
		}
		rel := plan.Cuboid()
		fmt.Printf("exact %d cuboid(s): sensitivity %d, moe90 %.3f\n", len(exact), rel.Sensitivity, rel.MOE90)
	}
	// Output:
	// exact 0 cuboid(s): sensitivity 1, moe90 2.303
	// exact 1 cuboid(s): sensitivity 2, moe90 3.272
}

// Compare the expected error of the ways to release a workload, before
// touching any data.
func ExampleExpectedRMSE() {
	s, _ := domain.NewSchema([]domain.Dimension{
		{Name: "sex", Values: []string{"F", "M"}},
		{Name: "age", Values: []string{"0-17", "18-64", "65+"}},
		{Name: "region", Values: []string{"N", "S", "E", "W"}},
	})
	eps, _ := privacy.NewEpsilon(1)
	spec := release.Spec{Epsilon: eps}
	for _, names := range [][]string{{"sex", "age"}, {"age", "region"}, {"sex", "region"}} {
		c, _ := s.CuboidOf(names...)
		spec.Tables = append(spec.Tables, domain.ViewOf(c))
	}
	for _, st := range []release.Strategy{release.StrategySeparate, release.StrategyBase, release.StrategyEqual, release.StrategyOptimal} {
		rmse, _ := release.ExpectedRMSE(s, spec, st)
		fmt.Printf("%-32s %.2f %.2f %.2f\n", st, rmse[0], rmse[1], rmse[2])
	}
	// On this small domain, measuring the base cuboid and aggregating
	// beats measuring the requested cuboids: check before releasing.
	// Output:
	// separate releases, equal shares  4.24 4.24 4.24
	// noisy base cuboid, aggregated    2.83 2.00 2.45
	// equal split + least squares      3.61 3.48 3.54
	// optimal split + least squares    4.06 3.03 3.59
}

// A workload file lists the tables to release, with optional weights.
func ExampleParseWorkload() {
	s, _ := domain.NewSchema([]domain.Dimension{
		{Name: "sex", Values: []string{"F", "M"}},
		{Name: "age", Values: []string{"0-17", "18-64", "65+"}},
	})
	tables, weights, err := release.ParseWorkload(s, []byte(`[["sex","age"], {"cuboid": ["age"], "weight": 3}, []]`))
	if err != nil {
		panic(err)
	}
	for i, v := range tables {
		fmt.Println(s.FormatView(v), weights[i], s.ViewFileName(v))
	}
	// Output:
	// {sex,age} 1 sex-age.csv
	// {age} 3 age.csv
	// {} 1 total.csv
}

// Plan a workload before reading any data, count only what it needs, and
// compute one table from its estimate's terms: the sum of broadcast
// marginals of the invariant and of the noisy measurements, which is how a
// distributed pipeline computes each block of a table. The plan is made
// once; Run draws the release from it.
func ExamplePlan_Workload() {
	s, _ := domain.NewSchema([]domain.Dimension{
		{Name: "sex", Values: []string{"F", "M"}},
		{Name: "age", Values: []string{"0-17", "18-64", "65+"}},
	})
	age, _ := s.ParseView("age")
	sexAge, _ := s.ParseView("sex,age")
	sex, _ := s.ParseView("sex")
	eps, _ := privacy.NewEpsilon(1)
	planned, err := release.NewPlan(s, release.Spec{Epsilon: eps, Exact: []domain.View{age}, Tables: []domain.View{sexAge, sex}})
	if err != nil {
		panic(err)
	}
	plan := planned.Workload()
	for i := range plan.NumSources() {
		fmt.Println("source", i, s.Format(plan.Source(i)))
	}
	for _, t := range plan.Terms(1) { // the {sex} table
		fmt.Printf("{sex} += %.4g × marginal of source %d on %s\n", t.Coef, t.Source, s.Format(t.Margin))
	}
	counts := map[domain.View][]float64{age: {22, 75, 12}, sexAge: {10, 40, 7, 12, 35, 5}}
	rel, err := planned.Run(context.Background(), counts, noise.NewSeeded(1)) // seeded: NOT private
	if err != nil {
		panic(err)
	}
	f, m := rel.Tables[1].Counts[0], rel.Tables[1].Counts[1]
	fmt.Printf("%s: %.3f %.3f, adding up to the public total %s\n", release.TableFileName(s, rel.Tables[1].Cuboid), f, m, domain.FormatCount(f+m))
	// Output:
	// source 0 {age}
	// source 1 {sex,age}
	// {sex} += 0.5 × marginal of source 0 on {}
	// {sex} += -0.5 × marginal of source 1 on {}
	// {sex} += 1 × marginal of source 1 on {sex}
	// sex.csv: 59.409 49.591, adding up to the public total 109
}
