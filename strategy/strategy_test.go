package strategy

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/knowdp/knowdp/query"
)

func kinds(n int) []query.Factor {
	fs := []query.Factor{query.NewIdentity(n), query.NewTotal(n), query.NewPrefix(n), query.NewRanges(n)}
	if n > 1 {
		fs = append(fs, query.NewResidual(n), hierarchy(n, 2), hierarchy(n, 3))
	}
	return fs
}

func TestAddRemoveAndGram(t *testing.T) {
	for n := 1; n <= 9; n++ {
		for _, f := range kinds(n) {
			d := f.Dense()
			rows := f.Rows()
			var l1, l2 float64
			for j := range n {
				var a, b float64
				for i := range rows {
					a += math.Abs(d[i*n+j])
					b += d[i*n+j] * d[i*n+j]
				}
				l1, l2 = max(l1, a), max(l2, b)
			}
			g1, g2 := AddRemove(query.Term{f, query.NewIdentity(2)})
			if math.Abs(g1-l1) > 1e-12*l1 || math.Abs(g2-math.Sqrt(l2)) > 1e-12 {
				t.Errorf("%v n=%d: sensitivities %v, %v, dense %v, %v", f.Kind, n, g1, g2, l1, math.Sqrt(l2))
			}
			g := gram(f)
			for j := range n {
				for k := range n {
					var s float64
					for i := range rows {
						s += d[i*n+j] * d[i*n+k]
					}
					if math.Abs(g[j*n+k]-s) > 1e-12*max(1, math.Abs(s)) {
						t.Fatalf("%v n=%d: Gram (%d,%d) %v, dense %v", f.Kind, n, j, k, g[j*n+k], s)
					}
				}
			}
			if fr := frobenius2(f); math.Abs(fr-mat.Trace(mat.NewDense(n, n, g))) > 1e-9*fr {
				t.Errorf("%v n=%d: ‖F‖² %v", f.Kind, n, fr)
			}
		}
	}
}

func TestSingularSumAgainstDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 60 {
		d := 1 + rng.IntN(3)
		shape := make([]int, d)
		for i := range shape {
			shape[i] = 1 + rng.IntN(4)
		}
		var w query.Workload
		for range 1 + rng.IntN(3) {
			tt := make(query.Term, d)
			for i, n := range shape {
				tt[i] = randomFactor(rng, n, true)
			}
			w = append(w, query.Weighted{Term: tt, Weight: 0.3 + 2*rng.Float64()})
		}
		// Stack sqrt(w) W and sum its singular values.
		var stack []*mat.Dense
		rows := 0
		for _, x := range w {
			m := denseTerm(x.Term)
			m.Scale(math.Sqrt(x.Weight), m)
			stack = append(stack, m)
			r, _ := m.Dims()
			rows += r
		}
		_, cells := stack[0].Dims()
		all := mat.NewDense(rows, cells, nil)
		r0 := 0
		for _, m := range stack {
			r, _ := m.Dims()
			all.Slice(r0, r0+r, 0, cells).(*mat.Dense).Copy(m)
			r0 += r
		}
		var svd mat.SVD
		if !svd.Factorize(all, mat.SVDNone) {
			t.Fatal("svd")
		}
		var want float64
		for _, v := range svd.Values(nil) {
			want += v
		}
		got, err := SingularSum(shape, w)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if math.Abs(got-want) > 1e-8*max(1, want) {
			t.Errorf("trial %d shape %v: Σσ %v, dense %v", trial, shape, got, want)
		}
	}
}

// TestSVDBoundPinned pins the bound's constants to independent numbers:
// numpy's singular values of the 50-value prefix and range matrices
// (2 (Σσ)²/(eps² N) at eps = 1, (Σσ)²/(2 rho N) at rho = 1), and
// ResidualPlanner's own optimum for the arrests two-way marginals, which
// the Gaussian bound meets.
func TestSVDBoundPinned(t *testing.T) {
	for _, c := range []struct {
		shape []int
		w     query.Workload
		mech  Mechanism
		want  float64
	}{
		{[]int{50}, query.Workload{{Term: query.Term{query.NewPrefix(50)}, Weight: 1}}, Laplace, 386.045891923174},
		{[]int{50}, query.Workload{{Term: query.Term{query.NewPrefix(50)}, Weight: 1}}, Gaussian, 96.5114729807935},
		{[]int{50}, query.Workload{{Term: query.Term{query.NewRanges(50)}, Weight: 1}}, Laplace, 12054.41327842723},
		{arrestsShape, kway(arrestsShape, 2), Gaussian, 1609.811208},
	} {
		b, err := SVDBound(c.shape, c.w, c.mech, 1)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(b.Value-c.want) > 1e-9*c.want {
			t.Errorf("%v %v: bound %.12g, want %.12g", c.shape, c.mech, b.Value, c.want)
		}
		if !strings.Contains(b.Over, "every strategy") {
			t.Errorf("bound says it bounds %q", b.Over)
		}
	}
}

