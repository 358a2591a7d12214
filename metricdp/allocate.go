package metricdp

import (
	"context"
	"fmt"
	"math"
	"strings"
)

// Strategy chooses the noise scales b_1..b_k of k linear queries answered
// together by the d_X-private Laplace mechanism. Every strategy satisfies the
// privacy condition of the d_X-private Laplace mechanism,
//
//	sum_l |F[l,i] - F[l,j]| / b_l <= d(u_i, u_j)   for all pairs i != j,
//
// and they differ in how they share each pair's budget between the queries.
// Queries that no pair at finite distance tells apart need no budget: every
// strategy releases them without noise (scale 0).
type Strategy int

// The strategies of the paper's Section 4.2, and the optimal allocation.
const (
	// EqualShare (strategy 1) gives each query an equal share of every
	// pair's budget: b_l = k' beta_l, where beta_l is the query's stand-alone
	// scale and k' the number of queries that need noise.
	EqualShare Strategy = 1
	// SameScale (strategy 2) adds noise of one scale to every query:
	// b = max_{i != j} ||F[:,i] - F[:,j]||_1 / d(u_i, u_j).
	SameScale Strategy = 2
	// Greedy (strategy 3) is the paper's Algorithm 3 as we reconstruct it
	// (see allocateGreedy).
	Greedy Strategy = 3
	// Optimal minimises the expected squared error sum_l 2 b_l^2 subject to
	// the privacy condition, a convex problem in t_l = 1/b_l (see
	// allocateOptimal). It never does worse than strategies 1-3.
	Optimal Strategy = 4
)

var strategyNames = map[Strategy]string{EqualShare: "equal", SameScale: "same", Greedy: "greedy", Optimal: "optimal"}

// String returns the strategy's name as ParseStrategy accepts it.
func (s Strategy) String() string {
	if n, ok := strategyNames[s]; ok {
		return n
	}
	return fmt.Sprintf("Strategy(%d)", int(s))
}

// ParseStrategy parses "1", "2", "3" (the paper's numbering), "equal",
// "same", "greedy" or "optimal".
func ParseStrategy(s string) (Strategy, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "equal":
		return EqualShare, nil
	case "2", "same":
		return SameScale, nil
	case "3", "greedy":
		return Greedy, nil
	case "4", "optimal":
		return Optimal, nil
	}
	return 0, fmt.Errorf("metricdp: unknown strategy %q (want 1, 2, 3, equal, same, greedy or optimal)", s)
}

// Allocate returns the noise scales b_l that strategy s gives the queries,
// the ideal (continuous Laplace) scales; NewLaplace calibrates the grid noise
// it releases with to them. A scale of 0 means the query is released
// exactly. It is NewAllocation's Scales.
func Allocate(ctx context.Context, m Metric, q *Queries, s Strategy) ([]float64, error) {
	a, err := NewAllocation(ctx, m, q, s)
	if err != nil {
		return nil, err
	}
	return a.Scales, nil
}

// Allocation is the outcome of a strategy: the scales and, when the optimal
// allocation's solver failed, which strategy stood in for it and why.
type Allocation struct {
	// Scales are the ideal scales b_l (0: released exactly).
	Scales []float64
	// Strategy is the strategy whose scales these are: the one requested,
	// or for Optimal after a solver failure, the best of strategies 1-3.
	Strategy Strategy
	// Note is empty unless Strategy differs from the one requested; it
	// then says so and why, for the user to see.
	Note string
}

// NewAllocation runs strategy s. Optimal never fails for numerical reasons:
// if its solver does, the result is the best (smallest expected squared
// error) of strategies 1-3, with a Note. All of this depends only on the
// metric and the queries, which are public.
func NewAllocation(ctx context.Context, m Metric, q *Queries, s Strategy) (*Allocation, error) {
	beta, err := StandaloneScales(ctx, m, q)
	if err != nil {
		return nil, err
	}
	var t []float64
	switch s {
	case EqualShare:
		t = allocateEqual(beta)
	case SameScale:
		t, err = allocateSame(ctx, m, q, beta)
	case Greedy:
		t, _, err = allocateGreedy(ctx, m, q, beta, sharesByPrecision)
	case Optimal:
		var res optResult
		res, err = allocateOptimal(ctx, m, q, beta)
		if err != nil && ctx.Err() == nil {
			return fallbackAllocation(ctx, m, q, beta, err)
		}
		t = res.t
	default:
		return nil, fmt.Errorf("metricdp: unknown strategy %d", int(s))
	}
	if err != nil {
		return nil, err
	}
	return &Allocation{Scales: scalesOf(t), Strategy: s}, nil
}

