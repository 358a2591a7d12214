package noise

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"sort"
)

// Choose returns index i with probability exactly
// exp(logw[i]) / sum_j exp(logw[j]), taking each float64 as the exact real
// number it represents. It is the sampling step of the exponential mechanism:
// pass logw[i] = eps*u(i)/(2*sensitivity). Entries may be -Inf (weight zero)
// but not NaN or +Inf, and at least one must be finite. These errors cannot
// depend on the data when the utilities have finite sensitivity, as the
// mechanism requires: such a utility is finite on every input, or -Inf on
// every input for a candidate excluded publicly.
//
// It proposes a uniform index and accepts it with probability
// exp(logw[i] - max logw), so it takes at most len(logw) proposals on
// average and far fewer when the weights are spread out.
func Choose(r *Rand, logw []float64) (int, error) {
	if len(logw) == 0 {
		return 0, errors.New("noise: Choose needs at least one candidate")
	}
	m := math.Inf(-1)
	for i, x := range logw {
		if math.IsNaN(x) || math.IsInf(x, 1) {
			return 0, fmt.Errorf("noise: log-weight %d is %v; must be finite or -Inf", i, x)
		}
		m = max(m, x)
	}
	if math.IsInf(m, -1) {
		return 0, errors.New("noise: every log-weight is -Inf")
	}
	n := uint64(len(logw))
	for {
		i := r.Uint64N(n)
		if bernoulliExp(r, logw[i], m) {
			return int(i), nil
		}
	}
}

// bernoulliExp returns true with probability exactly exp(x - m), x <= m.
func bernoulliExp(r *Rand, x, m float64) bool {
	if math.IsInf(x, -1) {
		return false
	}
	if x == m {
		return true
	}
	d := x - m // within a relative 2^-53 of the exact difference
	w := r.Uint64()
	if d < -700 {
		// exp(d) < 2^-1000 < 2^-64 <= U unless the first 64 bits are all 0.
		if w != 0 {
			return false
		}
	} else {
		p := math.Exp(d)
		e := p * (2 + math.Abs(d)) * ulpGuard
		ulo := float64(w) * (1 - ulpGuard) * 0x1p-64
		uhi := (float64(w)*(1+ulpGuard) + 1) * 0x1p-64
		if uhi <= p-e {
			return true
		}
		if ulo >= p+e {
			return false
		}
	}
	return bernoulliExpSlow(r, x, m, w)
}

// exactPrec is enough bits to hold the exact sum or difference of any two
// float64 values, and of up to 2^40 of them.
const exactPrec = 2200

// bernoulliExpSlow decides U < exp(x - m) with exact arithmetic, drawing more
// bits of U as needed.
func bernoulliExpSlow(r *Rand, x, m float64, first uint64) bool {
	d := new(big.Float).SetPrec(exactPrec).SetFloat64(x)
	d.Sub(d, new(big.Float).SetFloat64(m))
	words := []uint64{first}
	for {
		if b, ok := bernoulliDecide(d, words); ok {
			return b
		}
		words = append(words, r.Uint64())
	}
}

// bernoulliDecide returns whether U < exp(d) if that is the same for every U
// in [a, a + 2^-64k), where a is the fraction whose bits are words.
func bernoulliDecide(d *big.Float, words []uint64) (bool, bool) {
	k := len(words)
	if d.Cmp(big.NewFloat(-0x1p20)) < 0 {
		// exp(d) < 2^-1.4e6: U < exp(d) needs more than 1.4e6 leading zero
		// bits. A nonzero word decides; past 22000 zero words (probability
		// 2^-1.4e6) accept.
		if words[k-1] != 0 {
			return false, true
		}
		return true, k >= 22000
	}
	prec := uint(64*k + 128)
	p := bigExp(d, prec)
	e := errBound(prec, p)
	a := bigFrac(words)
	b := new(big.Float).SetPrec(uint(64*k+64)).Add(a, pow2(-64*k))
	plo := new(big.Float).SetPrec(prec+64).Sub(p, e)
	phi := new(big.Float).SetPrec(prec+64).Add(p, e)
	if b.Cmp(plo) <= 0 {
		return true, true
	}
	if a.Cmp(phi) >= 0 {
		return false, true
	}
	return false, false
}

// Categorical is a distribution over the indices 0..n-1 with probabilities
// proportional to given weights. Sample returns index i with probability
// exactly w[i]/sum(w), taking each float64 weight as the exact real number it
// represents, in O(log n) time.
type Categorical struct {
	w   []float64
	cum []float64 // cum[i] within cumErr(i) of w[0]+...+w[i]
}

