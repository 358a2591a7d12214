// Package prior implements differential privacy by refining an analyst's
// prior knowledge (paper 2: Soria-Comas and Domingo-Ferrer, "Sensitivity-
// independent differential privacy via prior knowledge refinement", 2012).
//
// The analyst submits a query together with a prior: the distribution she
// expects for the answer. The mechanism multiplies the prior's mass near the
// true answer f(D) by alpha_u >= 1 and the mass far from it by alpha_d <= 1,
// so that the total stays one, and returns a sample of the result. Nothing
// depends on the query's sensitivity. For a statistical query (one that
// depends on many individuals) any two true answers must give output
// distributions within e^eps of each other, so alpha_u/alpha_d = e^eps; for
// an individual query the output need only stay within e^eps of the prior
// (the individual may be absent), so alpha_u = e^eps and alpha_d = e^-eps.
//
// # Priors
//
// A *Discrete prior has finite support: numeric, ordinal or nominal values,
// or tuples of them for queries with several components (an explicit joint,
// where zero mass marks impossible combinations, or independent marginals).
// A *Piecewise prior is a piecewise-constant density on intervals of the
// real line (a uniform prior is one piece).
//
// # The refined distribution, exactly
//
// Sort the support by distance from f(D) and let c be the prior mass of a
// ball around f(D). The refined distribution gives that ball the mass
//
//	G(c) = min(alpha_u c, 1 - alpha_d (1 - c)),
//
// spreading each shell's mass (points at equal distance) in proportion to
// the prior. The two lines cross at p_u = (1 - alpha_d)/(alpha_u - alpha_d),
// the prior mass of the set U_u that gets alpha_u; a shell straddling p_u
// gets the intermediate factor alpha_ud of Algorithm 1, step iv. This is
// Algorithm 1 for every prior, ties included, in O(R log R) for R support
// points; for a continuous prior the straddling shell has no mass and U_u is
// the ball of mass exactly p_u.
//
// The (eps, delta) variants of Section 3 move mass from the farthest points
// to f(D) (or, when f(D) has no prior mass, to the nearest points that do):
//
//	individual:   G(c) = min(1, e^eps c + delta, 1 - e^-eps (1 - c - delta))
//	statistical:  G(c) = min(1, alpha_u c + delta', 1 - alpha_d (1 - c) + delta'),
//	              delta' = delta / (1 + e^eps)
//
// # Corrections to the paper
//
//   - Section 3 and Algorithm 1 print p_u and p_d swapped; the printed p_u
//     violates the mass condition alpha_u p_u + alpha_d (1 - p_u) = 1 and
//     contradicts Table 5 (size(U_u) = 0.269 for eps = 1).
//   - Algorithm 1, step iv, as printed divides 0 by 0 (p_u + p_d = 1); the
//     factor is alpha_ud = (1 - alpha_u P(U'_u) - alpha_d P(U'_d)) /
//     (1 - P(U'_u) - P(U'_d)).
//   - Section 3's (eps, delta) sketch for individual queries, "add delta to
//     f(D) and subtract delta from the tails", breaks (eps, delta): the prior
//     then exceeds e^eps times the output by e^eps delta on the tails. The
//     version above zeroes the farthest delta of prior mass instead and
//     shrinks U_u to (1 - delta) p_u; it gives every ball the largest output
//     mass any (eps, delta) refinement can.
//   - For statistical queries the paper shifts delta' = delta/2; that breaks
//     (eps, delta) when one true value lies in the other's farthest set. The
//     shift that holds is delta/(1 + e^eps).
//
// The tests demonstrate each of these with the paper's printed versions.
//
// # Floating point
//
// Output probabilities are float64 weights sampled exactly by
// noise.Categorical. To keep float64 rounding in the normalisation from
// pushing the realised loss above eps, the factors are tightened by a
// relative 2^-36 (invisible at the paper's precision). Distances are rounded
// to 40 significant bits before they are compared, so that decimal values
// symmetric about f(D), such as 0.3 and 0.7 around 0.5, tie as they do in
// exact arithmetic. A continuous response is a point of a power-of-two grid
// (see Piecewise.Grid), never lo + (hi-lo)*u for a float u.
//
// # Errors and the true value
//
// Errors come only from public inputs: the prior, the distance, eps, delta,
// alpha_u and the shape of the answer. A true value outside the prior's
// support, NaN, or absent (nil: the individual is not in the data) is not an
// error; it only changes the output distribution (to the prior when no
// distance is finite).
//
// # Interactive protocols
//
// LaplaceSession is Protocol 1 (Laplace noise while the sensitivity of all
// answered queries divided by lambda stays within eps) and
// RefinementSession is Protocol 2 (refinement while the sum of the queries'
// eps stays within eps, with the maximum instead of the sum for queries
// declared over disjoint individuals, Proposition 3).
package prior

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Level is the measurement level of a component. It fixes the component's
// distance in Table 1 of the paper.
type Level int

