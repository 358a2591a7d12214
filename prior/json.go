package prior

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
)

// Load reads a prior from a JSON file; see Parse for the format. Errors
// name the file and the field.
func Load(path string, domains [][]string) (Prior, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("prior: %w", err)
	}
	p, err := Parse(b, domains)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// Parse decodes a prior from JSON. The forms are:
//
//	one numeric, ordinal or nominal component with finite support
//	  {"name": "employed", "level": "nominal", "categories": ["No", "Yes"],
//	   "values": ["Yes"], "probabilities": [1]}
//	  {"values": [0, 1], "probabilities": [0.99, 0.01]}
//	a piecewise-constant density (uniform on [0, 1] is one piece)
//	  {"pieces": [{"lo": 0, "hi": 1, "density": 1}]}
//	several components, an explicit joint (zero marks impossible points)
//	  {"components": [{"name": "employed", "level": "nominal", "categories": ["No", "Yes"]},
//	                  {"name": "benefits", "level": "nominal", "categories": ["No", "Yes"]}],
//	   "joint": [{"value": ["Yes", "No"], "probability": 0.6}, ...]}
//	several components, independent marginals (each of the first form)
//	  {"independent": [{...}, {...}]}
//
// "level" defaults to numeric. A categorical component's "categories" is
// its ordered domain and defaults to its values (in the order given).
// domains, if not nil, gives the declared domain of each component in
// order (nil for none): a component without "categories" takes it, and
// every category listed must belong to it. Unknown fields are errors.
func Parse(data []byte, domains [][]string) (Prior, error) {
	var spec jsonPrior
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return nil, fmt.Errorf("prior: invalid JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("prior: invalid JSON: data after the prior object")
	}
	return spec.build(domains)
}

type jsonPrior struct {
	Name          string            `json:"name"`
	Level         string            `json:"level"`
	Categories    []string          `json:"categories"`
	Values        []json.RawMessage `json:"values"`
	Probabilities []float64         `json:"probabilities"`
	Pieces        []jsonPiece       `json:"pieces"`
	Components    []jsonComponent   `json:"components"`
	Joint         []jsonJoint       `json:"joint"`
	Independent   []jsonPrior       `json:"independent"`
}

type jsonPiece struct {
	Lo      *float64 `json:"lo"`
	Hi      *float64 `json:"hi"`
	Density *float64 `json:"density"`
}

type jsonComponent struct {
	Name       string   `json:"name"`
	Level      string   `json:"level"`
	Categories []string `json:"categories"`
}

type jsonJoint struct {
	Value       []json.RawMessage `json:"value"`
	Probability *float64          `json:"probability"`
}

func (s *jsonPrior) build(domains [][]string) (Prior, error) {
	forms := 0
	for _, used := range []bool{s.Values != nil, s.Pieces != nil, s.Joint != nil, s.Independent != nil} {
		if used {
			forms++
		}
	}
	if forms != 1 {
		return nil, errors.New(`prior: give exactly one of "values" (with "probabilities"), "pieces", "joint" (with "components") or "independent"`)
	}
	switch {
	case s.Pieces != nil:
		return s.buildPieces(domains)
	case s.Joint != nil:
		return s.buildJoint(domains)
	case s.Independent != nil:
		return s.buildIndependent(domains)
	}
	return s.buildValues(domains)
}

func domain(domains [][]string, i int) []string {
	if i < len(domains) {
		return domains[i]
	}
	return nil
}

func (s *jsonPrior) extra(allowed ...string) error {
	fields := []struct {
		name string
		set  bool
	}{
		{"name", s.Name != ""}, {"level", s.Level != ""}, {"categories", s.Categories != nil},
		{"probabilities", s.Probabilities != nil}, {"components", s.Components != nil},
	}
	for _, f := range fields {
		if f.set && !slices.Contains(allowed, f.name) {
			return fmt.Errorf("prior: field %q does not apply to this form", f.name)
		}
	}
	return nil
}

func (s *jsonPrior) buildPieces(domains [][]string) (Prior, error) {
	if err := s.extra("name", "level"); err != nil {
		return nil, err
	}
	if s.Level != "" && s.Level != "numeric" {
		return nil, fmt.Errorf(`prior: "pieces" describe a numeric density; level %q does not apply`, s.Level)
	}
	if len(domains) > 1 {
		return nil, fmt.Errorf("prior: a density has one component; the query has %d", len(domains))
	}
	ps := make([]Piece, len(s.Pieces))
	for i, p := range s.Pieces {
		if p.Lo == nil || p.Hi == nil || p.Density == nil {
			return nil, fmt.Errorf(`prior: pieces[%d]: "lo", "hi" and "density" are all required`, i)
		}
		ps[i] = Piece{Lo: *p.Lo, Hi: *p.Hi, Density: *p.Density}
	}
	return NewPiecewise(s.Name, ps)
}

