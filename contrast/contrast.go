// Package contrast measures ResidualPlanner's residuals with exact noise:
// the Helmert contrasts of a marginal A, R_A = ⊗_{i∈A} H_i applied to the
// A-marginal of the data, where H_i's rows k = 1, ..., n_i - 1 are
//
//	h_k = (e_0 + ... + e_{k-1} - k e_k) / sqrt(k (k+1)),
//
// orthonormal contrasts. Row j = (k_i)_{i∈A} of R_A is u_j / sqrt(Q_j),
// with u_j the product of the unnormalised integer rows and Q_j =
// Π_{i∈A} k_i (k_i + 1) an integer, so its exact value on integer counts is
// a_j / sqrt(Q_j), a_j an integer computed exactly.
//
// The noise must be exact and safe in floating point. On the grid g (a
// power of two, noise.NewGaussianSigma) the value a_j / sqrt(Q_j) is
// rounded half up to k_j = round(a_j / (g sqrt(Q_j))) EXACTLY (integer
// comparisons of squares where a float64 quotient cannot decide), clamped
// to ±2^62, and released as g (k_j + Z_j) with Z_j iid discrete Gaussian of
// sigma σ/g in grid units. Two inputs give k and k' with |k_j - k'_j| <=
// |r_j - r'_j| + 1 for the coordinates whose exact value r_j (in grid
// units) moves, and 0 for the others (rounding and clamping are monotone
// and exact), so ||k - k'|| <= Δ2/g + sqrt(rows) with Δ2 the L2
// sensitivity of R_A (sensitivity.TermL2Sensitivity): the release is
// ρ-zCDP with ρ = (Δ2 + g sqrt(rows))² / (2σ²). The grid is chosen with
// g sqrt(rows) <= 2^-30 Δ2 (unless the noise is so large that the grid
// must be coarser, at most 2^-38 of σ), and σ is calibrated to Δ2 (1 +
// 2^-30) + g sqrt(rows), the factor covering the floating-point evaluation
// of Δ2: the noise's variance is that of the closed form to about 1e-9.
//
// The release is the normalised contrasts z_j = g (k_j + Z_j), whose noise
// is iid of variance g² Var Z_j (σ², to float64 precision): the GLS weight
// of the measurement on residual A is 1/(σ² |A|), as for a marginal A of
// per-cell variance σ², and H_Aᵀ z (PseudoMarginal) is the measurement's
// contribution to A's residual.
package contrast

import (
	"context"
	"fmt"
	"math"
	"math/big"

	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/query"
)

// SensitivityMargin is the relative margin on a measurement's sensitivity
// for the floating-point evaluation of its closed form: the noise is
// calibrated to the sensitivity times 1 + SensitivityMargin.
const SensitivityMargin = 0x1p-30

// maxSteps clamps the rounded contrasts (in grid steps): far
// beyond any count, and k + Z stays within int64.
const maxSteps = 1 << 62

// Noise is the calibrated noise of one residual measurement: the contrasts
// of a marginal of one shape, at one L2 sensitivity and one share of rho.
type Noise struct {
	g     noise.Gaussian
	shape []int // the sizes of A's dimensions, in order
	rows  int
	l2    float64 // the L2 sensitivity it is calibrated to
	rho   float64 // the share of rho it spends (the guarantee, proved)
}

// NewNoise calibrates the noise of the residual of a marginal of the given
// shape (every size >= 2) to L2 sensitivity l2 and share rho (package
// comment): the release is rho-zCDP, the grid's rounding counted.
func NewNoise(shape []int, l2, rho float64) (Noise, error) {
	if !(l2 > 0) || math.IsInf(l2, 0) {
		return Noise{}, fmt.Errorf("residual measurement: L2 sensitivity must be finite and > 0, got %v", l2)
	}
	if !(rho > 0) || math.IsInf(rho, 0) {
		return Noise{}, fmt.Errorf("residual measurement: rho must be finite and > 0, got %v", rho)
	}
	rows := 1
	for _, n := range shape {
		if n < 2 {
			return Noise{}, fmt.Errorf("residual measurement: a dimension of %d values has no contrast", n)
		}
		rows *= n - 1
	}
	// The grid: fine enough that the rounding costs at most 2^-30 of the
	// sensitivity (g sqrt(rows) <= 2^-30 l2), but no finer than 2^-38 of the
	// noise, which the discrete Gaussian's range (MaxSigma grid steps)
	// needs; NewGaussianSigma's grid is at most 2^-20 of the resolution.
	sq := math.Sqrt(float64(rows))
	res := max(l2*0x1p-10/sq, l2/math.Sqrt(2*rho)*0x1p-18)
	gmax := res * 0x1p-20
	sigma := (l2*(1+SensitivityMargin) + gmax*sq) / math.Sqrt(2*rho)
	g, err := noise.NewGaussianSigma(sigma, res)
	if err != nil {
		return Noise{}, fmt.Errorf("residual measurement: %w", err)
	}
	// The guarantee with the grid actually chosen (package comment).
	eff := l2*(1+SensitivityMargin) + g.Grid()*math.Sqrt(float64(rows))
	if got := eff * eff / (2 * g.Sigma() * g.Sigma()); got > rho*(1+1e-12) {
		return Noise{}, fmt.Errorf("residual measurement: internal: the calibrated noise spends rho %v > %v", got, rho)
	}
	return Noise{g: g, shape: append([]int(nil), shape...), rows: rows, l2: l2, rho: rho}, nil
}

