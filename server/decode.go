package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

	"github.com/knowdp/knowdp/domain"
)

// Request bodies are decoded strictly. encoding/json matches field names
// case-insensitively and keeps the last of two equal keys, so
// {"epsilon":0.1,"EPSILON":0.2} would be charged 0.2, and it decodes a
// JSON string into a json.Number. strictCheck walks the body's tokens first
// and refuses, at any depth, a key given twice, a key that is not exactly
// the json name of a field of the type it decodes into (case variants and
// unknown names alike), and a value of the wrong JSON type; only then is
// the body decoded.

// maxDepth bounds the nesting of a request body.
const maxDepth = 64

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	numberType     = reflect.TypeFor[json.Number]()
)

// opaque describes the expected shape of a json.RawMessage field that
// another package parses: a type to check it against, or the field names
// its objects use (case variants of these are refused; the parser itself
// refuses unknown ones).
type opaque struct {
	typ   reflect.Type
	names []string
}

// opaqueFields are the json.RawMessage fields of request types, by struct
// type and json name.
var opaqueFields = map[reflect.Type]map[string]opaque{
	reflect.TypeFor[DatasetRequest](): {
		"schema": {typ: reflect.TypeFor[struct {
			Dimensions []domain.Dimension `json:"dimensions"`
		}]()},
	},
	reflect.TypeFor[QueryRequest](): {
		// The names of prior.Parse's JSON format.
		"prior": {names: []string{"name", "level", "categories", "values", "probabilities", "pieces", "lo", "hi", "density",
			"components", "joint", "value", "probability", "independent"}},
	},
}

// decodeStrict decodes the JSON object in b into v (a pointer to a struct),
// after strictCheck.
func decodeStrict(b []byte, v any) error {
	if err := strictCheck(b, reflect.TypeOf(v).Elem()); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return badInput("request body: %v", err)
	}
	return nil
}

// strictCheck checks that b is one JSON value that decodes into a value of
// type t with every key an exact field name and nothing left over.
func strictCheck(b []byte, t reflect.Type) error {
	c := &checker{dec: json.NewDecoder(bytes.NewReader(b))}
	c.dec.UseNumber()
	if err := c.value(t, nil, ""); err != nil {
		return err
	}
	if _, err := c.dec.Token(); err != io.EOF {
		return badInput("request body: trailing data after the JSON value")
	}
	return nil
}

type checker struct {
	dec   *json.Decoder
	depth int
}

// token reads the next token; a syntax error is a 400 that names where.
func (c *checker) token(path string) (json.Token, error) {
	tok, err := c.dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, badInput("request body: invalid JSON%s: %v", at(path), err)
	}
	return tok, nil
}

func at(path string) string {
	if path == "" {
		return ""
	}
	return " at " + path
}

