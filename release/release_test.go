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

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate"
	"github.com/knowdp/knowdp/internal/tensor"
	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/sensitivity"
)

func eps(t testing.TB, x float64) privacy.Epsilon {
	t.Helper()
	e, err := privacy.NewEpsilon(x)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestReleaseInvariantsHoldAndSeededIsReproducible(t *testing.T) {
	s := testkit.TestSchema(t, 3, 4, 2, 3)
	c := &cube.Cube{Schema: s, Counts: testkit.RandomTable(noise.NewSeeded(1), s.Cells())}
	exact := []domain.Cuboid{testkit.CuboidOf([]int{0, 1}), testkit.CuboidOf([]int{1, 2})}
	for _, over := range []domain.Cuboid{domain.Base(4), testkit.CuboidOf([]int{0, 1, 3}), testkit.CuboidOf([]int{2, 3})} {
		spec := cuboidSpec{Epsilon: eps(t, 0.5), Exact: exact, Cuboid: over}
		a, err := runCube(context.Background(), c, spec, noise.NewSeeded(7))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := runCube(context.Background(), c, spec, noise.NewSeeded(7))
		for i := range a.Counts {
			if a.Counts[i] != b.Counts[i] {
				t.Fatalf("seeded releases differ at %d", i)
			}
		}
		if !a.Seeded || a.Metadata().Private {
			t.Error("seeded release not marked as such")
		}
		want, _ := sensitivity.GenericSensitivity(s, exact, over)
		if a.Sensitivity != want.Value || a.Sensitivity == 0 {
			t.Errorf("sensitivity %d, want %d", a.Sensitivity, want.Value)
		}
		if math.Abs(a.Scale-float64(a.Sensitivity)/0.5) > 1e-5*a.Scale {
			t.Errorf("scale %v for sensitivity %d at eps 0.5", a.Scale, a.Sensitivity)
		}
		// Every invariant's margin on the released cuboid is exact.
		for _, v := range a.Invariants {
			k := v.Cuboid & over
			got := make([]float64, s.CuboidSize(k))
			tensor.Project(tensor.SubSizes(s.Sizes(), over), tensor.Reindex(k, over), a.Counts, got)
			want := c.Project(k)
			for i := range got {
				if math.Abs(got[i]-want[i]) > 1e-9 {
					t.Fatalf("release over %s breaks invariant %s at %d: %v vs %v", s.Format(over), s.Format(v.Cuboid), i, got[i], want[i])
				}
			}
		}
	}
}

func TestReleasePublicCuboidIsExact(t *testing.T) {
	s := testkit.TestSchema(t, 3, 4, 2)
	c := &cube.Cube{Schema: s, Counts: testkit.RandomTable(noise.NewSeeded(2), s.Cells())}
	rel, err := runCube(context.Background(), c, cuboidSpec{
		Epsilon: eps(t, 1), Exact: []domain.Cuboid{testkit.CuboidOf([]int{0, 1})}, Cuboid: testkit.CuboidOf([]int{1}),
	}, noise.NewRand())
	if err != nil {
		t.Fatal(err)
	}
	want := c.Project(testkit.CuboidOf([]int{1}))
	for i := range want {
		if rel.Counts[i] != want[i] {
			t.Fatalf("public cuboid released with noise: %v vs %v", rel.Counts, want)
		}
	}
	m := rel.Metadata()
	if rel.Sensitivity != 0 || rel.Scale != 0 || !strings.Contains(m.Mechanism, "determined") {
		t.Errorf("metadata of a public cuboid: %+v", m)
	}
	if !m.ReleasedExactly || len(m.Warnings) != 1 || !strings.Contains(m.Warnings[0], "TRUE counts") {
		t.Errorf("a release of true counts is not flagged: %+v", m)
	}
}

func TestReleaseNonNegative(t *testing.T) {
	s := testkit.TestSchema(t, 4, 5, 3)
	c := &cube.Cube{Schema: s, Counts: make([]float64, s.Cells())}
	r := noise.NewSeeded(3)
	for i := range c.Counts {
		c.Counts[i] = float64(r.Uint64N(2))
	}
	rel, err := runCube(context.Background(), c, cuboidSpec{
		Epsilon: eps(t, 0.5), Exact: []domain.Cuboid{testkit.CuboidOf([]int{0}), testkit.CuboidOf([]int{1, 2})}, Cuboid: domain.Base(3), NonNegative: true, Tol: 1e-7,
	}, r)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range rel.Counts {
		if v < -1e-7 {
			t.Fatalf("cell %d = %v is negative", i, v)
		}
	}
	if !strings.Contains(rel.Metadata().Mechanism, "non-negativity") {
		t.Error("mechanism does not mention non-negativity")
	}
}

func TestReleaseRejectsBadSpec(t *testing.T) {
	s := testkit.TestSchema(t, 2, 2)
	c := &cube.Cube{Schema: s, Counts: make([]float64, 4)}
	for _, tc := range []struct {
		name string
		spec cuboidSpec
		want string
	}{
		{"no epsilon", cuboidSpec{Cuboid: domain.Base(2)}, "epsilon"},
		{"cuboid beyond schema", cuboidSpec{Epsilon: eps(t, 1), Cuboid: 1 << 4}, "table 1: view 0x10 names dimensions the schema (2 dimensions) does not have"},
		{"exact beyond schema", cuboidSpec{Epsilon: eps(t, 1), Cuboid: domain.Base(2), Exact: []domain.Cuboid{1 << 3}}, "exact view 1: view 0x8 names dimensions the schema (2 dimensions) does not have"},
		{"negative sensitivity", cuboidSpec{Epsilon: eps(t, 1), Cuboid: domain.Base(2), Sensitivity: -1}, "sensitivity"},
	} {
		if _, err := runCube(context.Background(), c, tc.spec, noise.NewRand()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}
}

// TestReleasePrivacyOnInducedNeighbours checks the guarantee where it is
// tightest: on the worst-case induced neighbours the brute force finds, the
// exact probabilities of every noisy output differ by at most e^eps, and by
// exactly e^eps at the extreme output. Consistency is the same map on both
// tables (they share the invariants), so it cannot increase the ratio.
func TestReleasePrivacyOnInducedNeighbours(t *testing.T) {
	for _, tc := range []struct {
		sizes []int
		exact [][]int
	}{
		{[]int{3, 3}, [][]int{{0}, {1}}},
		{[]int{2, 2, 3}, [][]int{{0, 1}, {1, 2}}},
		{[]int{2, 3, 2}, [][]int{{0}}},
		{[]int{2, 2, 2}, [][]int{{0}, {1}, {2}}},
	} {
		s := testkit.TestSchema(t, tc.sizes...)
		var exact []domain.Cuboid
		for _, e := range tc.exact {
			exact = append(exact, testkit.CuboidOf(e))
		}
		w, err := sensitivity.BruteForceSensitivity(context.Background(), s, exact, nil, domain.Base(s.NumDims()))
		if err != nil {
			t.Fatal(err)
		}
		sens, err := sensitivity.GenericSensitivity(s, exact, domain.Base(s.NumDims()))
		if err != nil || sens.Value != w.Value {
			t.Fatalf("%v %v: closed form %v (%v), brute force %d", tc.sizes, tc.exact, sens, err, w.Value)
		}
		const e = 0.7
		lap, _ := noise.NewLaplace(float64(sens.Value), e)
		g := lap.Grid()
		// Both tables are counts on the grid; the noisy output y (in grid
		// units) has log-probability sum_i log P(y_i - x_i).
		logp := func(x []int, y []int64) float64 {
			var l float64
			for i := range x {
				l += math.Log(lap.Dist().Prob(y[i] - int64(float64(x[i])/g)))
			}
			return l
		}
		r := noise.NewSeeded(4)
		worst := 0.0
		for trial := range 2000 {
			y := make([]int64, len(w.Before))
			for i := range y {
				// Outputs near either table, and for the last trial the
				// extreme output beyond both in the direction of Before.
				base := float64(w.Before[i])
				if trial%2 == 1 {
					base = float64(w.After[i])
				}
				y[i] = int64(base/g) + lap.Dist().Sample(r)
				if trial == 1999 {
					if w.Before[i] > w.After[i] {
						y[i] = int64(float64(w.Before[i])/g) + 1
					} else if w.Before[i] < w.After[i] {
						y[i] = int64(float64(w.Before[i])/g) - 1
					}
				}
			}
			worst = max(worst, math.Abs(logp(w.Before, y)-logp(w.After, y)))
		}
		if worst > e*(1+1e-9) {
			t.Errorf("%v %v: log-ratio %v exceeds eps %v", tc.sizes, tc.exact, worst, e)
		}
		if worst < e*(1-1e-4) {
			t.Errorf("%v %v: worst log-ratio %v is not tight (eps %v): sensitivity overestimated?", tc.sizes, tc.exact, worst, e)
		}
	}
}

func TestReleaseWriteCSVAndMetadata(t *testing.T) {
	s, err := domain.NewSchema([]domain.Dimension{{Name: "sex", Values: []string{"F", "M"}}, {Name: "city", Values: []string{"A, B", "C"}}})
	if err != nil {
		t.Fatal(err)
	}
	c := &cube.Cube{Schema: s, Counts: []float64{1, 2, 3, 4}}
	sex, _ := s.CuboidOf("sex")
	rel, err := runCube(context.Background(), c, cuboidSpec{Epsilon: eps(t, 1), Exact: []domain.Cuboid{sex}, Cuboid: domain.Base(2)}, noise.NewSeeded(1))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := rel.WriteCSV(&buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 5 || lines[0] != "sex,city,count,moe90" || !strings.HasSuffix(lines[1], ","+domain.FormatExact(rel.MOE90)) || !strings.HasPrefix(lines[1], `F,"A, B",`) || !strings.HasPrefix(lines[4], "M,C,") {
		t.Errorf("csv:\n%s", buf.String())
	}
	b, _ := json.Marshal(rel.Metadata())
	for _, key := range []string{`"epsilon":1`, `"neighbours":"worst-case induced`, `"sensitivity":2`, `"scale":`, `"exact":[["sex"]]`, `"seeded":true`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("metadata %s lacks %s", b, key)
		}
	}
	if domain.FormatCount(-1e-9) != "0" || domain.FormatCount(2.5000004) != "2.5" {
		t.Errorf("FormatCount: %q %q", domain.FormatCount(-1e-9), domain.FormatCount(2.5000004))
	}
}

func BenchmarkRelease(b *testing.B) {
	for _, tc := range []struct{ dims, exact int }{{6, 1}, {7, 1}, {8, 4}} {
		dims := tc.dims
		sizes := make([]int, dims)
		for i := range sizes {
			sizes[i] = 10
		}
		s := testkit.TestSchema(b, sizes...)
		c := &cube.Cube{Schema: s, Counts: testkit.RandomTable(noise.NewSeeded(1), s.Cells())}
		spec := cuboidSpec{Epsilon: eps(b, 1), Cuboid: domain.Base(dims)}
		for _, e := range testkit.BenchExact[tc.exact] {
			spec.Exact = append(spec.Exact, testkit.CuboidOf(e))
		}
		if tc.exact > 2 {
			// No closed form for four invariants: a sensitivity claimed by
			// the caller (the release is then conditional); the cost is the
			// same.
			spec.Sensitivity = 64
		}
		// The exact counts a release starts from (what Aggregate counts
		// while reading the rows); the release adds noise to the released
		// cuboid's counts in place, so each iteration gets a fresh copy,
		// outside the timer.
		tables := map[domain.Cuboid][]float64{}
		for _, n := range spec.Needs() {
			tables[n] = c.Project(n)
		}
		counts := tables[spec.Cuboid]
		work := make([]float64, len(counts))
		r := noise.NewRand()
		b.Run(fmt.Sprintf("cells=1e%d/exact=%d", dims, tc.exact), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				copy(work, counts)
				tables[spec.Cuboid] = work
				b.StartTimer()
				if _, err := releaseFrom(context.Background(), s, tables, spec, r); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(s.Cells())*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mcells/s")
		})
	}
}

// A non-negative release that cannot meet its tolerance is still released,
// with the residual it reached: an error would reveal something about the
// noise without charging for it.
func TestReleaseNonNegativeNeverFailsOnData(t *testing.T) {
	s := testkit.TestSchema(t, 3, 4)
	c := &cube.Cube{Schema: s, Counts: testkit.RandomTable(noise.NewSeeded(8), s.Cells())}
	rel, err := runCube(context.Background(), c, cuboidSpec{
		Epsilon: eps(t, 0.1), Exact: []domain.Cuboid{testkit.CuboidOf([]int{0})}, Cuboid: domain.Base(2), NonNegative: true, Tol: 1e-300,
	}, noise.NewSeeded(9))
	if err != nil {
		t.Fatalf("release failed: %v", err)
	}
	if !(rel.NonNegativeResidual > 1e-300) {
		t.Errorf("residual %v should show the unmet tolerance", rel.NonNegativeResidual)
	}
	if m := rel.Metadata(); m.NonNegResidual != rel.NonNegativeResidual {
		t.Errorf("metadata residual %v", m.NonNegResidual)
	}
	// The invariants still hold exactly.
	got := (&cube.Cube{Schema: s, Counts: rel.Counts}).Project(testkit.CuboidOf([]int{0}))
	want := c.Project(testkit.CuboidOf([]int{0}))
	for i := range got {
		if math.Abs(got[i]-want[i]) > 1e-9 {
			t.Fatalf("invariant broken: %v vs %v", got, want)
		}
	}
}

// TestReleaseSensitivityOverride pins the rule for cuboidSpec.Sensitivity:
// below the computed generic sensitivity it is refused (naming the value),
// at or above it is used with an unconditional guarantee, and where no
// closed form is known it is accepted as the caller's claim, marked
// conditional.
func TestReleaseSensitivityOverride(t *testing.T) {
	small := testkit.TestSchema(t, 3, 4, 2)
	exact2 := []domain.Cuboid{testkit.CuboidOf([]int{0}), testkit.CuboidOf([]int{1, 2})} // Lemma 4.2(ii): 2 min(3, 8) = 6
	big := testkit.TestSchema(t, 3, 3, 3)
	exact3 := []domain.Cuboid{testkit.CuboidOf([]int{0}), testkit.CuboidOf([]int{1}), testkit.CuboidOf([]int{2})} // 27 cells: no closed form
	if _, err := sensitivity.GenericSensitivity(big, exact3, domain.Base(3)); !errors.Is(err, sensitivity.ErrNoClosedForm) {
		t.Fatalf("test premise: want ErrNoClosedForm, got %v", err)
	}
	for _, tc := range []struct {
		name      string
		s         *domain.Schema
		exact     []domain.Cuboid
		given     int
		wantErr   string
		wantSens  int
		guarantee string
		rule      string
	}{
		{"computed", small, exact2, 0, "", 6, privacy.GuaranteeUnconditional, "Lemma 4.2(ii)"},
		{"below computed", small, exact2, 5, "below the generic sensitivity 6", 0, "", ""},
		{"one below", small, exact2, 1, "generic sensitivity 6", 0, "", ""},
		{"equal", small, exact2, 6, "", 6, privacy.GuaranteeUnconditional, "at least the generic sensitivity 6"},
		{"above", small, exact2, 9, "", 9, privacy.GuaranteeUnconditional, "given by the caller: 9"},
		{"no closed form, claimed", big, exact3, 1, "", 1, privacy.GuaranteeConditional, "given by the caller (no closed form known): "},
		{"no closed form, none given", big, exact3, 0, "no closed form", 0, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cube.Cube{Schema: tc.s, Counts: make([]float64, tc.s.Cells())}
			rel, err := runCube(context.Background(), c, cuboidSpec{Epsilon: eps(t, 1), Exact: tc.exact, Cuboid: domain.Base(3), Sensitivity: tc.given}, noise.NewRand())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			m := rel.Metadata()
			if rel.Sensitivity != tc.wantSens || m.Guarantee != tc.guarantee || !strings.Contains(m.SensitivityRule, tc.rule) || !m.Private {
				t.Errorf("sensitivity %d, metadata %+v; want %d, %s, rule with %q", rel.Sensitivity, m, tc.wantSens, tc.guarantee, tc.rule)
			}
			if math.Abs(rel.Scale-float64(tc.wantSens)) > 1e-5*rel.Scale {
				t.Errorf("scale %v, want %d at eps 1", rel.Scale, tc.wantSens)
			}
			conditional := tc.guarantee == privacy.GuaranteeConditional
			if warned := strings.Contains(strings.Join(m.Warnings, ";"), "cannot check"); warned != conditional {
				t.Errorf("warnings %q for guarantee %s", m.Warnings, m.Guarantee)
			}
		})
	}
}

