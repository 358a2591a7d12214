package strictjson

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

type term struct {
	Where map[string][]string `json:"where"`
	Coef  *int64              `json:"coef,omitempty"`
}

type query struct {
	Kind    string          `json:"kind"`
	Epsilon float64         `json:"epsilon"`
	Terms   []term          `json:"terms"`
	Flag    bool            `json:"flag"`
	Number  json.Number     `json:"number"`
	Any     any             `json:"any"`
	Prior   json.RawMessage `json:"prior"`
	Shape   json.RawMessage `json:"shape"`
	Hidden  string          `json:"-"`
	NoTag   int
	private int
}

var testDecoder = Decoder{
	Name: "request body",
	Opaque: map[reflect.Type]map[string]Opaque{
		reflect.TypeFor[query](): {
			"prior": {Names: []string{"values", "probabilities"}},
			"shape": {Type: reflect.TypeFor[struct {
				Dims []string `json:"dims"`
			}]()},
		},
	},
}

// TestCheck: what is accepted and what is refused, at every depth, with
// the message naming the offending key or path.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       string // empty: accepted; else a part of the message
	}{
		{"plain", `{"kind":"cuboid","epsilon":0.5}`, ""},
		{"nulls leave zero values", `{"kind":null,"terms":null,"number":null}`, ""},
		{"nested", `{"terms":[{"where":{"sex":["F"],"year":["1997"]},"coef":3}]}`, ""},
		{"go name without tag", `{"NoTag":1}`, ""},
		{"any value", `{"any":{"a":[1,{"b":2}]}}`, ""},
		{"opaque names", `{"prior":{"values":[1,2],"probabilities":[0.5,0.5],"other":1}}`, ""},
		{"opaque type", `{"shape":{"dims":["a"]}}`, ""},
		{"sibling objects may repeat keys", `{"terms":[{"coef":1},{"coef":2,"where":{"coef":["x"]}}]}`, ""},

		{"duplicate key", `{"epsilon":5,"epsilon":0.1}`, `request body: duplicate key "epsilon" in one JSON object`},
		{"duplicate deep", `{"terms":[{"where":{"year":["1997"],"year":["1998"]}}]}`, `duplicate key "year" in one JSON object at terms[0].where`},
		{"duplicate in opaque", `{"prior":{"values":[1],"values":[2]}}`, `duplicate key "values" in one JSON object at prior`},
		{"case variant", `{"kind":"a","EPSILON":0.2}`, `EPSILON: unknown field "EPSILON" (field names are case-sensitive: "epsilon")`},
		{"case variant deep", `{"terms":[{"Where":{}}]}`, `terms[0].Where: unknown field "Where" (field names are case-sensitive: "where")`},
		{"case variant in opaque", `{"prior":{"PROBABILITIES":[1]}}`, `prior.PROBABILITIES: unknown field "PROBABILITIES" (field names are case-sensitive: "probabilities")`},
		{"unicode fold", `{"ſhape":{}}`, `unknown field "ſhape" (field names are case-sensitive: "shape")`},
		{"unknown", `{"unknown":1}`, `request body: unknown field "unknown"`},
		{"unknown deep", `{"terms":[{"x":1}]}`, `terms[0]: unknown field "x"`},
		{"unknown in opaque type", `{"shape":{"dimz":[]}}`, `shape: unknown field "dimz"`},
		{"tagged out", `{"Hidden":"x"}`, `unknown field "Hidden"`},
		{"unexported", `{"private":1}`, `unknown field "private"`},
		{"string for number", `{"epsilon":"0.1"}`, "epsilon: want a number, got a string"},
		{"string for json.Number", `{"number":"1"}`, "number: want a number, got a string"},
		{"number for string", `{"kind":1}`, "kind: want a string, got a number"},
		{"string for bool", `{"flag":"true"}`, "flag: want true or false, got a string"},
		{"array for object", `{"terms":[{"where":[]}]}`, "terms[0].where: want an object, got an array"},
		{"object for array", `{"terms":{}}`, "terms: want an array, got an object"},
		{"deep wrong type", `{"terms":[{"coef":"1"}]}`, "terms[0].coef: want a number, got a string"},
		{"not an object", `[1]`, "request body: want an object, got an array"},
		{"trailing data", `{} {}`, "request body: trailing data after the JSON value"},
		{"syntax", `{"kind":}`, "request body: invalid JSON at kind"},
		{"truncated", `{"terms":[`, "request body: invalid JSON at terms: unexpected EOF"},
		{"too deep", `{"any":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`, "request body: nested deeper than 64 levels"},
	} {
		err := testDecoder.Check([]byte(tc.body), reflect.TypeFor[query]())
		var se *Error
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %s refused: %v", tc.name, tc.body, err)
		case tc.want != "" && (err == nil || !errors.As(err, &se) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %s: got %v, want an *Error containing %q", tc.name, tc.body, err, tc.want)
		}
	}
}

