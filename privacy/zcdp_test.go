package privacy

import (
	"errors"
	"math"
	"testing"
)

// Reference values of the Canonne-Kamath-Steinke bound computed
// independently with mpmath at 60 digits: DeltaFor by bisection on the
// derivative of log delta(alpha); EpsilonFor as the smallest eps whose
// delta is at most the target (bisection on eps, not on alpha).
var (
	epsRefs = []struct{ rho, delta, eps float64 }{
		{0.5, 1e-6, 5.221534444530169053442849},
		{0.005, 1e-9, 0.5648932843020360558627135},
		{1, 1e-5, 7.077196695806339732861088},
		{0.125, 1e-10, 3.243613144880096650952363},
		{10, 1e-3, 25.08872649069463800702789},
		{1e-4, 1e-6, 0.0537271206348598695568824},
		{2, 0.1, 4.897796828869388631433092},
	}
	deltaRefs = []struct{ rho, eps, delta float64 }{
		{0.5, 5, 2.89612280938479501493112e-6},
		{0.005, 1, 1.162619111825759430909377e-24},
		{1, 3, 0.08334196041154228403631367},
		{0.125, 0.5, 0.1042850447089946433397718},
		{10, 30, 1.121770224017120209923207e-5},
		{1e-4, 0.1, 1.063698476883740098448819e-14},
		{2, 2, 0.5899112295442058378752524},
	}
)

func TestConversionReference(t *testing.T) {
	for _, r := range epsRefs {
		got, err := EpsilonFor(r.rho, r.delta)
		if err != nil {
			t.Fatal(err)
		}
		// Conservative (never below the bound) and tight to 1e-12.
		if got < r.eps || got > r.eps*(1+1e-12) {
			t.Errorf("EpsilonFor(%v, %v) = %.17g, want in [%.17g, +1e-12]", r.rho, r.delta, got, r.eps)
		}
		// The tight bound is below the simple one, rho + 2 sqrt(rho log(1/delta)).
		if simple := r.rho + 2*math.Sqrt(r.rho*math.Log(1/r.delta)); got >= simple {
			t.Errorf("EpsilonFor(%v, %v) = %v is not below the simple bound %v", r.rho, r.delta, got, simple)
		}
	}
	for _, r := range deltaRefs {
		got, err := DeltaFor(r.rho, r.eps)
		if err != nil {
			t.Fatal(err)
		}
		if got < r.delta || got > r.delta*(1+1e-10) {
			t.Errorf("DeltaFor(%v, %v) = %.17g, want in [%.17g, +1e-10]", r.rho, r.eps, got, r.delta)
		}
	}
	// The example of the brief: rho = 0.5, delta = 1e-6 gives eps 5.2215
	// against the simple bound's 5.7565.
	e, _ := EpsilonFor(0.5, 1e-6)
	if s := 0.5 + 2*math.Sqrt(0.5*math.Log(1e6)); math.Abs(s-5.75652) > 1e-5 || math.Abs(e-5.2215) > 1e-4 {
		t.Errorf("rho 0.5, delta 1e-6: tight %v simple %v", e, s)
	}
}

// A dense grid over alpha, evaluated independently of the bisections: every
// alpha gives a valid bound, so the grid minimum can only be above the
// infimum, and the bisection must reach it (to the grid's resolution, a
// relative step of 1e-4 on alpha, whose effect near the optimum is second
// order: the tolerance 1e-6 is generous).
func TestConversionGrid(t *testing.T) {
	for _, rho := range []float64{1e-3, 0.05, 0.5, 3} {
		for _, delta := range []float64{1e-12, 1e-6, 1e-3} {
			gridMin := math.Inf(1)
			for a := 1 + 1e-6; a < 1e7; a *= 1 + 1e-4 {
				e := a*rho + (math.Log(1/delta)-math.Log(a))/(a-1) + math.Log(1-1/a)
				gridMin = min(gridMin, e)
			}
			got, _ := EpsilonFor(rho, delta)
			if got > gridMin+1e-9*gridMin || got < gridMin*(1-1e-6) {
				t.Errorf("EpsilonFor(%v, %v) = %.12g, grid minimum %.12g", rho, delta, got, gridMin)
			}
			// Round trip: eps for delta gives back at most delta.
			back, _ := DeltaFor(rho, got)
			if back > delta*(1+1e-9) || back < delta*(1-1e-6) {
				t.Errorf("DeltaFor(%v, EpsilonFor(%v, %v)) = %v", rho, rho, delta, back)
			}
		}
	}
}

