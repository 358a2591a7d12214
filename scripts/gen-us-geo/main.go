// Command gen-us-geo regenerates data/us-geo.schema.json (the real hierarchy
// of US places: region, division, state, place), data/us-geo-age.schema.json
// (the same with the age groups in broad bands), data/us-geo-places.csv (the
// hierarchy as a lookup table) and data/us-persons.csv (its synthetic
// persons) from data/us-places.csv; see package usgeo and data/README.md. It
// is deterministic and needs no network:
//
//	go run ./scripts/gen-us-geo
//
// run from the repository root. The tests in data/ check that the committed
// files are exactly what it writes.
package main

import (
	"crypto/md5"
	"fmt"
	"os"
	"path/filepath"

	"github.com/knowdp/knowdp/scripts/gen-us-geo/usgeo"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gen-us-geo:", err)
		os.Exit(1)
	}
}

func run() error {
	places, err := os.ReadFile(filepath.Join("data", "us-places.csv"))
	if err != nil {
		return fmt.Errorf("%w (run from the repository root)", err)
	}
	schema, schemaAge, persons, err := usgeo.Generate(places)
	if err != nil {
		return err
	}
	ps, err := usgeo.Places(places)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		b    []byte
	}{{"us-geo.schema.json", schema}, {"us-geo-age.schema.json", schemaAge}, {"us-geo-places.csv", usgeo.Lookup(ps)}, {"us-persons.csv", persons}} {
		path := filepath.Join("data", f.name)
		if err := os.WriteFile(path+".tmp", f.b, 0o644); err != nil {
			return err
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			return err
		}
		fmt.Printf("wrote %s: %d bytes, md5 %x\n", path, len(f.b), md5.Sum(f.b))
	}
	return nil
}
