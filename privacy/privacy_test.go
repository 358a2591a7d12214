package privacy

import (
	"errors"
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
