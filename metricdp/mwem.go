package metricdp

import (
	"context"
	"fmt"
	"math"

	"github.com/knowdp/knowdp/noise"
)

// MWEMResult is the output of MWEM: everything in it is released.
type MWEMResult struct {
	// Synthetic is the average of the rounds' synthetic histograms (N
	// non-negative reals summing to n), the output of Hardt, Ligett and
	// McSherry's algorithm.
	Synthetic []float64
	// Selected[t] is the query measured in round t and Measured[t] its noisy
	// answer.
	Selected []int
	Measured []float64
}

// MWEM is the d_X-private multiplicative weights exponential mechanism (the
// paper's Algorithm 2 and Theorem 7, after Hardt, Ligett and McSherry). It
// starts from the uniform histogram A of n records and, in each of rounds
// rounds,
//
//  1. selects the query l on which A is worst, |F_l A - F_l x|, with the
//     d_X-private exponential mechanism at budget d/(2T) per pair: the score
//     moves by at most |F[l,i] - F[l,j]| when a record moves from u_i to u_j,
//     so its scale is 2T max_{i != j} max_l |F[l,i] - F[l,j]| / d(u_i, u_j);
//  2. measures F_l x with the d_X-private Laplace mechanism at budget
//     d/(2T) per pair (scale 2T times the query's stand-alone scale);
//  3. updates A_i <- A_i exp(F[l,i] (measured - F_l A) / (2n)), renormalised
//     to n records.
//
// Budgets add along each pair (composition of d_X-privacy), so the whole run
// spends T (d/(2T) + d/(2T)) = d(u_i, u_j) on every pair: it is d_X-private.
func MWEM(ctx context.Context, r *noise.Rand, m Metric, q *Queries, x []int64, rounds int) (*MWEMResult, error) {
	if err := checkUniverse(m, q); err != nil {
		return nil, err
	}
	if rounds <= 0 {
		return nil, fmt.Errorf("metricdp: MWEM needs at least one round, got %d", rounds)
	}
	var n int64
	for _, v := range x {
		n += v
	}
	if err := checkHistogram(x, q.n, n); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("metricdp: MWEM needs a histogram with records")
	}
	// n is public under bounded d_X-privacy: records move, never appear.
	round := scaled{m, 1 / float64(2*rounds)}
	var fmax float64
	for _, v := range q.f {
		fmax = max(fmax, math.Abs(v))
	}
	bSel, err := pairLinfScale(ctx, round, q, 1, float64(n)*fmax*roundingMargin)
	if err != nil {
		return nil, err
	}
	beta, err := StandaloneScales(ctx, round, q)
	if err != nil {
		return nil, err
	}
	measure := make([]*Laplace, q.k) // built on first use
	N := q.n
	A := make([]float64, N)
	for i := range A {
		A[i] = float64(n) / float64(N)
	}
	res := &MWEMResult{Synthetic: make([]float64, N)}
	truth := make([]float64, q.k)
	for l := range truth {
		truth[l] = exactDot(q, l, x, 0)
	}
	w := make([]float64, q.k)
	for range rounds {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		est := make([]float64, q.k)
		for l := range w {
			for i, a := range A {
				est[l] += q.Coef(l, i) * a
			}
			w[l] = math.Abs(est[l]-truth[l]) / (2 * bSel)
		}
		l, err := noise.Choose(r, w)
		if err != nil {
			return nil, err
		}
		if measure[l] == nil {
			one, err := NewQueries([][]float64{q.Row(l)})
			if err != nil {
				return nil, err
			}
			if measure[l], err = NewLaplaceScales(ctx, round, one, []float64{beta[l]}, n); err != nil {
				return nil, err
			}
		}
		v, err := measure[l].Release(r, x)
		if err != nil {
			return nil, err
		}
		res.Selected = append(res.Selected, l)
		res.Measured = append(res.Measured, v[0])
		// Multiplicative weights, in logs for stability.
		step := (v[0] - est[l]) / (2 * float64(n))
		var total float64
		for i := range A {
			A[i] *= math.Exp(q.Coef(l, i) * step)
			total += A[i]
		}
		for i := range A {
			A[i] *= float64(n) / total
			res.Synthetic[i] += A[i] / float64(rounds)
		}
	}
	return res, nil
}
