package metricdp

import (
	"context"
	"fmt"
	"math"

	"github.com/knowdp/knowdp/noise"
)

// MaxSmallDBCandidates bounds the number of candidate databases SmallDB
// enumerates: C(N+m-1, m) for a universe of N elements and synthetic
// databases of m records.
const MaxSmallDBCandidates = 1 << 20

// maxSmallDBCells bounds the memory of the candidates (64 MiB).
const maxSmallDBCells = 1 << 24

// SmallDB is the d_X-private small database mechanism (the paper's
// Algorithm 1 and Theorem 5, after Blum, Ligett and Roth): it outputs a
// synthetic histogram y of m records, chosen by the exponential mechanism
// among all histograms of m records with utility
//
//	u(x, y) = -max_l |F_l x / n - F_l y / m|,
//
// the worst error of y's normalised answers. Moving a record of x from u_i
// to u_j changes u by at most max_l |F[l,i] - F[l,j]| / n, so the scale is
// b = max_{i != j} max_l |F[l,i] - F[l,j]| / (n d(u_i, u_j)) (plus a
// rounding margin). With m = log(k)/alpha^2 records the synthetic answers
// are alpha-accurate up to the exponential mechanism's error (Theorem 6).
//
// It enumerates every candidate, so it is exact and meant for tiny
// universes: it refuses more than MaxSmallDBCandidates candidates.
type SmallDB struct {
	q       *Queries
	size    int     // m, records per synthetic histogram
	n       int64   // records in the real histogram
	b       float64 // exponential mechanism scale
	cands   []int32 // candidate histograms, count x N
	answers []float64
}

// NewSmallDB returns the small database mechanism for queries q over
// histograms of n records, releasing synthetic histograms of size records.
func NewSmallDB(ctx context.Context, m Metric, q *Queries, n int64, size int) (*SmallDB, error) {
	if err := checkUniverse(m, q); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, fmt.Errorf("metricdp: number of records must be > 0, got %d", n)
	}
	if size <= 0 {
		return nil, fmt.Errorf("metricdp: synthetic database size must be > 0, got %d", size)
	}
	N := q.n
	count := binomial(N+size-1, size)
	if count > MaxSmallDBCandidates {
		return nil, fmt.Errorf("metricdp: SmallDB would enumerate C(%d+%d-1, %d) = %.4g candidate databases; at most %d are supported (use MWEM for larger universes)",
			N, size, size, count, MaxSmallDBCandidates)
	}
	if cells := count * float64(N); cells > maxSmallDBCells {
		return nil, fmt.Errorf("metricdp: SmallDB would store %.4g candidate databases of %d cells each; at most %d cells in all are supported", count, N, maxSmallDBCells)
	}
	var fmax float64
	for _, v := range q.f {
		fmax = max(fmax, math.Abs(v))
	}
	b, err := pairLinfScale(ctx, m, q, 1/float64(n), fmax*roundingMargin)
	if err != nil {
		return nil, err
	}
	s := &SmallDB{q: q, size: size, n: n, b: b}
	y := make([]int32, N)
	var rec func(i, left int)
	rec = func(i, left int) {
		if i == N-1 {
			y[i] = int32(left)
			s.cands = append(s.cands, y...)
			for l := range q.k {
				var a float64
				for j, c := range y {
					a += q.Coef(l, j) * float64(c)
				}
				s.answers = append(s.answers, a/float64(size))
			}
			return
		}
		for v := left; v >= 0; v-- {
			y[i] = int32(v)
			rec(i+1, left-v)
		}
	}
	rec(0, size)
	return s, nil
}

// binomial returns C(n, k) as a float64 (exact up to 2^53).
func binomial(n, k int) float64 {
	r := 1.0
	for i := 1; i <= k; i++ {
		r = r * float64(n-k+i) / float64(i)
	}
	return math.Round(r)
}

// Scale returns the exponential mechanism's scale b.
func (s *SmallDB) Scale() float64 { return s.b }

// Candidates returns the number of candidate synthetic histograms.
func (s *SmallDB) Candidates() int { return len(s.cands) / s.q.n }

// Candidate returns candidate c's histogram.
func (s *SmallDB) Candidate(c int) []int64 {
	y := make([]int64, s.q.n)
	for i, v := range s.cands[c*s.q.n : (c+1)*s.q.n] {
		y[i] = int64(v)
	}
	return y
}

func (s *SmallDB) logWeights(x []int64) ([]float64, error) {
	if err := checkHistogram(x, s.q.n, s.n); err != nil {
		return nil, err
	}
	k := s.q.k
	truth := make([]float64, k)
	for l := range truth {
		truth[l] = exactDot(s.q, l, x, 0) / float64(s.n)
	}
	w := make([]float64, s.Candidates())
	for c := range w {
		var worst float64
		for l, a := range s.answers[c*k : (c+1)*k] {
			worst = max(worst, math.Abs(truth[l]-a))
		}
		w[c] = -worst / (2 * s.b)
	}
	return w, nil
}

// Probabilities returns the output distribution over candidates on
// histogram x, for inspection and tests; releasing it would not be private.
func (s *SmallDB) Probabilities(x []int64) ([]float64, error) {
	w, err := s.logWeights(x)
	if err != nil {
		return nil, err
	}
	return softmax(w), nil
}

// Release samples a synthetic histogram of the configured size for x.
func (s *SmallDB) Release(r *noise.Rand, x []int64) ([]int64, error) {
	w, err := s.logWeights(x)
	if err != nil {
		return nil, err
	}
	c, err := noise.Choose(r, w)
	if err != nil {
		return nil, err
	}
	return s.Candidate(c), nil
}
