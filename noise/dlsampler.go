package noise

import (
	"math"
	"math/big"
	"math/bits"
)

// The discrete Laplace sampler.
//
// Write Z = ±M with a fair sign and M = |Z|:
//
//	P(M = 0) = (1-a)/(1+a),  P(M >= 1 + g) = c a^g,  c = 2a/(1+a),
//
// so given M >= 1, G = M-1 is geometric with ratio a = exp(-1/t). The sign
// is ignored when M = 0, so no value is counted twice and nothing is
// rejected. Split G = 2^m H + L with 0 <= L < 2^m: the geometric law
// factorises, P(G = 2^m h + l) = (1-a) a^l (a^(2^m))^h, so H and L are
// independent, H geometric with ratio rho = a^(2^m) and P(L = l) ∝ a^l.
// The constructor picks 2^m in (t/64, t/32] (m = 0 for t < 64), so that
// rho is at most e^-1/64 and L is nearly uniform.
//
// M and H come from one uniform U by inversion against the thresholds
// th_i = P(M >= 1 + 2^m i) = c rho^i: with j the first i such that
// U >= th_i, M = 0 if j = 0 and M = 1 + 2^m (j-1) + L otherwise (for
// m = 0 that is M = j, and the formula gives 0 at j = 0). The thresholds
// are irrational; the constructor stores integers lo_i <= floor(th_i 2^64)
// <= hi_i (from float64 with a rigorous error bound, about 2^-43
// relative), and the sampler compares the bits of U it has drawn with
// them. When those bits cannot decide (U's interval meets
// [lo_j, hi_j+1) 2^-64: probability at most about n 2^-(hb-1), hb being
// U's bits in the word: 2^-19 for scales just below 2^24, 2^-22 at 2^20;
// 2^-8 just below 4096 and 2^-10 at 1000, where U has 17 to 23 bits of
// half a word), searchSlow draws one more word, and in the rare cases
// where 64 bits of U do not decide either, compares with arbitrary
// precision, so every comparison is exact.
//
// A guide table gives the answer up to one comparison. It is indexed by
// the exponent and the first guideSub bits of the significand of
// float64(max(x>>11, 2^22)), x U's word (a shift, a max, a conversion, a
// shift; every U below about 2^-30 shares the first bucket):
// its buckets span a factor of at most 1+2^-6 in U, less than the
// thresholds' ratio 1/rho >= e^(1/64), so a bucket holds at most one
// threshold where U's quantum is small against U, and the constructor
// stores no threshold below that (buildGuide). Past the last stored
// threshold (probability below 2^-24, 2^-30 for most scales; 2^-11 to
// 2^-20 for the half-word samples below 4096),
// H = (n-1) + a fresh geometric variable with ratio rho: the geometric law
// is memoryless. It is drawn by magnitude, the exact inversion by
// logarithm.
//
// L is drawn by rejection: l uniform on [0, 2^m), accepted when an
// independent uniform u is below a^l = exp(-l/t) >= rho. The quick test
// accepts when u < 1 - l perL 2^-64 <= 1 - l/t <= exp(-l/t), perL =
// ceil(2^64/t): an integer multiply and an add whose carry says no. It
// fails with probability about l/t, nearly always a true rejection, which
// a quick table of upper bounds on exp(-k 2^s/t) confirms; the rest go to
// float64 exp with an error bound (after completing u's first 64 bits
// with one word), then to arbitrary precision. A rejected l costs one more
// word (probability 1-exp(-l/t) < 1/32, 1/128 to 1/64 on average).
//
// Below t = 4096 (m <= 6) half a word usually suffices: a sample takes the
// upper or the lower half of a word in turn (Rand.splitWord), placed in
// the upper half of w, whose top 8 bits begin u, the next 23-m bits begin
// U (U's word is w << 8), the next m bits are l and bit 32 is the sign.
// With 17 to 23 bits of U the search leaves U undecided at about 2^-10 and
// the guide stores thresholds down to 2^-15 to 2^-21; with 8 bits of u the
// quick test fails one time in 256 more. From t = 4096 one 64-bit word w
// usually suffices: its top 16 bits begin u, the next 47-m bits begin U
// (U's word is w << 16), the next m bits are l and bit 0 is the sign. In
// both, u's upper bound is w | uLow. When m >= 19 (t >= 2^24) U takes a
// second word and u the 63-m bits above l. For m = 0 (t < 64) there is no
// L, and u is not used.
type dlSampler struct {
	draw     func(*dlSampler, *Rand) int64 // sample, or sampleHalf for half
	t        float64
	m        uint    // L has m bits
	jMin     int     // 1, or 0 when m = 0: j in [jMin, n) takes the common path
	tHigh    float64 // t/2^m, exactly: H has ratio exp(-1/tHigh)
	twoWords bool    // U comes from a second word
	half     bool    // a sample's bits are half a word (Rand.splitWord), the upper half of w
	lShift   uint    // l is (w >> lShift) & lMask: 1, or 33 for half
	sShift   uint    // the sign is bit sShift of w: 0, or 32 for half
	xLow     uint64  // bits of U's word that are not U's: 2^(64-hb)-1
	lMask    uint64  // 2^m - 1
	lo, hi   []uint64
	slack    uint64         // U >= th_j is decided unless (x|xLow) - lo_j <= slack
	guide    []guideEntry   // indexed by bucket(x)
	ub       uint           // bits of u in the first word
	uLow     uint64         // bits of w that are not u's: 2^(64-ub)-1
	perL     uint64         // ceil(2^64/t), or 0 when m = 0
	accShift uint           // rejHi is indexed by l >> accShift
	rejHi    [accLen]uint64 // rejHi[k] >= floor(exp(-k 2^accShift/t) 2^64)
}