// Sigma is the noise's standard deviation on every normalised contrast.
func (rn Noise) Sigma() float64 { return rn.g.Sigma() }

// Variance is the noise's exact variance on every normalised contrast.
func (rn Noise) Variance() float64 { return rn.g.Variance() }

// Grid is the grid g of the released contrasts (a power of two).
func (rn Noise) Grid() float64 { return rn.g.Grid() }

// Rows is the number of contrasts, Π (n_i - 1).
func (rn Noise) Rows() int { return rn.rows }

// Measure returns the noisy normalised contrasts of the marginal m (the
// A-marginal's counts, row-major over A's dimensions), row-major over the
// rows k_i - 1 of each dimension, drawing the noise from r. It fails only
// when m has not the shape's number of cells, or with ctx's error.
func (rn Noise) Measure(ctx context.Context, m []float64, r *noise.Rand) ([]float64, error) {
	size := 1
	for _, n := range rn.shape {
		size *= n
	}
	if len(m) != size {
		return nil, fmt.Errorf("residual measurement: %d counts for %d cells", len(m), size)
	}
	a := unnormalisedContrasts(m, rn.shape)
	grid := rn.g.Grid()
	dg := rn.g.Dist()
	out := make([]float64, rn.rows)
	idx := make([]int, len(rn.shape)) // k_i - 1 per dimension
	for j := range out {
		if j%4096 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		q := big.NewInt(1)
		for _, k := range idx {
			kk := int64(k + 1)
			q.Mul(q, big.NewInt(kk*(kk+1)))
		}
		k := roundContrast(a[j], q, grid)
		z := dg.Sample(r)
		out[j] = float64(k+z) * grid
		for i := len(idx) - 1; i >= 0; i-- {
			idx[i]++
			if idx[i] < rn.shape[i]-1 {
				break
			}
			idx[i] = 0
		}
	}
	return out, nil
}

// unnormalisedContrasts returns a_j = (⊗ u_i) m exactly, u_i's rows being
// e_0 + ... + e_{k-1} - k e_k (k = 1..n-1), as big integers only where
// float64 could round: the counts are integers, and |a_j| <= max|m| Π 2(n_i
// - 1).
func unnormalisedContrasts(m []float64, shape []int) []*big.Int {
	bound := 0.0
	for _, v := range m {
		bound = max(bound, math.Abs(v))
	}
	for _, n := range shape {
		bound *= 2 * float64(n-1)
	}
	if bound < 1<<53 && isIntegral(m) {
		cur := append([]float64(nil), m...)
		sizes := append([]int(nil), shape...)
		for d, n := range shape {
			cur = axisApply(cur, sizes, d, n-1, func(in, out []float64) {
				var s float64
				for k := 1; k < n; k++ {
					s += in[k-1]
					out[k-1] = s - float64(k)*in[k]
				}
			})
			sizes[d] = n - 1
		}
		out := make([]*big.Int, len(cur))
		for j, v := range cur {
			out[j] = big.NewInt(int64(v))
		}
		return out
	}
	// Exact integers whatever the counts' size (a count that is not an
	// integer is rounded half up first: counts are integers).
	cur := make([]*big.Int, len(m))
	for j, v := range m {
		f := new(big.Float).SetFloat64(roundHalf(v))
		cur[j], _ = f.Int(nil)
	}
	sizes := append([]int(nil), shape...)
	for d, n := range shape {
		outer, inner := 1, 1
		for _, s := range sizes[:d] {
			outer *= s
		}
		for _, s := range sizes[d+1:] {
			inner *= s
		}
		next := make([]*big.Int, outer*(n-1)*inner)
		for o := range outer {
			for i := range inner {
				s := new(big.Int)
				for k := 1; k < n; k++ {
					s.Add(s, cur[(o*n+k-1)*inner+i])
					v := new(big.Int).Mul(big.NewInt(int64(k)), cur[(o*n+k)*inner+i])
					next[(o*(n-1)+k-1)*inner+i] = v.Sub(new(big.Int).Set(s), v)
				}
			}
		}
		cur = next
		sizes[d] = n - 1
	}
	return cur
}

// isIntegral reports whether every value is an integer.
func isIntegral(m []float64) bool {
	for _, v := range m {
		if v != math.Trunc(v) {
			return false
		}
	}
	return true
}

