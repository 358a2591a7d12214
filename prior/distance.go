package prior

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Distance measures how far a candidate response x is from the true
// response: it decides which points the refinement favours (the balls
// {x : d(truth, x) <= r}). The zero Distance means the default: Table 1's
// distance for a one-component prior.
type Distance struct {
	name     string
	absolute bool // |x - y| on one coordinate: the only distance a Piecewise prior accepts
	f        func(truth, x Point) float64
}

// String returns the distance's name, for reports.
func (d Distance) String() string {
	if d.f == nil {
		return "default"
	}
	return d.name
}

// IsZero reports whether d is the zero Distance (the default).
func (d Distance) IsZero() bool { return d.f == nil }

// Between returns d(truth, x). NaN or negative values, which a custom
// function may produce, count as +Inf: the point is farther than every
// other. They are not errors, because they may depend on the private true
// value.
func (d Distance) Between(truth, x Point) float64 {
	v := d.f(truth, x)
	if !(v >= 0) {
		return math.Inf(1)
	}
	return v
}

// Absolute is Table 1's distance for numeric values, |x - y|, on a
// one-component response.
func Absolute() Distance {
	return Distance{name: "absolute", absolute: true, f: func(a, b Point) float64 { return math.Abs(a[0] - b[0]) }}
}

// OrdinalDistance is Table 1's distance for ordinal categories c_i, c_j:
// |i - j|, on a one-component response.
func OrdinalDistance() Distance {
	return Distance{name: "ordinal", f: func(a, b Point) float64 { return math.Abs(a[0] - b[0]) }}
}

// NominalDistance is Table 1's distance for nominal categories: 0 for the
// same category, 1 otherwise, on a one-component response.
func NominalDistance() Distance {
	return Distance{name: "nominal", f: func(a, b Point) float64 { return nominal(a[0], b[0]) }}
}

func nominal(a, b float64) float64 {
	if a == b {
		return 0
	}
	return 1
}

// ForComponent returns Table 1's distance for a component's level.
func ForComponent(c Component) Distance {
	switch c.Level {
	case Ordinal:
		return OrdinalDistance()
	case Nominal:
		return NominalDistance()
	}
	return Absolute()
}

// Norm combines the per-component distances of a multi-component response.
type Norm int

// The norms.
const (
	L1   Norm = iota + 1 // sum of the component distances
	L2                   // square root of the sum of their squares
	LInf                 // their maximum
)

// String returns "l1", "l2" or "linf".
func (n Norm) String() string {
	switch n {
	case L1:
		return "l1"
	case L2:
		return "l2"
	case LInf:
		return "linf"
	}
	return fmt.Sprintf("Norm(%d)", int(n))
}

// ParseNorm returns the norm named "l1", "l2" or "linf".
func ParseNorm(s string) (Norm, error) {
	for _, n := range []Norm{L1, L2, LInf} {
		if strings.EqualFold(s, n.String()) {
			return n, nil
		}
	}
	return 0, fmt.Errorf("unknown norm %q (want l1, l2 or linf)", s)
}

// Combine returns the distance that applies Table 1's distance to each
// component, multiplies component i's by weights[i] (nil weights: all 1)
// and combines them with the norm. The paper leaves multi-component
// distances to the application (Example 2): weights are how one component
// is given priority over another.
func Combine(comps []Component, norm Norm, weights []float64) (Distance, error) {
	if len(comps) == 0 {
		return Distance{}, errors.New("prior: a distance needs at least one component")
	}
	if norm != L1 && norm != L2 && norm != LInf {
		return Distance{}, fmt.Errorf("prior: unknown norm %v", norm)
	}
	w := make([]float64, len(comps))
	for i := range w {
		w[i] = 1
	}
	name := norm.String()
	if weights != nil {
		if len(weights) != len(comps) {
			return Distance{}, fmt.Errorf("prior: %d weights for %d components", len(weights), len(comps))
		}
		for i, x := range weights {
			if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
				return Distance{}, fmt.Errorf("prior: weight %d = %v; weights must be finite and non-negative", i, x)
			}
		}
		copy(w, weights)
		name = fmt.Sprintf("weighted %s %v", norm, weights)
	}
	nom := make([]bool, len(comps))
	for i, c := range comps {
		nom[i] = c.Level == Nominal
	}
	f := func(a, b Point) float64 {
		var acc float64
		for i := range w {
			var d float64
			if nom[i] {
				d = nominal(a[i], b[i])
			} else {
				d = math.Abs(a[i] - b[i])
			}
			d *= w[i]
			switch norm {
			case L1:
				acc += d
			case L2:
				acc += d * d
			case LInf:
				acc = max(acc, d)
			}
		}
		if norm == L2 {
			return math.Sqrt(acc)
		}
		return acc
	}
	return Distance{name: name, absolute: len(comps) == 1 && !nom[0] && w[0] == 1, f: f}, nil
}

// Custom returns a user-supplied distance. f receives the true response
// and a candidate, each with one coordinate per component, and must not
// modify them.
func Custom(name string, f func(truth, x Point) float64) Distance {
	if name == "" {
		name = "custom"
	}
	return Distance{name: name, f: f}
}