func randomMarginals(rng *rand.Rand) ([]int, query.Workload) {
	d := 1 + rng.IntN(5)
	shape := make([]int, d)
	for i := range shape {
		shape[i] = 1 + rng.IntN(5)
	}
	var w query.Workload
	seen := map[uint64]bool{}
	for range 1 + rng.IntN(6) {
		m := rng.Uint64() & (1<<d - 1)
		if seen[m] {
			continue
		}
		seen[m] = true
		w = append(w, query.Weighted{Term: marginalTerm(shape, m), Weight: 0.2 + 3*rng.Float64()})
	}
	return shape, w
}

// TestGaussianMeetsSVDBound: on random weighted marginal workloads the
// residual strategy's objective is the SVD bound (optimal over every
// strategy), every measurement's noise is calibrated to its share, and
// the shares add up to 1.
func TestGaussianMeetsSVDBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 100 {
		shape, w := randomMarginals(rng)
		rho := 0.1 + 2*rng.Float64()
		st, err := Optimize(context.Background(), shape, w, Gaussian, rho, Options{})
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if math.Abs(st.Objective-st.LowerBound.Value) > 1e-9*st.Objective {
			t.Errorf("trial %d: objective %.12g, SVD bound %.12g", trial, st.Objective, st.LowerBound.Value)
		}
		var shares float64
		for _, m := range st.Measurements {
			shares += m.Share
			want := m.L2 * m.L2 / (2 * m.Share * rho)
			if math.Abs(m.Variance-want) > 1e-12*want {
				t.Errorf("trial %d: variance %v, want %v", trial, m.Variance, want)
			}
			if l1, l2 := AddRemove(m.Term); l1 != m.L1 || l2 != m.L2 {
				t.Errorf("trial %d: sensitivities %v %v, want %v %v", trial, m.L1, m.L2, l1, l2)
			}
		}
		if math.Abs(shares-1) > 1e-12 {
			t.Errorf("trial %d: shares add up to %v", trial, shares)
		}
	}
}

