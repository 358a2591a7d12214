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
	"github.com/knowdp/knowdp/privacy"
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

// unitTable is one table of an answer per unit, row-major over its
// dimensions' values at their levels.
type unitTable struct {
	Dimensions []string   `json:"dimensions"`
	Values     [][]string `json:"values"`
	Counts     []float64  `json:"counts"`
	MOE90      float64    `json:"moe90"`
	MOE90s     []float64  `json:"moe90s"`
}

// unitAnswer is the answer to a cuboid query on a dataset with a privacy
// unit: its tables and the release's privacy story (with privacy_unit).
type unitAnswer struct {
	Tables  []unitTable      `json:"tables"`
	Privacy release.Metadata `json:"privacy"`
}

// planUnitQuery plans a cuboid query (one cuboid, cuboids with weights and
// split, views; Laplace, or Gaussian on a dataset with rho budgets) on a
// dataset with a privacy unit, from the request, the schema and the policy
// alone.
func planUnitQuery(d *dataset, q QueryRequest, eps privacy.Epsilon) (*plan, error) {
	if q.Kind != "cuboid" {
		return nil, badInput("kind: this dataset's guarantee is per unit (its policy has privacy_unit): only cuboid queries are offered (linear, prior and dx queries are per row)")
	}
	var lists [][]string
	switch {
	case q.Cuboid != nil && q.Cuboids != nil:
		return nil, badInput("cuboid and cuboids exclude each other")
	case q.Cuboid != nil:
		if q.Weights != nil || q.Split != "" {
			return nil, badInput("weights and split apply to a workload: give cuboids, a list of cuboids")
		}
		lists = [][]string{q.Cuboid}
	case q.Cuboids != nil:
		lists = q.Cuboids
	default:
		return nil, badInput("cuboid: required: the dimensions of the cuboid to release ([] is the grand total)")
	}
	spec := release.Spec{Exact: d.views, NonNegative: q.NonNeg, Integer: q.Integer,
		Unit: &release.Unit{Column: d.units.column, MaxRows: d.units.k}, Strategy: release.MeasureBest}
	if len(lists) == 0 {
		return nil, badInput("cuboids: give at least one cuboid")
	}
	cells := 0
	for i, names := range lists {
		v, err := d.schema.ViewOfNames(names...)
		if err != nil {
			return nil, badInput("cuboids[%d]: %v", i, err)
		}
		if cells += d.schema.ViewSize(v); cells > maxAnswerCells {
			return nil, badInput("cuboids: more than %d cells in all per answer", maxAnswerCells)
		}
		spec.Tables = append(spec.Tables, v)
	}
	if q.Weights != nil {
		if len(q.Weights) != len(lists) {
			return nil, badInput("weights: %d weights for %d cuboids", len(q.Weights), len(lists))
		}
		spec.Weights = q.Weights
	}
	if q.Split != "" {
		split, err := release.ParseSplit(q.Split)
		if err != nil {
			return nil, badInput("split: %v", err)
		}
		spec.Split = split
	}
	h := newHasher("cuboid/unit", eps)
	charge := epsSteps(eps)
	if q.Mechanism == "gaussian" {
		rho, err := privacy.NewRho(q.Rho)
		if err != nil {
			return nil, badInput("rho: %v", err)
		}
		delta := q.Delta
		if delta == 0 {
			delta = defaultGaussianDelta
		}
		if !(delta > 0 && delta < 1) {
			return nil, badInput("delta: must be in (0, 1), got %v", q.Delta)
		}
		spec.Mechanism, spec.Rho, spec.Delta = release.MechanismGaussian, rho, delta
		charge = rho.Steps()
		h.int(rho.Steps())
		h.float(delta)
	} else {
		spec.Epsilon = eps
	}
	pl, err := release.NewPlan(d.schema, spec)
	if err != nil {
		return nil, badInput("cuboid: %v", err)
	}
	if len(pl.Measured()) == 0 {
		// Every table is determined by the invariants: public, free.
		charge = 0
		h = newHasher("cuboid/unit", privacy.Epsilon{})
	}
	h.int(int64(len(spec.Tables)))
	for i, v := range spec.Tables {
		h.str(d.schema.FormatView(v))
		if q.Weights != nil {
			h.float(q.Weights[i])
		}
	}
	h.int(int64(spec.Split))
	h.postProcessing(q)
	return &plan{hash: h.sum(), uniform: charge, compute: func(ctx context.Context, r *noise.Rand) (any, error) {
		return answerUnits(ctx, d, pl, r)
	}}, nil
}

// answerUnits draws the answer: the invariants and the tables they
// determine from the dataset's true counts, the measured views from the
// bounded counts.
func answerUnits(ctx context.Context, d *dataset, pl *release.Plan, r *noise.Rand) (any, error) {
	project := func(c *cube.Cube, views []domain.View) (map[domain.View][]float64, error) {
		out := make(map[domain.View][]float64, len(views))
		for _, v := range views {
			x := c.Project(v.Dims)
			if !v.Flat() {
				var err error
				if x, err = d.schema.RollUp(domain.LeafView(v), x, v); err != nil {
					return nil, err
				}
			}
			out[v.Normal()] = x
		}
		return out, nil
	}
	counts, err := project(d.cube, pl.Needs())
	if err != nil {
		return nil, err
	}
	bounded, err := project(d.units.bounded, pl.Measured())
	if err != nil {
		return nil, err
	}
	unit.NewKey(r) // the bounding's draw, as knowdp release makes it
	w, err := pl.RunBounded(ctx, counts, bounded, d.units.hist, r.Seeded(), r)
	if err != nil {
		return nil, err
	}
	ans := unitAnswer{Tables: []unitTable{}, Privacy: w.Metadata()}
	for _, t := range w.Tables {
		v := t.TableView()
		tab := unitTable{Dimensions: nonNilStrings(d.schema.ViewNames(v)), Values: [][]string{}, Counts: t.Counts, MOE90: t.CellMOE90()}
		for _, i := range v.Dims.Dims() {
			tab.Values = append(tab.Values, d.schema.LevelValues(i, int(v.Up[i])))
		}
		tab.MOE90s = make([]float64, len(t.Counts))
		for c := range t.Counts {
			tab.MOE90s[c] = t.CellMOE(c)
		}
		ans.Tables = append(ans.Tables, tab)
	}
	return ans, nil
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
