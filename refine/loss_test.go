package refine

import (
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
)

// example1 is the paper's Example 1: two answers whose sum c is known and
// moves with the data, refined by least squares (eq. 4).
func example1(t *testing.T, public bool) (*Linear, Workload) {
	t.Helper()
	eqs, err := NewEqualities(2, []Equality{{Label: "sum", Index: []int{0, 1}, Coef: []float64{1, 1}, Value: 10, Public: public}})
	if err != nil {
		t.Fatal(err)
	}
	lin, err := LeastSquares(eqs)
	if err != nil {
		t.Fatal(err)
	}
	return lin, Workload{Queries: mat.NewDense(2, 2, []float64{1, 0, 0, 1}), Universe: []string{"u1", "u2"}}
}

// integrationCheck verifies Loss against numerical integration of the
// density ratio, for every neighbour pair: the log-ratio never exceeds
// rho at random outputs, and it tends to rho along the direction of the
// optimal preimage v* (it may reach rho only at infinity). It returns the
// log-ratios along that direction at the given distances (in units of
// sigma) for the worst pair.
func integrationCheck(t *testing.T, lin *Linear, w Workload, release []int, sigma float64, dist []float64) []float64 {
	t.Helper()
	r := noise.NewSeeded(77)
	loss, err := lin.Loss(w, release, sigma)
	if err != nil {
		t.Fatal(err)
	}
	ps, _ := w.pairs(lin.n)
	shifts, err := lin.shifts(ps)
	if err != nil {
		t.Fatal(err)
	}
	m := lin.rows(loss.Release)
	pre, err := newPreimage(m)
	if err != nil {
		t.Fatal(err)
	}
	var worst []float64
	for p, pr := range ps {
		delta := pick(shifts[p], loss.Release)
		g, v, err := pre.minL1(delta)
		if err != nil {
			t.Fatal(err)
		}
		if math.IsInf(g, 1) {
			continue
		}
		rho := g / sigma
		for range 200 {
			l := randVec(r, lin.n, -1, 1)
			scale := sigma * math.Pow(10, unif(r, -1, 3))
			for i := range l {
				l[i] *= scale
			}
			var y mat.VecDense
			y.MulVec(m, mat.NewVecDense(lin.n, l))
			got, err := LogDensityRatio(m, sigma, y.RawVector().Data, delta)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got) > rho+1e-9*(1+rho) {
				t.Fatalf("%s: |log density ratio| %v at a random output exceeds rho = %v", pr.nb, math.Abs(got), rho)
			}
		}
		var along []float64
		vmax := 0.0
		for _, x := range v {
			vmax = max(vmax, math.Abs(x))
		}
		for _, d := range dist {
			l := make([]float64, lin.n)
			for i, x := range v {
				if math.Abs(x) > 1e-9*vmax {
					l[i] = math.Copysign(d*sigma, x)
				}
			}
			var y mat.VecDense
			y.MulVec(m, mat.NewVecDense(lin.n, l))
			got, err := LogDensityRatio(m, sigma, y.RawVector().Data, delta)
			if err != nil {
				t.Fatal(err)
			}
			if got > rho+1e-9*(1+rho) {
				t.Fatalf("%s: log density ratio %v exceeds rho = %v", pr.nb, got, rho)
			}
			along = append(along, got)
		}
		if g > 1e-9 {
			if last := along[len(along)-1]; last < rho*(1-1e-3) {
				t.Fatalf("%s: log density ratio %v far out does not approach rho = %v (along the way: %v)", pr.nb, last, rho, along)
			}
		}
		if pr.nb == loss.Worst {
			worst = along
		}
	}
	return worst
}

