package release

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate"
	"github.com/knowdp/knowdp/internal/tensor"
	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/sensitivity"
	"github.com/knowdp/knowdp/source"
)

// randomCuboid returns a uniformly random subset of n dimensions.
func randomCuboid(r *noise.Rand, n int) domain.Cuboid {
	return domain.Cuboid(r.Uint64N(1 << n))
}

// workloadCase is a random small workload: a schema, a base table, the
// invariants and the requested cuboids.
type workloadCase struct {
	s     *domain.Schema
	base  []float64
	spec  workloadSpec
	exact map[domain.Cuboid][]float64
}

func randomWorkload(t *testing.T, r *noise.Rand) workloadCase {
	t.Helper()
	dims := 2 + int(r.Uint64N(3))
	sizes := make([]int, dims)
	for i := range sizes {
		sizes[i] = 2 + int(r.Uint64N(3))
		if r.Uint64N(8) == 0 {
			sizes[i] = 1 // residuals over it are zero
		}
	}
	s := testkit.TestSchema(t, sizes...)
	c := &cube.Cube{Schema: s, Counts: testkit.RandomTable(r, s.Cells())}
	var spec workloadSpec
	spec.Epsilon = eps(t, 1)
	for range 1 + r.Uint64N(4) {
		spec.Exact = append(spec.Exact, randomCuboid(r, dims))
	}
	for range 1 + r.Uint64N(6) {
		cb := randomCuboid(r, dims)
		if !slices.Contains(spec.Cuboids, cb) {
			spec.Cuboids = append(spec.Cuboids, cb)
			spec.Weights = append(spec.Weights, 0.5+float64(r.Uint64N(4)))
		}
	}
	if r.Uint64N(2) == 0 {
		// A measurement strategy of its own: random cuboids that are not
		// public, and the base cuboid if they leave a requested table
		// unestimable.
		for range 1 + r.Uint64N(3) {
			cb := randomCuboid(r, dims)
			if sens, err := sensitivity.GenericSensitivity(s, spec.Exact, cb); (err == nil && sens.Value == 0) || slices.Contains(spec.Measure, cb) {
				continue
			}
			spec.Measure = append(spec.Measure, cb)
		}
	}
	for range 3 {
		_, err := planWorkload(s, spec)
		switch {
		case errors.Is(err, sensitivity.ErrNoClosedForm):
			spec.Sensitivity = 50
		case err != nil && strings.Contains(err.Error(), "cannot be estimated"):
			spec.Measure = append(spec.Measure, domain.Base(dims))
		}
	}
	exact := map[domain.Cuboid][]float64{}
	for _, e := range append(append(slices.Clone(spec.Exact), spec.Cuboids...), spec.Measure...) {
		exact[e] = c.Project(e)
	}
	return workloadCase{s: s, base: c.Counts, spec: spec, exact: exact}
}

// stack returns the rows of the marginal matrices of cs over the base
// cuboid, one block per cuboid.
func stack(s *domain.Schema, cs []domain.Cuboid) *mat.Dense {
	var rows int
	for _, c := range cs {
		rows += s.CuboidSize(c)
	}
	m := mat.NewDense(max(rows, 1), s.Cells(), nil)
	r := 0
	for _, c := range cs {
		b := testkit.MarginalMatrix(s, domain.Base(s.NumDims()), c)
		br, _ := b.Dims()
		m.Slice(r, r+br, 0, s.Cells()).(*mat.Dense).Copy(b)
		r += br
	}
	return m
}

// pinv returns the Moore-Penrose pseudo-inverse of a, and an orthonormal
// basis of its null space (nil if trivial).
func pinv(t *testing.T, a *mat.Dense) (*mat.Dense, *mat.Dense) {
	t.Helper()
	rows, cols := a.Dims()
	var svd mat.SVD
	if !svd.Factorize(a, mat.SVDFull) {
		t.Fatal("SVD failed")
	}
	vals := svd.Values(nil)
	var u, v mat.Dense
	svd.UTo(&u)
	svd.VTo(&v)
	rank := 0
	for _, sv := range vals {
		if sv > 1e-10*vals[0] {
			rank++
		}
	}
	p := mat.NewDense(cols, rows, nil)
	for k := range rank {
		var outer mat.Dense
		outer.Outer(1/vals[k], v.ColView(k), u.ColView(k))
		p.Add(p, &outer)
	}
	if rank == cols {
		return p, nil
	}
	null := mat.DenseCopyOf(v.Slice(0, cols, rank, cols))
	return p, null
}

// denseWLS returns, for the plan's measurements with per-cell variances v
// and the invariants, the linear map L (from the stacked noisy measurements
// to the stacked requested tables) and offset o of the equality-constrained
// weighted least-squares estimate, by the null-space method:
// y = y0 + N t with y0 = A^+ e, t = (W^½ M N)^+ W^½ (z - M y0).
func denseWLS(t *testing.T, s *domain.Schema, p *workloadPlan, inv []estimate.Invariant) (l *mat.Dense, o *mat.VecDense) {
	t.Helper()
	n := s.Cells()
	var exact []domain.Cuboid
	var e []float64
	for _, v := range inv {
		exact = append(exact, v.Cuboid)
		e = append(e, v.Counts...)
	}
	y0 := mat.NewVecDense(n, nil)
	null := mat.NewDense(n, n, nil)
	for i := range n {
		null.Set(i, i, 1)
	}
	if len(exact) > 0 {
		ap, nb := pinv(t, stack(s, exact))
		y0.MulVec(ap, mat.NewVecDense(len(e), e))
		null = nb
	}
	var meas []domain.Cuboid
	var sqrtw []float64
	for _, m := range p.meas {
		meas = append(meas, m.c)
		for range s.CuboidSize(m.c) {
			sqrtw = append(sqrtw, 1/math.Sqrt(m.v))
		}
	}
	var req []domain.Cuboid
	for _, tb := range p.tables {
		req = append(req, tb.Cuboid)
	}
	mm, mr := stack(s, meas), stack(s, req)
	w := mat.NewDiagDense(len(sqrtw), sqrtw)
	var b, wb mat.Dense
	b.Mul(mm, null)
	wb.Mul(w, &b)
	bp, _ := pinv(t, &wb)
	// L = M_req N (W^½ M N)^+ W^½ ; o = M_req y0 - L M y0.
	var tmp, tmp2 mat.Dense
	tmp.Mul(mr, null)
	tmp2.Mul(&tmp, bp)
	l = &mat.Dense{}
	l.Mul(&tmp2, w)
	var my0, lmy0 mat.VecDense
	my0.MulVec(mm, y0)
	lmy0.MulVec(l, &my0)
	o = &mat.VecDense{}
	o.MulVec(mr, y0)
	o.SubVec(o, &lmy0)
	return l, o
}

