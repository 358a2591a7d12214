package prior

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/noise"
)

// Section 6.1: B is 1 with prior probability 0.01, eps = 1, individual
// query, alpha_u = e and alpha_d = 1/e.
func TestBooleanExample(t *testing.T) {
	p, err := NewNumeric("B", []float64{0, 1}, []float64{0.99, 0.01})
	if err != nil {
		t.Fatal(err)
	}
	m := mustNew(t, p, Config{Kind: Individual, Epsilon: mustEps(t, 1)})
	q0 := mustRefine(t, m, Point{0}).(*Discrete)
	q1 := mustRefine(t, m, Point{1}).(*Discrete)
	p10, p11 := q0.Prob(1), q1.Prob(1)
	overall := 0.99*p10 + 0.01*p11
	for _, c := range []struct {
		name      string
		got, want float64
		tol       float64
	}{
		{"P(K=1|f=0)", p10, 0.003679, 5e-7}, // paper prints 0.003678 (truncated)
		{"P(K=0|f=0)", q0.Prob(0), 0.9963212, 5e-8},
		{"P(K=1|f=1)", p11, 0.027183, 5e-7}, // paper 0.027182 (truncated)
		{"P(K=0|f=1)", q1.Prob(0), 0.972817, 5e-7},
		{"P(K=1)", overall, 0.0039138, 5e-8}, // paper 0.003912: see below
	} {
		if math.Abs(c.got-c.want) > c.tol {
			t.Errorf("%s = %.7f, want %.7f", c.name, c.got, c.want)
		}
	}
	// The paper's overall probability does not follow from its own
	// conditionals: 0.003678*0.99 + 0.027182*0.01 = 0.003913 (the printed
	// line also has the typo 0.02182), and the exact value is 0.0039138.
	if got := 0.003678*0.99 + 0.027182*0.01; math.Abs(got-0.003912) < 5e-7 {
		t.Errorf("the paper's arithmetic unexpectedly gives 0.003912: %v", got)
	}
	// Both conditionals are exact multiples of the prior: P(1)*alpha_d and
	// P(1)*alpha_u, with P(K=0) adjusted (the paper's remark).
	if math.Abs(p10-0.01/math.E) > 1e-12 || math.Abs(p11-0.01*math.E) > 1e-12 {
		t.Errorf("conditionals %v, %v are not 0.01/e and 0.01e", p10, p11)
	}
}

// Example 3 (Tables 3 and 4): uniform prior on {0,1}, eps = 1, true value
// 0: P(K=1) = 0.5 alpha_d = 0.1839 and the ratios to the prior are alpha_d
// and 2 - alpha_d.
func TestExample3(t *testing.T) {
	p, _ := NewNumeric("B", []float64{0, 1}, []float64{0.5, 0.5})
	m := mustNew(t, p, Config{Kind: Individual, Epsilon: mustEps(t, 1)})
	q := mustRefine(t, m, Point{0}).(*Discrete)
	if math.Abs(q.Prob(1)-0.1839) > 5e-5 || math.Abs(q.Prob(0)-0.8161) > 5e-5 {
		t.Errorf("P(K) = %v, want (0.8161, 0.1839)", q.Probs())
	}
	if r := q.Prob(0) / 0.5; math.Abs(r-(2-1/math.E)) > 1e-9 {
		t.Errorf("ratio %v, want 2 - 1/e", r)
	}
	// Table 3: the joint of two independent responses is the product, and
	// against Table 4 (one individual absent: that response follows the
	// prior) every ratio is alpha_d or 2 - alpha_d.
	for _, k1 := range []int{0, 1} {
		for _, k2 := range []int{0, 1} {
			both := q.Prob(k1) * q.Prob(k2)
			oneAbsent := 0.5 * q.Prob(k2)
			r := both / oneAbsent
			if math.Abs(r-1/math.E) > 1e-9 && math.Abs(r-(2-1/math.E)) > 1e-9 {
				t.Errorf("Table 3/4 ratio at (%d,%d) = %v", k1, k2, r)
			}
		}
	}
}

