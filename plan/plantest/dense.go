// Package plantest holds an independent solver of the split problem, for
// tests: slow, simple, and sharing no code with plan.Solve but the
// objective's evaluation.
package plantest

import (
	"math"
	"math/rand/v2"

	"github.com/knowdp/knowdp/plan"
)

// DenseMin minimises F independently of plan.Solve (no barrier, no Newton, no
// relaxation): from the vertices' neighbourhoods, the centre and many
// random starts, it moves mass between pairs of coordinates, each pair by a
// scan of 16 points and a golden-section search, until a sweep gains
// nothing; for up to three measurements it also scans a grid of the simplex
// with step 1/400. It returns the best value found and its point.
func DenseMin(pr plan.Problem, rng *rand.Rand, starts int) (float64, []float64) {
	n := len(pr.Coef)
	best, bestX := math.Inf(1), []float64(nil)
	consider := func(x []float64) {
		if f := pr.Value(x); f < best {
			best, bestX = f, append([]float64(nil), x...)
		}
	}
	descend := func(x []float64) {
		f := pr.Value(x)
		y := make([]float64, n)
		at := func(i, j int, s, th float64) float64 {
			copy(y, x)
			y[i], y[j] = th*s, (1-th)*s
			return pr.Value(y)
		}
		for sweep := 0; sweep < 400; sweep++ {
			start := f
			for i := range n {
				for j := i + 1; j < n; j++ {
					s := x[i] + x[j]
					if s == 0 {
						continue
					}
					bt, bf := x[i]/s, f
					const scan = 16
					for q := 0; q <= scan; q++ {
						if v := at(i, j, s, float64(q)/scan); v < bf {
							bt, bf = float64(q)/scan, v
						}
					}
					a, b := max(bt-1.0/scan, 0), min(bt+1.0/scan, 1)
					const r = 0.6180339887498949
					c, d := b-r*(b-a), a+r*(b-a)
					fc, fd := at(i, j, s, c), at(i, j, s, d)
					for range 60 {
						if fc < fd {
							b, d, fd = d, c, fc
							c = b - r*(b-a)
							fc = at(i, j, s, c)
						} else {
							a, c, fc = c, d, fd
							d = a + r*(b-a)
							fd = at(i, j, s, d)
						}
					}
					for _, th := range []float64{c, d} {
						if v := at(i, j, s, th); v < bf {
							bt, bf = th, v
						}
					}
					if bf < f {
						x[i], x[j], f = bt*s, (1-bt)*s, bf
					}
				}
			}
			if !(f < start*(1-1e-14)) {
				break
			}
		}
		consider(x)
	}
	for k := range n {
		x := make([]float64, n)
		for j := range x {
			x[j] = 0.1 / float64(n)
		}
		x[k] += 0.9
		descend(x)
	}
	eq := make([]float64, n)
	for k := range eq {
		eq[k] = 1 / float64(n)
	}
	descend(eq)
	for range starts {
		x := make([]float64, n)
		var s float64
		for k := range x {
			x[k] = rng.ExpFloat64()
			s += x[k]
		}
		for k := range x {
			x[k] /= s
		}
		descend(x)
	}
	if n <= 3 {
		const steps = 400
		for i := 0; i <= steps; i++ {
			for j := 0; i+j <= steps; j++ {
				switch n {
				case 1:
					consider([]float64{1})
				case 2:
					if j == 0 {
						consider([]float64{float64(i) / steps, float64(steps-i) / steps})
					}
				case 3:
					consider([]float64{float64(i) / steps, float64(j) / steps, float64(steps-i-j) / steps})
				}
			}
		}
	}
	return best, bestX
}
