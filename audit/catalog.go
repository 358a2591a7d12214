package audit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/metricdp"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/prior"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/refine"
	"github.com/knowdp/knowdp/release"
	"github.com/knowdp/knowdp/sensitivity"
)

// Case is one mechanism of the library with representative neighbouring
// inputs x and x' (worst-case ones where the library can find them), ready
// to audit.
type Case struct {
	Mechanism  string
	Neighbours string
	// Claimed is the privacy loss the mechanism promises between x and x':
	// eps, or d(u_i, u_j) for a d_X-private mechanism.
	Claimed float64
	// Control marks a deliberately broken configuration, included to show
	// that the audit catches it: its verdict should be Violation.
	Control bool
	// Exact computes the exact loss and says where it is attained, in the
	// mechanism's terms; nil when the output distributions cannot be
	// computed.
	Exact func(ctx context.Context) (Exact, string, error)
	// X and XPrime draw the statistic of one output on x and x'; nil when
	// sampling is not run for the case.
	X, XPrime Sampler
}

// Row is one line of an audit report.
type Row struct {
	Mechanism, Neighbours string
	// Method is "exact" or "sampled".
	Method  string
	Claimed float64
	// Measured is the exact loss, or the lower confidence bound.
	Measured float64
	Verdict  Verdict
	Control  bool
	// Samples is the number of outputs drawn on each input (0 for exact).
	Samples int
	Elapsed time.Duration
	// Detail is where the exact loss is attained, or the output set the
	// lower bound comes from with its point estimate.
	Detail string
}

// Run audits the case exactly (if it can) and by sampling (if it has
// samplers), one row each.
func (c Case) Run(ctx context.Context, r *noise.Rand, cfg SampleConfig) ([]Row, error) {
	var rows []Row
	row := func(method string) Row {
		return Row{Mechanism: c.Mechanism, Neighbours: c.Neighbours, Method: method, Claimed: c.Claimed, Control: c.Control}
	}
	if c.Exact != nil {
		start := time.Now()
		ex, where, err := c.Exact(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: exact audit: %w", c.Mechanism, err)
		}
		rw := row("exact")
		rw.Measured, rw.Verdict, rw.Elapsed, rw.Detail = ex.Epsilon, ex.Verdict, time.Since(start), where
		rows = append(rows, rw)
	}
	if c.X != nil {
		start := time.Now()
		s, err := Sample(ctx, r, c.X, c.XPrime, c.Claimed, cfg)
		if err != nil {
			return nil, fmt.Errorf("%s: sampling audit: %w", c.Mechanism, err)
		}
		rw := row("sampled")
		rw.Measured, rw.Verdict, rw.Samples, rw.Elapsed = s.Lower, s.Verdict, s.Samples, time.Since(start)
		rw.Detail = fmt.Sprintf("%v: estimate %.3f (P %.3g vs %.3g)", s.Set, s.Estimate, s.P, s.Q)
		rows = append(rows, rw)
	}
	return rows, nil
}

// Cases returns every mechanism of the library with representative
// neighbours, calibrated to eps, followed by broken controls:
//
//   - grid Laplace (noise.NewLaplace) and discrete Laplace on counts 0 and 1;
//   - the exponential mechanism (noise.Choose) on utilities that change by
//     the sensitivity in opposite directions, its worst case;
//   - the cube release (cube.Cube.Release) on the worst-case induced
//     neighbours that sensitivity.BruteForceSensitivity finds for paper 3's
//     Example 4.1, exact for the noisy cells before consistency and
//     sampled, after it, through the projection on the neighbours'
//     difference;
//   - the release per privacy unit (release.Plan.RunUnits, at most 3 rows
//     per unit) on two tables that differ in one unit's rows: a unit of 5
//     rows added, without invariants; 5 rows moved from one cell to the
//     other, and 4+4 rows against 8 in one cell (the bounding's random
//     choice audited by sampling), under the grand total; and a control
//     that must fail, the release per row on the first pair;
//   - the prior-refinement mechanism (prior.Mechanism), statistical on its
//     worst pair of true values (discrete and uniform priors) and
//     individual against the absent individual (the prior);
//   - the d_X-private Laplace, exponential, SmallDB and MWEM mechanisms
//     (metricdp) on the pair of universe elements closest to its budget,
//     the claim being d(u_i, u_j);
//   - linear refinements with data-dependent knowledge (package refine),
//     the noise calibrated by refine.Linear.Calibrate: the least-squares
//     refinement of paper 1's Example 1 and the appendix's refinement;
//
// and controls that must fail: grid Laplace with 0.8 times the scale,
// with sensitivity 1 for a query of sensitivity 2, the cube release
// calibrated to sensitivity 1, ignoring the neighbours its exact cuboids
// induce, and the appendix's refinement on Lap(2/eps) counts.
//
// Last come the zCDP mechanisms, whose claim is rho = eps^2/2 (the zCDP
// parameter a pure eps mechanism satisfies) rather than eps: the discrete
// Gaussian (noise.NewDiscreteGaussian) on counts 0 and 1 and the grid
// discrete Gaussian (noise.NewGaussian) on values 0 and 1, audited exactly
// (see exactZCDP), with controls that must fail: sigma 1% too small, and
// sensitivity 1 for a query of sensitivity 2.
func Cases(ctx context.Context, eps privacy.Epsilon) ([]Case, error) {
	e := eps.Float64()
	if !(e > 0) {
		return nil, errors.New("audit: eps must be set (> 0)")
	}
	var out []Case
	for _, build := range []func(context.Context, float64) ([]Case, error){
		laplaceCases, exponentialCases, cubeCases, unitCases, priorCases, metricCases, refineCases, controlCases, gaussianCases,
	} {
		cs, err := build(ctx, e)
		if err != nil {
			return nil, err
		}
		out = append(out, cs...)
	}
	return out, nil
}