// Table 5: uniform prior on [0, 1], f(D) = 0.5, individual queries.
func TestTable5(t *testing.T) {
	u, err := Uniform("f", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		eps                   float64
		variance, size, inUu  float64
		laplaceVar            float64
		laplaceVarTol, relTol float64
	}{
		{0.1, 0.077, 0.475, 0.525, 200, 0.5, 0},
		{math.Ln2, 0.046, 0.333, 0.667, 4.16, 0.005, 0},
		{1, 0.034, 0.269, 0.731, 2, 0.0005, 0},
		{2, 0.012, 0.119, 0.881, 0.5, 0.0005, 0},
	} {
		m := mustNew(t, u, Config{Kind: Individual, Epsilon: mustEps(t, c.eps)})
		q := mustRefine(t, m, Point{0.5}).(*Piecewise)
		// U_u is the piece with density alpha_u.
		var uu Piece
		for _, pc := range q.Pieces() {
			if math.Abs(pc.Density-m.AlphaU()) < 1e-6 {
				uu = pc
			}
		}
		size := uu.Hi - uu.Lo
		if math.Abs((uu.Lo+uu.Hi)/2-0.5) > 1e-12 {
			t.Errorf("eps=%v: U_u = [%v, %v] is not centred on f(D)", c.eps, uu.Lo, uu.Hi)
		}
		for _, v := range []struct {
			name      string
			got, want float64
		}{
			{"variance", q.Variance(), c.variance},
			{"size(U_u)", size, c.size},
			{"P(K in U_u)", q.Mass(uu.Lo, uu.Hi), c.inUu},
		} {
			if math.Abs(v.got-v.want) > 0.0005 {
				t.Errorf("eps=%.4g: %s = %.5f, want %.3f", c.eps, v.name, v.got, v.want)
			}
		}
		// The Laplace column: the variance of Laplace(1/eps) noise, here
		// of the grid mechanism the library uses.
		lap, err := noise.NewLaplaceScale(1/c.eps, 1)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(lap.Variance()-c.laplaceVar) > c.laplaceVarTol {
			t.Errorf("eps=%.4g: Laplace variance %v, want %v", c.eps, lap.Variance(), c.laplaceVar)
		}
	}
}

// The paper prints p_u and p_d swapped; the printed p_u violates the mass
// condition and Table 5. Step iv as printed divides 0 by 0.
func TestPrintedFormulasFail(t *testing.T) {
	for _, eps := range []float64{0.1, math.Ln2, 1, 2} {
		au, ad := math.Exp(eps), math.Exp(-eps)
		printedPU := (au - 1) / (au - ad)
		correctPU := (1 - ad) / (au - ad)
		mass := func(pu float64) float64 { return au*pu + ad*(1-pu) }
		if got := mass(correctPU); math.Abs(got-1) > 1e-12 {
			t.Errorf("eps=%v: corrected p_u gives mass %v", eps, got)
		}
		if got := mass(printedPU); math.Abs(got-1) < 1e-3 {
			t.Errorf("eps=%v: printed p_u unexpectedly satisfies the mass condition (%v)", eps, got)
		}
		u, _ := Uniform("f", 0, 1)
		m := mustNew(t, u, Config{Kind: Individual, Epsilon: mustEps(t, eps)})
		// (eps is rounded down to privacy's 2^-40 grid.)
		if math.Abs(m.PU()-correctPU) > 1e-12 {
			t.Errorf("eps=%v: PU() = %v, want %v", eps, m.PU(), correctPU)
		}
	}
	// Table 5, eps = 1: size(U_u) = 0.269 is the corrected p_u; the printed
	// formula gives 0.731.
	au, ad := math.E, 1/math.E
	if got := (au - 1) / (au - ad); math.Abs(got-0.269) < 0.01 {
		t.Errorf("printed p_u = %v matches Table 5", got)
	}
	// Step iv as printed: p_u + p_d = 1 and alpha_u p_u + alpha_d p_d = 1,
	// so it is 0/0; float64 returns rounding noise.
	pu, pd := (1-ad)/(au-ad), (au-1)/(au-ad)
	num, den := 1-au*pu-ad*pd, 1-pu-pd
	if math.Abs(num) > 1e-15 || math.Abs(den) > 1e-15 {
		t.Errorf("printed step iv is %v/%v, not 0/0", num, den)
	}
	printed := num / den
	// Corrected step iv on the Boolean example (f(D) = 0, U'_u empty,
	// U'_d = {1}): alpha_ud = (1 - alpha_d 0.01)/0.99, in [alpha_d, alpha_u],
	// and the mass is one; the printed value breaks the mass condition.
	corr := (1 - au*0 - ad*0.01) / (1 - 0 - 0.01)
	if corr < ad || corr > au {
		t.Errorf("corrected alpha_ud = %v outside [alpha_d, alpha_u]", corr)
	}
	if got := ad*0.01 + corr*0.99; math.Abs(got-1) > 1e-15 {
		t.Errorf("corrected step iv gives mass %v", got)
	}
	if got := ad*0.01 + printed*0.99; !(math.IsNaN(got) || math.Abs(got-1) > 1e-3) {
		t.Errorf("printed step iv (%v) gives mass %v", printed, got)
	}
}