func TestConversionMonotone(t *testing.T) {
	rhos := []float64{1e-8, 1e-5, 1e-3, 0.01, 0.1, 0.5, 1, 2, 10, 100, 1000}
	deltas := []float64{1e-300, 1e-30, 1e-12, 1e-9, 1e-6, 1e-3, 0.1, 0.5, 0.9}
	epss := []float64{0, 1e-6, 0.01, 0.1, 0.5, 1, 2, 5, 10, 100, 1000, 4096}
	for _, d := range deltas {
		prev := 0.0
		for _, r := range rhos {
			e, err := EpsilonFor(r, d)
			if err != nil || e < prev {
				t.Errorf("EpsilonFor(%v, %v) = %v, %v: not increasing in rho (previous %v)", r, d, e, err, prev)
			}
			prev = e
		}
	}
	for _, r := range rhos {
		prev := math.Inf(1)
		for _, d := range deltas {
			e, _ := EpsilonFor(r, d)
			if e > prev {
				t.Errorf("EpsilonFor(%v, %v) = %v: not decreasing in delta (previous %v)", r, d, e, prev)
			}
			prev = e
		}
		prev = 2
		for _, e := range epss {
			d, err := DeltaFor(r, e)
			if err != nil || d > prev || d < 0 || d > 1 {
				t.Errorf("DeltaFor(%v, %v) = %v, %v: not decreasing in eps in [0, 1] (previous %v)", r, e, d, err, prev)
			}
			prev = d
		}
	}
	for _, e := range epss {
		prev := 0.0
		for _, r := range rhos {
			d, _ := DeltaFor(r, e)
			if d < prev {
				t.Errorf("DeltaFor(%v, %v) = %v: not increasing in rho (previous %v)", r, e, d, prev)
			}
			prev = d
		}
	}
	if e, _ := EpsilonFor(0, 1e-6); e != 0 {
		t.Errorf("EpsilonFor(0, 1e-6) = %v", e)
	}
	if d, _ := DeltaFor(0, 0); d != 0 {
		t.Errorf("DeltaFor(0, 0) = %v", d)
	}
}

func TestConversionErrors(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, c := range [][2]float64{{-1, 1e-6}, {nan, 1e-6}, {inf, 1e-6}, {1, 0}, {1, 1}, {1, -1}, {1, nan}} {
		if _, err := EpsilonFor(c[0], c[1]); err == nil {
			t.Errorf("EpsilonFor(%v, %v) accepted", c[0], c[1])
		}
	}
	for _, c := range [][2]float64{{-1, 1}, {nan, 1}, {inf, 1}, {1, -1}, {1, nan}, {1, inf}} {
		if _, err := DeltaFor(c[0], c[1]); err == nil {
			t.Errorf("DeltaFor(%v, %v) accepted", c[0], c[1])
		}
	}
}

func TestNewRho(t *testing.T) {
	for _, bad := range []float64{math.NaN(), math.Inf(1), 0, -1, MaxRho * 2, 1e-13} {
		if _, err := NewRho(bad); err == nil {
			t.Errorf("NewRho(%v) accepted", bad)
		}
	}
	r, err := NewRho(0.1)
	if err != nil || r.Float64() > 0.1 || 0.1-r.Float64() >= RhoStep || r.Float64()/RhoStep != math.Trunc(r.Float64()/RhoStep) {
		t.Errorf("NewRho(0.1) = %v, %v: not rounded down to the grid", r, err)
	}
	if r2, err := RhoFromSteps(r.Steps()); err != nil || r2 != r {
		t.Errorf("RhoFromSteps round trip %v -> %v, %v", r, r2, err)
	}
}

