package refine

import (
	"math"
	"os"
	"strings"
	"testing"
)

func TestDecodeGradesSpec(t *testing.T) {
	f, err := os.Open("testdata/grades.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	spec, err := DecodeSpec(f)
	if err != nil {
		t.Fatal(err)
	}
	k, err := spec.Knowledge(gradeNames)
	if err != nil {
		t.Fatal(err)
	}
	if len(k.Equalities) != 3 || k.Order != nil || k.Lower == nil {
		t.Fatalf("knowledge %+v", k)
	}
	want := gradeEqualities(true)
	for i, eq := range k.Equalities {
		if eq.Label != want[i].Label || eq.Value != want[i].Value || eq.Public != want[i].Public {
			t.Errorf("equality %d: %+v, want %+v", i, eq, want[i])
		}
		e1, _ := NewEqualities(7, []Equality{eq})
		e2, _ := NewEqualities(7, []Equality{want[i]})
		if maxAbsDiff(e1.Matrix().RawMatrix().Data, e2.Matrix().RawMatrix().Data) != 0 {
			t.Errorf("equality %d: coefficients differ", i)
		}
	}
	for i := range 7 {
		if k.Lower[i] != 0 || !math.IsInf(k.Upper[i], 1) {
			t.Errorf("answer %s: range [%v, %v], want [0, +Inf)", gradeNames[i], k.Lower[i], k.Upper[i])
		}
	}
}

func TestSpecErrors(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		want       string
	}{
		{"syntax", "{\n\"equalities\": [\n  {\"coefficients\": {\"A\": 1,}}\n]}", "line 3"},
		{"unknown field", `{"equalities":[{"coefficients":{"A":1},"publik":true}]}`, `unknown field "publik"`},
		{"wrong type", `{"equalities":[{"coefficients":{"A":"one"}}]}`, "line 1"},
		{"trailing", `{} {}`, "unexpected data after"},
		{"unknown answer", `{"equalities":[{"name":"AB","coefficients":{"A":1,"Q":1},"value":80}]}`, `equalities[0] ("AB"): unknown answer "Q" (the answers are "A", "B"`},
		{"no coefficients", `{"equalities":[{"name":"x","coefficients":{}}]}`, `equalities[0] ("x"): no coefficients`},
		{"duplicate name", `{"equalities":[{"name":"x","coefficients":{"A":1}},{"name":"x","coefficients":{"B":1}}]}`, `equalities[1] ("x"): the name is used`},
		{"order name", `{"order":[["A","Z"]]}`, `order[0]: unknown answer "Z"`},
		{"range name", `{"ranges":{"Z":[0,1]}}`, `ranges["Z"]: unknown answer "Z"`},
		{"range length", `{"ranges":{"A":[0]}}`, `ranges["A"]: want [lower, upper]`},
		{"range order", `{"ranges":{"A":[5,1]}}`, `ranges["A"]: lower bound 5 is above upper bound 1`},
		{"negative range", `{"nonnegative":true,"ranges":{"A":[null,-1]}}`, `lower bound 0 is above upper bound -1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := DecodeSpec(strings.NewReader(tc.json))
			if err == nil {
				_, err = spec.Knowledge(gradeNames)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := (Spec{}).Knowledge([]string{"a", "a"}); err == nil || !strings.Contains(err.Error(), `"a" appears twice`) {
		t.Errorf("duplicate answers: %v", err)
	}
}