// literalAlgorithm1 transcribes Algorithm 1 (with the corrections of docs/math.md):
// it enumerates the sets U^1_r = {d <= r} and U^2_r = {d < r} for every
// radius and applies the then or else branch. O(R^2), for tests.
func literalAlgorithm1(p *Discrete, d Distance, truth Point, au, ad float64) []float64 {
	n := p.Len()
	dist := make([]float64, n)
	radii := []float64{0, math.Inf(1)}
	for i := range n {
		dist[i] = d.Between(truth, p.point(i))
		radii = append(radii, dist[i])
	}
	pu, pd := (1-ad)/(au-ad), (au-1)/(au-ad)
	type set struct {
		in   []bool
		mass float64
	}
	var balls []set
	for _, r := range radii {
		for _, strict := range []bool{false, true} {
			s := set{in: make([]bool, n)}
			for i := range n {
				s.in[i] = dist[i] <= r && !(strict && dist[i] == r)
				if s.in[i] {
					s.mass += p.Prob(i)
				}
			}
			balls = append(balls, s)
		}
	}
	out := make([]float64, n)
	for _, b := range balls {
		if math.Abs(b.mass-pu) <= 1e-13 { // then branch
			for i := range n {
				f := ad
				if b.in[i] {
					f = au
				}
				out[i] = f * p.Prob(i)
			}
			return out
		}
	}
	uu, ud := set{mass: -1}, set{mass: -1}
	for _, b := range balls {
		if b.mass < pu && b.mass > uu.mass {
			uu = b
		}
		if c := 1 - b.mass; c < pd && c > ud.mass {
			ud = set{in: make([]bool, n), mass: c}
			for i := range n {
				ud.in[i] = !b.in[i]
			}
		}
	}
	aud := (1 - au*uu.mass - ad*ud.mass) / (1 - uu.mass - ud.mass)
	for i := range n {
		f := aud
		switch {
		case uu.in[i]:
			f = au
		case ud.in[i]:
			f = ad
		}
		out[i] = f * p.Prob(i)
	}
	return out
}

