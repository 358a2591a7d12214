// Package strictjson decodes JSON the way a service that charges for what a
// request says must: every key exactly as the Go type names it, none twice.
//
// encoding/json matches field names case-insensitively, keeps the last of
// two equal keys, ignores unknown keys and decodes a JSON string into a
// json.Number, so {"epsilon":0.1,"EPSILON":0.2} decodes to 0.2 and what a
// client meant and what a server did can differ. A Decoder walks the
// text's tokens first and refuses, at any depth, a key given twice, a key
// that is not exactly the JSON name of a field of the type it decodes into
// (case variants and unknown names alike), a value of the wrong JSON type
// and trailing data; only then does it decode. It is separate from the
// server that uses it because it knows nothing of requests: only of JSON
// and Go types.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode/utf8"
)

// DefaultMaxDepth bounds the nesting of a value when Decoder.MaxDepth is 0.
const DefaultMaxDepth = 64

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	numberType     = reflect.TypeFor[json.Number]()
)

// Opaque describes the expected shape of a json.RawMessage field that
// another parser reads later: a Type to check it against, or else the
// field Names its objects use (case variants of these are refused at any
// depth; the later parser refuses unknown ones).
type Opaque struct {
	Type  reflect.Type
	Names []string
}

// A Decoder decodes strictly. Its zero value is ready to use; it is not
// modified by decoding, so one Decoder may serve concurrent calls.
type Decoder struct {
	// Name names the whole value in error messages ("request body");
	// empty means "JSON value".
	Name string
	// Opaque gives the shape of json.RawMessage fields, by the struct
	// type that holds them and their JSON name. Other json.RawMessage
	// values are checked for duplicate keys only.
	Opaque map[reflect.Type]map[string]Opaque
	// MaxDepth bounds the nesting of objects and arrays; 0 means
	// DefaultMaxDepth.
	MaxDepth int
}

// Error is a refusal: Msg says what is wrong and where (the path of the
// offending value, as in queries[0].terms[1].coef), quoting at most 64 bytes
// of any key.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

func (d *Decoder) errorf(format string, args ...any) error {
	return &Error{Msg: fmt.Sprintf(format, args...)}
}

func (d *Decoder) name() string {
	if d.Name == "" {
		return "JSON value"
	}
	return d.Name
}

// Decode decodes the JSON value in b into v, a non-nil pointer, after Check
// against v's element type. Numbers in interface values decode as
// json.Number. Every error is an *Error.
func (d *Decoder) Decode(b []byte, v any) error {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return fmt.Errorf("strictjson: Decode needs a non-nil pointer, got %T", v)
	}
	if err := d.Check(b, t.Elem()); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return d.errorf("%s: %v", d.name(), err)
	}
	return nil
}

// Check checks that b is one JSON value that decodes into a value of type t
// with every key an exact field name, no key twice in one object, every
// value of its field's JSON type, and nothing left over. A nil t accepts
// any value and checks for duplicate keys only. Every error is an *Error.
func (d *Decoder) Check(b []byte, t reflect.Type) error {
	c := &checker{d: d, dec: json.NewDecoder(bytes.NewReader(b)), maxDepth: d.MaxDepth}
	if c.maxDepth == 0 {
		c.maxDepth = DefaultMaxDepth
	}
	c.dec.UseNumber()
	if err := c.value(t, nil, ""); err != nil {
		return err
	}
	if _, err := c.dec.Token(); err != io.EOF {
		return d.errorf("%s: trailing data after the JSON value", d.name())
	}
	return nil
}

// Decode decodes b into v with the zero Decoder.
func Decode(b []byte, v any) error {
	var d Decoder
	return d.Decode(b, v)
}

type checker struct {
	d        *Decoder
	dec      *json.Decoder
	depth    int
	maxDepth int
}

// token reads the next token; a syntax error names where.
func (c *checker) token(path string) (json.Token, error) {
	tok, err := c.dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, c.d.errorf("%s: invalid JSON%s: %v", c.d.name(), at(path), err)
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
		return c.d.errorf("%s: unexpected field", path)
	}
	if want != "" {
		name := path
		if name == "" {
			name = c.d.name()
		}
		return c.d.errorf("%s: want %s, got %s", name, want, jsonKind(tok))
	}
	return nil
}

// composite checks an object or array whose opening delimiter d was read.
func (c *checker) composite(d json.Delim, t reflect.Type, names []string, path string) error {
	if c.depth++; c.depth > c.maxDepth {
		return c.d.errorf("%s: nested deeper than %d levels", c.d.name(), c.maxDepth)
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
		fields = Fields(t)
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
			return c.d.errorf("%s: invalid JSON%s", c.d.name(), at(path))
		}
		if seen[key] {
			return c.d.errorf("%s: duplicate key %q in one JSON object%s", c.d.name(), clip(key), at(path))
		}
		seen[key] = true
		var elem reflect.Type
		var elemNames []string
		switch {
		case fields != nil:
			f, ok := fields[key]
			if !ok {
				return c.unknownField(key, path, fields)
			}
			elem = f.Type
			if o, ok := c.d.Opaque[t][key]; ok {
				elem, elemNames = o.Type, o.Names
			}
		case t != nil && t.Kind() == reflect.Map:
			elem = t.Elem()
		default:
			// Inside an opaque value: refuse case variants of its names.
			for _, n := range names {
				if key != n && strings.EqualFold(key, n) {
					return c.d.errorf("%s: unknown field %q (field names are case-sensitive: %q)", field(path, clip(key)), clip(key), n)
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
func (c *checker) unknownField(key, path string, fields map[string]reflect.StructField) error {
	for name := range fields {
		if strings.EqualFold(key, name) {
			return c.d.errorf("%s: unknown field %q (field names are case-sensitive: %q)", field(path, clip(key)), clip(key), name)
		}
	}
	where := c.d.name()
	if path != "" {
		where = path
	}
	return c.d.errorf("%s: unknown field %q", where, clip(key))
}

// Fields returns the exported fields of struct type t by the JSON names a
// Decoder accepts for them: the json tag's name, or else the Go name; a
// field tagged "-" has none.
func Fields(t reflect.Type) map[string]reflect.StructField {
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

// clip shortens a key for an error message: a client's key may be huge.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("... (%d bytes)", len(s))
}