// gridLaplaceCase audits lap on inputs x and x2 (both on its grid).
func gridLaplaceCase(name, neighbours string, lap noise.Laplace, x, x2, claimed float64, control bool) Case {
	return Case{
		Mechanism:  name,
		Neighbours: neighbours,
		Claimed:    claimed,
		Control:    control,
		Exact: func(context.Context) (Exact, string, error) {
			ex, err := exactGrid(lap, []float64{x}, []float64{x2}, claimed)
			return ex, fmt.Sprintf("every output beyond %g", math.Max(x, x2)), err
		},
		X:      func(r *noise.Rand) (float64, error) { return lap.Add(r, x) },
		XPrime: func(r *noise.Rand) (float64, error) { return lap.Add(r, x2) },
	}
}

// exactGrid returns the exact loss of adding independent grid Laplace
// noise to each coordinate of x and of x2: the sum over coordinates of the
// exact per-coordinate losses, computed from the noise's probabilities. The
// sum is the loss of the vector because the largest ratios of independent
// coordinates are attained together (in the tails beyond both inputs).
func exactGrid(lap noise.Laplace, x, x2 []float64, claimed float64) (Exact, error) {
	dist, g := lap.Dist(), lap.Grid()
	logp := discreteLaplaceLog(dist)
	total := Exact{Claimed: claimed, Tail: true}
	for i := range x {
		a, b := int64(math.Round(lap.Round(x[i])/g)), int64(math.Round(lap.Round(x2[i])/g))
		if a == b {
			continue
		}
		p := func(z int64) float64 { return logp(z - a) }
		q := func(z int64) float64 { return logp(z - b) }
		ex, err := ExactIntegers(p, q, min(a, b)-2, max(a, b)+2, claimed)
		if err != nil {
			return Exact{}, err
		}
		total.Epsilon += ex.Epsilon
		total.At = ex.At * g
	}
	total.Verdict = verdict(total.Epsilon, claimed)
	return total, nil
}

func laplaceCases(_ context.Context, eps float64) ([]Case, error) {
	lap, err := noise.NewLaplace(1, eps)
	if err != nil {
		return nil, err
	}
	dl, err := noise.NewDiscreteLaplace(1 / eps)
	if err != nil {
		return nil, err
	}
	discrete := Case{
		Mechanism:  "discrete Laplace, scale 1/eps",
		Neighbours: "counts 0 and 1",
		Claimed:    eps,
		Exact: func(context.Context) (Exact, string, error) {
			lp := func(z int64) float64 { return math.Log(dl.Prob(z)) }
			ex, err := ExactIntegers(lp, func(z int64) float64 { return lp(z - 1) }, -2, 3, eps)
			return ex, "every output beyond 1", err
		},
		X:      func(r *noise.Rand) (float64, error) { return float64(dl.Sample(r)), nil },
		XPrime: func(r *noise.Rand) (float64, error) { return float64(1 + dl.Sample(r)), nil },
	}
	return []Case{
		gridLaplaceCase("grid Laplace (noise.NewLaplace)", "values 0 and 1, sensitivity 1", lap, 0, 1, eps, false),
		discrete,
	}, nil
}

// discreteLaplaceLog returns ln P(Z = z) of d: ln P(0) - |z|/t, exactly
// the logarithm of d.Prob(z) = P(0) exp(-|z|/t) without its underflow, and
// without a logarithm per output.
func discreteLaplaceLog(d noise.DiscreteLaplace) func(int64) float64 {
	l0, t := math.Log(d.Prob(0)), d.Scale()
	return func(z int64) float64 { return l0 - math.Abs(float64(z))/t }
}

// softmax returns exp(logw[i]) / sum_j exp(logw[j]).
func softmax(logw []float64) []float64 {
	m := math.Inf(-1)
	for _, v := range logw {
		m = math.Max(m, v)
	}
	p := make([]float64, len(logw))
	var s float64
	for i, v := range logw {
		p[i] = math.Exp(v - m)
		s += p[i]
	}
	for i := range p {
		p[i] /= s
	}
	return p
}

// emUtilities returns the exponential mechanism's worst case for
// sensitivity 1: candidate 0 scores 1 on x and 0 on x', the other R-1
// candidates 0 on x and 1 on x'. The loss at candidate 0 is
// ln(e^{eps/2} (1 + (R-1) e^{eps/2}) / (e^{eps/2} + R - 1)), which tends to
// eps as R grows.
func emUtilities(R int) (u, u2 []float64) {
	u, u2 = make([]float64, R), make([]float64, R)
	u[0] = 1
	for i := 1; i < R; i++ {
		u2[i] = 1
	}
	return u, u2
}

// emWeights returns the exponential mechanism's log-weights
// eps*u/(2*sensitivity).
func emWeights(u []float64, eps, sensitivity float64) []float64 {
	w := make([]float64, len(u))
	for i, v := range u {
		w[i] = eps * v / (2 * sensitivity)
	}
	return w
}

