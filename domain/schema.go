// Package domain holds what a release is about before any data is read:
// schemas (flat and hierarchical dimensions with their declared domains,
// levels and parents), cuboids (sets of dimensions, as bit sets) and views
// (a cuboid with a level per hierarchical dimension), the roll-ups between
// them, and the names of tables, columns and counts.
//
// A table's counts are a dense []float64 over the product of the domains of
// its dimensions at their levels, in row-major order (the last dimension
// varies fastest). Domains come from a Schema, never from the data, so that
// the set of cells released does not depend on who is in the table.
package domain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"os"
	"strings"
)

// MaxDims is the largest number of dimensions a schema may have; cuboids are
// bit sets over them.
const MaxDims = 64

// Dimension is a named attribute with its declared, ordered domain.
//
// A hierarchical dimension (a geography, a classification in finer and
// coarser bands) also names its Levels, coarsest first, the last one naming
// the Values themselves (the leaves), and gives Parents: for every level but
// the last, keyed by that level's name, the parent of each value of the next
// finer level. Its domain is still the leaves: a coarser level is a roll-up,
// so no combination of levels is ever impossible.
//
// An Ordered dimension's values are listed in their natural order (ages,
// years, counts of something), so that a workload may ask for its prefix
// sums (every "at most v") or its ranges (every "from u to v").
type Dimension struct {
	Name    string                       `json:"name"`
	Levels  []string                     `json:"levels,omitempty"`
	Values  []string                     `json:"values"`
	Parents map[string]map[string]string `json:"parents,omitempty"`
	Ordered bool                         `json:"ordered,omitempty"`
}

// Schema is the list of dimensions of a fact table and their domains.
type Schema struct {
	dims    []Dimension
	index   []map[string]int // value -> position, per dimension
	byName  map[string]int
	strides []int
	cells   int          // product of the domain sizes, or -1 if it overflows int
	hier    []*hierarchy // per dimension; nil for a flat one
}

// NewSchema validates the dimensions: at least one, at most MaxDims, names
// unique and non-empty, every domain non-empty with unique values.
func NewSchema(dims []Dimension) (*Schema, error) {
	if len(dims) == 0 {
		return nil, errors.New("schema has no dimensions")
	}
	if len(dims) > MaxDims {
		return nil, fmt.Errorf("schema has %d dimensions; at most %d are supported", len(dims), MaxDims)
	}
	s := &Schema{
		dims:    make([]Dimension, len(dims)),
		index:   make([]map[string]int, len(dims)),
		byName:  make(map[string]int, len(dims)),
		strides: make([]int, len(dims)),
		hier:    make([]*hierarchy, len(dims)),
	}
	for i, d := range dims {
		if strings.TrimSpace(d.Name) == "" {
			return nil, fmt.Errorf("dimension %d has no name", i+1)
		}
		if _, dup := s.byName[d.Name]; dup {
			return nil, fmt.Errorf("dimension name %q appears twice", d.Name)
		}
		if len(d.Values) == 0 {
			return nil, fmt.Errorf("dimension %q has an empty domain", d.Name)
		}
		s.byName[d.Name] = i
		s.index[i] = make(map[string]int, len(d.Values))
		for j, v := range d.Values {
			if _, dup := s.index[i][v]; dup {
				return nil, fmt.Errorf("dimension %q lists value %q twice", d.Name, v)
			}
			s.index[i][v] = j
		}
		s.dims[i] = Dimension{Name: d.Name, Values: append([]string(nil), d.Values...), Ordered: d.Ordered}
		if len(d.Levels) > 0 || d.Parents != nil {
			h, err := newHierarchy(d)
			if err != nil {
				return nil, fmt.Errorf("dimension %q: %w", d.Name, err)
			}
			s.hier[i] = h
			s.dims[i].Levels = append([]string(nil), d.Levels...)
			s.dims[i].Parents = h.parentMaps()
		}
	}
	s.cells = 1
	for i := len(dims) - 1; i >= 0; i-- {
		s.strides[i] = s.cells
		hi, lo := bits.Mul64(uint64(s.cells), uint64(len(dims[i].Values)))
		if s.cells < 0 || hi != 0 || lo > math.MaxInt {
			s.cells = -1
			continue
		}
		s.cells = int(lo)
	}
	return s, nil
}

