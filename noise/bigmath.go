package noise

import "math/big"

// The slow paths of the samplers decide rare, ambiguous cases with
// arbitrary-precision arithmetic. bigLn and bigExp return values whose
// absolute error is at most errBound(prec, result); the fast float64 paths are
// only trusted when the answer is the same for every value within their error
// bound, so these bounds are what makes the samplers exact.

// errBound is the absolute error guaranteed by bigLn and bigExp at precision
// prec for a result of magnitude |v|: 2^-prec * (1 + |v|).
func errBound(prec uint, v *big.Float) *big.Float {
	e := new(big.Float).SetPrec(64).Abs(v)
	e.Add(e, big.NewFloat(1))
	return e.SetMantExp(e, -int(prec))
}

// bigLn returns ln(x) for x > 0 with absolute error below 2^-prec*(1+|ln x|).
//
// It writes x = m*2^e with m in [1/2, 1) and uses ln x = e ln 2 + 2 atanh(s),
// s = (m-1)/(m+1) in [-1/3, 0). The working precision carries 64 guard bits
// plus the bits lost to rounding in the O(prec) series terms, so the
// stated bound holds with a wide margin.
func bigLn(x *big.Float, prec uint) *big.Float {
	if x.Sign() <= 0 {
		panic("noise: bigLn of a non-positive number")
	}
	wp := prec + 64 + uint(bitsFor(prec))
	m := new(big.Float).SetPrec(wp)
	e := x.MantExp(m)
	m.SetPrec(wp)

	num := new(big.Float).SetPrec(wp).Sub(m, big.NewFloat(1))
	den := new(big.Float).SetPrec(wp).Add(m, big.NewFloat(1))
	s := num.Quo(num, den)
	r := atanh(s, wp)
	r.Mul(r, big.NewFloat(2))

	if e != 0 {
		third := new(big.Float).SetPrec(wp).Quo(big.NewFloat(1), big.NewFloat(3))
		ln2 := atanh(third, wp)
		ln2.Mul(ln2, big.NewFloat(2))
		ln2.Mul(ln2, new(big.Float).SetPrec(wp).SetInt64(int64(e)))
		r.Add(r, ln2)
	}
	return r.SetPrec(prec + 32)
}

// atanh sums the series s + s^3/3 + s^5/5 + ... for |s| <= 1/3 until the next
// term is below 2^-(wp+4); the tail is then below 2^-(wp+3).
func atanh(s *big.Float, wp uint) *big.Float {
	sum := new(big.Float).SetPrec(wp).Set(s)
	s2 := new(big.Float).SetPrec(wp).Mul(s, s)
	pow := new(big.Float).SetPrec(wp).Set(s)
	term := new(big.Float).SetPrec(wp)
	limit := pow2(-int(wp) - 4)
	for k := int64(3); ; k += 2 {
		pow.Mul(pow, s2)
		term.Quo(pow, new(big.Float).SetPrec(wp).SetInt64(k))
		if new(big.Float).Abs(term).Cmp(limit) < 0 {
			return sum
		}
		sum.Add(sum, term)
	}
}

// bigExp returns exp(x) for x <= 0 with absolute error below 2^-prec.
//
// It halves x k times until |x/2^k| < 1/2, sums the Taylor series and squares
// k times; squaring doubles the relative error, so k extra guard bits are
// carried.
func bigExp(x *big.Float, prec uint) *big.Float {
	if x.Sign() > 0 {
		panic("noise: bigExp of a positive number")
	}
	k := 0
	if x.Sign() != 0 {
		k = max(x.MantExp(nil)+1, 0)
	}
	wp := prec + 64 + uint(k) + uint(bitsFor(prec))
	r := new(big.Float).SetPrec(wp).Set(x)
	r.SetMantExp(r, -k)

	sum := new(big.Float).SetPrec(wp).SetInt64(1)
	term := new(big.Float).SetPrec(wp).SetInt64(1)
	limit := pow2(-int(wp) - 4)
	for n := int64(1); ; n++ {
		term.Mul(term, r)
		term.Quo(term, new(big.Float).SetPrec(wp).SetInt64(n))
		if new(big.Float).Abs(term).Cmp(limit) < 0 {
			break
		}
		sum.Add(sum, term)
	}
	for range k {
		sum.Mul(sum, sum)
	}
	return sum.SetPrec(prec + 32)
}

// pow2 returns 2^e. (SetMantExp copies the precision of its mantissa, so
// the result is exact but carries only 64 bits: use it as an operand.)
func pow2(e int) *big.Float {
	return new(big.Float).SetMantExp(new(big.Float).SetPrec(64).SetInt64(1), e)
}

// bitsFor returns the number of bits of n, used to size guard bits for the
// rounding errors accumulated over O(n) operations.
func bitsFor(n uint) int {
	b := 0
	for n > 0 {
		b++
		n >>= 1
	}
	return b + 4
}