func exponentialCases(_ context.Context, eps float64) ([]Case, error) {
	const R = 20
	u, u2 := emUtilities(R)
	w, w2 := emWeights(u, eps, 1), emWeights(u2, eps, 1)
	return []Case{{
		Mechanism:  "exponential mechanism (noise.Choose)",
		Neighbours: fmt.Sprintf("%d candidates, utilities moved by the sensitivity in opposite directions", R),
		Claimed:    eps,
		Exact: func(context.Context) (Exact, string, error) {
			ex, err := ExactFinite(softmax(w), softmax(w2), eps)
			return ex, fmt.Sprintf("candidate %d", int(ex.At)), err
		},
		X:      func(r *noise.Rand) (float64, error) { i, err := noise.Choose(r, w); return float64(i), err },
		XPrime: func(r *noise.Rand) (float64, error) { i, err := noise.Choose(r, w2); return float64(i), err },
	}}, nil
}

// example41 is the schema of paper 3's Example 4.1 on the smallest domains,
// with the exact cuboids {Sex,Age} and {Age,Salary}: generic sensitivity 4.
func example41() (*domain.Schema, []domain.Cuboid, error) {
	s, err := domain.NewSchema([]domain.Dimension{
		{Name: "sex", Values: []string{"F", "M"}},
		{Name: "age", Values: []string{"young", "old"}},
		{Name: "salary", Values: []string{"low", "high"}},
	})
	if err != nil {
		return nil, nil, err
	}
	sa, err := s.CuboidOf("sex", "age")
	if err != nil {
		return nil, nil, err
	}
	as, err := s.CuboidOf("age", "salary")
	if err != nil {
		return nil, nil, err
	}
	return s, []domain.Cuboid{sa, as}, nil
}

// cubeCase audits the release of the base cuboid of example41 on its
// worst-case induced neighbours, with the noise calibrated to sens (0: the
// generic sensitivity).
func cubeCase(ctx context.Context, eps float64, sens int) (Case, error) {
	s, exact, err := example41()
	if err != nil {
		return Case{}, err
	}
	base := domain.Base(s.NumDims())
	w, err := sensitivity.BruteForceSensitivity(ctx, s, exact, nil, base)
	if err != nil {
		return Case{}, err
	}
	var before, after *cube.Cube
	var diff []float64
	for _, c := range []**cube.Cube{&before, &after} {
		if *c, err = cube.New(s, cube.DefaultCellLimit); err != nil {
			return Case{}, err
		}
	}
	for i := range w.Before {
		before.Counts[i], after.Counts[i] = float64(w.Before[i]), float64(w.After[i])
		diff = append(diff, float64(w.After[i]-w.Before[i]))
	}
	e, err := privacy.NewEpsilon(eps)
	if err != nil {
		return Case{}, err
	}
	spec := release.Spec{Epsilon: e, Exact: []domain.View{domain.ViewOf(exact[0]), domain.ViewOf(exact[1])}, Tables: []domain.View{domain.ViewOf(base)}}
	if sens > 0 {
		// The control ignores the invariants, as a naive release calibrated
		// to sensitivity would (a release refuses a sensitivity below the
		// one it computes). The statistic below is the same with or without
		// consistency: diff keeps every invariant, so it is orthogonal to
		// the least-squares correction.
		spec = release.Spec{Epsilon: e, Tables: spec.Tables, Sensitivity: sens}
	}
	plan, err := release.NewPlan(s, spec)
	if err != nil {
		return Case{}, err
	}
	// The noise a release adds, as planned, rebuilt to compute its
	// probabilities; the exact audit checks that it is the release's.
	probe := plan.Cuboid()
	if probe == nil {
		return Case{}, errors.New("the cube release is not one noisy cuboid")
	}
	lap, err := noise.NewLaplace(float64(probe.Sensitivity), e.Float64())
	if err != nil {
		return Case{}, err
	}
	stat := func(c *cube.Cube) Sampler {
		counts, err := c.ProjectViews(plan.Needs())
		return func(r *noise.Rand) (float64, error) {
			if err != nil {
				return 0, err
			}
			rel, err := plan.Run(context.Background(), counts, r)
			if err != nil {
				return 0, err
			}
			var t float64
			for i, d := range diff {
				t += d * rel.Tables[0].Counts[i]
			}
			return t, nil
		}
	}
	name := fmt.Sprintf("cube release, generic sensitivity %d (release.Plan.Run)", probe.Sensitivity)
	if sens > 0 {
		name = fmt.Sprintf("cube release calibrated to sensitivity %d, not %d", sens, w.Value)
	}
	return Case{
		Mechanism:  name,
		Neighbours: fmt.Sprintf("worst-case induced neighbours of Example 4.1 (2x2x2, exact %s and %s), %d rows apart", s.Format(exact[0]), s.Format(exact[1]), w.Value),
		Claimed:    e.Float64(),
		Control:    sens > 0,
		Exact: func(context.Context) (Exact, string, error) {
			if lap.Scale() != probe.Scale || lap.Grid() != probe.Grid {
				return Exact{}, "", fmt.Errorf("the release's noise (scale %v, grid %v) is not the one audited (%v, %v)", probe.Scale, probe.Grid, lap.Scale(), lap.Grid())
			}
			ex, err := exactGrid(lap, before.Counts, after.Counts, e.Float64())
			return ex, "noisy cells before consistency, in the tails of every differing cell", err
		},
		X:      stat(before),
		XPrime: stat(after),
	}, nil
}

