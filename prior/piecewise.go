package prior

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"

	"github.com/knowdp/knowdp/noise"
)

// Piece is an interval [Lo, Hi] on which a density is constant.
type Piece struct {
	Lo, Hi, Density float64
}

// MaxPieces bounds the number of pieces of a piecewise density.
const MaxPieces = 1 << 20

// GridBits sets the resolution of continuous responses: the grid step is
// 2^-GridBits times the width of the prior's support, rounded down to a
// power of two (see Piecewise.Grid).
const GridBits = 40

// Piecewise is a continuous distribution on the real line with a
// piecewise-constant density: a prior, or the refined distribution the
// mechanism samples from, which may also carry one atom (a point with
// positive mass) for the (eps, delta) variants. Its one component is
// numeric. A Piecewise is immutable and safe for concurrent use.
//
// Sampling is exact on a grid: the real line is cut into cells
// [j*Grid, (j+1)*Grid) of a power-of-two width fixed by the prior alone, a
// cell is drawn with probability exactly equal to the distribution's mass in
// it (a piece with noise.Categorical, then a cell of that piece in proportion
// to its overlap, with Rand.Uint64N for the interior cells, where the density
// is constant), and the response is the cell's centre moved to the nearest
// point of the prior's support. Rounding a continuous draw to its cell is
// post-processing, so the responses keep the mechanism's guarantee; and
// since every response is a fixed function of its cell, the float64
// arithmetic of lo + (hi-lo)*u cannot leak the true value.
type Piecewise struct {
	comp     Component
	segs     []segment // sorted and disjoint; zero-mass pieces kept for display
	atomAt   float64
	atomMass float64
	grid     float64
	support  []segment // closure of the prior's positive-density pieces, merged; mass unused

	once  sync.Once
	cat   *noise.Categorical // over segs, then the atom
	cells []cellSampler
}

type segment struct{ lo, hi, mass float64 }

// NewPiecewise returns the density that is pieces[i].Density on
// [pieces[i].Lo, pieces[i].Hi]. Pieces must have finite ends with Lo < Hi,
// must not overlap (they may touch), and their densities must be finite and
// non-negative with total mass one within SumTolerance (it is then
// normalised). Gaps between pieces have density zero.
func NewPiecewise(name string, pieces []Piece) (*Piecewise, error) {
	switch {
	case len(pieces) == 0:
		return nil, errors.New("prior: a piecewise density needs at least one piece")
	case len(pieces) > MaxPieces:
		return nil, fmt.Errorf("prior: %d pieces; at most %d are supported", len(pieces), MaxPieces)
	}
	ps := slices.Clone(pieces)
	for i, p := range ps {
		switch {
		case math.IsNaN(p.Lo) || math.IsInf(p.Lo, 0) || math.IsNaN(p.Hi) || math.IsInf(p.Hi, 0):
			return nil, fmt.Errorf("prior: piece %d: ends [%v, %v] must be finite", i, p.Lo, p.Hi)
		case !(p.Lo < p.Hi):
			return nil, fmt.Errorf("prior: piece %d: lo %v must be below hi %v", i, p.Lo, p.Hi)
		case math.IsInf(p.Hi-p.Lo, 0):
			return nil, fmt.Errorf("prior: piece %d: [%v, %v] is too wide for float64", i, p.Lo, p.Hi)
		case math.IsNaN(p.Density) || math.IsInf(p.Density, 0) || p.Density < 0:
			return nil, fmt.Errorf("prior: piece %d: density %v must be finite and non-negative", i, p.Density)
		}
	}
	order := make([]int, len(ps))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return ps[order[a]].Lo < ps[order[b]].Lo })
	segs := make([]segment, len(ps))
	masses := make([]float64, len(ps))
	for k, i := range order {
		p := ps[i]
		if k > 0 && ps[order[k-1]].Hi > p.Lo {
			return nil, fmt.Errorf("prior: pieces %d [%v, %v] and %d [%v, %v] overlap", order[k-1], ps[order[k-1]].Lo, ps[order[k-1]].Hi, i, p.Lo, p.Hi)
		}
		m := p.Density * (p.Hi - p.Lo)
		if math.IsInf(m, 0) {
			return nil, fmt.Errorf("prior: piece %d: mass %v*%v overflows", i, p.Density, p.Hi-p.Lo)
		}
		segs[k] = segment{p.Lo, p.Hi, m}
		masses[k] = m
	}
	total, err := checkMasses(masses, "piece masses")
	if err != nil {
		return nil, err
	}
	for k := range segs {
		segs[k].mass /= total
	}
	pw := &Piecewise{comp: Component{Name: name, Level: Numeric}, segs: segs}
	for _, s := range segs {
		if s.mass == 0 {
			continue
		}
		if n := len(pw.support); n > 0 && pw.support[n-1].hi >= s.lo {
			pw.support[n-1].hi = s.hi
		} else {
			pw.support = append(pw.support, segment{s.lo, s.hi, 0})
		}
	}
	lo, hi := pw.support[0].lo, pw.support[len(pw.support)-1].hi
	if math.IsInf(hi-lo, 0) {
		return nil, fmt.Errorf("prior: the support [%v, %v] is too wide for float64", lo, hi)
	}
	pw.grid = gridFor(lo, hi)
	return pw, nil
}

// Uniform returns the uniform density on [lo, hi].
func Uniform(name string, lo, hi float64) (*Piecewise, error) {
	return NewPiecewise(name, []Piece{{Lo: lo, Hi: hi, Density: 1 / (hi - lo)}})
}

