package prior

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/knowdp/knowdp/noise"
)

// Discrete is a distribution with finite support: a prior, or the refined
// distribution the mechanism samples from. Its points may have several
// components (a joint distribution); points of zero mass are impossible
// responses and are never returned. A Discrete is immutable and safe for
// concurrent use.
type Discrete struct {
	comps  []Component
	dim    int
	points []float64 // point i is points[i*dim : (i+1)*dim]; shared with refinements
	probs  []float64

	once sync.Once
	cat  *noise.Categorical
}

// NewDiscrete returns the distribution giving points[i] the probability
// probs[i]. Every point must have one coordinate per component (see Point),
// all finite and, for categorical components, the position of a category;
// no point may appear twice. Probabilities must be finite, non-negative and
// sum to one within SumTolerance; they are then normalised. The inputs are
// copied.
func NewDiscrete(comps []Component, points []Point, probs []float64) (*Discrete, error) {
	if err := validateComponents(comps); err != nil {
		return nil, err
	}
	if len(points) != len(probs) {
		return nil, fmt.Errorf("prior: %d points but %d probabilities", len(points), len(probs))
	}
	dim := len(comps)
	flat := make([]float64, 0, len(points)*dim)
	for i, p := range points {
		if len(p) != dim {
			return nil, fmt.Errorf("prior: point %d has %d coordinates; the prior has %d components", i, len(p), dim)
		}
		flat = append(flat, p...)
	}
	return newDiscrete(slices.Clone(comps), flat, slices.Clone(probs))
}

// NewNumeric returns a one-component numeric prior on the given values.
func NewNumeric(name string, values, probs []float64) (*Discrete, error) {
	if len(values) != len(probs) {
		return nil, fmt.Errorf("prior: %d values but %d probabilities", len(values), len(probs))
	}
	return newDiscrete([]Component{{Name: name, Level: Numeric}}, slices.Clone(values), slices.Clone(probs))
}

// NewCategorical returns a one-component prior on an ordinal or nominal
// component: probs[i] is the probability of c.Categories[i].
func NewCategorical(c Component, probs []float64) (*Discrete, error) {
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("prior: %w", err)
	}
	if c.Level == Numeric {
		return nil, fmt.Errorf("prior: NewCategorical needs an ordinal or nominal component; use NewNumeric for %s", c.label())
	}
	if len(probs) != len(c.Categories) {
		return nil, fmt.Errorf("prior: component %s has %d categories but %d probabilities", c.label(), len(c.Categories), len(probs))
	}
	pts := make([]float64, len(probs))
	for i := range pts {
		pts[i] = float64(i)
	}
	c.Categories = slices.Clone(c.Categories)
	return newDiscrete([]Component{c}, pts, slices.Clone(probs))
}

// Independent returns the joint distribution of independent marginals: the
// product distribution on the Cartesian product of their supports, in
// row-major order (the last marginal varies fastest). The product may have
// at most MaxSupport points.
func Independent(marginals ...*Discrete) (*Discrete, error) {
	if len(marginals) == 0 {
		return nil, errors.New("prior: Independent needs at least one marginal")
	}
	n := 1
	var comps []Component
	for i, m := range marginals {
		if m == nil {
			return nil, fmt.Errorf("prior: marginal %d is nil", i)
		}
		if n > MaxSupport/m.Len() {
			return nil, fmt.Errorf("prior: the product of the marginals has more than %d points", MaxSupport)
		}
		n *= m.Len()
		comps = append(comps, m.comps...)
	}
	dim := len(comps)
	flat := make([]float64, 0, n*dim)
	probs := make([]float64, 0, n)
	idx := make([]int, len(marginals))
	for range n {
		p := 1.0
		for j, m := range marginals {
			flat = append(flat, m.point(idx[j])...)
			p *= m.probs[idx[j]]
		}
		probs = append(probs, p)
		for j := len(idx) - 1; j >= 0; j-- {
			if idx[j]++; idx[j] < marginals[j].Len() {
				break
			}
			idx[j] = 0
		}
	}
	return newDiscrete(slices.Clone(comps), flat, probs)
}

func validateComponents(comps []Component) error {
	if len(comps) == 0 {
		return errors.New("prior: at least one component is required")
	}
	names := make(map[string]bool, len(comps))
	for _, c := range comps {
		if err := c.validate(); err != nil {
			return fmt.Errorf("prior: %w", err)
		}
		if c.Name != "" && names[c.Name] {
			return fmt.Errorf("prior: component name %q appears twice", c.Name)
		}
		names[c.Name] = true
	}
	return nil
}

