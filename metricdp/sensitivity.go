package metricdp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Queries is a set of k linear queries over a universe of N elements, the
// k x N query matrix F of the paper: query l answers sum_i F[l,i] x_i on a
// histogram x.
type Queries struct {
	k, n int
	f    []float64 // element-major: F[l,i] = f[i*k+l], so a pair's k differences are contiguous
}

// NewQueries returns the queries with coefficient rows rows[l] (each of
// length N >= 2, finite).
func NewQueries(rows [][]float64) (*Queries, error) {
	if len(rows) == 0 {
		return nil, errors.New("metricdp: no queries")
	}
	n := len(rows[0])
	if n < 2 {
		return nil, fmt.Errorf("metricdp: query 0 has %d coefficients; the universe needs at least 2 elements", n)
	}
	k := len(rows)
	q := &Queries{k: k, n: n, f: make([]float64, k*n)}
	for l, r := range rows {
		if len(r) != n {
			return nil, fmt.Errorf("metricdp: query %d has %d coefficients, query 0 has %d", l, len(r), n)
		}
		for i, v := range r {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("metricdp: query %d coefficient %d is %v", l, i, v)
			}
			q.f[i*k+l] = v
		}
	}
	return q, nil
}

// Len returns k, the number of queries.
func (q *Queries) Len() int { return q.k }

// N returns the size of the universe the queries are over.
func (q *Queries) N() int { return q.n }

// Coef returns F[l,i].
func (q *Queries) Coef(l, i int) float64 { return q.f[i*q.k+l] }

// Row returns a copy of query l's coefficients.
func (q *Queries) Row(l int) []float64 {
	r := make([]float64, q.n)
	for i := range r {
		r[i] = q.f[i*q.k+l]
	}
	return r
}

// col returns the k coefficients of element i.
func (q *Queries) col(i int) []float64 { return q.f[i*q.k : (i+1)*q.k] }

// PairSensitivity returns the generalised sensitivity of the queries for the
// pair (u_i, u_j): ||F[:,i] - F[:,j]||_1, by how much (in L1) the answers
// move when one record moves from u_i to u_j.
func (q *Queries) PairSensitivity(i, j int) float64 {
	var s float64
	ci, cj := q.col(i), q.col(j)
	for l := range ci {
		s += math.Abs(ci[l] - cj[l])
	}
	return s
}

func checkUniverse(m Metric, q *Queries) error {
	if m.Len() != q.n {
		return fmt.Errorf("metricdp: the metric has %d universe elements but the queries have %d coefficients", m.Len(), q.n)
	}
	return nil
}

// ZeroDistanceError reports a pair of elements at distance 0 (or NaN) that
// a query tells apart: no noise scale protects such a pair.
type ZeroDistanceError struct {
	Query, I, J int
	Dist        float64
}

func (e *ZeroDistanceError) Error() string {
	return fmt.Sprintf("metricdp: query %d tells apart u_%d and u_%d, whose distance is %v: no amount of noise makes that private", e.Query, e.I, e.J, e.Dist)
}

