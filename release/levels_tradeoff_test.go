package release

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/noise"
)

// TestLevelTradeOff prints the mean margin of error at every level of the
// us-geo geography (data/us-geo.schema.json: 4 regions > 9 divisions > 50
// states > 842 places), one table per level, the grand total exact, eps = 1,
// under the total and mean objectives (mean is the default across a
// hierarchy), the spine split, and the mean objective with the states
// weighted 4 (the table of docs/hierarchy.md); and checks that the mean
// objective gives the coarse levels smaller margins than the total does.
//
//	go test ./release -run TestLevelTradeOff -v
func TestLevelTradeOff(t *testing.T) {
	s, err := domain.LoadSchema("../data/us-geo.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var views []domain.View
	for _, name := range []string{"geo:region", "geo:division", "geo:state", "geo"} {
		views = append(views, testkit.MustView(t, s, name))
	}
	total := domain.ViewOf(0)
	c := &cube.Cube{Schema: s, Counts: testkit.RandomTable(noise.NewSeeded(1), s.Cells())}
	type run struct {
		name string
		spec Spec
	}
	runs := []run{
		{"total", Spec{Objective: ObjectiveTotal}},
		{"mean (default)", Spec{}},
		{"spine split", Spec{Split: SplitSpine}},
		{"mean, states weighted 4", Spec{Weights: []float64{1, 1, 4, 1}}},
	}
	var b strings.Builder
	fmt.Fprintln(&b, "| objective | region | division | state | place | budget to places |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|")
	moe := map[string][]float64{}
	for _, r := range runs {
		spec := r.spec
		spec.Tables, spec.Exact, spec.Epsilon, spec.Strategy = views, []domain.View{total}, eps(t, 1), MeasureBest
		p, err := NewPlan(s, spec)
		if err != nil {
			t.Fatal(err)
		}
		counts := map[domain.View][]float64{}
		for _, v := range p.Needs() {
			if counts[v], err = s.RollUp(domain.ViewOf(v.Dims), c.Project(v.Dims), v); err != nil {
				t.Fatal(err)
			}
		}
		w, err := p.Run(context.Background(), counts, noise.NewSeeded(2))
		if err != nil {
			t.Fatal(err)
		}
		var row []string
		for _, l := range w.Levels {
			row = append(row, fmt.Sprintf("%.2f", l.MeanMOE90))
			moe[r.name] = append(moe[r.name], l.MeanMOE90)
		}
		places := 0.0
		for _, m := range w.Measurements {
			if m.View.Dims != 0 && m.View.Up[0] == 0 {
				places += m.Share
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f%% |\n", r.name, strings.Join(row, " | "), 100*places/w.Epsilon)
	}
	t.Log("\n" + b.String())
	if tm, mm := moe["total"], moe["mean (default)"]; len(tm) != 4 || len(mm) != 4 || !(mm[0] < tm[0] && mm[2] < tm[2]) {
		t.Errorf("the mean objective does not help the coarse levels: total %v, mean %v", tm, mm)
	}
}
