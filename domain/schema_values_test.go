package domain

import (
	"slices"
	"strings"
	"testing"
)

// TestParseSchemaValueTypes checks that domain values written as JSON
// numbers are taken as their decimal text, as written, and that other
// non-string values are refused with a message naming the dimension, the
// value's position and what is expected.
func TestParseSchemaValueTypes(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string // the first dimension's values; nil for an error
		err       string
	}{
		{"strings", `{"dimensions":[{"name":"year","values":["1997","1998"]}]}`, []string{"1997", "1998"}, ""},
		{"numbers", `{"dimensions":[{"name":"year","values":[1997,1998]}]}`, []string{"1997", "1998"}, ""},
		{"numbers as written", `{"dimensions":[{"name":"x","values":[1.50,-2,1e3,0.1]}]}`, []string{"1.50", "-2", "1e3", "0.1"}, ""},
		{"mixed", `{"dimensions":[{"name":"x","values":["a",2]}]}`, []string{"a", "2"}, ""},
		{"duplicate after conversion", `{"dimensions":[{"name":"x","values":["2",2]}]}`, nil, `lists value "2" twice`},
		{"boolean", `{"dimensions":[{"name":"flag","values":["yes",true]}]}`, nil, `dimension "flag": value 2 is true; domain values are strings (or numbers, taken as written)`},
		{"null", `{"dimensions":[{"name":"flag","values":[null]}]}`, nil, `dimension "flag": value 1 is null`},
		{"object", `{"dimensions":[{"name":"flag","values":[{"a":1}]}]}`, nil, `value 1 is {"a":1}`},
		{"unknown field still refused", `{"dimensions":[{"name":"x","values":[1],"valeus":[2]}]}`, nil, `unknown field "valeus"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseSchema([]byte(tc.doc))
			if tc.want == nil {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Dim(0).Values; !slices.Equal(got, tc.want) {
				t.Fatalf("values %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFormatList(t *testing.T) {
	s, err := NewSchema([]Dimension{{Name: "a", Values: []string{"x"}}, {Name: "b", Values: []string{"y"}}, {Name: "c", Values: []string{"z"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cs   []Cuboid
		want string
	}{
		{nil, ""},
		{[]Cuboid{0}, "{}"},
		{[]Cuboid{0b011, 0b100}, "{a,b}, {c}"},
	} {
		if got := s.FormatList(tc.cs); got != tc.want {
			t.Errorf("FormatList(%v) = %q, want %q", tc.cs, got, tc.want)
		}
	}
}

// TestOrderedDimension: "ordered": true is read, kept and written back;
// it is false by default.
func TestOrderedDimension(t *testing.T) {
	s, err := ParseSchema([]byte(`{"dimensions":[{"name":"age","values":["0-17","18-64","65+"],"ordered":true},{"name":"sex","values":["F","M"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Dim(0).Ordered || s.Dim(1).Ordered {
		t.Fatalf("ordered: %v, %v", s.Dim(0).Ordered, s.Dim(1).Ordered)
	}
	b, err := s.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseSchema(b)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Dim(0).Ordered || back.Dim(1).Ordered {
		t.Errorf("round trip lost the order: %s", b)
	}
	if _, err := ParseSchema([]byte(`{"dimensions":[{"name":"age","values":["a"],"ordered":"yes"}]}`)); err == nil {
		t.Error(`"ordered": "yes" accepted`)
	}
}