// TestReleaseNotPrivateMarks checks that seeded noise and domains read from
// the data make "private" false, with guarantee "none" and a warning each.
func TestReleaseNotPrivateMarks(t *testing.T) {
	s := testkit.TestSchema(t, 2, 3)
	c := &cube.Cube{Schema: s, Counts: make([]float64, s.Cells())}
	for _, tc := range []struct {
		name     string
		fromData bool
		r        *noise.Rand
		private  bool
		warnings int
	}{
		{"secure, declared", false, noise.NewRand(), true, 0},
		{"seeded", false, noise.NewSeeded(1), false, 1},
		{"domains from data", true, noise.NewRand(), false, 1},
		{"both", true, noise.NewSeeded(1), false, 2},
	} {
		rel, err := runCube(context.Background(), c, cuboidSpec{Epsilon: eps(t, 1), Cuboid: domain.Base(2), DomainsFromData: tc.fromData}, tc.r)
		if err != nil {
			t.Fatal(err)
		}
		m := rel.Metadata()
		want := privacy.GuaranteeUnconditional
		if !tc.private {
			want = privacy.GuaranteeNone
		}
		if m.Private != tc.private || m.Guarantee != want || m.DomainsFromData != tc.fromData || len(m.Warnings) != tc.warnings {
			t.Errorf("%s: metadata %+v", tc.name, m)
		}
		b, _ := json.Marshal(m)
		if !strings.Contains(string(b), fmt.Sprintf(`"private":%v`, tc.private)) || !strings.Contains(string(b), `"domains_from_data":`) {
			t.Errorf("%s: JSON %s", tc.name, b)
		}
	}
}

