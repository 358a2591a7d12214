// Package usgeo builds knowdp's bundled hierarchy of US places
// (data/us-geo.schema.json) and its synthetic persons (data/us-persons.csv)
// from data/us-places.csv. The command in the parent directory writes the two
// files; the tests in data/ regenerate them in memory and compare them byte
// for byte, so the committed files are exactly what this code makes.
//
// The hierarchy is real: GeoNames places (CC BY) grouped into their states
// (GeoNames' admin1 code) and the states into the US Census Bureau's
// divisions and regions. The persons are not: no person-level records exist
// for these places, so Generate draws about one synthetic person per 1,000
// inhabitants of each place, with sex and age group drawn from the fixed
// proportions below. Only the number of persons per place follows real data
// (GeoNames' population, 2013 dump); the sex and age composition of every
// place is made up.
package usgeo

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// A Division is one of the US Census Bureau's nine divisions, with its
// region and its states (USPS codes; DC counts as a state here, as it does
// for the Census Bureau).
type Division struct {
	Region, Name string
	States       []string
}

// CensusDivisions lists the four Census regions and nine divisions of the
// United States in the Census Bureau's order (Region 1 Northeast: Divisions
// 1 New England and 2 Middle Atlantic; Region 2 Midwest: 3 East North
// Central, 4 West North Central; Region 3 South: 5 South Atlantic, 6 East
// South Central, 7 West South Central; Region 4 West: 8 Mountain, 9
// Pacific), covering the 50 states and the District of Columbia.
//
// Source: U.S. Census Bureau, "Census Regions and Divisions of the United
// States" (map with state FIPS codes),
// https://www2.census.gov/geo/pdfs/maps-data/maps/reference/us_regdiv.pdf
// — in use since 1950 (the Midwest was called North Central before 1984).
// A work of the US federal government, in the public domain (17 U.S.C.
// § 105). Puerto Rico and the other territories belong to no region or
// division; GeoNames files them under country codes of their own (PR, GU,
// VI, AS, MP), so data/us-places.csv (country code US) has none, and
// Generate refuses a place whose state is not in this table rather than drop
// it.
var CensusDivisions = []Division{
	{"Northeast", "New England", []string{"CT", "MA", "ME", "NH", "RI", "VT"}},
	{"Northeast", "Middle Atlantic", []string{"NJ", "NY", "PA"}},
	{"Midwest", "East North Central", []string{"IL", "IN", "MI", "OH", "WI"}},
	{"Midwest", "West North Central", []string{"IA", "KS", "MN", "MO", "ND", "NE", "SD"}},
	{"South", "South Atlantic", []string{"DC", "DE", "FL", "GA", "MD", "NC", "SC", "VA", "WV"}},
	{"South", "East South Central", []string{"AL", "KY", "MS", "TN"}},
	{"South", "West South Central", []string{"AR", "LA", "OK", "TX"}},
	{"West", "Mountain", []string{"AZ", "CO", "ID", "MT", "NM", "NV", "UT", "WY"}},
	{"West", "Pacific", []string{"AK", "CA", "HI", "OR", "WA"}},
}

// Levels are the levels of the geo dimension, coarsest first; the last
// names the leaves.
var Levels = []string{"region", "division", "state", "place"}

// A Share is a value of a synthetic attribute and its probability in
// percent.
type Share struct {
	Value   string
	Percent int
}

// Sex and AgeGroup are the fixed proportions the synthetic persons are drawn
// from, independently of each other and of the place. They were chosen by
// hand to look plausible for a US city; they are not taken from any source
// and are not the composition of any real place. The age bands are fixed in
// advance, so the schema's domains do not depend on the data.
var (
	Sex = []Share{{"F", 51}, {"M", 49}}

	AgeGroup = []Share{
		{"0-17", 23}, {"18-24", 10}, {"25-34", 14}, {"35-44", 13},
		{"45-54", 14}, {"55-64", 12}, {"65+", 14},
	}
)

// PersonsPer is the number of inhabitants one synthetic person stands for.
const PersonsPer = 1000

// Place is a row of data/us-places.csv as the hierarchy uses it.
type Place struct {
	GeonameID  uint64
	Name       string
	State      string
	Population int64
	Leaf       string // the value of the place level: State + "/" + Name, disambiguated
}

// Persons returns the number of synthetic persons of a place: its population
// divided by PersonsPer, rounded half up, and at least 1.
func (p Place) Persons() int64 {
	return max(1, (p.Population+PersonsPer/2)/PersonsPer)
}