// fallbackAllocation returns the best of strategies 1-3, noting that the
// optimal allocation failed with cause.
func fallbackAllocation(ctx context.Context, m Metric, q *Queries, beta []float64, cause error) (*Allocation, error) {
	best := &Allocation{}
	bestObj := math.Inf(1)
	for _, s := range []Strategy{EqualShare, SameScale, Greedy} {
		var t []float64
		var err error
		switch s {
		case EqualShare:
			t = allocateEqual(beta)
		case SameScale:
			t, err = allocateSame(ctx, m, q, beta)
		case Greedy:
			t, _, err = allocateGreedy(ctx, m, q, beta, sharesByPrecision)
		}
		if err != nil {
			return nil, fmt.Errorf("metricdp: optimal allocation failed (%v), and so did its fallback %v: %w", cause, s, err)
		}
		if f := objective(t); f < bestObj {
			bestObj = f
			best = &Allocation{Scales: scalesOf(t), Strategy: s}
		}
	}
	best.Note = fmt.Sprintf("the optimal allocation's solver failed (%v); using strategy %d (%v), the best of strategies 1-3 on these queries", cause, int(best.Strategy), best.Strategy)
	return best, nil
}

// Below, allocations are computed as precisions t_l = 1/b_l, in which the
// privacy condition is linear; +Inf marks a query that needs no noise.

func scalesOf(t []float64) []float64 {
	b := make([]float64, len(t))
	for l, v := range t {
		b[l] = 1 / v
	}
	return b
}

func allocateEqual(beta []float64) []float64 {
	k := 0
	for _, b := range beta {
		if b > 0 {
			k++
		}
	}
	t := make([]float64, len(beta))
	for l, b := range beta {
		t[l] = 1 / (float64(k) * b)
	}
	return t
}

func allocateSame(ctx context.Context, m Metric, q *Queries, beta []float64) ([]float64, error) {
	ones := make([]float64, len(beta))
	for l, b := range beta {
		ones[l] = 1
		if b == 0 {
			ones[l] = math.Inf(1)
		}
	}
	load, err := maxLoad(ctx, m, q, ones)
	if err != nil {
		return nil, err
	}
	t := make([]float64, len(beta))
	for l := range t {
		t[l] = ones[l] / load
	}
	return t, nil
}

// maxLoad returns max over pairs at finite distance of sum_l |F[l,i] -
// F[l,j]| t_l / d(u_i, u_j): the fraction of the tightest pair's budget that
// precisions t use. t is feasible iff it is <= 1. Queries with t_l = +Inf
// are skipped (they do not tell any such pair apart).
func maxLoad(ctx context.Context, m Metric, q *Queries, t []float64) (float64, error) {
	w := scanWorkers(q.n)
	loads := make([]float64, w)
	tt := finitePart(t)
	err := scanPairs(ctx, m, func(w, i int, d []float64) {
		ci := q.col(i)
		best := loads[w]
		for o, dij := range d {
			if math.IsInf(dij, 1) {
				continue
			}
			cj := q.col(i + 1 + o)
			var s float64
			for l, c := range ci {
				s += math.Abs(c-cj[l]) * tt[l]
			}
			if s > best*dij {
				best = s / dij
			}
		}
		loads[w] = best
	})
	if err != nil {
		return 0, err
	}
	var mx float64
	for _, v := range loads {
		mx = max(mx, v)
	}
	return mx, nil
}

// finitePart returns t with +Inf entries replaced by 0.
func finitePart(t []float64) []float64 {
	tt := make([]float64, len(t))
	for l, v := range t {
		if !math.IsInf(v, 1) {
			tt[l] = v
		}
	}
	return tt
}

// normalise scales finite precisions down, if needed, so that maxLoad <= 1
// exactly in floating point (strategies reach the boundary up to rounding).
func normalise(ctx context.Context, m Metric, q *Queries, t []float64) error {
	for range 4 {
		load, err := maxLoad(ctx, m, q, t)
		if err != nil {
			return err
		}
		if load <= 1 {
			return nil
		}
		for l := range t {
			if !math.IsInf(t[l], 1) {
				t[l] /= load * (1 + 0x1p-50)
			}
		}
	}
	return fmt.Errorf("metricdp: could not make the allocation feasible in floating point")
}

// shareRule is how a round of Algorithm 3 splits the remaining budget
// between the queries, given their stand-alone scales beta_l on the
// remaining budget: it returns query l's share w_l (sum 1).
type shareRule func(beta []float64, active []bool) []float64

