package audit

import (
	"context"
	"math"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/noise"
)

func TestKM(t *testing.T) {
	s := KMDefaults(true)
	pts, err := KM(bg, noise.NewSeeded(1), s)
	if err != nil {
		t.Fatal(err)
	}
	n := float64(s.Trials)
	first, last := pts[0], pts[len(pts)-1]
	// One count with Lap(1/eps): rounding is right when the noise is in
	// [-1/2, 1/2), probability 1 - e^(-eps/2).
	want := 1 - math.Exp(-s.Eps/2)
	if se := math.Sqrt(want * (1 - want) / n); math.Abs(first.PlainRate-want) > 5*se {
		t.Errorf("k = 1: rate %v, want %v ± %v", first.PlainRate, want, 5*se)
	}
	if last.PlainRate < 0.97 {
		t.Errorf("k = %d: plain Laplace reconstructs only %v of tables", last.K, last.PlainRate)
	}
	if last.CalibratedRate > 0.1 || last.CalibratedRate > first.PlainRate {
		t.Errorf("k = %d: calibrated noise still reconstructs %v of tables", last.K, last.CalibratedRate)
	}
	for _, p := range pts {
		if p.Sensitivity != p.K {
			t.Errorf("k = %d: generic sensitivity %d, want k", p.K, p.Sensitivity)
		}
		// The squared error of a mean of k Laplace variables has relative
		// standard error at most sqrt(5/n) (kurtosis 3 + 3/k <= 6).
		for _, v := range [][2]float64{{p.PlainVar, p.PredictedVar}, {p.CalibratedVar, p.CalibratedPredictedVar}} {
			if math.Abs(v[0]/v[1]-1) > 5*math.Sqrt(5/n) {
				t.Errorf("k = %d: estimator variance %v, predicted %v", p.K, v[0], v[1])
			}
		}
		if p.K >= 2 && p.PredictedVar != pts[0].PredictedVar/float64(p.K) {
			t.Errorf("k = %d: predicted variance %v is not 2/(k eps^2)", p.K, p.PredictedVar)
		}
	}
}

// kmEstimate without noise returns c[0] exactly, using only the public sums.
func TestKMEstimateExact(t *testing.T) {
	c := []float64{3, 7, 0, 12, 5, 5, 9}
	if got := kmEstimate(c, c); got != 3 {
		t.Errorf("estimate %v, want 3", got)
	}
}

// The generic sensitivity of the adjacent-sum constraints, from the Graver
// basis, is k; beyond the brute-force size the closed form is used.
func TestChainSensitivity(t *testing.T) {
	for _, k := range []int{1, 2, 3, 10, 64, 65, 1000} {
		got, err := chainSensitivity(bg, k)
		if err != nil {
			t.Fatal(err)
		}
		if got != k {
			t.Errorf("k = %d: sensitivity %d", k, got)
		}
	}
}

