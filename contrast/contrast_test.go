package contrast

import (
	"context"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/noise"
)

// TestRoundContrast checks the exact rounding against big-float arithmetic
// at 512 bits on values near ties and far from them, on several grids.
func TestRoundContrast(t *testing.T) {
	r := noise.NewSeeded(3)
	ref := func(a, q *big.Int, grid float64) int64 {
		const prec = 512
		x := new(big.Float).SetPrec(prec).SetInt(a)
		x.Quo(x, new(big.Float).SetPrec(prec).SetFloat64(grid))
		sq := new(big.Float).SetPrec(prec).SetInt(q)
		sq.Sqrt(sq)
		x.Quo(x, sq)
		x.Add(x, big.NewFloat(0.5).SetPrec(prec))
		f, _ := x.Int(nil) // truncates toward zero
		if x.Sign() < 0 && !x.IsInt() {
			f.Sub(f, big.NewInt(1))
		}
		lim := big.NewInt(maxSteps)
		if f.CmpAbs(lim) > 0 {
			if f.Sign() > 0 {
				return maxSteps
			}
			return -maxSteps
		}
		return f.Int64()
	}
	cases := 0
	for _, grid := range []float64{1, 0.5, 0x1p-20, 0x1p-33, 4} {
		for range 2000 {
			q := big.NewInt(1)
			for range 1 + r.Uint64N(3) {
				k := int64(1 + r.Uint64N(30))
				q.Mul(q, big.NewInt(k*(k+1)))
			}
			a := big.NewInt(int64(r.Uint64N(1<<40)) - 1<<39)
			if r.Uint64N(2) == 0 {
				// Near a tie: a ≈ (m + 1/2) grid sqrt(q).
				m := float64(r.Uint64N(1 << 20))
				qf, _ := new(big.Float).SetInt(q).Float64()
				a = big.NewInt(int64(math.Round((m + 0.5) * grid * math.Sqrt(qf))))
			}
			cases++
			if got, want := roundContrast(a, q, grid), ref(a, q, grid); got != want {
				t.Fatalf("a %v, q %v, grid %v: %d, want %d", a, q, grid, got, want)
			}
		}
	}
	// Exact ties (q a perfect square): half up.
	for _, c := range []struct {
		a, q int64
		grid float64
		want int64
	}{
		{3, 4, 1, 2},   // 3/2 = 1.5 -> 2
		{-3, 4, 1, -1}, // -1.5 -> -1
		{5, 4, 0.5, 5}, // 5/(0.5*2) = 5
		{1, 4, 1, 1},   // 0.5 -> 1
	} {
		if got := roundContrast(big.NewInt(c.a), big.NewInt(c.q), c.grid); got != c.want {
			t.Errorf("round(%d/(%v sqrt %d)) = %d, want %d", c.a, c.grid, c.q, got, c.want)
		}
	}
	t.Logf("%d values", cases)
}

// TestUnnormalisedContrasts: the exact integer contrasts equal the dense
// unnormalised Helmert rows applied to the counts, on the float64 path and
// on the big-integer path (counts beyond 2^53 / Π 2(n_i - 1)).
func TestUnnormalisedContrasts(t *testing.T) {
	shape := []int{3, 4, 2}
	r := noise.NewSeeded(9)
	for _, scale := range []float64{100, 1 << 50} {
		m := make([]float64, 24)
		for i := range m {
			m[i] = math.Floor(float64(r.Uint64N(1<<53)) / (1 << 53) * scale)
		}
		got := unnormalisedContrasts(m, shape)
		// Dense: the Kronecker product of the integer rows.
		u := func(n int) [][]int64 {
			var rows [][]int64
			for k := 1; k < n; k++ {
				row := make([]int64, n)
				for i := range k {
					row[i] = 1
				}
				row[k] = int64(-k)
				rows = append(rows, row)
			}
			return rows
		}
		u0, u1, u2 := u(3), u(4), u(2)
		j := 0
		for _, r0 := range u0 {
			for _, r1 := range u1 {
				for _, r2 := range u2 {
					want := new(big.Int)
					for a := range 3 {
						for b := range 4 {
							for c := range 2 {
								coef := r0[a] * r1[b] * r2[c]
								v, _ := new(big.Float).SetFloat64(m[(a*4+b)*2+c]).Int(nil)
								want.Add(want, v.Mul(v, big.NewInt(coef)))
							}
						}
					}
					if got[j].Cmp(want) != 0 {
						t.Fatalf("scale %v, contrast %d: %v, want %v", scale, j, got[j], want)
					}
					j++
				}
			}
		}
	}
}