// The measurement levels.
const (
	Numeric Level = iota + 1 // real values; distance |x - y|
	Ordinal                  // ordered categories c_1..c_n; distance |i - j|
	Nominal                  // unordered categories; distance 0 if equal, else 1
)

// String returns "numeric", "ordinal" or "nominal".
func (l Level) String() string {
	switch l {
	case Numeric:
		return "numeric"
	case Ordinal:
		return "ordinal"
	case Nominal:
		return "nominal"
	}
	return fmt.Sprintf("Level(%d)", int(l))
}

// ParseLevel returns the level named "numeric", "ordinal" or "nominal".
func ParseLevel(s string) (Level, error) {
	for _, l := range []Level{Numeric, Ordinal, Nominal} {
		if s == l.String() {
			return l, nil
		}
	}
	return 0, fmt.Errorf("unknown level %q (want numeric, ordinal or nominal)", s)
}

// Component is one coordinate of a query's response.
type Component struct {
	Name  string
	Level Level
	// Categories is the domain of an ordinal component, in order, or of a
	// nominal one; it is empty for a numeric component. A point's coordinate
	// for a categorical component is the position of its category here.
	Categories []string
}

// MaxCategories bounds a categorical component's domain.
const MaxCategories = 1 << 24

func (c Component) validate() error {
	switch c.Level {
	case Numeric:
		if len(c.Categories) > 0 {
			return fmt.Errorf("component %s is numeric and cannot have categories", c.label())
		}
	case Ordinal, Nominal:
		if len(c.Categories) == 0 {
			return fmt.Errorf("component %s is %v and needs its categories", c.label(), c.Level)
		}
		if len(c.Categories) > MaxCategories {
			return fmt.Errorf("component %s has %d categories; at most %d are supported", c.label(), len(c.Categories), MaxCategories)
		}
		seen := make(map[string]bool, len(c.Categories))
		for _, v := range c.Categories {
			if seen[v] {
				return fmt.Errorf("component %s lists category %q twice", c.label(), v)
			}
			seen[v] = true
		}
	default:
		return fmt.Errorf("component %s has no valid level (numeric, ordinal or nominal)", c.label())
	}
	return nil
}

func (c Component) label() string {
	if c.Name == "" {
		return "(unnamed)"
	}
	return strconv.Quote(c.Name)
}

// Coordinate returns the coordinate of a value given as text: the number
// for a numeric component, the category's position for a categorical one.
// A value that is not a number or not a category gives NaN, which the
// mechanism treats as a true value at infinite distance from every point:
// it is never an error, because the true value is private.
func (c Component) Coordinate(text string) float64 {
	if c.Level == Numeric {
		x, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
		if err != nil {
			return math.NaN()
		}
		return x
	}
	for i, v := range c.Categories {
		if v == text {
			return float64(i)
		}
	}
	return math.NaN()
}

// Format returns a coordinate as text: the number, or the category.
func (c Component) Format(x float64) string {
	if c.Level == Numeric {
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	i := int(x)
	if float64(i) == x && i >= 0 && i < len(c.Categories) {
		return c.Categories[i]
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

// Point is a response: one coordinate per component of the prior. Numeric
// coordinates hold the value; ordinal and nominal coordinates hold the
// position of the category in Component.Categories.
type Point []float64

// FormatPoint formats p with the components' categories: "0.25", "Yes" or
// "(Yes, No)".
func FormatPoint(comps []Component, p Point) string {
	if len(p) == 1 && len(comps) == 1 {
		return comps[0].Format(p[0])
	}
	parts := make([]string, len(p))
	for i, x := range p {
		if i < len(comps) {
			parts[i] = comps[i].Format(x)
		} else {
			parts[i] = strconv.FormatFloat(x, 'g', -1, 64)
		}
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// SumTolerance is how far from one a prior's total mass may be. Priors are
// normalised to sum to one exactly (up to rounding) after the check.
const SumTolerance = 1e-6

// MaxSupport bounds the number of points of a discrete prior.
const MaxSupport = 1 << 24