// TestMaxVariance: the max-variance strategy is certified by its dual
// bound, never worse than the sum-of-variances strategy on its own
// objective, and random feasible strategies of the family never beat the
// bound.
func TestMaxVariance(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	maxVar := func(shape []int, w query.Workload, ms []Measurement) float64 {
		per, err := TermErrors(shape, w, ms)
		if err != nil {
			t.Fatal(err)
		}
		var m float64
		for i, v := range per {
			m = max(m, v/float64(w[i].Term.Rows()))
		}
		return m
	}
	for trial := range 60 {
		shape, w := randomMarginals(rng)
		st, err := Optimize(context.Background(), shape, w, Gaussian, 1, Options{MaxVariance: true})
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if got := maxVar(shape, w, st.Measurements); math.Abs(got-st.Objective) > 1e-9*got {
			t.Errorf("trial %d: objective %v, recomputed %v", trial, st.Objective, got)
		}
		gap := (st.Objective - st.LowerBound.Value) / st.Objective
		if gap > 1e-6 || gap < -1e-12 {
			t.Errorf("trial %d: gap %v (objective %v, bound %v)", trial, gap, st.Objective, st.LowerBound.Value)
		}
		sum, err := Optimize(context.Background(), shape, w, Gaussian, 1, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if mv := maxVar(shape, w, sum.Measurements); mv < st.Objective*(1-1e-9) {
			t.Errorf("trial %d: the sum-of-variances strategy has max variance %v < %v", trial, mv, st.Objective)
		}
		// Random variances on the same residuals, rescaled to spend rho.
		for range 5 {
			ms := append([]Measurement(nil), st.Measurements...)
			var cost float64
			for i := range ms {
				ms[i].Variance *= math.Exp(rng.NormFloat64())
				cost += ms[i].L2 * ms[i].L2 / (2 * ms[i].Variance)
			}
			for i := range ms {
				ms[i].Variance *= cost
			}
			if mv := maxVar(shape, w, ms); mv < st.LowerBound.Value*(1-1e-9) {
				t.Errorf("trial %d: a feasible strategy has max variance %v below the bound %v", trial, mv, st.LowerBound.Value)
			}
		}
	}
}

// TestLaplaceAgainstGrid: on two-dimensional domains (four cuboids) the
// lattice search is at least as good as a grid over the shares, each
// point scored by the exact Objective.
func TestLaplaceAgainstGrid(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for trial := range 12 {
		shape := []int{2 + rng.IntN(4), 2 + rng.IntN(4)}
		var w query.Workload
		for m := range uint64(4) {
			if rng.IntN(2) == 0 || (m == 3 && len(w) == 0) {
				w = append(w, query.Weighted{Term: marginalTerm(shape, m), Weight: 0.2 + 3*rng.Float64()})
			}
		}
		eps := 0.5 + rng.Float64()
		st, err := Optimize(context.Background(), shape, w, Laplace, eps, Options{})
		if err != nil {
			t.Fatal(err)
		}
		best := math.Inf(1)
		const steps = 40
		for a := 0; a <= steps; a++ {
			for b := 0; a+b <= steps; b++ {
				for c := 0; a+b+c <= steps; c++ {
					x := []float64{float64(a), float64(b), float64(c), float64(steps - a - b - c)}
					var ms []Measurement
					for k, v := range x {
						if v == 0 {
							continue
						}
						share := v / steps
						ms = append(ms, Measurement{Term: marginalTerm(shape, uint64(k)), Variance: variance(Laplace, 1, 1, share, eps)})
					}
					f, err := Objective(shape, w, ms)
					if errors.Is(err, ErrNotEstimable) {
						continue
					}
					if err != nil {
						t.Fatal(err)
					}
					best = min(best, f)
				}
			}
		}
		if st.Objective > best*(1+1e-9) {
			t.Errorf("trial %d shape %v: search %v, grid %v", trial, shape, st.Objective, best)
		}
		if st.Objective < st.LowerBound.Value*(1-1e-12) {
			t.Errorf("trial %d: objective %v below the SVD bound %v", trial, st.Objective, st.LowerBound.Value)
		}
	}
}

func TestPIdentityGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, mech := range []Mechanism{Laplace, Gaussian} {
		n, p := 7, 2
		g := gram(query.NewRanges(n))
		pi := &pIdentity{n: n, p: p, g: mat.NewSymDense(n, g), l2: mech == Gaussian}
		x := make([]float64, n*p)
		for i := range x {
			x[i] = 0.2 + rng.Float64()
		}
		grad := make([]float64, len(x))
		f := pi.loss(x, grad)
		// The loss is the exact cost of the factor it describes.
		fac := pi.factor(x)
		if c := factorCost(g, gram(fac), n); math.Abs(c-f) > 1e-9*f {
			t.Errorf("%v: loss %v, cost of the factor %v", mech, f, c)
		}
		if s := sensOf(fac, mech); math.Abs(s-1) > 1e-12 {
			t.Errorf("%v: factor sensitivity %v, want 1", mech, s)
		}
		for i := range x {
			h := 1e-6
			xp := append([]float64(nil), x...)
			xm := append([]float64(nil), x...)
			xp[i] += h
			xm[i] -= h
			fd := (pi.loss(xp, nil) - pi.loss(xm, nil)) / (2 * h)
			if math.Abs(fd-grad[i]) > 1e-5*max(1, math.Abs(fd)) {
				t.Errorf("%v: ∂/∂θ_%d = %v, finite difference %v", mech, i, grad[i], fd)
			}
		}
	}
}

func TestLBFGS(t *testing.T) {
	rosen := func(x, g []float64) float64 {
		a, b := 1-x[0], x[1]-x[0]*x[0]
		g[0] = -2*a - 400*x[0]*b
		g[1] = 200 * b
		return a*a + 100*b*b
	}
	x, f := lbfgs(context.Background(), rosen, []float64{-1.2, 1}, 1000)
	if f > 1e-10 || math.Abs(x[0]-1) > 1e-4 || math.Abs(x[1]-1) > 1e-4 {
		t.Errorf("Rosenbrock: %v at %v", f, x)
	}
}