func TestYWW(t *testing.T) {
	s := YWWDefaults(true)
	pts, err := YWW(bg, noise.NewSeeded(1), s)
	if err != nil {
		t.Fatal(err)
	}
	n := float64(s.Samples)
	for i, p := range pts {
		// refine's loss (a linear program) is the appendix's (k+1) eps/2.
		if want := float64(p.K+1) * s.Eps / 2; math.Abs(p.Predicted-want) > 1e-9*want {
			t.Errorf("k = %d: predicted %v, want %v", p.K, p.Predicted, want)
		}
		// A valid lower bound stays below the true loss; the chosen set's
		// exact loss is below the supremum.
		if p.Lower > p.Predicted || p.SetExact > p.Predicted {
			t.Errorf("k = %d: bound %v or set loss %v above the supremum %v", p.K, p.Lower, p.SetExact, p.Predicted)
		}
		if p.K >= 4 && p.Lower <= s.Eps {
			t.Errorf("k = %d: bound %v does not show the violation of eps = %v", p.K, p.Lower, s.Eps)
		}
		if i > 0 && p.Lower <= pts[i-1].Lower {
			t.Errorf("k = %d: bound %v does not grow with k (%v before)", p.K, p.Lower, pts[i-1].Lower)
		}
		if p.CalibratedLower > s.Eps {
			t.Errorf("k = %d: calibrated release has bound %v > eps", p.K, p.CalibratedLower)
		}
		// refine's calibration: (k+1)/eps, plus at most a grid step.
		if want := float64(p.K+1) / s.Eps; p.CalibratedScale < want || p.CalibratedScale > want*(1+0x1p-18) {
			t.Errorf("k = %d: calibrated scale %v, want (k+1)/eps = %v", p.K, p.CalibratedScale, want)
		}
		se := math.Sqrt(0.25 / n)
		if math.Abs(p.Accuracy-p.AccuracyExact) > 5*se {
			t.Errorf("k = %d: accuracy %v, exact %v", p.K, p.Accuracy, p.AccuracyExact)
		}
		if p.CalibratedAccuracy > dpAccuracy(s.Eps)+5*se {
			t.Errorf("k = %d: calibrated accuracy %v above the eps-DP cap %v", p.K, p.CalibratedAccuracy, dpAccuracy(s.Eps))
		}
	}
	if last := pts[len(pts)-1]; last.AccuracyExact <= dpAccuracy(s.Eps) {
		t.Errorf("k = %d: exact accuracy %v within the eps-DP cap", last.K, last.AccuracyExact)
	}
}

// ywwSurvival against numerical integration of the convolution of two
// Laplace densities, and the density ratio of x̂_1 in the tails against
// the appendix's limit (k+1)/sigma.
func TestYWWSumOfLaplace(t *testing.T) {
	const sigma = 2.0
	lap := func(x float64) float64 { return math.Exp(-math.Abs(x)/sigma) / (2 * sigma) }
	density := func(t float64) float64 { // f(t) = int lap(s) lap(t-s) ds, trapezoid
		const h, lim = 1e-3, 60.0
		var sum float64
		for s := -lim; s <= lim+t; s += h {
			sum += lap(s) * lap(t-s)
		}
		return sum * h
	}
	for _, x := range []float64{0, 0.5, 3, 10} {
		// -d/dt survival = density
		const d = 1e-5
		got := (ywwSurvival(x-d, sigma) - ywwSurvival(x+d, sigma)) / (2 * d)
		if want := density(x); math.Abs(got-want) > 1e-4*want+1e-9 {
			t.Errorf("density at %v: %v from the survival function, %v by integration", x, got, want)
		}
	}
	if s := ywwSurvival(0, sigma); s != 0.5 {
		t.Errorf("survival at 0: %v", s)
	}
	// Density of the sum: (1 + |t|/sigma) e^(-|t|/sigma)/(4 sigma). The two
	// databases' x̂_1 differ by a shift of k+1 in t; far in the tail the
	// log ratio approaches (k+1)/sigma from below.
	f := func(t float64) float64 { return (1 + math.Abs(t)/sigma) * math.Exp(-math.Abs(t)/sigma) / (4 * sigma) }
	for _, k := range []int{1, 4, 16} {
		limit := float64(k+1) / sigma
		for _, t0 := range []float64{50, 500, 5000} {
			lr := math.Log(f(t0)) - math.Log(f(t0+float64(k+1)))
			if lr > limit || lr < limit-float64(k+1)/(sigma+t0) {
				t.Errorf("k = %d, t = %v: log ratio %v, want just below %v", k, t0, lr, limit)
			}
		}
	}
}

func TestMironov(t *testing.T) {
	s := MironovDefaults(true)
	pts, err := Mironov(bg, noise.NewSeeded(1), s)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pts {
		if p.Textbook < 0.5 || p.From0 < 0.3 || p.From1 < 0.3 {
			t.Errorf("eps = %v: textbook outputs revealing the input: %v (from 0: %v, from 1: %v)", p.Eps, p.Textbook, p.From0, p.From1)
		}
		if p.Grid != 0 {
			t.Errorf("eps = %v: %v of grid outputs reveal the input", p.Eps, p.Grid)
		}
		if p.GridMaxLoss > p.Eps || p.GridMaxLoss <= 0 {
			t.Errorf("eps = %v: grid log ratio up to %v", p.Eps, p.GridMaxLoss)
		}
	}
}

