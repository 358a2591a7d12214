package prior

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
)

// Prior is an analyst's prior knowledge about a query's answer, and also
// the type of the refined distribution: a *Discrete or a *Piecewise.
type Prior interface {
	// Components describes the response's coordinates.
	Components() []Component
	// Sample draws a response.
	Sample(r *noise.Rand) Point
	// Format formats a response.
	Format(p Point) string
	isPrior()
}

// QueryKind says whom a query's answer depends on, which fixes the factors.
type QueryKind int

// The query kinds of Section 2.
const (
	// Statistical queries depend on many individuals: the output
	// distributions for any two true values must be within e^eps.
	Statistical QueryKind = iota + 1
	// Individual queries depend on one individual: the output need only
	// be within e^eps of the prior, which is what an analyst gets when the
	// individual is absent.
	Individual
)

// String returns "statistical" or "individual".
func (k QueryKind) String() string {
	switch k {
	case Statistical:
		return "statistical"
	case Individual:
		return "individual"
	}
	return fmt.Sprintf("QueryKind(%d)", int(k))
}

// MaxEpsilon is the largest eps the mechanism accepts: e^eps must be a
// finite float64.
const MaxEpsilon = 700

// margin tightens the factors so that float64 rounding of the weights and
// their sum (relative errors of a few 2^-53, or 2^-53 per piece when a
// continuous ball is inverted) never makes the realised loss exceed eps.
const margin = 0x1p-36

// Config holds a mechanism's public parameters.
type Config struct {
	Kind    QueryKind
	Epsilon privacy.Epsilon
	// Delta is 0 for eps-differential privacy, or the delta of the
	// (eps, delta) variant of Section 3.
	Delta privacy.Delta
	// AlphaU is the factor for the points near the true answer of a
	// statistical query, in [1, e^eps]; alpha_d = alpha_u e^-eps. Zero
	// means the default e^(eps/2), which balances the gain near the true
	// value (alpha_u) against the loss far from it (1/alpha_d). Individual
	// queries always use alpha_u = e^eps, alpha_d = e^-eps and must leave
	// it zero.
	AlphaU float64
	// Distance decides which points are near the true answer. The zero
	// value is Table 1's distance for a one-component prior; priors with
	// several components need one (see Combine and Custom). A *Piecewise
	// prior uses the absolute distance.
	Distance Distance
}

// Mechanism is the knowledge-refinement mechanism for one prior, with
// validated public parameters. It is safe for concurrent use.
type Mechanism struct {
	prior  Prior
	dim    int
	dist   Distance
	kind   QueryKind
	eps    privacy.Epsilon
	delta  privacy.Delta
	alphaU float64
	alphaD float64
	env    envelope
}