func TestAlgorithm1MatchesLiteral(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 400 {
		c := randomDiscreteCase(t, rng)
		kind := []QueryKind{Individual, Statistical}[trial%2]
		cfg := Config{Kind: kind, Epsilon: mustEps(t, 0.05+3*rng.Float64()), Distance: c.dist}
		if kind == Statistical && rng.IntN(2) == 0 {
			cfg.AlphaU = 1 + (math.Exp(cfg.Epsilon.Float64())-1)*rng.Float64()
		}
		m := mustNew(t, c.prior, cfg)
		for _, truth := range c.truths {
			if math.IsNaN(truth[0]) {
				continue
			}
			got := mustRefine(t, m, truth).(*Discrete).Probs()
			want := literalAlgorithm1(c.prior, m.Distance(), truth, m.AlphaU(), m.AlphaD())
			for i := range got {
				if math.Abs(got[i]-want[i]) > 1e-9*max(want[i], 1e-3) {
					t.Fatalf("trial %d (%v, %v), truth %v: point %v: got %v, Algorithm 1 gives %v\nprior %v",
						trial, kind, m, truth, c.prior.Point(i), got, want, c.prior.Probs())
				}
			}
		}
	}
}

// When a ball has prior mass exactly p_u (the then branch), only alpha_u
// and alpha_d are applied.
func TestThenBranch(t *testing.T) {
	for _, kind := range []QueryKind{Individual, Statistical} {
		probe, _ := NewNumeric("x", []float64{0}, []float64{1})
		m0 := mustNew(t, probe, Config{Kind: kind, Epsilon: mustEps(t, 1)})
		pu := m0.PU()
		// Shells by distance from 2: {2}, {1, 3}, {0}; the first two hold p_u.
		p, err := NewNumeric("x", []float64{0, 1, 2, 3}, []float64{1 - pu, pu / 4, pu / 2, pu / 4})
		if err != nil {
			t.Fatal(err)
		}
		m := mustNew(t, p, Config{Kind: kind, Epsilon: mustEps(t, 1)})
		q := mustRefine(t, m, Point{2}).(*Discrete)
		for i, want := range []float64{m.AlphaD(), m.AlphaU(), m.AlphaU(), m.AlphaU()} {
			if f := q.Prob(i) / p.Prob(i); math.Abs(f-want) > 1e-9 {
				t.Errorf("%v: factor of %v = %v, want %v", kind, p.Point(i), f, want)
			}
		}
	}
}

// Ties at the ball's edge: when p_u falls inside a shell, every point of
// the shell gets the same intermediate factor alpha_ud (corrected step iv).
func TestTiesAtTheEdge(t *testing.T) {
	c := Component{Name: "grade", Level: Ordinal, Categories: []string{"A", "B", "C", "D", "E"}}
	p, err := NewCategorical(c, []float64{0.2, 0.2, 0.2, 0.2, 0.2})
	if err != nil {
		t.Fatal(err)
	}
	m := mustNew(t, p, Config{Kind: Individual, Epsilon: mustEps(t, 1)}) // p_u = 0.269
	q := mustRefine(t, m, Point{2}).(*Discrete)
	au, ad := m.AlphaU(), m.AlphaD()
	// U'_u = {C} (0.2 < p_u), U'_d = {A, E} (0.4 < p_d = 0.731), middle {B, D}.
	aud := (1 - au*0.2 - ad*0.4) / 0.4
	for i, want := range []float64{ad, aud, au, aud, ad} {
		if f := q.Prob(i) / 0.2; math.Abs(f-want) > 1e-9 {
			t.Errorf("factor of %s = %v, want %v", c.Categories[i], f, want)
		}
	}
	if aud < ad || aud > au {
		t.Errorf("alpha_ud = %v outside [%v, %v]", aud, ad, au)
	}
}

// Decimal values symmetric about the truth tie, although their float64
// distances differ in the last bits.
func TestDecimalTies(t *testing.T) {
	if math.Abs(0.5-0.3) == math.Abs(0.7-0.5) {
		t.Skip("float64 distances already equal") // never: documents the premise
	}
	p, _ := NewNumeric("x", []float64{0.3, 0.5, 0.7}, []float64{0.25, 0.5, 0.25})
	m := mustNew(t, p, Config{Kind: Individual, Epsilon: mustEps(t, 0.2)}) // p_u in (0.5, 1)
	q := mustRefine(t, m, Point{0.5}).(*Discrete)
	if q.Prob(0) != q.Prob(2) {
		t.Errorf("0.3 and 0.7 get %v and %v", q.Prob(0), q.Prob(2))
	}
}

