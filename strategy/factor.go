package strategy

import (
	"math"

	"github.com/knowdp/knowdp/query"
)

// AddRemove returns the L1 and L2 sensitivities of a term's queries when
// one row is added to or removed from the data: one cell of the domain
// changes by 1, so they are the largest L1 and L2 norms of a column of the
// term's matrix. Column norms of a Kronecker product are products of the
// factors' column norms, so the largest is the product of the factors'
// largest.
func AddRemove(t query.Term) (l1, l2 float64) {
	l1, l2 = 1, 1
	for _, f := range t {
		a, b := factorSens(f)
		l1 *= a
		l2 *= b
	}
	return l1, l2
}

// factorSens returns the largest L1 and L2 norms of a column of f.
func factorSens(f query.Factor) (l1, l2 float64) {
	n := f.N
	switch f.Kind {
	case query.Identity, query.Total, query.RollUp:
		return 1, 1
	case query.Prefix:
		// Column 0 is in every prefix.
		return float64(n), math.Sqrt(float64(n))
	case query.Ranges:
		// Column j is in (j+1)(n-j) ranges, most at the middle.
		j := (n - 1) / 2
		c := float64(j+1) * float64(n-j)
		return c, math.Sqrt(c)
	case query.Residual:
		// Helmert rows are orthonormal contrasts: HᵀH = I - J/n, so every
		// column has squared norm 1 - 1/n. Column j holds -j/sqrt(j(j+1))
		// (row j-1, j >= 1) and 1/sqrt(k(k+1)) for every row k-1, k > j.
		var best, suffix float64
		for j := n - 1; j >= 0; j-- {
			v := suffix
			if j >= 1 {
				v += float64(j) / math.Sqrt(float64(j)*float64(j+1))
			}
			best = max(best, v)
			if j >= 1 {
				suffix += 1 / math.Sqrt(float64(j)*float64(j+1))
			}
		}
		return best, math.Sqrt(1 - 1/float64(n))
	}
	d := f.Dense()
	rows := f.Rows()
	for j := range n {
		var a, b float64
		for i := range rows {
			v := d[i*n+j]
			a += math.Abs(v)
			b += v * v
		}
		l1 = max(l1, a)
		l2 = max(l2, b)
	}
	return l1, math.Sqrt(l2)
}

// gram returns FᵀF (n×n, row-major), from closed forms where the kind has
// one (a range factor has n(n+1)/2 rows).
func gram(f query.Factor) []float64 {
	n := f.N
	g := make([]float64, n*n)
	switch f.Kind {
	case query.Identity:
		for i := range n {
			g[i*n+i] = 1
		}
		return g
	case query.Total:
		for i := range g {
			g[i] = 1
		}
		return g
	case query.Prefix:
		// Prefixes i >= max(j, k) cover both j and k.
		for j := range n {
			for k := range n {
				g[j*n+k] = float64(n - max(j, k))
			}
		}
		return g
	case query.Ranges:
		// Ranges [a, b] with a <= min(j,k) and b >= max(j,k).
		for j := range n {
			for k := range n {
				g[j*n+k] = float64(min(j, k)+1) * float64(n-max(j, k))
			}
		}
		return g
	case query.Residual:
		for j := range n {
			for k := range n {
				v := -1 / float64(n)
				if j == k {
					v += 1
				}
				g[j*n+k] = v
			}
		}
		return g
	}
	d := f.Dense()
	rows := f.Rows()
	for r := range rows {
		row := d[r*n : (r+1)*n]
		for j, a := range row {
			if a == 0 {
				continue
			}
			for k, b := range row {
				g[j*n+k] += a * b
			}
		}
	}
	return g
}

// marginalKind reports whether f's Gram is diagonal in the constant /
// contrast split of its dimension, and its eigenvalues there: on the
// constants (1/sqrt(n), one vector) and on the contrasts (n-1 vectors).
func marginalKind(f query.Factor) (c0, c1 float64, ok bool) {
	switch f.Kind {
	case query.Identity:
		return 1, 1, true
	case query.Total:
		return float64(f.N), 0, true
	case query.Residual:
		return 0, 1, true
	}
	return 0, 0, false
}

// splitTraces returns tr(G P0) and tr(G P1) for G = FᵀF: the squared norm
// of F applied to the constant unit vector, and the rest of ‖F‖²_F.
func splitTraces(f query.Factor) (t0, t1 float64) {
	n := f.N
	one := make([]float64, n)
	for i := range one {
		one[i] = 1 / math.Sqrt(float64(n))
	}
	y := make([]float64, f.Rows())
	f.Apply(one, y)
	for _, v := range y {
		t0 += v * v
	}
	return t0, max(frobenius2(f)-t0, 0)
}

// frobenius2 returns ‖F‖²_F.
func frobenius2(f query.Factor) float64 {
	n := float64(f.N)
	switch f.Kind {
	case query.Identity, query.Total, query.RollUp:
		return n
	case query.Prefix:
		return n * (n + 1) / 2
	case query.Ranges:
		// Σ_j (j+1)(n-j) = n(n+1)(n+2)/6.
		return n * (n + 1) * (n + 2) / 6
	case query.Residual:
		return n - 1
	}
	var s float64
	for _, v := range f.Dense() {
		s += v * v
	}
	return s
}
