package cube

// Dense arrays over a list of dimension sizes, in row-major order. The two
// kernels below are the whole cost of projection and consistency: each is a
// single pass over the big array, with the innermost run of dimensions that
// are either all kept or all dropped handled as a contiguous slice.

// plan describes how the cells of a dense array map onto the cells of the
// sub-array that keeps the dimensions in keep.
type plan struct {
	outer    []int // sizes of the dimensions before the inner run
	ostride  []int // stride of each outer dimension in the kept array (0 if dropped)
	inner    int   // cells in the inner run
	innerIn  bool  // whether the inner run's dimensions are kept
	keptSize int   // cells of the kept array
}

func newPlan(sizes []int, keep Cuboid) plan {
	n := len(sizes)
	p := plan{keptSize: 1, inner: 1}
	stride := make([]int, n)
	for i := n - 1; i >= 0; i-- {
		if keep.Has(i) {
			stride[i] = p.keptSize
			p.keptSize *= sizes[i]
		}
	}
	// The inner run: the longest suffix of dimensions that are all kept or
	// all dropped.
	k := n
	if n > 0 {
		p.innerIn = keep.Has(n - 1)
		for k > 0 && keep.Has(k-1) == p.innerIn {
			k--
			p.inner *= sizes[k]
		}
	}
	p.outer = sizes[:k]
	p.ostride = stride[:k]
	return p
}

// walk calls fn for each inner run: the base offset of the run in the big
// array and the offset of its first cell in the kept array.
func (p plan) walk(from, to int, fn func(base, kept int)) {
	// Outer blocks [from, to) in row-major order of the outer dimensions.
	idx := make([]int, len(p.outer))
	kept := 0
	rem := from
	for j := len(p.outer) - 1; j >= 0; j-- {
		idx[j] = rem % p.outer[j]
		rem /= p.outer[j]
		kept += idx[j] * p.ostride[j]
	}
	for b := from; b < to; b++ {
		fn(b*p.inner, kept)
		for j := len(idx) - 1; j >= 0; j-- {
			idx[j]++
			kept += p.ostride[j]
			if idx[j] < p.outer[j] {
				break
			}
			kept -= idx[j] * p.ostride[j]
			idx[j] = 0
		}
	}
}

func (p plan) blocks() int {
	n := 1
	for _, s := range p.outer {
		n *= s
	}
	return n
}

// project adds to out (length p.keptSize, zeroed by the caller) the sums of
// x over the dropped dimensions.
func project(sizes []int, keep Cuboid, x, out []float64) {
	p := newPlan(sizes, keep)
	in := p.inner
	if p.innerIn {
		p.walk(0, p.blocks(), func(base, kept int) {
			dst := out[kept : kept+in]
			for i, v := range x[base : base+in] {
				dst[i] += v
			}
		})
		return
	}
	p.walk(0, p.blocks(), func(base, kept int) {
		var s float64
		for _, v := range x[base : base+in] {
			s += v
		}
		out[kept] += s
	})
}

// broadcastAdd adds r[cell's projection] to every cell of x.
func broadcastAdd(sizes []int, keep Cuboid, x, r []float64) {
	p := newPlan(sizes, keep)
	in := p.inner
	if p.innerIn {
		p.walk(0, p.blocks(), func(base, kept int) {
			src := r[kept : kept+in]
			for i := range x[base : base+in] {
				x[base+i] += src[i]
			}
		})
		return
	}
	p.walk(0, p.blocks(), func(base, kept int) {
		v := r[kept]
		for i := range x[base : base+in] {
			x[base+i] += v
		}
	})
}

// subSizes returns the sizes of the dimensions of sizes kept by keep, and
// the positions of those dimensions in the kept list, so that a cuboid over
// the full dimension list can be re-expressed over the kept array.
func subSizes(sizes []int, keep Cuboid) []int {
	var out []int
	for i, s := range sizes {
		if keep.Has(i) {
			out = append(out, s)
		}
	}
	return out
}

// reindex maps a cuboid over the full dimension list to the same
// dimensions numbered within the array that keeps only within.
func reindex(c, within Cuboid) Cuboid {
	var out Cuboid
	k := 0
	for _, i := range within.Dims() {
		if c.Has(i) {
			out |= 1 << k
		}
		k++
	}
	return out
}