// Every output of the victim is recognised as possible from its input: the
// membership test has no false negatives, so every revealing output it
// counts is real.
func TestTextbookCanProduceComplete(t *testing.T) {
	r := noise.NewSeeded(9)
	for _, b := range []float64{0.1, 1, 10} {
		for _, x := range []float64{0, 1, -3.7, 1e6} {
			for range 300 {
				y := textbookLaplace(r, x, b)
				if !textbookCanProduce(y, x, b) {
					t.Fatalf("b = %v: output %v of input %v judged impossible from it", b, y, x)
				}
			}
		}
	}
}

// A revealing output is confirmed by brute force: no m in a wide range
// around the binary search's answer produces it from the other input.
func TestTextbookCanProduceSound(t *testing.T) {
	r := noise.NewSeeded(4)
	const b = 1.0
	found := 0
	for range 200 {
		y := textbookLaplace(r, 0, b)
		if textbookCanProduce(y, 1, b) {
			continue
		}
		found++
		s := 1.0
		if y < 1 {
			s = -1
		}
		// m with mag(m) = s*(y-1) is about 2^52 exp(-|y-1|/b).
		m0 := uint64(0x1p52 * math.Exp(-math.Abs(y-1)/b))
		for m := max(1, m0-min(m0, 20000)); m <= min(1<<52, m0+20000); m++ {
			if float64(1+s*float64(b*-math.Log(float64(m)*0x1p-52))) == y {
				t.Fatalf("output %v judged impossible from 1 but m = %d produces it", y, m)
			}
		}
		if found == 5 {
			break
		}
	}
	if found == 0 {
		t.Fatal("no revealing output found")
	}
}

