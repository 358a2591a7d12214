package domain

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestHierarchySchema(t *testing.T) {
	s := smallGeo(t)
	if got := s.Levels(0); !slices.Equal(got, []string{"region", "state", "county"}) {
		t.Fatalf("levels %v", got)
	}
	if s.Levels(1) != nil || s.NumLevels(1) != 1 || s.Hierarchical(1) {
		t.Fatal("sex must be flat")
	}
	for up, want := range []int{10, 4, 2} {
		if n := s.LevelSize(0, up); n != want {
			t.Errorf("level %d has %d values, want %d", up, n, want)
		}
	}
	// c5 is in s2 in r1; c7 in s4 in r2.
	for _, tc := range []struct{ leaf, up, want string }{
		{"c5", "s2", "r1"}, {"c7", "s4", "r2"}, {"c1", "s1", "r1"},
	} {
		v, _ := s.ValueIndex(0, tc.leaf)
		st := s.LevelValues(0, 1)[s.Ancestor(0, 1, v)]
		rg := s.LevelValues(0, 2)[s.Ancestor(0, 2, v)]
		if st != tc.up || rg != tc.want {
			t.Errorf("%s: state %s region %s, want %s %s", tc.leaf, st, rg, tc.up, tc.want)
		}
	}
	// The schema round-trips through its JSON.
	b, err := s.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	s2, err := ParseSchema(b)
	if err != nil {
		t.Fatalf("re-reading %s: %v", b, err)
	}
	for up := range 3 {
		if !slices.Equal(s.LevelValues(0, up), s2.LevelValues(0, up)) {
			t.Errorf("level %d differs after a round trip", up)
		}
	}
}

