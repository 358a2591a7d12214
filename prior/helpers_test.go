package prior

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/knowdp/knowdp/privacy"
)

// The test generators use math/rand/v2 to choose test cases only; no
// privacy noise comes from it.

func mustEps(t testing.TB, x float64) privacy.Epsilon {
	t.Helper()
	e, err := privacy.NewEpsilon(x)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func mustDelta(t testing.TB, x float64) privacy.Delta {
	t.Helper()
	d, err := privacy.NewDelta(x)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mustNew(t testing.TB, p Prior, cfg Config) *Mechanism {
	t.Helper()
	m, err := New(p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustRefine(t testing.TB, m *Mechanism, truth Point) Prior {
	t.Helper()
	q, err := m.Refine(truth)
	if err != nil {
		t.Fatalf("Refine(%v): %v", truth, err)
	}
	return q
}

// randomWeights returns n probabilities, some zero, at least one positive.
func randomWeights(rng *rand.Rand, n int) []float64 {
	w := make([]float64, n)
	var s float64
	for i := range w {
		if rng.IntN(5) > 0 {
			w[i] = rng.Float64() + 0.01
		}
		s += w[i]
	}
	if s == 0 {
		w[rng.IntN(n)] = 1
		s = 1
	}
	for i := range w {
		w[i] /= s
	}
	return w
}

// discreteCase is a random discrete prior with a distance and candidate
// true values: every support point, points outside the support and NaN.
type discreteCase struct {
	prior  *Discrete
	dist   Distance
	truths []Point
}

func randomDiscreteCase(t testing.TB, rng *rand.Rand) discreteCase {
	t.Helper()
	cats := func(n int) []string {
		c := make([]string, n)
		for i := range c {
			c[i] = string(rune('a' + i))
		}
		return c
	}
	var comps []Component
	switch rng.IntN(4) {
	case 0:
		comps = []Component{{Name: "x", Level: Numeric}}
	case 1:
		comps = []Component{{Name: "o", Level: Ordinal, Categories: cats(1 + rng.IntN(8))}}
	case 2:
		comps = []Component{{Name: "n", Level: Nominal, Categories: cats(1 + rng.IntN(6))}}
	default:
		comps = []Component{{Name: "x", Level: Numeric}, {Name: "o", Level: Ordinal, Categories: cats(1 + rng.IntN(4))}}
		if rng.IntN(2) == 0 {
			comps[1].Level = Nominal
		}
	}
	coord := func(c Component) float64 {
		if c.Level == Numeric {
			if rng.IntN(2) == 0 {
				return float64(rng.IntN(9)) / 2 // ties
			}
			return math.Round(rng.NormFloat64()*1000) / 100
		}
		return float64(rng.IntN(len(c.Categories)))
	}
	var pts []Point
	for range 1 + rng.IntN(10) {
		p := make(Point, len(comps))
		for j, c := range comps {
			p[j] = coord(c)
		}
		if !slices.ContainsFunc(pts, func(q Point) bool { return slices.Equal(p, q) }) {
			pts = append(pts, p)
		}
	}
	prior, err := NewDiscrete(comps, pts, randomWeights(rng, len(pts)))
	if err != nil {
		t.Fatal(err)
	}
	c := discreteCase{prior: prior, truths: slices.Clone(pts)}
	for range 2 {
		p := make(Point, len(comps))
		for j, comp := range comps {
			p[j] = coord(comp) + 0.25 // off the support for numeric components
			if comp.Level != Numeric {
				p[j] = float64(len(comp.Categories)) // not a category
			}
		}
		c.truths = append(c.truths, p)
	}
	nan := make(Point, len(comps))
	for j := range nan {
		nan[j] = math.NaN()
	}
	c.truths = append(c.truths, nan)
	if len(comps) > 1 {
		norm := []Norm{L1, L2, LInf}[rng.IntN(3)]
		var w []float64
		if rng.IntN(2) == 0 {
			w = []float64{0.5 + rng.Float64(), 0.5 + rng.Float64()}
		}
		if c.dist, err = Combine(comps, norm, w); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// randomPiecewise returns a density with 1 to 4 pieces, possibly with gaps
// and zero-density pieces, on roughly [-2, 6].
func randomPiecewise(t testing.TB, rng *rand.Rand) *Piecewise {
	t.Helper()
	n := 1 + rng.IntN(4)
	var ps []Piece
	x := -2 + rng.Float64()
	for range n {
		if rng.IntN(3) == 0 {
			x += rng.Float64() // gap
		}
		w := 0.1 + 2*rng.Float64()
		ps = append(ps, Piece{Lo: x, Hi: x + w})
		x += w
	}
	ws := randomWeights(rng, n)
	for i := range ps {
		ps[i].Density = ws[i] / (ps[i].Hi - ps[i].Lo)
	}
	p, err := NewPiecewise("x", ps)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// hockeyStick returns sum_x max(0, a(x) - e^eps b(x)) for two distributions
// on the same support: the smallest delta for which a is (eps, delta)-close
// to b on every set.
func hockeyStick(a, b []float64, eps float64) float64 {
	var s float64
	for i := range a {
		s += max(0, a[i]-math.Exp(eps)*b[i])
	}
	return s
}

// region is an interval on which two piecewise distributions both have
// constant densities.
type region struct{ lo, hi, da, db float64 }

func density(p *Piecewise, x float64) float64 {
	for _, s := range p.Pieces() {
		if s.Lo <= x && x < s.Hi {
			return s.Density
		}
	}
	return 0
}

// regions merges the breakpoints of a and b.
func regions(a, b *Piecewise) []region {
	var cuts []float64
	for _, p := range []*Piecewise{a, b} {
		for _, s := range p.Pieces() {
			cuts = append(cuts, s.Lo, s.Hi)
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	var out []region
	for k := 1; k < len(cuts); k++ {
		mid := cuts[k-1] + (cuts[k]-cuts[k-1])/2
		out = append(out, region{cuts[k-1], cuts[k], density(a, mid), density(b, mid)})
	}
	return out
}

// hockeyStickPiecewise is hockeyStick for piecewise densities with atoms.
func hockeyStickPiecewise(a, b *Piecewise, eps float64) float64 {
	var s float64
	for _, r := range regions(a, b) {
		s += max(0, r.da-math.Exp(eps)*r.db) * (r.hi - r.lo)
	}
	at, m := a.Atom()
	if m > 0 {
		bat, bm := b.Atom()
		if bm == 0 || bat != at {
			bm = 0
		}
		s += max(0, m-math.Exp(eps)*bm)
	}
	return s
}
