package data

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/scripts/gen-us-geo/usgeo"
)

// The sizes of the bundled hierarchy and its synthetic persons.
const (
	usRegions   = 4
	usDivisions = 9
	usStates    = 50 // 49 states (none of Vermont's places has 50,000 inhabitants) and DC
	usPlaces    = 842
	usPersons   = 134935
)

// TestUSGeoRegenerates regenerates us-geo.schema.json, us-geo-places.csv and us-persons.csv
// from us-places.csv in memory and checks that the committed files are
// exactly what scripts/gen-us-geo writes, and that README.md gives their
// current checksums.
func TestUSGeoRegenerates(t *testing.T) {
	schemaAge, err := os.ReadFile("us-geo-age.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	schema, wantAge, persons, err := usgeo.Generate(usPlacesCSV)
	if err != nil {
		t.Fatal(err)
	}
	places, err := usgeo.Places(usPlacesCSV)
	if err != nil {
		t.Fatal(err)
	}
	lookup, err := os.ReadFile("us-geo-places.csv")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		name      string
		got, want []byte
	}{{"us-geo.schema.json", usGeoSchema, schema}, {"us-geo-age.schema.json", schemaAge, wantAge}, {"us-geo-places.csv", lookup, usgeo.Lookup(places)}, {"us-persons.csv", usPersonsCSV, persons}} {
		if !bytes.Equal(f.got, f.want) {
			t.Errorf("%s differs from what the generator makes (%d bytes, want %d): run go run ./scripts/gen-us-geo from the repository root", f.name, len(f.got), len(f.want))
		}
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"us-geo.schema.json": usGeoSchema, "us-geo-age.schema.json": schemaAge, "us-geo-places.csv": lookup, "us-persons.csv": usPersonsCSV} {
		sum := md5.Sum(b)
		line := fmt.Sprintf("`md5sum %s` = `%s`", name, hex.EncodeToString(sum[:]))
		if !bytes.Contains(readme, []byte(line)) {
			t.Errorf("README.md does not say %s", line)
		}
	}
}

// geoSchema is the schema's JSON read with encoding/json alone, independently
// of cube.ParseSchema.
type geoSchema struct {
	Dimensions []struct {
		Name    string                       `json:"name"`
		Levels  []string                     `json:"levels"`
		Values  []string                     `json:"values"`
		Parents map[string]map[string]string `json:"parents"`
	} `json:"dimensions"`
}

// TestUSGeoSchema checks the hierarchy: levels region, division, state,
// place; unique leaves; every value of a level has exactly one parent in the
// next coarser level and the parent maps have no other keys; each leaf's
// state is the prefix of its value and the admin1 of its GeoNames place;
// every place of us-places.csv is a leaf; and the children of every parent
// are contiguous.
func TestUSGeoSchema(t *testing.T) {
	if err := uniqueKeys(usGeoSchema); err != nil {
		t.Fatalf("us-geo.schema.json: %v", err)
	}
	var s geoSchema
	dec := json.NewDecoder(bytes.NewReader(usGeoSchema))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatal(err)
	}
	if len(s.Dimensions) != 3 || s.Dimensions[0].Name != "geo" || s.Dimensions[1].Name != "sex" || s.Dimensions[2].Name != "agegroup" {
		t.Fatalf("dimensions %+v, want geo, sex, agegroup", s.Dimensions)
	}
	geo := s.Dimensions[0]
	if want := []string{"region", "division", "state", "place"}; fmt.Sprint(geo.Levels) != fmt.Sprint(want) {
		t.Fatalf("levels %q, want %q", geo.Levels, want)
	}
	for _, d := range s.Dimensions[1:] {
		if d.Levels != nil || d.Parents != nil {
			t.Errorf("%s has levels or parents", d.Name)
		}
	}
	if len(geo.Parents) != 3 {
		t.Errorf("parents has levels %v, want state, division and region", keys(geo.Parents))
	}
	// Walk up from the leaves: the values of each level are the parents of
	// the next finer one, and each has exactly one parent.
	level := geo.Values
	sizes := map[string]int{"place": len(level)}
	for i := len(geo.Levels) - 2; i >= 0; i-- {
		name := geo.Levels[i]
		m, ok := geo.Parents[name]
		if !ok {
			t.Fatalf("parents has no level %q", name)
		}
		seen := map[string]bool{}
		var up []string
		for _, v := range level {
			if seen[v] {
				t.Fatalf("level %s lists %q twice", geo.Levels[i+1], v)
			}
			seen[v] = true
			p, ok := m[v]
			if !ok || p == "" {
				t.Fatalf("%s %q has no %s", geo.Levels[i+1], v, name)
			}
			if len(up) == 0 || up[len(up)-1] != p {
				for _, q := range up {
					if q == p {
						t.Fatalf("the children of %s %q are not contiguous (at %q)", name, p, v)
					}
				}
				up = append(up, p)
			}
		}
		if len(m) != len(level) {
			t.Errorf("parents[%q] has %d keys, want one per %s (%d)", name, len(m), geo.Levels[i+1], len(level))
		}
		sizes[name] = len(up)
		level = up
	}
	if want := map[string]int{"region": usRegions, "division": usDivisions, "state": usStates, "place": usPlaces}; fmt.Sprint(sizes) != fmt.Sprint(want) {
		t.Errorf("sizes %v, want %v", sizes, want)
	}
	for _, c := range [][3]string{
		{"CA", "Pacific", "West"}, {"DC", "South Atlantic", "South"}, {"TX", "West South Central", "South"},
		{"NY", "Middle Atlantic", "Northeast"}, {"MA", "New England", "Northeast"},
		{"IL", "East North Central", "Midwest"}, {"MN", "West North Central", "Midwest"},
		{"KY", "East South Central", "South"}, {"CO", "Mountain", "West"},
	} {
		if d, r := geo.Parents["division"][c[0]], geo.Parents["region"][c[1]]; d != c[1] || r != c[2] {
			t.Errorf("%s is in %q, %q; want %q, %q (Census Bureau)", c[0], d, r, c[1], c[2])
		}
	}
	// Every place of us-places.csv is exactly one leaf, in its state.
	leaves := map[string]bool{}
	for _, v := range geo.Values {
		leaves[v] = true
		st, _, ok := strings.Cut(v, "/")
		if !ok || geo.Parents["state"][v] != st {
			t.Errorf("leaf %q: state %q, want the prefix before /", v, geo.Parents["state"][v])
		}
	}
	places := readPlaces(t)
	used := map[string]bool{}
	for _, p := range places {
		leaf := p.state + "/" + p.name
		if !leaves[leaf] {
			leaf += " (" + p.id + ")"
		}
		if !leaves[leaf] || used[leaf] {
			t.Errorf("place %s %q (%s) has no leaf of its own", p.id, p.name, p.state)
		}
		used[leaf] = true
		if geo.Parents["state"][leaf] != p.state {
			t.Errorf("leaf %q is in %q, want %q", leaf, geo.Parents["state"][leaf], p.state)
		}
	}
	if len(used) != len(geo.Values) {
		t.Errorf("%d places for %d leaves", len(used), len(geo.Values))
	}
}