// New validates the public parameters and returns the mechanism. Its errors
// never depend on a true value.
func New(p Prior, cfg Config) (*Mechanism, error) {
	if p == nil {
		return nil, errors.New("prior: the prior is nil")
	}
	eps := cfg.Epsilon.Float64()
	switch {
	case cfg.Kind != Statistical && cfg.Kind != Individual:
		return nil, fmt.Errorf("prior: query kind must be statistical or individual, got %v", cfg.Kind)
	case !(eps > 0) || math.IsInf(eps, 0):
		return nil, fmt.Errorf("prior: epsilon must be > 0 (make it with privacy.NewEpsilon), got %v", eps)
	case eps > MaxEpsilon:
		return nil, fmt.Errorf("prior: epsilon %v is above %v, where e^epsilon overflows float64", eps, MaxEpsilon)
	}
	m := &Mechanism{prior: p, dim: len(p.Components()), kind: cfg.Kind, eps: cfg.Epsilon, delta: cfg.Delta, dist: cfg.Distance}
	if m.dist.IsZero() {
		if m.dim != 1 {
			return nil, fmt.Errorf("prior: a prior with %d components needs a distance (L1, L2, LInf, weighted or custom); the paper leaves it to the application", m.dim)
		}
		m.dist = ForComponent(p.Components()[0])
	}
	if _, ok := p.(*Piecewise); ok && !m.dist.absolute {
		return nil, fmt.Errorf("prior: a continuous prior is refined with the absolute distance, not %v; use a discrete prior for other distances", m.dist)
	}
	delta := cfg.Delta.Float64() * (1 - margin)
	switch cfg.Kind {
	case Individual:
		if cfg.AlphaU != 0 {
			return nil, errors.New("prior: alpha_u is fixed to e^epsilon for individual queries; leave it unset")
		}
		m.alphaU, m.alphaD = math.Exp(eps), math.Exp(-eps)
		a1, a2 := max(1, m.alphaU*(1-margin)), min(1, m.alphaD*(1+margin))
		// The farthest delta of prior mass is never returned.
		m.env = newEnvelope(a1, delta, a2, a2*delta)
	case Statistical:
		m.alphaU = cfg.AlphaU
		if m.alphaU == 0 {
			m.alphaU = math.Exp(eps / 2)
		}
		if math.IsNaN(m.alphaU) || m.alphaU < 1 || m.alphaU > math.Exp(eps) {
			return nil, fmt.Errorf("prior: alpha_u must be in [1, e^epsilon] = [1, %.6g], got %v", math.Exp(eps), cfg.AlphaU)
		}
		m.alphaD = m.alphaU * math.Exp(-eps)
		a1, a2 := m.alphaU, min(1, m.alphaU*math.Exp(-eps)*(1+2*margin))
		// delta' moves to f(D) and leaves the farthest points; with two true
		// values each in the other's farthest set the loss is
		// (1 + e^eps) delta', hence delta' = delta / (1 + e^eps).
		shift := delta / (1 + math.Exp(eps))
		m.env = newEnvelope(a1, shift, a2, shift)
	}
	return m, nil
}

// Prior returns the mechanism's prior.
func (m *Mechanism) Prior() Prior { return m.prior }

// Kind returns the query kind.
func (m *Mechanism) Kind() QueryKind { return m.kind }

// Distance returns the distance in use.
func (m *Mechanism) Distance() Distance { return m.dist }

// AlphaU returns the factor applied near the true value (before the
// safety margin).
func (m *Mechanism) AlphaU() float64 { return m.alphaU }

// AlphaD returns the factor applied far from the true value.
func (m *Mechanism) AlphaD() float64 { return m.alphaD }

// PU returns p_u = (1 - alpha_d)/(alpha_u - alpha_d), the prior mass of the
// set U_u that gets alpha_u when such a ball exists (docs/math.md section 2; the
// paper prints this as p_d).
func (m *Mechanism) PU() float64 { return (1 - m.alphaD) / (m.alphaU - m.alphaD) }

// Budget returns the privacy loss of one response: (eps, delta).
func (m *Mechanism) Budget() privacy.Budget { return privacy.Approx(m.eps, m.delta) }

// String describes the mechanism for reports.
func (m *Mechanism) String() string {
	s := fmt.Sprintf("prior-knowledge refinement (%v query, eps=%.6g", m.kind, m.eps.Float64())
	if m.delta.Steps() > 0 {
		s += fmt.Sprintf(", delta=%.3g", m.delta.Float64())
	}
	return s + fmt.Sprintf(", alpha_u=%.6g, alpha_d=%.6g, distance %v)", m.alphaU, m.alphaD, m.dist)
}

// Refine returns the exact distribution of the response when the true
// answer is truth: a distribution of the same type as the prior. A nil
// truth means that the individual of an individual query is not in the
// data: the response then follows the prior. A truth outside the prior's
// support, or NaN, is not an error. The only error is a truth with the
// wrong number of coordinates, which depends on the query, not the data.
func (m *Mechanism) Refine(truth Point) (Prior, error) {
	if truth == nil {
		return m.prior, nil
	}
	if len(truth) != m.dim {
		return nil, fmt.Errorf("prior: the true value has %d coordinates; the prior has %d components", len(truth), m.dim)
	}
	switch p := m.prior.(type) {
	case *Discrete:
		return m.refineDiscrete(p, truth), nil
	case *Piecewise:
		return m.refinePiecewise(p, truth[0]), nil
	}
	return nil, fmt.Errorf("prior: unsupported prior type %T", m.prior)
}

// Respond refines the prior around truth and draws the response.
func (m *Mechanism) Respond(r *noise.Rand, truth Point) (Point, error) {
	q, err := m.Refine(truth)
	if err != nil {
		return nil, err
	}
	return q.Sample(r), nil
}

