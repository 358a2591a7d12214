package strategy

import (
	"context"
	"math"
)

// lbfgs minimises f from x0 by limited-memory BFGS (memory 10) with a
// backtracking Armijo line search; f returns the value and sets the
// gradient. It stops when five steps in a row lower f by less than a relative 1e-10,
// after maxIter iterations, or when ctx is done, and returns the best point.
func lbfgs(ctx context.Context, f func(x, g []float64) float64, x0 []float64, maxIter int) ([]float64, float64) {
	const mem = 10
	n := len(x0)
	x := append([]float64(nil), x0...)
	g := make([]float64, n)
	fx := f(x, g)
	if math.IsInf(fx, 0) || math.IsNaN(fx) {
		return x, fx
	}
	var ss, ys [][]float64
	var rhos []float64
	d := make([]float64, n)
	xn := make([]float64, n)
	gn := make([]float64, n)
	alpha := make([]float64, mem)
	stall := 0
	for it := 0; it < maxIter; it++ {
		if it%16 == 0 && ctx.Err() != nil {
			break
		}
		// Two-loop recursion: d = -H g.
		copy(d, g)
		for i := len(ss) - 1; i >= 0; i-- {
			alpha[i] = rhos[i] * dot(ss[i], d)
			axpy(-alpha[i], ys[i], d)
		}
		if k := len(ss); k > 0 {
			scale(dot(ss[k-1], ys[k-1])/dot(ys[k-1], ys[k-1]), d)
		} else {
			scale(1/math.Max(1, math.Sqrt(dot(g, g))), d)
		}
		for i := range ss {
			b := rhos[i] * dot(ys[i], d)
			axpy(alpha[i]-b, ss[i], d)
		}
		scale(-1, d)
		slope := dot(g, d)
		if !(slope < 0) {
			// Not a descent direction: restart from steepest descent.
			ss, ys, rhos = nil, nil, nil
			copy(d, g)
			scale(-1/math.Max(1, math.Sqrt(dot(g, g))), d)
			slope = dot(g, d)
			if !(slope < 0) {
				break
			}
		}
		step := 1.0
		var fn float64
		ok := false
		for range 40 {
			for i := range x {
				xn[i] = x[i] + step*d[i]
			}
			fn = f(xn, gn)
			if fn <= fx+1e-4*step*slope {
				ok = true
				break
			}
			step /= 2
		}
		if !ok {
			break
		}
		s := make([]float64, n)
		y := make([]float64, n)
		for i := range x {
			s[i] = xn[i] - x[i]
			y[i] = gn[i] - g[i]
		}
		if sy := dot(s, y); sy > 1e-300 {
			if len(ss) == mem {
				ss, ys, rhos = ss[1:], ys[1:], rhos[1:]
			}
			ss, ys, rhos = append(ss, s), append(ys, y), append(rhos, 1/sy)
		}
		improved := fx - fn
		copy(x, xn)
		copy(g, gn)
		fx = fn
		if improved <= 1e-10*math.Abs(fx) {
			stall++
			if stall >= 5 {
				break
			}
		} else {
			stall = 0
		}
	}
	return x, fx
}

func dot(a, b []float64) float64 {
	var s float64
	for i, v := range a {
		s += v * b[i]
	}
	return s
}

func axpy(a float64, x, y []float64) {
	for i, v := range x {
		y[i] += a * v
	}
}

func scale(a float64, x []float64) {
	for i := range x {
		x[i] *= a
	}
}