func cubeCases(ctx context.Context, eps float64) ([]Case, error) {
	c, err := cubeCase(ctx, eps, 0)
	if err != nil {
		return nil, err
	}
	return []Case{c}, nil
}

func priorCases(_ context.Context, eps float64) ([]Case, error) {
	e, err := privacy.NewEpsilon(eps)
	if err != nil {
		return nil, err
	}
	// Statistical query, discrete prior: a binomial(10, 0.3) belief about
	// a count.
	values, probs := make([]float64, 11), make([]float64, 11)
	for k := range values {
		values[k] = float64(k)
		probs[k] = math.Exp(lchoose(10, k) + float64(k)*math.Log(0.3) + float64(10-k)*math.Log(0.7))
	}
	binom, err := prior.NewNumeric("count", values, probs)
	if err != nil {
		return nil, err
	}
	stat, err := prior.New(binom, prior.Config{Kind: prior.Statistical, Epsilon: e})
	if err != nil {
		return nil, err
	}
	statCase, err := discretePriorCase(stat, binom, values, false)
	if err != nil {
		return nil, err
	}
	// Individual query: the Boolean example of Section 6.1.
	boolean, err := prior.NewNumeric("answer", []float64{0, 1}, []float64{0.99, 0.01})
	if err != nil {
		return nil, err
	}
	ind, err := prior.New(boolean, prior.Config{Kind: prior.Individual, Epsilon: e})
	if err != nil {
		return nil, err
	}
	indCase, err := discretePriorCase(ind, boolean, []float64{0, 1}, true)
	if err != nil {
		return nil, err
	}
	uni, err := uniformPriorCase(e)
	if err != nil {
		return nil, err
	}
	return []Case{statCase, uni, indCase}, nil
}

func lchoose(n, k int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}

// discretePriorCase audits m on the pair of true values with the largest
// exact loss: two values for a statistical query, a value and the absent
// individual (nil truth, which returns the prior) for an individual one.
func discretePriorCase(m *prior.Mechanism, p *prior.Discrete, values []float64, individual bool) (Case, error) {
	refined := func(t prior.Point) ([]float64, error) {
		d, err := m.Refine(t)
		if err != nil {
			return nil, err
		}
		return d.(*prior.Discrete).Probs(), nil
	}
	var best Exact
	var bestT, bestT2 prior.Point
	found := false
	for _, a := range values {
		pa, err := refined(prior.Point{a})
		if err != nil {
			return Case{}, err
		}
		seconds := [][]float64{nil}
		if !individual {
			seconds = seconds[:0]
			for _, b := range values {
				if b != a {
					seconds = append(seconds, []float64{b})
				}
			}
		}
		for _, b := range seconds {
			pb, err := refined(b)
			if err != nil {
				return Case{}, err
			}
			ex, err := ExactFinite(pa, pb, m.Budget().Epsilon())
			if err != nil {
				return Case{}, err
			}
			if !found || ex.Epsilon > best.Epsilon {
				best, bestT, bestT2, found = ex, prior.Point{a}, b, true
			}
		}
	}
	eps := m.Budget().Epsilon()
	sampler := func(t prior.Point) Sampler {
		return func(r *noise.Rand) (float64, error) {
			o, err := m.Respond(r, t)
			if err != nil {
				return 0, err
			}
			i, ok := p.Index(o)
			if !ok {
				return 0, fmt.Errorf("response %v is not in the prior's support", o)
			}
			return float64(i), nil
		}
	}
	second := "the individual absent (the prior)"
	if bestT2 != nil {
		second = fmt.Sprintf("true value %g", bestT2[0])
	}
	name := fmt.Sprintf("prior refinement, %s, %s", m.Kind(), describePrior(p))
	return Case{
		Mechanism:  name,
		Neighbours: fmt.Sprintf("true value %g and %s: the worst pair", bestT[0], second),
		Claimed:    eps,
		Exact: func(context.Context) (Exact, string, error) {
			return best, fmt.Sprintf("response %s", p.Format(p.Point(int(best.At)))), nil
		},
		X:      sampler(bestT),
		XPrime: sampler(bestT2),
	}, nil
}

func describePrior(p *prior.Discrete) string {
	if p.Len() == 2 {
		return fmt.Sprintf("Boolean prior P(1) = %g", p.Prob(1))
	}
	return fmt.Sprintf("binomial(10, 0.3) prior on %d values", p.Len())
}