// roundHalf rounds half up; values that are not finite become 0.
func roundHalf(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return math.Floor(v + 0.5)
}

// axisApply applies op along axis d of x (row-major of sizes), whose length
// changes from sizes[d] to out.
func axisApply(x []float64, sizes []int, d, out int, op func(in, out []float64)) []float64 {
	outer, inner := 1, 1
	for _, n := range sizes[:d] {
		outer *= n
	}
	for _, n := range sizes[d+1:] {
		inner *= n
	}
	n := sizes[d]
	y := make([]float64, outer*out*inner)
	in := make([]float64, n)
	res := make([]float64, out)
	for o := range outer {
		for i := range inner {
			for k := range n {
				in[k] = x[(o*n+k)*inner+i]
			}
			op(in, res)
			for k := range out {
				y[(o*out+k)*inner+i] = res[k]
			}
		}
	}
	return y
}

// roundContrast returns round half up of a / (grid sqrt(q)), exactly,
// clamped to ±maxSteps.
func roundContrast(a, q *big.Int, grid float64) int64 {
	// Fast path: a float64 quotient whose fraction is far from 1/2.
	if a.IsInt64() && q.IsInt64() {
		av, qv := a.Int64(), q.Int64()
		if max(av, -av) < 1<<53 && qv < 1<<53 {
			rf := float64(av) / grid / math.Sqrt(float64(qv))
			if math.Abs(rf) < 1<<52 {
				fl := math.Floor(rf)
				f := rf - fl
				// rf is within 3 roundings (2^-52 relative) of the exact
				// value: beyond |rf| 2^-50 of the tie, the rounding of rf
				// is the rounding of the exact value.
				if math.Abs(f-0.5) > math.Abs(rf)*0x1p-50+0x1p-60 {
					k := int64(fl)
					if f > 0.5 {
						k++
					}
					return k
				}
			}
		}
	}
	// Exact: X = a / grid (a rational), k is the integer with
	// (2k - 1) sqrt(q) <= 2X < (2k + 1) sqrt(q).
	x := new(big.Rat).SetFrac(new(big.Int).Lsh(a, 1), big.NewInt(1))
	gr := new(big.Rat).SetFloat64(grid)
	x.Quo(x, gr) // 2X
	// A first guess from float64, then exact steps.
	xf, _ := x.Float64()
	qf, _ := new(big.Float).SetInt(q).Float64()
	guess := math.Floor(xf/(2*math.Sqrt(qf)) + 0.5)
	if math.IsNaN(guess) {
		guess = 0
	}
	guess = max(min(guess, maxSteps), -maxSteps)
	k := big.NewInt(int64(guess))
	lim := big.NewInt(maxSteps)
	for range 1 << 20 {
		lo := new(big.Int).Sub(new(big.Int).Lsh(k, 1), big.NewInt(1))
		hi := new(big.Int).Add(new(big.Int).Lsh(k, 1), big.NewInt(1))
		switch {
		case cmpSqrt(lo, q, x) > 0:
			k.Sub(k, big.NewInt(1))
		case cmpSqrt(hi, q, x) <= 0:
			k.Add(k, big.NewInt(1))
		default:
			return clampSteps(k, lim)
		}
		if k.CmpAbs(lim) > 0 {
			return clampSteps(k, lim)
		}
	}
	return clampSteps(k, lim)
}

// clampSteps returns k clamped to ±lim.
func clampSteps(k, lim *big.Int) int64 {
	switch {
	case k.Cmp(lim) > 0:
		return lim.Int64()
	case k.Cmp(new(big.Int).Neg(lim)) < 0:
		return -lim.Int64()
	}
	return k.Int64()
}

// cmpSqrt returns the sign of t sqrt(q) - y, exactly (q >= 1).
func cmpSqrt(t, q *big.Int, y *big.Rat) int {
	st, sy := t.Sign(), y.Sign()
	if st != sy {
		switch {
		case st > sy:
			return 1
		default:
			return -1
		}
	}
	if st == 0 {
		return 0
	}
	// Same sign: compare t² q with y².
	lhs := new(big.Rat).SetInt(new(big.Int).Mul(new(big.Int).Mul(t, t), q))
	rhs := new(big.Rat).Mul(y, y)
	c := lhs.Cmp(rhs)
	if st < 0 {
		return -c
	}
	return c
}

// PseudoMarginal returns H_Aᵀ z for the released contrasts z of a marginal
// A of the given shape: the measurement's contribution to
// the A-residual of the table, an |A|-cell table over A's dimensions whose
// lower residuals are zero.
func PseudoMarginal(z []float64, shape []int) []float64 {
	t := make(query.Term, len(shape))
	for i, n := range shape {
		t[i] = query.NewResidual(n)
	}
	return t.ApplyT(z)
}
