package noise

import (
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"slices"
	"sort"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

var tableScales = []float64{0.01, 0.3, 1, 2.5, 31.9, 32, 63.9, 64, 1000, 1 << 20, 1 << 23, 1<<24 - 1, 1 << 24, 1 << 30, 0x1p40}

// floor64 returns floor(p 2^64) for p in [0, 1) as a big.Int.
func floor64(p *big.Float) *big.Int {
	i, _ := new(big.Float).SetMantExp(p, 64).Int(nil)
	return i
}

// mid returns the midpoint of [lo, hi].
func mid(lo, hi *big.Float) *big.Float {
	m := new(big.Float).SetPrec(lo.Prec()+2).Add(lo, hi)
	return m.SetMantExp(m, -1)
}

// TestDLSamplerTables checks every stored threshold against the value
// computed to 256 bits (lo <= floor(th 2^64) <= hi), the quick tables of L
// likewise, the guide (every threshold it skips is above every U of its
// bucket) and the word layout.
func TestDLSamplerTables(t *testing.T) {
	for _, scale := range tableScales {
		d, err := NewDiscreteLaplace(scale)
		if err != nil {
			t.Fatal(err)
		}
		s := d.s
		n := len(s.hi)
		if n < 1 || len(s.lo) != n+2 {
			t.Fatalf("scale %v: %d thresholds, %d lower bounds", scale, n, len(s.lo))
		}
		if scale >= 64 && (math.Ldexp(1, int(s.m)) > scale/32 || math.Ldexp(1, int(s.m)) <= scale/64) || scale < 64 && s.m != 0 {
			t.Errorf("scale %v: 2^m = %v not in (t/64, t/32]", scale, math.Ldexp(1, int(s.m)))
		}
		if s.twoWords != (scale >= 1<<24) {
			t.Errorf("scale %v: two words %v", scale, s.twoWords)
		}
		hb := 64 - bitsLen(s.xLow)
		if s.twoWords {
			if hb != 64 || s.ub != 63-s.m {
				t.Errorf("scale %v: two-word layout hb %d ub %d m %d", scale, hb, s.ub, s.m)
			}
		} else if s.half {
			if s.m > halfMaxM || 1+s.m+s.ub+hb != 32 || s.sShift != 32 || s.lShift != 33 {
				t.Errorf("scale %v: half-word layout 1+%d+%d+%d != 32, sign at %d, l at %d", scale, s.m, s.ub, hb, s.sShift, s.lShift)
			}
		} else if s.m <= halfMaxM || 1+s.m+s.ub+hb != 64 {
			t.Errorf("scale %v: layout 1+%d+%d+%d != 64", scale, s.m, s.ub, hb)
		}
		for i := range n {
			nn := 1 + math.Ldexp(float64(i), int(s.m))
			lo, hi := thresholdBig(nn, scale, 256)
			f := floor64(mid(lo, hi))
			if f.Cmp(floor64(lo)) != 0 || f.Cmp(floor64(hi)) != 0 {
				t.Fatalf("scale %v threshold %d: 256 bits do not fix floor(th 2^64)", scale, i)
			}
			if new(big.Int).SetUint64(s.lo[i]).Cmp(f) > 0 || new(big.Int).SetUint64(s.hi[i]).Cmp(f) < 0 {
				t.Fatalf("scale %v threshold %d: floor(th 2^64) = %v outside [%d, %d]", scale, i, f, s.lo[i], s.hi[i])
			}
			// The thresholds decrease; their floors, near 2^-60, may tie.
			if i > 0 && (s.lo[i] > s.lo[i-1] || s.hi[i] > s.hi[i-1]) {
				t.Fatalf("scale %v: threshold bounds increase at %d", scale, i)
			}
		}
		if s.m > 0 {
			// perL >= 2^64/t, so that 1 - l perL 2^-64 <= exp(-l/t).
			q := new(big.Float).SetPrec(256).Quo(new(big.Float).SetMantExp(big.NewFloat(1), 64), big.NewFloat(scale))
			if new(big.Float).SetUint64(s.perL).Cmp(q) < 0 {
				t.Fatalf("scale %v: perL %d below 2^64/t = %v", scale, s.perL, q)
			}
			for k := range 1 << min(s.m, 6) {
				nk := math.Ldexp(float64(k), int(s.accShift))
				f := floor64(mid(expBig(nk, scale, 256)))
				if k == 0 {
					f.SetUint64(math.MaxUint64) // exp(0) = 1 saturates
				}
				if new(big.Int).SetUint64(s.rejHi[k]).Cmp(f) < 0 {
					t.Fatalf("scale %v quick table %d: %d below floor(exp 2^64) = %v", scale, k, s.rejHi[k], f)
				}
			}
		}
		for i := range n {
			if s.hi[i]-s.lo[i]+s.xLow > s.slack {
				t.Fatalf("scale %v: slack %d below threshold %d's width %d plus %d", scale, s.slack, i, s.hi[i]-s.lo[i], s.xLow)
			}
		}
		// Every threshold the guide skips is above every U of the bucket,
		// and the next but one is certainly below (the search compares
		// with one only).
		start := uint64(0)
		for b := range s.guide {
			e := s.guide[b]
			up := uint64(math.MaxUint64)
			end := bucketEnd(b)
			if end < 1<<53 {
				up = min(up, ((end<<11-1)|s.xLow)+1)
			}
			for i := range e.g {
				if s.lo[i] < up {
					t.Fatalf("scale %v bucket %d: guide skips threshold %d below the bucket's top", scale, b, i)
				}
			}
			if e.lo0 != s.lo[e.g] || e.lo1 != s.lo[e.g+1] || e.lo1 > start {
				t.Fatalf("scale %v bucket %d: entry %+v, thresholds from %d: %d, %d; bucket starts at %d", scale, b, e, e.g, s.lo[e.g], s.lo[e.g+1], start)
			}
			start = end << 11
		}
		// The search on words of every magnitude: every threshold before j
		// is certainly above U, and th_j certainly at or below it unless
		// the search says undecided.
		r := NewSeeded(1)
		for range 20000 {
			x := r.Uint64() >> r.Uint64N(64)
			j, undecided := s.search(x)
			xhi := x | s.xLow
			for i := range j {
				if s.lo[i] <= xhi {
					t.Fatalf("scale %v word %#x: j = %d but U may be at or above threshold %d", scale, x, j, i)
				}
			}
			if j < n && !undecided && x&^s.xLow <= s.hi[j] {
				t.Fatalf("scale %v word %#x: U >= th_%d not certain but not flagged", scale, x, j)
			}
		}
	}
}

// TestDLBucket checks the guide's index against its definition: bucket is
// non-decreasing, and bucketEnd(b) is the first x>>11 with a later bucket,
// found by bisection.
func TestDLBucket(t *testing.T) {
	for b := range guideBuckets {
		want := uint64(sort.Search(1<<53, func(v int) bool { return bucket(uint64(v)<<11) > b }))
		if got := bucketEnd(b); got != want {
			t.Fatalf("bucketEnd(%d) = %d, bisection gives %d", b, got, want)
		}
	}
	r := NewSeeded(2)
	for range 100000 {
		x, y := r.Uint64()>>r.Uint64N(64), r.Uint64()>>r.Uint64N(64)
		if x > y {
			x, y = y, x
		}
		if bx, by := bucket(x), bucket(y); bx > by || bx < 0 || by >= guideBuckets {
			t.Fatalf("bucket(%#x) = %d, bucket(%#x) = %d", x, bx, y, by)
		}
	}
}

func bitsLen(x uint64) uint {
	n := uint(0)
	for ; x != 0; x >>= 1 {
		n++
	}
	return n
}

// TestDLDecompositionExact computes, to 300 bits, the distribution the
// sampler's decomposition implies (M = 0 below th_0; M = 1 + 2^m H + L
// with P(H = h) = th_h - th_(h+1) and P(L = l) = a^l / sum a^l') and
// compares it with (1-a)/(1+a) a^|z|, relative error below 1e-60.
func TestDLDecompositionExact(t *testing.T) {
	const prec = 300
	for _, scale := range []float64{0.3, 1, 2.5, 20, 1000, 1 << 20, 0x1p40} {
		d, _ := NewDiscreteLaplace(scale)
		s := d.s
		th := func(h uint64) *big.Float {
			return mid(thresholdBig(1+math.Ldexp(float64(h), int(s.m)), scale, prec))
		}
		pow := func(k float64) *big.Float { return mid(expBig(k, scale, prec)) }
		a := pow(1)
		one := big.NewFloat(1)
		c := new(big.Float).SetPrec(prec).Sub(one, a)
		c.Quo(c, new(big.Float).SetPrec(prec).Add(one, a)) // (1-a)/(1+a)
		// sum_{l < 2^m} a^l = (1 - a^(2^m)) / (1 - a)
		sumL := new(big.Float).SetPrec(prec).Sub(one, pow(math.Ldexp(1, int(s.m))))
		sumL.Quo(sumL, new(big.Float).SetPrec(prec).Sub(one, a))
		check := func(k uint64) {
			var got *big.Float
			if k == 0 {
				got = new(big.Float).SetPrec(prec).Sub(one, th(0))
			} else {
				g := k - 1
				h, l := g>>s.m, g&s.lMask
				got = new(big.Float).SetPrec(prec).Sub(th(h), th(h+1))
				got.Mul(got, pow(float64(l)))
				got.Quo(got, sumL)
				got.SetMantExp(got, -1) // the sign: P(Z = k) = P(M = k)/2
			}
			want := new(big.Float).SetPrec(prec).Mul(c, pow(float64(k)))
			diff := new(big.Float).SetPrec(prec).Sub(got, want)
			diff.Quo(diff, want)
			if diff.Abs(diff).Cmp(big.NewFloat(1e-60)) > 0 {
				t.Errorf("scale %v: P(Z = %d) implied %v, want %v", scale, k, got, want)
			}
		}
		lm := uint64(1) << s.m
		for _, k := range []uint64{0, 1, 2, 3, lm, lm + 1, 2 * lm, 5*lm + 3, uint64(len(s.hi)-1)*lm + 1, uint64(len(s.hi)+4) * lm} {
			check(k)
		}
	}
}

// TestDLSlowPathsForced puts U's known bits on a threshold, so that the
// table search must draw more bits, and checks the frequency of each side
// against the threshold's exact position inside U's interval.
func TestDLSlowPathsForced(t *testing.T) {
	const n = 1000
	for _, scale := range []float64{1, 2.5, 1000, 1 << 20, 0x1p40} {
		d, _ := NewDiscreteLaplace(scale)
		s := d.s
		r := NewSeeded(31)
		for _, i := range []int{0, 1, len(s.hi) / 2} {
			if i >= len(s.hi) {
				continue
			}
			nn := 1 + math.Ldexp(float64(i), int(s.m))
			thv := mid(thresholdBig(nn, scale, 256))
			x := floor64(thv).Uint64() &^ s.xLow
			// Fraction of U's interval [x, x+xLow+1) 2^-64 at or above th.
			end := new(big.Float).SetPrec(256).SetUint64(x)
			end.Add(end, new(big.Float).SetUint64(s.xLow))
			end.Add(end, big.NewFloat(1))
			above := new(big.Float).SetPrec(256).Sub(end, new(big.Float).SetMantExp(thv, 64))
			above.Quo(above, new(big.Float).SetPrec(256).Add(new(big.Float).SetUint64(s.xLow), big.NewFloat(1)))
			pAbove, _ := above.Float64()
			next := uint64(0)
			if i+1 < len(s.hi) {
				next = s.hi[i+1]
			}
			if next >= x {
				t.Fatalf("scale %v: threshold %d+1 inside the forced interval", scale, i)
			}
			j, undecided := s.search(x)
			if j != i || !undecided {
				t.Fatalf("scale %v threshold %d: search of the forced word gives %d, undecided %v", scale, i, j, undecided)
			}
			var atI int
			for range n {
				switch s.searchSlow(r, x, j) {
				case i:
					atI++
				case i + 1:
				default:
					t.Fatalf("scale %v threshold %d: forced search is neither side", scale, i)
				}
			}
			sd := math.Sqrt(pAbove * (1 - pAbove) / n)
			if got := float64(atI) / n; math.Abs(got-pAbove) > 5*sd+1.0/n {
				t.Errorf("scale %v threshold %d: U >= th in %.4f of forced draws, want %.4f ± %.4f", scale, i, got, pAbove, 5*sd)
			}
		}
	}
}

// TestDLAcceptForced puts u's known bits on exp(-l/t), so that L's
// acceptance must go past the quick tables and the float64 test to the
// arbitrary-precision one, and checks the acceptance frequency.
func TestDLAcceptForced(t *testing.T) {
	const n = 2000
	for _, scale := range []float64{1000, 1 << 20, 0x1p40} {
		d, _ := NewDiscreteLaplace(scale)
		s := d.s
		r := NewSeeded(37)
		for _, l := range []uint64{1, min(77, s.lMask-1), s.lMask} {
			p := mid(expBig(float64(l), scale, 256))
			low := uint64(math.MaxUint64) >> s.ub
			u := floor64(p).Uint64() &^ low
			if lo, hi := expBoundsU64(float64(l), scale); !(u|low >= lo && u <= hi) {
				t.Fatalf("scale %v l %d: the float64 test would decide", scale, l)
			}
			below := new(big.Float).SetPrec(256).Sub(new(big.Float).SetMantExp(p, 64), new(big.Float).SetUint64(u))
			below.Quo(below, new(big.Float).SetPrec(256).Add(new(big.Float).SetUint64(low), big.NewFloat(1)))
			pBelow, _ := below.Float64()
			acc := 0
			for range n {
				if s.acceptLow(r, l, u, s.ub) {
					acc++
				}
			}
			sd := math.Sqrt(pBelow * (1 - pBelow) / n)
			if got := float64(acc) / n; math.Abs(got-pBelow) > 5*sd+1.0/n {
				t.Errorf("scale %v l %d: accepted %.4f of forced draws, want %.4f ± %.4f", scale, l, got, pBelow, 5*sd)
			}
		}
	}
}

// TestLazyULess checks that the exact comparison stops only when U's known
// interval lies on one side of the value, and answers for that side.
func TestLazyULess(t *testing.T) {
	r := NewSeeded(41)
	for _, x := range []float64{0.75, 0.001, 3, 40} {
		lo, hi := expBig(x, 1, 300)
		p := mid(lo, hi)
		w := floor64(p).Uint64()
		for range 50 {
			u := newLazyU(w, 64)
			got := u.less(r, func(prec uint) (*big.Float, *big.Float) { return expBig(x, 1, prec) })
			if u.k <= 64 {
				t.Fatalf("exp(-%v): decided without drawing bits", x)
			}
			b := new(big.Float).SetPrec(uint(u.k+64)).Add(u.a, pow2(-u.k))
			if got && b.Cmp(p) > 0 || !got && u.a.Cmp(p) < 0 {
				t.Fatalf("exp(-%v): answer %v but U's interval [%v, %v) is not on that side", x, got, u.a, b)
			}
		}
	}
}

// dlCDF returns P(Z <= z) of the discrete Laplace distribution with scale t.
func dlCDF(t float64, z int64) float64 {
	a := math.Exp(-1 / t)
	if z < 0 {
		return math.Exp(float64(z)/t) / (1 + a)
	}
	return 1 - math.Exp(-float64(z+1)/t)/(1+a)
}

// TestDiscreteLaplaceFitAllScales tests samples at scales from 1 to 2^40
// against the exact distribution: chi-square on about 50 bins of equal
// probability, Kolmogorov-Smirnov, and chi-square of Z mod 64, whose exact
// law is (1-a)/(1+a) (a^r + a^(64-r)) / (1-a^64), which probes the low bits.
func TestDiscreteLaplaceFitAllScales(t *testing.T) {
	const n = 200_000
	for si, scale := range []float64{1, 2.5, 60, 1000, 4095, 1 << 20, 1<<24 - 1, 1 << 30, 0x1p40} {
		d, _ := NewDiscreteLaplace(scale)
		r := NewSeeded(uint64(100 + si))
		zs := make([]int64, n)
		for i := range zs {
			zs[i] = d.Sample(r)
		}
		slices.Sort(zs)

		// Bin edges where the CDF crosses k/50, deduplicated.
		var edges []int64 // bin k is (edges[k-1], edges[k]]
		for k := 1; k < 50; k++ {
			q := float64(k) / 50
			z := int64(math.Floor(-scale * math.Log(2*(1-q)*1.0)))
			if q < 0.5 {
				z = int64(math.Floor(scale * math.Log(2*q)))
			}
			if len(edges) == 0 || z > edges[len(edges)-1] {
				edges = append(edges, z)
			}
		}
		checkFit(t, fmt.Sprintf("scale %v", scale), zs, edges, func(z int64) float64 { return dlCDF(scale, z) })

		const K = 64
		var counts [K]int
		for _, z := range zs {
			counts[((z%K)+K)%K]++
		}
		c := math.Tanh(0.5 / scale)
		den := -math.Expm1(-K / scale)
		var stat float64
		for rr := range K {
			p := c * (math.Exp(-float64(rr)/scale) + math.Exp(-float64(K-rr)/scale)) / den
			e := p * n
			stat += (float64(counts[rr]) - e) * (float64(counts[rr]) - e) / e
		}
		if crit := (distuv.ChiSquared{K: K - 1}).Quantile(1 - 1e-4); stat > crit {
			t.Errorf("scale %v: chi-square of Z mod %d %.1f > %.1f", scale, K, stat, crit)
		}
	}
}

// TestDLQuickAccept checks L's quick test where it is tightest: at the
// largest accepted u's upper bound, the whole interval of u lies below
// exp(-l/t) (computed to 256 bits), and one more is refused.
func TestDLQuickAccept(t *testing.T) {
	for _, scale := range []float64{64, 1000, 1 << 20, 1 << 23, 1 << 24, 0x1p40} {
		d, _ := NewDiscreteLaplace(scale)
		s := d.s
		r := NewSeeded(3)
		for _, l := range []uint64{0, 1, 2, s.lMask / 2, s.lMask, r.Uint64() & s.lMask} {
			uHi := -(l * s.perL) - 1 // 2^64 - l perL - 1
			if !s.quickAccept(l, uHi) || l > 0 && s.quickAccept(l, uHi+1) {
				t.Fatalf("scale %v l %d: quick test not at its boundary", scale, l)
			}
			end := new(big.Float).SetPrec(256).SetUint64(uHi)
			end.Add(end, big.NewFloat(1))
			end.SetMantExp(end, -64)
			if lo, _ := expBig(float64(l), scale, 256); l > 0 && end.Cmp(lo) > 0 {
				t.Fatalf("scale %v l %d: accepts u up to %v, not below exp(-l/t)", scale, l, end)
			}
		}
	}
}

// TestGuideMatchesBinarySearch checks the one-pass guide against a binary
// search per bucket (the definition: the first threshold below the
// bucket's bound), at scales on both sides of every change of layout.
func TestGuideMatchesBinarySearch(t *testing.T) {
	for _, scale := range []float64{0.01, 1, 2.5, 63.9, 64, 100, 1000, 12345.6, 1 << 20, 1<<24 - 1, 1 << 24, 1 << 30, 0x1p40} {
		s := newDLSampler(scale)
		n := len(s.hi)
		for b := range s.guide {
			up, end := uint64(math.MaxUint64), bucketEnd(b)
			if end < 1<<53 {
				if u, c := bits.Add64((end<<11-1)|s.xLow, 1, 0); c == 0 {
					up = u
				}
			}
			g := sort.Search(n, func(i int) bool { return s.lo[i] < up })
			if want := (guideEntry{lo0: s.lo[g], lo1: s.lo[g+1], g: g}); s.guide[b] != want {
				t.Fatalf("scale %v bucket %d: %+v, want %+v", scale, b, s.guide[b], want)
			}
		}
	}
}

// TestHalfWords: the half-word samples take the upper half of a word, then
// its lower half, each in the upper half of w with the lower half 0, and a
// sampler in between (Uint64) does not disturb the order.
func TestHalfWords(t *testing.T) {
	a, b := NewSeeded(5), NewSeeded(5)
	for range 1000 {
		w := a.Uint64()
		hi := b.splitWord()
		if !b.hasSpare || b.spare != w<<32 || hi != w&^(1<<32-1) {
			t.Fatalf("word %#x split into %#x and %#x", w, hi, b.spare)
		}
		b.hasSpare = false
		if a.Uint64() != b.Uint64() {
			t.Fatal("a half-word draw moved the stream")
		}
	}
	// A half-word sampler leaves the spare for the next half-word sample.
	d, _ := NewDiscreteLaplace(10)
	r := NewSeeded(6)
	d.Sample(r)
	if !r.hasSpare {
		t.Fatal("no spare half after one sample")
	}
	d.Sample(r)
	if r.hasSpare {
		t.Fatal("the spare half was not used by the second sample")
	}
}
