package noise

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// poissonSums returns the normaliser and variance of N_Z(0, s^2) by the
// Poisson summation formula with its first terms: an independent
// computation for small s, where the direct series is what Variance sums.
func poissonSums(s float64) (norm, variance float64) {
	var a, b float64
	for k := 1.0; k <= 4; k++ {
		q := math.Exp(-2 * math.Pi * math.Pi * s * s * k * k)
		a += q
		b += (1 - 4*math.Pi*math.Pi*s*s*k*k) * q
	}
	return s * math.Sqrt(2*math.Pi) * (1 + 2*a), s * s * (1 + 2*b) / (1 + 2*a)
}

func TestDiscreteGaussianVarianceAndNorm(t *testing.T) {
	// Four Poisson terms reach float64 precision for sigma >= 1/2.
	for _, s := range []float64{0.5, 0.8, 1, 1.7, 3, 20, 64, 65, 1000, 1 << 20} {
		g, err := NewDiscreteGaussian(s)
		if err != nil {
			t.Fatal(err)
		}
		norm, v := poissonSums(s)
		if got := g.Variance(); math.Abs(got-v) > 1e-14*v {
			t.Errorf("sigma %v: variance %v, Poisson summation %v", s, got, v)
		}
		if got := math.Exp(g.logNorm); math.Abs(got-norm) > 1e-13*norm {
			t.Errorf("sigma %v: normaliser %v, Poisson summation %v", s, got, norm)
		}
		if s <= 64 {
			var sum float64
			for z := int64(-50 * s); z <= int64(50*s); z++ {
				sum += g.Prob(z)
			}
			if math.Abs(sum-1) > 1e-13 {
				t.Errorf("sigma %v: probabilities sum to %v", s, sum)
			}
		}
	}
	// For small sigma the variance is visibly below sigma^2: at sigma = 0.5,
	// 2(e^-2 + 4 e^-8 + ...)/(1 + 2(e^-2 + e^-8 + ...)).
	g, _ := NewDiscreteGaussian(0.5)
	num := 2 * (math.Exp(-2) + 4*math.Exp(-8) + 9*math.Exp(-18) + 16*math.Exp(-32))
	den := 1 + 2*(math.Exp(-2)+math.Exp(-8)+math.Exp(-18)+math.Exp(-32))
	if got := g.Variance(); math.Abs(got-num/den) > 1e-15 {
		t.Errorf("sigma 0.5: variance %v, want %v", got, num/den)
	}
}

// dgCDF returns P(Z <= z) for N_Z(0, s^2): by summation for s <= 200, else
// Phi((z + 1/2)/s), whose error is far below float64 resolution there.
func dgCDF(g DiscreteGaussian, z int64) float64 {
	s := g.Sigma()
	if s > 200 {
		return 0.5 * math.Erfc(-(float64(z)+0.5)/s/math.Sqrt2)
	}
	var c float64
	for k := int64(-40*s) - 2; k <= z; k++ {
		c += g.Prob(k)
	}
	return min(c, 1)
}

func TestDiscreteGaussianGoodnessOfFit(t *testing.T) {
	const n = 100_000
	for si, s := range []float64{0.3, 1, 2.5, 30, 1000, 1 << 20} {
		g, _ := NewDiscreteGaussian(s)
		r := NewSeeded(uint64(200 + si))
		zs := make([]int64, n)
		var sum, sumSq float64
		for i := range zs {
			zs[i] = g.Sample(r)
			f := float64(zs[i])
			sum += f
			sumSq += f * f
		}
		v := g.Variance()
		if m := sum / n; math.Abs(m) > 5*math.Sqrt(v/n) {
			t.Errorf("sigma %v: mean %v", s, m)
		}
		// Var(Z^2) <= E Z^4 <= 3 sigma^4 + sigma^2 for the discrete Gaussian.
		if got := sumSq / n; math.Abs(got-v) > 5*math.Sqrt((3*s*s*s*s+s*s)/n) {
			t.Errorf("sigma %v: sample variance %v, want %v", s, got, v)
		}
		slices.Sort(zs)
		// Chi-square on bins of about equal probability (edges from the
		// normal quantiles), with exact probabilities from the CDF.
		var edges []int64
		for k := 1; k < 40; k++ {
			q := distuv.UnitNormal.Quantile(float64(k) / 40)
			z := int64(math.Floor(q * s))
			if len(edges) == 0 || z > edges[len(edges)-1] {
				edges = append(edges, z)
			}
		}
		checkFit(t, fmt.Sprintf("sigma %v", s), zs, edges, func(z int64) float64 { return dgCDF(g, z) })
	}
}

