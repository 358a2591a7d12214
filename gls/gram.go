package gls

import (
	"math"

	"github.com/knowdp/knowdp/query"
)

// qform returns ||F u||², the Gram F^T F's quadratic form at u, in O(N)
// for every kind but Matrix (O(rows N)): ranges use the prefix sums S_0 =
// 0, S_k = u_0 + ... + u_{k-1}, as Σ_{0<=i<j<=n} (S_j - S_i)² = (n+1) Σ S²
// - (Σ S)².
func qform(f query.Factor, u []float64) float64 {
	var q float64
	switch f.Kind {
	case query.Identity:
		for _, v := range u {
			q += v * v
		}
	case query.Total:
		var s float64
		for _, v := range u {
			s += v
		}
		q = s * s
	case query.RollUp:
		g := make([]float64, f.Groups)
		for x, v := range u {
			g[f.Group[x]] += v
		}
		for _, v := range g {
			q += v * v
		}
	case query.Prefix:
		var s float64
		for _, v := range u {
			s += v
			q += s * s
		}
	case query.Ranges:
		var s, ss, sq float64 // S_0 = 0 adds nothing
		for _, v := range u {
			s += v
			ss += s
			sq += s * s
		}
		q = float64(len(u)+1)*sq - ss*ss
	case query.Residual:
		var s, sq float64
		for _, v := range u {
			s += v
			sq += v * v
		}
		q = sq - s*s/float64(len(u))
	case query.Matrix:
		for r := range f.Rows() {
			row := f.M[r*f.N : (r+1)*f.N]
			var s float64
			for x, v := range row {
				s += v * u[x]
			}
			q += s * s
		}
	default:
		panic("gls: invalid factor")
	}
	return max(q, 0)
}

// colSq returns the diagonal of F^T F: the squared norm of each column.
func colSq(f query.Factor) []float64 {
	n := f.N
	out := make([]float64, n)
	for j := range out {
		switch f.Kind {
		case query.Identity, query.Total, query.RollUp:
			out[j] = 1
		case query.Prefix:
			out[j] = float64(n - j)
		case query.Ranges:
			out[j] = float64(j+1) * float64(n-j)
		case query.Residual:
			out[j] = 1 - 1/float64(n)
		case query.Matrix:
			for r := range f.Rows() {
				v := f.M[r*n+j]
				out[j] += v * v
			}
		}
	}
	return out
}

// gramDense returns F^T F as a dense N x N matrix, row-major, from closed
// forms (prefix: n - max(a, b); ranges: (min(a, b)+1)(n - max(a, b))).
func gramDense(f query.Factor) []float64 {
	n := f.N
	g := make([]float64, n*n)
	switch f.Kind {
	case query.Identity:
		for a := range n {
			g[a*n+a] = 1
		}
	case query.Total:
		for i := range g {
			g[i] = 1
		}
	case query.RollUp:
		for a := range n {
			for b := range n {
				if f.Group[a] == f.Group[b] {
					g[a*n+b] = 1
				}
			}
		}
	case query.Prefix:
		for a := range n {
			for b := range n {
				g[a*n+b] = float64(n - max(a, b))
			}
		}
	case query.Ranges:
		for a := range n {
			for b := range n {
				g[a*n+b] = float64(min(a, b)+1) * float64(n-max(a, b))
			}
		}
	case query.Residual:
		for a := range n {
			for b := range n {
				g[a*n+b] = -1 / float64(n)
			}
			g[a*n+a] += 1
		}
	case query.Matrix:
		for r := range f.Rows() {
			row := f.M[r*n : (r+1)*n]
			for a, va := range row {
				if va == 0 {
					continue
				}
				for b, vb := range row {
					g[a*n+b] += va * vb
				}
			}
		}
	default:
		panic("gls: invalid factor")
	}
	return g
}

// norm2 returns the Euclidean norm of v.
func norm2(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s)
}

func dot(a, b []float64) float64 {
	var s float64
	for i, x := range a {
		s += x * b[i]
	}
	return s
}