// NewCategorical returns the categorical distribution with the given weights,
// which must be finite and non-negative with a positive, finite sum. The
// weights are copied.
func NewCategorical(weights []float64) (*Categorical, error) {
	if len(weights) == 0 {
		return nil, errors.New("noise: categorical distribution needs at least one weight")
	}
	c := &Categorical{w: slices.Clone(weights), cum: make([]float64, len(weights))}
	// Scale the weights by a power of two so that the largest is at least
	// 1/2: exact, and it keeps the prefix sums and the products of the fast
	// path away from the subnormal range, where their relative error bounds
	// fail (weights summing to 1e-323 once gave 25%/75% for 50%/50%).
	// Weights are never scaled down, which could round small ones.
	var wmax float64
	for i, x := range weights {
		if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			return nil, fmt.Errorf("noise: weight %d is %v; weights must be finite and non-negative", i, x)
		}
		wmax = max(wmax, x)
	}
	if wmax == 0 {
		return nil, errors.New("noise: weights must have a positive sum, got 0")
	}
	if _, e := math.Frexp(wmax); e < 0 {
		for i := range c.w {
			c.w[i] = math.Ldexp(c.w[i], -e)
		}
	}
	// Prefix sums in double-double arithmetic: the stored high parts are
	// within 2^-53 (relative) of the exact prefix sums however many terms
	// there are, which keeps the fast path's ambiguity margins tiny.
	var hi, lo float64
	for i, x := range c.w {
		s, e := twoSum(hi, x)
		lo += e
		hi, lo = fastTwoSum(s, lo)
		c.cum[i] = hi
	}
	if !(hi > 0) || math.IsInf(hi, 0) {
		return nil, fmt.Errorf("noise: weights must have a positive, finite sum, got %v", hi)
	}
	return c, nil
}

// Len returns the number of categories.
func (c *Categorical) Len() int { return len(c.w) }

// Prob returns the probability of index i, rounded to float64.
func (c *Categorical) Prob(i int) float64 { return c.w[i] / c.cum[len(c.cum)-1] }

func twoSum(a, b float64) (s, e float64) {
	s = a + b
	bb := s - a
	e = (a - (s - bb)) + (b - bb)
	return s, e
}

func fastTwoSum(a, b float64) (s, e float64) {
	s = a + b
	e = b - (s - a)
	return s, e
}

// cumErr bounds |cum[i] - (w[0]+...+w[i])|: half an ulp from rounding the
// double-double to its high part, plus (i+1) 2^-104 from the additions.
func (c *Categorical) cumErr(i int) float64 {
	return c.cum[i] * (0x1p-52 + float64(i+2)*0x1p-100)
}

// Sample draws one index.
func (c *Categorical) Sample(r *Rand) int {
	w := r.Uint64()
	n := len(c.cum)
	total := c.cum[n-1]
	// U in [w, w+1) 2^-64, so T = U*sum lies in [tlo, thi].
	totLo, totHi := total-c.cumErr(n-1), total+c.cumErr(n-1)
	tlo := float64(w) * 0x1p-64 * totLo * (1 - ulpGuard)
	thi := (float64(w) + 1) * 0x1p-64 * totHi * (1 + ulpGuard)
	// The answer is the first i with exact prefix sum > T.
	i := sort.SearchFloat64s(c.cum, tlo) // first cum[i] >= tlo
	for i < n && c.cum[i] <= tlo {
		i++
	}
	if i < n && thi < c.cum[i]-c.cumErr(i) && (i == 0 || c.cum[i-1]+c.cumErr(i-1) <= tlo) {
		return i
	}
	return c.sampleSlow(r, w)
}

// sampleSlow decides the index with exact arithmetic, drawing more bits of
// U as needed.
func (c *Categorical) sampleSlow(r *Rand, first uint64) int {
	total := new(big.Float).SetPrec(exactPrec)
	for _, x := range c.w {
		total.Add(total, new(big.Float).SetFloat64(x))
	}
	words := []uint64{first}
	for {
		if i, ok := c.decide(total, words); ok {
			return i
		}
		words = append(words, r.Uint64())
	}
}

// decide returns the index for U if it is the same for every U in
// [a, a + 2^-64k), where a is the fraction whose bits are words and total is
// the exact sum of the weights.
func (c *Categorical) decide(total *big.Float, words []uint64) (int, bool) {
	k := len(words)
	prec := uint(64*k) + exactPrec
	a := bigFrac(words)
	b := new(big.Float).SetPrec(uint(64*k+64)).Add(a, pow2(-64*k))
	tlo := new(big.Float).SetPrec(prec).Mul(a, total)
	thi := new(big.Float).SetPrec(prec).Mul(b, total)
	// The first i whose exact prefix sum exceeds tlo is the answer if thi is
	// also at most that prefix sum. A zero-weight index never qualifies.
	sum := new(big.Float).SetPrec(exactPrec)
	for i, x := range c.w {
		sum.Add(sum, new(big.Float).SetFloat64(x))
		if sum.Cmp(tlo) > 0 {
			return i, thi.Cmp(sum) <= 0
		}
	}
	return 0, false
}