// TestAcceptGaussForced puts the first word of the acceptance uniform on
// the acceptance probability, so that the exact path must decide, and
// checks the frequency of acceptance against the probability's exact
// position in the word's interval.
func TestAcceptGaussForced(t *testing.T) {
	const n = 2000
	r := NewSeeded(43)
	for _, tc := range []struct {
		s float64
		y int64
	}{{1, 0}, {1, 2}, {2.5, 3}, {30, 17}, {1000, 2500}, {1 << 20, 1 << 21}} {
		g, _ := NewDiscreteGaussian(tc.s)
		xr := g.exactExponent(tc.y)
		p := mid(expRat(xr, 256))
		w := floor64(p).Uint64()
		frac := new(big.Float).SetPrec(256).Sub(new(big.Float).SetMantExp(p, 64), new(big.Float).SetUint64(w))
		pBelow, _ := frac.Float64()
		acc := 0
		for range n {
			if g.acceptGaussWord(r, tc.y, w) {
				acc++
			}
		}
		sd := math.Sqrt(pBelow * (1 - pBelow) / n)
		if got := float64(acc) / n; math.Abs(got-pBelow) > 5*sd+1.0/n {
			t.Errorf("sigma %v y %d: accepted %.4f, want %.4f ± %.4f", tc.s, tc.y, got, pBelow, 5*sd)
		}
		// Words just off the boundary are decided by the fast path, the
		// right way.
		if !g.acceptGaussWord(nil, tc.y, w-1<<20) || g.acceptGaussWord(nil, tc.y, w+1<<20) {
			t.Errorf("sigma %v y %d: words 2^20 off the boundary decided wrongly", tc.s, tc.y)
		}
	}
	// Tiny sigma: |y| = 1 has acceptance exp(-2^39)-ish; a zero first word
	// goes to the exact path, which rejects once a non-zero word comes.
	g, _ := NewDiscreteGaussian(MinSigma)
	if g.acceptGaussWord(r, 1, 0) {
		t.Error("sigma 2^-20, y = 1 accepted")
	}
	if !g.acceptGaussWord(r, 0, 1<<63) { // acceptance 1 - 2^-41
		t.Error("sigma 2^-20, y = 0 rejected")
	}
}

// renyi returns D_alpha(P || Q) for P = N_Z(0, s^2) and Q = N_Z(mu, s^2)
// (the Gaussian shape centred at mu, on the integers), by summation in log
// space.
func renyi(s, mu, alpha float64) float64 {
	R := int64(math.Abs(mu) + 60*s*math.Sqrt(alpha) + 10)
	logsum := func(f func(z float64) float64) float64 {
		m := math.Inf(-1)
		for z := -R; z <= R; z++ {
			m = max(m, f(float64(z)))
		}
		var acc float64
		for z := -R; z <= R; z++ {
			acc += math.Exp(f(float64(z)) - m)
		}
		return m + math.Log(acc)
	}
	lp := func(z float64) float64 { return -z * z / (2 * s * s) }
	lq := func(z float64) float64 { return -(z - mu) * (z - mu) / (2 * s * s) }
	np, nq := logsum(lp), logsum(lq)
	l := logsum(func(z float64) float64 { return alpha*(lp(z)-np) + (1-alpha)*(lq(z)-nq) })
	return l / (alpha - 1)
}

