package prior

import (
	"math"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadTestdata(t *testing.T) {
	ages := []string{"12-17", "18-24", "25-34", "35-44", "45+"}
	for _, c := range []struct {
		file    string
		domains [][]string
		check   func(Prior) bool
	}{
		{"boolean.json", nil, func(p Prior) bool { return p.(*Discrete).Prob(1) == 0.01 }},
		{"employed.json", nil, func(p Prior) bool {
			c := p.Components()[0]
			return c.Level == Nominal && c.Name == "employed" && p.(*Discrete).Prob(1) == 0.7
		}},
		{"agegroup.json", [][]string{ages}, func(p Prior) bool {
			// The categories come from the declared domain, so the ordinal
			// distance counts the domain's positions.
			d := p.(*Discrete)
			return len(d.Components()[0].Categories) == 5 && d.Point(0)[0] == 1 && d.Point(2)[0] == 3
		}},
		{"agegroup.json", nil, func(p Prior) bool { return len(p.Components()[0].Categories) == 3 }},
		{"employed-benefits.json", nil, func(p Prior) bool {
			d := p.(*Discrete)
			return d.Len() == 4 && d.Prob(3) == 0 && d.Format(d.Point(1)) == "(No, Yes)"
		}},
		{"independent.json", nil, func(p Prior) bool {
			d := p.(*Discrete)
			return d.Len() == 6 && math.Abs(d.Prob(5)-0.12) < 1e-15
		}},
		{"uniform01.json", nil, func(p Prior) bool { return p.(*Piecewise).Mass(0, 0.25) == 0.25 }},
		{"age.json", nil, func(p Prior) bool { return math.Abs(p.(*Piecewise).Mass(12, 20)-0.4) < 1e-12 }},
	} {
		p, err := Load(filepath.Join("testdata", c.file), c.domains)
		if err != nil {
			t.Errorf("%s: %v", c.file, err)
			continue
		}
		if !c.check(p) {
			t.Errorf("%s: unexpected prior %+v", c.file, p)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		json    string
		domains [][]string
		want    string
	}{
		{`{"values": [0, 1], "probabilities": [0.5, 0.5], "colour": 1}`, nil, `unknown field "colour"`},
		{`{"values": [0], "probabilities": [1]} {}`, nil, "data after"},
		{`[1, 2]`, nil, "invalid JSON"},
		{`{}`, nil, "exactly one of"},
		{`{"values": [0], "probabilities": [1], "pieces": []}`, nil, "exactly one of"},
		{`{"values": [0, 1], "probabilities": [1]}`, nil, `2 "values" but 1 "probabilities"`},
		{`{"values": ["Yes"], "probabilities": [1]}`, nil, `values[0]: "Yes" is not a number`},
		{`{"level": "nominal", "values": [1], "probabilities": [1]}`, nil, "values[0]: 1 is not a category name"},
		{`{"level": "interval", "values": [1], "probabilities": [1]}`, nil, `level: unknown level "interval"`},
		{`{"level": "nominal", "categories": ["a"], "values": ["b"], "probabilities": [1]}`, nil, `values[0]: "b" is not a category`},
		{`{"level": "nominal", "categories": ["a", "z"], "values": ["a"], "probabilities": [1]}`, [][]string{{"a", "b"}}, `categories[1]: "z" is not in the declared domain`},
		{`{"level": "ordinal", "values": ["c"], "probabilities": [1]}`, [][]string{{"a", "b"}}, `"c" is not a category`},
		{`{"categories": ["a"], "values": [1], "probabilities": [1]}`, nil, "a numeric component has no categories"},
		{`{"values": [0, 1], "probabilities": [0.5, 0.6]}`, nil, "sum to 1.1"},
		{`{"pieces": [{"lo": 0, "hi": 1}]}`, nil, `pieces[0]: "lo", "hi" and "density" are all required`},
		{`{"pieces": [{"lo": 0, "hi": 1, "density": 1}], "probabilities": [1]}`, nil, `"probabilities" does not apply`},
		{`{"level": "ordinal", "pieces": [{"lo": 0, "hi": 1, "density": 1}]}`, nil, "numeric density"},
		{`{"joint": [{"value": [0], "probability": 1}]}`, nil, `needs "components"`},
		{`{"components": [{"name": "a"}], "joint": [{"value": [0, 1], "probability": 1}]}`, nil, "joint[0].value has 2 coordinates"},
		{`{"components": [{"name": "a"}], "joint": [{"value": [0]}]}`, nil, `joint[0]: "probability" is required`},
		{`{"components": [{"name": "a", "level": "nominal", "categories": ["x"]}], "joint": [{"value": ["y"], "probability": 1}]}`, nil, `joint[0].value[0]: "y" is not a category`},
		{`{"independent": []}`, nil, "at least one marginal"},
		{`{"independent": [{"pieces": [{"lo": 0, "hi": 1, "density": 1}]}]}`, nil, "continuous marginals are not supported"},
		{`{"independent": [{"values": [0], "probabilities": [2]}]}`, nil, "independent[0]: prior: the probabilities sum to 2"},
	} {
		_, err := Parse([]byte(c.json), c.domains)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.json, err, c.want)
		}
	}
	if _, err := Load(filepath.Join("testdata", "missing.json"), nil); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("Load of a missing file: %v", err)
	}
	_, err := Load(filepath.Join("testdata", "people.csv"), nil)
	if err == nil || !strings.Contains(err.Error(), "people.csv: prior: invalid JSON") {
		t.Errorf("Load of a CSV file: %v", err)
	}
}