// The "employed and on benefits" example: zero prior mass marks an
// impossible combination, which is never returned, whatever the truth.
func TestImpossibleCombination(t *testing.T) {
	yn := []string{"No", "Yes"}
	comps := []Component{{Name: "employed", Level: Nominal, Categories: yn}, {Name: "benefits", Level: Nominal, Categories: yn}}
	p, err := NewDiscrete(comps, []Point{{0, 0}, {0, 1}, {1, 0}, {1, 1}}, []float64{0.1, 0.3, 0.6, 0})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := Combine(comps, L1, nil)
	m := mustNew(t, p, Config{Kind: Individual, Epsilon: mustEps(t, 2), Delta: mustDelta(t, 0.1), Distance: d})
	r := noise.NewSeeded(1)
	for _, truth := range []Point{{1, 1}, {0, 1}, {1, 0}} {
		q := mustRefine(t, m, truth).(*Discrete)
		if q.Prob(3) != 0 {
			t.Errorf("truth %v: P(employed and on benefits) = %v", truth, q.Prob(3))
		}
		for range 2000 {
			if i := q.SampleIndex(r); i == 3 {
				t.Fatalf("truth %v: sampled the impossible point", truth)
			}
		}
	}
}

// Errors come only from public inputs: for a valid mechanism, no true
// value (outside the support, NaN, infinite, absent) is an error.
func TestTruthNeverAnError(t *testing.T) {
	d, _ := NewNumeric("x", []float64{0, 1, 2}, []float64{0.2, 0.5, 0.3})
	u, _ := Uniform("x", 0, 1)
	r := noise.NewSeeded(2)
	for _, p := range []Prior{d, u} {
		for _, cfg := range []Config{
			{Kind: Individual, Epsilon: mustEps(t, 1)},
			{Kind: Statistical, Epsilon: mustEps(t, 1)},
			{Kind: Individual, Epsilon: mustEps(t, 1), Delta: mustDelta(t, 0.1)},
			{Kind: Statistical, Epsilon: mustEps(t, 1), Delta: mustDelta(t, 0.1)},
		} {
			m := mustNew(t, p, cfg)
			for _, truth := range []Point{nil, {-5}, {1e300}, {0.5}, {math.NaN()}, {math.Inf(1)}, {math.Inf(-1)}} {
				q, err := m.Refine(truth)
				if err != nil {
					t.Fatalf("%T %v: truth %v: %v", p, m, truth, err)
				}
				x, err := m.Respond(r, truth)
				if err != nil || len(x) != 1 {
					t.Fatalf("Respond(%v) = %v, %v", truth, x, err)
				}
				if truth == nil || math.IsNaN(truth[0]) || math.IsInf(truth[0], 0) {
					// Nothing is near: the response follows the prior.
					switch q := q.(type) {
					case *Discrete:
						for i := range q.Len() {
							if math.Abs(q.Prob(i)-d.Prob(i)) > 1e-15 {
								t.Errorf("truth %v: P(%v) = %v, prior %v", truth, q.Point(i), q.Prob(i), d.Prob(i))
							}
						}
					case *Piecewise:
						if q != u {
							t.Errorf("truth %v: the response does not follow the prior", truth)
						}
					}
				}
			}
			if _, err := m.Refine(Point{1, 2}); err == nil {
				t.Error("a truth with two coordinates for a one-component prior was accepted")
			}
		}
	}
	// A truth outside a continuous prior's support: U_u is the interval of
	// the support nearest to it, and the atom sits on the support's edge.
	m := mustNew(t, u, Config{Kind: Individual, Epsilon: mustEps(t, 1), Delta: mustDelta(t, 0.1)})
	q := mustRefine(t, m, Point{5}).(*Piecewise)
	if at, mass := q.Atom(); at != 1 || math.Abs(mass-0.1) > 1e-9 {
		t.Errorf("atom at %v with mass %v, want 1 and 0.1", at, mass)
	}
	if got := density(q, 0.99); math.Abs(got-m.AlphaU()) > 1e-9 {
		t.Errorf("density next to the truth = %v, want alpha_u", got)
	}
}