// halfMaxM is the largest m (scales below 2^(m+6) = 4096) whose samples
// take half a word: 8 bits of u, 23-m of U (at least 17), m of l and the
// sign. Fewer bits of U leave more thresholds undecided by them (about
// 44 hb 2^-hb: 0.6% at 17 bits), each costing one more word; more bits of
// l leave too few for U.
const halfMaxM = 6

// guideSub is the number of significand bits in a guide bucket's index:
// buckets span a factor of at most 1+2^-6 in U, less than the thresholds'
// ratio 1/rho >= e^(1/64).
const guideSub = 6

// guideBuckets is the guide's size: the exponents of
// max(x>>11, 2^guideMinExp) (guideMinExp to 52) times the significand
// bits.
const guideBuckets = (53 - guideMinExp) << guideSub

// guideMinExp is the exponent of the guide's first bucket: every word x
// with x>>11 below 2^guideMinExp (U below about 2^-30) falls in it. No
// threshold but th_0 is stored below 2^-30 (newDLSampler's floor), so
// those words need no finer buckets, and the guide is 40% smaller.
const guideMinExp = 22

// bucket returns the guide bucket of U's word x: the exponent (from
// guideMinExp) and the first guideSub significand bits of
// float64(max(x>>11, 2^guideMinExp)), exact since x>>11 < 2^53. It is
// non-decreasing in x.
func bucket(x uint64) int {
	return int(math.Float64bits(float64(int64(max(x>>11, 1<<guideMinExp))))>>(52-guideSub)) - (1023+guideMinExp)<<guideSub
}

// bucketEnd returns the first v = x>>11 whose bucket is above b, or 2^53:
// F, the smallest float64 of bucket b+1, an integer.
func bucketEnd(b int) uint64 {
	if b+1 >= guideBuckets {
		return 1 << 53
	}
	return uint64(math.Float64frombits(uint64(b+1+(1023+guideMinExp)<<guideSub) << (52 - guideSub)))
}

// guideEntry holds, for one bucket of U, the number g of thresholds
// certainly above every U in the bucket and the lower bounds of thresholds
// g and g+1, copied from lo so that the common path loads all three at
// once; past the table's end they are 0.
type guideEntry struct {
	lo0, lo1 uint64
	g        int
}

// accLen is the size of rejHi: it is indexed by the top six bits of l
// (fewer when m < 6).
const accLen = 64