// TestUSPersons checks the synthetic persons against the schema and the real
// counts: every row's geo is a leaf, sex and agegroup are in their domains,
// and each place has its population / 1000 persons, rounded half up, at
// least 1.
func TestUSPersons(t *testing.T) {
	var s geoSchema
	if err := json.Unmarshal(usGeoSchema, &s); err != nil {
		t.Fatal(err)
	}
	domain := make([]map[string]bool, len(s.Dimensions))
	for i, d := range s.Dimensions {
		domain[i] = map[string]bool{}
		for _, v := range d.Values {
			domain[i][v] = true
		}
	}
	r := csv.NewReader(bytes.NewReader(usPersonsCSV))
	r.FieldsPerRecord = 3
	head, err := r.Read()
	if err != nil || strings.Join(head, ",") != "geo,sex,agegroup" {
		t.Fatalf("header %q, %v; want geo,sex,agegroup", head, err)
	}
	per := map[string]int64{}
	n := 0
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
		for i, v := range rec {
			if !domain[i][v] {
				t.Fatalf("row %d: %s %q is not in the schema", n+1, s.Dimensions[i].Name, v)
			}
		}
		per[rec[0]]++
	}
	if n != usPersons {
		t.Errorf("%d persons, want %d", n, usPersons)
	}
	for _, p := range readPlaces(t) {
		want := max(1, (p.population+500)/1000)
		got, ok := per[p.state+"/"+p.name]
		if !ok {
			got = per[p.state+"/"+p.name+" ("+p.id+")"]
		}
		if got != want {
			t.Errorf("%s/%s (population %d): %d persons, want %d", p.state, p.name, p.population, got, want)
		}
	}
}

// TestUSGeo loads the dimension through cube.ParseSchema and builds the
// cube.
func TestUSGeo(t *testing.T) {
	tab, s, err := USGeo()
	if err != nil {
		t.Fatal(err)
	}
	c, err := cube.Build(context.Background(), tab, s, cube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Total() != usPersons {
		t.Errorf("%v persons, want %d", c.Total(), usPersons)
	}
	sex, _ := s.CuboidOf("sex")
	if got := c.Project(sex); len(got) != 2 || got[0]+got[1] != usPersons {
		t.Errorf("persons by sex %v, want two counts summing to %d", got, usPersons)
	}
}

type place struct {
	id, name, state string
	population      int64
}

func readPlaces(t *testing.T) []place {
	t.Helper()
	recs, err := csv.NewReader(bytes.NewReader(usPlacesCSV)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if h := strings.Join(recs[0][:6], ","); h != "geonameid,name,admin1,lat,lon,population" {
		t.Fatalf("us-places.csv header starts %q", h)
	}
	var ps []place
	for _, r := range recs[1:] {
		pop, err := strconv.ParseInt(r[5], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, place{r[0], r[1], r[2], pop})
	}
	if len(ps) != usPlaces {
		t.Fatalf("%d places in us-places.csv, want %d", len(ps), usPlaces)
	}
	return ps
}

// uniqueKeys reports an object in the JSON document that has a key twice,
// which encoding/json would accept silently, keeping the last value: a place
// listed twice in a parents map with two parents.
func uniqueKeys(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	type frame struct {
		object bool
		keys   map[string]bool
		key    bool // the next string token is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if k, ok := tok.(string); ok && top != nil && top.object && top.key {
			if top.keys[k] {
				return fmt.Errorf("key %q appears twice in an object", k)
			}
			top.keys[k] = true
			top.key = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, keys: map[string]bool{}, key: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: in an object, a key comes next.
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].key = true
		}
	}
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func TestUniqueKeys(t *testing.T) {
	for _, c := range []string{`{"a":1,"a":2}`, `{"x":{"b":[1,{"c":1}],"b":2}}`, `[{"a":{}},{"a":1,"z":{"a":1,"a":{}}}]`} {
		if uniqueKeys([]byte(c)) == nil {
			t.Errorf("%s: no error", c)
		}
	}
	for _, c := range []string{`{"a":1,"b":{"a":1}}`, `[{"a":1},{"a":[{"a":1}]}]`, `{"a":{},"b":[]}`} {
		if err := uniqueKeys([]byte(c)); err != nil {
			t.Errorf("%s: %v", c, err)
		}
	}
}