func field(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// jsonKind names the JSON type of a token for error messages.
func jsonKind(tok json.Token) string {
	switch tok.(type) {
	case json.Delim:
		if tok == json.Delim('{') {
			return "an object"
		}
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}

// value checks one value that decodes into type t (nil: anything, checked
// only for duplicate and case-variant keys against names).
func (c *checker) value(t reflect.Type, names []string, path string) error {
	tok, err := c.token(path)
	if err != nil {
		return err
	}
	return c.valueFrom(tok, t, names, path)
}

func (c *checker) valueFrom(tok json.Token, t reflect.Type, names []string, path string) error {
	if tok == nil {
		return nil // null leaves any field at its zero value
	}
	if t != nil {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t == rawMessageType {
			t = nil
		}
	}
	want := ""
	switch {
	case t == nil || t.Kind() == reflect.Interface:
		if d, ok := tok.(json.Delim); ok {
			return c.composite(d, nil, names, path)
		}
		return nil
	case t == numberType:
		if _, ok := tok.(json.Number); !ok {
			want = "a number"
		}
	case t.Kind() == reflect.String:
		if _, ok := tok.(string); !ok {
			want = "a string"
		}
	case t.Kind() == reflect.Bool:
		if _, ok := tok.(bool); !ok {
			want = "true or false"
		}
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Float64:
		if _, ok := tok.(json.Number); !ok {
			want = "a number"
		}
	case t.Kind() == reflect.Struct, t.Kind() == reflect.Map:
		if tok != json.Delim('{') {
			want = "an object"
			break
		}
		return c.composite(json.Delim('{'), t, names, path)
	case t.Kind() == reflect.Slice, t.Kind() == reflect.Array:
		if tok != json.Delim('[') {
			want = "an array"
			break
		}
		return c.composite(json.Delim('['), t, names, path)
	default:
		return badInput("%s: unexpected field", path)
	}
	if want != "" {
		name := path
		if name == "" {
			name = "request body"
		}
		return badInput("%s: want %s, got %s", name, want, jsonKind(tok))
	}
	return nil
}

// composite checks an object or array whose opening delimiter d was read.
func (c *checker) composite(d json.Delim, t reflect.Type, names []string, path string) error {
	if c.depth++; c.depth > maxDepth {
		return badInput("request body: nested deeper than %d levels", maxDepth)
	}
	defer func() { c.depth-- }()
	if d == json.Delim('[') {
		var elem reflect.Type
		if t != nil {
			elem = t.Elem()
		}
		for i := 0; ; i++ {
			tok, err := c.token(path)
			if err != nil {
				return err
			}
			if tok == json.Delim(']') {
				return nil
			}
			if err := c.valueFrom(tok, elem, names, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	var fields map[string]reflect.StructField
	if t != nil && t.Kind() == reflect.Struct {
		fields = jsonFields(t)
	}
	seen := map[string]bool{}
	for {
		tok, err := c.token(path)
		if err != nil {
			return err
		}
		if tok == json.Delim('}') {
			return nil
		}
		key, ok := tok.(string)
		if !ok {
			return badInput("request body: invalid JSON%s", at(path))
		}
		if seen[key] {
			return badInput("request body: duplicate key %q in one JSON object%s", clip(key), at(path))
		}
		seen[key] = true
		var elem reflect.Type
		var elemNames []string
		switch {
		case fields != nil:
			f, ok := fields[key]
			if !ok {
				return unknownField(key, path, fields)
			}
			elem = f.Type
			if o, ok := opaqueFields[t][key]; ok {
				elem, elemNames = o.typ, o.names
			}
		case t != nil && t.Kind() == reflect.Map:
			elem = t.Elem()
		default:
			// Inside an opaque value: refuse case variants of its names.
			for _, n := range names {
				if key != n && strings.EqualFold(key, n) {
					return badInput("%s: unknown field %q (field names are case-sensitive: %q)", field(path, clip(key)), clip(key), n)
				}
			}
			elemNames = names
		}
		if err := c.value(elem, elemNames, field(path, key)); err != nil {
			return err
		}
	}
}

// unknownField is the error for a key that is not a field name.
func unknownField(key, path string, fields map[string]reflect.StructField) error {
	for name := range fields {
		if strings.EqualFold(key, name) {
			return badInput("%s: unknown field %q (field names are case-sensitive: %q)", field(path, clip(key)), clip(key), name)
		}
	}
	where := "request body"
	if path != "" {
		where = path
	}
	return badInput("%s: unknown field %q", where, clip(key))
}

// jsonFields returns the fields of struct type t by their json names.
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		out[name] = f
	}
	return out
}

// The range of a workload's weights. Weights are relative (only their
// ratios matter), so any positive range would do; this one allows ratios
// up to 1e12 between two tables, far beyond a useful weighting, and keeps
// the split's arithmetic finite and far from float64's limits: a weighted
// variance is at most 1e6 times a variance, a table weighted 1e-12 of
// another gets a share of the budget about 1e-4 of its (Laplace noise; 1e-6
// with Gaussian noise), and the solver's Hessians stay far below overflow.
// Outside it, [1e300, 1] overflowed the solver's Hessian and [1e308, 1e308]
// the weighted variance itself.
const (
	minWeight = 1e-6
	maxWeight = 1e6
)

// checkRequest checks what a query request must satisfy whatever the
// dataset's data, from the request and the public schema alone, before it
// is priced or planned, and puts its cuboids in canonical form (a
// hierarchical dimension named at its finest level, "geo:place", is the
// dimension itself, "geo": one table, one query identity, one derivation).
func checkRequest(s *domain.Schema, q *QueryRequest) error {
	for i, w := range q.Weights {
		if !(w >= minWeight && w <= maxWeight) {
			return badInput("weights[%d]: %v is outside [%g, %g]: weights are relative (only their ratios matter), and this range keeps the optimal split's arithmetic finite", i, w, minWeight, maxWeight)
		}
	}
	canonical := func(names []string) []string {
		var out []string
		for k, n := range names {
			dim, level, ok := strings.Cut(n, ":")
			if !ok {
				continue
			}
			i, known := s.Lookup(dim)
			if levels := s.Levels(i); !known || len(levels) == 0 || level != levels[len(levels)-1] {
				continue
			}
			if out == nil {
				out = slices.Clone(names)
			}
			out[k] = dim
		}
		if out == nil {
			return names
		}
		return out
	}
	if q.Cuboid != nil {
		q.Cuboid = canonical(q.Cuboid)
	}
	if q.Cuboids != nil {
		lists := make([][]string, len(q.Cuboids))
		for i, names := range q.Cuboids {
			lists[i] = canonical(names)
		}
		q.Cuboids = lists
	}
	return nil
}
