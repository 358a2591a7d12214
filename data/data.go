// Package data embeds the small real datasets that ship with knowdp, so
// that the demo and the examples run with no set-up. See README.md in this
// directory for their provenance and licences.
package data

import (
	"bytes"
	_ "embed"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/source"
)

var (
	//go:embed arrests.csv
	arrestsCSV []byte
	//go:embed arrests.schema.json
	arrestsSchema []byte
	//go:embed us-places.csv
	usPlacesCSV []byte
)

// Arrests returns the Toronto arrests fact table (5226 rows) as a stream
// and its schema.
func Arrests() (*source.CSV, *cube.Schema, error) {
	s, err := cube.ParseSchema(arrestsSchema)
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
