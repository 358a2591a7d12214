package metricdp

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/knowdp/knowdp/noise"
)

// roundingMargin is added to every pair's utility sensitivity, in units of
// the largest utility magnitude, so that the float64 utilities and weights
// the samplers take as exact stay within the privacy bound (float64
// rounding moves each by at most a few parts in 2^53 of that magnitude).
const roundingMargin = 0x1p-47

// pairLinfScale returns max over pairs at finite distance of
// (max_r |U[r,i] - U[r,j]| * unit + margin) / d(u_i, u_j): the scale of an
// exponential mechanism whose utility for candidate r changes by at most
// unit * |U[r,i] - U[r,j]| when a record moves from u_i to u_j (Definition 5
// of the paper, generalised utility sensitivity).
//
// It fails if no pair at finite distance changes any utility: the
// mechanism would then not depend on the data.
func pairLinfScale(ctx context.Context, m Metric, u *Queries, unit, margin float64) (float64, error) {
	nw := scanWorkers(u.n)
	best := make([]float64, nw)
	moves := make([]bool, nw)
	bad := make([]error, nw)
	err := scanPairs(ctx, m, func(w, i int, d []float64) {
		ci := u.col(i)
		for o, dij := range d {
			if math.IsInf(dij, 1) {
				continue
			}
			cj := u.col(i + 1 + o)
			var s float64
			for l, c := range ci {
				s = max(s, math.Abs(c-cj[l]))
			}
			if !(dij > 0) {
				if s != 0 && bad[w] == nil {
					bad[w] = fmt.Errorf("metricdp: utilities tell apart u_%d and u_%d at distance %v: no scale makes that private", i, i+1+o, dij)
				}
				continue
			}
			best[w] = max(best[w], (s*unit+margin)/dij)
			moves[w] = moves[w] || s > 0
		}
	})
	if err != nil {
		return 0, err
	}
	if err := errors.Join(bad...); err != nil {
		return 0, err
	}
	var b float64
	any := false
	for w, v := range best {
		b = max(b, v)
		any = any || moves[w]
	}
	if !any {
		return 0, errors.New("metricdp: the utilities do not depend on the data (no pair at finite distance changes them); there is nothing to choose privately")
	}
	return b, nil
}

// Exponential is the d_X-private exponential mechanism (the paper's
// Definition 9 and Theorem 3) for utilities linear in the histogram: with
// candidates r = 0..R-1 and u(x, r) = sum_i U[r,i] x_i, it outputs r with
// probability proportional to exp(u(x, r) / (2b)), where
//
//	b = max_{i != j} max_r |U[r,i] - U[r,j]| / d(u_i, u_j)
//
// (plus a rounding margin), so that moving a record from u_i to u_j changes
// each weight by at most a factor exp(d/2) and the normalisation by at most
// exp(d/2).
type Exponential struct {
	u *Queries
	b float64
	n int64
}

// NewExponential returns the exponential mechanism with utility matrix u
// (one row of N coefficients per candidate) for histograms of n records.
func NewExponential(ctx context.Context, m Metric, u *Queries, n int64) (*Exponential, error) {
	if err := checkUniverse(m, u); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, fmt.Errorf("metricdp: number of records must be > 0, got %d", n)
	}
	var umax float64
	for _, v := range u.f {
		umax = max(umax, math.Abs(v))
	}
	b, err := pairLinfScale(ctx, m, u, 1, float64(n)*umax*roundingMargin)
	if err != nil {
		return nil, err
	}
	return &Exponential{u: u, b: b, n: n}, nil
}

// Scale returns b.
func (e *Exponential) Scale() float64 { return e.b }

// logWeights returns u(x, r) / (2b) for each candidate.
func (e *Exponential) logWeights(x []int64) ([]float64, error) {
	if err := checkHistogram(x, e.u.n, e.n); err != nil {
		return nil, err
	}
	w := make([]float64, e.u.k)
	for r := range w {
		w[r] = exactDot(e.u, r, x, 0) / (2 * e.b)
	}
	return w, nil
}

// Probabilities returns the output distribution on histogram x, for
// inspection and tests; releasing it would not be private.
func (e *Exponential) Probabilities(x []int64) ([]float64, error) {
	w, err := e.logWeights(x)
	if err != nil {
		return nil, err
	}
	return softmax(w), nil
}

// Choose samples a candidate for histogram x, exactly with the stated
// probabilities (noise.Choose).
func (e *Exponential) Choose(r *noise.Rand, x []int64) (int, error) {
	w, err := e.logWeights(x)
	if err != nil {
		return 0, err
	}
	return noise.Choose(r, w)
}

// softmax returns exp(w) normalised.
func softmax(w []float64) []float64 {
	mx := math.Inf(-1)
	for _, v := range w {
		mx = max(mx, v)
	}
	p := make([]float64, len(w))
	var s float64
	for i, v := range w {
		p[i] = math.Exp(v - mx)
		s += p[i]
	}
	for i := range p {
		p[i] /= s
	}
	return p
}
