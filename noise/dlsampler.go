package noise

import (
	"math"
	"math/big"
	"math/bits"
	"sort"
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
// The constructor picks 2^m in (t/32, t/16] (m = 0 for t < 32), so that
// rho is between e^-1/16 and e^-1/32 and L is nearly uniform.
//
// M and H come from one uniform U by inversion against the thresholds
// th_i = P(M >= 1 + 2^m i) = c rho^i: with j the first i such that
// U >= th_i, M = 0 if j = 0 and H = j-1 otherwise. The thresholds are
// irrational; the constructor stores integers lo_i <= floor(th_i 2^64) <=
// hi_i (from float64 with a rigorous error bound, about 2^-43 relative),
// and the sampler compares the bits of U it has drawn with them. When the
// bits drawn so far cannot decide (U's interval meets [lo_i, hi_i+1) 2^-64:
// probability below n 2^-hb for n thresholds and hb bits of U, from 2^-20
// for scales near 2^24 down to 2^-54 with two words), it draws more bits
// and compares with arbitrary precision (lazyU), so every comparison is
// exact. A guide table indexed by U's leading zeros and next five bits
// starts the search one or two thresholds from the answer. Past the last
// stored threshold (probability below 2^-25), H = (n-1) + a fresh geometric
// variable with ratio rho: the geometric law is memoryless. It is drawn by
// magnitude, the exact inversion by logarithm.
//
// L is drawn by rejection: l uniform on [0, 2^m), accepted when an
// independent uniform u is below a^l = exp(-l/t) >= rho >= e^-1/16. The
// comparison is decided by precomputed thresholds exp(-(k+1) 2^s/t) (quick
// accept) and exp(-k 2^s/t) (quick reject) for the top six bits k of l,
// then by float64 exp with an error bound, then lazily with arbitrary
// precision. A rejected l costs one more word (probability 1-exp(-l/t),
// below 1/16, 1/64 to 1/32 on average).
//
// One 64-bit word usually suffices: bit 0 is the sign, the next m bits are
// l, the next 16 bits begin u, and the top 47-m bits begin U. When m > 19
// (t >= 2^24) U takes a second word and u the 63-m bits above l. For m = 0
// (t < 32), U takes the top 63 bits and there is no L.
type dlSampler struct {
	t        float64
	m        uint    // L has m bits
	tHigh    float64 // t/2^m, exactly: H has ratio exp(-1/tHigh)
	twoWords bool    // U comes from a second word
	xLow     uint64  // bits of U's word that are not U's: 2^(64-hb)-1
	ub       uint    // bits of u in the first word
	lMask    uint64  // 2^m - 1
	lo, hi   []uint64
	guide    []guideEntry   // per bucket of U, indexed by bucket
	guideG   []int32        // per bucket: thresholds certainly above U
	lzMax    int            // U with more leading zeros is below every threshold
	accShift uint           // L's quick tables are indexed by l >> accShift
	uLow     uint64         // bits of u not in the first word: 2^(64-ub)-1
	accLo    [accLen]uint64 // accLo[k] <= floor(exp(-(k+1) 2^accShift/t) 2^64)
	rejHi    [accLen]uint64 // rejHi[k] >= floor(exp(-k 2^accShift/t) 2^64)
}

// guideSub is the number of bits after U's leading one that index the guide
// table: buckets span a factor of at most 1+1/32 in U, less than the
// thresholds' ratio 1/rho >= e^(1/32), so a bucket holds at most one.
const guideSub = 5

// guideEntry holds, for one bucket of U, the bounds of thresholds g and
// g+1, g being the number of thresholds certainly above every U in the
// bucket (guideG). They are copied from lo and hi so that the common path
// loads them at once, in parallel with g; past the table's end they are 0.
type guideEntry struct {
	lo0, hi0, lo1, hi1 uint64
}

// accLen is the size of L's quick tables: they are indexed by the top six
// bits of l (fewer when m < 6).
const (
	accLen  = 64
	accMask = accLen - 1
)

func newDLSampler(t float64) *dlSampler {
	s := &dlSampler{t: t}
	if t >= 32 {
		_, e := math.Frexp(t / 16) // t/16 = f 2^e, f in [1/2, 1)
		s.m = uint(e - 1)
	}
	s.tHigh = math.Ldexp(t, -int(s.m))
	s.lMask = 1<<s.m - 1
	hb := uint(63)
	switch {
	case s.m == 0:
	case s.m <= 19:
		s.ub = 16
		hb = 47 - s.m
	default:
		s.twoWords, s.ub, hb = true, 63-s.m, 64
	}
	if hb < 64 {
		s.xLow = 1<<(64-hb) - 1
	}

	// Thresholds down to where U's prefix of hb bits decides them all, and
	// at most down to 2^-30: the far tail costs a logarithm, but keeping the
	// tables small keeps them in cache.
	floor := max(uint64(4)<<(64-min(hb, 62)), 1<<34)
	for i := 0; ; i++ {
		n := 1 + math.Ldexp(float64(i), int(s.m)) // th_i = 2 exp(-n/t) / (1 + exp(-1/t))
		lo, hi := thresholdBounds(n, t)
		// th_0 is always stored, so that j = 0 means M = 0 even when
		// th_0 is tiny (small t).
		if i > 0 && (lo <= floor || i >= 1<<15) {
			break
		}
		s.lo, s.hi = append(s.lo, lo), append(s.hi, hi)
	}

	// Zeros end lo: sampleWords looks past the last threshold, and no U is
	// below 0.
	s.lo = append(s.lo, 0, 0, 0)
	// Every U with more than lz0 leading zeros, lz0 those of lo_(n-1), is
	// below the last threshold: U < 2^(63-lz0) 2^-64 <= lo_(n-1) 2^-64, as
	// the bits of xLow are below 2^(63-lz0) too. One block of buckets,
	// lzMax = lz0+1, serves them all.
	n := len(s.hi)
	s.lzMax = 64
	lz0 := bits.LeadingZeros64(s.lo[n-1])
	merged := lz0 < 63 && bits.Len64(s.xLow) <= 63-lz0 // false only for tiny t (lo_0 = 0)
	if merged {
		s.lzMax = lz0 + 1
	}
	s.guide = make([]guideEntry, (s.lzMax+1)<<guideSub)
	s.guideG = make([]int32, len(s.guide))
	for b := range s.guide {
		up := bucketUpper(b, s.xLow)
		// The first threshold below up (lo is non-increasing).
		i := sort.Search(n, func(i int) bool { return s.lo[i] < up })
		if merged && b>>guideSub == s.lzMax {
			i = n
		}
		s.guideG[b] = int32(i)
		e := guideEntry{lo0: s.lo[i], lo1: s.lo[i+1]}
		if i < len(s.hi) {
			e.hi0 = s.hi[i]
		}
		if i+1 < len(s.hi) {
			e.hi1 = s.hi[i+1]
		}
		s.guide[b] = e
	}

	if s.m > 0 {
		q := min(s.m, 6)
		s.accShift = s.m - q
		s.uLow = math.MaxUint64 >> s.ub
		for k := range 1 << q {
			s.accLo[k], _ = expBoundsU64(math.Ldexp(float64(k+1), int(s.accShift)), t)
			_, s.rejHi[k] = expBoundsU64(math.Ldexp(float64(k), int(s.accShift)), t)
		}
	}
	return s
}

// bucket returns the guide bucket of a left-aligned prefix x of U: its
// number of leading zeros (at most lzMax) and the guideSub bits after its
// leading one.
func (s *dlSampler) bucket(x uint64) int {
	lz := bits.LeadingZeros64(x)
	return min(lz, s.lzMax)<<guideSub | int((x<<(lz&63))>>(63-guideSub))&(1<<guideSub-1)
}

// bucketUpper returns an upper bound, saturated at 2^64-1, on U 2^64 for
// every U whose prefix falls in bucket b; xLow+1 is the prefix's quantum.
func bucketUpper(b int, xLow uint64) uint64 {
	lz, f := b>>guideSub, uint64(b&(1<<guideSub-1))
	var top uint64 // largest prefix value in the bucket, plus one
	var carry uint64
	switch {
	case lz == 64:
		top = 1
	case lz <= 63-guideSub:
		base := uint64(1) << (63 - lz)
		top, carry = bits.Add64(base, (base>>guideSub)*(f+1), 0)
	default:
		top = uint64(1) << (64 - lz) // f is not resolved: use the whole binade
	}
	up, c2 := bits.Add64(top, xLow, 0)
	if carry|c2 != 0 {
		return math.MaxUint64
	}
	return up
}

// thresholdBounds returns lo <= floor(th 2^64) <= hi for
// th = 2 exp(-n/t) / (1 + exp(-1/t)), n >= 1 an integer below 2^53.
//
// Error analysis: n/t and 1/t are within a relative 2^-53, math.Exp is within
// one ulp, so each exponential is within a relative (x + 2) 2^-53 of its
// value at the exact argument x; the sum and the quotient add 2^-53 each.
// The total is below (n/t + 1/t + 6) 2^-53 <= (x + 5) 2^-52 with x = n/t;
// ulpGuard leaves a factor of 8.
func thresholdBounds(n, t float64) (lo, hi uint64) {
	x := n / t
	p := 2 * math.Exp(-x) / (1 + math.Exp(-1/t))
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

// sampleWords draws Z from the first word w and U's word x (x = w in the
// one-word layout); r supplies any further bits. Tests call it with
// chosen words to force the slow paths. The common path is straight-line
// code with one short loop, the sign applied without a branch.
func (s *dlSampler) sampleWords(r *Rand, w, x uint64) int64 {
	x &^= s.xLow
	xhi := x | s.xLow
	b := s.bucket(x)
	e, g := &s.guide[b], int(s.guideG[b])
	n := len(s.hi)
	// Skip the thresholds certainly above U: U < (xhi+1) 2^-64 <= th_j.
	// A bucket holds at most one threshold except for tiny U, so the answer
	// is almost always g or g+1, decided from the bucket's entry alone
	// (branch-free); the loop handles the rare rest.
	bi := b2i(xhi < e.lo0)
	sel := -uint64(bi) // all ones if U < th_g
	j, h := g+bi, e.hi0&^sel|e.hi1&sel
	if xhi < e.lo1&sel {
		for j = g + 2; xhi < s.lo[j]; j++ {
		}
		h = 0
		if j < n {
			h = s.hi[j]
		}
	}
	// Now U >= th_j is decided if x > hi_j: U >= x 2^-64 >= (hi_j+1) 2^-64.
	if j < n && x <= h {
		j = s.searchSlow(r, x, j)
	}
	var mag uint64
	switch {
	case s.m == 0 && j < n:
		mag = uint64(j)
	case j == 0:
		mag = 0
	case j < n:
		// The shift counts are below 64; masking them spares Go's
		// oversized-shift handling.
		mag = 1 + uint64(j-1)<<(s.m&63)
		// L: l uniform, accepted if u < exp(-l/t); quick accept first
		// (accLo[0] covers l = 0 only in part, so l = 0 is tested).
		l := (w >> 1) & s.lMask
		u := (w >> ((1 + s.m) & 63)) << ((64 - s.ub) & 63)
		if u|s.uLow < s.accLo[(l>>(s.accShift&63))&accMask] || l == 0 {
			mag += l
		} else {
			mag += s.lowSlow(r, l, u)
		}
	default:
		mag = s.magnitudeTail(r, w)
	}
	neg := w & 1
	return int64((mag ^ -neg) + neg) // -mag if neg
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
		mag += s.lowSlow(r, (w>>1)&s.lMask, (w>>(1+s.m))<<(64-s.ub))
	}
	return mag
}

// searchSlow continues the search from threshold i with exact comparisons,
// drawing more bits of U as needed.
func (s *dlSampler) searchSlow(r *Rand, x uint64, i int) int {
	u := newLazyU(x, 64-uint(bits.TrailingZeros64(s.xLow+1)))
	for ; i < len(s.hi); i++ {
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
	k := l >> s.accShift
	low := uint64(math.MaxUint64) >> ub
	if u|low < s.accLo[k] {
		return true
	}
	if u > s.rejHi[k] {
		return false
	}
	lo, hi := expBoundsU64(float64(l), s.t)
	if u|low < lo {
		return true
	}
	if u > hi {
		return false
	}
	lu := newLazyU(u, ub)
	return lu.less(r, func(prec uint) (*big.Float, *big.Float) { return expBig(float64(l), s.t, prec) })
}

// b2i is 1 for true and 0 for false; the compiler makes it branch-free.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