// TestDuplicatesOnly: a nil type accepts any value and refuses duplicate
// keys alone.
func TestDuplicatesOnly(t *testing.T) {
	var d Decoder
	for body, ok := range map[string]bool{
		`[{"a":1},{"a":2,"b":{"a":3}}]`: true,
		`{"A":1,"a":2}`:                 true,
		`"text"`:                        true,
		`{"a":{"b":1,"b":2}}`:           false,
	} {
		if err := d.Check([]byte(body), nil); (err == nil) != ok {
			t.Errorf("%s: %v, want accepted %v", body, err, ok)
		}
	}
}

// TestDecode: an accepted value decodes as encoding/json decodes it (numbers
// in interfaces as json.Number); a refused one leaves v untouched.
func TestDecode(t *testing.T) {
	var q query
	if err := testDecoder.Decode([]byte(`{"kind":"linear","epsilon":0.25,"any":3,"terms":[{"coef":-2}]}`), &q); err != nil {
		t.Fatal(err)
	}
	if q.Kind != "linear" || q.Epsilon != 0.25 || q.Any != json.Number("3") || len(q.Terms) != 1 || *q.Terms[0].Coef != -2 {
		t.Fatalf("decoded %+v", q)
	}
	q = query{Kind: "before"}
	if err := testDecoder.Decode([]byte(`{"kind":"after","KIND":"x"}`), &q); err == nil || q.Kind != "before" {
		t.Fatalf("a refused body was decoded: %v, %+v", err, q)
	}
	// What the walk cannot see, encoding/json refuses: an integer overflow.
	if err := testDecoder.Decode([]byte(`{"terms":[{"coef":1e30}]}`), &q); err == nil || !strings.HasPrefix(err.Error(), "request body: ") {
		t.Fatalf("overflow: %v", err)
	}
	if err := testDecoder.Decode([]byte(`{}`), q); err == nil {
		t.Fatal("decoding into a non-pointer accepted")
	}
}

// TestNames: the zero Decoder names the value generically; long keys are
// clipped in messages.
func TestNames(t *testing.T) {
	err := Decode([]byte(`{"a":1,"a":2}`), new(map[string]int))
	if err == nil || !strings.HasPrefix(err.Error(), "JSON value: duplicate key") {
		t.Fatalf("zero Decoder: %v", err)
	}
	long := strings.Repeat("k", 10_000)
	err = testDecoder.Check([]byte(`{"`+long+`":1}`), reflect.TypeFor[query]())
	if err == nil || len(err.Error()) > 200 || !strings.Contains(err.Error(), "(10000 bytes)") {
		t.Fatalf("long key: %.300v", err)
	}
	d := Decoder{MaxDepth: 2}
	if err := d.Check([]byte(`[[1]]`), nil); err != nil {
		t.Fatalf("depth 2: %v", err)
	}
	if err := d.Check([]byte(`[[[1]]]`), nil); err == nil || !strings.Contains(err.Error(), "nested deeper than 2 levels") {
		t.Fatalf("depth 3: %v", err)
	}
}

// TestFields lists the names a struct's fields are decoded from.
func TestFields(t *testing.T) {
	var names []string
	for n := range Fields(reflect.TypeFor[query]()) {
		names = append(names, n)
	}
	slices.Sort(names)
	want := []string{"NoTag", "any", "epsilon", "flag", "kind", "number", "prior", "shape", "terms"}
	if !slices.Equal(names, want) {
		t.Fatalf("fields %v, want %v", names, want)
	}
}