// uniformPriorCase audits the statistical refinement of a uniform prior on
// [0, 1] for true values 0 and 1, whose balls U_u are disjoint: the worst
// pair.
func uniformPriorCase(e privacy.Epsilon) (Case, error) {
	u, err := prior.Uniform("share", 0, 1)
	if err != nil {
		return Case{}, err
	}
	m, err := prior.New(u, prior.Config{Kind: prior.Statistical, Epsilon: e})
	if err != nil {
		return Case{}, err
	}
	density := func(t float64) ([]float64, []float64, error) {
		d, err := m.Refine(prior.Point{t})
		if err != nil {
			return nil, nil, err
		}
		pw := d.(*prior.Piecewise)
		if _, mass := pw.Atom(); mass != 0 {
			return nil, nil, errors.New("refined density has an atom")
		}
		var xs, vs []float64
		for _, pc := range pw.Pieces() {
			if len(xs) > 0 && xs[len(xs)-1] < pc.Lo {
				vs = append(vs, 0) // a gap
				xs = append(xs, pc.Lo)
			}
			if len(xs) == 0 {
				xs = append(xs, pc.Lo)
			}
			vs = append(vs, pc.Density)
			xs = append(xs, pc.Hi)
		}
		return xs, vs, nil
	}
	sampler := func(t float64) Sampler {
		return func(r *noise.Rand) (float64, error) {
			o, err := m.Respond(r, prior.Point{t})
			if err != nil {
				return 0, err
			}
			return o[0], nil
		}
	}
	eps := e.Float64()
	return Case{
		Mechanism:  "prior refinement, statistical, uniform prior on [0, 1]",
		Neighbours: "true values 0 and 1 (disjoint balls U_u: the worst pair)",
		Claimed:    eps,
		Exact: func(context.Context) (Exact, string, error) {
			fx, f, err := density(0)
			if err != nil {
				return Exact{}, "", err
			}
			gx, g, err := density(1)
			if err != nil {
				return Exact{}, "", err
			}
			ex, err := ExactDensities(fx, f, gx, g, eps)
			return ex, fmt.Sprintf("responses from %.4g on", ex.At), err
		},
		X:      sampler(0),
		XPrime: sampler(1),
	}, nil
}

// lineMetric is the universe of the d_X cases: six places on a line at
// 0, 1, 2, 4, 7 and 11 km, with budget 0.5 eps per km.
func lineMetric(eps float64) (*metricdp.Euclidean, []float64, error) {
	pos := []float64{0, 1, 2, 4, 7, 11}
	pts := make([][]float64, len(pos))
	for i, p := range pos {
		pts[i] = []float64{p}
	}
	m, err := metricdp.NewEuclidean(pts, 0.5*eps)
	return m, pos, err
}

// lineQueries are the d_X cases' linear queries: how many records are in
// the first three places, and the records' mean position (scaled to 1).
func lineQueries(pos []float64) (*metricdp.Queries, error) {
	near := []float64{1, 1, 1, 0, 0, 0}
	mean := make([]float64, len(pos))
	for i, p := range pos {
		mean[i] = p / 11
	}
	return metricdp.NewQueries([][]float64{near, mean})
}

// moved returns x with one record moved from u_i to u_j.
func moved(x []int64, i, j int) []int64 {
	y := append([]int64(nil), x...)
	y[i]--
	y[j]++
	return y
}

// worstPair returns the pair (i, j), x_i > 0, maximising loss(i, j)/d(i, j).
func worstPair(m metricdp.Metric, x []int64, loss func(i, j int) (float64, error)) (i, j int, l float64, err error) {
	best := -1.0
	for a := range x {
		for b := range x {
			if a == b || x[a] == 0 || math.IsInf(m.Dist(a, b), 1) {
				continue
			}
			v, err := loss(a, b)
			if err != nil {
				return 0, 0, 0, err
			}
			if r := v / m.Dist(a, b); r > best {
				best, i, j, l = r, a, b, v
			}
		}
	}
	return i, j, l, nil
}

func metricCases(ctx context.Context, eps float64) ([]Case, error) {
	m, pos, err := lineMetric(eps)
	if err != nil {
		return nil, err
	}
	q, err := lineQueries(pos)
	if err != nil {
		return nil, err
	}
	x := []int64{5, 5, 5, 5, 5, 5}
	const n = 30
	pair := func(i, j int) string {
		return fmt.Sprintf("one of 30 records moves from %g km to %g km", pos[i], pos[j])
	}

	lap, err := metricdp.NewLaplace(ctx, m, q, metricdp.Optimal, n)
	if err != nil {
		return nil, err
	}
	li, lj, _, err := worstPair(m, x, func(i, j int) (float64, error) { return lap.PairLoss(i, j), nil })
	if err != nil {
		return nil, err
	}
	laplace := Case{
		Mechanism:  "d_X Laplace, 2 queries, optimal scales (metricdp.Laplace)",
		Neighbours: pair(li, lj),
		Claimed:    m.Dist(li, lj),
		X:          laplaceLLR(lap, q, x, moved(x, li, lj), x),
		XPrime:     laplaceLLR(lap, q, x, moved(x, li, lj), moved(x, li, lj)),
	}

	// The exponential mechanism picks where the crowd is: candidate c
	// scores minus the records' total distance from c.
	centres := []float64{0, 3, 6, 9, 12}
	urows := make([][]float64, len(centres))
	for c, at := range centres {
		urows[c] = make([]float64, len(pos))
		for i, p := range pos {
			urows[c][i] = -math.Abs(p - at)
		}
	}
	uq, err := metricdp.NewQueries(urows)
	if err != nil {
		return nil, err
	}
	em, err := metricdp.NewExponential(ctx, m, uq, n)
	if err != nil {
		return nil, err
	}
	emCase, err := finiteMetricCase(m, x, "d_X exponential, 5 candidate centres (metricdp.Exponential)", pair,
		em.Probabilities,
		func(r *noise.Rand, x []int64) (float64, error) { c, err := em.Choose(r, x); return float64(c), err },
		func(c int) string { return fmt.Sprintf("centre %g km", centres[c]) })
	if err != nil {
		return nil, err
	}

	sdb, err := metricdp.NewSmallDB(ctx, m, q, n, 3)
	if err != nil {
		return nil, err
	}
	index := map[string]int{}
	for c := range sdb.Candidates() {
		index[fmt.Sprint(sdb.Candidate(c))] = c
	}
	sdbCase, err := finiteMetricCase(m, x, fmt.Sprintf("d_X SmallDB, %d synthetic databases of 3 records (metricdp.SmallDB)", sdb.Candidates()), pair,
		sdb.Probabilities,
		func(r *noise.Rand, x []int64) (float64, error) {
			y, err := sdb.Release(r, x)
			if err != nil {
				return 0, err
			}
			c, ok := index[fmt.Sprint(y)]
			if !ok {
				return 0, fmt.Errorf("SmallDB released %v, not a candidate", y)
			}
			return float64(c), nil
		},
		func(c int) string { return fmt.Sprintf("synthetic %v", sdb.Candidate(c)) })
	if err != nil {
		return nil, err
	}

	mwem, err := mwemCase(ctx, m, q, x, pair)
	if err != nil {
		return nil, err
	}
	return []Case{laplace, emCase, sdbCase, mwem}, nil
}