func newDLSampler(t float64) *dlSampler {
	s := &dlSampler{t: t}
	if t >= 64 {
		s.jMin = 1
		_, e := math.Frexp(t / 32) // t/32 = f 2^e, f in [1/2, 1)
		s.m = uint(e - 1)
	}
	s.tHigh = math.Ldexp(t, -int(s.m))
	s.lMask = 1<<s.m - 1
	hb := 47 - s.m
	s.ub, s.lShift = 16, 1
	switch {
	case s.m <= halfMaxM:
		s.half, s.ub, hb = true, 8, 23-s.m
		s.sShift, s.lShift = 32, 33
	case s.m >= 19:
		s.twoWords, s.ub, hb = true, 63-s.m, 64
	}
	s.draw = (*dlSampler).sample
	if s.half {
		s.draw = (*dlSampler).sampleHalf
	}
	s.uLow = math.MaxUint64 >> s.ub
	if hb < 64 {
		s.xLow = 1<<(64-hb) - 1
	}

	// Thresholds down to where U's prefix of hb bits decides them all, and
	// at most down to 2^-30: the far tail costs a logarithm, but keeping the
	// tables small keeps them in cache.
	floor := max(uint64(4)<<(64-min(hb, 62)), 1<<34)
	den := 1 + math.Exp(-1/t)
	for i := 0; ; i++ {
		n := 1 + math.Ldexp(float64(i), int(s.m)) // th_i = 2 exp(-n/t) / (1 + exp(-1/t))
		lo, hi := thresholdBounds(n, t, den)
		// th_0 is always stored, so that j = 0 means M = 0 even when
		// th_0 is tiny (small t).
		if i > 0 && (lo <= floor || i >= 1<<15) {
			break
		}
		s.lo, s.hi = append(s.lo, lo), append(s.hi, hi)
	}
	n := len(s.hi)
	// Zeros end lo: the search looks past the last threshold, and no U is
	// below 0.
	s.lo = append(s.lo, 0, 0)

	// One slack for every threshold: hi_i <= lo_i + w for all i, and x is
	// U's prefix, so x > hi_j unless (x|xLow) - lo_j <= w + xLow.
	var w uint64
	for i := range n {
		w = max(w, s.hi[i]-s.lo[i])
	}
	s.slack = w + s.xLow

	s.guide = make([]guideEntry, guideBuckets)
	for !s.buildGuide() {
	}

	if s.m > 0 {
		q := min(s.m, 6)
		s.accShift = s.m - q
		// ceil(2^64/t), rounded up: 2^64/t is correctly rounded, one ulp
		// more is above it, and the conversion truncates.
		s.perL = uint64(math.Nextafter(0x1p64/t, math.Inf(1))) + 1
		for k := range 1 << q {
			_, s.rejHi[k] = expBoundsU64(math.Ldexp(float64(k), int(s.accShift)), t)
		}
	}
	return s
}

// thresholdBounds returns lo <= floor(th 2^64) <= hi for
// th = 2 exp(-n/t) / (1 + exp(-1/t)), n >= 1 an integer below 2^53.
//
// Error analysis: n/t and 1/t are within a relative 2^-53, math.Exp is within
// one ulp, so each exponential is within a relative (x + 2) 2^-53 of its
// value at the exact argument x; the sum and the quotient add 2^-53 each.
// The total is below (n/t + 1/t + 6) 2^-53 <= (x + 5) 2^-52 with x = n/t;
// ulpGuard leaves a factor of 8.
//
// den is 1 + exp(-1/t), the same for every threshold: the caller computes
// it once.
func thresholdBounds(n, t, den float64) (lo, hi uint64) {
	x := n / t
	p := 2 * math.Exp(-x) / den
	e := p * (x + 5) * ulpGuard
	return toU64Floor(p - e), toU64Floor(p + e)
}

// expBoundsU64 returns lo <= floor(exp(-n/t) 2^64) <= hi, n >= 0 an integer
// below 2^53 (same analysis as thresholdBounds).
func expBoundsU64(n, t float64) (lo, hi uint64) {
	x := n / t
	p := math.Exp(-x)
	e := p * (x + 3) * ulpGuard
	return toU64Floor(p - e), toU64Floor(p + e)
}

// toU64Floor returns floor(p 2^64) clamped to [0, 2^64-1].
func toU64Floor(p float64) uint64 {
	switch {
	case !(p > 0):
		return 0
	case p >= 1:
		return math.MaxUint64
	}
	return uint64(p * 0x1p64) // exact scaling; the conversion truncates
}

