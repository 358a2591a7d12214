package gls

import (
	"math/bits"
)

// box is a product of sets of atoms, one set per dimension: the row space
// of a Kronecker term whose factors' row spaces are sums of atoms is the
// sum of the tensor products of the atoms in its box.
type box []uint64

func (b box) empty() bool {
	for _, s := range b {
		if s == 0 {
			return true
		}
	}
	return false
}

// uncovered returns a cell of q (one atom per dimension) that no box of
// cover contains, or nil when cover contains all of q: a query whose
// factors have energy on the atoms of q is determined iff every tensor
// product of atoms it touches lies in some measurement's or invariant's
// row space (package doc). The search splits q along the boundary of an
// overlapping box until each piece is inside a box or meets none.
func uncovered(q box, cover []box) []int {
	if q.empty() {
		return nil
	}
	var live []box
	for _, b := range cover {
		meets, inside := true, true
		for d, s := range q {
			if s&b[d] == 0 {
				meets = false
				break
			}
			if s&^b[d] != 0 {
				inside = false
			}
		}
		if !meets {
			continue
		}
		if inside {
			return nil
		}
		live = append(live, b)
	}
	if len(live) == 0 {
		cell := make([]int, len(q))
		for d, s := range q {
			cell[d] = bits.TrailingZeros64(s)
		}
		return cell
	}
	b := live[0]
	for d, s := range q {
		if s&^b[d] == 0 {
			continue
		}
		in, out := clone(q), clone(q)
		in[d], out[d] = s&b[d], s&^b[d]
		if c := uncovered(in, live); c != nil {
			return c
		}
		return uncovered(out, live)
	}
	return nil // unreachable: b contains q
}

func clone(b box) box { return append(box(nil), b...) }