// StandaloneScales returns, for each query l, the d_X-private Laplace scale
// it would need alone, beta_l = max_{i != j} |F[l,i] - F[l,j]| / d(u_i, u_j)
// (0 when no pair at finite distance tells the query's answers
// apart, which then need no noise).
func StandaloneScales(ctx context.Context, m Metric, q *Queries) ([]float64, error) {
	if err := checkUniverse(m, q); err != nil {
		return nil, err
	}
	k := q.k
	w := scanWorkers(q.n)
	acc := make([][]float64, w)
	bad := make([]*ZeroDistanceError, w)
	for i := range acc {
		acc[i] = make([]float64, k)
	}
	err := scanPairs(ctx, m, func(w, i int, d []float64) {
		a := acc[w]
		if k == 1 {
			// One query: compare diff > a*d instead of dividing per pair.
			qi, rest := q.f[i], q.f[i+1:]
			best := a[0]
			for o, dij := range d {
				diff := math.Abs(qi - rest[o])
				if !(dij > 0) {
					if diff != 0 && bad[w] == nil {
						bad[w] = &ZeroDistanceError{Query: 0, I: i, J: i + 1 + o, Dist: dij}
					}
					continue
				}
				if diff > best*dij {
					best = diff / dij
				}
			}
			a[0] = best
			return
		}
		ci := q.col(i)
		for o, dij := range d {
			j := i + 1 + o
			cj := q.col(j)
			if !(dij > 0) { // 0 or NaN
				for l := range ci {
					if ci[l] != cj[l] && bad[w] == nil {
						bad[w] = &ZeroDistanceError{Query: l, I: i, J: j, Dist: dij}
					}
				}
				continue
			}
			inv := 1 / dij
			for l := range ci {
				if r := math.Abs(ci[l]-cj[l]) * inv; r > a[l] {
					a[l] = r
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}
	for _, e := range bad {
		if e != nil {
			return nil, e
		}
	}
	out := make([]float64, k)
	for _, a := range acc {
		for l, v := range a {
			out[l] = max(out[l], v)
		}
	}
	return out, nil
}

// Scale returns the noise scale of the d_X-private Laplace mechanism for the
// single linear query q: b = max_{i != j} |q_i - q_j| / d(u_i, u_j) (the
// paper's Theorem 1). Releasing <q, x> + Lap(b) changes the log
// probability of any output by at most |q_i - q_j| / b <= d(u_i, u_j) when a
// record moves from u_i to u_j. It takes O(N^2) time.
func Scale(ctx context.Context, m Metric, q []float64) (float64, error) {
	qs, err := NewQueries([][]float64{q})
	if err != nil {
		return 0, err
	}
	s, err := StandaloneScales(ctx, m, qs)
	if err != nil {
		return 0, err
	}
	return s[0], nil
}

// Baseline returns the epsilon and noise scale of the ordinary eps-DP
// Laplace mechanism that d_X-privacy is compared with: eps = min_{i != j}
// d(u_i, u_j), the largest eps that protects every pair as well as the metric
// asks, and scale Delta_1 / eps with the usual L1 sensitivity Delta_1 =
// max_{i,j} ||F[:,i] - F[:,j]||_1 over all pairs, the same scale for every
// query (for one query, (max q - min q) / eps).
func Baseline(ctx context.Context, m Metric, q *Queries) (eps, scale float64, err error) {
	if err := checkUniverse(m, q); err != nil {
		return 0, 0, err
	}
	eps, err = MinDist(ctx, m)
	if err != nil {
		return 0, 0, err
	}
	if !(eps > 0) || math.IsInf(eps, 1) {
		return 0, 0, fmt.Errorf("metricdp: the smallest distance is %v; the eps-DP baseline needs a finite positive one", eps)
	}
	return eps, l1Sensitivity(q) / eps, nil
}

// l1Sensitivity returns max_{i,j} ||F[:,i] - F[:,j]||_1. For one query it is
// max - min; for k queries it is O(k N^2).
func l1Sensitivity(q *Queries) float64 {
	if q.k == 1 {
		return slices.Max(q.f) - slices.Min(q.f)
	}
	var s float64
	for i := range q.n {
		for j := i + 1; j < q.n; j++ {
			s = max(s, q.PairSensitivity(i, j))
		}
	}
	return s
}

// Improvement returns the improvement factors of d_X-private scales over the
// baseline scale (Baseline): baseline / scales[l] for each query (+Inf for a
// query answered without noise), and their geometric mean, the paper's
// improvement factor for k queries.
func Improvement(baseline float64, scales []float64) (perQuery []float64, geoMean float64) {
	perQuery = make([]float64, len(scales))
	var logSum float64
	for l, b := range scales {
		perQuery[l] = baseline / b
		logSum += math.Log(perQuery[l])
	}
	return perQuery, math.Exp(logSum / float64(len(scales)))
}
