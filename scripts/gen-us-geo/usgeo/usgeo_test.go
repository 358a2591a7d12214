package usgeo

import (
	"strings"
	"testing"
)

const header = "geonameid,name,admin1,lat,lon,population,elevation,elevation_source,dem,modified\n"

func TestPlacesOrderAndDuplicates(t *testing.T) {
	in := header +
		`5,"Springfield",MA,0,0,150000,0,elevation,0,2013-01-01` + "\n" +
		`3,"Springfield",MA,0,0,60000,0,elevation,0,2013-01-01` + "\n" +
		`4,"Springfield",IL,0,0,116000,0,elevation,0,2013-01-01` + "\n" +
		`2,"Washington, D. C.",DC,0,0,601723,0,elevation,0,2013-01-01` + "\n" +
		`1,"Boston",MA,0,0,617594,0,elevation,0,2013-01-01` + "\n"
	ps, err := Places([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range ps {
		got = append(got, p.Leaf)
	}
	// New England, then East North Central, then South Atlantic; a name
	// shared within a state gets the GeoNames id, one shared across states
	// does not.
	want := "MA/Boston|MA/Springfield (3)|MA/Springfield (5)|IL/Springfield|DC/Washington, D. C."
	if strings.Join(got, "|") != want {
		t.Errorf("leaves %q, want %q", strings.Join(got, "|"), want)
	}
	persons := string(Persons(ps))
	if !strings.HasPrefix(persons, "geo,sex,agegroup\nMA/Boston,") || !strings.Contains(persons, "\n\"DC/Washington, D. C.\",") {
		t.Errorf("persons start %q", persons[:80])
	}
	if n := strings.Count(persons, "\n") - 1; n != 618+150+60+116+602 {
		t.Errorf("%d persons, want %d", n, 618+150+60+116+602)
	}
}

func TestPlacesRefusesNonStates(t *testing.T) {
	in := header + `4568127,"San Juan",PR,0,0,418140,0,elevation,0,2013-01-01` + "\n"
	if _, err := Places([]byte(in)); err == nil || !strings.Contains(err.Error(), "not one of the 50 states or DC") {
		t.Errorf("err = %v, want a refusal of Puerto Rico", err)
	}
}

func TestPersonsRounding(t *testing.T) {
	for pop, want := range map[int64]int64{0: 1, 499: 1, 1499: 1, 1500: 2, 50500: 51, 50499: 50} {
		if got := (Place{Population: pop}).Persons(); got != want {
			t.Errorf("population %d: %d persons, want %d", pop, got, want)
		}
	}
}

func TestCensusTable(t *testing.T) {
	seen := map[string]bool{}
	regions := map[string]bool{}
	for _, d := range CensusDivisions {
		regions[d.Region] = true
		for _, s := range d.States {
			if seen[s] {
				t.Errorf("%s in two divisions", s)
			}
			seen[s] = true
		}
	}
	if len(seen) != 51 || len(CensusDivisions) != 9 || len(regions) != 4 {
		t.Errorf("%d states, %d divisions, %d regions; want 51, 9, 4", len(seen), len(CensusDivisions), len(regions))
	}
}

func TestDraw(t *testing.T) {
	for _, shares := range [][]Share{Sex, AgeGroup} {
		sum := 0
		for _, s := range shares {
			sum += s.Percent
		}
		if sum != 100 {
			t.Errorf("%v sums to %d, want 100", shares, sum)
		}
	}
	// SplitMix64 from state 0: the reference implementation's first output.
	r := splitmix64{}
	if got := r.next(); got != 0xe220a8397b1dcdaf {
		t.Errorf("splitmix64 from 0: %#x, want 0xe220a8397b1dcdaf", got)
	}
	// r = ⌊u·100/2³²⌋: the extremes and the boundaries between shares.
	for x, want := range map[uint64]string{0: "F", 1<<64 - 1: "M", (50*(1<<32)/100 + 1) << 32: "F", (51*(1<<32)/100 + 1) << 32: "M"} {
		if got := draw(Sex, x); got != want {
			t.Errorf("draw(%#x) = %s, want %s", x, got, want)
		}
	}
}
