// Package cube counts fact tables into the tables a release needs: the
// dense base cuboid (Build) when a release measures it, or straight into
// the cuboids and views a plan needs (Aggregate, AggregateViews), reading
// the rows in parallel parts where the source can split (Splitter,
// IndexSplitter), with checks of memory and cell limits before any
// counting. Counting is the only access to the data; deciding what to
// count and what to publish is package release's.
package cube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/tensor"
)

// DefaultCellLimit is the largest base cuboid built unless the caller asks
// for more: 2^28 cells, 2 GiB of float64 counts.
const DefaultCellLimit = 1 << 28

// Cube is the base cuboid of a fact table: one count per cell of the
// schema's domain, row-major.
type Cube struct {
	Schema *domain.Schema
	Counts []float64
}

// New returns an all-zero cube, or an error if the domain has more than
// limit cells (checked before allocating).
func New(s *domain.Schema, limit int) (*Cube, error) {
	if err := s.CheckCells(limit); err != nil {
		return nil, err
	}
	return &Cube{Schema: s, Counts: make([]float64, s.Cells())}, nil
}

// Options configures building a cube from a fact table.
type Options struct {
	// CellLimit bounds the domain size; 0 means DefaultCellLimit.
	CellLimit int
	// Progress, if set, is called now and then with the bytes read so far.
	Progress func(bytesRead int64)
}

// Build counts the records of an open fact table (CSV, Parquet or the
// groups of an SQL table; see package source) into a cube over the schema.
// Every schema dimension must be a column. A value outside its
// dimension's declared domain is an error naming the table, row and
// column. The domain's size is checked against opt.CellLimit before
// anything is allocated or read.
func Build(ctx context.Context, t Records, s *domain.Schema, opt Options) (*Cube, error) {
	limit := opt.CellLimit
	if limit == 0 {
		limit = DefaultCellLimit
	}
	c, err := New(s, limit)
	if err != nil {
		return nil, err
	}
	if _, err := count(ctx, t, s, []target{newTarget(s, domain.Base(s.NumDims()), c.Counts)}, opt); err != nil {
		return nil, err
	}
	return c, nil
}

func domainList(v []string) string {
	const show = 8
	if len(v) <= show {
		return strings.Join(v, ", ")
	}
	return strings.Join(v[:show], ", ") + fmt.Sprintf(", ... %d values in all", len(v))
}

// InferSchemaFrom reads the named columns of an open fact table (see
// package source) and returns a schema whose domains are the values that
// occur, sorted (numerically when every value of a column is a number).
//
// Domains inferred from the data are NOT private: the presence of a value
// in the domain reveals that some row has it, and a release over them is
// not differentially private. It exists for exploration on public or
// synthetic data; log warns about it.
func InferSchemaFrom(ctx context.Context, t Records, columns []string, log *slog.Logger) (*domain.Schema, error) {
	if err := t.Select(ctx, columns); err != nil {
		return nil, err
	}
	seen := make([]map[string]bool, len(columns))
	for i := range seen {
		seen[i] = map[string]bool{}
	}
	for n := 0; ; n++ {
		if n&0xffff == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		rec, _, err := t.NextRecord()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		for i, v := range rec {
			if !seen[i][string(v)] { // looking up first does not allocate
				seen[i][string(v)] = true
			}
		}
	}
	dims := make([]domain.Dimension, len(columns))
	for i, name := range columns {
		vals := make([]string, 0, len(seen[i]))
		for v := range seen[i] {
			vals = append(vals, v)
		}
		sortValues(vals)
		dims[i] = domain.Dimension{Name: name, Values: vals}
	}
	log.Warn("domains inferred from the data: the release is NOT differentially private (the domain itself reveals which values occur)", "table", t.Name())
	return domain.NewSchema(dims)
}

func sortValues(v []string) {
	numeric := true
	for _, s := range v {
		if _, err := strconv.ParseFloat(s, 64); err != nil {
			numeric = false
			break
		}
	}
	if !numeric {
		slices.Sort(v)
		return
	}
	slices.SortFunc(v, func(a, b string) int {
		x, _ := strconv.ParseFloat(a, 64)
		y, _ := strconv.ParseFloat(b, 64)
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return strings.Compare(a, b)
	})
}

// Project returns the counts of cuboid cb: the sums of the cube over the
// dimensions not in cb, in row-major order of cb's dimensions (schema
// order). One pass over the cube.
func (c *Cube) Project(cb domain.Cuboid) []float64 {
	out := make([]float64, c.Schema.CuboidSize(cb))
	tensor.Project(c.Schema.Sizes(), cb, c.Counts, out)
	return out
}

// ProjectViews returns the counts of every view: Project, then the roll-up
// of a view's hierarchical dimensions to its levels. It is how a release
// plan's Needs are counted from a cube (release.Plan.Run takes the map).
func (c *Cube) ProjectViews(views []domain.View) (map[domain.View][]float64, error) {
	out := make(map[domain.View][]float64, len(views))
	for _, v := range views {
		if _, done := out[v]; done {
			continue
		}
		if err := c.Schema.CheckView(v); err != nil {
			return nil, fmt.Errorf("cube: %w", err)
		}
		x := c.Project(v.Dims)
		if !v.Flat() {
			var err error
			if x, err = c.Schema.RollUp(domain.LeafView(v), x, v); err != nil {
				return nil, fmt.Errorf("cube: counts of %s: %w", c.Schema.FormatView(v), err)
			}
		}
		out[v] = x
	}
	return out, nil
}

// Total returns the number of rows counted.
func (c *Cube) Total() float64 {
	var t float64
	for _, v := range c.Counts {
		t += v
	}
	return t
}
