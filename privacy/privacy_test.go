package privacy

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestNewEpsilon(t *testing.T) {
	for _, tc := range []struct {
		in      float64
		wantErr string
	}{
		{math.NaN(), "finite"},
		{math.Inf(1), "finite"},
		{math.Inf(-1), "finite"},
		{0, "> 0"},
		{-0.5, "> 0"},
		{5000, "at most"},
		{1e-13, "resolution"},
		{0.1, ""},
		{1, ""},
		{MaxEpsilon, ""},
	} {
		e, err := NewEpsilon(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("NewEpsilon(%v): err %v, want one mentioning %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("NewEpsilon(%v): %v", tc.in, err)
			continue
		}
		if f := e.Float64(); f > tc.in || tc.in-f >= EpsilonStep {
			t.Errorf("NewEpsilon(%v) = %v: not rounded down to the grid", tc.in, f)
		}
		if f := e.Float64() / EpsilonStep; f != math.Trunc(f) {
			t.Errorf("NewEpsilon(%v) = %v is off the grid", tc.in, e)
		}
	}
}

func TestNewDelta(t *testing.T) {
	for _, bad := range []float64{math.NaN(), -1e-9, 1, 2} {
		if _, err := NewDelta(bad); err == nil {
			t.Errorf("NewDelta(%v) accepted", bad)
		}
	}
	d, err := NewDelta(1e-6)
	if err != nil || d.Float64() > 1e-6 || 1e-6-d.Float64() >= DeltaStep {
		t.Errorf("NewDelta(1e-6) = %v, %v", d, err)
	}
}

func mustEps(t *testing.T, x float64) Epsilon {
	t.Helper()
	e, err := NewEpsilon(x)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestCompositionExact(t *testing.T) {
	one := Pure(mustEps(t, 1))
	tenth := Pure(mustEps(t, 0.1))
	var parts []Budget
	for range 10 {
		parts = append(parts, tenth)
	}
	// In float64, 0.1 summed ten times is 0.9999999999999999 and
	// 0.7+0.2+0.1 is 1.0000000000000002; on the grid both fit exactly.
	if s := Sequential(parts...); !one.Covers(s) {
		t.Errorf("ten charges of 0.1 (%v) do not fit eps=1", s)
	}
	s := Sequential(Pure(mustEps(t, 0.7)), Pure(mustEps(t, 0.2)), Pure(mustEps(t, 0.1)))
	if !one.Covers(s) {
		t.Errorf("0.7+0.2+0.1 = %v does not fit eps=1", s)
	}
	if got := Parallel(Pure(mustEps(t, 0.3)), Pure(mustEps(t, 0.5)), Pure(mustEps(t, 0.2))); got.Epsilon() != mustEps(t, 0.5).Float64() {
		t.Errorf("parallel composition = %v, want the max 0.5", got)
	}
	d1, _ := NewDelta(1e-6)
	d2, _ := NewDelta(1e-7)
	p := Parallel(Approx(mustEps(t, 1), d2), Approx(mustEps(t, 0.5), d1))
	if p.Epsilon() != 1 || p.Delta() != d1.Float64() {
		t.Errorf("parallel (eps,delta) = %v, want componentwise max", p)
	}
	if q := Sequential(Approx(mustEps(t, 1), d1), Approx(mustEps(t, 1), d1)); q.Delta() != 2*d1.Float64() || q.Epsilon() != 2 {
		t.Errorf("sequential (eps,delta) = %v", q)
	}
}

func TestAccountantRefusesOverspend(t *testing.T) {
	a := NewAccountant(Pure(mustEps(t, 1)))
	if err := a.Spend(Pure(mustEps(t, 0.7))); err != nil {
		t.Fatal(err)
	}
	err := a.Spend(Pure(mustEps(t, 0.5)))
	var oe *OverspendError
	if !errors.As(err, &oe) || !errors.Is(err, ErrOverspend) {
		t.Fatalf("overspend not refused: %v", err)
	}
	if math.Abs(oe.Excess.Epsilon()-0.2) > 1e-11 || math.Abs(oe.Remaining.Epsilon()-0.3) > 1e-11 {
		t.Errorf("excess %v remaining %v, want 0.2 and 0.3", oe.Excess, oe.Remaining)
	}
	if !strings.Contains(err.Error(), "by eps=0.2") {
		t.Errorf("message %q does not say by how much", err)
	}
	if got := a.Spent().Epsilon(); math.Abs(got-0.7) > 1e-11 {
		t.Errorf("refused charge was recorded: spent %v", got)
	}
	if err := a.Spend(Pure(mustEps(t, 0.3))); err != nil {
		t.Errorf("exact fit refused: %v", err)
	}
	// Both charges were rounded down to the grid: at most two steps remain.
	if r := a.Remaining().Epsilon(); r > 2*EpsilonStep {
		t.Errorf("remaining %v after an exact fit", r)
	}
}

func TestAccountantConcurrent(t *testing.T) {
	a := NewAccountant(Pure(mustEps(t, 1)))
	charge := Pure(mustEps(t, 0.01))
	var ok atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range 10 {
				if a.Spend(charge) == nil {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if ok.Load() != 100 {
		t.Errorf("%d charges of 0.01 accepted against eps=1, want exactly 100", ok.Load())
	}
	if !Pure(mustEps(t, 1)).Covers(a.Spent()) {
		t.Errorf("overspent: %v", a.Spent())
	}
}

func TestStepsRoundTrip(t *testing.T) {
	d, _ := NewDelta(1e-8)
	b := Approx(mustEps(t, 0.37), d)
	e, dd := b.Steps()
	c, err := FromSteps(e, dd)
	if err != nil || c != b {
		t.Errorf("round trip %v -> %v, %v", b, c, err)
	}
	if _, err := FromSteps(-1, 0); err == nil {
		t.Error("negative steps accepted")
	}
	if _, err := NewBudget(math.NaN(), 0); err == nil {
		t.Error("NaN budget accepted")
	}
	if z, err := NewBudget(0, 0); err != nil || !z.IsZero() {
		t.Errorf("zero budget: %v %v", z, err)
	}
}

// Issue 10: three (0.001, 0.7) budgets summed delta to -1.9 (int64
// overflow), which a (1, 0.5) budget then "covered".
func TestSequentialNeverWraps(t *testing.T) {
	d7, err := NewDelta(0.7)
	if err != nil {
		t.Fatal(err)
	}
	b := Approx(mustEps(t, 0.001), d7)
	s := Sequential(b, b, b)
	if s.Delta() != 1 || !s.Vacuous() {
		t.Errorf("three (0.001, 0.7) = %v, want delta saturated at 1 (vacuous)", s)
	}
	d5, _ := NewDelta(0.5)
	total := Approx(mustEps(t, 1), d5)
	if total.Covers(s) {
		t.Errorf("%v covers %v", total, s)
	}
	a := NewAccountant(total)
	if err := a.Spend(s); !errors.Is(err, ErrOverspend) {
		t.Errorf("vacuous charge accepted: %v", err)
	}
	if !a.Spent().IsZero() {
		t.Errorf("refused charge recorded: %v", a.Spent())
	}
	// Two deltas summing to exactly 1 are vacuous too (delta < 1 is needed).
	d := Delta{steps: 1 << 61}
	if h := Sequential(Approx(Epsilon{}, d), Approx(Epsilon{}, d)); !h.Vacuous() || h.Delta() != 1 {
		t.Errorf("1/2 + 1/2 = %v, want vacuous delta 1", h)
	}
	// Epsilon sums saturate to +Inf instead of wrapping.
	big, _ := FromSteps(MaxSteps, 0)
	for _, tc := range []struct {
		parts []Budget
		want  float64
	}{
		{[]Budget{big, Pure(mustEps(t, EpsilonStep))}, math.Inf(1)},
		{[]Budget{big, big, big}, math.Inf(1)},
		{[]Budget{big}, MaxSteps * EpsilonStep},
	} {
		s := Sequential(tc.parts...)
		if s.Epsilon() != tc.want {
			t.Errorf("Sequential(%v) = %v, want eps %v", tc.parts, s, tc.want)
		}
		if math.IsInf(tc.want, 1) && (big.Covers(s) || s.Covers(s)) {
			t.Errorf("vacuous %v is covered", s)
		}
	}
	// A saturated (vacuous) total still refuses vacuous charges and stays
	// vacuous when something is taken from it.
	vt := Sequential(big, big)
	if r, err := vt.Sub(Pure(mustEps(t, 1))); err != nil || !math.IsInf(r.Epsilon(), 1) {
		t.Errorf("vacuous - 1 = %v, %v", r, err)
	}
	// Rho saturates the same way.
	rbig, _ := FromRhoSteps(MaxSteps)
	if r := Sequential(rbig, rbig); !math.IsInf(r.Rho(), 1) || !r.Vacuous() {
		t.Errorf("rho sum %v did not saturate", r)
	}
}

// Issue 10: Epsilon(-1) was accepted by Pure and spending it gave budget
// back. Epsilon, Delta and Rho are now structs only their constructors
// fill, so no negative value can be made; the zero values charge nothing.
func TestNoNegativeCharge(t *testing.T) {
	if !Pure(Epsilon{}).IsZero() || !Approx(Epsilon{}, Delta{}).IsZero() || !Concentrated(Rho{}).IsZero() {
		t.Error("zero parameters give a non-zero budget")
	}
	for _, n := range []int64{-1, 0, maxEpsilonSteps + 1, math.MaxInt64, math.MinInt64} {
		if _, err := EpsilonFromSteps(n); err == nil {
			t.Errorf("EpsilonFromSteps(%d) accepted", n)
		}
		if _, err := RhoFromSteps(n); err == nil && n != maxEpsilonSteps+1 {
			t.Errorf("RhoFromSteps(%d) accepted", n)
		}
	}
	if _, err := RhoFromSteps(maxRhoSteps + 1); err == nil {
		t.Error("RhoFromSteps above MaxRho accepted")
	}
	for _, n := range []int64{1, 12345, maxEpsilonSteps} {
		e, err := EpsilonFromSteps(n)
		if err != nil || e.Steps() != n || e.Float64() != float64(n)*EpsilonStep {
			t.Errorf("EpsilonFromSteps(%d) = %v, %v", n, e, err)
		}
	}
	a := NewAccountant(Pure(mustEps(t, 1)))
	if err := a.Spend(Pure(mustEps(t, 0.5))); err != nil {
		t.Fatal(err)
	}
	if err := a.Spend(Pure(Epsilon{})); err != nil {
		t.Fatal(err)
	}
	if got := a.Spent().Epsilon(); got != mustEps(t, 0.5).Float64() {
		t.Errorf("spent %v after a zero charge, want 0.5", got)
	}
}

// Issue 10: FromSteps had no upper limit.
func TestFromStepsBounded(t *testing.T) {
	for _, tc := range []struct{ eps, delta int64 }{
		{-1, 0}, {0, -1}, {MaxSteps + 1, 0}, {0, MaxSteps + 1}, {math.MaxInt64, 0}, {0, math.MaxInt64}, {math.MinInt64, 0},
	} {
		if b, err := FromSteps(tc.eps, tc.delta); err == nil {
			t.Errorf("FromSteps(%d, %d) = %v accepted", tc.eps, tc.delta, b)
		}
	}
	for _, r := range []int64{-1, MaxSteps + 1, math.MaxInt64} {
		if _, err := FromRhoSteps(r); err == nil {
			t.Errorf("FromRhoSteps(%d) accepted", r)
		}
	}
	b, err := FromSteps(MaxSteps, MaxSteps)
	if err != nil || b.Vacuous() || !b.Covers(b) || b.Epsilon() != MaxSteps*EpsilonStep {
		t.Errorf("FromSteps(MaxSteps, MaxSteps) = %v, %v", b, err)
	}
	// The largest storable budgets still add without wrapping.
	if s := Sequential(b, b); !s.Vacuous() || b.Covers(s) {
		t.Errorf("sum of maxima %v is not vacuous", s)
	}
	r, _ := FromRhoSteps(12345)
	full := Sequential(b, r)
	e, d := full.Steps()
	if e != MaxSteps || d != MaxSteps || full.RhoSteps() != 12345 {
		t.Errorf("steps of %v = %d %d %d", full, e, d, full.RhoSteps())
	}
}

func TestFormatting(t *testing.T) {
	e := mustEps(t, 0.5)
	d, _ := NewDelta(0.25)
	r, _ := NewRho(0.125)
	for _, tc := range []struct{ got, want string }{
		{fmt.Sprintf("%v %g %.2f %s", e, e, e, e), "0.5 0.5 0.50 0.5"},
		{fmt.Sprintf("%v %g", d, d), "0.25 0.25"},
		{fmt.Sprintf("%v %.3e", r, r), "0.125 1.250e-01"},
		{Pure(e).String(), "eps=0.5"},
		{Approx(e, d).String(), "eps=0.5, delta=0.25"},
		{Concentrated(r).String(), "rho=0.125"},
		{Sequential(Pure(e), Concentrated(r)).String(), "eps=0.5, rho=0.125"},
		{Budget{}.String(), "eps=0"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestParamJSON(t *testing.T) {
	type params struct {
		Eps   Epsilon `json:"eps"`
		Delta Delta   `json:"delta"`
		Rho   Rho     `json:"rho"`
	}
	d, _ := NewDelta(0.25)
	in := params{mustEps(t, 0.5), d, mustRho(t, 0.125)}
	b, err := json.Marshal(in)
	if err != nil || string(b) != `{"eps":0.5,"delta":0.25,"rho":0.125}` {
		t.Fatalf("marshal: %s, %v", b, err)
	}
	var out params
	if err := json.Unmarshal(b, &out); err != nil || out != in {
		t.Errorf("round trip %+v, %v", out, err)
	}
	for _, bad := range []string{`{"eps":-1}`, `{"eps":0}`, `{"eps":"1"}`, `{"delta":1}`, `{"rho":-0.5}`, `{"rho":1e300}`} {
		if err := json.Unmarshal([]byte(bad), &out); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