// envelope is G, the output mass of the ball whose prior mass is c:
// G(0) = 0, G(0+) = atom, and G' = slope[j] on [end[j-1], end[j]).
type envelope struct {
	atom  float64
	end   [3]float64
	slope [3]float64
}

// newEnvelope returns G(c) = min(1, a1 c + b1, 1 - a2 (1 - c) + s2) for
// a1 >= 1 >= a2 > 0 and 0 <= b1 <= 1 - a2 + s2.
func newEnvelope(a1, b1, a2, s2 float64) envelope {
	e := envelope{atom: b1, slope: [3]float64{a1, a2, 0}}
	x23 := 1.0 // pure eps: the second line reaches 1 exactly at c = 1
	if s2 > 0 {
		x23 = 1 - s2/a2
	}
	x12 := math.Inf(1)
	if a1 > a2 {
		x12 = (1 - a2 + s2 - b1) / (a1 - a2)
	}
	if x12 < x23 {
		e.end = [3]float64{clamp01(x12), clamp01(x23), 1}
	} else {
		x13 := clamp01((1 - b1) / a1)
		e.end = [3]float64{x13, x13, 1}
	}
	return e
}

func clamp01(x float64) float64 { return max(0, min(1, x)) }

// factor returns the mean of G' over [c0, c1]: the factor of a shell whose
// prior mass spans that interval. A shell within one region gets its slope
// exactly; a straddling shell (Algorithm 1's alpha_ud) gets a mean clamped to
// the slopes it straddles, so rounding never moves it outside them.
func (e *envelope) factor(c0, c1 float64) float64 {
	j0, j1 := 0, 0
	for j0 < 2 && c0 >= e.end[j0] {
		j0++
	}
	for j1 < 2 && c1 > e.end[j1] {
		j1++
	}
	if j1 <= j0 || c1 <= c0 {
		return e.slope[j0]
	}
	var mass float64
	lo := c0
	for j := j0; j <= j1; j++ {
		hi := min(c1, e.end[j])
		if hi > lo {
			mass += e.slope[j] * (hi - lo)
			lo = hi
		}
	}
	return max(e.slope[j1], min(e.slope[j0], mass/(c1-c0)))
}

// distKey orders distances: d rounded to 40 significant bits, as an
// integer whose order is the order of the distances (d >= 0 or +Inf).
func distKey(d float64) uint64 {
	return (math.Float64bits(d) + 1<<11) &^ (1<<12 - 1)
}

// refineDiscrete is Algorithm 1: sort the support by distance, cut it into
// shells of equal distance and give each shell the factor of the part of G
// its prior mass spans. O(R log R) for R support points.
func (m *Mechanism) refineDiscrete(p *Discrete, truth Point) *Discrete {
	es := make([]entry, 0, len(p.probs))
	var total kahan
	for i, pi := range p.probs {
		if pi > 0 { // zero mass: impossible, never returned
			es = append(es, entry{distKey(m.dist.Between(truth, p.point(i))), int32(i)})
			total.add(pi)
		}
	}
	sortEntries(es)
	t := total.sum()
	w := make([]float64, len(p.probs))
	var cum, out kahan
	for k := 0; k < len(es); {
		j := k
		var shell kahan
		for ; j < len(es) && es[j].key == es[k].key; j++ {
			shell.add(p.probs[es[j].i])
		}
		c0 := cum.sum() / t
		cum.add(shell.sum())
		c1 := 1.0
		if j < len(es) {
			c1 = min(1, cum.sum()/t)
		}
		f := m.env.factor(c0, c1)
		if k == 0 {
			// The nearest shell also takes the atom G(0+), in proportion to
			// the prior.
			f += m.env.atom / (shell.sum() / t)
		}
		for _, e := range es[k:j] {
			w[e.i] = f * p.probs[e.i]
			out.add(w[e.i])
		}
		k = j
	}
	s := out.sum()
	for i := range w {
		w[i] /= s
	}
	return &Discrete{comps: p.comps, dim: p.dim, points: p.points, probs: w}
}

// entry is a support point's distance key and index.
type entry struct {
	key uint64
	i   int32
}

