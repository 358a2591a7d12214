package refine

import "math"

// Isotonic writes to dst the isotonic regression of x: the non-decreasing
// sequence closest to x in Euclidean distance, which is the least-squares
// refinement under the ordering constraint mu_1 <= mu_2 <= ... <= mu_n.
// It is the pool-adjacent-violators algorithm: O(n) time and 4n bytes of
// scratch, and each value of the result is the mean of a run of
// consecutive x. dst may be x.
func Isotonic(dst, x []float64) error {
	if err := checkVectors(len(x), dst, x); err != nil {
		return err
	}
	if len(x) == 0 {
		return nil
	}
	pava(dst, x, dst, make([]int32, len(x)))
	return nil
}

// pava is Isotonic with scratch space for the block sums and sizes (each
// at least len(x)); len(x) < 2^31. sums may be dst (and dst may be x):
// block b's sum is stored at index b, which is never beyond the element
// being read, and the blocks are expanded from the last one backwards, so
// block b is read before its slot is overwritten.
func pava(dst, x, sums []float64, sizes []int32) {
	top := -1
	for _, v := range x {
		top++
		sums[top], sizes[top] = v, 1
		// Merge while the last block's mean is below the previous one's:
		// sums[top-1]/sizes[top-1] > sums[top]/sizes[top], compared without
		// division.
		for top > 0 && sums[top-1]*float64(sizes[top]) > sums[top]*float64(sizes[top-1]) {
			sums[top-1] += sums[top]
			sizes[top-1] += sizes[top]
			top--
		}
	}
	i := len(x)
	for b := top; b >= 0; b-- {
		mean := sums[b] / float64(sizes[b])
		for range sizes[b] {
			i--
			dst[i] = mean
		}
	}
}

// chainBounds tightens per-element bounds along a chain
// x[chain[0]] <= x[chain[1]] <= ...: an element can be no lower than any
// lower bound before it and no higher than any upper bound after it. The
// feasible set is unchanged and the tightened bounds are non-decreasing
// along the chain. lo or hi may be nil (no bounds). It returns the first
// position where the bounds cross (-1 if none).
func chainBounds(chain []int, lo, hi, clo, chi []float64) int {
	cur := math.Inf(-1)
	for t, i := range chain {
		if lo != nil {
			cur = max(cur, lo[i])
		}
		clo[t] = cur
	}
	cur = math.Inf(1)
	for t := len(chain) - 1; t >= 0; t-- {
		if hi != nil {
			cur = min(cur, hi[chain[t]])
		}
		chi[t] = cur
	}
	for t := range chain {
		if clo[t] > chi[t] {
			return t
		}
	}
	return -1
}

// boundedIsotonic overwrites y with its projection onto
// {non-decreasing, clo <= y <= chi}, for non-decreasing bounds with
// clo <= chi (as chainBounds makes them). It is pool adjacent violators
// for the separable convex objective sum (v_i − y_i)² + [clo_i <= v_i <= chi_i],
// for which PAVA is exact (Best, Chakravarti and Ubhaya 2000): a block of
// consecutive elements takes the value that minimises its part of the
// objective, the block mean clipped to [clo of its last element, chi of
// its first]. Merged blocks are always feasible: two blocks are merged only
// when the first's value, at most chi of its first element, exceeds the
// second's, at least clo of its last. (Clipping the plain isotonic
// regression to the bounds is not the projection.)
func boundedIsotonic(y, clo, chi []float64, s *chainScratch) {
	top := -1
	for i, v := range y {
		top++
		s.sums[top], s.sizes[top], s.starts[top] = v, 1, int32(i)
		s.vals[top] = min(max(v, clo[i]), chi[i])
		for top > 0 && s.vals[top-1] > s.vals[top] {
			s.sums[top-1] += s.sums[top]
			s.sizes[top-1] += s.sizes[top]
			top--
			start := s.starts[top]
			s.vals[top] = min(max(s.sums[top]/float64(s.sizes[top]), clo[i]), chi[start])
		}
	}
	i := len(y)
	for b := top; b >= 0; b-- {
		for range s.sizes[b] {
			i--
			y[i] = s.vals[b]
		}
	}
}

// chainScratch is scratch space for the block stacks of boundedIsotonic
// and pava, each entry sized for the longest chain.
type chainScratch struct {
	buf, sums, vals []float64
	sizes, starts   []int32
}

func newChainScratch(n int) *chainScratch {
	return &chainScratch{
		buf: make([]float64, n), sums: make([]float64, n), vals: make([]float64, n),
		sizes: make([]int32, n), starts: make([]int32, n),
	}
}