// TestWorkloadMatchesDenseSolver pins the residual-basis estimate, its
// per-cell variance and the coefficients of its error law to a dense
// equality-constrained weighted least-squares solve, on random small
// cubes with 1-4 invariants and 1-6 requested cuboids.
func TestWorkloadMatchesDenseSolver(t *testing.T) {
	r := noise.NewSeeded(11)
	tested, strategies := 0, 0
	defer func() {
		if strategies < 5 {
			t.Errorf("only %d of %d workloads had a measurement strategy of their own", strategies, tested)
		}
	}()
	for tested < 30 {
		wc := randomWorkload(t, r)
		s := wc.s
		p, err := planWorkload(s, wc.spec)
		if err != nil {
			t.Fatalf("%v: %v", wc.spec, err)
		}
		if len(p.meas) == 0 {
			continue
		}
		tested++
		if wc.spec.Measure != nil {
			strategies++
		}
		inv := make([]estimate.Invariant, len(p.exact))
		for i, e := range p.exact {
			inv[i] = estimate.Invariant{Cuboid: e, Counts: wc.exact[e]}
		}
		noisy := make([][]float64, len(p.meas))
		var z []float64
		for k, m := range p.meas {
			noisy[k] = noisy0(r, wc.exact[m.c], 3)
			z = append(z, noisy[k]...)
		}
		tables := slices.Clone(p.tables)
		p.estimate(tables, inv, noisy)
		l, o := denseWLS(t, s, p, inv)
		var want mat.VecDense
		want.MulVec(l, mat.NewVecDense(len(z), z))
		want.AddVec(&want, o)
		row := 0
		for _, tb := range tables {
			for i, got := range tb.Counts {
				if w := want.AtVec(row + i); math.Abs(got-w) > 1e-9*math.Max(1, math.Abs(w)) {
					t.Fatalf("sizes %v exact %v requested %v: table %s cell %d = %v, dense %v",
						s.Sizes(), p.exact, wc.spec.Cuboids, s.Format(tb.Cuboid), i, got, w)
				}
			}
			// Variance and error law of the table's first cell.
			var coef []float64
			var variance float64
			col := 0
			for _, m := range p.meas {
				for range s.CuboidSize(m.c) {
					lc := l.At(row, col)
					variance += lc * lc * m.v
					if math.Abs(lc) > 1e-10 {
						coef = append(coef, math.Abs(lc*m.lap.Scale()))
					}
					col++
				}
			}
			if math.Abs(tb.Variance-variance) > 1e-9*math.Max(variance, 1e-9) {
				t.Errorf("table %s: variance %v, dense %v", s.Format(tb.Cuboid), tb.Variance, variance)
			}
			if tb.Public {
				if len(coef) != 0 || tb.Variance != 0 || tb.MOE90 != 0 {
					t.Errorf("public table %s has error coefficients %v, variance %v, moe %v", s.Format(tb.Cuboid), coef, tb.Variance, tb.MOE90)
				}
			} else {
				terms, _ := p.cellLaw(tb.Cuboid)
				var law []float64
				for _, tm := range terms {
					for range int(tm.Count) {
						law = append(law, math.Abs(tm.Scale))
					}
				}
				slices.Sort(coef)
				slices.Sort(law)
				if len(law) != len(coef) {
					t.Fatalf("table %s: %d error terms, dense has %d", s.Format(tb.Cuboid), len(law), len(coef))
				}
				for i := range law {
					if math.Abs(law[i]-coef[i]) > 1e-9*coef[len(coef)-1] {
						t.Fatalf("table %s: error coefficients %v, dense %v", s.Format(tb.Cuboid), law, coef)
					}
				}
			}
			row += len(tb.Counts)
		}
	}
}

// noisy0 returns x plus continuous noise of about the given scale (the
// estimate is linear, so any noise will do).
func noisy0(r *noise.Rand, x []float64, scale float64) []float64 {
	y := slices.Clone(x)
	for i := range y {
		y[i] += scale * (float64(r.Uint64N(1<<20))/(1<<19) - 1)
	}
	return y
}

// With one measured cuboid the estimate is the plain least-squares
// consistency step: Consistent.
func TestWorkloadOneMeasurementIsConsistent(t *testing.T) {
	r := noise.NewSeeded(12)
	s := testkit.TestSchema(t, 3, 4, 2, 3)
	c := &cube.Cube{Schema: s, Counts: testkit.RandomTable(r, s.Cells())}
	for _, tc := range []struct {
		exact []domain.Cuboid
		over  domain.Cuboid
	}{
		{[]domain.Cuboid{0b0011, 0b0110}, 0b1111},
		{[]domain.Cuboid{0b0001, 0b1000}, 0b1011},
		{[]domain.Cuboid{0}, 0b0101},
		{nil, 0b0110},
	} {
		spec := workloadSpec{Epsilon: eps(t, 1), Exact: tc.exact, Cuboids: []domain.Cuboid{tc.over}}
		p, err := planWorkload(s, spec)
		if err != nil {
			t.Fatal(err)
		}
		inv := CubeInvariants(c, p.exact)
		z := noisy0(r, c.Project(tc.over), 5)
		tables := slices.Clone(p.tables)
		p.estimate(tables, inv, [][]float64{z})
		if err := estimate.Consistent(s, tc.over, z, inv); err != nil {
			t.Fatal(err)
		}
		for i := range z {
			if math.Abs(tables[0].Counts[i]-z[i]) > 1e-9 {
				t.Fatalf("exact %v over %s: cell %d = %v, Consistent gives %v", tc.exact, s.Format(tc.over), i, tables[0].Counts[i], z[i])
			}
		}
	}
}

