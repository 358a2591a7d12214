package release

// What a table publishes. Every table of a release is a set of linear
// queries over the schema's domain, a query.Term (TableTerm): a view asks
// for its cells (identity along its dimensions at their levels, totals
// elsewhere), and a table may instead ask, along one of its ordered
// dimensions, for every prefix sum ("at most v", for each v) or every
// contiguous range ("from u to v", for each u <= v), for each value of its
// other dimensions. Such a table is written with two columns for the
// ordered dimension, DIM_from and DIM_to, the ends of the range.

import (
	"fmt"
	"strings"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/query"
)

// QueryKind says what a table publishes along its ordered dimension.
type QueryKind int

const (
	// QueryCells publishes the table's cells (a view).
	QueryCells QueryKind = iota
	// QueryPrefix publishes every prefix sum along the ordered dimension:
	// the count of values from the first to each value.
	QueryPrefix
	// QueryRanges publishes every contiguous range along the ordered
	// dimension: n(n+1)/2 sums for n values, ordered (first, first),
	// (first, second), ..., (last, last).
	QueryRanges
)

// String returns "cells", "prefix" or "ranges".
func (k QueryKind) String() string {
	switch k {
	case QueryCells:
		return "cells"
	case QueryPrefix:
		return "prefix"
	case QueryRanges:
		return "ranges"
	}
	return fmt.Sprintf("QueryKind(%d)", int(k))
}

// TableQuery says what one table publishes: its cells (the zero value),
// or the prefix sums or ranges along its dimension Dim, which must be an
// ordered dimension of the table at its finest level.
type TableQuery struct {
	Kind QueryKind
	Dim  int
}

// check validates q for view v of s.
func (q TableQuery) check(s *domain.Schema, v domain.View) error {
	switch q.Kind {
	case QueryCells:
		return nil
	case QueryPrefix, QueryRanges:
	default:
		return fmt.Errorf("unknown query kind %v", q.Kind)
	}
	if q.Dim < 0 || q.Dim >= s.NumDims() {
		return fmt.Errorf("%v along dimension %d: the schema has %d dimensions", q.Kind, q.Dim, s.NumDims())
	}
	name := s.Dim(q.Dim).Name
	switch {
	case !v.Dims.Has(q.Dim):
		return fmt.Errorf("%v along %s: the table %s does not have it", q.Kind, name, s.FormatView(v))
	case !s.Dim(q.Dim).Ordered:
		return fmt.Errorf("%v along %s: the schema does not declare %s ordered (\"ordered\": true)", q.Kind, name, name)
	case !v.Flat():
		return fmt.Errorf("%v along %s: prefix and range tables are released at the finest level of every dimension; %s stands at a coarser level", q.Kind, name, s.FormatView(v))
	}
	return nil
}

// TableTerm returns the queries table v publishes with query q as a
// query.Term over the domain of s.
func TableTerm(s *domain.Schema, v domain.View, q TableQuery) query.Term {
	t := s.Term(v)
	switch q.Kind {
	case QueryPrefix:
		t[q.Dim] = query.NewPrefix(s.Size(q.Dim))
	case QueryRanges:
		t[q.Dim] = query.NewRanges(s.Size(q.Dim))
	}
	return t
}

// describe names what a table publishes, for the sidecar: "" for cells.
func (q TableQuery) describe(s *domain.Schema) string {
	switch q.Kind {
	case QueryPrefix:
		return "prefix sums along " + s.Dim(q.Dim).Name
	case QueryRanges:
		return "every range along " + s.Dim(q.Dim).Name
	}
	return ""
}

// validTableQueries checks spec.Queries against the tables and returns one
// query per table (cells where none is given), and whether any table asks
// for prefix sums or ranges.
func validTableQueries(s *domain.Schema, spec Spec) ([]TableQuery, bool, error) {
	qs := make([]TableQuery, len(spec.Tables))
	if spec.Queries == nil {
		return qs, false, nil
	}
	if len(spec.Queries) != len(spec.Tables) {
		return nil, false, fmt.Errorf("release: %d table queries for %d tables", len(spec.Queries), len(spec.Tables))
	}
	any := false
	for i, q := range spec.Queries {
		if err := q.check(s, spec.Tables[i]); err != nil {
			return nil, false, fmt.Errorf("release: table %d (%s): %w", i+1, s.FormatView(spec.Tables[i]), err)
		}
		qs[i] = q
		any = any || q.Kind != QueryCells
	}
	return qs, any, nil
}

// FileName returns the name of the table's file: the view's
// (Schema.ViewFileName), with "-prefix" or "-ranges" before ".csv" for a
// table of prefix sums or ranges, so that it never collides with the
// cells of the same cuboid.
func (t Table) FileName(s *domain.Schema) string {
	name := s.ViewFileName(t.TableView())
	if t.Query.Kind == QueryCells {
		return name
	}
	return strings.TrimSuffix(name, ".csv") + "-" + t.Query.Kind.String() + ".csv"
}

// hasQueryMeasurements reports whether a measurement is not cells nor
// residuals (a release of prefix or range tables).
func (w *Release) hasQueryMeasurements() bool {
	for _, m := range w.Measurements {
		if m.Queries != "" && !m.Residual {
			return true
		}
	}
	return false
}