// Places reads data/us-places.csv (the columns geonameid, name, admin1 and
// population are used) and returns the places in the hierarchy's order:
// Census division (in the Census Bureau's order, so regions are contiguous
// too), then state code, then leaf value, byte-wise. The leaf value is the
// state code, "/" and the GeoNames name; when several places of a state
// share a name, each of them gets " (GEONAMEID)" appended, so the result does
// not depend on the order of the input. A place whose state is not one of
// the 50 states or DC (CensusDivisions), a duplicate GeoNames id, or a leaf
// value that is still not unique is an error.
func Places(placesCSV []byte) ([]Place, error) {
	r := csv.NewReader(bytes.NewReader(placesCSV))
	head, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("us-places.csv: header: %w", err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[h] = i
	}
	for _, want := range []string{"geonameid", "name", "admin1", "population"} {
		if _, ok := col[want]; !ok {
			return nil, fmt.Errorf("us-places.csv: no column %q", want)
		}
	}
	division := stateDivisions()
	var places []Place
	ids := map[uint64]bool{}
	byName := map[string]int{} // state/name -> number of places
	for line := 2; ; line++ {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("us-places.csv: %w", err)
		}
		id, err := strconv.ParseUint(rec[col["geonameid"]], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("us-places.csv line %d: geonameid: %w", line, err)
		}
		pop, err := strconv.ParseInt(rec[col["population"]], 10, 64)
		if err != nil || pop < 0 {
			return nil, fmt.Errorf("us-places.csv line %d: population %q is not a non-negative integer", line, rec[col["population"]])
		}
		p := Place{GeonameID: id, Name: rec[col["name"]], State: rec[col["admin1"]], Population: pop}
		if p.Name == "" {
			return nil, fmt.Errorf("us-places.csv line %d: empty name", line)
		}
		if _, ok := division[p.State]; !ok {
			return nil, fmt.Errorf("us-places.csv line %d: %q (GeoNames %d) is in %q, which is not one of the 50 states or DC: no Census region or division; decide how to handle it before regenerating", line, p.Name, id, p.State)
		}
		if ids[id] {
			return nil, fmt.Errorf("us-places.csv line %d: GeoNames id %d appears twice", line, id)
		}
		ids[id] = true
		p.Leaf = p.State + "/" + p.Name
		byName[p.Leaf]++
		places = append(places, p)
	}
	if len(places) == 0 {
		return nil, errors.New("us-places.csv has no places")
	}
	leaves := map[string]bool{}
	for i := range places {
		if byName[places[i].Leaf] > 1 {
			places[i].Leaf += " (" + strconv.FormatUint(places[i].GeonameID, 10) + ")"
		}
		if leaves[places[i].Leaf] {
			return nil, fmt.Errorf("us-places.csv: place value %q is not unique even after disambiguation", places[i].Leaf)
		}
		leaves[places[i].Leaf] = true
	}
	slices.SortFunc(places, func(a, b Place) int {
		if c := division[a.State] - division[b.State]; c != 0 {
			return c
		}
		if c := strings.Compare(a.State, b.State); c != 0 {
			return c
		}
		return strings.Compare(a.Leaf, b.Leaf)
	})
	return places, nil
}

// stateDivisions maps each state code to its division's index in
// CensusDivisions.
func stateDivisions() map[string]int {
	m := map[string]int{}
	for i, d := range CensusDivisions {
		for _, s := range d.States {
			m[s] = i
		}
	}
	return m
}

// Lookup writes the hierarchy as a public lookup table
// (data/us-geo-places.csv): the header region,division,state,place, then
// one row per place in the hierarchy's order, from which
// "knowdp schema --hierarchy geo=region,division,state,place --from
// data/us-geo-places.csv" builds the geo dimension of the schema.
func Lookup(places []Place) []byte {
	division := stateDivisions()
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write(Levels)
	for _, p := range places {
		d := CensusDivisions[division[p.State]]
		w.Write([]string{d.Region, d.Name, p.State, p.Leaf})
	}
	w.Flush()
	return b.Bytes()
}

// BroadAge gives each age group its broad band: the level "broad" above
// agegroup in data/us-geo-age.schema.json, so that tables can cross two
// hierarchies (geography and age).
var BroadAge = [][2]string{
	{"0-17", "child"}, {"18-24", "adult"}, {"25-34", "adult"}, {"35-44", "adult"},
	{"45-54", "adult"}, {"55-64", "adult"}, {"65+", "senior"},
}

// Generate returns the schema (data/us-geo.schema.json), the same schema
// with the age groups in broad bands (data/us-geo-age.schema.json) and the
// synthetic persons (data/us-persons.csv) for the places of
// data/us-places.csv.
func Generate(placesCSV []byte) (schema, schemaAge, persons []byte, err error) {
	places, err := Places(placesCSV)
	if err != nil {
		return nil, nil, nil, err
	}
	return Schema(places, false), Schema(places, true), Persons(places), nil
}

