package refine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// Spec is the JSON form of Knowledge, with answers named rather than
// numbered; "knowdp refine" reads it. Every field is optional:
//
//	{
//	  "equalities": [
//	    {"name": "passing", "coefficients": {"A": 1, "B": 1, "C": 1, "D": 1, "p": -1}, "public": true},
//	    {"name": "total",   "coefficients": {"F": 1, "p": 1, "t": -1}, "value": 0, "public": true},
//	    {"name": "AB",      "coefficients": {"A": 1, "B": 1}, "value": 80}
//	  ],
//	  "order": [["F", "D", "C"]],
//	  "ranges": {"A": [0, 100], "t": [0, null]},
//	  "nonnegative": true
//	}
//
// An equality says sum(coefficient × answer) = value (value defaults to
// 0). "public": true declares that its value is the same on every
// database (it holds by definition, or was fixed without the data); leave
// it out (false) for a constant that comes from this data set, such as a
// published total. An order chain says the answers are non-decreasing in
// the order listed. A range is [lower, upper], null for an open end.
// "nonnegative" bounds every answer below by 0. Orders and ranges must be
// fixed without looking at the data.
type Spec struct {
	Equalities  []EqualitySpec        `json:"equalities,omitempty"`
	Order       [][]string            `json:"order,omitempty"`
	Ranges      map[string][]*float64 `json:"ranges,omitempty"`
	Nonnegative bool                  `json:"nonnegative,omitempty"`
}

// EqualitySpec is one equality of a Spec.
type EqualitySpec struct {
	Name         string             `json:"name,omitempty"`
	Coefficients map[string]float64 `json:"coefficients"`
	Value        float64            `json:"value"`
	Public       bool               `json:"public,omitempty"`
}

// maxSpecBytes bounds the size of a constraints file.
const maxSpecBytes = 256 << 20

// DecodeSpec reads a Spec from JSON, rejecting unknown fields (a misspelt
// "public" must not silently default to false) and trailing data.
func DecodeSpec(r io.Reader) (Spec, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxSpecBytes+1))
	if err != nil {
		return Spec{}, err
	}
	if len(data) > maxSpecBytes {
		return Spec{}, fmt.Errorf("constraints are larger than %d MiB", maxSpecBytes>>20)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Spec
	if err := dec.Decode(&s); err != nil {
		return Spec{}, jsonError(data, err)
	}
	if dec.More() {
		return Spec{}, errors.New("unexpected data after the JSON object")
	}
	return s, nil
}

// jsonError adds the line number to JSON syntax and type errors.
func jsonError(data []byte, err error) error {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	}
	if off < 0 || off > int64(len(data)) {
		return err
	}
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	return fmt.Errorf("line %d: %w", line, err)
}

// Knowledge resolves the answer names of s against names (the answers in
// order) and validates what can be checked by name: unknown answers, empty
// or duplicate equality names, ranges whose lower end is above the upper.
func (s Spec) Knowledge(names []string) (Knowledge, error) {
	index := make(map[string]int, len(names))
	for i, name := range names {
		if _, dup := index[name]; dup {
			return Knowledge{}, fmt.Errorf("answer %q appears twice", name)
		}
		index[name] = i
	}
	lookup := func(where, name string) (int, error) {
		i, ok := index[name]
		if !ok {
			return 0, fmt.Errorf("%s: unknown answer %q (the answers are %s)", where, name, listNames(names))
		}
		return i, nil
	}
	k := Knowledge{Names: names}
	labels := map[string]bool{}
	for e, es := range s.Equalities {
		where := fmt.Sprintf("equalities[%d]", e)
		label := es.Name
		if label == "" {
			label = where
		} else {
			where += fmt.Sprintf(" (%q)", es.Name)
		}
		if labels[label] {
			return Knowledge{}, fmt.Errorf("%s: the name is used by another equality", where)
		}
		labels[label] = true
		if len(es.Coefficients) == 0 {
			return Knowledge{}, fmt.Errorf("%s: no coefficients", where)
		}
		eq := Equality{Label: label, Value: es.Value, Public: es.Public}
		keys := make([]string, 0, len(es.Coefficients))
		for name := range es.Coefficients {
			keys = append(keys, name)
		}
		slices.Sort(keys)
		for _, name := range keys {
			i, err := lookup(where, name)
			if err != nil {
				return Knowledge{}, err
			}
			eq.Index = append(eq.Index, i)
			eq.Coef = append(eq.Coef, es.Coefficients[name])
		}
		k.Equalities = append(k.Equalities, eq)
	}
	for c, chain := range s.Order {
		where := fmt.Sprintf("order[%d]", c)
		var idx []int
		for _, name := range chain {
			i, err := lookup(where, name)
			if err != nil {
				return Knowledge{}, err
			}
			idx = append(idx, i)
		}
		k.Order = append(k.Order, idx)
	}
	if len(s.Ranges) > 0 || s.Nonnegative {
		k.Lower, k.Upper = make([]float64, len(names)), make([]float64, len(names))
		for i := range names {
			k.Lower[i], k.Upper[i] = math.Inf(-1), math.Inf(1)
			if s.Nonnegative {
				k.Lower[i] = 0
			}
		}
		keys := make([]string, 0, len(s.Ranges))
		for name := range s.Ranges {
			keys = append(keys, name)
		}
		slices.Sort(keys)
		for _, name := range keys {
			where := fmt.Sprintf("ranges[%q]", name)
			i, err := lookup(where, name)
			if err != nil {
				return Knowledge{}, err
			}
			r := s.Ranges[name]
			if len(r) != 2 {
				return Knowledge{}, fmt.Errorf("%s: want [lower, upper] (null for an open end), got %d numbers", where, len(r))
			}
			if r[0] != nil {
				k.Lower[i] = max(k.Lower[i], *r[0])
			}
			if r[1] != nil {
				k.Upper[i] = *r[1]
			}
			if k.Lower[i] > k.Upper[i] {
				return Knowledge{}, fmt.Errorf("%s: lower bound %v is above upper bound %v", where, k.Lower[i], k.Upper[i])
			}
		}
	}
	return k, nil
}

// listNames shows up to 10 names for an error message.
func listNames(names []string) string {
	const show = 10
	q := make([]string, 0, min(len(names), show))
	for _, n := range names[:min(len(names), show)] {
		q = append(q, fmt.Sprintf("%q", n))
	}
	s := strings.Join(q, ", ")
	if len(names) > show {
		s += fmt.Sprintf(" and %d more", len(names)-show)
	}
	return s
}
