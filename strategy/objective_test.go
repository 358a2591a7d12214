package strategy

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/knowdp/knowdp/query"
)

// denseTerm returns a term's matrix (rows × cells) from its factors'
// dense matrices.
func denseTerm(t query.Term) *mat.Dense {
	m := mat.NewDense(1, 1, []float64{1})
	for _, f := range t {
		d := mat.NewDense(f.Rows(), f.N, f.Dense())
		var k mat.Dense
		k.Kronecker(m, d)
		m = &k
	}
	return m
}

// denseObjective computes Σ_T w_T tr(W_T G⁺ W_Tᵀ), G = Σ_k A_kᵀA_k/v_k,
// with a dense pseudo-inverse, and reports whether every workload row is
// in G's range.
func denseObjective(shape []int, w query.Workload, ms []Measurement) (float64, bool) {
	cells := 1
	for _, n := range shape {
		cells *= n
	}
	g := mat.NewSymDense(cells, nil)
	for _, m := range ms {
		a := denseTerm(m.Term)
		var ata mat.Dense
		ata.Mul(a.T(), a)
		for i := range cells {
			for j := i; j < cells; j++ {
				g.SetSym(i, j, g.At(i, j)+ata.At(i, j)/m.Variance)
			}
		}
	}
	var es mat.EigenSym
	if !es.Factorize(g, true) {
		panic("eigen")
	}
	vals := es.Values(nil)
	var ev mat.Dense
	es.VectorsTo(&ev)
	top := 0.0
	for _, v := range vals {
		top = max(top, v)
	}
	pinv := mat.NewDense(cells, cells, nil)
	null := mat.NewDense(cells, cells, nil)
	for c, l := range vals {
		u := ev.ColView(c)
		var o mat.Dense
		o.Outer(1, u, u)
		if l > 1e-10*top {
			o.Scale(1/l, &o)
			pinv.Add(pinv, &o)
		} else {
			null.Add(null, &o)
		}
	}
	var f float64
	ok := true
	for _, t := range w {
		W := denseTerm(t.Term)
		var x, y mat.Dense
		x.Mul(W, pinv)
		y.Mul(&x, W.T())
		f += t.Weight * mat.Trace(&y)
		// Rows outside the range have a component in the null space.
		var z mat.Dense
		z.Mul(W, null)
		if mat.Norm(&z, 2) > 1e-7*mat.Norm(W, 2) {
			ok = false
		}
	}
	return f, ok
}

func randomFactor(rng *rand.Rand, n int, ordered bool) query.Factor {
	kinds := []query.Kind{query.Identity, query.Total, query.Residual, query.Matrix, query.RollUp}
	if ordered {
		kinds = append(kinds, query.Prefix, query.Ranges)
	}
	switch kinds[rng.IntN(len(kinds))] {
	case query.Identity:
		return query.NewIdentity(n)
	case query.Total:
		return query.NewTotal(n)
	case query.Residual:
		if n < 2 {
			return query.NewIdentity(n)
		}
		return query.NewResidual(n)
	case query.Prefix:
		return query.NewPrefix(n)
	case query.Ranges:
		return query.NewRanges(n)
	case query.RollUp:
		g := make([]int32, n)
		k := 1 + rng.IntN(n)
		for i := range g {
			g[i] = int32(i % k)
		}
		f, err := query.NewRollUp(g)
		if err != nil {
			panic(err)
		}
		return f
	}
	r := 1 + rng.IntN(n+1)
	m := make([]float64, r*n)
	for i := range m {
		m[i] = rng.NormFloat64()
	}
	f, err := query.NewMatrix(r, n, m)
	if err != nil {
		panic(err)
	}
	return f
}

func TestObjectiveAgainstDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	estimable := 0
	for trial := range 300 {
		d := 1 + rng.IntN(3)
		shape := make([]int, d)
		for i := range shape {
			shape[i] = 1 + rng.IntN(4)
		}
		// Marginal-type factors on most trials, anything on some.
		general := trial%3 == 0
		term := func() query.Term {
			tt := make(query.Term, d)
			for i, n := range shape {
				if general {
					tt[i] = randomFactor(rng, n, true)
				} else {
					switch rng.IntN(3) {
					case 0:
						tt[i] = query.NewIdentity(n)
					case 1:
						tt[i] = query.NewTotal(n)
					default:
						if n > 1 {
							tt[i] = query.NewResidual(n)
						} else {
							tt[i] = query.NewTotal(n)
						}
					}
				}
			}
			return tt
		}
		var ms []Measurement
		for range 1 + rng.IntN(4) {
			ms = append(ms, Measurement{Term: term(), Variance: 0.2 + 3*rng.Float64()})
		}
		if rng.IntN(2) == 0 {
			ms = append(ms, Measurement{Term: query.Marginal(shape, func(int) bool { return true }), Variance: 1 + rng.Float64()})
		}
		var w query.Workload
		for range 1 + rng.IntN(3) {
			tt := make(query.Term, d)
			for i, n := range shape {
				tt[i] = randomFactor(rng, n, true)
			}
			w = append(w, query.Weighted{Term: tt, Weight: 0.5 + rng.Float64()})
		}
		want, ok := denseObjective(shape, w, ms)
		got, err := Objective(shape, w, ms)
		if !ok {
			if !errors.Is(err, ErrNotEstimable) {
				t.Errorf("trial %d: dense says not estimable, got %v, %v", trial, got, err)
			}
			continue
		}
		estimable++
		if err != nil {
			t.Errorf("trial %d: %v (dense %v)", trial, err, want)
			continue
		}
		if math.Abs(got-want) > 1e-8*max(1, math.Abs(want)) {
			t.Errorf("trial %d shape %v: objective %v, dense %v", trial, shape, got, want)
		}
	}
	if estimable < 150 {
		t.Errorf("only %d estimable trials", estimable)
	}
}
