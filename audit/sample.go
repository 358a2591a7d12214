package audit

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"

	"github.com/knowdp/knowdp/noise"
)

// Sampler runs a mechanism once on a fixed input and returns a scalar
// statistic of its output: the output itself for a real or integer output,
// an index for a categorical one, a projection or a log-likelihood ratio
// for a vector. Any statistic gives a valid lower bound; a good one (the
// likelihood ratio is the best) gives a tighter bound. A Sampler is called
// concurrently, each goroutine with its own generator.
type Sampler func(r *noise.Rand) (float64, error)

// SampleConfig sets the size and confidence of a sampling audit.
type SampleConfig struct {
	// Samples is the number of outputs drawn on each input: half choose
	// the output set, half estimate its probabilities. At least 100.
	Samples int
	// Alpha is the probability that the lower bound exceeds the true loss:
	// the audit's confidence is 1 - Alpha. Zero means 0.05.
	Alpha float64
}

// Set is a set of outputs, described by a condition on the statistic.
type Set struct {
	Op    SetOp
	Value float64
	// Swapped is true when the set is more likely on the second input than
	// on the first: the ratio bounded is then P(M(x') in S)/P(M(x) in S).
	Swapped bool
}

// SetOp is the condition that defines a Set.
type SetOp int

// The conditions.
const (
	AtLeast SetOp = iota + 1 // statistic >= Value
	AtMost                   // statistic <= Value
	Equal                    // statistic == Value
)

// String describes the set, as "T >= 1.5" or "T == 3 (x' over x)".
func (s Set) String() string {
	op := map[SetOp]string{AtLeast: ">=", AtMost: "<=", Equal: "=="}[s.Op]
	dir := ""
	if s.Swapped {
		dir = " (x' over x)"
	}
	return fmt.Sprintf("T %s %.6g%s", op, s.Value, dir)
}

func (s Set) contains(t float64) bool {
	switch s.Op {
	case AtLeast:
		return t >= s.Value
	case AtMost:
		return t <= s.Value
	}
	return t == s.Value
}

// Sampled is the result of a sampling audit.
type Sampled struct {
	// Lower is a lower confidence bound on the privacy loss between the two
	// inputs: with probability at least 1 - Alpha, eps >= Lower. It is
	// ln(p_lo / q_hi) for the set S chosen, where p_lo and q_hi are
	// Clopper–Pearson bounds on the probabilities of S on the two inputs,
	// each at level Alpha/2; 0 when no set shows any difference.
	Lower float64
	// Estimate is the point estimate ln(p/q) on the estimation half (+Inf
	// when S never occurred on the second input).
	Estimate float64
	// Set is the output set chosen on the selection half, and P and Q its
	// estimated probabilities on the two inputs, numerator first.
	Set     Set
	P, Q    float64
	Samples int // outputs drawn on each input
	Alpha   float64
	Claimed float64
	// Verdict is Violation when Lower > Claimed: the mechanism then
	// certainly breaks its claim (at confidence 1 - Alpha).
	Verdict Verdict
}

// sampleChunk is the number of outputs one split generator draws, so
// that a seeded audit gives the same result however it is scheduled.
const sampleChunk = 4096

// maxThresholds bounds the thresholds tried on the selection half.
const maxThresholds = 512

