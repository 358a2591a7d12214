package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/release"
	"github.com/knowdp/knowdp/source"
	"github.com/knowdp/knowdp/unit"
)

// unitFlags are knowdp release's flags for privacy units.
type unitFlags struct {
	column   string
	maxRows  maxRowsFlag
	quantile float64
	limit    int
	share    float64
	rowLevel bool
}

// maxRowsFlag is --max-rows: a number of rows, or auto.
type maxRowsFlag struct {
	n    int
	auto bool
}

func (m *maxRowsFlag) String() string {
	switch {
	case m.auto:
		return "auto"
	case m.n > 0:
		return strconv.Itoa(m.n)
	}
	return ""
}

func (m *maxRowsFlag) Set(v string) error {
	if v == "auto" {
		m.auto, m.n = true, 0
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return fmt.Errorf("want a number of rows >= 1 or auto, got %q", v)
	}
	m.n, m.auto = n, false
	return nil
}

func (u *unitFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&u.column, "privacy-unit", "", "`COLUMN` of --data naming whom each row is about (a person, a student, a household): the guarantee is then per unit, with all its rows; the column is read, never released")
	fs.Var(&u.maxRows, "max-rows", "with --privacy-unit: the most rows `K` a unit keeps (chosen uniformly at random; the noise grows with K), or auto for a private choice (a quantile of the rows per unit, charged to the budget)")
	fs.Float64Var(&u.quantile, "max-rows-quantile", 0, fmt.Sprintf("with --max-rows auto: the quantile `Q` of the rows per unit to aim at (default %g)", release.DefaultMaxRowsQuantile))
	fs.IntVar(&u.limit, "max-rows-limit", 0, fmt.Sprintf("with --max-rows auto: the largest `K` considered (default %d)", release.DefaultMaxRowsLimit))
	fs.Float64Var(&u.share, "unit-share", 0, fmt.Sprintf("with --privacy-unit: the `FRACTION` of the budget for the units themselves: the choice of --max-rows auto and a private count of the units with more than K rows (default %g with auto, else 0: no count)", release.DefaultUnitShare))
	fs.BoolVar(&u.rowLevel, "row-level", false, "release per row although a column of --data looks like an identifier: say so only if every row is a different person (or household...)")
}

func (u *unitFlags) apply(q *release.Request) {
	q.PrivacyUnit, q.MaxRows, q.MaxRowsAuto = u.column, u.maxRows.n, u.maxRows.auto
	q.MaxRowsQuantile, q.MaxRowsLimit, q.UnitShare, q.RowLevel = u.quantile, u.limit, u.share, u.rowLevel
}

// tableColumns returns the columns of a fact table file (CSV header,
// Parquet schema), or nil where the reader does not list them (databases).
// It reads no data row.
func tableColumns(ctx context.Context, spec source.Spec) ([]string, error) {
	t, err := source.Open(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("--data: %w", err)
	}
	defer t.Close()
	switch c := t.(type) {
	case interface{ Header() []string }:
		return c.Header(), nil
	case interface{ Columns() []string }:
		return c.Columns(), nil
	}
	return nil, nil
}

// countUnits counts --data for a release per unit: every view the plan
// needs on all the rows, and the rows grouped by unit over the dimensions
// those views use.
func countUnits(ctx context.Context, e *env, f *releaseFlags, s *domain.Schema, plan *release.Plan) (map[domain.View][]float64, *unit.Rows, error) {
	var col *unit.Collector
	counts, err := countData(ctx, e, f, func(t cube.Records, opt cube.Options) (map[domain.View][]float64, int64, error) {
		var rec cube.Records
		var err error
		if col, rec, err = unit.NewCollector(t, s, plan.Unit().Column, plan.UnitDims()); err != nil {
			return nil, 0, err
		}
		return cube.AggregateViews(ctx, rec, s, plan.Needs(), opt)
	})
	if err != nil {
		return nil, nil, err
	}
	rows, err := col.Rows()
	if err != nil {
		return nil, nil, err
	}
	return counts, rows, nil
}

// warnRowLevel warns, for a release per row asked for with --row-level,
// about the columns that look like identifiers.
func warnRowLevel(e *env, s *domain.Schema, q release.Request) {
	if !q.RowLevel {
		return
	}
	for _, c := range q.Columns {
		if _, dim := s.Lookup(c); !dim && unit.LooksLikeIdentifier(c) {
			fmt.Fprintf(e.stderr, "WARNING: --row-level: column %q looks like an identifier; the guarantee is per row, so a unit with several rows is less protected than the stated epsilon says\n", c)
		}
	}
}