// sharesByPrecision gives query l the share (1/beta_l) / sum_m (1/beta_m).
func sharesByPrecision(beta []float64, active []bool) []float64 {
	w := make([]float64, len(beta))
	var s float64
	for l, b := range beta {
		if active[l] {
			w[l] = 1 / b
			s += w[l]
		}
	}
	for l := range w {
		w[l] /= s
	}
	return w
}

// sharesByScale gives query l the share beta_l / sum_m beta_m: the other
// reading of the paper's step 2. Tests show it converges to SameScale (all
// queries get the same increment each round, and the first pair to run out
// of budget stops them all), contradicting the paper's finding that
// strategy 3 beats strategy 2, so Greedy does not use it.
func sharesByScale(beta []float64, active []bool) []float64 {
	w := make([]float64, len(beta))
	var s float64
	for l, b := range beta {
		if active[l] {
			w[l] = b
			s += b
		}
	}
	for l := range w {
		w[l] /= s
	}
	return w
}

// Greedy's stopping rule: stop when no query's precision grew by more than
// greedyTol (relative) in a round, or after greedyMaxRounds rounds.
const (
	greedyTol       = 1e-6
	greedyMaxRounds = 2000
)

// allocateGreedy is the paper's Algorithm 3 as its text describes it (the
// formulas were lost in extraction). Each pair (i,j) keeps a remaining
// budget r_ij, initially d(u_i,u_j), and each query an accumulated precision
// t_l, initially 0. A round
//
//  1. computes each query's stand-alone scale on the remaining budget,
//     beta_l = max_ij |F[l,i]-F[l,j]| / r_ij ("the near optimal scale of the
//     noise for query l if the whole budget is consumed by it");
//  2. distributes the remaining budget between the queries based on the
//     beta_l: query l gets the share w_l of every pair's remaining budget
//     (sharesByPrecision: w_l proportional to 1/beta_l);
//  3. computes each query's scale on its share, beta_l / w_l;
//  4. subtracts what those scales use from every pair's remaining budget;
//  5. accumulates the precision gained, t_l += w_l / beta_l.
//
// Rounds repeat until the precisions stop growing; a query whose remaining
// budget runs out at some pair (beta_l = +Inf) drops out. Since the
// remaining budget is d_ij - sum_l |F[l,i]-F[l,j]| t_l, it is recomputed
// rather than stored, so memory stays O(k). It returns the precisions and
// the number of rounds.
func allocateGreedy(ctx context.Context, m Metric, q *Queries, beta0 []float64, share shareRule) ([]float64, int, error) {
	k := q.k
	t := make([]float64, k)
	active := make([]bool, k)
	for l, b := range beta0 {
		active[l] = b > 0
		if b == 0 {
			t[l] = math.Inf(1)
		}
	}
	w := scanWorkers(q.n)
	acc := make([][]float64, w)
	for i := range acc {
		acc[i] = make([]float64, k)
	}
	rounds := 0
	for ; rounds < greedyMaxRounds; rounds++ {
		tt := finitePart(t)
		for _, a := range acc {
			clear(a)
		}
		err := scanPairs(ctx, m, func(w, i int, d []float64) {
			a := acc[w]
			ci := q.col(i)
			for o, dij := range d {
				if math.IsInf(dij, 1) {
					continue
				}
				cj := q.col(i + 1 + o)
				var used float64
				for l, c := range ci {
					used += math.Abs(c-cj[l]) * tt[l]
				}
				r := dij - used
				for l, c := range ci {
					diff := math.Abs(c - cj[l])
					if diff == 0 {
						continue
					}
					if r <= 0 {
						a[l] = math.Inf(1)
					} else if diff > a[l]*r {
						a[l] = diff / r
					}
				}
			}
		})
		if err != nil {
			return nil, 0, err
		}
		beta := make([]float64, k)
		for _, a := range acc {
			for l, v := range a {
				beta[l] = max(beta[l], v)
			}
		}
		any := false
		for l := range active {
			if active[l] && math.IsInf(beta[l], 1) {
				active[l] = false
			}
			any = any || active[l]
		}
		if !any {
			break
		}
		sh := share(beta, active)
		grew := false
		for l := range t {
			if !active[l] {
				continue
			}
			inc := sh[l] / beta[l]
			if inc > greedyTol*t[l] {
				grew = true
			}
			t[l] += inc
		}
		if !grew {
			rounds++
			break
		}
	}
	if err := normalise(ctx, m, q, t); err != nil {
		return nil, 0, err
	}
	return t, rounds, nil
}