// LoadSchema reads a schema from a JSON file of the form
// {"dimensions":[{"name":"sex","values":["F","M"]}, ...]}.
func LoadSchema(path string) (*Schema, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	s, err := ParseSchema(b)
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", path, err)
	}
	return s, nil
}

// ParseSchema decodes a schema from JSON (see LoadSchema). Unknown fields
// are an error, so a misspelt key is not silently ignored. A leading UTF-8
// byte order mark, which some editors write, is skipped.
func ParseSchema(b []byte) (*Schema, error) {
	b = bytes.TrimPrefix(b, []byte("\uFEFF"))
	if err := checkDuplicateKeys(b); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	// A domain value may be written as a JSON number ("values":[1997,1998]):
	// it is the value's decimal text as written, as a CSV cell holds it.
	var doc struct {
		Dimensions []struct {
			Dimension
			Values []json.RawMessage `json:"values"`
		} `json:"dimensions"`
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	dims := make([]Dimension, len(doc.Dimensions))
	for i, d := range doc.Dimensions {
		dims[i] = d.Dimension
		dims[i].Values = make([]string, len(d.Values))
		for j, raw := range d.Values {
			var v any
			vd := json.NewDecoder(bytes.NewReader(raw))
			vd.UseNumber()
			_ = vd.Decode(&v) // raw is one valid JSON value
			switch v := v.(type) {
			case string:
				dims[i].Values[j] = v
			case json.Number:
				dims[i].Values[j] = v.String()
			default:
				return nil, fmt.Errorf("dimension %q: value %d is %s; domain values are strings (or numbers, taken as written)", d.Name, j+1, raw)
			}
		}
	}
	return NewSchema(dims)
}

// MarshalJSON encodes the schema in the format LoadSchema reads.
func (s *Schema) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Dimensions []Dimension `json:"dimensions"`
	}{s.dims})
}

// NumDims returns the number of dimensions.
func (s *Schema) NumDims() int { return len(s.dims) }

// Dim returns dimension i. The caller must not modify its Values.
func (s *Schema) Dim(i int) Dimension { return s.dims[i] }

// Size returns the size of dimension i's domain.
func (s *Schema) Size(i int) int { return len(s.dims[i].Values) }

// Sizes returns the domain sizes of all dimensions.
func (s *Schema) Sizes() []int {
	n := make([]int, len(s.dims))
	for i := range s.dims {
		n[i] = len(s.dims[i].Values)
	}
	return n
}

// Lookup returns the index of the dimension with the given name.
func (s *Schema) Lookup(name string) (int, bool) {
	i, ok := s.byName[name]
	return i, ok
}

// ValueIndex returns the position of value in dimension i's domain.
func (s *Schema) ValueIndex(i int, value string) (int, bool) {
	j, ok := s.index[i][value]
	return j, ok
}

// Cells returns the number of cells of the base cuboid (the product of the
// domain sizes), or -1 if it does not fit in an int.
func (s *Schema) Cells() int { return s.cells }

// Stride returns how far apart, in the row-major base cuboid, two cells are
// that differ by one in dimension i.
func (s *Schema) Stride(i int) int { return s.strides[i] }

// CheckCells returns an error unless the base cuboid has at most limit
// cells. Call it before allocating a cube.
func (s *Schema) CheckCells(limit int) error {
	if s.cells < 0 || s.cells > limit {
		sizes := make([]string, len(s.dims))
		for i, d := range s.dims {
			sizes[i] = fmt.Sprintf("%s=%d", d.Name, len(d.Values))
		}
		n := "more than 2^63"
		if s.cells >= 0 {
			n = fmt.Sprint(s.cells)
		}
		return fmt.Errorf("the domain has %s cells (%s), above the limit of %d; raise the limit or coarsen the schema",
			n, strings.Join(sizes, " x "), limit)
	}
	return nil
}