// laplaceLLR returns the statistic of the d_X Laplace release on input in:
// the log-likelihood ratio of x against x2 under the Laplace noise the
// mechanism states, the most powerful statistic for telling them apart.
func laplaceLLR(lap *metricdp.Laplace, q *metricdp.Queries, x, x2, in []int64) Sampler {
	a, a2 := answers(q, x), answers(q, x2)
	b := lap.Scales()
	return func(r *noise.Rand) (float64, error) {
		y, err := lap.Release(r, in)
		if err != nil {
			return 0, err
		}
		var t float64
		for l := range y {
			if b[l] > 0 {
				t += (math.Abs(y[l]-a2[l]) - math.Abs(y[l]-a[l])) / b[l]
			}
		}
		return t, nil
	}
}

func answers(q *metricdp.Queries, x []int64) []float64 {
	out := make([]float64, q.Len())
	for l := range out {
		for i, v := range x {
			out[l] += q.Coef(l, i) * float64(v)
		}
	}
	return out
}

// finiteMetricCase audits a d_X mechanism with finitely many outputs on
// the pair whose exact loss is largest relative to its distance.
func finiteMetricCase(m metricdp.Metric, x []int64, name string, pair func(i, j int) string,
	probs func([]int64) ([]float64, error), draw func(*noise.Rand, []int64) (float64, error), output func(int) string) (Case, error) {
	p, err := probs(x)
	if err != nil {
		return Case{}, err
	}
	exact := map[[2]int]Exact{}
	i, j, _, err := worstPair(m, x, func(i, j int) (float64, error) {
		p2, err := probs(moved(x, i, j))
		if err != nil {
			return 0, err
		}
		ex, err := ExactFinite(p, p2, m.Dist(i, j))
		exact[[2]int{i, j}] = ex
		return ex.Epsilon, err
	})
	if err != nil {
		return Case{}, err
	}
	x2 := moved(x, i, j)
	ex := exact[[2]int{i, j}]
	return Case{
		Mechanism:  name,
		Neighbours: pair(i, j),
		Claimed:    m.Dist(i, j),
		Exact: func(context.Context) (Exact, string, error) {
			return ex, output(int(ex.At)), nil
		},
		X:      func(r *noise.Rand) (float64, error) { return draw(r, x) },
		XPrime: func(r *noise.Rand) (float64, error) { return draw(r, x2) },
	}, nil
}

// mwemCase audits MWEM on the pair closest to its budget for its Laplace
// measurements. Its output has no computable distribution; the statistic
// is the log-likelihood ratio of the measured answers, taking the queries
// selected as given.
func mwemCase(ctx context.Context, m metricdp.Metric, q *metricdp.Queries, x []int64, pair func(i, j int) string) (Case, error) {
	const rounds = 2
	beta, err := metricdp.StandaloneScales(ctx, m, q)
	if err != nil {
		return Case{}, err
	}
	i, j, _, err := worstPair(m, x, func(i, j int) (float64, error) {
		var s float64
		for l := range beta {
			if beta[l] > 0 {
				s = math.Max(s, math.Abs(q.Coef(l, i)-q.Coef(l, j))/beta[l])
			}
		}
		return s, nil
	})
	if err != nil {
		return Case{}, err
	}
	x2 := moved(x, i, j)
	a, a2 := answers(q, x), answers(q, x2)
	stat := func(in []int64) Sampler {
		return func(r *noise.Rand) (float64, error) {
			res, err := metricdp.MWEM(context.Background(), r, m, q, in, rounds)
			if err != nil {
				return 0, err
			}
			var t float64
			for k, l := range res.Selected {
				b := 2 * rounds * beta[l]
				if b > 0 {
					t += (math.Abs(res.Measured[k]-a2[l]) - math.Abs(res.Measured[k]-a[l])) / b
				}
			}
			return t, nil
		}
	}
	return Case{
		Mechanism:  fmt.Sprintf("d_X MWEM, %d rounds (metricdp.MWEM)", rounds),
		Neighbours: pair(i, j),
		Claimed:    m.Dist(i, j),
		X:          stat(x),
		XPrime:     stat(x2),
	}, nil
}

// refinedRelease returns the sampler of x̂_1 when the raw answers mu get
// lap's noise and are refined by lin.
func refinedRelease(lap noise.Laplace, lin *refine.Linear, mu []float64) Sampler {
	return func(r *noise.Rand) (float64, error) {
		x := make([]float64, len(mu))
		var err error
		for i := range x {
			if x[i], err = lap.Add(r, mu[i]); err != nil {
				return 0, err
			}
		}
		if err := lin.Apply(x, x); err != nil {
			return 0, err
		}
		return x[0], nil
	}
}