func TestAveraging(t *testing.T) {
	const eps, trials = 1.0, 2000
	lap, err := noise.NewLaplace(1, eps)
	if err != nil {
		t.Fatal(err)
	}
	r := noise.NewSeeded(6)
	fresh := func(context.Context, int) (float64, error) { return lap.Add(r, 42) }
	// A caching server answers each trial's query once and repeats it.
	cache := map[int]float64{}
	cached := func(ctx context.Context, trial int) (float64, error) {
		if v, ok := cache[trial]; ok {
			return v, nil
		}
		v, err := fresh(ctx, trial)
		cache[trial] = v
		return v, err
	}
	s := AveragingSettings{Eps: eps, Count: 42, MaxRepeats: 64, Trials: trials}
	pts, err := Averaging(bg, fresh, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pts {
		// Relative standard error of an RMSE from n trials of a mean of R
		// Laplace variables (kurtosis 3 + 3/R): sqrt((2 + 3/R)/(4n)).
		tol := 5 * math.Sqrt((2+3/float64(p.Repeats))/(4*trials))
		if p.Predicted != math.Sqrt(2/float64(p.Repeats))/eps || math.Abs(p.RMSE/p.Predicted-1) > tol {
			t.Errorf("R = %d: RMSE %v, predicted %v (tolerance %.0f%%)", p.Repeats, p.RMSE, p.Predicted, 100*tol)
		}
	}
	pts, err = Averaging(bg, cached, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pts {
		if p.RMSE != pts[0].RMSE {
			t.Errorf("caching server: RMSE %v after %d repeats, %v after one", p.RMSE, p.Repeats, pts[0].RMSE)
		}
	}
}

// Against knowdp serve, every repeat of a query returns the stored answer:
// the attacker's error does not fall, and the budget is charged once.
func TestAveragingAgainstServe(t *testing.T) {
	s := AveragingSettings{Eps: 1, Count: 42, MaxRepeats: 16, ServeTrials: 4}
	srv, err := startServe(bg, s)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	s.Trials = s.ServeTrials
	pts, err := Averaging(bg, srv.oracle(), s)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pts {
		if p.RMSE != pts[0].RMSE {
			t.Errorf("RMSE %v after %d repeats, %v after one", p.RMSE, p.Repeats, pts[0].RMSE)
		}
	}
	if want := s.Trials * (s.MaxRepeats - 1); srv.repeats != want || srv.asked != s.Trials*s.MaxRepeats || srv.changed != 0 {
		t.Errorf("%d of %d requests answered from the ledger (want %d), %d changed answers", srv.repeats, srv.asked, want, srv.changed)
	}
	if srv.spent != s.Eps {
		t.Errorf("an analyst spent %v, want eps = %v", srv.spent, s.Eps)
	}
	if _, err := startServe(bg, AveragingSettings{Eps: 1, Count: 0.5}); err == nil {
		t.Error("fractional count accepted")
	}
}

func TestToyCounterAnswersFreshNoise(t *testing.T) {
	lap, _ := noise.NewLaplace(1, 1)
	srv := httptest.NewServer(&toyCounter{count: 5, lap: lap, r: noise.NewSeeded(1)})
	defer srv.Close()
	ask := httpOracle(srv.Client(), srv.URL+"/count")
	a, err := ask(bg, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ask(bg, 0)
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Errorf("two answers %v and %v: the toy server should not cache", a, b)
	}
	if _, err := httpOracle(srv.Client(), srv.URL+"/nope")(bg, 0); err == nil {
		t.Error("404 not reported")
	}
}

// Each attack writes its CSV and plots and reports headline numbers.
func TestAttacksRun(t *testing.T) {
	for _, a := range Attacks() {
		t.Run(a.Name, func(t *testing.T) {
			dir := t.TempDir()
			rep, err := a.Run(bg, AttackConfig{Dir: dir, Quick: true, Rand: noise.NewSeeded(1)})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Headline) == 0 || a.Explanation == "" || a.Summary == "" {
				t.Error("no headline or explanation")
			}
			var exts []string
			for _, p := range rep.Files {
				st, err := os.Stat(p)
				if err != nil || st.Size() == 0 {
					t.Errorf("%s: %v", p, err)
				}
				exts = append(exts, p[strings.LastIndex(p, ".")+1:])
			}
			if got := strings.Join(exts, ","); !strings.Contains(got, "csv") || !strings.Contains(got, "png") || !strings.Contains(got, "svg") {
				t.Errorf("files %v", rep.Files)
			}
		})
	}
	if _, err := KMAttack().Run(bg, AttackConfig{Rand: noise.NewSeeded(1)}); err == nil {
		t.Error("no output directory accepted")
	}
	if _, err := KMAttack().Run(bg, AttackConfig{Dir: t.TempDir()}); err == nil {
		t.Error("no generator accepted")
	}
}

func TestAttackSettingsErrors(t *testing.T) {
	r := noise.NewSeeded(1)
	errs := map[string]error{}
	_, errs["km eps"] = KM(bg, r, KMSettings{Eps: 0, Ks: []int{2}, Trials: 10})
	_, errs["km k"] = KM(bg, r, KMSettings{Eps: 1, Ks: []int{0}, Trials: 10})
	_, errs["km trials"] = KM(bg, r, KMSettings{Eps: 1, Ks: []int{2}, Trials: 1})
	_, errs["yww eps"] = YWW(bg, r, YWWSettings{Eps: math.Inf(1), Ks: []int{2}, Samples: 1000})
	_, errs["yww samples"] = YWW(bg, r, YWWSettings{Eps: 1, Ks: []int{2}, Samples: 10})
	_, errs["mironov eps"] = Mironov(bg, r, MironovSettings{Eps: []float64{-1}, Samples: 10})
	_, errs["mironov samples"] = Mironov(bg, r, MironovSettings{Eps: []float64{1}})
	_, errs["averaging eps"] = Averaging(bg, nil, AveragingSettings{Eps: math.NaN(), MaxRepeats: 2, Trials: 2})
	_, errs["averaging trials"] = Averaging(bg, nil, AveragingSettings{Eps: 1, MaxRepeats: 2})
	for name, err := range errs {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