// A sensitivity given by the caller is checked where knowdp can compute the
// generic sensitivity, and marks the guarantee conditional where it cannot.
func ExampleNewPlan_sensitivity() {
	e, _ := privacy.NewEpsilon(1)
	s, _ := domain.NewSchema([]domain.Dimension{
		{Name: "sex", Values: []string{"F", "M"}},
		{Name: "age", Values: []string{"0-17", "18-64", "65+"}},
		{Name: "region", Values: []string{"N", "S", "E", "W"}},
	})
	view := func(s *domain.Schema, x string) domain.View {
		v, _ := s.ParseView(x)
		return v
	}
	base := []domain.View{domain.ViewOf(domain.Base(3))}

	// Two exact cuboids: knowdp computes 2*min(size(sex,age), size(region)).
	_, err := NewPlan(s, Spec{Epsilon: e, Exact: []domain.View{view(s, "sex,age"), view(s, "region")}, Tables: base, Sensitivity: 1})
	fmt.Println(err)
	// Three one-dimensional exact cuboids on 24 cells are brute-forced, on
	// 3 x 3 x 3 they have no closed form: the caller's value is a claim.
	s3, _ := domain.NewSchema([]domain.Dimension{{Name: "a", Values: []string{"1", "2", "3"}}, {Name: "b", Values: []string{"1", "2", "3"}}, {Name: "c", Values: []string{"1", "2", "3"}}})
	plan, _ := NewPlan(s3, Spec{Epsilon: e, Exact: []domain.View{view(s3, "a"), view(s3, "b"), view(s3, "c")}, Tables: base, Sensitivity: 10})
	fmt.Println(plan.Cuboid().Guarantee(), plan.Cuboid().Private())
	// A cuboid computable from an exact one is released exactly.
	plan, _ = NewPlan(s, Spec{Epsilon: e, Exact: []domain.View{view(s, "sex,age")}, Tables: []domain.View{view(s, "sex,age")}})
	fmt.Println(plan.Cuboid().ReleasedExactly, plan.Cuboid().Guarantee())
	// Output:
	// release: sensitivity 1 is below the generic sensitivity 8 of cuboid {sex,age,region} (Lemma 4.2(ii): exact cuboids {sex,age} and {region}, 2*min(6, 4))
	// conditional true
	// true unconditional
}

