package tensor

import "github.com/knowdp/knowdp/domain"

// Dense arrays over a list of dimension sizes, in row-major order. The two
// kernels below are the whole cost of projection and consistency: each is a
// single pass over the big array, with the innermost run of dimensions that
// are either all kept or all dropped handled as a contiguous slice.

// plan describes how the cells of a dense array map onto the cells of the
// sub-array that keeps the dimensions in keep.
type Plan struct {
	outer    []int // sizes of the dimensions before the inner run
	ostride  []int // stride of each outer dimension in the kept array (0 if dropped)
	Inner    int   // cells in the inner run
	InnerIn  bool  // whether the inner run's dimensions are kept
	keptSize int   // cells of the kept array
}

func NewPlan(sizes []int, keep domain.Cuboid) Plan {
	n := len(sizes)
	p := Plan{keptSize: 1, Inner: 1}
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
		p.InnerIn = keep.Has(n - 1)
		for k > 0 && keep.Has(k-1) == p.InnerIn {
			k--
			p.Inner *= sizes[k]
		}
	}
	p.outer = sizes[:k]
	p.ostride = stride[:k]
	return p
}

// walk calls fn for each inner run: the base offset of the run in the big
// array and the offset of its first cell in the kept array.
func (p Plan) Walk(from, to int, fn func(base, kept int)) {
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
		fn(b*p.Inner, kept)
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

func (p Plan) Blocks() int {
	n := 1
	for _, s := range p.outer {
		n *= s
	}
	return n
}

// project adds to out (length p.keptSize, zeroed by the caller) the sums of
// x over the dropped dimensions.
func Project(sizes []int, keep domain.Cuboid, x, out []float64) {
	p := NewPlan(sizes, keep)
	p.Project(x, out, 0, p.Blocks(), 0)
}

// project adds to out the sums of the cells of x in outer blocks [from, to)
// over the dropped dimensions; out starts at cell off of the kept array.
func (p Plan) Project(x, out []float64, from, to, off int) {
	in := p.Inner
	if p.InnerIn {
		p.Walk(from, to, func(base, kept int) {
			kept -= off
			dst := out[kept : kept+in]
			for i, v := range x[base : base+in] {
				dst[i] += v
			}
		})
		return
	}
	p.Walk(from, to, func(base, kept int) {
		var s float64
		for _, v := range x[base : base+in] {
			s += v
		}
		out[kept-off] += s
	})
}

// broadcastAdd adds r[cell's projection] to every cell of x.
func BroadcastAdd(sizes []int, keep domain.Cuboid, x, r []float64) {
	p := NewPlan(sizes, keep)
	p.BroadcastAdd(x, r, 0, p.Blocks(), 0)
}

// broadcastAdd adds r[cell's projection] to every cell of x in outer blocks
// [from, to); r starts at cell off of the kept array.
func (p Plan) BroadcastAdd(x, r []float64, from, to, off int) {
	in := p.Inner
	if p.InnerIn {
		p.Walk(from, to, func(base, kept int) {
			kept -= off
			src := r[kept : kept+in]
			for i := range x[base : base+in] {
				x[base+i] += src[i]
			}
		})
		return
	}
	p.Walk(from, to, func(base, kept int) {
		v := r[kept-off]
		for i := range x[base : base+in] {
			x[base+i] += v
		}
	})
}

// subSizes returns the sizes of the dimensions of sizes kept by keep, and
// the positions of those dimensions in the kept list, so that a cuboid over
// the full dimension list can be re-expressed over the kept array.
func SubSizes(sizes []int, keep domain.Cuboid) []int {
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
func Reindex(c, within domain.Cuboid) domain.Cuboid {
	var out domain.Cuboid
	k := 0
	for _, i := range within.Dims() {
		if c.Has(i) {
			out |= 1 << k
		}
		k++
	}
	return out
}

// multiPlan maps the cells of a dense array onto the cells of several
// sub-arrays at once, so that one pass over the big array serves every
// marginal. The trailing dimensions that every keep drops form the tail:
// each cell of the head (the other dimensions) is a contiguous tail run of
// the array, which every keep sees as one cell. Over the head, the inner run
// is the longest suffix of dimensions on which every keep is constant (each
// of its dimensions kept by a keep or dropped by it alike): along it, a keep
// that drops the run's dimensions sees one marginal cell, and a keep that
// keeps them sees a contiguous slice. A block is one inner run of head
// cells: a contiguous span of inner*tail cells of the array.
type MultiPlan struct {
	k       int   // number of keeps
	Tail    int   // cells of the array per head cell
	outer   []int // sizes of the head dimensions before the inner run
	ostride []int // ostride[j*k+i]: stride of outer dimension j in keep i's array (0 if dropped)
	Inner   int   // head cells in the inner run
	in      []int // keeps that keep the inner run's dimensions
	out     []int // keeps that drop them
	Blocks  int   // number of blocks
}

// runTile bounds the piece of an inner run processed at once, so that
// several passes over the piece (one per keep) stay in cache.
const runTile = 2048

// newMultiPlan plans the pass over an array of the given sizes for keeps.
// When there would be fewer than minBlocks blocks, dimensions move from the
// tail to the head and from the inner run to the outer dimensions (the
// tail and the run stay suffixes with the properties above), so that the
// blocks can be split between workers. The first minOuter dimensions are
// always outer ones (the caller makes sure every keep keeps a later one),
// so that the blocks split along them.
func NewMultiPlan(sizes []int, keeps []domain.Cuboid, minBlocks, minOuter int) *MultiPlan {
	n, k := len(sizes), len(keeps)
	p := &MultiPlan{k: k, Tail: 1, Inner: 1, Blocks: 1}
	kept := func(d int) bool {
		for _, c := range keeps {
			if c.Has(d) {
				return true
			}
		}
		return false
	}
	h := n
	for h > 0 && !kept(h-1) {
		h--
		p.Tail *= sizes[h]
	}
	headCells := 1
	for _, s := range sizes[:h] {
		headCells *= s
	}
	for h < n && headCells < minBlocks {
		headCells *= sizes[h]
		p.Tail /= sizes[h]
		h++
	}
	// same reports whether every keep treats dimensions a and b alike.
	same := func(a, b int) bool {
		for _, c := range keeps {
			if c.Has(a) != c.Has(b) {
				return false
			}
		}
		return true
	}
	start := h
	if h > 0 {
		start = h - 1
		for start > 0 && same(start-1, h-1) {
			start--
		}
		outerBlocks := 1
		for _, s := range sizes[:start] {
			outerBlocks *= s
		}
		for start < h-1 && (outerBlocks < minBlocks || start < minOuter) {
			outerBlocks *= sizes[start]
			start++
		}
		for _, s := range sizes[start:h] {
			p.Inner *= s
		}
	}
	for i, c := range keeps {
		if h > 0 && c.Has(h-1) {
			p.in = append(p.in, i)
		} else {
			p.out = append(p.out, i)
		}
	}
	p.outer = sizes[:start]
	p.ostride = make([]int, start*k)
	for i, c := range keeps {
		stride := 1
		for j := n - 1; j >= 0; j-- {
			if !c.Has(j) {
				continue
			}
			if j < start {
				p.ostride[j*k+i] = stride
			}
			stride *= sizes[j]
		}
	}
	for _, s := range p.outer {
		p.Blocks *= s
	}
	return p
}

// cursor is the position of an outer block and the offset of its first cell
// in every keep's array.
type cursor struct {
	idx  []int
	kept []int
}

// seek positions c at outer block b.
func (p *MultiPlan) seek(c *cursor, b int) {
	c.idx = make([]int, len(p.outer))
	c.kept = make([]int, p.k)
	for j := len(p.outer) - 1; j >= 0; j-- {
		c.idx[j] = b % p.outer[j]
		b /= p.outer[j]
		for i := range p.k {
			c.kept[i] += c.idx[j] * p.ostride[j*p.k+i]
		}
	}
}

// next moves c to the following outer block.
func (p *MultiPlan) next(c *cursor) {
	k := p.k
	for j := len(c.idx) - 1; j >= 0; j-- {
		c.idx[j]++
		st := p.ostride[j*k : j*k+k]
		if c.idx[j] < p.outer[j] {
			for i, s := range st {
				c.kept[i] += s
			}
			return
		}
		back := c.idx[j] - 1
		for i, s := range st {
			c.kept[i] -= back * s
		}
		c.idx[j] = 0
	}
}

// projectRange adds to out[i] the sums of the cells of x in blocks
// [from, to) over the dimensions keep i drops; x starts at block from.
func (p *MultiPlan) ProjectRange(x []float64, from, to int, out [][]float64) {
	var c cursor
	p.seek(&c, from)
	in, t := p.Inner, p.Tail
	span := in * t
	for b := from; b < to; b++ {
		run := x[(b-from)*span : (b-from)*span+span]
		switch {
		case len(p.in) == 0:
			s := Sum(run)
			for _, i := range p.out {
				out[i][c.kept[i]] += s
			}
		case t == 1:
			if len(p.out) > 0 {
				s := Sum(run)
				for _, i := range p.out {
					out[i][c.kept[i]] += s
				}
			}
			for lo := 0; lo < in; lo += runTile {
				piece := run[lo:min(lo+runTile, in)]
				for _, i := range p.in {
					dst := out[i][c.kept[i]+lo:]
					dst = dst[:len(piece)]
					for j, v := range piece {
						dst[j] += v
					}
				}
			}
		default:
			var s float64
			for j := range in {
				v := Sum(run[j*t : j*t+t])
				s += v
				for _, i := range p.in {
					out[i][c.kept[i]+j] += v
				}
			}
			for _, i := range p.out {
				out[i][c.kept[i]] += s
			}
		}
		p.next(&c)
	}
}

// broadcastRange adds to every cell of x in blocks [from, to) the sum over
// keeps i of r[i] at the cell's projection; x starts at block from.
func (p *MultiPlan) BroadcastRange(x []float64, from, to int, r [][]float64) {
	var c cursor
	p.seek(&c, from)
	in, t := p.Inner, p.Tail
	span := in * t
	for b := from; b < to; b++ {
		var v float64
		for _, i := range p.out {
			v += r[i][c.kept[i]]
		}
		run := x[(b-from)*span : (b-from)*span+span]
		switch {
		case len(p.in) == 0:
			for j := range run {
				run[j] += v
			}
		case t > 1:
			for j := range in {
				w := v
				for _, i := range p.in {
					w += r[i][c.kept[i]+j]
				}
				seg := run[j*t : j*t+t]
				for m := range seg {
					seg[m] += w
				}
			}
		case len(p.in) == 1:
			src := r[p.in[0]][c.kept[p.in[0]]:]
			src = src[:len(run)]
			for j := range run {
				run[j] += v + src[j]
			}
		default:
			for lo := 0; lo < in; lo += runTile {
				hi := min(lo+runTile, in)
				piece := run[lo:hi]
				src := r[p.in[0]][c.kept[p.in[0]]+lo:]
				src = src[:len(piece)]
				for j := range piece {
					piece[j] += v + src[j]
				}
				for _, i := range p.in[1:] {
					src := r[i][c.kept[i]+lo:]
					src = src[:len(piece)]
					for j := range piece {
						piece[j] += src[j]
					}
				}
			}
		}
		p.next(&c)
	}
}

// sum adds the values of v with four accumulators, so that the additions
// are not serialised on one register.
func Sum(v []float64) float64 {
	var s0, s1, s2, s3 float64
	for len(v) >= 4 {
		s0 += v[0]
		s1 += v[1]
		s2 += v[2]
		s3 += v[3]
		v = v[4:]
	}
	for _, x := range v {
		s0 += x
	}
	return (s0 + s1) + (s2 + s3)
}
