package release

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/query"
	"github.com/knowdp/knowdp/sensitivity"
)

// arrests loads the arrests schema (data/arrests.schema.json).
func arrests(t testing.TB) *domain.Schema {
	t.Helper()
	s, err := domain.LoadSchema("../data/arrests.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// kwayViews returns every cuboid of k dimensions of s, for each k.
func kwayViews(s *domain.Schema, ks ...int) []domain.View {
	var out []domain.View
	for c := range domain.Base(s.NumDims()) + 1 {
		if slices.Contains(ks, c.Len()) {
			out = append(out, domain.ViewOf(c))
		}
	}
	return out
}

// TestResidualReleaseSimulation: over seeded releases, the tables of a
// residual plan are unbiased, agree with each other and with the
// invariants, and the variance each table states is the empirical one,
// within a tolerance from the sample size (the empirical variance of m
// normal errors has relative standard deviation sqrt(2/m)).
func TestResidualReleaseSimulation(t *testing.T) {
	s := testkit.TestSchema(t, 3, 4, 2, 3)
	c := &cube.Cube{Schema: s, Counts: testkit.RandomTable(noise.NewSeeded(8), s.Cells())}
	ctx := context.Background()
	tables := []domain.Cuboid{0b0011, 0b0110, 0b1100, 0b1001, 0b0101, 0b0001}
	exacts := [][]domain.Cuboid{nil, {0b0001}, {0b0011}}
	runs := 400
	if testing.Short() {
		exacts, runs = exacts[1:2], 100
	}
	for _, exact := range exacts {
		spec := workloadSpec{Mechanism: MechanismGaussian, Rho: rho(t, 0.3), Delta: 1e-6, Exact: exact, Cuboids: tables, Strategy: MeasureResiduals}
		p, err := planWorkload(s, spec)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(p.meas, func(m measurement) bool { return m.resid }) {
			t.Fatalf("exact %v: no residual measured", exact)
		}
		sum := make([][]float64, len(tables))
		sq := make([][]float64, len(tables))
		for i, tc := range tables {
			sum[i] = make([]float64, s.CuboidSize(tc))
			sq[i] = make([]float64, s.CuboidSize(tc))
		}
		r := noise.NewSeeded(77)
		for range runs {
			w, err := releaseWorkloadCube(ctx, c, spec, noise.NewSeeded(r.Uint64()))
			if err != nil {
				t.Fatal(err)
			}
			for i, tb := range w.Tables {
				truth := c.Project(tb.Cuboid)
				for k, v := range tb.Counts {
					e := v - truth[k]
					sum[i][k] += e
					sq[i][k] += e * e
				}
			}
			// Every pair of tables agrees on its common margin, and with
			// the invariants.
			for i := range w.Tables {
				for j := range i {
					a, b := w.Tables[i], w.Tables[j]
					common := a.Cuboid & b.Cuboid
					x := make([]float64, s.CuboidSize(common))
					y := make([]float64, s.CuboidSize(common))
					project(s, a.Cuboid, common, a.Counts, x)
					project(s, b.Cuboid, common, b.Counts, y)
					for k := range x {
						if math.Abs(x[k]-y[k]) > 1e-8*(1+math.Abs(x[k])) {
							t.Fatalf("exact %v: tables %s and %s disagree on %s", exact, s.Format(a.Cuboid), s.Format(b.Cuboid), s.Format(common))
						}
					}
				}
				for _, e := range exact {
					if e.AncestorOf(w.Tables[i].Cuboid) {
						x := make([]float64, s.CuboidSize(e))
						project(s, w.Tables[i].Cuboid, e, w.Tables[i].Counts, x)
						for k, v := range c.Project(e) {
							if math.Abs(x[k]-v) > 1e-8*(1+v) {
								t.Fatalf("exact %v: table %s breaks the invariant", exact, s.Format(w.Tables[i].Cuboid))
							}
						}
					}
				}
			}
		}
		for i, tb := range p.tables {
			if tb.Public {
				continue
			}
			var mean, v float64
			for k := range sum[i] {
				mean += sum[i][k] / float64(runs)
				v += sq[i][k] / float64(runs)
			}
			cells := float64(len(sum[i]))
			mean /= cells
			v /= cells
			m := float64(runs) * cells
			if math.Abs(mean) > 5*math.Sqrt(tb.Variance/m) {
				t.Errorf("exact %v, %s: mean error %v, standard error %v", exact, s.Format(tb.Cuboid), mean, math.Sqrt(tb.Variance/m))
			}
			// The empirical variance of one cell over the runs has relative
			// standard deviation sqrt(2/runs); the mean over correlated
			// cells has at most that: 4 of them.
			if math.Abs(v/tb.Variance-1) > 4*math.Sqrt(2/float64(runs)) {
				t.Errorf("exact %v, %s: empirical variance %v, stated %v", exact, s.Format(tb.Cuboid), v, tb.Variance)
			}
		}
	}
}

// project sums a table over cuboid from onto its sub-cuboid to.
func project(s *domain.Schema, from, to domain.Cuboid, x, out []float64) {
	clear(out)
	fd := from.Dims()
	for i, v := range x {
		rest, j, stride := i, 0, 1
		for k := len(fd) - 1; k >= 0; k-- {
			n := s.Size(fd[k])
			val := rest % n
			rest /= n
			if to.Has(fd[k]) {
				j += val * stride
				stride *= n
			}
		}
		out[j] += v
	}
}

// TestResidualPrivacy: every residual measurement's noise keeps its share
// of rho on the worst-case induced neighbours the brute force finds, with
// the rounding to the grid counted (package comment of residual.go).
func TestResidualPrivacy(t *testing.T) {
	s := testkit.TestSchema(t, 2, 3, 2)
	ctx := context.Background()
	for _, exact := range [][]domain.Cuboid{nil, {0b001}, {0b011, 0b110}} {
		spec := workloadSpec{Mechanism: MechanismGaussian, Rho: rho(t, 0.5), Delta: 1e-6, Exact: exact,
			Cuboids: []domain.Cuboid{0b011, 0b110, 0b101}, Strategy: MeasureResiduals}
		p, err := planWorkload(s, spec)
		if err != nil {
			t.Fatal(err)
		}
		basis, err := sensitivity.GraverBasis(ctx, s.Cells(), testkit.CuboidRows(s, exact...))
		if err != nil {
			t.Fatal(err)
		}
		var total float64
		for _, m := range p.meas {
			total += m.rhoShare.Float64()
			if !m.resid {
				continue
			}
			term := residualTerm(p.sizes, m.c)
			var worst float64
			x := make([]float64, s.Cells())
			for _, g := range basis {
				for a, v := range g {
					x[a] = float64(v)
				}
				var n2 float64
				for _, y := range term.Apply(x) {
					n2 += y * y
				}
				worst = max(worst, n2)
			}
			if worst > m.l2*m.l2*(1+1e-12) {
				t.Errorf("%v residual %s: L2 sensitivity %v below the brute force's %v", exact, s.Format(m.c), m.l2, math.Sqrt(worst))
			}
			eff := math.Sqrt(worst) + m.rn.g.Grid()*math.Sqrt(float64(m.rn.rows))
			if loss := eff * eff / (2 * m.rn.sigma() * m.rn.sigma()); loss > m.rhoShare.Float64() {
				t.Errorf("%v residual %s: rho %v on the worst neighbours with rounding, share %v", exact, s.Format(m.c), loss, m.rhoShare.Float64())
			}
		}
		if total > 0.5 {
			t.Errorf("%v: shares add up to %v > 0.5", exact, total)
		}
	}
}

// TestRoundContrast checks the exact rounding against big-float arithmetic
// at 512 bits on values near ties and far from them, on several grids.
func TestRoundContrast(t *testing.T) {
	r := noise.NewSeeded(3)
	ref := func(a, q *big.Int, grid float64) int64 {
		const prec = 512
		x := new(big.Float).SetPrec(prec).SetInt(a)
		x.Quo(x, new(big.Float).SetPrec(prec).SetFloat64(grid))
		sq := new(big.Float).SetPrec(prec).SetInt(q)
		sq.Sqrt(sq)
		x.Quo(x, sq)
		x.Add(x, big.NewFloat(0.5).SetPrec(prec))
		f, _ := x.Int(nil) // truncates toward zero
		if x.Sign() < 0 && !x.IsInt() {
			f.Sub(f, big.NewInt(1))
		}
		lim := big.NewInt(maxResidualSteps)
		if f.CmpAbs(lim) > 0 {
			if f.Sign() > 0 {
				return maxResidualSteps
			}
			return -maxResidualSteps
		}
		return f.Int64()
	}
	cases := 0
	for _, grid := range []float64{1, 0.5, 0x1p-20, 0x1p-33, 4} {
		for range 2000 {
			q := big.NewInt(1)
			for range 1 + r.Uint64N(3) {
				k := int64(1 + r.Uint64N(30))
				q.Mul(q, big.NewInt(k*(k+1)))
			}
			a := big.NewInt(int64(r.Uint64N(1<<40)) - 1<<39)
			if r.Uint64N(2) == 0 {
				// Near a tie: a ≈ (m + 1/2) grid sqrt(q).
				m := float64(r.Uint64N(1 << 20))
				qf, _ := new(big.Float).SetInt(q).Float64()
				a = big.NewInt(int64(math.Round((m + 0.5) * grid * math.Sqrt(qf))))
			}
			cases++
			if got, want := roundContrast(a, q, grid), ref(a, q, grid); got != want {
				t.Fatalf("a %v, q %v, grid %v: %d, want %d", a, q, grid, got, want)
			}
		}
	}
	// Exact ties (q a perfect square): half up.
	for _, c := range []struct {
		a, q int64
		grid float64
		want int64
	}{
		{3, 4, 1, 2},   // 3/2 = 1.5 -> 2
		{-3, 4, 1, -1}, // -1.5 -> -1
		{5, 4, 0.5, 5}, // 5/(0.5*2) = 5
		{1, 4, 1, 1},   // 0.5 -> 1
	} {
		if got := roundContrast(big.NewInt(c.a), big.NewInt(c.q), c.grid); got != c.want {
			t.Errorf("round(%d/(%v sqrt %d)) = %d, want %d", c.a, c.grid, c.q, got, c.want)
		}
	}
	t.Logf("%d values", cases)
}

// TestUnnormalisedContrasts: the exact integer contrasts equal the dense
// unnormalised Helmert rows applied to the counts, on the float64 path and
// on the big-integer path (counts beyond 2^53 / Π 2(n_i - 1)).
func TestUnnormalisedContrasts(t *testing.T) {
	shape := []int{3, 4, 2}
	r := noise.NewSeeded(9)
	for _, scale := range []float64{100, 1 << 50} {
		m := make([]float64, 24)
		for i := range m {
			m[i] = math.Floor(float64(r.Uint64N(1<<53)) / (1 << 53) * scale)
		}
		got := unnormalisedContrasts(m, shape)
		// Dense: the Kronecker product of the integer rows.
		u := func(n int) [][]int64 {
			var rows [][]int64
			for k := 1; k < n; k++ {
				row := make([]int64, n)
				for i := range k {
					row[i] = 1
				}
				row[k] = int64(-k)
				rows = append(rows, row)
			}
			return rows
		}
		u0, u1, u2 := u(3), u(4), u(2)
		j := 0
		for _, r0 := range u0 {
			for _, r1 := range u1 {
				for _, r2 := range u2 {
					want := new(big.Int)
					for a := range 3 {
						for b := range 4 {
							for c := range 2 {
								coef := r0[a] * r1[b] * r2[c]
								v, _ := new(big.Float).SetFloat64(m[(a*4+b)*2+c]).Int(nil)
								want.Add(want, v.Mul(v, big.NewInt(coef)))
							}
						}
					}
					if got[j].Cmp(want) != 0 {
						t.Fatalf("scale %v, contrast %d: %v, want %v", scale, j, got[j], want)
					}
					j++
				}
			}
		}
	}
}

// TestResidualMeasurementsSaved: a residual plan's measurements saved and
// read back estimate the released tables to rounding.
func TestResidualMeasurementsSaved(t *testing.T) {
	s := testkit.TestSchema(t, 3, 4, 2)
	c := &cube.Cube{Schema: s, Counts: testkit.RandomTable(noise.NewSeeded(2), s.Cells())}
	spec := workloadSpec{Mechanism: MechanismGaussian, Rho: rho(t, 0.5), Delta: 1e-6, Exact: []domain.Cuboid{0b001},
		Cuboids: []domain.Cuboid{0b011, 0b110, 0b101}, Strategy: MeasureResiduals, KeepMeasurements: true}
	w, err := releaseWorkloadCube(context.Background(), c, spec, noise.NewSeeded(4))
	if err != nil {
		t.Fatal(err)
	}
	if !w.hasResiduals() {
		t.Fatal("no residual measured")
	}
	sm, err := w.SaveMeasurements()
	if err != nil {
		t.Fatal(err)
	}
	queries := 0
	for _, m := range sm.Measurements {
		if m.Queries == "residual" {
			queries++
		}
	}
	if queries == 0 {
		t.Fatal("the saved measurements do not say which are residuals")
	}
	var cs []domain.Cuboid
	for _, tb := range w.Tables {
		cs = append(cs, tb.Cuboid)
	}
	got, err := sm.Estimate(s, cs)
	if err != nil {
		t.Fatal(err)
	}
	for i, tb := range got {
		for k, v := range tb.Counts {
			if math.Abs(v-w.Tables[i].Counts[k]) > 1e-9*(1+math.Abs(v)) {
				t.Fatalf("%s cell %d: %v from the saved measurements, %v released", s.Format(tb.Cuboid), k, v, w.Tables[i].Counts[k])
			}
		}
		if math.Abs(tb.Variance-w.Tables[i].Variance) > 1e-9*tb.Variance {
			t.Errorf("%s: variance %v, released %v", s.Format(tb.Cuboid), tb.Variance, w.Tables[i].Variance)
		}
	}
	// A file whose residual counts do not fit is refused, naming it.
	sm.Measurements[len(sm.Measurements)-1].Counts = append(sm.Measurements[len(sm.Measurements)-1].Counts, 1)
	if _, err := sm.Estimate(s, cs); err == nil || !strings.Contains(err.Error(), "contrasts") {
		t.Errorf("a residual with one contrast too many: %v", err)
	}
}

// TestResidualStrategyRefusals: the residuals strategy is refused before
// any data with the reason.
func TestResidualStrategyRefusals(t *testing.T) {
	s := testkit.TestSchema(t, 2, 3)
	for _, c := range []struct {
		spec workloadSpec
		want string
	}{
		{workloadSpec{Epsilon: eps(t, 1), Cuboids: []domain.Cuboid{1, 2}, Strategy: MeasureResiduals}, "Gaussian noise"},
		{workloadSpec{Mechanism: MechanismGaussian, Rho: rho(t, 1), Delta: 1e-6, Cuboids: []domain.Cuboid{1, 2}, Strategy: MeasureResiduals, Split: SplitEqual}, "optimal split"},
		{workloadSpec{Mechanism: MechanismGaussian, Rho: rho(t, 1), Delta: 1e-6, Cuboids: []domain.Cuboid{1, 2}, Strategy: MeasureLattice}, "Laplace noise"},
	} {
		if _, err := planWorkload(s, c.spec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.spec, err, c.want)
		}
	}
	if _, err := ParseMeasureStrategy("residuals"); err != nil {
		t.Error(err)
	}
	_ = fmt.Sprint
	_ = query.NewTotal
}
