package gls

import (
	"slices"
	"unsafe"

	"github.com/knowdp/knowdp/query"
)

// kronWork holds the buffers of Kronecker products: two that take turns
// as a product's input and output, and a fibre's gather and scatter.
type kronWork struct {
	a, b    []float64
	in, out []float64
}

// grow returns buf with length n, reallocated only when too short.
func grow(buf []float64, n int) []float64 {
	if cap(buf) < n {
		return make([]float64, n, n+n/4)
	}
	return buf[:n]
}

func same(a, b []float64) bool {
	return len(a) > 0 && len(b) > 0 && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// apply returns t x (transpose false) or t^T x (true), as query.Term.Apply
// and ApplyT do, in one of w's buffers (valid until w's next use). It
// skips identity factors and takes the axes in the order that keeps the
// tensor smallest (most shrinking first; for the transpose, least
// growing first; the result does not depend on the order), and sums and
// broadcasts totals and roll-ups a contiguous run of cells at a time.
func (w *kronWork) apply(t query.Term, x []float64, transpose bool) []float64 {
	D := len(t)
	shape := make([]int, D)
	var axes []int
	for d, f := range t {
		if transpose {
			shape[d] = f.Rows()
		} else {
			shape[d] = f.N
		}
		if f.Kind != query.Identity {
			axes = append(axes, d)
		}
	}
	// Ratio out/in per axis, smallest first.
	slices.SortStableFunc(axes, func(a, b int) int {
		ra, rb := ratio(t[a], transpose), ratio(t[b], transpose)
		switch {
		case ra < rb:
			return -1
		case ra > rb:
			return 1
		}
		return 0
	})
	cur := x
	for _, d := range axes {
		f := t[d]
		outer, inner := 1, 1
		for _, s := range shape[:d] {
			outer *= s
		}
		for _, s := range shape[d+1:] {
			inner *= s
		}
		nIn := shape[d]
		nOut := f.Rows()
		if transpose {
			nOut = f.N
		}
		size := outer * nOut * inner
		var out []float64
		if same(cur, w.a) {
			w.b = grow(w.b, size)
			out = w.b
		} else {
			w.a = grow(w.a, size)
			out = w.a
		}
		w.axis(f, transpose, cur, out, outer, nIn, nOut, inner)
		cur = out
		shape[d] = nOut
	}
	if len(axes) == 0 {
		w.a = grow(w.a, len(x))
		copy(w.a, x)
		return w.a
	}
	return cur
}

func ratio(f query.Factor, transpose bool) float64 {
	if transpose {
		return float64(f.N) / float64(f.Rows())
	}
	return float64(f.Rows()) / float64(f.N)
}

// axis applies f (or f^T) along the middle axis of x, outer x nIn x inner,
// into y, outer x nOut x inner.
func (w *kronWork) axis(f query.Factor, transpose bool, x, y []float64, outer, nIn, nOut, inner int) {
	switch f.Kind {
	case query.Total, query.RollUp:
		group := func(k int) int {
			if f.Kind == query.Total {
				return 0
			}
			return int(f.Group[k])
		}
		for o := range outer {
			xb := x[o*nIn*inner : (o+1)*nIn*inner]
			yb := y[o*nOut*inner : (o+1)*nOut*inner]
			if !transpose {
				clear(yb)
				for k := range nIn {
					g := group(k)
					dst, src := yb[g*inner:(g+1)*inner], xb[k*inner:(k+1)*inner]
					for i, v := range src {
						dst[i] += v
					}
				}
				continue
			}
			for k := range nOut {
				g := group(k)
				copy(yb[k*inner:(k+1)*inner], xb[g*inner:(g+1)*inner])
			}
		}
		return
	}
	op := f.Apply
	if transpose {
		op = f.ApplyT
	}
	if inner == 1 {
		for o := range outer {
			op(x[o*nIn:(o+1)*nIn], y[o*nOut:(o+1)*nOut])
		}
		return
	}
	w.in, w.out = grow(w.in, nIn), grow(w.out, nOut)
	for o := range outer {
		xb, yb := x[o*nIn*inner:], y[o*nOut*inner:]
		for i := range inner {
			for k := range nIn {
				w.in[k] = xb[k*inner+i]
			}
			op(w.in, w.out)
			for k := range nOut {
				yb[k*inner+i] = w.out[k]
			}
		}
	}
}