// sortEntries sorts by key: an LSD radix sort on the 52 bits distKey can
// set (11 bits a pass, skipping passes where every key has the same digit),
// O(R); comparison sort for short inputs.
func sortEntries(es []entry) {
	if len(es) < 512 {
		slices.SortStableFunc(es, func(a, b entry) int { return cmp.Compare(a.key, b.key) })
		return
	}
	const bits = 11
	src, dst := es, make([]entry, len(es))
	for shift := uint(12); shift < 64; shift += bits {
		var pos [1 << bits]int
		for _, e := range src {
			pos[(e.key>>shift)&(1<<bits-1)]++
		}
		if pos[(src[0].key>>shift)&(1<<bits-1)] == len(src) {
			continue
		}
		sum := 0
		for d, c := range pos {
			pos[d], sum = sum, sum+c
		}
		for _, e := range src {
			d := (e.key >> shift) & (1<<bits - 1)
			dst[pos[d]] = e
			pos[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &es[0] {
		copy(es, src)
	}
}

// refinePiecewise refines a continuous prior: U_u is the interval around t
// of prior mass end[0] (p_u when delta = 0), found by inverting the ball
// mass C(r), which is piecewise linear in r.
func (m *Mechanism) refinePiecewise(p *Piecewise, t float64) *Piecewise {
	if math.IsNaN(t) || math.IsInf(t, 0) {
		return p // every point is infinitely far: nothing to refine
	}
	type event struct{ r, slope float64 }
	var evs []event
	var total kahan
	for _, s := range p.segs {
		if s.mass == 0 {
			continue
		}
		total.add(s.mass)
		d := s.mass / (s.hi - s.lo)
		switch {
		case t <= s.lo:
			evs = append(evs, event{s.lo - t, d}, event{s.hi - t, -d})
		case t >= s.hi:
			evs = append(evs, event{t - s.hi, d}, event{t - s.lo, -d})
		default:
			evs = append(evs, event{0, 2 * d}, event{t - s.lo, -d}, event{s.hi - t, -d})
		}
	}
	sort.Slice(evs, func(a, b int) bool { return evs[a].r < evs[b].r })
	tot := total.sum()
	// radius returns r with C(r) = c*tot: the ball {|x - t| < r} has prior
	// mass c.
	radius := func(c float64) float64 {
		if c <= 0 {
			return 0
		}
		if c >= 1 {
			return math.Inf(1)
		}
		target := c * tot
		var mass kahan
		r, slope := 0.0, 0.0
		for _, e := range evs {
			if slope > 0 {
				if next := mass.sum() + slope*(e.r-r); next >= target {
					return r + (target-mass.sum())/slope
				}
				mass.add(slope * (e.r - r))
			}
			r, slope = e.r, slope+e.slope
		}
		return math.Inf(1)
	}
	r1, r2 := radius(m.env.end[0]), radius(m.env.end[1])
	segs := make([]segment, 0, len(p.segs)+4)
	var out kahan
	for _, s := range p.segs {
		if s.mass == 0 {
			segs = append(segs, s)
			continue
		}
		var buf [6]float64
		cuts := append(buf[:0], s.lo)
		for _, c := range [4]float64{t - r2, t - r1, t + r1, t + r2} {
			if c > cuts[len(cuts)-1] && c < s.hi {
				cuts = append(cuts, c)
			}
		}
		cuts = append(cuts, s.hi)
		for k := 1; k < len(cuts); k++ {
			a, b := cuts[k-1], cuts[k]
			dm := math.Abs(a + (b-a)/2 - t)
			slope := m.env.slope[2]
			if dm < r1 {
				slope = m.env.slope[0]
			} else if dm < r2 {
				slope = m.env.slope[1]
			}
			mass := slope * s.mass * ((b - a) / (s.hi - s.lo))
			segs = append(segs, segment{a, b, mass})
			out.add(mass)
		}
	}
	q := &Piecewise{comp: p.comp, segs: segs, grid: p.grid, support: p.support}
	if m.env.atom > 0 {
		q.atomAt, q.atomMass = p.nearestSupport(t), m.env.atom*tot
		out.add(q.atomMass)
	}
	sum := out.sum()
	for k := range q.segs {
		q.segs[k].mass /= sum
	}
	q.atomMass /= sum
	return q
}