func TestNewErrors(t *testing.T) {
	d, _ := NewNumeric("x", []float64{0, 1}, []float64{0.5, 0.5})
	u, _ := Uniform("x", 0, 1)
	yn := []string{"No", "Yes"}
	comps := []Component{{Name: "a", Level: Nominal, Categories: yn}, {Name: "b", Level: Nominal, Categories: yn}}
	joint, _ := NewDiscrete(comps, []Point{{0, 0}, {1, 1}}, []float64{0.5, 0.5})
	eps := mustEps(t, 1)
	for _, c := range []struct {
		name string
		p    Prior
		cfg  Config
		want string
	}{
		{"nil prior", nil, Config{Kind: Individual, Epsilon: eps}, "nil"},
		{"no kind", d, Config{Epsilon: eps}, "query kind"},
		{"zero eps", d, Config{Kind: Individual}, "epsilon"},
		{"huge eps", d, Config{Kind: Individual, Epsilon: mustEps(t, 800)}, "overflows"},
		{"alpha for individual", d, Config{Kind: Individual, Epsilon: eps, AlphaU: 1.5}, "alpha_u"},
		{"alpha below 1", d, Config{Kind: Statistical, Epsilon: eps, AlphaU: 0.5}, "alpha_u"},
		{"alpha above e^eps", d, Config{Kind: Statistical, Epsilon: eps, AlphaU: 3}, "alpha_u"},
		{"alpha NaN", d, Config{Kind: Statistical, Epsilon: eps, AlphaU: math.NaN()}, "alpha_u"},
		{"joint without distance", joint, Config{Kind: Individual, Epsilon: eps}, "needs a distance"},
		{"continuous with nominal distance", u, Config{Kind: Individual, Epsilon: eps, Distance: NominalDistance()}, "absolute"},
		{"continuous with custom distance", u, Config{Kind: Individual, Epsilon: eps, Distance: Custom("sq", func(a, b Point) float64 { return 0 })}, "absolute"},
	} {
		_, err := New(c.p, c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.want)
		}
	}
	// The endpoints of [1, e^eps] are valid (and give back the prior).
	for _, a := range []float64{1, math.Exp(1)} {
		m := mustNew(t, d, Config{Kind: Statistical, Epsilon: eps, AlphaU: a})
		q := mustRefine(t, m, Point{0}).(*Discrete)
		if math.Abs(q.Prob(0)-0.5) > 1e-9 {
			t.Errorf("alpha_u = %v: P(0) = %v, want the prior's 0.5", a, q.Prob(0))
		}
	}
}

func TestDefaultAlpha(t *testing.T) {
	d, _ := NewNumeric("x", []float64{0, 1}, []float64{0.5, 0.5})
	m := mustNew(t, d, Config{Kind: Statistical, Epsilon: mustEps(t, 2)})
	if math.Abs(m.AlphaU()-math.E) > 1e-12 || math.Abs(m.AlphaD()-1/math.E) > 1e-12 {
		t.Errorf("default alpha = (%v, %v), want (e^(eps/2), e^(-eps/2))", m.AlphaU(), m.AlphaD())
	}
	if !strings.Contains(m.String(), "statistical") || !strings.Contains(m.String(), "alpha_u=2.71828") {
		t.Errorf("String() = %q", m.String())
	}
	if b := m.Budget(); b.Epsilon() != 2 || b.Delta() != 0 {
		t.Errorf("Budget() = %v", b)
	}
}