// appendixCase audits the appendix's refinement for k = 4, releasing
// x̂_1, with the noise refine calibrates for it or, for the control, the
// appendix's Lap(2/eps).
func appendixCase(eps float64, calibrated bool) (Case, error) {
	const k = 4
	mu1, mu2, c1, c2 := ywwDatabases(k)
	lin1, err := ywwLinear(k, c1)
	if err != nil {
		return Case{}, err
	}
	lin2, err := ywwLinear(k, c2)
	if err != nil {
		return Case{}, err
	}
	lap, err := noise.NewLaplaceScale(2/eps, 1)
	if err != nil {
		return Case{}, err
	}
	name := "appendix refinement, k = 4, x̂_1 of Lap(2/eps) counts (paper 1)"
	if calibrated {
		e, err := privacy.NewEpsilon(eps)
		if err != nil {
			return Case{}, err
		}
		if lap, _, err = lin1.Calibrate(ywwWorkload(), []int{0}, e); err != nil {
			return Case{}, err
		}
		name = "appendix refinement, k = 4, x̂_1, refine.Linear.Calibrate"
	}
	return Case{
		Mechanism:  name,
		Neighbours: "the added record in category 1 or 2 (k mu_1 = mu_2 before)",
		Claimed:    eps,
		Control:    !calibrated,
		X:          refinedRelease(lap, lin1, mu1[:]),
		XPrime:     refinedRelease(lap, lin2, mu2[:]),
	}, nil
}

func refineCases(_ context.Context, eps float64) ([]Case, error) {
	e, err := privacy.NewEpsilon(eps)
	if err != nil {
		return nil, err
	}
	// Example 1: the analyst knows mu_1 + mu_2 = c, computed from the
	// data; one record of category 1 more moves c with mu_1.
	mu, mu2 := []float64{10, 20}, []float64{11, 20}
	lins := make([]*refine.Linear, 2)
	for i, m := range [][]float64{mu, mu2} {
		eqs, err := refine.NewEqualities(2, []refine.Equality{{Label: "mu_1 + mu_2", Index: []int{0, 1}, Coef: []float64{1, 1}, Value: m[0] + m[1]}})
		if err != nil {
			return nil, err
		}
		if lins[i], err = refine.LeastSquares(eqs); err != nil {
			return nil, err
		}
	}
	w := refine.Workload{Queries: mat.NewDense(2, 2, []float64{1, 0, 0, 1}), Relation: refine.AddRemove}
	lap, _, err := lins[0].Calibrate(w, []int{0}, e)
	if err != nil {
		return nil, err
	}
	ls := Case{
		Mechanism:  "least-squares refinement, Example 1, x̂_1, refine.Linear.Calibrate",
		Neighbours: "one record more in category 1 (mu_1 + mu_2 = c from the data)",
		Claimed:    eps,
		X:          refinedRelease(lap, lins[0], mu),
		XPrime:     refinedRelease(lap, lins[1], mu2),
	}
	app, err := appendixCase(eps, true)
	if err != nil {
		return nil, err
	}
	return []Case{ls, app}, nil
}

func controlCases(ctx context.Context, eps float64) ([]Case, error) {
	lap, err := noise.NewLaplace(1, eps)
	if err != nil {
		return nil, err
	}
	small, err := noise.NewLaplaceScale(0.8*lap.Scale(), 1)
	if err != nil {
		return nil, err
	}
	naive, err := cubeCase(ctx, eps, 1)
	if err != nil {
		return nil, err
	}
	app, err := appendixCase(eps, false)
	if err != nil {
		return nil, err
	}
	return []Case{
		gridLaplaceCase("grid Laplace with 0.8 times the scale", "values 0 and 1, sensitivity 1", small, 0, 1, eps, true),
		gridLaplaceCase("grid Laplace calibrated to sensitivity 1, not 2", "values 0 and 2, sensitivity 2", lap, 0, 2, eps, true),
		naive,
		app,
	}, nil
}

// VerdictText formats the row's verdict for a report: controls are
// expected to fail, and a sampled bound is shown as a share of the claim.
func (r Row) VerdictText() string {
	var b strings.Builder
	b.WriteString(r.Verdict.String())
	switch {
	case r.Control && r.Verdict == Violation:
		b.WriteString(" (control: expected)")
	case r.Control:
		b.WriteString(" (control: MISSED)")
	case r.Method == "sampled" && r.Claimed > 0 && !math.IsInf(r.Claimed, 1):
		fmt.Fprintf(&b, " (bound %.0f%% of claim)", 100*r.Measured/r.Claimed)
	}
	return b.String()
}

// zcdpAlphas are the Rényi orders at which exactZCDP evaluates divergences.
var zcdpAlphas = []float64{1.25, 1.5, 2, 3, 4, 8, 16, 32, 64}