func TestHierarchySchemaErrors(t *testing.T) {
	geo := func(levels, parents string) string {
		return `{"dimensions":[{"name":"geo","levels":` + levels + `,"values":["a","b","c"],"parents":` + parents + `}]}`
	}
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"no parent", geo(`["st","co"]`, `{"st":{"a":"S","b":"S"}}`), `value "c" of level "co" has no parent at level "st"`},
		{"two parents", geo(`["st","co"]`, `{"st":{"a":"S","b":"S","c":"S","c":"T"}}`), `key "c" appears twice`},
		{"case variant", geo(`["st","co"]`, `{"st":{"a":"S","b":"S","c":"S","C":"T"}}`), `differ only in case`},
		{"extra value", geo(`["st","co"]`, `{"st":{"a":"S","b":"S","c":"S","d":"S"}}`), `parents.st names "d", which is not a value of level "co"`},
		{"unknown level", geo(`["st","co"]`, `{"st":{"a":"S","b":"S","c":"S"},"region":{"S":"R"}}`), `parents are given for "region", which is not a level`},
		{"missing level map", geo(`["rg","st","co"]`, `{"st":{"a":"S","b":"S","c":"S"}}`), `no parents for level "rg"`},
		{"leaf map", geo(`["st","co"]`, `{"st":{"a":"S","b":"S","c":"S"},"co":{}}`), `parents are given for the finest level "co"`},
		{"parents without levels", `{"dimensions":[{"name":"geo","values":["a"],"parents":{"st":{"a":"S"}}}]}`, `"parents" given without "levels"`},
		{"level twice", geo(`["st","st"]`, `{"st":{"a":"S","b":"S","c":"S"}}`), `level "st" is listed twice`},
		{"level with colon", geo(`["s:t","co"]`, `{"s:t":{"a":"S","b":"S","c":"S"}}`), `must not contain`},
		{"empty parent", geo(`["st","co"]`, `{"st":{"a":"S","b":"S","c":""}}`), `value "c" of level "co" has an empty parent`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSchema([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestParseView(t *testing.T) {
	s := smallGeo(t)
	for _, tc := range []struct {
		in, format, file string
		cells            int
	}{
		{"geo:state,sex", "{geo:state,sex}", "state-sex.csv", 8},
		{"sex, geo:region", "{geo:region,sex}", "region-sex.csv", 4},
		{"geo,sex,age", "{geo,sex,age}", "county-sex-age.csv", 60},
		{"geo:county", "{geo}", "county.csv", 10},
		{"", "{}", "total.csv", 1},
		{"age", "{age}", "age.csv", 3},
	} {
		v, err := s.ParseView(tc.in)
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		if got := s.FormatView(v); got != tc.format {
			t.Errorf("%q formats as %s, want %s", tc.in, got, tc.format)
		}
		if got := s.ViewFileName(v); got != tc.file {
			t.Errorf("%q: file %s, want %s", tc.in, got, tc.file)
		}
		if got := s.ViewSize(v); got != tc.cells {
			t.Errorf("%q: %d cells, want %d", tc.in, got, tc.cells)
		}
		back, err := s.ViewOfNames(s.ViewNames(v)...)
		if err != nil || back != v.Normal() {
			t.Errorf("%q does not round-trip through its names: %v", tc.in, err)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"geo:city", `dimension "geo" has no level "city" (its levels: region, state, county)`},
		{"sex:broad", `dimension "sex" has no levels`},
		{"geo,geo:state", `dimension "geo" appears twice`},
		{"town", `unknown dimension "town"`},
	} {
		if _, err := s.ParseView(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.in, err, tc.want)
		}
	}
}

func TestRollUpOf(t *testing.T) {
	s := smallGeo(t)
	v := func(x string) View {
		w, err := s.ParseView(x)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"geo:state", "geo", true},
		{"geo:region", "geo:state,sex", true},
		{"geo:state", "geo:region,sex", false},
		{"geo,sex", "geo:state,sex", false},
		{"", "age", true},
		{"sex", "geo:region,sex,age", true},
	} {
		if got := v(tc.a).RollUpOf(v(tc.b)); got != tc.want {
			t.Errorf("%s roll-up of %s: %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestRollUpAgainstBase checks every roll-up against sums of the base
// cuboid computed cell by cell from the leaves' ancestors.
func TestRollUpAgainstBase(t *testing.T) {
	s := smallGeo(t)
	rng := rand.New(rand.NewPCG(1, 2))
	base := make([]float64, s.Cells())
	for i := range base {
		base[i] = float64(rng.IntN(20))
	}
	full := View{Dims: Base(3)}
	for _, x := range []string{"", "geo:region", "geo:state", "geo:state,sex", "geo:region,age", "sex,age", "geo:state,sex,age", "geo,age"} {
		v, err := s.ParseView(x)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.RollUp(full, base, v)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float64, s.ViewSize(v))
		for c, n := range base {
			g, sx, a := c/6, c/3%2, c%3
			idx := 0
			coord := []int{g, sx, a}
			for _, d := range v.Dims.Dims() {
				val := coord[d]
				if d == 0 {
					val = s.Ancestor(0, int(v.Up[0]), g)
				}
				idx = idx*s.LevelSize(d, int(v.Up[d])) + val
			}
			want[idx] += n
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", x, got, want)
		}
		// Rolling up in two steps gives the same table.
		if v.Dims.Has(0) && v.Up[0] < 2 {
			coarser := v
			coarser.Up[0]++
			two, err := s.RollUp(v, got, coarser)
			if err != nil {
				t.Fatal(err)
			}
			one, _ := s.RollUp(full, base, coarser)
			if !slices.Equal(one, two) {
				t.Errorf("%s then %s differs from one roll-up", x, s.FormatView(coarser))
			}
		}
	}
	if _, err := s.RollUp(mustView(t, s, "geo:state"), make([]float64, 4), mustView(t, s, "geo")); err == nil {
		t.Error("rolling down must be refused")
	}
}

// smallGeoJSON is 2 regions > 4 states > 10 counties (unequal groups),
// crossed with sex and a 3-band age.
const smallGeoJSON = `{"dimensions":[
 {"name":"geo","levels":["region","state","county"],
  "values":["c1","c2","c3","c4","c5","c6","c7","c8","c9","c10"],
  "parents":{"state":{"c1":"s1","c2":"s1","c3":"s2","c4":"s2","c5":"s2","c6":"s3","c7":"s4","c8":"s4","c9":"s4","c10":"s4"},
             "region":{"s1":"r1","s2":"r1","s3":"r2","s4":"r2"}}},
 {"name":"sex","values":["F","M"]},
 {"name":"age","values":["0-17","18-64","65+"]}]}`

func smallGeo(t testing.TB) *Schema {
	t.Helper()
	s, err := ParseSchema([]byte(smallGeoJSON))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustView(t testing.TB, s *Schema, x string) View {
	t.Helper()
	v, err := s.ParseView(x)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A view's term answers the view: its rows are the roll-up of the leaf
// table, cell for cell.
func TestTermMatchesRollUp(t *testing.T) {
	s := smallGeo(t)
	base := make([]float64, s.Cells())
	for i := range base {
		base[i] = float64(i*7%11) + 0.5
	}
	for _, x := range []string{"geo:region", "geo:state,sex", "geo,age", "sex", "", "geo:state,sex,age"} {
		v := mustView(t, s, x)
		want, err := s.RollUp(ViewOf(Base(s.NumDims())), base, v)
		if err != nil {
			t.Fatal(err)
		}
		got := s.Term(v).Apply(base)
		if !slices.Equal(got, want) {
			t.Errorf("%s: term %v, roll-up %v", x, got, want)
		}
	}
}

// TestViewColumns checks that a hierarchy's column is named by its level,
// and by dimension and level where the level's name alone would be
// ambiguous: another dimension's name, another hierarchy's level, or a
// count column's name.
func TestViewColumns(t *testing.T) {
	s, err := ParseSchema([]byte(`{"dimensions":[
 {"name":"home","levels":["state","town"],"values":["a","b"],"parents":{"state":{"a":"S","b":"S"}}},
 {"name":"work","levels":["state","count"],"values":["x"],"parents":{"state":{"x":"S"}}},
 {"name":"town","values":["t"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ view, cols, file string }{
		{"home:state,work:state", "home.state work.state", "home.state-work.state.csv"},
		{"home,town", "home.town town", "home.town-town.csv"},
		{"work", "work.count", "work.count.csv"},
	} {
		v, err := s.ParseView(tc.view)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(s.ViewColumns(v), " "); got != tc.cols {
			t.Errorf("%s: columns %s, want %s", tc.view, got, tc.cols)
		}
		if got := s.ViewFileName(v); got != tc.file {
			t.Errorf("%s: file %s, want %s", tc.view, got, tc.file)
		}
	}
}
