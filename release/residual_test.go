package release

import (
	"context"
	"fmt"
	"math"
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
			w, err := runWorkloadCube(ctx, c, spec, noise.NewSeeded(r.Uint64()))
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
// the rounding to the grid counted (package comment of contrast).
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
			eff := math.Sqrt(worst) + m.rn.Grid()*math.Sqrt(float64(m.rn.Rows()))
			if loss := eff * eff / (2 * m.rn.Sigma() * m.rn.Sigma()); loss > m.rhoShare.Float64() {
				t.Errorf("%v residual %s: rho %v on the worst neighbours with rounding, share %v", exact, s.Format(m.c), loss, m.rhoShare.Float64())
			}
		}
		if total > 0.5 {
			t.Errorf("%v: shares add up to %v > 0.5", exact, total)
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
	w, err := runWorkloadCube(context.Background(), c, spec, noise.NewSeeded(4))
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
