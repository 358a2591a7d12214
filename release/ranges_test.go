package release

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/moe"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/sensitivity"
)

// orderedSchema returns a schema whose first dimension (named x) has n
// ordered values, then flat dimensions of the given sizes.
func orderedSchema(t testing.TB, n int, sizes ...int) *domain.Schema {
	t.Helper()
	dims := []domain.Dimension{{Name: "x", Ordered: true}}
	for i := range n {
		dims[0].Values = append(dims[0].Values, fmt.Sprint(i))
	}
	for k, m := range sizes {
		d := domain.Dimension{Name: string(rune('a' + k))}
		for i := range m {
			d.Values = append(d.Values, fmt.Sprint(i))
		}
		dims = append(dims, d)
	}
	s, err := domain.NewSchema(dims)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// countsFor returns the exact counts of every view a plan needs.
func countsFor(c *cube.Cube, views []domain.View) map[domain.View][]float64 {
	out := map[domain.View][]float64{}
	for _, v := range views {
		out[v] = c.Project(v.Dims)
	}
	return out
}

// TestRangesRelease: over seeded releases of a prefix table, a ranges table
// and a cells table on a small schema, with and without invariants, for
// both mechanisms: every query is unbiased with the variance it states
// (the empirical variance within a tolerance from the sample size), every
// table agrees with every other (a prefix sum is the sum of the cells up
// to it, a range the difference of two prefix sums) and with the
// invariants, and the margins of error cover about 90%.
func TestRangesRelease(t *testing.T) {
	s := orderedSchema(t, 6, 3)
	c := &cube.Cube{Schema: s, Counts: testkit.RandomTable(noise.NewSeeded(5), s.Cells())}
	xa := domain.ViewOf(0b11)
	runs := 300
	cases := []struct {
		gauss bool
		exact []domain.View
	}{{false, nil}, {true, nil}, {false, []domain.View{domain.ViewOf(0b10)}}, {true, []domain.View{domain.ViewOf(0b10)}}}
	if testing.Short() {
		runs, cases = 100, cases[2:3]
	}
	for _, tc := range cases {
		spec := Spec{Tables: []domain.View{xa, xa, xa}, Queries: []TableQuery{{Kind: QueryPrefix}, {Kind: QueryRanges}, {}},
			Weights: []float64{1, 1, 2}, Exact: tc.exact, Strategy: MeasureBest}
		if tc.gauss {
			spec.Mechanism, spec.Rho, spec.Delta = MechanismGaussian, rho(t, 0.5), 1e-6
		} else {
			spec.Epsilon = eps(t, 1)
		}
		p, err := NewPlan(s, spec)
		if err != nil {
			t.Fatal(err)
		}
		counts := countsFor(c, p.Needs())
		truth := make([][]float64, 3)
		for i, tb := range p.ranges.tables {
			truth[i] = TableTerm(s, xa, tb.Query).Apply(c.Counts)
		}
		sum := make([][]float64, 3)
		sq := make([][]float64, 3)
		for i := range sum {
			sum[i], sq[i] = make([]float64, len(truth[i])), make([]float64, len(truth[i]))
		}
		in, all := 0, 0
		r := noise.NewSeeded(11)
		for range runs {
			w, err := p.Run(context.Background(), counts, noise.NewSeeded(r.Uint64()))
			if err != nil {
				t.Fatal(err)
			}
			cells := w.Tables[2].Counts
			// The prefix table is the cumulative sum of the cells.
			prefix := TableTerm(s, xa, TableQuery{Kind: QueryPrefix})
			want := subTerm(prefix, 0b11).Apply(cells)
			for k, v := range w.Tables[0].Counts {
				if math.Abs(v-want[k]) > 1e-6*(1+math.Abs(v)) {
					t.Fatalf("%+v: prefix %d is %v, the cells add up to %v", tc, k, v, want[k])
				}
			}
			ranges := subTerm(TableTerm(s, xa, TableQuery{Kind: QueryRanges}), 0b11).Apply(cells)
			for k, v := range w.Tables[1].Counts {
				if math.Abs(v-ranges[k]) > 1e-6*(1+math.Abs(v)) {
					t.Fatalf("%+v: range %d is %v, the cells add up to %v", tc, k, v, ranges[k])
				}
			}
			for _, e := range tc.exact {
				got := make([]float64, s.CuboidSize(e.Dims))
				project(s, 0b11, e.Dims, cells, got)
				for k, v := range c.Project(e.Dims) {
					if math.Abs(got[k]-v) > 1e-6*(1+v) {
						t.Fatalf("%+v: the cells break the invariant", tc)
					}
				}
			}
			for i, tb := range w.Tables {
				for k, v := range tb.Counts {
					e := v - truth[i][k]
					sum[i][k] += e
					sq[i][k] += e * e
					all++
					if math.Abs(e) <= tb.MOE90s[k] {
						in++
					}
				}
			}
		}
		for i, tb := range p.ranges.tables {
			var stated, emp float64
			for k := range sum[i] {
				stated += tb.MOE90s[k] / moe.Z95 * tb.MOE90s[k] / moe.Z95
				emp += sq[i][k] / float64(runs)
				if m := sum[i][k] / float64(runs); math.Abs(m) > 5*tb.MOE90s[k]/moe.Z95/math.Sqrt(float64(runs))+1e-9 {
					t.Errorf("%+v table %d query %d: mean error %v", tc, i, k, m)
				}
			}
			if math.Abs(emp/stated-1) > 4*math.Sqrt(2/float64(runs)) {
				t.Errorf("%+v table %d: empirical variance %v, stated %v", tc, i, emp, stated)
			}
		}
		cov := float64(in) / float64(all)
		t.Logf("%+v: %d releases, coverage %.4f", tc, runs, cov)
		if tol := 4 * math.Sqrt(0.09/float64(all)) * 4; math.Abs(cov-0.9) > max(tol, 0.03) {
			t.Errorf("%+v: coverage %.4f", tc, cov)
		}
	}
}

// TestRangesPrivacy: every measurement of a prefix and ranges release is
// calibrated to at least the sensitivity the brute force finds over the
// Graver basis of the invariants (on a domain of 18 cells), and the shares
// add up to at most the budget.
func TestRangesPrivacy(t *testing.T) {
	s := orderedSchema(t, 6, 3)
	xa := domain.ViewOf(0b11)
	for _, exact := range [][]domain.View{nil, {domain.ViewOf(0b10)}} {
		for _, gauss := range []bool{false, true} {
			spec := Spec{Tables: []domain.View{xa, domain.ViewOf(0b01)}, Queries: []TableQuery{{Kind: QueryPrefix}, {Kind: QueryRanges}}, Exact: exact, Strategy: MeasureBest}
			if gauss {
				spec.Mechanism, spec.Rho, spec.Delta = MechanismGaussian, rho(t, 0.5), 1e-6
			} else {
				spec.Epsilon = eps(t, 1)
			}
			p, err := NewPlan(s, spec)
			if err != nil {
				t.Fatal(err)
			}
			var ex []domain.Cuboid
			for _, e := range exact {
				ex = append(ex, e.Dims)
			}
			basis, err := sensitivity.GraverBasis(context.Background(), s.Cells(), testkit.CuboidRows(s, ex...))
			if err != nil {
				t.Fatal(err)
			}
			var spent float64
			for _, m := range p.ranges.meas {
				var w1, w2 float64
				x := make([]float64, s.Cells())
				for _, g := range basis {
					for a, v := range g {
						x[a] = float64(v)
					}
					var a1, a2 float64
					for _, y := range m.term.Apply(x) {
						a1 += math.Abs(y)
						a2 += y * y
					}
					w1, w2 = max(w1, a1), max(w2, a2)
				}
				if gauss {
					spent += m.rho.Float64()
					if w2 > m.l2*m.l2*(1+1e-12) {
						t.Errorf("exact %v: %s: L2 %v below the brute force's %v", exact, m.desc, m.l2, math.Sqrt(w2))
					}
				} else {
					spent += m.share.Float64()
					if w1 > m.l1*(1+1e-12) {
						t.Errorf("exact %v: %s: L1 %v below the brute force's %v", exact, m.desc, m.l1, w1)
					}
				}
			}
			if budget := map[bool]float64{false: 1, true: 0.5}[gauss]; spent > budget {
				t.Errorf("exact %v: spent %v of %v", exact, spent, budget)
			}
		}
	}
}

// TestRangesRefusals: options that do not apply to prefix and range tables
// are refused before any data, with the reason.
func TestRangesRefusals(t *testing.T) {
	s := orderedSchema(t, 6, 3)
	xa := domain.ViewOf(0b11)
	base := func() Spec {
		return Spec{Tables: []domain.View{xa}, Queries: []TableQuery{{Kind: QueryPrefix}}, Epsilon: eps(t, 1), Strategy: MeasureBest}
	}
	for _, c := range []struct {
		edit func(*Spec)
		want string
	}{
		{func(sp *Spec) { sp.Strategy = MeasureRequested }, "strategy best"},
		{func(sp *Spec) { sp.Split = SplitEqual }, "optimal split"},
		{func(sp *Spec) { sp.NonNegative = true }, "non-negative or integer"},
		{func(sp *Spec) { sp.KeepMeasurements = true }, "--measurements"},
		{func(sp *Spec) { sp.Sensitivity = 3 }, "--sensitivity"},
		{func(sp *Spec) { sp.Measure = []domain.View{xa} }, "strategy chooses the measurements"},
		{func(sp *Spec) { sp.Queries = []TableQuery{{Kind: QueryPrefix, Dim: 1}} }, "does not declare a ordered"},
		{func(sp *Spec) { sp.Tables = []domain.View{domain.ViewOf(0b10)} }, "does not have it"},
		{func(sp *Spec) { sp.Queries = []TableQuery{{Kind: QueryPrefix}, {}} }, "2 table queries for 1 tables"},
		{func(sp *Spec) {
			sp.Tables, sp.Queries = []domain.View{xa, xa}, []TableQuery{{Kind: QueryPrefix}, {Kind: QueryPrefix}}
		}, "requested twice"},
	} {
		spec := base()
		c.edit(&spec)
		_, err := NewPlan(s, spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v", c.want, err)
		}
	}
}

// TestWorkloadTables reads prefix, ranges and target entries and refuses
// the bad ones naming the entry.
func TestWorkloadTables(t *testing.T) {
	s := orderedSchema(t, 6, 3)
	es, err := ParseWorkloadEntries(s, []byte(`[["a"], {"cuboid": ["x", "a"], "prefix": "x", "weight": 2}, {"cuboid": ["x"], "ranges": "x", "moe90": 4.5}]`))
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 3 || es[1].Weight != 2 || es[0].Query.Kind != QueryCells || es[1].Query != (TableQuery{Kind: QueryPrefix, Dim: 0}) || es[2].Query.Kind != QueryRanges || es[2].TargetMOE90 != 4.5 || es[0].TargetMOE90 != 0 {
		t.Fatalf("%+v", es)
	}
	if _, _, err := ParseWorkload(s, []byte(`[{"cuboid": ["x"], "ranges": "x"}]`)); err == nil || !strings.Contains(err.Error(), "ParseWorkloadEntries") {
		t.Errorf("ParseWorkload took a ranges entry: %v", err)
	}
	for _, c := range []struct{ in, want string }{
		{`[{"cuboid": ["x"], "prefix": "a"}]`, "entry 1: prefix along a: the table {x} does not have it"},
		{`[{"cuboid": ["a"], "ranges": "a"}]`, "does not declare a ordered"},
		{`[{"cuboid": ["x"], "ranges": "x", "prefix": "x"}]`, "exclude each other"},
		{`[{"cuboid": ["x"], "ranges": "y"}]`, `no such dimension`},
		{`[["x"], {"cuboid": ["x"], "ranges": 3}]`, "entry 2"},
		{`[{"cuboid": ["x"], "moe90": -1}]`, `"moe90" must be finite and > 0`},
	} {
		if _, err := ParseWorkloadEntries(s, []byte(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.in, err, c.want)
		}
	}
}