// Individual (eps, delta): every ball gets the largest output mass any
// (eps, delta) refinement can give it, min(1, e^eps c + delta,
// 1 - e^-eps (1 - c - delta)) for a ball of prior mass c.
func TestIndividualDeltaIsOptimal(t *testing.T) {
	p, _ := NewNumeric("x", []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, []float64{0.05, 0.1, 0.15, 0.2, 0.1, 0.1, 0.1, 0.1, 0.05, 0.05})
	for _, c := range []struct{ eps, delta float64 }{{0.5, 0.05}, {1, 0.2}, {0.1, 0.01}, {2, 0.3}} {
		m := mustNew(t, p, Config{Kind: Individual, Epsilon: mustEps(t, c.eps), Delta: mustDelta(t, c.delta)})
		q := mustRefine(t, m, Point{3}).(*Discrete)
		// Balls around 3: radius r holds the points at distance <= r.
		for r := 0; r <= 6; r++ {
			var pc, qc float64
			for i := range p.Len() {
				if math.Abs(p.Point(i)[0]-3) <= float64(r) {
					pc += p.Prob(i)
					qc += q.Prob(i)
				}
			}
			bound := min(1, math.Exp(c.eps)*pc+c.delta, 1-math.Exp(-c.eps)*(1-pc-c.delta))
			if math.Abs(qc-bound) > 1e-9 {
				t.Errorf("eps=%v delta=%v r=%d: ball mass %v, bound %v", c.eps, c.delta, r, qc, bound)
			}
		}
	}
}

func TestRefineKeepsSupportAndSums(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 100 {
		c := randomDiscreteCase(t, rng)
		m := mustNew(t, c.prior, Config{Kind: Statistical, Epsilon: mustEps(t, 1), Delta: mustDelta(t, 0.05), Distance: c.dist})
		for _, truth := range c.truths {
			q := mustRefine(t, m, truth).(*Discrete)
			var s float64
			for i := range q.Len() {
				if !slices.Equal(q.Point(i), c.prior.Point(i)) {
					t.Fatal("the refined support differs from the prior's")
				}
				if c.prior.Prob(i) == 0 && q.Prob(i) != 0 {
					t.Fatalf("an impossible point got mass %v", q.Prob(i))
				}
				s += q.Prob(i)
			}
			if math.Abs(s-1) > 1e-12 {
				t.Fatalf("refined mass %v", s)
			}
		}
	}
}

func TestCustomDistance(t *testing.T) {
	// A distance that favours larger values: points above the truth are
	// "near". NaN and negative results count as +Inf.
	p, _ := NewNumeric("x", []float64{0, 1, 2, 3}, []float64{0.25, 0.25, 0.25, 0.25})
	d := Custom("above", func(truth, x Point) float64 {
		switch {
		case x[0] == 0:
			return math.NaN()
		case x[0] == 1:
			return -1
		}
		return math.Abs(x[0] - truth[0])
	})
	m := mustNew(t, p, Config{Kind: Individual, Epsilon: mustEps(t, 1), Distance: d})
	q := mustRefine(t, m, Point{3}).(*Discrete)
	if !(q.Prob(3) > q.Prob(2) && q.Prob(2) > q.Prob(1) && q.Prob(1) == q.Prob(0)) {
		t.Errorf("probabilities %v do not follow the custom distance", q.Probs())
	}
}

func TestSortEntries(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{0, 1, 100, 5000} {
		es := make([]entry, n)
		for i := range es {
			d := []float64{rng.Float64(), float64(rng.IntN(20)), rng.ExpFloat64() * 1e6, math.Inf(1), 0}[rng.IntN(5)]
			es[i] = entry{distKey(d), int32(i)}
		}
		want := slices.Clone(es)
		slices.SortStableFunc(want, func(a, b entry) int { return cmp.Compare(a.key, b.key) })
		sortEntries(es)
		if !slices.Equal(es, want) {
			t.Errorf("n=%d: radix sort differs from a stable sort", n)
		}
	}
	// distKey preserves order and merges only a relative 2^-40.
	if distKey(0.2) != distKey(math.Nextafter(0.2, 1)) || distKey(0.2) >= distKey(0.2000001) || distKey(math.Inf(1)) <= distKey(math.MaxFloat64/2) {
		t.Error("distKey")
	}
}