// newDiscrete validates and takes ownership of flat and probs.
func newDiscrete(comps []Component, flat, probs []float64) (*Discrete, error) {
	if err := validateComponents(comps); err != nil {
		return nil, err
	}
	dim := len(comps)
	n := len(probs)
	switch {
	case n == 0:
		return nil, errors.New("prior: the support is empty; a discrete prior needs at least one point")
	case n > MaxSupport:
		return nil, fmt.Errorf("prior: %d support points; at most %d are supported", n, MaxSupport)
	}
	for i := range n {
		for j, c := range comps {
			x := flat[i*dim+j]
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("prior: point %d, component %s: coordinate %v is not finite", i, c.label(), x)
			}
			if c.Level != Numeric && (x != math.Trunc(x) || x < 0 || x >= float64(len(c.Categories))) {
				return nil, fmt.Errorf("prior: point %d, component %s: %v is not the position of a category (0..%d)", i, c.label(), x, len(c.Categories)-1)
			}
			if x == 0 {
				flat[i*dim+j] = 0 // -0 and +0 are the same point
			}
		}
	}
	total, err := checkMasses(probs, "probabilities")
	if err != nil {
		return nil, err
	}
	for i := range probs {
		probs[i] /= total
	}
	d := &Discrete{comps: comps, dim: dim, points: flat, probs: probs}
	if i, j, dup := d.duplicate(); dup {
		return nil, fmt.Errorf("prior: points %d and %d are both %s; list each point once", i, j, FormatPoint(comps, d.point(i)))
	}
	return d, nil
}

// checkMasses checks that masses are finite, non-negative and sum to one
// within SumTolerance, and returns their sum.
func checkMasses(m []float64, what string) (float64, error) {
	for i, p := range m {
		if math.IsNaN(p) || math.IsInf(p, 0) || p < 0 {
			return 0, fmt.Errorf("prior: %s[%d] = %v; it must be finite and non-negative", what, i, p)
		}
	}
	total := sum(m)
	if !(math.Abs(total-1) <= SumTolerance) {
		return 0, fmt.Errorf("prior: the %s sum to %v; they must sum to 1 (within %g)", what, total, SumTolerance)
	}
	return total, nil
}

// duplicate reports two indices of equal points, if any, in O(R log R).
func (d *Discrete) duplicate() (int, int, bool) {
	order := make([]int32, len(d.probs))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return slices.Compare(d.point(int(a)), d.point(int(b))) })
	for k := 1; k < len(order); k++ {
		if slices.Equal(d.point(int(order[k-1])), d.point(int(order[k]))) {
			i, j := int(order[k-1]), int(order[k])
			return min(i, j), max(i, j), true
		}
	}
	return 0, 0, false
}

// point returns a view of point i; callers must not modify it.
func (d *Discrete) point(i int) Point { return d.points[i*d.dim : (i+1)*d.dim : (i+1)*d.dim] }

// Components returns the prior's components. The caller must not modify
// them.
func (d *Discrete) Components() []Component { return d.comps }

// Len returns the number of support points.
func (d *Discrete) Len() int { return len(d.probs) }

// Point returns a copy of support point i.
func (d *Discrete) Point(i int) Point { return slices.Clone(d.point(i)) }

// Prob returns the probability of support point i.
func (d *Discrete) Prob(i int) float64 { return d.probs[i] }

// Probs returns a copy of all the probabilities, in support order.
func (d *Discrete) Probs() []float64 { return slices.Clone(d.probs) }

// Index returns the position of p in the support.
func (d *Discrete) Index(p Point) (int, bool) {
	if len(p) != d.dim {
		return 0, false
	}
	for i := range d.probs {
		if slices.Equal(d.point(i), p) {
			return i, true
		}
	}
	return 0, false
}

// SampleIndex draws a support index with probability exactly Prob(i) (as
// the float64 it is). Points of zero mass are never drawn.
func (d *Discrete) SampleIndex(r *noise.Rand) int {
	d.once.Do(func() {
		// The weights are finite, non-negative and sum to about one, which
		// is all NewCategorical checks.
		c, err := noise.NewCategorical(d.probs)
		if err != nil {
			panic("prior: internal error: " + err.Error())
		}
		d.cat = c
	})
	return d.cat.Sample(r)
}

// Sample draws a point.
func (d *Discrete) Sample(r *noise.Rand) Point { return d.Point(d.SampleIndex(r)) }

// Format formats a point of this distribution's components.
func (d *Discrete) Format(p Point) string { return FormatPoint(d.comps, p) }

// Mean returns the expectation of a one-component numeric distribution.
// It is NaN for other distributions.
func (d *Discrete) Mean() float64 {
	if d.dim != 1 || d.comps[0].Level != Numeric {
		return math.NaN()
	}
	var s kahan
	for i, p := range d.probs {
		s.add(p * d.points[i])
	}
	return s.sum()
}

func (d *Discrete) isPrior() {}

// kahan is Neumaier's compensated summation: the error of the sum does not
// grow with the number of terms.
type kahan struct{ s, c float64 }

func (k *kahan) add(x float64) {
	t := k.s + x
	if math.Abs(k.s) >= math.Abs(x) {
		k.c += (k.s - t) + x
	} else {
		k.c += (x - t) + k.s
	}
	k.s = t
}

func (k *kahan) sum() float64 { return k.s + k.c }

func sum(xs []float64) float64 {
	var k kahan
	for _, x := range xs {
		k.add(x)
	}
	return k.sum()
}