func TestExample1(t *testing.T) {
	for _, eps := range []float64{0.5, 1, 2} {
		lin, w := example1(t, false)
		sigma := 1 / eps
		loss, err := lin.Loss(w, []int{0}, sigma)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(loss.Rho-2*eps) > 1e-9 || loss.Worst.Add != 0 || loss.Distinguishable {
			t.Errorf("eps %v: rho of x̂_1 = %v (worst %s), want 2 eps = %v", eps, loss.Rho, loss.Worst, 2*eps)
		}
		if loss.Raw != 1 {
			t.Errorf("raw sensitivity %v, want 1", loss.Raw)
		}
		corrected, printed, err := lin.Theorem2([]float64{1, 0})
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(corrected-2) > 1e-9 || math.Abs(printed-1) > 1e-9 {
			t.Errorf("Theorem 2: corrected %v, printed %v; want 2 and 1", corrected, printed)
		}
		// Numerical integration of eqs. (6)-(7): the log-ratio tends to
		// 2 eps and already exceeds the printed bound eps at 10 sigma.
		along := integrationCheck(t, lin, w, []int{0}, sigma, []float64{1, 10, 20, 1000})
		if along[1] <= printed/sigma {
			t.Errorf("eps %v: log ratio %v at 10 sigma does not exceed the printed Theorem 2's %v", eps, along[1], printed/sigma)
		}
		// Closed form: x̂_1 − mu_1 = (L_1 − L_2)/2 has density
		// (1 + 2|y|/sigma) exp(−2|y|/sigma) / (2 sigma), so
		// log f(y) − log f(y + 1) = 2/sigma + log((1 + 2y/sigma)/(1 + 2(y+1)/sigma))
		// for y >= 0: eq. (10), which tends to 2 eps.
		m := lin.rows([]int{0})
		for _, y := range []float64{0, 0.5, 5, 10, 20, 1000} {
			got, err := LogDensityRatio(m, sigma, []float64{y * sigma}, []float64{1})
			if err != nil {
				t.Fatal(err)
			}
			want := 2/sigma + math.Log((1+2*y)/(1+2*y+2/sigma))
			if math.Abs(got-want) > 1e-9 {
				t.Errorf("eps %v, x̂_1 − mu_1 = %v sigma: integration %v, closed form %v", eps, y, got, want)
			}
		}
		all, err := lin.Loss(w, nil, sigma)
		if err != nil {
			t.Fatal(err)
		}
		if !all.Distinguishable || !math.IsInf(all.Rho, 1) {
			t.Errorf("releasing both refined answers reveals c = x̂_1 + x̂_2: want +Inf, got %v", all.Rho)
		}
	}
}

func TestAppendix(t *testing.T) {
	const eps = 1.0
	sigma := 2 / eps // the appendix's Lap(2/eps)
	for k := 1; k <= 10; k++ {
		lin := appendix(t, float64(k))
		for _, rel := range []Relation{AddRemove, Substitute} {
			w := Workload{Queries: mat.NewDense(2, 2, []float64{1, 0, 0, 1}), Universe: []string{"cat1", "cat2"}, Relation: rel}
			x1, err := lin.Loss(w, []int{0}, sigma)
			if err != nil {
				t.Fatal(err)
			}
			if want := float64(k+1) * eps / 2; math.Abs(x1.Rho-want) > 1e-9 {
				t.Errorf("k=%d, %v: rho of x̂_1 = %v, want (k+1) eps/2 = %v", k, rel, x1.Rho, want)
			}
			integrationCheck(t, lin, w, []int{0}, sigma, []float64{1, 10, 1e4})
			both, err := lin.Loss(w, nil, sigma)
			if err != nil {
				t.Fatal(err)
			}
			want := float64(k+1) * eps / 2
			if rel == Substitute {
				want = float64(k+3) * eps / 2
			}
			if math.Abs(both.Rho-want) > 1e-9 {
				t.Errorf("k=%d, %v: rho of (x̂_1, x̂_2) = %v, want %v", k, rel, both.Rho, want)
			}
			// A is invertible: the density ratio of the pair is
			// exp(‖A⁻¹(...)‖₁ differences / sigma) and attains rho at
			// finite outputs (distance 1e3 sigma is past every kink).
			along := integrationCheck(t, lin, w, nil, sigma, []float64{1e3})
			if math.Abs(along[0]-want) > 1e-9 {
				t.Errorf("k=%d, %v: joint log density ratio %v, want exactly %v", k, rel, along[0], want)
			}
		}
		// Theorem 2 for the appendix's pair D', D'' (mu' − mu'' = e1 − e2):
		// the printed sign gives the paper's k+1, which is the loss of x̂_1
		// alone; the corrected sign gives the joint loss k+3 (A* = A⁻¹).
		corrected, printed, err := lin.Theorem2([]float64{1, -1})
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(corrected-float64(k+3)) > 1e-9 || math.Abs(printed-float64(k+1)) > 1e-9 {
			t.Errorf("k=%d: Theorem 2 corrected %v (want %d), printed %v (want %d)", k, corrected, k+3, printed, k+1)
		}
		// Add/remove of a category-1 record: corrected k+1 is the joint
		// loss; the printed k−1 understates it.
		corrected, printed, _ = lin.Theorem2([]float64{1, 0})
		if math.Abs(corrected-float64(k+1)) > 1e-9 || math.Abs(printed-float64(k-1)) > 1e-9 {
			t.Errorf("k=%d add/remove: Theorem 2 corrected %v, printed %v; want %d, %d", k, corrected, printed, k+1, k-1)
		}
	}
}

