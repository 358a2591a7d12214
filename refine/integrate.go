package refine

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// LogDensityRatio returns log f(y) − log f(y + delta), where f is the
// density of Y = M L for L a vector of independent Laplace(sigma) noise:
// the log-ratio of the densities of released refined answers
// x̂_S = M L + m on neighbouring databases whose means differ by
// delta = m − m', at the output m + y. It is an independent check of Loss,
// computed by integrating the Laplace density along the fibre
// {L : M L = y} (the integral of the paper's equations (6), (7) and (13)).
// When M has fewer than k = rows independent rows, Y lives on the range of
// M and f is its density there (with respect to the Lebesgue measure of
// that set); both y and y + delta must lie on it.
//
// The fibre must be at most one-dimensional (rank(M) >= n − 1), which
// covers the paper's examples. On it the log-density is piecewise linear,
// so the integral is evaluated piece by piece in closed form and summed in
// the log domain: accurate to rounding error even far in the tails, where
// the ratio approaches its supremum.
func LogDensityRatio(m *mat.Dense, sigma float64, y, delta []float64) (float64, error) {
	k, n := m.Dims()
	if len(y) != k || len(delta) != k {
		return 0, fmt.Errorf("refine: y and delta need %d entries, have %d and %d", k, len(y), len(delta))
	}
	if math.IsNaN(sigma) || math.IsInf(sigma, 0) || sigma <= 0 {
		return 0, fmt.Errorf("refine: noise scale sigma must be finite and > 0, got %v", sigma)
	}
	pre, err := newPreimage(m)
	if err != nil {
		return 0, err
	}
	if n-pre.rank > 1 {
		return 0, fmt.Errorf("refine: the fibre of M has dimension %d; LogDensityRatio integrates over at most one", n-pre.rank)
	}
	y1 := slices.Clone(y)
	for i, d := range delta {
		y1[i] += d
	}
	l0, ok0 := pre.particular(y)
	l1, ok1 := pre.particular(y1)
	if !ok0 || !ok1 {
		return 0, errors.New("refine: y or y + delta is outside the range of M, where the density is zero")
	}
	var u []float64
	if pre.null != nil {
		u = mat.Col(nil, 0, pre.null)
	}
	return logFibre(l0, u, sigma) - logFibre(l1, u, sigma), nil
}

// logFibre returns log ∫ exp(−‖l + z u‖₁ / sigma) dz over the real line
// (or −‖l‖₁/sigma when u is nil: a point fibre).
func logFibre(l, u []float64, sigma float64) float64 {
	h := func(z float64) float64 {
		var s float64
		for i, v := range l {
			s += math.Abs(v + z*u[i])
		}
		return s
	}
	if u == nil {
		return -l1(l) / sigma
	}
	var bps []float64
	var tail float64
	for i, ui := range u {
		tail += math.Abs(ui)
		if ui != 0 {
			bps = append(bps, -l[i]/ui)
		}
	}
	slices.Sort(bps)
	// Outside the breakpoints h grows with slope tail = Σ|u_i| on each side.
	terms := []float64{
		-h(bps[0])/sigma + math.Log(sigma/tail),
		-h(bps[len(bps)-1])/sigma + math.Log(sigma/tail),
	}
	for j := 1; j < len(bps); j++ {
		a, b := bps[j-1], bps[j]
		if b <= a {
			continue
		}
		ha, hb := h(a), h(b)
		lo, dh := min(ha, hb), math.Abs(hb-ha)
		if dh <= 1e-13*(1+lo) {
			terms = append(terms, math.Log(b-a)-lo/sigma)
			continue
		}
		// ∫ exp(−h/σ) over a linear piece: σ/|β| (e^(−h_lo/σ) − e^(−h_hi/σ)).
		terms = append(terms, math.Log(sigma*(b-a)/dh)-lo/sigma+math.Log(-math.Expm1(-dh/sigma)))
	}
	top := slices.Max(terms)
	var s float64
	for _, t := range terms {
		s += math.Exp(t - top)
	}
	return top + math.Log(s)
}