// buildGuide fills the guide. The search decides between thresholds g and
// g+1 of a bucket only, so U >= th_(g+1) must be certain for every word of
// the bucket; where it is not (two thresholds in one bucket, possible
// only where the prefix's quantum xLow+1 is not small against U), it drops
// the thresholds from g+1 on, which the far tail then serves, and reports
// false to be called again.
func (s *dlSampler) buildGuide() bool {
	n := len(s.hi)
	cut := n
	// From the last bucket down, up does not increase, so the first
	// threshold below it, g, does not decrease: one pass over the buckets
	// and the thresholds together.
	g := 0
	end := bucketEnd(guideBuckets - 1)
	for b := guideBuckets - 1; b >= 0; b-- {
		// U 2^64 < (x|xLow) + 1 <= up for every word x in bucket b
		// (x|xLow is non-decreasing in x).
		up := uint64(math.MaxUint64)
		if end < 1<<53 {
			if u, c := bits.Add64((end<<11-1)|s.xLow, 1, 0); c == 0 {
				up = u
			}
		}
		for g < n && s.lo[g] >= up {
			g++
		}
		start := uint64(0) // the bucket's first word
		if b > 0 {
			end = bucketEnd(b - 1)
			start = end << 11
		}
		s.guide[b] = guideEntry{lo0: s.lo[g], lo1: s.lo[g+1], g: g}
		if s.lo[g+1] > start {
			cut = min(cut, g+1)
		}
	}
	if cut == n {
		return true
	}
	s.lo, s.hi = append(s.lo[:cut], 0, 0), s.hi[:cut]
	return false
}

// sample draws Z. The common path is straight-line code: one word (half
// a word below t = 4096, in sampleHalf), a guide lookup, a select without
// a branch, the quick test of L and the sign applied without a branch;
// the rest is in functions called rarely.
//
// It is for the whole-word layouts; callers call sampleHalf for s.half.
func (s *dlSampler) sample(r *Rand) int64 {
	w := r.Uint64()
	x := w << 16 // U's word
	if s.twoWords {
		x = r.Uint64()
	}
	j, undecided := s.search(x) // inlined
	n := len(s.hi)
	if undecided {
		j = s.searchSlow(r, x&^s.xLow, j)
	}
	var mag uint64
	if uint(j-s.jMin) < uint(n-s.jMin) {
		l := (w >> 1) & s.lMask
		uHi := w | s.uLow // u < (uHi+1) 2^-64
		if !s.quickAccept(l, uHi) {
			l = s.lowSlow(r, l, uHi&^s.uLow)
		}
		mag = 1 + uint64(j-1)<<(s.m&63) + l // the mask spares Go's oversized-shift code
	} else if j != 0 {
		mag = s.magnitudeTail(r, w)
	}
	neg := w & 1
	return int64((mag ^ -neg) + neg) // -mag if neg
}

// sampleHalf is sample for the half-word layout (s.half): the same steps,
// written out again with its constant shifts, as a shared function would
// be too large for Go to inline and its call would cost a tenth of a
// sample.
func (s *dlSampler) sampleHalf(r *Rand) int64 {
	// Half a word (splitWord), by hand, as Go does not inline it either.
	var w uint64
	if r.hasSpare {
		w, r.hasSpare = r.spare, false
	} else {
		w = r.splitWord()
	}
	x := w << 8 // U's word
	j, undecided := s.search(x)
	n := len(s.hi)
	if undecided {
		j = s.searchSlow(r, x&^s.xLow, j)
	}
	var mag uint64
	if uint(j-s.jMin) < uint(n-s.jMin) {
		l := (w >> 33) & s.lMask
		uHi := w | s.uLow
		if !s.quickAccept(l, uHi) {
			l = s.lowSlow(r, l, uHi&^s.uLow)
		}
		mag = 1 + uint64(j-1)<<(s.m&63) + l
	} else if j != 0 {
		mag = s.magnitudeTail(r, w)
	}
	neg := (w >> 32) & 1
	return int64((mag ^ -neg) + neg)
}

