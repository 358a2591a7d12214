package tensor

import (
	"slices"

	"github.com/knowdp/knowdp/domain"
)

// The residual basis of marginals on a product domain (ResidualPlanner,
// Xiao et al. 2023; HDMM, McKenna et al. 2018). For a set A of dimensions,
// the residual r_A of a table is its A-marginal centred along every
// dimension of A (x - mean along each of them). Residuals of different A are
// orthogonal, the marginal on C is the sum over A ⊆ C of (|A|/|C|) r_A
// broadcast to C's cells, and a marginal operator M_C satisfies
// M_C^T M_C = deg(C) Σ_{A⊆C} P_A, where P_A is the orthogonal projection onto
// the A-residual subspace. Least squares over marginal measurements is
// therefore diagonal in this basis (see workload.go).
//
// All the residuals of a cuboid C are held in one "extended" array over
// Π_{i∈C}(1+n_i) cells: along each dimension, index 0 stands for "summed
// over" (written * below) and index 1+v for value v, centred. The residual
// r_A is the block with * on C \ A and values on A. Going from the counts of
// C to the extended array is a Kronecker product of one small map per
// dimension (extend), and so is going back (contract), so each costs one
// pass over the array per dimension.

// extSize returns the number of cells of the extended array of a cuboid
// whose dimensions have the given sizes.
func ExtSize(sizes []int) int {
	n := 1
	for _, s := range sizes {
		n *= s + 1
	}
	return n
}

// extend returns the extended array of x, an array with the given sizes in
// row-major order: along each dimension, * <- sum and v <- x_v - mean.
func Extend(sizes []int, x []float64) []float64 {
	buf := make([]float64, ExtSize(sizes))
	copy(buf, x)
	ExtendInPlace(sizes, buf)
	return buf
}

// extendInPlace replaces the array at the start of buf, which has the
// extended size, by its extended array.
func ExtendInPlace(sizes []int, buf []float64) {
	shape := slices.Clone(sizes)
	sum := make([]float64, 0)
	for k, n := range sizes {
		outer, inner := axisBlocks(shape, k)
		sum = slices.Grow(sum[:0], inner)[:inner]
		inv := 1 / float64(n)
		// The output block of each outer index starts at or after its input
		// block and the values move up by at least inner per value, so
		// going backwards over blocks and values reads every input before
		// it is overwritten.
		for o := outer - 1; o >= 0; o-- {
			src := o * n * inner
			dst := o * (n + 1) * inner
			clear(sum)
			for v := range n {
				for i, val := range buf[src+v*inner : src+(v+1)*inner] {
					sum[i] += val
				}
			}
			for v := n - 1; v >= 0; v-- {
				in := buf[src+v*inner : src+(v+1)*inner]
				out := buf[dst+(v+1)*inner : dst+(v+2)*inner]
				for i := inner - 1; i >= 0; i-- {
					out[i] = in[i] - sum[i]*inv
				}
			}
			copy(buf[dst:dst+inner], sum)
		}
		shape[k] = n + 1
	}
}

// contract maps an extended array back to counts: along each dimension,
// y_v = x_* / n + x_v. Applied to residuals r_A stored in their blocks, it
// returns Σ_A (|A|/|C|) r_A(c_A) in every cell c. It overwrites x and
// returns a prefix of it.
func Contract(sizes []int, x []float64) []float64 {
	shape := make([]int, len(sizes))
	for i, n := range sizes {
		shape[i] = n + 1
	}
	star := make([]float64, 0)
	size := len(x)
	for k, n := range sizes {
		outer, inner := axisBlocks(shape, k)
		star = slices.Grow(star[:0], inner)[:inner]
		inv := 1 / float64(n)
		// Outputs move down: going forwards, every input is read before it
		// is overwritten, except the * block, which is saved first.
		for o := range outer {
			src := o * (n + 1) * inner
			dst := o * n * inner
			copy(star, x[src:src+inner])
			for v := range n {
				in := x[src+(v+1)*inner : src+(v+2)*inner]
				out := x[dst+v*inner : dst+(v+1)*inner]
				for i := range out {
					out[i] = star[i]*inv + in[i]
				}
			}
		}
		shape[k] = n
		size = outer * n * inner
	}
	return x[:size]
}

// extStrides returns the stride of each dimension of c in c's extended
// array, indexed by schema dimension (0 for dimensions outside c).
func extStrides(sizes []int, c domain.Cuboid) []int {
	st := make([]int, len(sizes))
	n := 1
	for i := len(sizes) - 1; i >= 0; i-- {
		if c.Has(i) {
			st[i] = n
			n *= sizes[i] + 1
		}
	}
	return st
}

// transfer adds, for every residual A of the dimensions common to src and
// dst, weight[pattern(A)] times src's block of A to dst's block of A.
// srcExt and dstExt are the extended arrays of cuboids src and dst; the
// pattern of A is A re-indexed within src & dst (bit k for its k-th common
// dimension), so weight has 2^|src & dst| entries. The cost is one step per
// cell of the common dimensions' extended array.
func Transfer(sizes []int, src domain.Cuboid, srcExt []float64, dst domain.Cuboid, dstExt []float64, weight []float64) {
	common := (src & dst).Dims()
	ss, ds := extStrides(sizes, src), extStrides(sizes, dst)
	if len(common) == 0 {
		dstExt[0] += weight[0] * srcExt[0]
		return
	}
	last := len(common) - 1
	n := sizes[common[last]]
	sl, dl := ss[common[last]], ds[common[last]]
	bit := 1 << last
	idx := make([]int, last) // the outer common dimensions
	so, do, pat := 0, 0, 0
	for {
		if w := weight[pat]; w != 0 {
			dstExt[do] += w * srcExt[so]
		}
		if w := weight[pat|bit]; w != 0 {
			for v := 1; v <= n; v++ {
				dstExt[do+v*dl] += w * srcExt[so+v*sl]
			}
		}
		k := last - 1
		for ; k >= 0; k-- {
			d := common[k]
			idx[k]++
			so += ss[d]
			do += ds[d]
			if idx[k] == 1 {
				pat |= 1 << k
			}
			if idx[k] <= sizes[d] {
				break
			}
			so -= idx[k] * ss[d]
			do -= idx[k] * ds[d]
			idx[k] = 0
			pat &^= 1 << k
		}
		if k < 0 {
			return
		}
	}
}

// axisBlocks returns, for axis k of a row-major array of the given shape,
// the number of blocks before it (the product of the earlier sizes) and
// the length of a run along the later axes (the product of the later sizes).
func axisBlocks(shape []int, k int) (outer, inner int) {
	outer, inner = 1, 1
	for _, s := range shape[:k] {
		outer *= s
	}
	for _, s := range shape[k+1:] {
		inner *= s
	}
	return outer, inner
}
