package release

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/unit"
)

func unitSchema(t testing.TB) *domain.Schema {
	t.Helper()
	s, err := domain.NewSchema([]domain.Dimension{
		{Name: "dept", Values: []string{"maths", "physics", "law"}},
		{Name: "grade", Values: []string{"1", "2", "3", "4"}},
		{Name: "year", Values: []string{"y1", "y2"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// unitRows makes n units over every dimension of s: unit i has 1 + i%9
// rows in cells drawn from a seeded generator.
func unitRows(t testing.TB, s *domain.Schema, n int, seed uint64) *unit.Rows {
	t.Helper()
	cells, err := unit.NewCells(s, domain.Base(s.NumDims()))
	if err != nil {
		t.Fatal(err)
	}
	r := noise.NewSeeded(seed)
	var ids []string
	var cs [][]uint64
	var ns [][]int64
	for i := range n {
		ids = append(ids, fmt.Sprintf("u%d", i))
		var c []uint64
		var w []int64
		for range 1 + i%9 {
			c, w = append(c, r.Uint64N(uint64(s.Cells()))), append(w, 1)
		}
		cs, ns = append(cs, c), append(ns, w)
	}
	rows, err := unit.NewRows(cells, ids, cs, ns)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func parseViews(t testing.TB, s *domain.Schema, lists ...string) []domain.View {
	t.Helper()
	var out []domain.View
	for _, l := range lists {
		v, err := s.ParseView(l)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// runUnits plans spec, counts what it needs on all of rows, and runs it.
func runUnits(t testing.TB, s *domain.Schema, spec Spec, rows *unit.Rows, seed uint64) (*Plan, *Release) {
	t.Helper()
	p, err := NewPlan(s, spec)
	if err != nil {
		t.Fatal(err)
	}
	counts, err := rows.Counts(p.Needs())
	if err != nil {
		t.Fatal(err)
	}
	w, err := p.RunUnits(context.Background(), counts, rows, noise.NewSeeded(seed))
	if err != nil {
		t.Fatal(err)
	}
	return p, w
}

// A release per unit with K rows per unit is the row-level release with
// every sensitivity K times larger: the same shares, K times the noise.
func TestUnitScalesSensitivity(t *testing.T) {
	s := unitSchema(t)
	rows := unitRows(t, s, 300, 1)
	for _, tc := range []struct {
		name  string
		spec  Spec
		exact bool
	}{
		{"one table", Spec{Tables: parseViews(t, s, "dept,grade"), Epsilon: eps(t, 1)}, false},
		{"one table under invariants", Spec{Tables: parseViews(t, s, "dept,grade"), Exact: parseViews(t, s, "dept", "grade"), Epsilon: eps(t, 1)}, true},
		{"workload", Spec{Tables: parseViews(t, s, "dept,grade", "grade,year", "year"), Exact: parseViews(t, s, "dept"), Epsilon: eps(t, 1), Strategy: MeasureRequested}, true},
		{"gaussian workload", Spec{Tables: parseViews(t, s, "dept,grade", "grade,year"), Mechanism: MechanismGaussian, Rho: rho(t, 0.5), Delta: 1e-6, Strategy: MeasureRequested}, false},
	} {
		const k = 4
		row, err := NewPlan(s, tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		counts, err := rows.Counts(row.Needs())
		if err != nil {
			t.Fatal(err)
		}
		wr, err := row.Run(context.Background(), counts, noise.NewSeeded(2))
		if err != nil {
			t.Fatal(err)
		}
		spec := tc.spec
		spec.Unit = &Unit{Column: "student", MaxRows: k}
		_, wu := runUnits(t, s, spec, rows, 2)
		if len(wu.Measurements) != len(wr.Measurements) || len(wu.Measurements) == 0 {
			t.Fatalf("%s: %d measurements per unit, %d per row", tc.name, len(wu.Measurements), len(wr.Measurements))
		}
		for i, m := range wu.Measurements {
			r := wr.Measurements[i]
			if m.Sensitivity != k*r.Sensitivity || m.Share != r.Share || m.RhoShare != r.RhoShare ||
				math.Abs(m.L2Sensitivity-k*r.L2Sensitivity) > 1e-12 || !strings.Contains(m.SensitivityRule+m.L2Rule, "4 rows per unit") {
				t.Errorf("%s: measurement %d per unit %+v, per row %+v", tc.name, i, m, r)
			}
		}
		for i, tb := range wu.Tables {
			if got, want := tb.MOE90, wr.Tables[i].MOE90; math.Abs(got-k*want) > 0.02*k*want {
				t.Errorf("%s: table %d: moe90 %v per unit, %v per row (want about %d times)", tc.name, i, got, want, k)
			}
		}
		meta := wu.Metadata()
		pu := meta.PrivacyUnit
		if pu == nil || pu.Column != "student" || pu.MaxRows != k || pu.MaxRowsChoice != "given" || pu.TruncatedUnits != nil || (pu.Invariants != "") != tc.exact {
			t.Errorf("%s: privacy_unit %+v", tc.name, pu)
		}
		if !strings.Contains(meta.Neighbours, "privacy unit") || meta.Epsilon != wr.Metadata().Epsilon {
			t.Errorf("%s: neighbours %q, epsilon %v (per row %v)", tc.name, meta.Neighbours, meta.Epsilon, wr.Metadata().Epsilon)
		}
	}
}

// The measurements count the bounded rows; the invariants, and every table
// they determine, are the true counts of all the rows; the released tables
// agree with the true invariants.
func TestUnitCountsBoundedRowsOnly(t *testing.T) {
	s := unitSchema(t)
	rows := unitRows(t, s, 400, 3)
	const k = 3
	spec := Spec{Tables: parseViews(t, s, "dept,grade", "dept"), Exact: parseViews(t, s, "dept"), Epsilon: eps(t, 4000),
		Strategy: MeasureRequested, KeepMeasurements: true, Unit: &Unit{Column: "student", MaxRows: k}}
	p, w := runUnits(t, s, spec, rows, 4)
	all, _ := rows.Counts(parseViews(t, s, "dept", "dept,grade"))
	bounded, err := rows.Bound(context.Background(), k, unit.NewKey(noise.NewSeeded(4)))
	if err != nil {
		t.Fatal(err)
	}
	bc, _ := bounded.Counts(parseViews(t, s, "dept,grade"))
	dept, deptGrade := parseViews(t, s, "dept")[0], parseViews(t, s, "dept,grade")[0]
	if m := p.Measured(); len(m) != 1 || m[0] != deptGrade {
		t.Fatalf("measured %v, want {dept,grade} only", m)
	}
	if !slices.Equal(w.Invariants[0].Counts, all[dept]) {
		t.Errorf("invariant %v, want the true counts %v", w.Invariants[0].Counts, all[dept])
	}
	// At eps 4000 the noise is below 0.5 on every cell: the noisy
	// measurement rounds to the bounded counts, not to all the rows'.
	for i, x := range w.noisy[0] {
		if math.Abs(x-bc[deptGrade][i]) > 0.5 {
			t.Fatalf("measured cell %d is %v; bounded count %v, all rows %v", i, x, bc[deptGrade][i], all[deptGrade][i])
		}
	}
	if slices.Equal(bc[deptGrade], all[deptGrade]) {
		t.Fatal("the bounding dropped nothing: the test proves nothing")
	}
	for _, tb := range w.Tables {
		if tb.Cuboid == dept.Dims && !slices.Equal(tb.Counts, all[dept]) {
			t.Errorf("the public table {dept} is %v, want the true %v", tb.Counts, all[dept])
		}
		if tb.Cuboid == deptGrade.Dims {
			for d := range 3 {
				sum := 0.0
				for g := range 4 {
					sum += tb.Counts[d*4+g]
				}
				if math.Abs(sum-all[dept][d]) > 1e-6 {
					t.Errorf("{dept,grade} sums to %v on dept %d, the true invariant is %v", sum, d, all[dept][d])
				}
			}
		}
	}

	// One table determined by the invariants: released exactly, from all
	// the rows (the bounded counts would tell what was dropped).
	one := Spec{Tables: parseViews(t, s, "dept"), Exact: parseViews(t, s, "dept,grade"), Epsilon: eps(t, 1), Unit: &Unit{Column: "student", MaxRows: 1}}
	q, w1 := runUnits(t, s, one, rows, 5)
	if len(q.Measured()) != 0 || !slices.Equal(w1.Tables[0].Counts, all[dept]) {
		t.Errorf("public table %v (measured %v), want the true %v", w1.Tables[0].Counts, q.Measured(), all[dept])
	}
}

// The randomness is taken in the documented order: the bounding key, one
// Split for the unit statistics, then the release.
func TestUnitRandomnessOrder(t *testing.T) {
	s := unitSchema(t)
	rows := unitRows(t, s, 200, 6)
	spec := Spec{Tables: parseViews(t, s, "dept,grade", "year"), Epsilon: eps(t, 1), Strategy: MeasureRequested,
		Unit: &Unit{Column: "student", MaxRows: 2, Share: 0.2}}
	p, w := runUnits(t, s, spec, rows, 7)
	_, again := runUnits(t, s, spec, rows, 7)
	if !slices.Equal(w.Tables[0].Counts, again.Tables[0].Counts) || w.Unit.Truncated.Count != again.Unit.Truncated.Count {
		t.Fatal("a seeded release per unit is not reproducible")
	}
	r := noise.NewSeeded(7)
	key := unit.NewKey(r)
	stats := r.Split()
	tr, err := unit.CountTruncated(stats, unit.NewHistogram(rows.RowsPerUnit(), 2), 2, p.unit.eps)
	if err != nil {
		t.Fatal(err)
	}
	bounded, _ := rows.Bound(context.Background(), 2, key)
	counts, _ := rows.Counts(p.Needs())
	bc, _ := bounded.Counts(p.Measured())
	maps.Copy(counts, bc)
	want, err := p.run(context.Background(), counts, r)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want.Tables {
		if !slices.Equal(want.Tables[i].Counts, w.Tables[i].Counts) {
			t.Errorf("table %d differs from the documented order", i)
		}
	}
	if tr.Count != w.Unit.Truncated.Count {
		t.Errorf("truncated count %v, documented order gives %v", w.Unit.Truncated.Count, tr.Count)
	}
	// RunBounded, given what a pipeline computes, is the same release.
	r = noise.NewSeeded(7)
	unit.NewKey(r)
	full, _ := rows.Counts(p.Needs())
	viaBounded, err := p.RunBounded(context.Background(), full, bc, unit.NewHistogram(rows.RowsPerUnit(), 2), true, r)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want.Tables {
		if !slices.Equal(viaBounded.Tables[i].Counts, w.Tables[i].Counts) || viaBounded.Unit.Truncated.Count != tr.Count {
			t.Errorf("table %d: RunBounded differs from RunUnits", i)
		}
	}
	// The budget: the tables' share plus the units' is the total.
	meta := w.Metadata()
	if math.Abs(meta.Epsilon-1) > 1e-9 || meta.Budget != 1 || math.Abs(meta.PrivacyUnit.Epsilon-0.2) > 1e-9 || meta.PrivacyUnit.TruncatedUnits == nil {
		t.Errorf("epsilon %v of budget %v, units' %v, truncated %+v", meta.Epsilon, meta.Budget, meta.PrivacyUnit.Epsilon, meta.PrivacyUnit.TruncatedUnits)
	}
}

// A private choice of K lands near the quantile asked for when its epsilon
// is large, is re-planned at that K, and is charged.
func TestUnitPrivateChoice(t *testing.T) {
	s := unitSchema(t)
	rows := unitRows(t, s, 900, 8) // 100 units with each of 1..9 rows
	for _, mech := range []Mechanism{MechanismLaplace, MechanismGaussian} {
		spec := Spec{Tables: parseViews(t, s, "dept,grade"), Exact: parseViews(t, s, "dept"),
			Unit: &Unit{Column: "student", Quantile: 0.5, Limit: 20, Share: 0.5}}
		if mech == MechanismGaussian {
			spec.Mechanism, spec.Rho, spec.Delta = MechanismGaussian, rho(t, 200), 1e-6
		} else {
			spec.Epsilon = eps(t, 40)
		}
		p, w := runUnits(t, s, spec, rows, 9)
		if p.Unit().MaxRows != 0 || p.unit.k != 20 {
			t.Errorf("the plan before the choice has K = %d (planned at %d)", p.Unit().MaxRows, p.unit.k)
		}
		// 500 units have at most 5 rows: the median is 5; at eps 15 per
		// choice the utility falls by 5 per step, so 4..6 only.
		if k := w.Unit.MaxRows; k < 4 || k > 6 {
			t.Errorf("%v: chose K = %d, want about 5", mech, k)
		}
		meta := w.Metadata()
		pu := meta.PrivacyUnit
		if pu.MaxRows != w.Unit.MaxRows || !strings.Contains(pu.MaxRowsChoice, "0.5-quantile") || pu.TruncatedUnits == nil || pu.TruncatedUnits.MaxRows != pu.MaxRows {
			t.Errorf("%v: privacy_unit %+v", mech, pu)
		}
		for _, m := range w.Measurements {
			if m.Sensitivity != 2*pu.MaxRows && m.L2Sensitivity == 0 {
				t.Errorf("%v: measurement sensitivity %d at K = %d", mech, m.Sensitivity, pu.MaxRows)
			}
		}
		if mech == MechanismGaussian {
			if math.Abs(meta.Rho-200) > 1e-6 || meta.RhoBudget != 200 || pu.Rho == 0 {
				t.Errorf("rho %v of %v, units' %v", meta.Rho, meta.RhoBudget, pu.Rho)
			}
		} else if math.Abs(meta.Epsilon-40) > 1e-6 || math.Abs(pu.Epsilon-20) > 1e-6 || math.Abs(pu.MaxRowsEpsilon-15) > 1e-6 {
			t.Errorf("epsilon %v, units' %v, choice %v", meta.Epsilon, pu.Epsilon, pu.MaxRowsEpsilon)
		}
	}
}

func TestUnitRefusals(t *testing.T) {
	s := unitSchema(t)
	base := Spec{Tables: parseViews(t, s, "dept"), Epsilon: eps(t, 1)}
	for _, tc := range []struct {
		u    Unit
		want string
	}{
		{Unit{MaxRows: 2}, "no column"},
		{Unit{Column: "dept", MaxRows: 2}, "is a dimension"},
		{Unit{Column: "s", MaxRows: -1}, "rows per unit"},
		{Unit{Column: "s", MaxRows: 2, Share: 1}, "share"},
		{Unit{Column: "s", MaxRows: 2, Quantile: 0.5}, "private choice"},
		{Unit{Column: "s", Limit: -3}, "largest rows"},
	} {
		spec := base
		u := tc.u
		spec.Unit = &u
		if _, err := NewPlan(s, spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.u, err, tc.want)
		}
	}
	spec := base
	spec.Unit = &Unit{Column: "s", MaxRows: 2}
	p, err := NewPlan(s, spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Run(context.Background(), nil, noise.NewSeeded(1)); err == nil || !strings.Contains(err.Error(), "RunUnits") {
		t.Errorf("Run of a plan per unit: %v", err)
	}
	row, _ := NewPlan(s, base)
	if _, err := row.RunUnits(context.Background(), nil, unitRows(t, s, 2, 1), noise.NewSeeded(1)); err == nil {
		t.Error("RunUnits of a plan per row succeeded")
	}
}

func TestRequestUnit(t *testing.T) {
	s := unitSchema(t)
	q := Request{Mechanism: "laplace", Epsilon: 1, Split: "optimal", Strategy: "best", Tol: 1e-6}
	for _, tc := range []struct {
		mod  func(*Request)
		want string
	}{
		{func(q *Request) { q.MaxRows = 3 }, "--max-rows needs --privacy-unit"},
		{func(q *Request) { q.PrivacyUnit = "student" }, "--max-rows K"},
		{func(q *Request) { q.PrivacyUnit, q.MaxRows, q.RowLevel = "student", 2, true }, "exclude"},
		{func(q *Request) { q.PrivacyUnit, q.MaxRows, q.MaxRowsQuantile = "student", 2, 0.5 }, "apply to --max-rows auto"},
		{func(q *Request) { q.PrivacyUnit, q.MaxRowsAuto, q.MaxRowsQuantile = "student", true, 2 }, "--max-rows-quantile"},
		{func(q *Request) { q.PrivacyUnit, q.MaxRows, q.UnitShare = "student", 2, 1 }, "--unit-share"},
		{func(q *Request) { q.UnitShare = 0.1 }, "need --privacy-unit"},
	} {
		r := q
		tc.mod(&r)
		err := r.Check()
		if err == nil || !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want a usage error with %q", r, err, tc.want)
		}
	}
	r := q
	r.PrivacyUnit, r.MaxRowsAuto = "student", true
	spec, err := r.Spec(s)
	if err != nil || spec.Unit == nil || spec.Unit.Column != "student" || spec.Unit.MaxRows != 0 {
		t.Fatalf("auto: %+v, %v", spec.Unit, err)
	}
	// A column that looks like an identifier: refused per row unless asked.
	r = q
	r.Columns = []string{"student_id", "dept", "grade", "year"}
	if _, err := r.Spec(s); !errors.Is(err, ErrIdentifier) || !strings.Contains(err.Error(), `"student_id"`) {
		t.Errorf("identifier column: %v", err)
	}
	r.RowLevel = true
	if _, err := r.Spec(s); err != nil {
		t.Errorf("--row-level: %v", err)
	}
	r.RowLevel, r.PrivacyUnit, r.MaxRows = false, "student_id", 5
	if _, err := r.Spec(s); err != nil {
		t.Errorf("--privacy-unit: %v", err)
	}
}

// Tables at the levels of two hierarchies (the GLS engine): per unit, every
// measurement is K times the row-level one and the tables agree with the
// true invariants.
func TestUnitCrossedHierarchies(t *testing.T) {
	s := testkit.Crossed(t)
	const k = 3
	row, err := NewPlan(s, crossedSpec(t, s))
	if err != nil {
		t.Fatal(err)
	}
	counts, _ := crossedCounts(t, s, row, 1)
	wr, err := row.Run(context.Background(), counts, noise.NewSeeded(2))
	if err != nil {
		t.Fatal(err)
	}
	spec := crossedSpec(t, s)
	spec.Unit = &Unit{Column: "person", MaxRows: k}
	_, wu := runUnits(t, s, spec, unitRows(t, s, 400, 3), 2)
	if len(wu.Measurements) == 0 || len(wu.Measurements) != len(wr.Measurements) {
		t.Fatalf("%d measurements per unit, %d per row", len(wu.Measurements), len(wr.Measurements))
	}
	for i, m := range wu.Measurements {
		if m.Sensitivity != k*wr.Measurements[i].Sensitivity || m.Share != wr.Measurements[i].Share {
			t.Errorf("measurement %d: %+v per unit, %+v per row", i, m, wr.Measurements[i])
		}
	}
	agreeing(t, s, wu, 1e-8)
	if wu.Metadata().PrivacyUnit == nil {
		t.Error("no privacy_unit")
	}
}