// TestOrderedMultiDim: a prefix workload crossed with marginal factors is
// planned, and the objective is the dense one.
func TestOrderedMultiDim(t *testing.T) {
	shape := []int{3, 6}
	w := query.Workload{
		{Term: query.Term{query.NewIdentity(3), query.NewPrefix(6)}, Weight: 1},
		{Term: query.Term{query.NewTotal(3), query.NewRanges(6)}, Weight: 0.5},
	}
	for _, mech := range []Mechanism{Laplace, Gaussian} {
		st, err := Optimize(context.Background(), shape, w, mech, 1, Options{})
		if err != nil {
			t.Fatal(err)
		}
		want, ok := denseObjective(shape, w, st.Measurements)
		if !ok || math.Abs(want-st.Objective) > 1e-8*want {
			t.Errorf("%v: objective %v, dense %v (%v)", mech, st.Objective, want, ok)
		}
		if st.Objective < st.LowerBound.Value {
			t.Errorf("%v: objective %v below the bound %v", mech, st.Objective, st.LowerBound.Value)
		}
		// Identity everywhere is in every family searched.
		id := Measurement{Term: query.Term{query.NewIdentity(3), query.NewIdentity(6)}, L1: 1, L2: 1, Share: 1}
		id.Variance = variance(mech, 1, 1, 1, 1)
		base, err := Objective(shape, w, []Measurement{id})
		if err != nil {
			t.Fatal(err)
		}
		if st.Objective > base {
			t.Errorf("%v: objective %v worse than the identity's %v", mech, st.Objective, base)
		}
	}
}

func TestSensitivityCallback(t *testing.T) {
	shape := []int{3, 4}
	w := kway(shape, 1, 2)
	plain, err := Optimize(context.Background(), shape, w, Gaussian, 1, Options{})
	if err != nil {
		t.Fatal(err)
	}
	double := func(t query.Term) (float64, float64, error) {
		l1, l2 := AddRemove(t)
		return 2 * l1, 2 * l2, nil
	}
	st, err := Optimize(context.Background(), shape, w, Gaussian, 1, Options{Sensitivity: double})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(st.Objective-4*plain.Objective) > 1e-9*st.Objective {
		t.Errorf("doubled sensitivities: %v, want 4 × %v", st.Objective, plain.Objective)
	}
	if st.LowerBound.Value != 0 || !strings.HasPrefix(st.LowerBound.Over, "none") {
		t.Errorf("a bound is stated under other sensitivities: %+v", st.LowerBound)
	}
	fail := func(query.Term) (float64, float64, error) { return 0, 0, errors.New("no closed form") }
	if _, err := Optimize(context.Background(), shape, w, Laplace, 1, Options{Sensitivity: fail}); err == nil || !strings.Contains(err.Error(), "no closed form") {
		t.Errorf("a failing sensitivity gave %v", err)
	}
}

func TestOptimizeErrors(t *testing.T) {
	shape := []int{2, 3}
	w := kway(shape, 1)
	ctx := context.Background()
	for _, c := range []struct {
		shape []int
		w     query.Workload
		mech  Mechanism
		b     float64
		opt   Options
		want  string
	}{
		{shape, w, Gaussian, 0, Options{}, "rho must be finite and > 0"},
		{shape, w, Laplace, math.Inf(1), Options{}, "epsilon must be finite and > 0"},
		{shape, nil, Laplace, 1, Options{}, "empty workload"},
		{[]int{2, 0}, w, Laplace, 1, Options{}, "dimension 2 has 0 values"},
		{[]int{2, 4}, w, Laplace, 1, Options{}, "factor 2 has 3 columns"},
		{shape, w, Laplace, 1, Options{MaxVariance: true}, "Gaussian noise only"},
		{shape, query.Workload{{Term: query.Term{query.NewPrefix(2), query.NewTotal(3)}, Weight: 1}}, Gaussian, 1, Options{MaxVariance: true}, "term 1 is not"},
		{shape, query.Workload{{Term: marginalTerm(shape, 1), Weight: -1}}, Gaussian, 1, Options{}, "weight must be finite and > 0"},
	} {
		_, err := Optimize(ctx, c.shape, c.w, c.mech, c.b, c.opt)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %v %v: got %v, want %q", c.shape, c.mech, c.b, err, c.want)
		}
	}
	// A cancelled context stops a search.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Optimize(cctx, arrestsShape, kway(arrestsShape, 2), Laplace, 1, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestObjectiveErrors(t *testing.T) {
	shape := []int{2, 3}
	w := kway(shape, 2)
	m := Measurement{Term: marginalTerm(shape, 1), Variance: 1}
	if _, err := Objective(shape, w, []Measurement{m}); !errors.Is(err, ErrNotEstimable) {
		t.Errorf("a table not covered: %v", err)
	}
	m.Variance = 0
	if _, err := Objective(shape, w, []Measurement{m}); err == nil || !strings.Contains(err.Error(), "measurement 1: variance") {
		t.Errorf("zero variance: %v", err)
	}
}