// component builds a component from its JSON description; values are the
// categories to use when none are listed.
func component(name, level string, cats []string, dom []string, field string) (Component, error) {
	l := Numeric
	if level != "" {
		var err error
		if l, err = ParseLevel(level); err != nil {
			return Component{}, fmt.Errorf("prior: %slevel: %w", field, err)
		}
	}
	c := Component{Name: name, Level: l}
	if l == Numeric {
		if cats != nil {
			return Component{}, fmt.Errorf(`prior: %scategories: a numeric component has no categories (set "level" to "ordinal" or "nominal")`, field)
		}
		return c, nil
	}
	switch {
	case cats != nil && dom != nil:
		for i, v := range cats {
			if !slices.Contains(dom, v) {
				return Component{}, fmt.Errorf("prior: %scategories[%d]: %q is not in the declared domain of %s (%v)", field, i, v, c.label(), dom)
			}
		}
	case cats == nil:
		cats = dom
	}
	c.Categories = slices.Clone(cats)
	return c, nil
}

// coordinate decodes a JSON value of component c: a number for a numeric
// component, a category for a categorical one.
func coordinate(c Component, raw json.RawMessage, field string) (float64, error) {
	if c.Level == Numeric {
		var x float64
		if err := json.Unmarshal(raw, &x); err != nil {
			return 0, fmt.Errorf(`prior: %s: %s is not a number (for categories set "level" to "ordinal" or "nominal")`, field, raw)
		}
		return x, nil
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, fmt.Errorf("prior: %s: %s is not a category name (a JSON string)", field, raw)
	}
	i := slices.Index(c.Categories, v)
	if i < 0 {
		return 0, fmt.Errorf("prior: %s: %q is not a category of %s", field, v, c.label())
	}
	return float64(i), nil
}

func (s *jsonPrior) buildValues(domains [][]string) (*Discrete, error) {
	if err := s.extra("name", "level", "categories", "probabilities"); err != nil {
		return nil, err
	}
	if len(s.Values) != len(s.Probabilities) {
		return nil, fmt.Errorf(`prior: %d "values" but %d "probabilities"`, len(s.Values), len(s.Probabilities))
	}
	if s.Level != "" {
		if _, err := ParseLevel(s.Level); err != nil {
			return nil, fmt.Errorf("prior: level: %w", err)
		}
	}
	cats := s.Categories
	if cats == nil && s.Level != "" && s.Level != "numeric" && domain(domains, 0) == nil {
		// The categories default to the values, in order.
		for i, raw := range s.Values {
			var v string
			if err := json.Unmarshal(raw, &v); err != nil {
				return nil, fmt.Errorf("prior: values[%d]: %s is not a category name (a JSON string)", i, raw)
			}
			cats = append(cats, v)
		}
	}
	c, err := component(s.Name, s.Level, cats, domain(domains, 0), "")
	if err != nil {
		return nil, err
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("prior: %w", err)
	}
	pts := make([]float64, len(s.Values))
	for i, raw := range s.Values {
		if pts[i], err = coordinate(c, raw, "values["+strconv.Itoa(i)+"]"); err != nil {
			return nil, err
		}
	}
	return newDiscrete([]Component{c}, pts, slices.Clone(s.Probabilities))
}

func (s *jsonPrior) buildJoint(domains [][]string) (Prior, error) {
	if err := s.extra("components"); err != nil {
		return nil, err
	}
	if len(s.Components) == 0 {
		return nil, errors.New(`prior: a "joint" prior needs "components"`)
	}
	comps := make([]Component, len(s.Components))
	for i, jc := range s.Components {
		field := "components[" + strconv.Itoa(i) + "]."
		c, err := component(jc.Name, jc.Level, jc.Categories, domain(domains, i), field)
		if err != nil {
			return nil, err
		}
		comps[i] = c
	}
	if err := validateComponents(comps); err != nil {
		return nil, err
	}
	flat := make([]float64, 0, len(s.Joint)*len(comps))
	probs := make([]float64, len(s.Joint))
	for i, j := range s.Joint {
		field := "joint[" + strconv.Itoa(i) + "]"
		if len(j.Value) != len(comps) {
			return nil, fmt.Errorf("prior: %s.value has %d coordinates; there are %d components", field, len(j.Value), len(comps))
		}
		if j.Probability == nil {
			return nil, fmt.Errorf(`prior: %s: "probability" is required`, field)
		}
		for k, raw := range j.Value {
			x, err := coordinate(comps[k], raw, field+".value["+strconv.Itoa(k)+"]")
			if err != nil {
				return nil, err
			}
			flat = append(flat, x)
		}
		probs[i] = *j.Probability
	}
	return newDiscrete(comps, flat, probs)
}

func (s *jsonPrior) buildIndependent(domains [][]string) (Prior, error) {
	if err := s.extra(); err != nil {
		return nil, err
	}
	if len(s.Independent) == 0 {
		return nil, errors.New(`prior: "independent" needs at least one marginal`)
	}
	ms := make([]*Discrete, len(s.Independent))
	for i := range s.Independent {
		m := &s.Independent[i]
		if m.Values == nil || m.Pieces != nil || m.Joint != nil || m.Independent != nil {
			return nil, fmt.Errorf(`prior: independent[%d]: each marginal needs "values" and "probabilities" (continuous marginals are not supported; discretise them)`, i)
		}
		d, err := m.buildValues([][]string{domain(domains, i)})
		if err != nil {
			return nil, fmt.Errorf("independent[%d]: %w", i, err)
		}
		ms[i] = d
	}
	return Independent(ms...)
}