// bigFrac returns the real number w_1 w_2 ... w_k (64-bit words, most
// significant first) divided by 2^(64k), exactly.
func bigFrac(words []uint64) *big.Float {
	f := new(big.Float).SetPrec(uint(64 * len(words)))
	for _, w := range words {
		f.SetMantExp(f, 64)
		f.Add(f, new(big.Float).SetUint64(w))
	}
	return f.SetMantExp(f, -64*len(words))
}

// floorFloat returns floor(x) as an int64 and whether it fits.
func floorFloat(x *big.Float) (int64, bool) {
	i, acc := x.Int(nil)
	if acc == big.Above && x.Sign() < 0 {
		i.Sub(i, big.NewInt(1))
	}
	if !i.IsInt64() {
		return 0, false
	}
	return i.Int64(), true
}

// ulpGuard is the relative error allowance of the float64 fast paths. Each
// fast path's error analysis (in its comments) gives a bound of at most
// 2^-52 relative to the quantities involved, from a few correctly rounded
// operations and library functions accurate to one ulp (math.Log, math.Exp);
// 2^-49 leaves a factor of 8 to spare.
const ulpGuard = 0x1p-49

// lazyU is a uniform variate on [0, 1) of which the first k bits are known:
// U is in [a, a + 2^-k). Its later bits are drawn only when a comparison
// needs them.
type lazyU struct {
	a *big.Float
	k int
}

// newLazyU returns U whose first k bits are the top k bits of x.
func newLazyU(x uint64, k uint) *lazyU {
	a := new(big.Float).SetPrec(64).SetUint64(x)
	return &lazyU{a: a.SetMantExp(a, -64), k: int(k)}
}

// less reports whether U < p, drawing bits of U from r until the bits
// known decide it. bounds(prec) must return lo <= p <= hi with hi-lo of order
// 2^-prec; p must not be a dyadic rational, or the loop may not end (the
// thresholds compared are exponentials of non-zero rationals, and such
// values are transcendental).
func (u *lazyU) less(r *Rand, bounds func(prec uint) (lo, hi *big.Float)) bool {
	for {
		lo, hi := bounds(uint(u.k + 64))
		b := new(big.Float).SetPrec(uint(u.k+64)).Add(u.a, pow2(-u.k))
		if b.Cmp(lo) <= 0 {
			return true
		}
		if u.a.Cmp(hi) >= 0 {
			return false
		}
		w := new(big.Float).SetUint64(r.Uint64())
		w.SetMantExp(w, -u.k-64)
		u.a.SetPrec(uint(u.k+64)).Add(u.a, w) // exact: a has k+64 bits below the point
		u.k += 64
	}
}

// expBig returns lo <= exp(-n/t) <= hi with hi-lo below about 2^-prec, for
// n >= 0 and t > 0 (both exact float64 values).
//
// n/t is computed to prec+64 bits (relative error 2^-(prec+64)), which moves
// exp(-n/t) <= 1 by at most (n/t) 2^-(prec+63); bigExp adds 2^-(prec+8), and
// the final subtraction and addition round by 2^-(prec+64) each. The margin
// (n/t) 2^-(prec+62) + 2^-(prec+6) covers all of it.
func expBig(n, t float64, prec uint) (lo, hi *big.Float) {
	wp := prec + 64
	q := new(big.Float).SetPrec(wp).SetFloat64(n)
	q.Quo(q, new(big.Float).SetFloat64(t))
	e := bigExp(new(big.Float).Neg(q), prec+8)
	m := new(big.Float).SetPrec(64).Set(q)
	m.SetMantExp(m, -int(prec+62))
	m.Add(m, pow2(-int(prec+6)))
	lo = new(big.Float).SetPrec(wp).Sub(e, m)
	hi = new(big.Float).SetPrec(wp).Add(e, m)
	return lo, hi
}

// thresholdBig returns lo <= 2 exp(-n/t) / (1 + exp(-1/t)) <= hi with hi-lo
// below about 2^-prec: the discrete Laplace thresholds of dlSampler.
//
// With e1, e2 in the intervals of expBig, the value lies in
// [2 e1lo/(1+e2hi), 2 e1hi/(1+e2lo)]; the divisions, rounded to prec+64 bits,
// are widened by 2^-(prec+60) (the value is at most 1).
func thresholdBig(n, t float64, prec uint) (lo, hi *big.Float) {
	wp := prec + 64
	e1lo, e1hi := expBig(n, t, prec+2)
	e2lo, e2hi := expBig(1, t, prec+2)
	one := big.NewFloat(1)
	lo = new(big.Float).SetPrec(wp).Add(one, e2hi)
	lo.Quo(e1lo, lo)
	hi = new(big.Float).SetPrec(wp).Add(one, e2lo)
	hi.Quo(e1hi, hi)
	lo.SetMantExp(lo, 1)
	hi.SetMantExp(hi, 1)
	slack := pow2(-int(prec + 60))
	lo.Sub(lo, slack)
	hi.Add(hi, slack)
	return lo, hi
}