// Every released table agrees with every other one and with every
// invariant on their common margins.
func TestWorkloadTablesAgree(t *testing.T) {
	r := noise.NewSeeded(13)
	for range 20 {
		wc := randomWorkload(t, r)
		s := wc.s
		rel, err := runWorkload(context.Background(), s, wc.exact, wc.spec, noise.NewSeeded(r.Uint64()))
		if err != nil {
			t.Fatal(err)
		}
		type table struct {
			c      domain.Cuboid
			counts []float64
		}
		var all []table
		for _, tb := range rel.Tables {
			all = append(all, table{tb.Cuboid, tb.Counts})
		}
		for _, v := range rel.Invariants {
			all = append(all, table{v.Cuboid, v.Counts})
		}
		for i, a := range all {
			for _, b := range all[:i] {
				common := a.c & b.c
				pa := make([]float64, s.CuboidSize(common))
				pb := make([]float64, len(pa))
				tensor.Project(tensor.SubSizes(s.Sizes(), a.c), tensor.Reindex(common, a.c), a.counts, pa)
				tensor.Project(tensor.SubSizes(s.Sizes(), b.c), tensor.Reindex(common, b.c), b.counts, pb)
				for k := range pa {
					if math.Abs(pa[k]-pb[k]) > 1e-9*math.Max(1, math.Abs(pa[k])) {
						t.Fatalf("tables %s and %s disagree on %s cell %d: %v vs %v", s.Format(a.c), s.Format(b.c), s.Format(common), k, pa[k], pb[k])
					}
				}
			}
		}
	}
}

// The optimal split is never worse than the equal one; where no free
// residual is shared it is the closed form, which is a minimum: the
// gradient is the same in every coordinate and no point of the simplex
// does better.
func TestOptimalSplit(t *testing.T) {
	r := noise.NewSeeded(14)
	for range 40 {
		wc := randomWorkload(t, r)
		p, err := planWorkload(wc.s, wc.spec)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.meas) < 2 {
			continue
		}
		for _, tb := range p.tables {
			if math.IsInf(tb.Variance, 0) || math.IsNaN(tb.Variance) || (!tb.Public && !(tb.Variance > 0)) {
				t.Errorf("table %s: variance %v (measured %v)", wc.s.Format(tb.Cuboid), tb.Variance, tb.Measured)
			}
		}
		o := p.objective()
		equal := make([]float64, len(o.C))
		for i := range equal {
			equal[i] = 1 / float64(len(equal))
		}
		opt, err := p.optimalFractions(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if o.Value(opt) > o.Value(equal)*(1+1e-12) {
			t.Errorf("optimal %v (%v) worse than equal (%v)", opt, o.Value(opt), o.Value(equal))
		}
		// Gradient against central finite differences.
		g := make([]float64, len(o.C))
		o.Gradient(opt, g)
		for k := range g {
			if opt[k] == 0 {
				continue // dropped: on the boundary
			}
			h := 1e-4 * opt[k]
			up, dn := slices.Clone(opt), slices.Clone(opt)
			up[k] += h
			dn[k] -= h
			fd := (o.Value(up) - o.Value(dn)) / (2 * h)
			if math.Abs(fd-g[k]) > 1e-6*math.Abs(g[k]) {
				t.Errorf("gradient %d: %v, finite difference %v", k, g[k], fd)
			}
		}
	}
	// Disjoint: the grand total is an invariant and the measured cuboids
	// share no dimension.
	s := testkit.TestSchema(t, 3, 4, 5, 2)
	spec := workloadSpec{Epsilon: eps(t, 1), Exact: []domain.Cuboid{0}, Cuboids: []domain.Cuboid{0b0011, 0b0100, 0b1000}, Weights: []float64{1, 3, 0.5}}
	p, err := planWorkload(s, spec)
	if err != nil {
		t.Fatal(err)
	}
	o := p.objective()
	opt, err := p.optimalFractions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	closed := o.ClosedForm()
	for k := range closed {
		if math.Abs(closed[k]-opt[k]) > 1e-6 {
			t.Errorf("disjoint: optimum %v, closed form %v", opt, closed)
		}
	}
	g := make([]float64, len(closed))
	o.Gradient(closed, g)
	for k := range g {
		if math.Abs(g[k]-g[0]) > 1e-9*math.Abs(g[0]) {
			t.Errorf("disjoint: gradient %v not constant at the closed form", g)
		}
	}
	for range 2000 {
		x := make([]float64, len(closed))
		var sum float64
		for k := range x {
			x[k] = float64(1 + r.Uint64N(1000))
			sum += x[k]
		}
		for k := range x {
			x[k] /= sum
		}
		if o.Value(x) < o.Value(closed) {
			t.Fatalf("disjoint: %v beats the closed form %v", x, closed)
		}
	}
	// The closed form by hand: Var of a cell of C alone with the total
	// fixed is 2 (S/eps_C)^2 (1 - 1/|C|), so eps_C ∝ (w |C| S² (1 - 1/|C|))^(1/3)
	// with S = 2 (one exact cuboid).
	want := make([]float64, 3)
	var sum float64
	for k, c := range spec.Cuboids {
		n := float64(s.CuboidSize(c))
		want[k] = math.Cbrt(spec.Weights[k] * n * 4 * (1 - 1/n))
		sum += want[k]
	}
	for k := range want {
		if math.Abs(want[k]/sum-closed[k]) > 1e-12 {
			t.Errorf("closed form %v, by hand %v", closed, want)
		}
	}
}