// Schema writes the schema: the hierarchical dimension geo (levels region,
// division, state, place; the leaves are the places; parents maps, per
// non-leaf level, each value of the next finer level to its parent), then
// sex and agegroup. Only states, divisions and regions that have a place
// appear. With ageBands, agegroup is hierarchical too: levels broad and
// agegroup (BroadAge). It is laid out one value or one parent per line, so
// that diffs stay readable.
func Schema(places []Place, ageBands bool) []byte {
	division := stateDivisions()
	var b bytes.Buffer
	b.WriteString("{\n  \"dimensions\": [\n    {\n")
	b.WriteString("      \"name\": \"geo\",\n")
	b.WriteString("      \"levels\": [" + quoteList(Levels) + "],\n")
	b.WriteString("      \"values\": [\n")
	for i, p := range places {
		b.WriteString("        " + quote(p.Leaf) + comma(i, len(places)) + "\n")
	}
	b.WriteString("      ],\n      \"parents\": {\n")
	var states, divisions []string
	var stateKV, divisionKV, regionKV [][2]string
	for _, p := range places {
		stateKV = append(stateKV, [2]string{p.Leaf, p.State})
		if len(states) == 0 || states[len(states)-1] != p.State {
			states = append(states, p.State)
			d := CensusDivisions[division[p.State]]
			divisionKV = append(divisionKV, [2]string{p.State, d.Name})
			if len(divisions) == 0 || divisions[len(divisions)-1] != d.Name {
				divisions = append(divisions, d.Name)
				regionKV = append(regionKV, [2]string{d.Name, d.Region})
			}
		}
	}
	levels := []struct {
		name string
		kv   [][2]string
	}{{"state", stateKV}, {"division", divisionKV}, {"region", regionKV}}
	for li, l := range levels {
		b.WriteString("        " + quote(l.name) + ": {\n")
		for i, kv := range l.kv {
			b.WriteString("          " + quote(kv[0]) + ": " + quote(kv[1]) + comma(i, len(l.kv)) + "\n")
		}
		b.WriteString("        }" + comma(li, len(levels)) + "\n")
	}
	b.WriteString("      }\n    },\n")
	b.WriteString("    {\"name\": \"sex\", \"values\": [" + quoteList(values(Sex)) + "]},\n")
	if !ageBands {
		b.WriteString("    {\"name\": \"agegroup\", \"values\": [" + quoteList(values(AgeGroup)) + "]}\n")
	} else {
		b.WriteString("    {\"name\": \"agegroup\", \"levels\": [\"broad\", \"agegroup\"],\n")
		b.WriteString("     \"values\": [" + quoteList(values(AgeGroup)) + "],\n")
		b.WriteString("     \"parents\": {\"broad\": {")
		for i, kv := range BroadAge {
			b.WriteString(quote(kv[0]) + ": " + quote(kv[1]) + comma(i, len(BroadAge)))
			if i < len(BroadAge)-1 {
				b.WriteString(" ")
			}
		}
		b.WriteString("}}}\n")
	}
	b.WriteString("  ]\n}\n")
	return b.Bytes()
}

// Persons writes the synthetic persons: the header geo,sex,agegroup, then,
// place by place in the hierarchy's order, Place.Persons rows, each with a
// sex and an age group drawn from Sex and AgeGroup by a SplitMix64 stream
// seeded with the place's GeoNames id. The stream is written out here rather
// than taken from math/rand, so that the file cannot change with the Go
// version, and a place's persons do not depend on the other places.
func Persons(places []Place) []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write([]string{"geo", "sex", "agegroup"})
	for _, p := range places {
		rng := splitmix64{state: p.GeonameID}
		for range p.Persons() {
			sex := draw(Sex, rng.next())
			age := draw(AgeGroup, rng.next())
			w.Write([]string{p.Leaf, sex, age})
		}
	}
	w.Flush()
	return b.Bytes()
}

// splitmix64 is Steele, Lea and Flood's SplitMix64 generator (as in Vigna's
// reference implementation, https://prng.di.unimi.it/splitmix64.c).
type splitmix64 struct{ state uint64 }

func (s *splitmix64) next() uint64 {
	s.state += 0x9e3779b97f4a7c15
	z := s.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// draw picks a value with probability proportional to its percentage: u, the
// top 32 bits of x, becomes r = ⌊u·100/2³²⌋ in [0, 100), in integers only.
func draw(shares []Share, x uint64) string {
	r := int(((x >> 32) * 100) >> 32)
	for _, s := range shares {
		if r < s.Percent {
			return s.Value
		}
		r -= s.Percent
	}
	panic("usgeo: percentages do not sum to 100")
}

func values(shares []Share) []string {
	v := make([]string, len(shares))
	for i, s := range shares {
		v[i] = s.Value
	}
	return v
}

func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		panic(err) // a string always encodes
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func quoteList(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = quote(v)
	}
	return strings.Join(q, ", ")
}

func comma(i, n int) string {
	if i < n-1 {
		return ","
	}
	return ""
}
