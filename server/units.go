package server

// Datasets with a privacy unit (policy.privacy_unit): the rows belong to
// units (persons, students, households) named by a column of the source,
// and every answer's guarantee is per unit. At registration (and when the
// server loads the dataset) the source is counted twice over: every row
// into the dataset's cube (the invariants, published as they are, are its
// true counts) and, grouped by unit, each unit's rows bounded to max_rows
// chosen uniformly at random (package unit) into a bounded cube, which is
// what every answer measures. The bounding is drawn once, with fresh
// randomness, at registration and stored with the counts; reusing it for
// every answer is still private per unit (the argument couples one
// bounding for all of them, docs/release.md "Privacy units"). Answers go
// through release.Plan.RunBounded, calibrated to max_rows times the
// row-level sensitivity. Only cuboid queries (one cuboid, a workload,
// views) are offered: linear, prior and dx queries are per row.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/release"
	"github.com/knowdp/knowdp/sensitivity"
	"github.com/knowdp/knowdp/source"
	"github.com/knowdp/knowdp/unit"
)

// UnitPolicy declares a dataset's privacy unit: the source's column that
// names whom each row is about (read, never released, not a dimension) and
// the most rows a unit keeps.
type UnitPolicy struct {
	Column  string `json:"column"`
	MaxRows int    `json:"max_rows"`
}

// datasetUnits is what a dataset with a privacy unit holds besides its
// cube: the counts of the bounded rows per base cell and the histogram of
// rows per unit (exact up to MaxRows), both private.
type datasetUnits struct {
	column  string
	k       int
	bounded *cube.Cube
	hist    unit.Histogram
}

// applyUnitPolicy checks policy.privacy_unit, from the policy and the
// schema alone.
func (d *dataset) applyUnitPolicy() error {
	u := d.policy.PrivacyUnit
	if u == nil {
		return nil
	}
	switch {
	case u.Column == "":
		return errors.New("policy.privacy_unit.column: required: the source's column that names each row's unit")
	case u.MaxRows < 1 || u.MaxRows > sensitivity.MaxUnitRows:
		return fmt.Errorf("policy.privacy_unit.max_rows: must be in [1, %d], got %d", sensitivity.MaxUnitRows, u.MaxRows)
	case d.policy.Metric != nil:
		return errors.New("policy.metric: dx queries are per row; a dataset with a privacy unit offers cuboid queries only")
	case d.policy.Sensitivity != 0:
		return errors.New("policy.sensitivity: not supported with a privacy unit (every answer is calibrated to max_rows times the sensitivity knowdp computes)")
	case d.policy.RowLevel:
		return errors.New("policy.row_level and policy.privacy_unit exclude each other")
	}
	if _, ok := d.schema.Lookup(u.Column); ok {
		return fmt.Errorf("policy.privacy_unit.column: %q is a dimension of the schema; a unit is never released, so it cannot be one", clip(u.Column))
	}
	return nil
}

// checkIdentifiers refuses a CSV source with a column (other than the
// schema's dimensions and the count column) whose name looks like an
// identifier of a person, when the policy has neither privacy_unit nor
// row_level: a guarantee per row does not protect a person with several
// rows. It reads the header only.
func (d *dataset) checkIdentifiers(path string) error {
	if d.policy.RowLevel {
		return nil
	}
	t, err := source.OpenCSV(path)
	if err != nil {
		return fmt.Errorf("source.csv: %s: not a readable CSV file with a header row", path)
	}
	defer t.Close()
	for _, c := range t.Header() {
		if _, dim := d.schema.Lookup(c); !dim && unit.LooksLikeIdentifier(c) {
			return fmt.Errorf("source.csv: %s: column %q looks like it names who each row is about; a guarantee per row does not protect a person with several rows: "+
				"give policy.privacy_unit {\"column\": %q, \"max_rows\": K} for a guarantee per unit, or policy.row_level true if every row is a different person", path, clip(c), clip(c))
		}
	}
	return nil
}

