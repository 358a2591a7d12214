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