// Shares are exact multiples of the accounting step and add up to at most
// the budget; the metadata says so.
func TestWorkloadSharesAndMetadata(t *testing.T) {
	s, err := domain.NewSchema([]domain.Dimension{
		{Name: "sex", Values: []string{"F", "M"}},
		{Name: "city", Values: []string{"A, B", "C", "D"}},
		{Name: "age", Values: []string{"0-17", "18-64", "65+"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := &cube.Cube{Schema: s, Counts: testkit.RandomTable(noise.NewSeeded(1), s.Cells())}
	sex, _ := s.CuboidOf("sex")
	sexCity, _ := s.CuboidOf("sex", "city")
	cityAge, _ := s.CuboidOf("city", "age")
	sexAge, _ := s.CuboidOf("sex", "age")
	for _, split := range []Split{SplitOptimal, SplitEqual} {
		spec := workloadSpec{Epsilon: eps(t, 0.7), Exact: []domain.Cuboid{sex}, Cuboids: []domain.Cuboid{sexCity, cityAge, sexAge, sex, 0}, Split: split}
		a, err := runWorkloadCube(context.Background(), c, spec, noise.NewSeeded(5))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := runWorkloadCube(context.Background(), c, spec, noise.NewSeeded(5))
		var steps int64
		var shares []float64
		for i, tb := range a.Tables {
			if !slices.Equal(tb.Counts, b.Tables[i].Counts) {
				t.Errorf("seeded releases differ on %s", s.Format(tb.Cuboid))
			}
			if tb.Public != (tb.Cuboid == sex || tb.Cuboid == 0) || tb.Measured == tb.Public {
				t.Errorf("%s: public %v measured %v", s.Format(tb.Cuboid), tb.Public, tb.Measured)
			}
			if !tb.Measured {
				continue
			}
			n := tb.Share / privacy.EpsilonStep
			if n != math.Trunc(n) || tb.Share <= 0 {
				t.Errorf("%s: share %v is not a positive multiple of the step", s.Format(tb.Cuboid), tb.Share)
			}
			steps += int64(n)
			shares = append(shares, tb.Share)
			if want := float64(tb.Sensitivity) / tb.Share; math.Abs(tb.Scale-want) > 1e-5*want {
				t.Errorf("%s: scale %v, want %v", s.Format(tb.Cuboid), tb.Scale, want)
			}
		}
		if float64(steps)*privacy.EpsilonStep != a.Epsilon || a.Epsilon > 0.7 || a.Epsilon < 0.7*(1-1e-9) {
			t.Errorf("spent %v in %d steps, budget 0.7", a.Epsilon, steps)
		}
		if split == SplitEqual && (shares[0] != shares[1] || shares[1] != shares[2]) {
			t.Errorf("equal split gave %v", shares)
		}
		if split == SplitOptimal && shares[0] == shares[1] {
			t.Errorf("optimal split gave equal shares %v", shares)
		}
		m := a.Metadata()
		js, _ := json.Marshal(m)
		if m.Budget != spec.Epsilon.Float64() {
			t.Errorf("budget %v, spec %v", m.Budget, spec.Epsilon)
		}
		for _, key := range []string{`"split":"` + split.String() + `"`, `"composition":"sequential composition`,
			`"exact":[["sex"]]`, `"seeded":true`, `"private":false`, `"file":"sex-city.csv"`, `"file":"total.csv"`, `"guarantee":"none"`, `"note":"public: {sex} is computable`} {
			if !strings.Contains(string(js), key) {
				t.Errorf("metadata lacks %s:\n%s", key, js)
			}
		}
		if len(m.Measurements) != 3 {
			t.Errorf("%d measurements in the metadata", len(m.Measurements))
		}
	}
	rel, err := runWorkloadCube(context.Background(), c, workloadSpec{Epsilon: eps(t, 1), Cuboids: []domain.Cuboid{sexCity}, DomainsFromData: true}, noise.NewRand())
	if err != nil {
		t.Fatal(err)
	}
	if rel.Metadata().Private {
		t.Error("a release over domains from the data is marked private")
	}
	var buf bytes.Buffer
	if err := rel.Tables[0].WriteCSV(&buf, s); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	moe := domain.FormatExact(rel.Tables[0].MOE90)
	if len(lines) != 7 || lines[0] != "sex,city,count,moe90" || !strings.HasPrefix(lines[1], `F,"A, B",`) || !strings.HasSuffix(lines[6], ","+moe) || !strings.HasPrefix(lines[6], "M,D,") {
		t.Errorf("csv:\n%s", buf.String())
	}
}

func TestWorkloadRejectsBadInput(t *testing.T) {
	s := testkit.TestSchema(t, 2, 3, 2)
	c := &cube.Cube{Schema: s, Counts: testkit.RandomTable(noise.NewSeeded(1), s.Cells())}
	big := testkit.TestSchema(t, 3, 3, 3, 3)
	for _, tc := range []struct {
		name string
		s    *domain.Schema
		spec workloadSpec
		want string
	}{
		{"nothing", s, workloadSpec{Epsilon: eps(t, 1)}, "no cuboids"},
		{"outside", s, workloadSpec{Epsilon: eps(t, 1), Cuboids: []domain.Cuboid{1 << 5}}, "cuboid 1 names dimension 5"},
		{"exact outside", s, workloadSpec{Epsilon: eps(t, 1), Cuboids: []domain.Cuboid{1}, Exact: []domain.Cuboid{1 << 4}}, "exact cuboid 1 names dimension 4"},
		{"duplicate", s, workloadSpec{Epsilon: eps(t, 1), Cuboids: []domain.Cuboid{1, 2, 1}}, "{d0} is requested twice (cuboids 1 and 3)"},
		{"weights count", s, workloadSpec{Epsilon: eps(t, 1), Cuboids: []domain.Cuboid{1, 2}, Weights: []float64{1}}, "1 weights for 2 cuboids"},
		{"weight zero", s, workloadSpec{Epsilon: eps(t, 1), Cuboids: []domain.Cuboid{1, 2}, Weights: []float64{1, 0}}, "weight of cuboid {d1} must be finite and > 0"},
		{"weight NaN", s, workloadSpec{Epsilon: eps(t, 1), Cuboids: []domain.Cuboid{1}, Weights: []float64{math.NaN()}}, "weight of cuboid {d0}"},
		{"no epsilon", s, workloadSpec{Cuboids: []domain.Cuboid{1}}, "epsilon must be set"},
		{"negative sensitivity", s, workloadSpec{Epsilon: eps(t, 1), Cuboids: []domain.Cuboid{1}, Sensitivity: -2}, "sensitivity must be positive"},
		{"sensitivity too low", s, workloadSpec{Epsilon: eps(t, 1), Cuboids: []domain.Cuboid{3}, Exact: []domain.Cuboid{1, 2}, Sensitivity: 3},
			"sensitivity 3 is below the generic sensitivity 4 of cuboid {d0,d1}"},
		{"no closed form", big, workloadSpec{Epsilon: eps(t, 1), Cuboids: []domain.Cuboid{15}, Exact: []domain.Cuboid{3, 6, 12}}, "cuboid {d0,d1,d2,d3}: exact cuboids"},
		{"bad split", s, workloadSpec{Epsilon: eps(t, 1), Cuboids: []domain.Cuboid{1}, Split: 7}, "unknown split"},
		{"measured twice", s, workloadSpec{Epsilon: eps(t, 1), Cuboids: []domain.Cuboid{1}, Measure: []domain.Cuboid{3, 7, 3}}, "{d0,d1} is measured twice (measured cuboids 1 and 3)"},
		{"measured outside", s, workloadSpec{Epsilon: eps(t, 1), Cuboids: []domain.Cuboid{1}, Measure: []domain.Cuboid{1 << 6}}, "measured cuboid 1 names dimension 6"},
		{"measured public", s, workloadSpec{Epsilon: eps(t, 1), Cuboids: []domain.Cuboid{3}, Exact: []domain.Cuboid{1}, Measure: []domain.Cuboid{3, 1}}, "measured cuboid {d0} is determined by the exact cuboids"},
		{"not estimable", s, workloadSpec{Epsilon: eps(t, 1), Cuboids: []domain.Cuboid{3}, Exact: []domain.Cuboid{1}, Measure: []domain.Cuboid{6}}, "cuboid {d0,d1} cannot be estimated: no measured cuboid contains {d0,d1}"},
	} {
		_, err := planWorkload(tc.s, tc.spec)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
		if tc.s == s {
			// The one path refuses it too, before any data is read, and
			// releasing fails as planning does.
			_, errPlan := NewPlan(s, tc.spec.spec())
			if errPlan == nil {
				t.Errorf("%s: NewPlan accepts it", tc.name)
			}
			if _, err2 := runWorkloadCube(context.Background(), c, tc.spec, noise.NewSeeded(1)); err2 == nil || errPlan == nil || err2.Error() != errPlan.Error() {
				t.Errorf("%s: release error %v, NewPlan error %v", tc.name, err2, errPlan)
			}
		}
	}
	// Missing or malformed exact counts.
	spec := workloadSpec{Epsilon: eps(t, 1), Exact: []domain.Cuboid{1}, Cuboids: []domain.Cuboid{3}}
	for name, tc := range map[string]struct {
		exact map[domain.Cuboid][]float64
		want  string
	}{
		"missing":       {map[domain.Cuboid][]float64{1: c.Project(1)}, "counts of cuboid {d0,d1} are missing"},
		"short":         {map[domain.Cuboid][]float64{1: c.Project(1), 3: {1, 2}}, "counts of cuboid {d0,d1} are missing or have the wrong size (2 values for 6 cells)"},
		"negative":      {map[domain.Cuboid][]float64{1: {-1, 2}, 3: c.Project(3)}, "count -1 must be finite and non-negative"},
		"no exact":      {map[domain.Cuboid][]float64{3: c.Project(3)}, "counts of cuboid {d0} are missing"},
		"extra ignored": {map[domain.Cuboid][]float64{1: {1, 2}, 3: c.Project(3), 2: {1, 1, 0}}, ""},
	} {
		_, err := runWorkload(context.Background(), s, tc.exact, spec, noise.NewSeeded(1))
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
	}
	// The same, through the workload engine (two tables).
	two := workloadSpec{Epsilon: eps(t, 1), Exact: []domain.Cuboid{1}, Cuboids: []domain.Cuboid{3, 2}}
	for name, tc := range map[string]struct {
		exact map[domain.Cuboid][]float64
		want  string
	}{
		"missing": {map[domain.Cuboid][]float64{1: c.Project(1), 2: c.Project(2)}, "exact counts of cuboid {d0,d1} are missing"},
		"short":   {map[domain.Cuboid][]float64{1: c.Project(1), 2: c.Project(2), 3: {1, 2}}, "cuboid {d0,d1} has 6 cells, got 2 counts"},
	} {
		if _, err := runWorkload(context.Background(), s, tc.exact, two, noise.NewSeeded(1)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("two tables, %s: error %v, want one containing %q", name, err, tc.want)
		}
	}
	_, err := runWorkload(context.Background(), s, map[domain.Cuboid][]float64{1: {1, 2}, 2: {1, 1, 0}, 3: c.Project(3)},
		workloadSpec{Epsilon: eps(t, 1), Exact: []domain.Cuboid{1, 2}, Cuboids: []domain.Cuboid{3}}, noise.NewSeeded(1))
	if !errors.Is(err, estimate.ErrInconsistent) {
		t.Errorf("disagreeing invariants: %v", err)
	}
	// Without a closed form, an explicit sensitivity makes the guarantee
	// conditional.
	bc := &cube.Cube{Schema: big, Counts: make([]float64, big.Cells())}
	rel, err := runWorkloadCube(context.Background(), bc, workloadSpec{Epsilon: eps(t, 1), Cuboids: []domain.Cuboid{15}, Exact: []domain.Cuboid{3, 6, 12}, Sensitivity: 12}, noise.NewRand())
	if err != nil {
		t.Fatal(err)
	}
	if !rel.Conditional || !strings.HasPrefix(rel.Metadata().Guarantee, "conditional") || rel.Tables[0].Sensitivity != 12 {
		t.Errorf("conditional %v guarantee %q sensitivity %d", rel.Conditional, rel.Metadata().Guarantee, rel.Tables[0].Sensitivity)
	}
}

// TestWorkloadPrivacyOnInducedNeighbours checks the joint guarantee of the
// measurements on every primitive move between induced neighbours (the
// Graver basis of the invariants): the exact log-ratio of the probabilities
// of the noisy measurements, Σ_j ||M_j g||_1 / scale_j at the extreme
// output, is at most eps; and the estimate, the same map of the
// measurements and the public invariants on both tables, cannot add to it.
func TestWorkloadPrivacyOnInducedNeighbours(t *testing.T) {
	for _, tc := range []struct {
		sizes []int
		exact []domain.Cuboid
		req   []domain.Cuboid
	}{
		{[]int{3, 3}, []domain.Cuboid{1, 2}, []domain.Cuboid{3, 1}},
		{[]int{2, 2, 3}, []domain.Cuboid{3, 6}, []domain.Cuboid{7, 5, 4}},
		{[]int{2, 3, 2}, []domain.Cuboid{1}, []domain.Cuboid{3, 6, 2, 7}},
		{[]int{2, 2, 2}, []domain.Cuboid{1, 2, 4}, []domain.Cuboid{3, 5, 6}},
	} {
		s := testkit.TestSchema(t, tc.sizes...)
		const e = 0.9
		p, err := planWorkload(s, workloadSpec{Epsilon: eps(t, e), Exact: tc.exact, Cuboids: tc.req})
		if err != nil {
			t.Fatal(err)
		}
		basis, err := sensitivity.GraverBasis(context.Background(), s.Cells(), testkit.CuboidRows(s, tc.exact...))
		if err != nil {
			t.Fatal(err)
		}
		if len(basis) == 0 {
			t.Fatalf("%v: no moves", tc.sizes)
		}
		worst := 0.0
		for _, g := range basis {
			gf := make([]float64, len(g))
			for i, v := range g {
				gf[i] = float64(v)
			}
			// Exact log-probability ratio of the noisy measurements of
			// the two tables at the output that maximises it: every cell
			// pushed one grid step beyond the first table.
			var loss float64
			for _, m := range p.meas {
				d := make([]float64, s.CuboidSize(m.c))
				tensor.Project(s.Sizes(), m.c, gf, d)
				dist := m.lap.Dist()
				for _, v := range d {
					k := int64(math.Round(v / m.lap.Grid()))
					y := k + 1
					if k < 0 {
						y = k - 1
					}
					loss += math.Log(dist.Prob(y)) - math.Log(dist.Prob(y-k))
				}
			}
			worst = max(worst, math.Abs(loss))
		}
		if worst > e*(1+1e-9) {
			t.Errorf("%v exact %v: log-ratio %v exceeds eps %v", tc.sizes, tc.exact, worst, e)
		}
		if worst < e/4 {
			t.Errorf("%v exact %v: worst log-ratio %v far below eps %v: noise wasted?", tc.sizes, tc.exact, worst, e)
		}
	}
}

func TestTableFileName(t *testing.T) {
	s, _ := domain.NewSchema([]domain.Dimension{{Name: "a/b", Values: []string{"x"}}, {Name: "c", Values: []string{"y"}}})
	for c, want := range map[domain.Cuboid]string{0: "total.csv", 3: "a_b-c.csv", 2: "c.csv"} {
		if got := TableFileName(s, c); got != want {
			t.Errorf("%s: %q, want %q", s.Format(c), got, want)
		}
	}
	if sp, err := ParseSplit("equal"); err != nil || sp != SplitEqual || sp.String() != "equal" {
		t.Errorf("ParseSplit: %v %v", sp, err)
	}
	if _, err := ParseSplit("best"); err == nil || !strings.Contains(err.Error(), `"best"`) {
		t.Errorf("ParseSplit(best): %v", err)
	}
	_ = fmt.Sprint()
}

// arrestsWorkload is issue 12's comparison: every two-way cuboid of the
// arrests data with the invariants {year} and {colour,sex}.
func arrestsWorkload(t testing.TB) (*domain.Schema, workloadSpec) {
	t.Helper()
	s, err := domain.LoadSchema("../data/arrests.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	year, _ := s.CuboidOf("year")
	colourSex, _ := s.CuboidOf("colour", "sex")
	spec := workloadSpec{Epsilon: eps(t, 1), Exact: []domain.Cuboid{year, colourSex}}
	for i := range s.NumDims() {
		for j := i + 1; j < s.NumDims(); j++ {
			spec.Cuboids = append(spec.Cuboids, 1<<i|1<<j)
		}
	}
	return s, spec
}

// TestArrestsStrategies compares the expected RMSE of the four strategies
// of issue 12 and checks what must hold: least squares with the same
// shares is never worse than separate releases on any cuboid (it is the
// best linear unbiased estimate), the optimal split minimises the total
// variance, and a seeded simulation of the optimal release on the real
// data matches the computed errors.
func TestArrestsStrategies(t *testing.T) {
	s, spec := arrestsWorkload(t)
	rmse := map[Strategy][]float64{}
	for _, st := range []Strategy{StrategySeparate, StrategyBase, StrategyEqual, StrategyOptimal} {
		v, err := expectedRMSE(s, spec, st)
		if err != nil {
			t.Fatal(err)
		}
		rmse[st] = v
	}
	total := map[Strategy]float64{}
	var b strings.Builder
	fmt.Fprintf(&b, "%-22s %8s %8s %8s %8s\n", "cuboid", "separate", "base", "equal", "optimal")
	for i, c := range spec.Cuboids {
		fmt.Fprintf(&b, "%-22s %8.3f %8.3f %8.3f %8.3f\n", s.Format(c), rmse[StrategySeparate][i], rmse[StrategyBase][i], rmse[StrategyEqual][i], rmse[StrategyOptimal][i])
		for st, v := range rmse {
			total[st] += float64(s.CuboidSize(c)) * v[i] * v[i]
		}
		if rmse[StrategyEqual][i] > rmse[StrategySeparate][i]*(1+1e-9) {
			t.Errorf("%s: least squares %v worse than separate %v", s.Format(c), rmse[StrategyEqual][i], rmse[StrategySeparate][i])
		}
	}
	fmt.Fprintf(&b, "%-22s %8.1f %8.1f %8.1f %8.1f\n", "total variance", total[StrategySeparate], total[StrategyBase], total[StrategyEqual], total[StrategyOptimal])
	t.Logf("expected RMSE per cell, eps = 1, invariants {year}, {colour,sex}:\n%s", b.String())
	for _, st := range []Strategy{StrategySeparate, StrategyBase, StrategyEqual} {
		if total[StrategyOptimal] > total[st] {
			t.Errorf("optimal total variance %v above %v's %v", total[StrategyOptimal], st, total[st])
		}
	}
	// Simulation on the data: the mean squared error of all cells over
	// seeded releases against the computed variance.
	c, err := fromCSV(context.Background(), "../data/arrests.csv", s, cube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	needs, err := flatNeeds(s, spec)
	if err != nil {
		t.Fatal(err)
	}
	exact := map[domain.Cuboid][]float64{}
	for _, n := range needs {
		exact[n] = c.Project(n)
	}
	r := noise.NewSeeded(41)
	var sq, want float64
	const reps = 60
	for range reps {
		rel, err := runWorkload(context.Background(), s, exact, spec, noise.NewSeeded(r.Uint64()))
		if err != nil {
			t.Fatal(err)
		}
		for i, tb := range rel.Tables {
			truth := c.Project(tb.Cuboid)
			for k, v := range tb.Counts {
				sq += (v - truth[k]) * (v - truth[k])
			}
			want += float64(len(truth)) * rmse[StrategyOptimal][i] * rmse[StrategyOptimal][i]
		}
	}
	if ratio := sq / want; math.Abs(ratio-1) > 0.05 {
		t.Errorf("simulated mean squared error / computed = %v", ratio)
	}
}

// benchWorkload is issue 12's benchmark: a schema of 10^7 base cells (seven
// dimensions of ten values), the exact cuboids {d0,d1,d2} and {d2,d3}, and
// 20 requested cuboids: ten two-way and ten three-way.
func benchWorkload(b *testing.B) (*domain.Schema, workloadSpec) {
	s := testkit.TestSchema(b, 10, 10, 10, 10, 10, 10, 10)
	spec := workloadSpec{Epsilon: eps(b, 1), Exact: []domain.Cuboid{testkit.CuboidOf([]int{0, 1, 2}), testkit.CuboidOf([]int{2, 3})}}
	for i := range 5 {
		for j := i + 1; j < 5; j++ {
			spec.Cuboids = append(spec.Cuboids, 1<<i|1<<j)
		}
	}
	for i := range 5 {
		spec.Cuboids = append(spec.Cuboids, 1<<i|1<<(i+1)|1<<(i+2))
	}
	for i := range 5 {
		spec.Cuboids = append(spec.Cuboids, 1<<i|1<<(i+2)|1<<6)
	}
	return s, spec
}

// BenchmarkWorkload times a workload release: "plan" is the data-free part
// (sensitivities, optimal split, margins of error); "marginals" the whole
// release from the exact counts of the needed cuboids; "cube" adds their
// projection from the dense base cube.
func BenchmarkWorkload(b *testing.B) {
	s, spec := benchWorkload(b)
	b.Run("plan", func(b *testing.B) {
		for b.Loop() {
			if _, err := planWorkload(s, spec); err != nil {
				b.Fatal(err)
			}
		}
	})
	r := noise.NewSeeded(1)
	c := &cube.Cube{Schema: s, Counts: make([]float64, s.Cells())}
	for i := range c.Counts {
		c.Counts[i] = float64(r.Uint64N(4))
	}
	needs, err := flatNeeds(s, spec)
	if err != nil {
		b.Fatal(err)
	}
	exact := map[domain.Cuboid][]float64{}
	for _, n := range needs {
		exact[n] = c.Project(n)
	}
	b.Run("marginals", func(b *testing.B) {
		for b.Loop() {
			if _, err := runWorkload(context.Background(), s, exact, spec, r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cube", func(b *testing.B) {
		for b.Loop() {
			if _, err := runWorkloadCube(context.Background(), c, spec, r); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The base cuboid itself as the 20th table: 10^7 noisy cells, and
	// every other table's estimate draws on them.
	withBase := spec
	withBase.Cuboids = append(slices.Clone(spec.Cuboids[:19]), domain.Base(s.NumDims()))
	needs, err = flatNeeds(s, withBase)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range needs {
		if exact[n] == nil {
			exact[n] = c.Project(n)
		}
	}
	b.Run("marginals+base", func(b *testing.B) {
		for b.Loop() {
			if _, err := runWorkload(context.Background(), s, exact, withBase, r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A workload over a schema of 10^12 base cells needs only the counts of
// its cuboids and invariants: no step touches the base domain.
func TestWorkloadWithoutBaseCube(t *testing.T) {
	sizes := make([]int, 12)
	for i := range sizes {
		sizes[i] = 10
	}
	s := testkit.TestSchema(t, sizes...)
	spec := workloadSpec{Epsilon: eps(t, 1), Exact: []domain.Cuboid{testkit.CuboidOf([]int{0, 1, 2})}, Cuboids: []domain.Cuboid{testkit.CuboidOf([]int{2, 3}), testkit.CuboidOf([]int{3, 4}), testkit.CuboidOf([]int{1})}}
	needs, err := flatNeeds(s, spec)
	if err != nil {
		t.Fatal(err)
	}
	if want := []domain.Cuboid{testkit.CuboidOf([]int{0, 1, 2}), testkit.CuboidOf([]int{2, 3}), testkit.CuboidOf([]int{3, 4})}; !slices.Equal(needs, want) {
		t.Fatalf("needs %v, want %v", needs, want)
	}
	// Consistent counts: a uniform table of 10^12 cells with one row in
	// every 10^9 cells.
	exact := map[domain.Cuboid][]float64{}
	for _, n := range needs {
		x := make([]float64, s.CuboidSize(n))
		for i := range x {
			x[i] = float64(1000 / len(x))
		}
		exact[n] = x
	}
	rel, err := runWorkload(context.Background(), s, exact, spec, noise.NewSeeded(1))
	if err != nil {
		t.Fatal(err)
	}
	if got := rel.Tables[2].Counts; len(got) != 10 || got[3] != 100 || !rel.Tables[2].Public {
		t.Errorf("public {d1}: %v", got)
	}
	for _, tb := range rel.Tables[:2] {
		if !tb.Measured || len(tb.Counts) != 100 || tb.Sensitivity != 2 {
			t.Errorf("%s: measured %v, %d cells, sensitivity %d", s.Format(tb.Cuboid), tb.Measured, len(tb.Counts), tb.Sensitivity)
		}
	}
}

func TestParseWorkload(t *testing.T) {
	s, err := domain.NewSchema([]domain.Dimension{{Name: "sex", Values: []string{"F", "M"}}, {Name: "age", Values: []string{"young", "old"}}})
	if err != nil {
		t.Fatal(err)
	}
	cs, ws, err := ParseWorkload(s, []byte(`[["sex","age"], {"cuboid": ["age"], "weight": 2.5}, [], {"cuboid": ["sex"]}]`))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cs, []domain.View{domain.ViewOf(3), domain.ViewOf(2), domain.ViewOf(0), domain.ViewOf(1)}) || !slices.Equal(ws, []float64{1, 2.5, 1, 1}) {
		t.Errorf("cuboids %v weights %v", cs, ws)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"cuboid": ["sex"]}`, "want a JSON list of cuboids"},
		{`[]`, "list of cuboids is empty"},
		{`[["sex"], ["agee"]]`, `workload entry 2: unknown dimension "agee" (the schema has sex, age)`},
		{`[{"cuboid": ["sex"], "weight": 0}]`, "workload entry 1 ({sex}): weight must be finite and > 0, got 0"},
		{`[{"cuboid": ["sex"], "wieght": 2}]`, `workload entry 1: want a list of dimension names or {"cuboid": [...], "weight": w} (with "prefix" or "ranges": an ordered dimension of the cuboid, and "moe90": a target margin of error): json: unknown field "wieght"`},
		{`[{"weight": 2}]`, `workload entry 1: no "cuboid"`},
		{`[["sex"], null]`, "workload entry 2: null is not a cuboid"},
		{`["sex"]`, "workload entry 1: want a list of dimension names"},
	} {
		if _, _, err := ParseWorkload(s, []byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.in, err, tc.want)
		}
	}
}

// TestExpectedRMSESeparateNested checks the separate strategy against
// simulated separate releases when one requested cuboid contains another
// (the optimal split then leaves the smaller one unmeasured, which must not
// change how a separate release shares the budget), and that equal split +
// least squares is no worse than separate releases for any table
// (Gauss-Markov: the same measurements, the best linear unbiased estimate).
func TestExpectedRMSESeparateNested(t *testing.T) {
	s, _ := arrestsWorkload(t)
	c, err := fromCSV(context.Background(), "../data/arrests.csv", s, cube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	year, _ := s.ParseCuboid("year")
	cs, _ := s.ParseCuboid("colour,sex")
	cr, _ := s.ParseCuboid("colour,released")
	ycr, _ := s.ParseCuboid("year,colour,released")
	ag, _ := s.ParseCuboid("agegroup")
	spec := workloadSpec{Epsilon: eps(t, 1), Exact: []domain.Cuboid{year, cs}, Cuboids: []domain.Cuboid{cr, ycr, ag}}
	sep, err := expectedRMSE(s, spec, StrategySeparate)
	if err != nil {
		t.Fatal(err)
	}
	equal, err := expectedRMSE(s, spec, StrategyEqual)
	if err != nil {
		t.Fatal(err)
	}
	share := eps(t, 1.0/3)
	r := noise.NewSeeded(9)
	const runs = 300
	for i, cb := range spec.Cuboids {
		truth := c.Project(cb)
		var sq float64
		for range runs {
			rel, err := runCube(context.Background(), c, cuboidSpec{Epsilon: share, Exact: spec.Exact, Cuboid: cb}, r)
			if err != nil {
				t.Fatal(err)
			}
			for k := range truth {
				d := rel.Counts[k] - truth[k]
				sq += d * d
			}
		}
		got := math.Sqrt(sq / float64(runs*len(truth)))
		// Squared Laplace-type errors have kurtosis at most 6: the relative
		// standard error of the mean square is below sqrt(5/n), half that
		// for its root.
		tol := 5 * 0.5 * math.Sqrt(5/float64(runs*len(truth)))
		if math.Abs(got/sep[i]-1) > tol {
			t.Errorf("%s: simulated separate RMSE %v, ExpectedRMSE %v (tolerance %.1f%%)", s.Format(cb), got, sep[i], 100*tol)
		}
		if equal[i] > sep[i]*(1+1e-9) {
			t.Errorf("%s: equal split + least squares %v worse than separate %v", s.Format(cb), equal[i], sep[i])
		}
	}
}

// fromCSV counts a CSV fact table with a header row into a cube over s.
func fromCSV(ctx context.Context, path string, s *domain.Schema, opt cube.Options) (*cube.Cube, error) {
	t, err := source.OpenCSV(path)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	return cube.Build(ctx, t, s, opt)
}

// TestExpectedRMSESpec checks that ExpectedRMSE of a Spec gives the flat
// engine's numbers for the same tables, and refuses, naming why, what it
// does not compare.
func TestExpectedRMSESpec(t *testing.T) {
	s, ws := arrestsWorkload(t)
	spec := Spec{Epsilon: ws.Epsilon}
	for _, c := range ws.Cuboids {
		spec.Tables = append(spec.Tables, domain.ViewOf(c))
	}
	for _, c := range ws.Exact {
		spec.Exact = append(spec.Exact, domain.ViewOf(c))
	}
	for _, st := range []Strategy{StrategySeparate, StrategyBase, StrategyEqual, StrategyOptimal} {
		got, err := ExpectedRMSE(s, spec, st)
		if err != nil {
			t.Fatal(err)
		}
		want, err := expectedRMSE(s, ws, st)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%v: %v, the flat engine's %v", st, got, want)
		}
	}
	geo := testkit.SmallGeo(t)
	state := testkit.MustView(t, geo, "geo:state")
	for _, tc := range []struct {
		name string
		s    *domain.Schema
		spec Spec
		want string
	}{
		{"gaussian", s, Spec{Mechanism: MechanismGaussian, Rho: rho(t, 1), Delta: 1e-6, Tables: spec.Tables}, "Laplace"},
		{"units", s, Spec{Epsilon: spec.Epsilon, Tables: spec.Tables, Unit: &Unit{Column: "id", MaxRows: 2}}, "privacy units"},
		{"ranges", s, Spec{Epsilon: spec.Epsilon, Tables: spec.Tables[:1], Queries: []TableQuery{{}}}, "tables of cells"},
		{"levels", geo, Spec{Epsilon: spec.Epsilon, Tables: []domain.View{state}}, "finest levels"},
		{"no tables", s, Spec{Epsilon: spec.Epsilon}, "no tables"},
	} {
		if _, err := ExpectedRMSE(tc.s, tc.spec, StrategyOptimal); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}