// search returns the first j with U >= th_j for U's word x, unless it
// reports U >= th_j undecided by x's bits: then U < th_i is still certain
// for every i < j, and searchSlow must finish from j. It must stay within
// the inliner's budget (its cost is 79 of 80): a call would add a tenth
// to a sample's time.
func (s *dlSampler) search(x uint64) (j int, undecided bool) {
	xhi := x | s.xLow // U < (xhi+1) 2^-64
	e := &s.guide[bucket(x)]
	_, below := bits.Sub64(xhi, e.lo0, 0) // 1 if U < th_g: then U >= th_(g+1) (buildGuide)
	sel := -below
	lo := e.lo0&^sel | e.lo1&sel
	// Now xhi >= lo_j, and U >= th_j is certain if x > hi_j: then
	// U >= x 2^-64 >= (hi_j+1) 2^-64, and x > hi_j unless xhi - lo_j <= slack.
	return e.g + int(below), xhi-lo <= s.slack
}

// quickAccept reports u < 1 - l perL 2^-64 for u < (uHi+1) 2^-64, which
// implies u < exp(-l/t): the sum does not carry.
func (s *dlSampler) quickAccept(l, uHi uint64) bool {
	return uHi+l*s.perL >= uHi
}

// lowSlow finishes drawing L when the quick accept failed for l and the
// first word's u.
func (s *dlSampler) lowSlow(r *Rand, l, u uint64) uint64 {
	ub := s.ub
	for !s.acceptLow(r, l, u, ub) {
		v := r.Uint64()
		l, u, ub = v&s.lMask, v&^s.lMask, 64-s.m
	}
	return l
}

// magnitudeTail returns M = 1 + 2^m H + L past the last threshold:
// H = (n-1) + a fresh geometric variable with ratio rho (memorylessness).
func (s *dlSampler) magnitudeTail(r *Rand, w uint64) uint64 {
	h := uint64(len(s.hi)-1) + uint64(magnitude(r, s.tHigh))
	// Saturate where no draw comes: M >= 2^62 has probability below
	// exp(-2^21) for every accepted scale.
	h = min(h, 1<<(62-s.m)-1)
	mag := 1 + h<<s.m
	if s.m > 0 {
		mag += s.lowSlow(r, (w>>s.lShift)&s.lMask, w&^s.uLow)
	}
	return mag
}

// searchSlow continues the search from threshold i, for U whose first
// 64-hb bits are x's and which is certainly below th_(i-1). It completes
// U's first 64 bits with one word, which lo and hi decide unless U is
// within about 2^-43 relative of a threshold; there it compares with
// arbitrary precision, drawing more bits as needed.
func (s *dlSampler) searchSlow(r *Rand, x uint64, i int) int {
	if s.xLow != 0 {
		x |= r.Uint64() & s.xLow
	}
	var u *lazyU // U's bits beyond x, once drawn
	for ; i < len(s.hi); i++ {
		if u == nil {
			if x > s.hi[i] {
				return i // U >= x 2^-64 >= (hi_i+1) 2^-64 > th_i
			}
			if x < s.lo[i] {
				continue // U < (x+1) 2^-64 <= th_i
			}
			u = newLazyU(x, 64)
		}
		n := 1 + math.Ldexp(float64(i), int(s.m))
		if !u.less(r, func(prec uint) (*big.Float, *big.Float) { return thresholdBig(n, s.t, prec) }) {
			return i
		}
	}
	return i
}

// acceptLow decides u < exp(-l/t) for u whose first ub bits are the
// left-aligned prefix u.
func (s *dlSampler) acceptLow(r *Rand, l, u uint64, ub uint) bool {
	if l == 0 {
		return true
	}
	low := uint64(math.MaxUint64) >> ub
	if s.quickAccept(l, u|low) {
		return true
	}
	if u > s.rejHi[l>>s.accShift] {
		return false
	}
	lo, hi := expBoundsU64(float64(l), s.t)
	if u|low < lo {
		return true
	}
	if u > hi {
		return false
	}
	if ub < 64 {
		// Complete u's first 64 bits with one word, which decides unless
		// u is within about 2^-43 relative of exp(-l/t): with the 8 bits
		// of a half-word sample, the interval holds exp(-l/t) for small l
		// one time in 256, too often for arbitrary precision.
		u |= r.Uint64() & low
		if u < lo {
			return true
		}
		if u > hi {
			return false
		}
		ub = 64
	}
	lu := newLazyU(u, ub)
	return lu.less(r, func(prec uint) (*big.Float, *big.Float) { return expBig(float64(l), s.t, prec) })
}
