package release_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/release"
	"github.com/knowdp/knowdp/source"
)

// A geography released at three levels under one epsilon, with state
// totals exact: every table adds up to the one above.
func ExampleNewPlan_hierarchy() {
	s, err := domain.ParseSchema([]byte(`{"dimensions":[
	 {"name":"geo","levels":["region","state","county"],"values":["c1","c2","c3","c4","c5"],
	  "parents":{"state":{"c1":"s1","c2":"s1","c3":"s2","c4":"s2","c5":"s2"},"region":{"s1":"r1","s2":"r1"}}},
	 {"name":"sex","values":["F","M"]}]}`))
	if err != nil {
		panic(err)
	}
	var rows strings.Builder
	rows.WriteString("geo,sex\n")
	for i, c := range []string{"c1", "c2", "c3", "c4", "c5"} {
		for range 10 * (i + 1) {
			rows.WriteString(c + ",F\n" + c + ",M\n")
		}
	}
	view := func(x string) domain.View {
		v, err := s.ParseView(x)
		if err != nil {
			panic(err)
		}
		return v
	}
	eps, _ := privacy.NewEpsilon(1)
	plan, err := release.NewPlan(s, release.Spec{Epsilon: eps, Split: release.SplitSpine,
		Tables: []domain.View{view("geo:region"), view("geo:state,sex"), view("geo,sex")},
		Exact:  []domain.View{view("geo:state")}})
	if err != nil {
		panic(err)
	}
	t, _ := source.NewCSV("persons.csv", strings.NewReader(rows.String()))
	counts, _, err := cube.AggregateViews(context.Background(), t, s, plan.Needs(), cube.Options{})
	if err != nil {
		panic(err)
	}
	rel, err := plan.Run(context.Background(), counts, noise.NewSeeded(1)) // seeded: NOT private
	if err != nil {
		panic(err)
	}
	if err := rel.RoundIntegers(context.Background(), noise.NewSeeded(2)); err != nil {
		panic(err)
	}
	for _, tb := range rel.Tables {
		fmt.Printf("%s %s public=%v exact=%v %v\n", s.ViewFileName(tb.TableView()), s.FormatView(tb.TableView()), tb.Public, tb.IntegerExact, tb.Counts)
	}
	for _, l := range rel.Levels {
		fmt.Printf("%s: %d cells, mean moe90 %.2f\n", l.Level, l.Cells, l.MeanMOE90)
	}
	// Output:
	// region.csv {geo:region} public=true exact=false [300]
	// state-sex.csv {geo:state,sex} public=false exact=true [33 27 114 126]
	// county-sex.csv {geo,sex} public=false exact=true [7 9 26 18 31 35 51 46 32 45]
	// region: 1 cells, mean moe90 0.00
	// state: 4 cells, mean moe90 5.50
	// county: 10 cells, mean moe90 7.45
}
