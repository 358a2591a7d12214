package metricdp

import (
	"fmt"
	"math"

	"github.com/knowdp/knowdp/noise"
)

// Marginal is a k-way marginal query of the paper's Appendix C: the fraction
// of a table's n rows whose attributes Attrs[c] take the values Values[c]
// (indices into the attributes' value lists), phi(D) = (1/n) sum_rows
// [row_S = v].
type Marginal struct {
	Attrs  []int
	Values []int
}

// MarginalScale returns the d_X-private Laplace scale of a k-way marginal
// over the full product universe of a's attributes, for tables of n rows,
// without enumerating the universe (Appendix C, "exploiting the
// sum-structure"). A row's predicate changes only if the row changes one of
// the marginal's attributes, and the cheapest such change moves one
// attribute c to its closest other value, so
//
//	b = max_{x != x'} |phi(x) - phi(x')| / (n d(x, x'))
//	  = 1 / (n min_{c in S} min_{w != v_c} d_c(v_c, w)),
//
// 0 when no attribute of S has another value. It agrees with Scale on the
// enumerated product universe (tested).
func (a *AttributeMetric) MarginalScale(q Marginal, n int64) (float64, error) {
	if n <= 0 {
		return 0, fmt.Errorf("metricdp: number of rows must be > 0, got %d", n)
	}
	if len(q.Attrs) == 0 || len(q.Attrs) != len(q.Values) {
		return 0, fmt.Errorf("metricdp: marginal has %d attributes and %d values; want the same positive number", len(q.Attrs), len(q.Values))
	}
	seen := map[int]bool{}
	dmin := math.Inf(1)
	for c, k := range q.Attrs {
		if k < 0 || k >= len(a.attrs) {
			return 0, fmt.Errorf("metricdp: marginal attribute %d is out of range [0, %d)", k, len(a.attrs))
		}
		if seen[k] {
			return 0, fmt.Errorf("metricdp: marginal names attribute %q twice", a.attrs[k].Name)
		}
		seen[k] = true
		v := q.Values[c]
		if v < 0 || v >= len(a.attrs[k].Values) {
			return 0, fmt.Errorf("metricdp: marginal value index %d of attribute %q is out of range [0, %d)", v, a.attrs[k].Name, len(a.attrs[k].Values))
		}
		for w := range a.attrs[k].Values {
			if w != v {
				dmin = min(dmin, a.ValueDist(k, v, w))
			}
		}
	}
	if math.IsInf(dmin, 1) {
		return 0, nil
	}
	return 1 / (float64(n) * dmin), nil
}

// MarginalLaplace releases one k-way marginal with d_X-privacy (the
// mechanism (12) of the paper's Appendix C): the matching count plus grid
// Laplace noise of scale n b, divided by n.
type MarginalLaplace struct {
	n     int64
	exact bool
	mech  noise.Laplace
}

// NewMarginal calibrates the release of marginal q over tables of n rows.
func (a *AttributeMetric) NewMarginal(q Marginal, n int64) (*MarginalLaplace, error) {
	b, err := a.MarginalScale(q, n)
	if err != nil {
		return nil, err
	}
	if b == 0 {
		return &MarginalLaplace{n: n, exact: true}, nil
	}
	// In count units a moved row changes the count by 1 and must cost at
	// most dmin = 1/(n b).
	dmin := 1 / (float64(n) * b)
	scale := float64(n) * b * (1 + 0x1p-18)
	for range 4 {
		mech, err := noise.NewLaplaceScale(scale, 1)
		if err != nil {
			return nil, err
		}
		if loss := mech.Loss(1); loss <= dmin*pairSlack {
			if float64(n) >= mech.Grid()*0x1p50 {
				return nil, fmt.Errorf("metricdp: %d rows do not fit the noise grid %g", n, mech.Grid())
			}
			return &MarginalLaplace{n: n, mech: mech}, nil
		} else {
			scale *= loss / dmin * (1 + 0x1p-30)
		}
	}
	return nil, fmt.Errorf("metricdp: could not calibrate the marginal's noise")
}

// Scale returns the noise scale of the released fraction (0 if exact).
func (m *MarginalLaplace) Scale() float64 {
	if m.exact {
		return 0
	}
	return m.mech.Scale() / float64(m.n)
}

// Release returns the noisy fraction for a table in which count of the n
// rows match the marginal.
func (m *MarginalLaplace) Release(r *noise.Rand, count int64) (float64, error) {
	if count < 0 || count > m.n {
		return 0, fmt.Errorf("metricdp: marginal count %d is outside [0, %d]", count, m.n)
	}
	if m.exact {
		return float64(count) / float64(m.n), nil
	}
	v, err := m.mech.Add(r, float64(count))
	if err != nil {
		return 0, err
	}
	return v / float64(m.n), nil
}
