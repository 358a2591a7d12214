package gls

import (
	"github.com/knowdp/knowdp/query"
)

// partition is a partition of the values 0..n-1 of a dimension into
// groups 0..groups-1 (none empty).
type partition struct {
	of     []int32
	groups int
}

// partOf returns the partition a factor sums over, when it is one of
// Identity, Total or RollUp.
func partOf(f query.Factor) (partition, bool) {
	switch f.Kind {
	case query.Identity:
		of := make([]int32, f.N)
		for i := range of {
			of[i] = int32(i)
		}
		return partition{of, f.N}, true
	case query.Total:
		return partition{make([]int32, f.N), 1}, true
	case query.RollUp:
		return partition{f.Group, f.Groups}, true
	}
	return partition{}, false
}

// refines reports whether every group of fine lies in one group of coarse.
func refines(fine, coarse partition) bool {
	if fine.groups < coarse.groups {
		return false
	}
	img := make([]int32, fine.groups)
	for i := range img {
		img[i] = -1
	}
	for x, g := range fine.of {
		c := coarse.of[x]
		switch img[g] {
		case -1:
			img[g] = c
		case c:
		default:
			return false
		}
	}
	return true
}

// samePartition reports whether a and b group the values alike.
func samePartition(a, b partition) bool {
	return a.groups == b.groups && refines(a, b)
}

// sizes returns the number of values in each group.
func (p partition) sizes() []int {
	s := make([]int, p.groups)
	for _, g := range p.of {
		s[g]++
	}
	return s
}

// meet returns the coarsest common refinement of parts, its groups
// numbered by first occurrence.
func meet(n int, parts []partition) partition {
	cur := make([]int32, n)
	groups := 1
	for _, p := range parts {
		if p.groups == 1 {
			continue
		}
		next := make([]int32, n)
		id := make(map[[2]int32]int32, groups)
		for x := range n {
			k := [2]int32{cur[x], p.of[x]}
			g, ok := id[k]
			if !ok {
				g = int32(len(id))
				id[k] = g
			}
			next[x] = g
		}
		cur, groups = next, len(id)
	}
	return partition{cur, groups}
}

// reduction is how the plan shrinks one dimension: when every measurement
// and invariant factor along it sums over groups of a partition, the
// estimate needs only the table summed over the blocks of their meet.
type reduction struct {
	block *partition // the meet, or nil when the dimension is kept whole
}

// size returns the reduced dimension's size.
func (r reduction) size(n int) int {
	if r.block == nil {
		return n
	}
	return r.block.groups
}

// reduce returns f as a factor over the reduced dimension, or false when f
// does not factor through the blocks (a query that asks for detail no
// measurement or invariant distinguishes).
func (r reduction) reduce(f query.Factor) (query.Factor, bool) {
	if r.block == nil {
		return f, true
	}
	m := r.block.groups
	switch f.Kind {
	case query.Total:
		return query.NewTotal(m), true
	case query.Identity, query.RollUp:
		p, _ := partOf(f)
		img := make([]int32, m)
		for i := range img {
			img[i] = -1
		}
		for x, b := range r.block.of {
			switch img[b] {
			case -1:
				img[b] = p.of[x]
			case p.of[x]:
			default:
				return query.Factor{}, false
			}
		}
		ident := p.groups == m
		for b, g := range img {
			if int(g) != b {
				ident = false
				break
			}
		}
		if ident {
			return query.NewIdentity(m), true
		}
		g, err := query.NewRollUp(img)
		if err != nil {
			panic("gls: " + err.Error()) // every group of a partition is non-empty
		}
		return g, true
	case query.Matrix:
		rows := f.Rows()
		out := make([]float64, rows*m)
		set := make([]bool, m)
		for x, b := range r.block.of {
			for i := range rows {
				v := f.M[i*f.N+x]
				if !set[b] {
					out[i*m+int(b)] = v
				} else if out[i*m+int(b)] != v {
					return query.Factor{}, false
				}
			}
			set[b] = true
		}
		g, err := query.NewMatrix(rows, m, out)
		if err != nil {
			panic("gls: " + err.Error())
		}
		return g, true
	}
	// Prefix, ranges and residuals tell apart values within a block of
	// size > 1 (one exists, since the blocks are fewer than the values).
	return query.Factor{}, false
}

// reduceTerm reduces every factor of t.
func reduceTerm(t query.Term, red []reduction) (query.Term, int, bool) {
	out := make(query.Term, len(t))
	for d, f := range t {
		g, ok := red[d].reduce(f)
		if !ok {
			return nil, d, false
		}
		out[d] = g
	}
	return out, -1, true
}

// reductions returns, per dimension, the meet of the measurements' and
// invariants' partitions, or no reduction where some factor is not a
// partition or the meet is the identity.
func reductions(shape []int, terms []query.Term) []reduction {
	red := make([]reduction, len(shape))
	for d, n := range shape {
		var parts []partition
		whole := false
		for _, t := range terms {
			p, ok := partOf(t[d])
			if !ok || p.groups == n {
				whole = true
				break
			}
			parts = append(parts, p)
		}
		if whole {
			continue
		}
		mt := meet(n, parts)
		if mt.groups < n {
			red[d].block = &mt
		}
	}
	return red
}