// TestPlanCuboidMatchesRelease checks that Plan.Cuboid, the planned
// release of one cuboid a pipeline draws block by block, has the privacy
// story, margin of error and noise of the release Run draws.
func TestPlanCuboidMatchesRelease(t *testing.T) {
	s, err := domain.NewSchema([]domain.Dimension{{Name: "a", Values: []string{"0", "1", "2"}}, {Name: "b", Values: []string{"x", "y"}}, {Name: "c", Values: []string{"p", "q", "r", "s"}}})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := cube.New(s, 64)
	for i := range c.Counts {
		c.Counts[i] = float64(i % 5)
	}
	eps, err := privacy.NewEpsilon(0.7)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		spec   cuboidSpec
		seeded bool
	}{
		{"no invariants", cuboidSpec{Epsilon: eps, Cuboid: 7}, true},
		{"two invariants", cuboidSpec{Epsilon: eps, Cuboid: 7, Exact: []domain.Cuboid{3, 6}}, false},
		{"2-D cuboid", cuboidSpec{Epsilon: eps, Cuboid: 5, Exact: []domain.Cuboid{1}}, true},
		{"sensitivity given", cuboidSpec{Epsilon: eps, Cuboid: 7, Exact: []domain.Cuboid{1}, Sensitivity: 9}, false},
		{"determined by the invariants", cuboidSpec{Epsilon: eps, Cuboid: 1, Exact: []domain.Cuboid{3}}, false},
		{"domains from the data", cuboidSpec{Epsilon: eps, Cuboid: 7, DomainsFromData: true}, false},
	}
	specOf := func(cs cuboidSpec) Spec {
		spec := Spec{Epsilon: cs.Epsilon, Tables: []domain.View{domain.ViewOf(cs.Cuboid)}, Sensitivity: cs.Sensitivity,
			DomainsFromData: cs.DomainsFromData, NonNegative: cs.NonNegative}
		for _, e := range cs.Exact {
			spec.Exact = append(spec.Exact, domain.ViewOf(e))
		}
		return spec
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := noise.NewRand()
			if tc.seeded {
				r = noise.NewSeeded(1)
			}
			rel, err := runCube(context.Background(), c, tc.spec, r)
			if err != nil {
				t.Fatal(err)
			}
			p, err := NewPlan(s, specOf(tc.spec))
			if err != nil {
				t.Fatal(err)
			}
			plan := p.Cuboid()
			if plan == nil {
				t.Fatal("no planned cuboid for a release of one cuboid")
			}
			if plan.Seeded {
				t.Fatal("the planned cuboid says seeded")
			}
			plan.Seeded = tc.seeded // the generator's, which the plan does not know
			got, _ := json.Marshal(plan.Metadata())
			want, _ := json.Marshal(rel.Metadata())
			if string(got) != string(want) {
				t.Fatalf("plan metadata\n%s\nrelease metadata\n%s", got, want)
			}
			if plan.CellMOE90() != rel.CellMOE90() || plan.Scale != rel.Scale || plan.Grid != rel.Grid {
				t.Fatalf("plan moe90 %v scale %v grid %v, release %v %v %v", plan.CellMOE90(), plan.Scale, plan.Grid, rel.CellMOE90(), rel.Scale, rel.Grid)
			}
			// A copy: what the caller does with it leaves the plan alone.
			for i := range plan.Invariants {
				plan.Invariants[i].Cuboid = 0
			}
			if again := p.Cuboid(); !slices.EqualFunc(again.Invariants, rel.Invariants, func(a, b estimate.Invariant) bool { return a.Cuboid == b.Cuboid }) {
				t.Fatalf("the plan's invariants changed with its copy's: %v", again.Invariants)
			}
		})
	}
	// Two tables are not one cuboid.
	p, err := NewPlan(s, Spec{Epsilon: eps, Tables: []domain.View{domain.ViewOf(3), domain.ViewOf(6)}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Cuboid() != nil {
		t.Error("a release of two tables has a planned cuboid")
	}
}