// TestDiscreteGaussianRenyi checks the zCDP guarantee by summation:
// D_alpha(N_Z(0,s^2) || N_Z(D,s^2)) <= alpha D^2/(2 s^2), with equality
// when (alpha-1) D is an integer. (Completing the square, the sum is
// exp(alpha(alpha-1)D^2/(2s^2)) times a theta function shifted by
// (alpha-1)D over the unshifted one, which is at most 1 and equals 1 for
// integer shifts; CKS Proposition 6.)
func TestDiscreteGaussianRenyi(t *testing.T) {
	for _, s := range []float64{0.7, 1, 3, 10} {
		g, _ := NewDiscreteGaussian(s)
		for _, alpha := range []float64{1.5, 2, 4, 8, 32} {
			for _, D := range []float64{1, 2, 3, 0.5, 1.3} {
				got := renyi(s, D, alpha)
				want := alpha * g.Rho(D)
				if sh := (alpha - 1) * D; sh == math.Trunc(sh) && math.Abs(got-want) > 1e-9*want {
					t.Errorf("sigma %v alpha %v D %v: D_alpha %v, want %v", s, alpha, D, got, want)
				}
				if got > want*(1+1e-9) {
					t.Errorf("sigma %v alpha %v D %v: D_alpha %v above alpha rho %v", s, alpha, D, got, want)
				}
			}
		}
	}
}

func TestGaussianGridCalibration(t *testing.T) {
	for _, tc := range []struct{ sens, rho float64 }{{1, 0.5}, {1, 0.01}, {2, 2}, {0.37, 0.1}, {3, 1e-4}, {1e-200, 1}} {
		g, err := NewGaussian(tc.sens, tc.rho)
		if err != nil {
			t.Fatal(err)
		}
		grid := g.Grid()
		if frac, _ := math.Frexp(grid); frac != 0.5 {
			t.Errorf("grid %v is not a power of two", grid)
		}
		sigma := tc.sens / math.Sqrt(2*tc.rho)
		if m := min(tc.sens, sigma); grid > m*0x1p-20 || grid <= m*0x1p-21 {
			t.Errorf("grid %v not in (m 2^-21, m 2^-20] for m = %v", grid, m)
		}
		// Exactly: steps^2 / (2 sigma_g^2) <= rho, with steps = ceil(sens/grid).
		steps := math.Ceil(tc.sens / grid)
		sg := new(big.Float).SetPrec(300).SetFloat64(g.Dist().Sigma())
		lhs := new(big.Float).SetPrec(300).SetFloat64(steps)
		lhs.Mul(lhs, lhs)
		rhs := new(big.Float).SetPrec(300).Mul(sg, sg)
		rhs.Mul(rhs, new(big.Float).SetFloat64(2*tc.rho)) // 2 rho is exact
		if lhs.Cmp(rhs) > 0 {
			t.Errorf("sens %v rho %v: steps^2 > 2 rho sigma_g^2", tc.sens, tc.rho)
		}
		if got := g.Rho(tc.sens); got > tc.rho*(1-0x1p-40) || got < tc.rho*(1-1e-11) {
			t.Errorf("sens %v rho %v: Rho(sensitivity) = %v", tc.sens, tc.rho, got)
		}
		if rel := g.Sigma()/sigma - 1; rel < 0 || rel > 0x1p-19 {
			t.Errorf("sigma %v is not within 2^-19 above %v", g.Sigma(), sigma)
		}
		if v := g.Variance(); math.Abs(v/(g.Sigma()*g.Sigma())-1) > 1e-12 {
			t.Errorf("variance %v, sigma^2 %v", v, g.Sigma()*g.Sigma())
		}
		// Rho is ceil(d/grid) steps, on or off the grid.
		if got, want := g.Rho(2.5*grid), g.Dist().Rho(3); got != want {
			t.Errorf("Rho(2.5 grid) = %v, want %v", got, want)
		}
		r := NewSeeded(3)
		for range 200 {
			x := (float64(r.Uint64()>>11)*0x1p-53 - 0.5) * 1e3 * tc.sens
			y, err := g.Add(r, x)
			if err != nil {
				t.Fatal(err)
			}
			if q := y / grid; q != math.Trunc(q) {
				t.Fatalf("output %v not a multiple of grid %v", y, grid)
			}
		}
	}
	g, err := NewGaussianSigma(3, 1)
	if err != nil || g.Sigma() != 3 || g.Grid() != 0x1p-20 {
		t.Errorf("NewGaussianSigma(3, 1): sigma %v grid %v err %v", g.Sigma(), g.Grid(), err)
	}
	if g.Round(17) != 17 {
		t.Error("integer input moved")
	}
}