func mustRho(t *testing.T, x float64) Rho {
	t.Helper()
	r, err := NewRho(x)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRhoComposition(t *testing.T) {
	total := Concentrated(mustRho(t, 1))
	a := NewAccountant(total)
	tenth := Concentrated(mustRho(t, 0.1))
	for i := range 10 {
		if err := a.Spend(tenth); err != nil {
			t.Fatalf("charge %d of rho 0.1 against 1: %v", i+1, err)
		}
	}
	// Ten grid-rounded 0.1s leave ten steps at most: fill them exactly, then
	// one more step is refused and says by how much.
	left := a.Remaining().RhoSteps()
	if left < 0 || left > 10 {
		t.Fatalf("remaining %d steps after ten charges of 0.1", left)
	}
	if left > 0 {
		fill, _ := FromRhoSteps(left)
		if err := a.Spend(fill); err != nil {
			t.Fatalf("exact fill refused: %v", err)
		}
	}
	one, _ := FromRhoSteps(1)
	err := a.Spend(one)
	var oe *OverspendError
	if !errors.As(err, &oe) || oe.Excess.RhoSteps() != 1 || oe.Remaining.RhoSteps() != 0 {
		t.Fatalf("overspend by one step: %v", err)
	}
	if a.Spent() != total {
		t.Errorf("spent %v, want exactly %v", a.Spent(), total)
	}
	// A pure-eps total refuses zCDP charges (zCDP does not imply pure DP),
	// and a rho total refuses pure-eps charges unless converted.
	pa := NewAccountant(Pure(mustEps(t, 1)))
	if err := pa.Spend(tenth); !errors.Is(err, ErrOverspend) {
		t.Errorf("rho charge against an eps total: %v", err)
	}
	ra := NewAccountant(total)
	if err := ra.Spend(Pure(mustEps(t, 0.1))); !errors.Is(err, ErrOverspend) {
		t.Errorf("eps charge against a rho total: %v", err)
	}
	if err := ra.Spend(PureAsRho(mustEps(t, 1))); err != nil {
		t.Errorf("eps=1 as rho=0.5 against rho=1: %v", err)
	}
	if got := ra.Spent().Rho(); got != 0.5 {
		t.Errorf("eps=1 charged as rho %v, want 0.5", got)
	}
	// Parallel composition takes the maximum rho.
	if p := Parallel(Concentrated(mustRho(t, 0.25)), tenth); p.Rho() != mustRho(t, 0.25).Float64() {
		t.Errorf("parallel rho = %v", p)
	}
}

// PureAsRho is eps^2/2 rounded up to the grid, computed exactly: pinned on
// steps worked out by hand, and checked against float64 elsewhere (the
// exact value is within one step above the float's).
func TestPureAsRho(t *testing.T) {
	for _, tc := range []struct {
		steps int64
		want  int64
	}{
		{1 << 40, 1 << 39},         // eps 1: rho 1/2
		{1 << 41, 1 << 41},         // eps 2: rho 2
		{1 << 20, 1},               // eps 2^-20: rho 2^-41, up to one step
		{1, 1},                     // the smallest eps: rho rounds up to one step
		{3 << 39, 9 << 37},         // eps 1.5: rho 1.125
		{maxEpsilonSteps, vacuous}, // eps 4096: rho 2^23 is vacuous
	} {
		e, err := EpsilonFromSteps(tc.steps)
		if err != nil {
			t.Fatal(err)
		}
		got := PureAsRho(e).RhoSteps()
		if tc.steps == maxEpsilonSteps {
			if !PureAsRho(e).Vacuous() {
				t.Errorf("PureAsRho(4096) = %v, want vacuous", PureAsRho(e))
			}
			continue
		}
		if got != tc.want {
			t.Errorf("PureAsRho(%v) = %d steps, want %d", e, got, tc.want)
		}
	}
	for _, x := range []float64{0.1, 0.3, 1.7, 10, 100, 2000} {
		e := mustEps(t, x)
		got := PureAsRho(e).Rho()
		f := e.Float64()
		if want := f * f / 2; got < want || got-want > RhoStep*(1+want*0x1p-50/RhoStep) {
			t.Errorf("PureAsRho(%v) = %v, want %v rounded up", x, got, want)
		}
	}
}

func TestApproxEpsilon(t *testing.T) {
	d, _ := NewDelta(1e-7)
	b := Sequential(Approx(mustEps(t, 0.5), d), Concentrated(mustRho(t, 0.5)))
	got, err := b.ApproxEpsilon(1.1e-6)
	if err != nil {
		t.Fatal(err)
	}
	zc, _ := EpsilonFor(mustRho(t, 0.5).Float64(), 1.1e-6-d.Float64())
	if want := 0.5 + zc; got < want || got > want*(1+1e-15) {
		t.Errorf("ApproxEpsilon = %v, want %v", got, want)
	}
	if p, err := Pure(mustEps(t, 2)).ApproxEpsilon(0); err != nil || p != 2 {
		t.Errorf("pure budget at delta 0: %v %v", p, err)
	}
	for _, bad := range []float64{d.Float64(), 0, 1, math.NaN()} {
		if _, err := b.ApproxEpsilon(bad); err == nil {
			t.Errorf("ApproxEpsilon(%v) accepted", bad)
		}
	}
}

// Monotone also at the scale of float64 rounding: sweeps with relative
// steps down to 1e-14, where the optimiser's own error would show.
func TestConversionMonotoneFine(t *testing.T) {
	for _, step := range []float64{1e-9, 1e-12, 1e-14} {
		for _, base := range [][2]float64{{0.5, 1e-6}, {0.01, 1e-9}, {3, 1e-3}} {
			rho, delta := base[0], base[1]
			eps := 5*rho + 1
			prevE, prevD, prevE2, prevD2 := 0.0, 0.0, math.Inf(1), math.Inf(1)
			for i := range 1000 {
				f := 1 + float64(i)*step
				e, _ := EpsilonFor(rho*f, delta)
				d, _ := DeltaFor(rho*f, eps)
				e2, _ := EpsilonFor(rho, delta*f)
				d2, _ := DeltaFor(rho, eps*f)
				if e < prevE || d < prevD || e2 > prevE2 || d2 > prevD2 {
					t.Fatalf("step %g, base %v, i %d: not monotone (%v %v %v %v after %v %v %v %v)", step, base, i, e, d, e2, d2, prevE, prevD, prevE2, prevD2)
				}
				prevE, prevD, prevE2, prevD2 = e, d, e2, d2
			}
		}
	}
}

func TestOverspendMessageRho(t *testing.T) {
	a := NewAccountant(Concentrated(mustRho(t, 0.5)))
	if err := a.Spend(Concentrated(mustRho(t, 0.5))); err != nil {
		t.Fatal(err)
	}
	err := a.Spend(Concentrated(mustRho(t, 0.25)))
	if want := "privacy budget exceeded: spending rho=0.25 would exceed the remaining rho=0 by rho=0.25"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}