// gridFor returns the power-of-two grid step for a support [lo, hi]:
// 2^-GridBits of its width rounded down to a power of two, but no finer than
// 2^-52 of its largest magnitude, so that every cell index fits in an int64
// and every cell end is exact in float64.
func gridFor(lo, hi float64) float64 {
	_, ew := math.Frexp(hi - lo) // width = f 2^ew, f in [1/2, 1)
	_, em := math.Frexp(max(math.Abs(lo), math.Abs(hi)))
	return math.Ldexp(1, max(ew-1-GridBits, em-1-52, -1074))
}

// Components returns the one numeric component.
func (p *Piecewise) Components() []Component { return []Component{p.comp} }

// Pieces returns the pieces of the density, sorted, with their densities.
func (p *Piecewise) Pieces() []Piece {
	out := make([]Piece, len(p.segs))
	for i, s := range p.segs {
		out[i] = Piece{Lo: s.lo, Hi: s.hi, Density: s.mass / (s.hi - s.lo)}
	}
	return out
}

// Atom returns the location and mass of the distribution's atom; the mass
// is zero if it has none (priors and pure-eps refinements have none).
func (p *Piecewise) Atom() (at, mass float64) { return p.atomAt, p.atomMass }

// Grid returns the width of the cells responses are drawn from (see
// Piecewise). It depends only on the prior.
func (p *Piecewise) Grid() float64 { return p.grid }

// Mass returns the probability of the interval [a, b].
func (p *Piecewise) Mass(a, b float64) float64 {
	var k kahan
	for _, s := range p.segs {
		lo, hi := max(a, s.lo), min(b, s.hi)
		if lo < hi {
			k.add(s.mass * ((hi - lo) / (s.hi - s.lo)))
		}
	}
	if p.atomMass > 0 && a <= p.atomAt && p.atomAt <= b {
		k.add(p.atomMass)
	}
	return k.sum()
}

// Mean returns the expectation.
func (p *Piecewise) Mean() float64 {
	var k kahan
	for _, s := range p.segs {
		k.add(s.mass * (s.lo + (s.hi-s.lo)/2))
	}
	k.add(p.atomMass * p.atomAt)
	return k.sum()
}

// Variance returns the variance, exactly for the density (not the grid).
func (p *Piecewise) Variance() float64 {
	mu := p.Mean()
	var k kahan
	for _, s := range p.segs {
		a, b := s.lo-mu, s.hi-mu
		k.add(s.mass * (a*a + a*b + b*b) / 3)
	}
	d := p.atomAt - mu
	k.add(p.atomMass * d * d)
	return k.sum()
}

// Format formats a point.
func (p *Piecewise) Format(x Point) string { return FormatPoint(p.Components(), x) }

func (p *Piecewise) isPrior() {}

// cellSampler draws a grid cell of one piece in proportion to its overlap
// with the piece.
type cellSampler struct {
	first, last int64              // cells overlapping the piece
	parts       *noise.Categorical // first cell, interior cells, last cell
}

func (p *Piecewise) sampler() {
	p.once.Do(func() {
		w := make([]float64, len(p.segs)+1)
		p.cells = make([]cellSampler, len(p.segs))
		for i, s := range p.segs {
			w[i] = s.mass
			first := int64(math.Floor(s.lo / p.grid))
			last := int64(math.Ceil(s.hi/p.grid)) - 1
			cs := cellSampler{first: first, last: max(first, last)}
			if cs.last > cs.first {
				left := float64(first+1)*p.grid - s.lo
				right := s.hi - float64(cs.last)*p.grid
				interior := float64(cs.last-cs.first-1) * p.grid
				c, err := noise.NewCategorical([]float64{left, interior, right})
				if err != nil {
					panic("prior: internal error: " + err.Error())
				}
				cs.parts = c
			}
			p.cells[i] = cs
		}
		w[len(p.segs)] = p.atomMass
		c, err := noise.NewCategorical(w)
		if err != nil {
			panic("prior: internal error: " + err.Error())
		}
		p.cat = c
	})
}

// SampleCell draws the index j of a grid cell [j*Grid, (j+1)*Grid) with
// probability exactly the distribution's mass in it (as float64 weights).
func (p *Piecewise) SampleCell(r *noise.Rand) int64 {
	p.sampler()
	i := p.cat.Sample(r)
	if i == len(p.segs) {
		return int64(math.Floor(p.atomAt / p.grid))
	}
	cs := p.cells[i]
	if cs.parts == nil {
		return cs.first
	}
	switch cs.parts.Sample(r) {
	case 0:
		return cs.first
	case 2:
		return cs.last
	}
	return cs.first + 1 + int64(r.Uint64N(uint64(cs.last-cs.first-1)))
}

// CellValue returns the response for grid cell j: the cell's centre, moved
// to the nearest point of the prior's support.
func (p *Piecewise) CellValue(j int64) float64 {
	return p.nearestSupport((float64(j) + 0.5) * p.grid)
}

// Sample draws a response.
func (p *Piecewise) Sample(r *noise.Rand) Point { return Point{p.CellValue(p.SampleCell(r))} }

// nearestSupport returns the point of the support's closure nearest to x
// (the lower one on a tie); x itself if it is in the support.
func (p *Piecewise) nearestSupport(x float64) float64 {
	s := p.support
	// First interval ending at or after x.
	k := sort.Search(len(s), func(i int) bool { return s[i].hi >= x })
	if k == len(s) {
		return s[len(s)-1].hi
	}
	if x >= s[k].lo {
		return x
	}
	if k == 0 || x-s[k-1].hi > s[k].lo-x {
		return s[k].lo
	}
	return s[k-1].hi
}
