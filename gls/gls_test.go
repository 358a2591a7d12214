package gls

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/knowdp/knowdp/query"
)

// checkAgainstDense solves setup s for each candidate query alone and
// compares, with the dense null-space solution: the decision that the
// query is determined, its estimate, the error law of a row and every
// row's variance. It returns how many candidates were determined.
func checkAgainstDense(t *testing.T, rng *rand.Rand, s *randomSetup, denseMax int, pre Preconditioner) int {
	t.Helper()
	ctx := context.Background()
	g := solveDense(s.p, s.meas, s.inv)
	det := 0
	for qi, qt := range s.candidates {
		want := g.determinedDense(qt)
		p := s.p
		p.Queries = []Query{{Name: "q", Term: qt}}
		pl, err := newPlan(p, Options{Preconditioner: pre}, denseMax)
		if !want {
			if err == nil || !strings.Contains(err.Error(), "not determined") {
				t.Fatalf("candidate %d (%v): dense says undetermined, NewPlan returned %v", qi, kinds(qt), err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("candidate %d (%v): dense says determined, NewPlan: %v", qi, kinds(qt), err)
		}
		det++
		est, err := pl.Solve(ctx, s.meas, s.inv)
		if err != nil {
			t.Fatalf("candidate %d: Solve: %v", qi, err)
		}
		if est.Certificate.Residual > est.Certificate.Tolerance {
			t.Fatalf("candidate %d: certificate %+v", qi, est.Certificate)
		}
		q := denseTerm(qt)
		rows, _ := q.Dims()
		wantAns := mat.NewVecDense(rows, nil)
		wantAns.MulVec(q, g.x)
		scale := 1 + maxAbs(wantAns.RawVector().Data)
		for r := range rows {
			if d := math.Abs(est.Answers[0][r] - wantAns.AtVec(r)); d > 1e-6*scale {
				t.Fatalf("candidate %d (%v) row %d: got %v, dense %v", qi, kinds(qt), r, est.Answers[0][r], wantAns.AtVec(r))
			}
		}
		// One row's law.
		row := rng.IntN(rows)
		law, err := pl.Law(ctx, 0, row)
		if err != nil {
			t.Fatal(err)
		}
		coefs, v := g.lawDense(q.RawRowView(row))
		var got []float64
		for _, c := range law.Coefs {
			got = append(got, c...)
		}
		cs := 1e-6 * (1 + maxAbs(coefs))
		for k := range got {
			if math.Abs(got[k]-coefs[k]) > cs {
				t.Fatalf("candidate %d (%v) row %d: coefficient %d is %v, dense %v", qi, kinds(qt), row, k, got[k], coefs[k])
			}
		}
		if math.Abs(law.Variance-v) > 1e-6*(1+v) {
			t.Fatalf("candidate %d row %d: variance %v, dense %v", qi, row, law.Variance, v)
		}
		vars, err := pl.Variances(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		for r := range rows {
			_, v := g.lawDense(q.RawRowView(r))
			if math.Abs(vars.Values[r]-v) > 1e-6*(1+v) {
				t.Fatalf("candidate %d (%v) row %d: Variances %v, dense %v (%d solves)", qi, kinds(qt), r, vars.Values[r], v, vars.Solves)
			}
		}
	}
	return det
}

func kinds(t query.Term) string {
	var s []string
	for _, f := range t {
		s = append(s, f.Kind.String())
	}
	return strings.Join(s, "x")
}

func TestRandomProblemsAgainstDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 40
	if testing.Short() {
		n = 12
	}
	det, total := 0, 0
	for it := range n {
		D := 2 + rng.IntN(2)
		shape := make([]int, D)
		for d := range shape {
			shape[d] = 2 + rng.IntN(4)
		}
		s := newRandomSetup(rng, shape, 2+rng.IntN(3), rng.IntN(3))
		pre := Preconditioner(it % 3)
		t.Run(fmt.Sprintf("%d_%v_%s", it, shape, pre), func(t *testing.T) {
			det += checkAgainstDense(t, rng, s, defaultDenseMax, pre)
		})
		total += len(s.candidates)
	}
	// The draws must exercise both answers.
	if det == 0 || det == total {
		t.Fatalf("%d of %d candidates determined", det, total)
	}
	t.Logf("%d of %d candidate queries determined", det, total)
}

// TestHaarAxesAgainstDense runs the same comparisons with every dimension
// given the chain's Haar basis instead of an explicit one (as dimensions
// over 256 values are), and the tree preconditioner.
func TestHaarAxesAgainstDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	n := 30
	if testing.Short() {
		n = 10
	}
	for it := range n {
		D := 2 + rng.IntN(2)
		shape := make([]int, D)
		for d := range shape {
			shape[d] = 2 + rng.IntN(5)
		}
		s := newRandomSetup(rng, shape, 2+rng.IntN(3), rng.IntN(3))
		t.Run(fmt.Sprintf("%d_%v", it, shape), func(t *testing.T) {
			checkAgainstDense(t, rng, s, 1, Kronecker)
		})
	}
}

// TestTwoHierarchies: two hierarchies measured at coarse levels, crossed
// with a flat dimension, invariants at several levels of both, redundant
// measurements: the census shape in miniature.
func TestTwoHierarchies(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	geo := []int32{0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 4, 4} // 12 counties in 5 states
	state := []int32{0, 0, 1, 1, 1}                    // 5 states in 2 regions
	age := []int32{0, 0, 0, 1, 1, 2, 2, 2, 3}          // 9 years in 4 bands
	band := []int32{0, 0, 1, 1}                        // 4 bands in 2 broad
	compose := func(a, b []int32) []int32 {
		out := make([]int32, len(a))
		for i, g := range a {
			out[i] = b[g]
		}
		return out
	}
	ru := func(g []int32) query.Factor {
		f, err := query.NewRollUp(g)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	gState, gRegion := ru(geo), ru(compose(geo, state))
	aBand, aBroad := ru(age), ru(compose(age, band))
	shape := []int{12, 9, 2}
	T := query.NewTotal
	I := query.NewIdentity
	s := &randomSetup{p: Problem{Shape: shape}}
	truth := make([]float64, 12*9*2)
	for i := range truth {
		truth[i] = float64(rng.IntN(30))
	}
	add := func(tm query.Term, v float64) {
		s.p.Measurements = append(s.p.Measurements, Measurement{Term: tm, Variance: v})
		z := tm.Apply(truth)
		for r := range z {
			z[r] += rng.NormFloat64() * math.Sqrt(v)
		}
		s.meas = append(s.meas, z)
	}
	add(query.Term{gState, aBand, I(2)}, 1)   // state x band x sex
	add(query.Term{I(12), aBroad, T(2)}, 2)   // county x broad
	add(query.Term{gRegion, I(9), T(2)}, 1.5) // region x single year
	add(query.Term{gState, aBand, I(2)}, 4)   // redundant: the same table again
	add(query.Term{T(12), T(9), I(2)}, 0.5)   // sex totals
	for _, tm := range []query.Term{{gState, T(9), T(2)}, {gRegion, aBroad, T(2)}, {T(12), T(9), T(2)}} {
		s.p.Invariants = append(s.p.Invariants, Invariant{Term: tm})
		s.inv = append(s.inv, tm.Apply(truth))
	}
	s.candidates = []query.Term{
		{gState, aBand, I(2)}, {I(12), aBroad, T(2)}, {gRegion, I(9), T(2)},
		{gState, aBroad, T(2)}, {gRegion, aBand, I(2)}, {T(12), I(9), T(2)},
		{I(12), aBand, T(2)}, {gState, I(9), T(2)}, {I(12), T(9), I(2)}, // undetermined
	}
	for _, dm := range []int{defaultDenseMax, 1} {
		for _, pre := range []Preconditioner{Kronecker, Jacobi} {
			if got := checkAgainstDense(t, rng, s, dm, pre); got != 6 {
				t.Fatalf("denseMax %d, %v: %d determined, want 6", dm, pre, got)
			}
		}
	}
}

// TestSweepIsProjection checks that one sweep of per-invariant projections
// is the orthogonal projection onto {E x = e}, against the dense x_p + Z
// Z^T (y - x_p), for invariants at several levels of two hierarchies.
func TestSweepIsProjection(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for it := range 20 {
		shape := []int{3 + rng.IntN(5), 3 + rng.IntN(5), 2}
		chains := [][]partition{randomChain(rng, shape[0], 3), randomChain(rng, shape[1], 3), nil}
		cells := shape[0] * shape[1] * shape[2]
		truth := make([]float64, cells)
		for i := range truth {
			truth[i] = rng.NormFloat64()
		}
		var invs []invTerm
		var vals [][]float64
		var es []*mat.Dense
		var ev []float64
		for range 1 + rng.IntN(4) {
			tm := make(query.Term, 3)
			for d, n := range shape {
				tm[d] = randomFactor(rng, n, chains[d], partKinds)
			}
			invs = append(invs, newInvTerm(tm))
			v := tm.Apply(truth)
			vals = append(vals, v)
			es = append(es, denseTerm(tm))
			ev = append(ev, v...)
		}
		y := make([]float64, cells)
		for i := range y {
			y[i] = rng.NormFloat64() * 3
		}
		got := slices.Clone(y)
		sweep(got, invs, vals, nil)
		E := stack(cells, es...)
		ep, _ := pinv(E)
		// y - E^+ (E y - e) is the orthogonal projection onto the affine set.
		ey := mat.NewVecDense(len(ev), nil)
		ey.MulVec(E, mat.NewVecDense(cells, y))
		ey.SubVec(ey, mat.NewVecDense(len(ev), ev))
		corr := mat.NewVecDense(cells, nil)
		corr.MulVec(ep, ey)
		for c := range cells {
			want := y[c] - corr.AtVec(c)
			if math.Abs(got[c]-want) > 1e-10 {
				t.Fatalf("draw %d cell %d: sweep %v, dense projection %v", it, c, got[c], want)
			}
		}
	}
}

func TestInconsistentInvariants(t *testing.T) {
	state, err := query.NewRollUp([]int32{0, 0, 1, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	p := Problem{
		Shape:        []int{5, 2},
		Measurements: []Measurement{{Term: query.Term{query.NewIdentity(5), query.NewIdentity(2)}, Variance: 1}},
		Invariants: []Invariant{
			{Name: "state by sex", Term: query.Term{state, query.NewIdentity(2)}},
			{Name: "sex", Term: query.Term{query.NewTotal(5), query.NewIdentity(2)}},
		},
	}
	pl, err := NewPlan(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = pl.Solve(context.Background(), [][]float64{make([]float64, 10)}, [][]float64{{1, 2, 3, 4}, {4, 7}})
	if err == nil || !strings.Contains(err.Error(), `"state by sex" and invariant "sex"`) || !strings.Contains(err.Error(), "cell [0 1]") {
		t.Fatalf("got %v", err)
	}
	if _, err := pl.Solve(context.Background(), [][]float64{make([]float64, 10)}, [][]float64{{1, 2, 3, 4}, {4, 6}}); err != nil {
		t.Fatal(err)
	}
}

func TestRefusals(t *testing.T) {
	I, T := query.NewIdentity, query.NewTotal
	a, _ := query.NewRollUp([]int32{0, 0, 1, 1})
	b, _ := query.NewRollUp([]int32{0, 1, 0, 1})
	meas := []Measurement{{Term: query.Term{I(4), I(3)}, Variance: 1}}
	cases := []struct {
		name string
		p    Problem
		want string
	}{
		{"prefix invariant", Problem{Shape: []int{4, 3}, Measurements: meas,
			Invariants: []Invariant{{Term: query.Term{query.NewPrefix(4), T(3)}}}}, "invariant 1: factor 0 is prefix"},
		{"crossing invariants", Problem{Shape: []int{4, 3}, Measurements: meas,
			Invariants: []Invariant{{Name: "A", Term: query.Term{a, T(3)}}, {Name: "B", Term: query.Term{b, T(3)}}}}, `invariant "A" and invariant "B": their partitions of dimension 0 are not nested`},
		{"undetermined", Problem{Shape: []int{4, 3}, Measurements: []Measurement{{Term: query.Term{a, I(3)}, Variance: 1}},
			Queries: []Query{{Name: "detail", Term: query.Term{I(4), T(3)}}}}, `query "detail" is not determined: along dimension 0 it tells apart values that every measurement and invariant adds together`},
		{"undetermined in the atoms", Problem{Shape: []int{4, 3}, Measurements: []Measurement{{Term: query.Term{a, I(3)}, Variance: 1}, {Term: query.Term{I(4), T(3)}, Variance: 1}},
			Queries: []Query{{Name: "detail", Term: query.Term{I(4), I(3)}}}}, `query "detail" is not determined by the measurements and invariants: none of them observes its component made of (dimension 0: a 2-dimensional part of the differences among its values; dimension 1: the differences among its values)`},
		{"variance", Problem{Shape: []int{4, 3}, Measurements: []Measurement{{Name: "m", Term: query.Term{I(4), I(3)}, Variance: 0}}}, `measurement "m": the noise variance`},
		{"shape", Problem{Shape: []int{4, 3}, Measurements: []Measurement{{Term: query.Term{I(4), I(2)}, Variance: 1}}}, "measurement 1: factor 1 has 2 columns"},
	}
	for _, c := range cases {
		_, err := NewPlan(c.p, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

// TestTreeSolve checks the tree passes against a dense solve of the
// constrained one-dimensional problem.
func TestTreeSolve(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for it := range 50 {
		n := 3 + rng.IntN(12)
		parts := randomChain(rng, n, 3)
		ch, _, ok := newChain(n, parts)
		if !ok {
			t.Fatal("not nested")
		}
		L := ch.top()
		pl := &Plan{axes: []*axis{{n: n, chain: ch}}, shape: []int{n}, cells: n, pre: &precond{tree: 0}}
		w := pl.newWork()
		prec := make([]float64, L+1)
		for l := range prec {
			if rng.IntN(3) > 0 {
				prec[l] = rng.Float64() * 3
			}
		}
		lstar := rng.IntN(L+2) - 1
		r := make([]float64, n)
		for i := range r {
			r[i] = rng.NormFloat64()
		}
		// Dense: M = Σ prec_l R_l^T R_l; Y spans the range of M within the
		// constraint; u = Y (Y^T M Y)^+ Y^T r.
		M := mat.NewDense(n, n, nil)
		var rs []*mat.Dense
		for l, lv := range ch.lv {
			R := mat.NewDense(lv.part.groups, n, nil)
			for x, g := range lv.part.of {
				R.Set(int(g), x, 1)
			}
			rs = append(rs, R)
			var g mat.Dense
			g.Mul(R.T(), R)
			g.Scale(prec[l], &g)
			M.Add(M, &g)
		}
		var proj *mat.Dense = identity(n)
		if lstar >= 0 {
			rp, _ := pinv(rs[lstar])
			var pr mat.Dense
			pr.Mul(rp, rs[lstar])
			proj.Sub(identity(n), &pr)
		}
		var pm, pmp mat.Dense
		pm.Mul(proj, M)
		pmp.Mul(&pm, proj)
		pp, _ := pinvAbove(&pmp, 1e-10*(1+mat.Norm(M, 2)))
		want := mat.NewVecDense(n, nil)
		pr := mat.NewVecDense(n, nil)
		pr.MulVec(proj, mat.NewVecDense(n, r))
		want.MulVec(pp, pr)
		u := make([]float64, n)
		pl.treeSolve(pr.RawVector().Data, u, prec, lstar, w)
		for x := range n {
			if math.Abs(u[x]-want.AtVec(x)) > 1e-9*(1+maxAbs(want.RawVector().Data)) {
				t.Fatalf("draw %d (n %d, prec %v, lstar %d): u[%d] = %v, dense %v", it, n, prec, lstar, x, u[x], want.AtVec(x))
			}
		}
	}
}

// TestHaar checks the Haar basis is orthonormal, that the inverse undoes
// the forward transform, and the closed form of a level's Gram diagonal.
func TestHaar(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for range 20 {
		n := 2 + rng.IntN(15)
		ch, _, _ := newChain(n, randomChain(rng, n, 3))
		h := newHaar(ch)
		U := mat.NewDense(n, n, nil)
		for k := range n {
			U.SetCol(k, h.vector(k))
		}
		var utu mat.Dense
		utu.Mul(U.T(), U)
		if !mat.EqualApprox(&utu, identity(n), 1e-12) {
			t.Fatalf("n %d: U^T U != I", n)
		}
		x := make([]float64, n)
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		c, back, s := make([]float64, n), make([]float64, n), make([]float64, h.nodes)
		h.forward(x, c, s)
		want := mat.NewVecDense(n, nil)
		want.MulVec(U.T(), mat.NewVecDense(n, x))
		for k := range n {
			if math.Abs(c[k]-want.AtVec(k)) > 1e-12 {
				t.Fatalf("coefficient %d: %v, want %v", k, c[k], want.AtVec(k))
			}
		}
		h.inverse(c, back, s)
		for i := range x {
			if math.Abs(back[i]-x[i]) > 1e-12 {
				t.Fatalf("inverse: %v, want %v", back[i], x[i])
			}
		}
		sq := h.sumSq()
		for l, lv := range ch.lv {
			f, _ := query.NewRollUp(lv.part.of)
			got := h.partDiag(l, sq)
			for k := range n {
				if want := qform(f, h.vector(k)); math.Abs(got[k]-want) > 1e-10 {
					t.Fatalf("level %d vector %d: %v, want %v", l, k, got[k], want)
				}
			}
		}
	}
}

// TestQform pins the quadratic forms to the dense Grams.
func TestQform(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, n := range []int{1, 2, 5, 9} {
		chain := randomChain(rng, n, 2)
		for _, k := range allKinds {
			if k == query.Residual && n < 2 {
				continue
			}
			f := randomFactor(rng, n, chain, []query.Kind{k})
			u := make([]float64, n)
			for i := range u {
				u[i] = rng.NormFloat64()
			}
			F := mat.NewDense(f.Rows(), n, f.Dense())
			fu := mat.NewVecDense(f.Rows(), nil)
			fu.MulVec(F, mat.NewVecDense(n, u))
			want := mat.Dot(fu, fu)
			if got := qform(f, u); math.Abs(got-want) > 1e-10*(1+want) {
				t.Errorf("%v n %d: qform %v, want %v", k, n, got, want)
			}
			var g mat.Dense
			g.Mul(F.T(), F)
			gd := gramDense(f)
			cs := colSq(f)
			for a := range n {
				if math.Abs(cs[a]-g.At(a, a)) > 1e-10 {
					t.Errorf("%v n %d: colSq[%d] %v, want %v", k, n, a, cs[a], g.At(a, a))
				}
				for b := range n {
					if math.Abs(gd[a*n+b]-g.At(a, b)) > 1e-10 {
						t.Errorf("%v n %d: gram[%d,%d] %v, want %v", k, n, a, b, gd[a*n+b], g.At(a, b))
					}
				}
			}
		}
	}
}

// TestReduction: a dimension used only as a total is summed out, and a
// hierarchy used only at coarse levels is solved at its finest used level;
// the answers equal the dense solve over the whole domain.
func TestReduction(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	state, _ := query.NewRollUp([]int32{0, 0, 0, 1, 1, 2, 2, 2})
	region, _ := query.NewRollUp([]int32{0, 0, 0, 0, 0, 1, 1, 1})
	I, T := query.NewIdentity, query.NewTotal
	s := &randomSetup{p: Problem{Shape: []int{8, 3, 4}}}
	truth := make([]float64, 8*3*4)
	for i := range truth {
		truth[i] = float64(rng.IntN(9))
	}
	for _, tm := range []query.Term{{state, I(3), T(4)}, {region, T(3), T(4)}, {state, T(3), T(4)}} {
		s.p.Measurements = append(s.p.Measurements, Measurement{Term: tm, Variance: 1})
		z := tm.Apply(truth)
		for r := range z {
			z[r] += rng.NormFloat64()
		}
		s.meas = append(s.meas, z)
	}
	s.p.Invariants = []Invariant{{Term: query.Term{region, I(3), T(4)}}}
	s.inv = [][]float64{s.p.Invariants[0].Term.Apply(truth)}
	s.candidates = []query.Term{{state, I(3), T(4)}, {region, I(3), T(4)}, {T(8), I(3), T(4)}, {I(8), T(3), T(4)}, {state, T(3), I(4)}}
	if got := checkAgainstDense(t, rng, s, defaultDenseMax, Kronecker); got != 3 {
		t.Fatalf("%d determined, want 3", got)
	}
	pl, err := NewPlan(s.p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pl.Shape(); !slices.Equal(got, []int{3, 3, 1}) {
		t.Fatalf("reduced shape %v, want [3 3 1]", got)
	}
}

// TestCertificate: a tolerance the iteration cap cannot reach is an error
// stating the residual reached.
func TestCertificate(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	s := newRandomSetup(rng, []int{6, 5, 4}, 4, 1)
	pl, err := NewPlan(s.p, Options{MaxIterations: 1, Preconditioner: NoPreconditioner})
	if err != nil {
		t.Fatal(err)
	}
	_, err = pl.Solve(context.Background(), s.meas, s.inv)
	if err == nil || !strings.Contains(err.Error(), "after 1 iterations, not the tolerance 1e-10") {
		t.Fatalf("got %v", err)
	}
}

// TestKronApply pins the package's Kronecker products to query.Term's.
func TestKronApply(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	var w kronWork
	for range 200 {
		D := 1 + rng.IntN(4)
		shape := make([]int, D)
		tm := make(query.Term, D)
		for d := range shape {
			shape[d] = 1 + rng.IntN(6)
			tm[d] = randomFactor(rng, shape[d], randomChain(rng, shape[d], 2), allKinds)
		}
		x := make([]float64, tm.Cells())
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		y := make([]float64, tm.Rows())
		for i := range y {
			y[i] = rng.NormFloat64()
		}
		for _, c := range []struct {
			got, want []float64
		}{
			{slices.Clone(w.apply(tm, x, false)), tm.Apply(x)},
			{slices.Clone(w.apply(tm, y, true)), tm.ApplyT(y)},
		} {
			if len(c.got) != len(c.want) {
				t.Fatalf("%v: length %d, want %d", kinds(tm), len(c.got), len(c.want))
			}
			for i := range c.got {
				if math.Abs(c.got[i]-c.want[i]) > 1e-12*(1+math.Abs(c.want[i])) {
					t.Fatalf("%v: entry %d is %v, want %v", kinds(tm), i, c.got[i], c.want[i])
				}
			}
		}
		// Chained use: the output of one product as the input of the next.
		back := slices.Clone(w.apply(tm, w.apply(tm, x, false), true))
		want := tm.ApplyT(tm.Apply(x))
		for i := range back {
			if math.Abs(back[i]-want[i]) > 1e-10*(1+math.Abs(want[i])) {
				t.Fatalf("%v: chained entry %d is %v, want %v", kinds(tm), i, back[i], want[i])
			}
		}
	}
}

// TestVarianceClasses checks how many solves Variances takes where the
// symmetries are known by hand, and the variances against the dense ones.
func TestVarianceClasses(t *testing.T) {
	I, T := query.NewIdentity, query.NewTotal
	ru := func(g []int32) query.Factor {
		f, err := query.NewRollUp(g)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	// Exchangeable dimensions: identity rows are one class; prefix rows
	// (five classes) are evaluated through the constant and one contrast.
	exch := Problem{
		Shape: []int{5, 4},
		Measurements: []Measurement{
			{Term: query.Term{I(5), I(4)}, Variance: 1},
			{Term: query.Term{T(5), I(4)}, Variance: 2},
			{Term: query.Term{query.NewResidual(5), T(4)}, Variance: 3},
		},
		Invariants: []Invariant{{Term: query.Term{T(5), T(4)}}},
	}
	// Two hierarchies: counties in states of sizes 3, 2, 4, 1, 2, states
	// in regions {0, 1} and {2, 3, 4}; years in bands of 3, 2, 3, 1, bands
	// in two broad groups. No two states (or regions, bands or broad
	// groups) are alike, so county x broad has 5 x 2 classes and state x
	// band x sex 5 x 4 (the sexes are exchangeable).
	county := []int32{0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 4, 4}
	region := []int32{0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1}
	band := []int32{0, 0, 0, 1, 1, 2, 2, 2, 3}
	broad := []int32{0, 0, 0, 0, 0, 1, 1, 1, 1}
	tree := Problem{
		Shape: []int{12, 9, 2},
		Measurements: []Measurement{
			{Term: query.Term{ru(county), ru(band), I(2)}, Variance: 1},
			{Term: query.Term{I(12), ru(broad), T(2)}, Variance: 2},
			{Term: query.Term{ru(region), I(9), T(2)}, Variance: 1.5},
		},
		Invariants: []Invariant{{Term: query.Term{ru(county), T(9), T(2)}}},
	}
	cases := []struct {
		p      Problem
		q      query.Term
		solves int
	}{
		{exch, query.Term{I(5), I(4)}, 1},
		{exch, query.Term{query.NewPrefix(5), I(4)}, 2},
		{exch, query.Term{query.NewRanges(5), T(4)}, 2},
		{tree, query.Term{I(12), ru(broad), T(2)}, 10},
		{tree, query.Term{ru(county), ru(band), I(2)}, 5 * 4},
	}
	ctx := context.Background()
	for i, c := range cases {
		p := c.p
		p.Queries = []Query{{Term: c.q}}
		pl, err := NewPlan(p, Options{})
		if err != nil {
			t.Fatal(err)
		}
		v, err := pl.Variances(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if v.Solves != c.solves {
			t.Errorf("case %d (%v): %d solves, want %d", i, kinds(c.q), v.Solves, c.solves)
		}
		meas := make([][]float64, len(p.Measurements))
		for j, m := range p.Measurements {
			meas[j] = make([]float64, m.Term.Rows())
		}
		inv := make([][]float64, len(p.Invariants))
		for k, e := range p.Invariants {
			inv[k] = make([]float64, e.Term.Rows())
		}
		g := solveDense(p, meas, inv)
		q := denseTerm(c.q)
		for r := range c.q.Rows() {
			_, want := g.lawDense(q.RawRowView(r))
			if math.Abs(v.Values[r]-want) > 1e-7*(1+want) {
				t.Fatalf("case %d row %d: %v, dense %v", i, r, v.Values[r], want)
			}
		}
	}
}

// TestAnswer: any determined term can be answered after the solve; an
// undetermined one is refused.
func TestAnswer(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	s := newRandomSetup(rng, []int{4, 5, 3}, 4, 2)
	pl, err := NewPlan(s.p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	est, err := pl.Solve(context.Background(), s.meas, s.inv)
	if err != nil {
		t.Fatal(err)
	}
	g := solveDense(s.p, s.meas, s.inv)
	seen := [2]int{}
	for _, qt := range s.candidates {
		got, err := est.Answer(qt)
		if !g.determinedDense(qt) {
			if err == nil || !strings.Contains(err.Error(), "not determined") {
				t.Fatalf("%v: got %v, want a refusal", kinds(qt), err)
			}
			seen[0]++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		seen[1]++
		want := mat.NewVecDense(qt.Rows(), nil)
		want.MulVec(denseTerm(qt), g.x)
		for r := range got {
			if math.Abs(got[r]-want.AtVec(r)) > 1e-6*(1+maxAbs(want.RawVector().Data)) {
				t.Fatalf("%v row %d: %v, dense %v", kinds(qt), r, got[r], want.AtVec(r))
			}
		}
	}
	if seen[0] == 0 || seen[1] == 0 {
		t.Fatalf("refused %d, answered %d: the draw must exercise both", seen[0], seen[1])
	}
}

func TestSolveInputErrors(t *testing.T) {
	I := query.NewIdentity
	p := Problem{
		Shape:        []int{3, 2},
		Measurements: []Measurement{{Name: "m", Term: query.Term{I(3), I(2)}, Variance: 1}},
		Invariants:   []Invariant{{Name: "e", Term: query.Term{query.NewTotal(3), I(2)}}},
	}
	pl, err := NewPlan(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		meas, inv [][]float64
		want      string
	}{
		{[][]float64{{1, 2, 3}}, [][]float64{{1, 2}}, `measurement "m": 3 values for 6 rows`},
		{[][]float64{{1, 2, 3, 4, 5, math.NaN()}}, [][]float64{{1, 2}}, `measurement "m": row 5 is NaN`},
		{[][]float64{{1, 2, 3, 4, 5, 6}}, [][]float64{{1}}, `invariant "e": 1 values for 2 rows`},
		{[][]float64{{1, 2, 3, 4, 5, 6}}, nil, "answers for 0 invariants, the problem has 1"},
	} {
		if _, err := pl.Solve(ctx, c.meas, c.inv); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := pl.Solve(cancelled, [][]float64{{1, 2, 3, 4, 5, 6}}, [][]float64{{1, 2}}); err != context.Canceled {
		t.Errorf("cancelled: got %v", err)
	}
}

// TestExplicitAtoms: partitions that are not nested but commute (two
// crossed halvings of four values), and a rank-deficient given matrix of
// contrasts, split a dimension into atoms found numerically; estimates,
// laws and variances match the dense solve. Partitions that do not
// commute are refused.
func TestExplicitAtoms(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	I, T := query.NewIdentity, query.NewTotal
	ru := func(g ...int32) query.Factor {
		f, err := query.NewRollUp(g)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	contrasts, err := query.NewMatrix(2, 5, []float64{1, -1, 0, 0, 0, 0, 1, 1, -1, -1})
	if err != nil {
		t.Fatal(err)
	}
	truth := make([]float64, 4*5)
	for i := range truth {
		truth[i] = float64(rng.IntN(10))
	}
	s := &randomSetup{p: Problem{Shape: []int{4, 5}}}
	for _, tm := range []query.Term{
		{ru(0, 0, 1, 1), I(5)}, {ru(0, 1, 0, 1), T(5)}, {I(4), contrasts}, {T(4), T(5)},
	} {
		s.p.Measurements = append(s.p.Measurements, Measurement{Term: tm, Variance: 1 + rng.Float64()})
		z := tm.Apply(truth)
		for r := range z {
			z[r] += rng.NormFloat64()
		}
		s.meas = append(s.meas, z)
	}
	s.candidates = []query.Term{
		{ru(0, 0, 1, 1), T(5)}, {ru(0, 1, 0, 1), T(5)}, {I(4), T(5)}, {T(4), contrasts}, {ru(0, 0, 1, 1), contrasts},
		{T(4), I(5)}, {ru(0, 1, 1, 0), T(5)}, {I(4), I(5)},
	}
	for _, pre := range []Preconditioner{Kronecker, Jacobi} {
		if got := checkAgainstDense(t, rng, s, defaultDenseMax, pre); got < 3 || got == len(s.candidates) {
			t.Fatalf("%d of %d determined", got, len(s.candidates))
		}
	}
	p := s.p
	p.Measurements = append(p.Measurements, Measurement{Name: "crossing", Term: query.Term{ru(0, 0, 1, 2), T(5)}, Variance: 1})
	if _, err := NewPlan(p, Options{}); err == nil || !strings.Contains(err.Error(), `dimension 0: measurement "crossing": its row space does not commute`) {
		t.Fatalf("got %v, want a refusal of partitions that do not commute", err)
	}
}