// countCSVUnits counts a CSV source with a unit column: every row into the
// returned cube, and each unit's rows, bounded with fresh randomness, into
// d.units.
func (d *dataset) countCSVUnits(ctx context.Context, path, countColumn string, cellLimit int) (*cube.Cube, error) {
	u := d.policy.PrivacyUnit
	t, err := source.OpenCSV(path)
	if err != nil {
		return nil, fmt.Errorf("source.csv: %s: not a readable CSV file with a header row", path)
	}
	defer t.Close()
	if !slices.Contains(t.Header(), u.Column) {
		return nil, fmt.Errorf("source.csv: %s: the header row has no column %q (policy.privacy_unit.column)", path, clip(u.Column))
	}
	col, rec, err := unit.NewCollector(source.WithCountColumn(t, countColumn), d.schema, u.Column, domain.Base(d.schema.NumDims()))
	if err != nil {
		return nil, fmt.Errorf("policy.privacy_unit: %w", err)
	}
	c, err := cube.Build(ctx, rec, d.schema, cube.Options{CellLimit: cellLimit})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("source.csv: %s: row %d is malformed or has a value outside its column's declared domain (values are not quoted)", path, t.Row())
	}
	rows, err := col.Rows()
	if err != nil {
		return nil, err
	}
	bounded, err := rows.Bound(ctx, u.MaxRows, unit.NewKey(noise.NewRand()))
	if err != nil {
		return nil, err
	}
	bc, err := cube.New(d.schema, math.MaxInt)
	if err != nil {
		return nil, err
	}
	for i := range bounded.NumUnits() {
		_, cells, counts := bounded.Unit(i)
		for j, x := range cells {
			bc.Counts[x] += float64(counts[j])
		}
	}
	d.units = &datasetUnits{column: u.Column, k: u.MaxRows, bounded: bc, hist: unit.NewHistogram(rows.RowsPerUnit(), u.MaxRows)}
	return c, nil
}

// encodedCounts is what the store keeps of the dataset's counts: the cube's
// (encodeCounts), and for a dataset with a privacy unit also the bounded
// cube's and the histogram, each length-prefixed.
func (d *dataset) encodedCounts() []byte {
	if d.units == nil {
		return encodeCounts(d.cube.Counts)
	}
	var b []byte
	for _, part := range [][]byte{encodeCounts(d.cube.Counts), encodeCounts(d.units.bounded.Counts)} {
		b = binary.AppendUvarint(b, uint64(len(part)))
		b = append(b, part...)
	}
	for _, x := range d.units.hist {
		b = binary.AppendUvarint(b, uint64(x))
	}
	return b
}

// restoreUnits decodes encodedCounts' form for a dataset with a privacy
// unit: it fills c with the cube's counts and sets d.units.
func (d *dataset) restoreUnits(b []byte, c *cube.Cube) error {
	u := d.policy.PrivacyUnit
	bc, err := cube.New(d.schema, math.MaxInt)
	if err != nil {
		return err
	}
	for _, counts := range [][]float64{c.Counts, bc.Counts} {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return errors.New("counts: corrupt unit counts")
		}
		if err := decodeCounts(b[k:k+int(n)], counts); err != nil {
			return err
		}
		b = b[k+int(n):]
	}
	hist := make(unit.Histogram, u.MaxRows+2)
	for i := range hist {
		x, k := binary.Uvarint(b)
		if k <= 0 || x > math.MaxInt64 {
			return errors.New("counts: corrupt histogram of rows per unit")
		}
		hist[i], b = int64(x), b[k:]
	}
	if len(b) != 0 {
		return errors.New("counts: trailing bytes")
	}
	d.units = &datasetUnits{column: u.Column, k: u.MaxRows, bounded: bc, hist: hist}
	return nil
}

// unitSpec makes a cuboid query's spec one per unit: the dataset's unit
// and K, and no measurements kept (an answer per unit is not a source of
// derived answers, whose privacy story is per row).
func (d *dataset) unitSpec(spec *release.Spec) {
	if d.units == nil {
		return
	}
	spec.Unit = &release.Unit{Column: d.units.column, MaxRows: d.units.k}
	spec.KeepMeasurements = false
}

// runUnits releases a planned query per unit: the invariants and the tables
// they determine from the dataset's true counts, the measured views from
// its bounded counts.
func (d *dataset) runUnits(ctx context.Context, p *release.Plan, r *noise.Rand) (*release.Release, error) {
	counts, err := d.viewCounts(p.Needs())
	if err != nil {
		return nil, err
	}
	bounded := make(map[domain.View][]float64)
	for _, v := range p.Measured() {
		x := d.units.bounded.Project(v.Dims)
		if !v.Flat() {
			if x, err = d.schema.RollUp(domain.LeafView(v), x, v); err != nil {
				return nil, err
			}
		}
		bounded[v.Normal()] = x
	}
	unit.NewKey(r) // the bounding's draw, as knowdp release makes it
	return p.RunBounded(ctx, counts, bounded, d.units.hist, r.Seeded(), r)
}