// Sample audits a mechanism by sampling, in the style of DP-Sniper and
// StatDP: it draws cfg.Samples outputs on each of two neighbouring inputs
// (x and xPrime) and splits each sample in halves.
//
// The first halves choose the output set S. The candidates are the
// threshold sets T >= v and T <= v, for up to 512 evenly spaced distinct
// values v and values spaced geometrically in rank (ratio 1.25) towards
// both ends, and the single values T == v when the statistic takes at most
// 256 values; each in both directions. The one chosen has the largest
// Clopper–Pearson lower bound on ln(p/q) computed at a level that holds for
// all candidates at once (Bonferroni). Scoring by a simultaneous bound keeps
// the choice from falling on a small tail set that only looked good by
// chance, which a plain bound, with hundreds of candidates, often does.
//
// The second halves, which played no part in the choice, give the bound:
// Clopper–Pearson intervals at level Alpha/2 each for p = P[M(x) in S] and
// q = P[M(x') in S] (or the reverse) and Lower = ln(p_lo/q_hi). Because one
// set is fixed before they are looked at, no correction for the number of
// candidates is needed there, and P(Lower > true eps) <= Alpha. The verdict
// is Violation when Lower exceeds claimed.
func Sample(ctx context.Context, r *noise.Rand, x, xPrime Sampler, claimed float64, cfg SampleConfig) (Sampled, error) {
	if err := checkClaim(claimed); err != nil {
		return Sampled{}, err
	}
	if cfg.Samples < 100 {
		return Sampled{}, fmt.Errorf("audit: at least 100 samples per input are needed, got %d", cfg.Samples)
	}
	alpha := cfg.Alpha
	if alpha == 0 {
		alpha = 0.05
	}
	if !(alpha > 0 && alpha < 0.5) {
		return Sampled{}, fmt.Errorf("audit: alpha must be in (0, 0.5), got %v", cfg.Alpha)
	}
	if x == nil || xPrime == nil {
		return Sampled{}, errors.New("audit: both samplers are needed")
	}
	ts, err := drawAll(ctx, r, []Sampler{x, xPrime}, cfg.Samples)
	if err != nil {
		return Sampled{}, err
	}
	half := cfg.Samples / 2
	selA, estA := ts[0][:half], ts[0][half:]
	selB, estB := ts[1][:half], ts[1][half:]
	set, err := choose(selA, selB, alpha/2)
	if err != nil {
		return Sampled{}, err
	}
	num, den := estA, estB
	if set.Swapped {
		num, den = estB, estA
	}
	kp, kq := count(num, set), count(den, set)
	lower, err := bound(kp, len(num), kq, len(den), alpha/2)
	if err != nil {
		return Sampled{}, err
	}
	p, q := float64(kp)/float64(len(num)), float64(kq)/float64(len(den))
	est := math.Log(p) - math.Log(q)
	if kp == 0 {
		est = 0
	}
	return Sampled{
		Lower:    lower,
		Estimate: est,
		Set:      set,
		P:        p,
		Q:        q,
		Samples:  cfg.Samples,
		Alpha:    alpha,
		Claimed:  claimed,
		Verdict:  verdict(lower, claimed),
	}, nil
}

// drawAll runs each sampler n times, in parallel over chunks whose generators
// are split off r in a fixed order.
func drawAll(ctx context.Context, r *noise.Rand, ss []Sampler, n int) ([][]float64, error) {
	chunks := (n + sampleChunk - 1) / sampleChunk
	type job struct {
		s, c int
		r    *noise.Rand
	}
	jobs := make([]job, 0, len(ss)*chunks)
	out := make([][]float64, len(ss))
	for s := range ss {
		out[s] = make([]float64, n)
		for c := range chunks {
			jobs = append(jobs, job{s, c, r.Split()})
		}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan job)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(jobs)) {
		wg.Go(func() {
			for j := range next {
				if ctx.Err() != nil {
					continue
				}
				dst := out[j.s][j.c*sampleChunk : min((j.c+1)*sampleChunk, n)]
				for i := range dst {
					t, err := ss[j.s](j.r)
					if err == nil && math.IsNaN(t) {
						err = errors.New("the statistic is NaN")
					}
					if err != nil {
						cancel(fmt.Errorf("audit: sampling input %d: %w", j.s+1, err))
						break
					}
					dst[i] = t
				}
			}
		})
	}
	for _, j := range jobs {
		if ctx.Err() != nil {
			break
		}
		next <- j
	}
	close(next)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	return out, nil
}

