package hier

import "slices"

// The reference implementation of the coefficients, by the dense adjoint
// of the tree estimator (one pass over the whole hierarchy per residual),
// used to check the block expansion of Law coefficient by coefficient.

// measCoefs holds the coefficients of one measurement's noise in the
// error of one estimated cell: k[node*P + p] is the coefficient of every
// noise cell of that node (the caller's numbering) whose flat cell agrees
// with the estimated cell exactly on the common dimensions of pattern p
// (bit b for common[b]), and count[p] is the number of such noise cells.
type measCoefs struct {
	j      int
	common []int // the flat dimensions of size > 1 shared by the view and the measurement
	k      []float64
	count  []int64
}

// coefs returns the coefficients of every noisy measurement in the error of
// the cells of node `node` of query q, by the adjoint of the estimator.
func (s *Solution) coefs(q, node int) ([]*measCoefs, error) {
	if err := s.checkCell(q, node); err != nil {
		return nil, err
	}
	p := s.p
	h := p.Hierarchy
	v := s.queries[q]
	sv := p.nontrivial(v.Flat)
	gi := h.global(v.Level, node)
	N := h.total()
	byJ := make([]*measCoefs, len(p.Measurements))
	var out []*measCoefs
	fb := make([]float64, N)
	zb := make([]float64, N)
	for t := range subsets(sv) {
		r := s.res[t]
		tp := r.plan
		clear(fb)
		clear(zb)
		fb[gi] = 1
		r.adjoint(h, fb, zb)
		lam := fb
		scale := 1 / float64(p.cells(v.Flat&^t))
		for j, m := range p.Measurements {
			if m.Variance == 0 || tp.alpha[j] == 0 {
				continue
			}
			mc := byJ[j]
			if mc == nil {
				common := (sv & m.Flat).dims()
				P := 1 << len(common)
				mc = &measCoefs{j: j, common: common, k: make([]float64, h.Nodes(m.Level)*P)}
				byJ[j] = mc
				out = append(out, mc)
			}
			pat := 0
			for b, d := range mc.common {
				if t.Has(d) {
					pat |= 1 << b
				}
			}
			P := 1 << len(mc.common)
			c := tp.alpha[j] * scale
			base := h.off[m.Level]
			for i, ip := range h.pos[m.Level] {
				if l := lam[base+int(ip)]; l != 0 {
					mc.k[i*P+pat] = l * c
				}
			}
		}
	}
	// Σ_T g_T Π_{d∈T}(δ_d(p) - 1/n_d) is a Kronecker product over the
	// common dimensions: one butterfly per dimension and node.
	for _, mc := range out {
		m := p.Measurements[mc.j]
		P := 1 << len(mc.common)
		for o := 0; o < len(mc.k); o += P {
			butterfly(mc.k[o:o+P], mc.common, p.FlatSizes)
		}
		outside := int64(p.cells(m.Flat &^ sv))
		mc.count = make([]int64, P)
		for pat := range P {
			n := outside
			for b, d := range mc.common {
				if pat&(1<<b) == 0 {
					n *= int64(p.FlatSizes[d] - 1)
				}
			}
			mc.count[pat] = n
		}
	}
	slices.SortFunc(out, func(a, b *measCoefs) int { return a.j - b.j })
	return out, nil
}

// adjoint applies the transpose of the tree estimator of r: on entry fb is
// the gradient with respect to the final estimates f (zb zero); on return
// fb[i] is the gradient with respect to the combined observation y_i of
// node i. zb is scratch.
func (r *resid) adjoint(h *Hierarchy, fb, zb []float64) {
	L := h.RootLevel()
	// Reverse of the downward pass, leaves first.
	for k := 1; k <= L; k++ {
		cbase, cs := h.off[k-1], h.cstart[k]
		for pp := range h.nodes[k] {
			c0, c1 := cbase+int(cs[pp]), cbase+int(cs[pp+1])
			var s float64
			nz := false
			for c := c0; c < c1; c++ {
				s += r.g[c] * fb[c]
				nz = nz || fb[c] != 0
			}
			if !nz {
				continue
			}
			for c := c0; c < c1; c++ {
				zb[c] += fb[c] - s
			}
			fb[h.off[k]+pp] += s
		}
	}
	root := h.off[L]
	zb[root] += fb[root]
	// Reverse of the upward pass, root first.
	for k := L; k >= 1; k-- {
		cbase, cs := h.off[k-1], h.cstart[k]
		for pp := range h.nodes[k] {
			gp := h.off[k] + pp
			zp := zb[gp]
			fb[gp] = r.a[gp] * zp
			if zp == 0 || r.b[gp] == 0 {
				continue
			}
			bz := r.b[gp] * zp
			for c := cbase + int(cs[pp]); c < cbase+int(cs[pp+1]); c++ {
				zb[c] += bz
			}
		}
	}
	for i := range h.nodes[0] {
		fb[i] = r.a[i] * zb[i]
	}
}