// TestNewNoiseGuarantee: the noise spends at most its share of rho with
// the grid's rounding counted (package comment), its variance is that of
// the closed form σ = Δ2/sqrt(2ρ) or a little more (to about 1e-9 where
// the grid is fine),
// and bad parameters are refused naming what is wrong.
func TestNewNoiseGuarantee(t *testing.T) {
	for _, tc := range []struct {
		shape   []int
		l2, rho float64
		tol     float64 // relative, of the variance
	}{
		{[]int{2}, 1, 0.5, 1e-8},
		{[]int{3, 4}, 1, 0.01, 1e-8},
		{[]int{5, 2, 7}, 2.5, 3, 1e-8},
		// Noise so large that the grid is 2^-38 of σ, coarser than 2^-30
		// of Δ2/sqrt(rows): its rounding costs 2^-38 sqrt(rows) σ, about
		// 2e-7 of σ here.
		{[]int{100, 50}, 1, 1e-6, 1e-6},
	} {
		rn, err := NewNoise(tc.shape, tc.l2, tc.rho)
		if err != nil {
			t.Fatal(err)
		}
		rows := 1
		for _, n := range tc.shape {
			rows *= n - 1
		}
		if rn.Rows() != rows {
			t.Errorf("%v: %d rows, want %d", tc.shape, rn.Rows(), rows)
		}
		eff := tc.l2*(1+SensitivityMargin) + rn.Grid()*math.Sqrt(float64(rows))
		if got := eff * eff / (2 * rn.Sigma() * rn.Sigma()); got > tc.rho*(1+1e-12) {
			t.Errorf("%v: spends rho %v > %v", tc.shape, got, tc.rho)
		}
		closed := tc.l2 * tc.l2 / (2 * tc.rho)
		if v := rn.Variance(); v < closed || v-closed > tc.tol*closed {
			t.Errorf("%v: variance %v, closed form %v", tc.shape, v, closed)
		}
		if g := rn.Grid(); math.Exp2(math.Round(math.Log2(g))) != g {
			t.Errorf("%v: grid %v is not a power of two", tc.shape, g)
		}
	}
	for _, tc := range []struct {
		shape   []int
		l2, rho float64
		want    string
	}{
		{[]int{1, 3}, 1, 1, "dimension of 1 values"},
		{[]int{3}, 0, 1, "L2 sensitivity"},
		{[]int{3}, math.Inf(1), 1, "L2 sensitivity"},
		{[]int{3}, 1, -1, "rho"},
	} {
		if _, err := NewNoise(tc.shape, tc.l2, tc.rho); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one naming %q", tc, err, tc.want)
		}
	}
}

// TestMeasureUnbiased: over seeded draws the released contrasts average to
// the exact normalised Helmert contrasts within 5 standard errors, their
// spread is sigma, and PseudoMarginal of the exact contrasts is the
// marginal less its mean (its residual on a one-dimensional marginal).
func TestMeasureUnbiased(t *testing.T) {
	m := []float64{4, 9, 1, 6}
	rn, err := NewNoise([]int{4}, 1, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	// h_k = (e_0 + ... + e_{k-1} - k e_k) / sqrt(k(k+1)).
	exact := make([]float64, 3)
	for k := 1; k < 4; k++ {
		var s float64
		for i := range k {
			s += m[i]
		}
		exact[k-1] = (s - float64(k)*m[k]) / math.Sqrt(float64(k*(k+1)))
	}
	const draws = 4000
	r := noise.NewSeeded(17)
	sum, sq := make([]float64, 3), make([]float64, 3)
	for range draws {
		z, err := rn.Measure(context.Background(), m, r)
		if err != nil {
			t.Fatal(err)
		}
		for j, v := range z {
			sum[j] += v
			sq[j] += (v - exact[j]) * (v - exact[j])
		}
	}
	se := rn.Sigma() / math.Sqrt(draws)
	for j := range exact {
		if mean := sum[j] / draws; math.Abs(mean-exact[j]) > 5*se+rn.Grid() {
			t.Errorf("contrast %d: mean %v, exact %v (se %v)", j, mean, exact[j], se)
		}
		// The sample variance's relative standard error is sqrt(2/draws).
		if v := sq[j] / draws; math.Abs(v/rn.Variance()-1) > 5*math.Sqrt(2.0/draws) {
			t.Errorf("contrast %d: variance %v, want %v", j, v, rn.Variance())
		}
	}
	pm := PseudoMarginal(exact, []int{4})
	mean := (4 + 9 + 1 + 6) / 4.0
	for i, v := range m {
		if math.Abs(pm[i]-(v-mean)) > 1e-12 {
			t.Errorf("PseudoMarginal: %v, want the marginal less its mean %v", pm, mean)
			break
		}
	}
	if _, err := rn.Measure(context.Background(), m[:3], r); err == nil {
		t.Error("three counts for four cells measured")
	}
}