func TestGaussianRejectsBadInput(t *testing.T) {
	for _, s := range []float64{0, -1, math.NaN(), math.Inf(1), 1e-7, 0x1p40} {
		if _, err := NewDiscreteGaussian(s); err == nil || !strings.Contains(err.Error(), "sigma") {
			t.Errorf("NewDiscreteGaussian(%v): %v", s, err)
		}
	}
	for _, tc := range []struct {
		sens, rho float64
		name      string
	}{
		{0, 1, "sensitivity"}, {-1, 1, "sensitivity"}, {math.NaN(), 1, "sensitivity"}, {1, 0, "rho"},
		{1, math.Inf(1), "rho"}, {1e-303, 1, "L2 sensitivity"}, {1e-250, 1e200, "sigma"}, {1, 1e-30, "rho is too small"},
		{1e-272, 1, "L2 sensitivity"}, {0x1p-400, 0x1p1001, "sigma"},
	} {
		if _, err := NewGaussian(tc.sens, tc.rho); err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("NewGaussian(%v, %v): %v, want an error naming %q", tc.sens, tc.rho, err, tc.name)
		}
	}
	for _, tc := range []struct{ s, res float64 }{{0, 1}, {1, 0}, {math.NaN(), 1}, {1, math.Inf(1)}, {1e-303, 1}, {1e-272, 1}, {1, 1e-272}} {
		if _, err := NewGaussianSigma(tc.s, tc.res); err == nil {
			t.Errorf("NewGaussianSigma(%v, %v) accepted", tc.s, tc.res)
		}
	}
}

// TestGaussianNoErrorDependsOnValue is TestNoErrorDependsOnValue for the
// grid discrete Gaussian.
func TestGaussianNoErrorDependsOnValue(t *testing.T) {
	for _, p := range []struct{ s, rho float64 }{{1, 0.5}, {1e-270, 1}, {minGridParam, 0.5}, {0x1p-400, 0x1p999}, {1e290, 1}} {
		g, err := NewGaussian(p.s, p.rho)
		if err != nil {
			t.Fatal(err)
		}
		if want := min(0x1p1000*g.Grid(), 0x1p1000); g.Range() != want || g.Range() < MinRange {
			t.Errorf("grid %g: Range() = %g, want %g and at least MinRange", g.Grid(), g.Range(), want)
		}
		xs := append([]float64(nil), valueTable...)
		if err := g.AddTo(NewSeeded(1), xs); err != nil {
			t.Fatal(err)
		}
		for i, x := range valueTable {
			y, err := g.Add(NewSeeded(uint64(i)), x)
			if err != nil {
				t.Fatalf("Add(%v): %v", x, err)
			}
			for _, out := range []float64{y, xs[i]} {
				k := out / g.Grid()
				if math.IsInf(out, 0) || math.IsNaN(out) || k != math.Trunc(k) {
					t.Fatalf("input %v gave %v", x, out)
				}
			}
			want := x
			switch {
			case x != x:
				want = 0
			case math.Abs(x) > g.Range():
				want = math.Copysign(g.Range(), x)
			}
			if yc, _ := g.Add(NewSeeded(uint64(i)), want); yc != y {
				t.Errorf("Add(%v) = %v, but Add(%v) = %v with the same seed", x, y, want, yc)
			}
		}
	}
}

// TestDiscreteGaussianAcceptTable checks the precomputed acceptance bounds
// against floor(p(y) 2^64) computed exactly from the rational exponent.
func TestDiscreteGaussianAcceptTable(t *testing.T) {
	for _, s := range []float64{MinSigma, 0.3, 1, 2.5, 17, 1000, 1 << 20} {
		g, _ := NewDiscreteGaussian(s)
		for y := range int64(gaussTab) {
			lo, hi := expRat(g.exactExponent(y), 256)
			f := floor64(mid(lo, hi))
			if f.Cmp(floor64(lo)) != 0 || f.Cmp(floor64(hi)) != 0 {
				t.Fatalf("sigma %v y %d: 256 bits do not fix floor(p 2^64)", s, y)
			}
			b := g.acc[y]
			if new(big.Int).SetUint64(b[0]).Cmp(f) > 0 || new(big.Int).SetUint64(b[1]).Cmp(f) < 0 {
				t.Fatalf("sigma %v y %d: floor(p 2^64) = %v outside [%d, %d]", s, y, f, b[0], b[1])
			}
		}
	}
}