// TestCorrectedTheorem2IsNotABoundOffTheAffineSet: least squares under
// mu_1 + 0.1 mu_2 = c, with c moving with the data. The refined x̂_1 is
// (0.01 x_1 − 0.1 x_2 + c)/1.01: nearly c itself, with a tenth of the
// noise. Its loss is 10.1/sigma; the corrected Theorem 2 says 2.09/sigma.
func TestCorrectedTheorem2IsNotABoundOffTheAffineSet(t *testing.T) {
	eqs, err := NewEqualities(2, []Equality{{Index: []int{0, 1}, Coef: []float64{1, 0.1}, Value: 4}})
	if err != nil {
		t.Fatal(err)
	}
	lin, err := LeastSquares(eqs)
	if err != nil {
		t.Fatal(err)
	}
	w := Workload{Queries: mat.NewDense(2, 2, []float64{1, 0, 0, 1})}
	loss, err := lin.Loss(w, []int{0}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(loss.Rho-10.1) > 1e-9 {
		t.Errorf("rho of x̂_1 = %v, want 10.1", loss.Rho)
	}
	corrected, _, err := lin.Theorem2([]float64{1, 0})
	if err != nil {
		t.Fatal(err)
	}
	if want := 1 + 1/1.01 + 0.1/1.01; math.Abs(corrected-want) > 1e-9 {
		t.Errorf("corrected Theorem 2 = %v, want %v", corrected, want)
	}
	along := integrationCheck(t, lin, w, []int{0}, 1, []float64{1, 10, 100})
	for _, v := range along {
		if v <= corrected+1 {
			t.Errorf("integrated log ratio %v should exceed the corrected Theorem 2 (%v) by far", v, corrected)
		}
	}
	worst, err := lin.WorstRelease(w, 1)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(worst.Rho-10.1) > 1e-9 || len(worst.Release) != 1 || worst.Release[0] != 0 {
		t.Errorf("Definition 5's rho = %v on %v, want 10.1 on [0]", worst.Rho, worst.Release)
	}
}

// TestLossMatchesIntegrationOnRandomRefinements pins Loss (and with it
// the corrected Theorem 2 where it applies) to numerical integration on
// random linear refinements, workloads and releases.
func TestLossMatchesIntegrationOnRandomRefinements(t *testing.T) {
	r := noise.NewSeeded(31)
	for trial := range 30 {
		n := 2 + int(r.Uint64N(2))
		eqs, err := NewEqualities(n, randomEqualities(r, n, 1, n))
		if err != nil {
			t.Fatal(err)
		}
		var lin *Linear
		switch trial % 3 {
		case 0: // least squares
			lin, err = LeastSquares(eqs)
		default: // a random linear refinement of full rank
			lin, err = NewLinear(mat.NewDense(n, n, randVec(r, n*n, -1, 1)), mat.NewDense(n, 1, randVec(r, n, -1, 1)), nil, eqs)
		}
		if err != nil {
			t.Fatal(err)
		}
		q := mat.NewDense(n, 3, nil)
		for i := range n {
			for j := range 3 {
				q.Set(i, j, float64(r.Uint64N(2)))
			}
		}
		w := Workload{Queries: q, Relation: Relation(trial % 2)}
		sigma := unif(r, 0.5, 3)
		releases := [][]int{nil}
		if n == 3 {
			releases = append(releases, []int{0, 2})
		} else {
			releases = append(releases, []int{1})
		}
		for _, rel := range releases {
			integrationCheck(t, lin, w, rel, sigma, []float64{1, 1e5})
		}
	}
}

func TestPublicConstraintsKeepEpsilon(t *testing.T) {
	// The grades example with only the constraints that hold by
	// definition: refining is post-processing, so the loss equals that
	// of the raw answers, 3/sigma (a record counts in its grade, p and t).
	eqs, err := NewEqualities(7, gradeEqualities(false))
	if err != nil {
		t.Fatal(err)
	}
	lin, err := LeastSquares(eqs)
	if err != nil {
		t.Fatal(err)
	}
	w := gradeWorkload()
	loss, err := lin.Loss(w, nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	if loss.Raw != 3 || math.Abs(loss.Rho-1) > 1e-9 {
		t.Errorf("definitional constraints at sigma 3: raw %v, rho %v; want 3 and 1", loss.Raw, loss.Rho)
	}
	// Example 1 with substitution neighbours: the sum is invariant, so it
	// may be public; the loss of the full release is the raw one.
	lin1, w1 := example1(t, true)
	w1.Relation = Substitute
	loss, err = lin1.Loss(w1, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(loss.Rho-2) > 1e-9 || loss.Raw != 2 {
		t.Errorf("public sum, substitution: rho %v, raw %v; want 2, 2", loss.Rho, loss.Raw)
	}
	// ... but under add/remove the sum moves, and calling it public is
	// an error that names the constraint and the neighbours.
	w1.Relation = AddRemove
	if _, err := lin1.Loss(w1, nil, 1); err == nil || !strings.Contains(err.Error(), `"sum" is marked public`) || !strings.Contains(err.Error(), `"u1"`) {
		t.Errorf("public constraint that moves: %v", err)
	}
}

func TestGradesDataSpecificConstraint(t *testing.T) {
	eqs, err := NewEqualities(7, gradeEqualities(true))
	if err != nil {
		t.Fatal(err)
	}
	lin, err := LeastSquares(eqs)
	if err != nil {
		t.Fatal(err)
	}
	w := gradeWorkload()
	all, err := lin.Loss(w, nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !all.Distinguishable || all.Worst.Add > 1 {
		t.Errorf("releasing every refined grade reveals mu_A + mu_B: want +Inf for an A or B record, got %v (%s)", all.Rho, all.Worst)
	}
	if _, _, err := lin.Calibrate(w, nil, mustEps(t, 1)); err == nil || !strings.Contains(err.Error(), "disjoint") {
		t.Errorf("Calibrate of a revealing release: %v", err)
	}
	worst, err := lin.WorstRelease(w, 3)
	if err != nil {
		t.Fatal(err)
	}
	if worst.Rho <= 1 || math.IsInf(worst.Rho, 1) {
		t.Errorf("Definition 5's rho with the data-specific constraint is %v; want above eps = 1 and finite", worst.Rho)
	}
	integrationCheckIfSmallFibre(t, lin, w, worst.Release, 3)
	t.Logf("grades with mu_A + mu_B = 80 at sigma 3 (eps 1): Definition 5 rho = %v on answers %v (%s)", worst.Rho, worst.Release, worst.Worst)
}

// integrationCheckIfSmallFibre runs integrationCheck when the release's
// fibre is at most one-dimensional.
func integrationCheckIfSmallFibre(t *testing.T, lin *Linear, w Workload, release []int, sigma float64) {
	t.Helper()
	pre, err := newPreimage(lin.rows(release))
	if err != nil {
		t.Fatal(err)
	}
	if lin.n-pre.rank <= 1 {
		integrationCheck(t, lin, w, release, sigma, []float64{1, 1e5})
	}
}

func TestCalibrate(t *testing.T) {
	for _, e := range []float64{0.1, 1, 3} {
		eps, err := privacy.NewEpsilon(e)
		if err != nil {
			t.Fatal(err)
		}
		lin, w := example1(t, false)
		lap, loss, err := lin.Calibrate(w, []int{0}, eps)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(loss.Sensitivity-2) > 1e-9 {
			t.Errorf("effective sensitivity %v, want 2", loss.Sensitivity)
		}
		if l := lap.Loss(loss.Sensitivity); l > eps.Float64() {
			t.Errorf("eps %v: the grid Laplace mechanism's Loss(%v) = %v exceeds eps", e, loss.Sensitivity, l)
		}
		if loss.Rho > eps.Float64() || loss.Sigma != lap.Scale() {
			t.Errorf("eps %v: rho %v at sigma %v (scale %v)", e, loss.Rho, loss.Sigma, lap.Scale())
		}
		if s := lap.Scale() * eps.Float64() / 2; s < 1 || s > 1+0x1p-18 {
			t.Errorf("eps %v: scale %v is not 2/eps to within the grid", e, lap.Scale())
		}
	}
	// A release that does not depend on the data needs no noise.
	lin, _ := example1(t, false)
	zero := Workload{Queries: mat.NewDense(2, 1, []float64{0, 0})}
	if _, _, err := lin.Calibrate(zero, nil, mustEps(t, 1)); err == nil || !strings.Contains(err.Error(), "do not depend on the data") {
		t.Errorf("data-independent release: %v", err)
	}
}

// TestCalibratedReleaseIsPrivate samples x̂_1 of Example 1 on neighbouring
// databases with grid Laplace noise and compares histograms: with the
// calibrated scale every bin's probability ratio is within e^eps (up to
// sampling error); with the naive scale 1/eps the tail bins exceed it,
// which the test detects.
func TestCalibratedReleaseIsPrivate(t *testing.T) {
	const runs = 300_000
	eps, _ := privacy.NewEpsilon(1)
	lin, w := example1(t, false)
	calibrated, _, err := lin.Calibrate(w, []int{0}, eps)
	if err != nil {
		t.Fatal(err)
	}
	naive, err := noise.NewLaplace(1, eps.Float64())
	if err != nil {
		t.Fatal(err)
	}
	mu, mu2 := []float64{6, 4}, []float64{5, 4} // neighbours: one u1 record
	sample := func(lap noise.Laplace, mu []float64, seed uint64) map[int]int {
		r := noise.NewSeeded(seed)
		eqs, _ := NewEqualities(2, []Equality{{Index: []int{0, 1}, Coef: []float64{1, 1}, Value: mu[0] + mu[1]}})
		counts := map[int]int{}
		x := make([]float64, 2)
		for range runs {
			copy(x, mu)
			if err := lap.AddTo(r, x); err != nil {
				t.Fatal(err)
			}
			if err := eqs.Refine(x, x); err != nil {
				t.Fatal(err)
			}
			counts[int(math.Floor(x[0]))]++
		}
		return counts
	}
	worstExcess := func(lap noise.Laplace) float64 {
		a, b := sample(lap, mu, 1), sample(lap, mu2, 2)
		worst := math.Inf(-1)
		for bin, na := range a {
			nb := b[bin]
			if na < 400 || nb < 400 {
				continue
			}
			// log(na/nb) − eps, in standard errors of the log ratio.
			se := math.Sqrt(1/float64(na) + 1/float64(nb))
			for _, lr := range []float64{math.Log(float64(na) / float64(nb)), math.Log(float64(nb) / float64(na))} {
				worst = max(worst, (lr-eps.Float64())/se)
			}
		}
		return worst
	}
	if z := worstExcess(calibrated); z > 5 {
		t.Errorf("calibrated noise: a bin's probability ratio exceeds e^eps by %.1f standard errors", z)
	}
	if z := worstExcess(naive); z < 5 {
		t.Errorf("naive noise 1/eps: the histogram test should see the ratio exceed e^eps (got %.1f standard errors)", z)
	}
}

func TestLossRejectsBadInput(t *testing.T) {
	lin, w := example1(t, false)
	nan := mat.NewDense(2, 2, []float64{1, 0, math.NaN(), 1})
	for _, tc := range []struct {
		name    string
		w       Workload
		release []int
		sigma   float64
		want    string
	}{
		{"sigma zero", w, nil, 0, "sigma must be finite and > 0"},
		{"sigma NaN", w, nil, math.NaN(), "sigma must be finite"},
		{"no queries", Workload{}, nil, 1, "no query matrix"},
		{"wrong rows", Workload{Queries: mat.NewDense(3, 2, nil)}, nil, 1, "3 rows, want one per answer (2)"},
		{"names", Workload{Queries: w.Queries, Universe: []string{"a"}}, nil, 1, "1 universe names for 2"},
		{"NaN query", Workload{Queries: nan}, nil, 1, "entry [1,0] is NaN"},
		{"relation", Workload{Queries: w.Queries, Relation: 7}, nil, 1, "unknown neighbour relation"},
		{"substitute one element", Workload{Queries: mat.NewDense(2, 1, []float64{1, 0}), Relation: Substitute}, nil, 1, "no neighbouring databases"},
		{"release range", w, []int{2}, 1, "released answer 2 is outside 0..1"},
		{"release twice", w, []int{0, 0}, 1, "released twice"},
		{"release empty", w, []int{}, 1, "release is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := lin.Loss(tc.w, tc.release, tc.sigma); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	m := mat.NewDense(1, 3, []float64{1, 1, 1})
	if _, err := LogDensityRatio(m, 1, []float64{0}, []float64{1}); err == nil || !strings.Contains(err.Error(), "dimension 2") {
		t.Errorf("two-dimensional fibre: %v", err)
	}
	m = mat.NewDense(2, 2, []float64{1, 1, 1, 1})
	if _, err := LogDensityRatio(m, 1, []float64{0, 1}, []float64{0, 0}); err == nil || !strings.Contains(err.Error(), "outside the range") {
		t.Errorf("output off the support: %v", err)
	}
}

// TestMinL1MatchesVertexEnumeration checks the simplex against a generic
// solver: min over z of ‖v0 + N z‖₁ is attained where d = dim z
// independent coordinates vanish, so trying every such vertex finds it.
// It covers every release of the grades example (fibres of dimension up
// to 6, beyond LogDensityRatio's reach) and random matrices.
func TestMinL1MatchesVertexEnumeration(t *testing.T) {
	check := func(pre *preimage, d []float64) {
		t.Helper()
		got, _, err := pre.minL1(d)
		if err != nil {
			t.Fatal(err)
		}
		v0, ok := pre.particular(d)
		if !ok {
			if !math.IsInf(got, 1) {
				t.Fatalf("shift outside the range, but minL1 = %v", got)
			}
			return
		}
		want := l1(v0)
		if pre.null != nil {
			dn := pre.n - pre.rank
			want = math.Inf(1)
			var rec func(start int, rows []int)
			rec = func(start int, rows []int) {
				if len(rows) == dn {
					a := mat.NewDense(dn, dn, nil)
					b := mat.NewVecDense(dn, nil)
					for r, i := range rows {
						a.SetRow(r, mat.Row(nil, i, pre.null))
						b.SetVec(r, -v0[i])
					}
					var z mat.VecDense
					if err := z.SolveVec(a, b); err != nil {
						return
					}
					var svd mat.SVD
					svd.Factorize(a, mat.SVDNone)
					if s := svd.Values(nil); s[dn-1] < 1e-9*s[0] {
						return
					}
					var v mat.VecDense
					v.MulVec(pre.null, &z)
					var norm float64
					for i := range v0 {
						norm += math.Abs(v0[i] + v.AtVec(i))
					}
					want = min(want, norm)
					return
				}
				for i := start; i < pre.n; i++ {
					rec(i+1, append(rows, i))
				}
			}
			rec(0, nil)
		}
		if math.Abs(got-want) > 1e-8*max(1, want) {
			t.Fatalf("minL1 = %v, vertex enumeration %v", got, want)
		}
	}
	eqs, _ := NewEqualities(7, gradeEqualities(true))
	lin, _ := LeastSquares(eqs)
	ps, _ := gradeWorkload().pairs(7)
	shifts, _ := lin.shifts(ps)
	for mask := 1; mask < 1<<7; mask++ {
		var s []int
		for i := range 7 {
			if mask&(1<<i) != 0 {
				s = append(s, i)
			}
		}
		pre, err := newPreimage(lin.rows(s))
		if err != nil {
			t.Fatal(err)
		}
		for p := range ps {
			check(pre, pick(shifts[p], s))
		}
	}
	r := noise.NewSeeded(51)
	for range 200 {
		n := 2 + int(r.Uint64N(6))
		k := 1 + int(r.Uint64N(uint64(n)))
		m := mat.NewDense(k, n, randVec(r, k*n, -1, 1))
		pre, err := newPreimage(m)
		if err != nil {
			t.Fatal(err)
		}
		var d mat.VecDense
		d.MulVec(m, mat.NewVecDense(n, randVec(r, n, -3, 3)))
		check(pre, d.RawVector().Data)
	}
}
