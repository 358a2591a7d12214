package server

import (
	"reflect"
	"slices"
	"strings"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/strictjson"
)

// Request bodies are decoded strictly (package strictjson): a key given
// twice, a key that is not exactly the json name of a field (case variants
// and unknown names alike) and a value of the wrong JSON type are refused
// at any depth, so that what a client meant and what the server charged
// cannot differ.
var requestDecoder = strictjson.Decoder{
	Name: "request body",
	// The json.RawMessage fields that other packages parse.
	Opaque: map[reflect.Type]map[string]strictjson.Opaque{
		reflect.TypeFor[DatasetRequest](): {
			"schema": {Type: reflect.TypeFor[struct {
				Dimensions []domain.Dimension `json:"dimensions"`
			}]()},
		},
		reflect.TypeFor[QueryRequest](): {
			// The names of prior.Parse's JSON format.
			"prior": {Names: []string{"name", "level", "categories", "values", "probabilities", "pieces", "lo", "hi", "density",
				"components", "joint", "value", "probability", "independent"}},
		},
	},
}

// decodeStrict decodes the JSON object in b into v (a pointer to a struct)
// with requestDecoder; a refusal is a 400 that says what is wrong and where.
func decodeStrict(b []byte, v any) error {
	if err := requestDecoder.Decode(b, v); err != nil {
		return &inputError{msg: err.Error()}
	}
	return nil
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
