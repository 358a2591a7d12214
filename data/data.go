// Package data embeds the small datasets that ship with knowdp, so that the
// demo and the examples run with no set-up. They are real, except the
// persons of USGeo, which are synthetic over a real hierarchy. See
// README.md in this directory for their provenance and licences.
package data

import (
	"bytes"
	_ "embed"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/source"
)

var (
	//go:embed arrests.csv
	arrestsCSV []byte
	//go:embed arrests.schema.json
	arrestsSchema []byte
	//go:embed us-places.csv
	usPlacesCSV []byte
	//go:embed us-geo.schema.json
	usGeoSchema []byte
	//go:embed us-persons.csv
	usPersonsCSV []byte
	//go:embed insteval.csv
	instEvalCSV []byte
	//go:embed insteval.schema.json
	instEvalSchema []byte
)

// InstEvalUnit is the column of InstEval that names the student who gave a
// rating: the privacy unit (several ratings per student), read but never
// released.
const InstEvalUnit = "student"

// InstEval returns the ETH Zurich lecture evaluations (73,421 ratings by
// 2,972 students; R package lme4, GPL, see README.md) as a stream and
// their schema. Column student (InstEvalUnit) names the student: 1 to 92
// rows each.
func InstEval() (*source.CSV, *domain.Schema, error) {
	s, err := domain.ParseSchema(instEvalSchema)
	if err != nil {
		return nil, nil, err
	}
	t, err := source.NewCSV("data/insteval.csv", bytes.NewReader(instEvalCSV))
	if err != nil {
		return nil, nil, err
	}
	return t, s, nil
}

// Arrests returns the Toronto arrests fact table (5226 rows) as a stream
// and its schema.
func Arrests() (*source.CSV, *domain.Schema, error) {
	s, err := domain.ParseSchema(arrestsSchema)
	if err != nil {
		return nil, nil, err
	}
	t, err := source.NewCSV("data/arrests.csv", bytes.NewReader(arrestsCSV))
	if err != nil {
		return nil, nil, err
	}
	return t, s, nil
}

// USPlaces returns the 842 US places with more than 50,000 inhabitants from
// GeoNames (CC BY; see us-places.LICENSE.md) as a stream.
func USPlaces() (*source.CSV, error) {
	return source.NewCSV("data/us-places.csv", bytes.NewReader(usPlacesCSV))
}

// USGeo returns 134,935 synthetic persons (columns geo, sex, agegroup) as a
// stream and their schema, whose dimension geo is a real hierarchy: the 842
// US places of USPlaces, as leaves "STATE/Name", grouped into the 49 states
// and DC they lie in and those into the US Census Bureau's 9 divisions and 4
// regions. The persons are not real: about one per 1,000 inhabitants of each
// place, with sex and age group drawn from fixed proportions that are not any
// place's real composition (README.md; scripts/gen-us-geo writes both
// files).
func USGeo() (*source.CSV, *domain.Schema, error) {
	s, err := domain.ParseSchema(usGeoSchema)
	if err != nil {
		return nil, nil, err
	}
	t, err := source.NewCSV("data/us-persons.csv", bytes.NewReader(usPersonsCSV))
	if err != nil {
		return nil, nil, err
	}
	return t, s, nil
}
