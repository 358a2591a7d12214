package sensitivity

import (
	"testing"

	"github.com/knowdp/knowdp/domain"
)

// TestBoundsTightenedByBruteForce pins issue 32's two loose L2 bounds for
// tables at levels to the values of 4ti2's Graver bases: regions of 1 and 2
// states, states of 2, 1 and 3 counties, x sex (2) x age (3) (36 base
// cells); exact {geo:state} and {sex,age}: {geo:region,sex} has L2
// sensitivity 2 (the closed form bounds it by sqrt(8)); exact
// {geo:state,sex} and {age}: {geo} has sqrt(10) (bound sqrt(12)).
func TestBoundsTightenedByBruteForce(t *testing.T) {
	s, err := domain.ParseSchema([]byte(`{"dimensions":[
		{"name":"geo","levels":["region","state","county"],"values":["c1","c2","c3","c4","c5","c6"],
		 "parents":{"region":{"s1":"r1","s2":"r2","s3":"r2"},"state":{"c1":"s1","c2":"s1","c3":"s2","c4":"s3","c5":"s3","c6":"s3"}}},
		{"name":"sex","values":["F","M"]},
		{"name":"age","values":["a","b","c"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	view := func(x string) domain.View {
		v, err := s.ParseView(x)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		exact   []string
		release string
		want    int
	}{
		{[]string{"geo:state", "sex,age"}, "geo:region,sex", 4},
		{[]string{"geo:state,sex", "age"}, "geo", 10},
	} {
		var ex []domain.View
		for _, e := range c.exact {
			ex = append(ex, view(e))
		}
		got, err := GenericL2SensitivityViews(s, ex, view(c.release))
		if err != nil {
			t.Fatal(err)
		}
		if got.Squared != c.want {
			t.Errorf("exact %v, release %s: L2² %d (%s), want %d", c.exact, c.release, got.Squared, got.Rule, c.want)
		}
	}
}