// choose returns the candidate set with the largest lower bound on the
// selection samples a (first input) and b (second input), the bounds being
// simultaneous at the given level over all candidates and directions.
func choose(a, b []float64, level float64) (Set, error) {
	sa, sb := slices.Clone(a), slices.Clone(b)
	sort.Float64s(sa)
	sort.Float64s(sb)
	pooled := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(sa), sb...))))
	var cands []Set
	if len(pooled) <= maxThresholds/2 {
		for _, v := range pooled {
			cands = append(cands, Set{Op: Equal, Value: v})
		}
	}
	// Thresholds evenly spaced over the distinct values, and geometrically
	// spaced towards both ends, where the largest ratios of tail sets are.
	idx := map[int]bool{}
	step := max(1, len(pooled)/maxThresholds)
	for i := 0; i < len(pooled); i += step {
		idx[i] = true
	}
	for g := 1.0; g < float64(len(pooled)); g *= 1.25 {
		idx[int(g)-1], idx[len(pooled)-int(g)] = true, true
	}
	for _, i := range slices.Sorted(maps.Keys(idx)) {
		cands = append(cands, Set{Op: AtLeast, Value: pooled[i]}, Set{Op: AtMost, Value: pooled[i]})
	}
	cp := newBoundCache(level / float64(2*len(cands)))
	best, bestLower, bestEst := Set{Op: AtLeast, Value: pooled[0]}, -1.0, math.Inf(-1)
	for _, c := range cands {
		ka, kb := countSorted(sa, c), countSorted(sb, c)
		for _, sw := range []bool{false, true} {
			kp, np, kq, nq := ka, len(sa), kb, len(sb)
			if sw {
				kp, np, kq, nq = kb, len(sb), ka, len(sa)
			}
			// Among equal bounds prefer the larger point estimate, which
			// favours larger sets (kp + kq), estimated more stably.
			est := math.Log(float64(kp)+0.5) - math.Log(float64(kq)+0.5)
			if kp == 0 || cp.optimistic(kp, np, kq, nq) < bestLower || cp.optimistic(kp, np, kq, nq) == bestLower && est <= bestEst {
				continue // cannot win: skip the beta quantiles
			}
			l, err := cp.bound(kp, np, kq, nq)
			if err != nil {
				return Set{}, err
			}
			if l > bestLower || l == bestLower && est > bestEst {
				c.Swapped = sw
				best, bestLower, bestEst = c, l, est
			}
		}
	}
	return best, nil
}

// boundCache memoises the Clopper–Pearson bounds of the selection step,
// where many candidate sets share counts.
type boundCache struct {
	level  float64
	lo, hi map[[2]int]float64
}

func newBoundCache(level float64) *boundCache {
	return &boundCache{level: level, lo: map[[2]int]float64{}, hi: map[[2]int]float64{}}
}

// optimistic is an upper bound on bound(kp, np, kq, nq) that needs no beta
// quantile: p_lo <= kp/np, and q_hi is at least its value for kq = 0,
// 1 - level^(1/nq), and at least kq/nq.
func (c *boundCache) optimistic(kp, np, kq, nq int) float64 {
	qhi := math.Max(float64(kq)/float64(nq), -math.Expm1(math.Log(c.level)/float64(nq)))
	return math.Max(0, math.Log(float64(kp)/float64(np))-math.Log(qhi))
}

func (c *boundCache) bound(kp, np, kq, nq int) (float64, error) {
	plo, ok := c.lo[[2]int{kp, np}]
	if !ok {
		var err error
		if plo, _, err = ClopperPearson(kp, np, c.level); err != nil {
			return 0, err
		}
		c.lo[[2]int{kp, np}] = plo
	}
	qhi, ok := c.hi[[2]int{kq, nq}]
	if !ok {
		var err error
		if _, qhi, err = ClopperPearson(kq, nq, c.level); err != nil {
			return 0, err
		}
		c.hi[[2]int{kq, nq}] = qhi
	}
	if plo == 0 {
		return 0, nil
	}
	return math.Max(0, math.Log(plo)-math.Log(qhi)), nil
}

// bound returns max(0, ln(p_lo/q_hi)) for kp of np and kq of nq.
func bound(kp, np, kq, nq int, level float64) (float64, error) {
	plo, _, err := ClopperPearson(kp, np, level)
	if err != nil {
		return 0, err
	}
	_, qhi, err := ClopperPearson(kq, nq, level)
	if err != nil {
		return 0, err
	}
	if plo == 0 {
		return 0, nil
	}
	return math.Max(0, math.Log(plo)-math.Log(qhi)), nil
}

func count(ts []float64, s Set) int {
	n := 0
	for _, t := range ts {
		if s.contains(t) {
			n++
		}
	}
	return n
}

// countSorted counts the elements of sorted ts in s.
func countSorted(ts []float64, s Set) int {
	lo := sort.SearchFloat64s(ts, s.Value) // first >= Value
	hi := sort.Search(len(ts), func(i int) bool { return ts[i] > s.Value })
	switch s.Op {
	case AtLeast:
		return len(ts) - lo
	case AtMost:
		return hi
	}
	return hi - lo
}