// exactZCDP audits a zCDP claim exactly: the mechanism is rho-zCDP between
// two inputs iff D_alpha(P || Q) <= alpha rho for every alpha > 1, both
// ways, so the measured value is the largest D_alpha/alpha over
// zcdpAlphas and both directions, compared with the claimed rho. P and Q
// are N_Z(a, s^2) and N_Z(b, s^2) on the integers (grid units).
//
// For s <= 64 the divergence is summed directly over every integer within
// (alpha-1)|a-b| + 50 s + 10 of a and b (log-sum-exp, terms beyond are below
// e^-1000 of the largest). For larger s (the grid mechanism, whose sigma is
// about 2^20 grid steps) completing the square gives D_alpha =
// alpha (a-b)^2/(2 s^2) + ln(theta((alpha-1)(a-b)) / theta(0)) / (alpha-1)
// with theta(u) = sum_z exp(-(z-u)^2/(2 s^2)), and Poisson summation gives
// theta(u)/theta(0) = (1 + 2 sum_k q^(k^2) cos(2 pi k u)) / (1 + 2 sum_k
// q^(k^2)), q = exp(-2 pi^2 s^2) < e^-80000: exactly 1 in float64.
func exactZCDP(s float64, a, b int64, claimed float64) (Exact, string) {
	best := Exact{Claimed: claimed, At: zcdpAlphas[0]}
	for _, alpha := range zcdpAlphas {
		for _, dir := range [][2]int64{{a, b}, {b, a}} {
			var d float64
			if s <= 64 {
				d = renyiDiscreteGaussian(s, dir[0], dir[1], alpha)
			} else {
				D := float64(dir[0] - dir[1])
				d = alpha * D * D / (2 * s * s)
			}
			if v := d / alpha; v > best.Epsilon {
				best.Epsilon, best.At = v, alpha
			}
		}
	}
	best.Verdict = verdict(best.Epsilon, claimed)
	return best, fmt.Sprintf("alpha = %g (max of D_alpha/alpha over alpha in [1.25, 64], both ways)", best.At)
}

// renyiDiscreteGaussian returns D_alpha(N_Z(a, s^2) || N_Z(b, s^2)) by
// summation in log space.
func renyiDiscreteGaussian(s float64, a, b int64, alpha float64) float64 {
	lo := min(a, b) - int64((alpha-1)*float64(max(a-b, b-a))+50*s+10)
	hi := max(a, b) + int64((alpha-1)*float64(max(a-b, b-a))+50*s+10)
	logsum := func(f func(z int64) float64) float64 {
		m := math.Inf(-1)
		for z := lo; z <= hi; z++ {
			m = math.Max(m, f(z))
		}
		var acc float64
		for z := lo; z <= hi; z++ {
			acc += math.Exp(f(z) - m)
		}
		return m + math.Log(acc)
	}
	gauss := func(c int64) func(z int64) float64 {
		return func(z int64) float64 { d := float64(z - c); return -d * d / (2 * s * s) }
	}
	p, q := gauss(a), gauss(b)
	np, nq := logsum(p), logsum(q)
	l := logsum(func(z int64) float64 { return alpha*(p(z)-np) + (1-alpha)*(q(z)-nq) })
	return l / (alpha - 1)
}

// discreteGaussianCase audits N_Z(0, sigma^2) added to counts a and b.
func discreteGaussianCase(name, neighbours string, sigma float64, a, b int64, rho float64, control bool) (Case, error) {
	if _, err := noise.NewDiscreteGaussian(sigma); err != nil {
		return Case{}, err
	}
	return Case{
		Mechanism:  name,
		Neighbours: neighbours,
		Claimed:    rho,
		Control:    control,
		Exact: func(context.Context) (Exact, string, error) {
			ex, where := exactZCDP(sigma, a, b, rho)
			return ex, where, nil
		},
	}, nil
}

// gridGaussianCase audits g on inputs x and x2, through their grid points.
func gridGaussianCase(name, neighbours string, g noise.Gaussian, x, x2, rho float64, control bool) Case {
	return Case{
		Mechanism:  name,
		Neighbours: neighbours,
		Claimed:    rho,
		Control:    control,
		Exact: func(context.Context) (Exact, string, error) {
			a := int64(math.Round(g.Round(x) / g.Grid()))
			b := int64(math.Round(g.Round(x2) / g.Grid()))
			ex, where := exactZCDP(g.Dist().Sigma(), a, b, rho)
			return ex, where, nil
		},
	}
}

// gaussianCases returns the discrete Gaussian mechanisms, calibrated to
// rho = eps^2/2 for sensitivity 1, and their broken controls.
func gaussianCases(_ context.Context, eps float64) ([]Case, error) {
	rho := eps * eps / 2
	sigma := 1 / math.Sqrt(2*rho) // D^2/(2 sigma^2) = rho for D = 1
	dg, err := discreteGaussianCase("discrete Gaussian (noise.NewDiscreteGaussian), zCDP: claim and loss are rho = eps^2/2",
		"counts 0 and 1", sigma, 0, 1, rho, false)
	if err != nil {
		return nil, err
	}
	g, err := noise.NewGaussian(1, rho)
	if err != nil {
		return nil, err
	}
	small, err := discreteGaussianCase("discrete Gaussian with sigma 1% too small, zCDP rho",
		"counts 0 and 1", sigma*0.99, 0, 1, rho, true)
	if err != nil {
		return nil, err
	}
	return []Case{
		dg,
		gridGaussianCase("grid discrete Gaussian (noise.NewGaussian), zCDP rho", "values 0 and 1, L2 sensitivity 1", g, 0, 1, rho, false),
		small,
		gridGaussianCase("grid discrete Gaussian calibrated to sensitivity 1, not 2, zCDP rho", "values 0 and 2, L2 sensitivity 2", g, 0, 2, rho, true),
	}, nil
}
