package prior

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"slices"
	"sync"

	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
)

// LaplaceSession is Protocol 1 of the paper: the interactive Laplace
// mechanism of Dwork et al. over a histogram of counts. It answers linear
// queries f_i(x) = <q_i, x> with noise of scale lambda while the
// sensitivity of all the queries answered so far, Delta(f_1, ..., f_i), over
// lambda stays within eps. Adding or removing one individual changes one
// cell of the histogram by one, so Delta is the largest column L1 norm of
// the stacked query matrix: queries over disjoint cells compose in parallel
// by construction, and a query that would push the loss past eps is refused
// without spending anything (later, cheaper queries may still be answered;
// the paper's loop stops at the first refusal, but the refusal depends only
// on the public queries, so continuing is safe).
//
// The noise is noise.Laplace's grid mechanism: coefficients are rounded to
// its grid (2^-20 of min(lambda, 1) or finer, a public change to the
// query), the true answer is computed exactly in grid units, and the loss
// of a column is exactly its L1 norm over lambda. A LaplaceSession is safe
// for concurrent use.
type LaplaceSession struct {
	mu       sync.Mutex
	hist     []float64
	lap      noise.Laplace
	t        float64 // lambda in grid units
	limit    int64   // eps in privacy.EpsilonStep units
	col      []uint64
	maxCol   uint64
	steps    int64
	answered int
}

// Bounds of the exact arithmetic in grid units: coefficients up to 2^40
// grid steps, counts up to 2^53, answers clamped to +-2^51 steps (far beyond
// any realistic count; clamping is 1-Lipschitz, so it never raises the
// sensitivity), column norms up to 2^62 (a loss beyond MaxEpsilon long
// before).
const (
	maxCoefUnits  = 1 << 40
	maxCount      = 1 << 53
	maxAnswerUnit = 1 << 51
	maxColUnits   = 1 << 62
)

// NewLaplaceSession returns Protocol 1 over hist, a histogram of
// non-negative integer counts (the data, held by the session), with total
// budget eps and noise scale lambda: for fixed eps, the larger lambda, the
// more queries are answered.
func NewLaplaceSession(hist []float64, eps privacy.Epsilon, lambda float64) (*LaplaceSession, error) {
	if len(hist) == 0 {
		return nil, errors.New("prior: Protocol 1 needs a histogram with at least one cell")
	}
	for i, h := range hist {
		if !(h >= 0 && h <= maxCount && h == math.Trunc(h)) {
			return nil, fmt.Errorf("prior: histogram cell %d = %v; counts must be integers in [0, 2^53]", i, h)
		}
	}
	if !(eps.Float64() > 0) {
		return nil, fmt.Errorf("prior: epsilon must be > 0 (make it with privacy.NewEpsilon), got %v", eps.Float64())
	}
	lap, err := noise.NewLaplaceScale(lambda, 1)
	if err != nil {
		return nil, fmt.Errorf("prior: lambda: %w", err)
	}
	limit, _ := privacy.Pure(eps).Steps()
	return &LaplaceSession{
		hist:  slices.Clone(hist),
		lap:   lap,
		t:     lap.Dist().Scale(),
		limit: limit,
		col:   make([]uint64, len(hist)),
	}, nil
}

// Answer returns <q, hist> plus Laplace(lambda) noise, or, when answering
// would make the loss of all answered queries exceed eps, an error wrapping
// a *privacy.OverspendError (errors.Is(err, privacy.ErrOverspend)), having
// spent nothing.
func (s *LaplaceSession) Answer(r *noise.Rand, q []float64) (float64, error) {
	if len(q) != len(s.hist) {
		return 0, fmt.Errorf("prior: the query has %d coefficients; the histogram has %d cells", len(q), len(s.hist))
	}
	grid := s.lap.Grid()
	units := make([]int64, len(q))
	for j, x := range q {
		u := math.Round(x / grid) // x/grid is exact: grid is a power of two
		if !(math.Abs(u) <= maxCoefUnits) {
			return 0, fmt.Errorf("prior: coefficient %d = %v must be finite and at most %v in magnitude", j, x, maxCoefUnits*grid)
		}
		units[j] = int64(u)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	newMax := s.maxCol
	for j, u := range units {
		c := s.col[j] + absUnits(u)
		if c > maxColUnits {
			newMax = maxColUnits + 1
			break
		}
		newMax = max(newMax, c)
	}
	steps := s.lossSteps(newMax)
	if steps > s.limit {
		return 0, fmt.Errorf("prior: Protocol 1 refuses the query: %w", overspend(steps-s.steps, s.limit-s.steps, steps-s.limit))
	}
	for j, u := range units {
		s.col[j] += absUnits(u)
	}
	s.maxCol, s.steps = newMax, steps
	s.answered++
	k := s.exactAnswer(units) + s.lap.Dist().Sample(r)
	return float64(k) * grid, nil
}

func absUnits(u int64) uint64 {
	if u < 0 {
		return uint64(-u)
	}
	return uint64(u)
}

// lossSteps returns the loss of a column norm (in grid units), col/t,
// rounded up to privacy.EpsilonStep exactly.
func (s *LaplaceSession) lossSteps(col uint64) int64 {
	if col > maxColUnits {
		return math.MaxInt64
	}
	// col / t / EpsilonStep as an exact rational, then its ceiling.
	q := new(big.Rat).SetFrac(new(big.Int).SetUint64(col), big.NewInt(1))
	q.Quo(q, new(big.Rat).SetFloat64(s.t*privacy.EpsilonStep))
	n, rem := new(big.Int).QuoRem(q.Num(), q.Denom(), new(big.Int))
	if rem.Sign() > 0 {
		n.Add(n, big.NewInt(1))
	}
	if !n.IsInt64() {
		return math.MaxInt64
	}
	return n.Int64()
}

// exactAnswer returns <units, hist> in grid units, clamped to
// +-maxAnswerUnit, with 128-bit integer arithmetic.
func (s *LaplaceSession) exactAnswer(units []int64) int64 {
	var posHi, posLo, negHi, negLo uint64
	for j, u := range units {
		if u == 0 || s.hist[j] == 0 {
			continue
		}
		hi, lo := bits.Mul64(absUnits(u), uint64(s.hist[j]))
		var c uint64
		if u > 0 {
			posLo, c = bits.Add64(posLo, lo, 0)
			posHi += hi + c
		} else {
			negLo, c = bits.Add64(negLo, lo, 0)
			negHi += hi + c
		}
	}
	neg := negHi > posHi || (negHi == posHi && negLo > posLo)
	if neg {
		posHi, posLo, negHi, negLo = negHi, negLo, posHi, posLo
	}
	lo, b := bits.Sub64(posLo, negLo, 0)
	hi, _ := bits.Sub64(posHi, negHi, b)
	v := int64(maxAnswerUnit)
	if hi == 0 && lo < maxAnswerUnit {
		v = int64(lo)
	}
	if neg {
		return -v
	}
	return v
}

// Spent returns the loss of the queries answered so far: the largest
// column norm over lambda, rounded up to privacy.EpsilonStep.
func (s *LaplaceSession) Spent() privacy.Budget {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, _ := privacy.FromSteps(s.steps, 0)
	return b
}

// Sensitivity returns Delta(f_1, ..., f_i) of the answered queries (with
// coefficients rounded to the grid): the largest column L1 norm.
func (s *LaplaceSession) Sensitivity() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return float64(s.maxCol) * s.lap.Grid()
}

// Answered returns the number of queries answered.
func (s *LaplaceSession) Answered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.answered
}

// Lambda returns the noise scale.
func (s *LaplaceSession) Lambda() float64 { return s.lap.Scale() }

func overspend(requested, remaining, excess int64) *privacy.OverspendError {
	req, _ := privacy.FromSteps(max(requested, 0), 0)
	rem, _ := privacy.FromSteps(max(remaining, 0), 0)
	exc, _ := privacy.FromSteps(max(excess, 0), 0)
	return &privacy.OverspendError{Requested: req, Remaining: rem, Excess: exc}
}

// RefinementSession is Protocol 2 of the paper: the interactive
// knowledge-refinement mechanism. Each query brings its own prior,
// distance and (eps_i, delta_i) (a *Mechanism); it is answered while the
// total loss stays within the session's budget and refused otherwise,
// spending nothing. No sensitivity is needed.
//
// The loss is the sum of the queries' budgets (sequential composition),
// except for queries declared over disjoint parts of the individuals
// (Proposition 3): a query's scope names the parts of a public partition
// of the individuals it depends on (individual identifiers, or groups that
// no individual can move between), and the loss is the sum over the
// queries over everyone plus the largest sum over any one part. A
// RefinementSession is safe for concurrent use.
type RefinementSession struct {
	mu       sync.Mutex
	total    privacy.Budget
	all      privacy.Budget
	parts    map[string]privacy.Budget
	maxPart  privacy.Budget
	answered int
}

// NewRefinementSession returns Protocol 2 with the given total budget.
func NewRefinementSession(total privacy.Budget) (*RefinementSession, error) {
	if total.Epsilon() <= 0 {
		return nil, fmt.Errorf("prior: Protocol 2 needs a budget with epsilon > 0, got %v", total)
	}
	return &RefinementSession{total: total, parts: map[string]privacy.Budget{}}, nil
}

// Answer refines m's prior around truth and returns a sample, charging
// m.Budget() to the parts in scope (all individuals when scope is empty).
// If the charge does not fit, it returns an error wrapping a
// *privacy.OverspendError and spends nothing. Whether a query is answered
// depends only on the public budgets and scopes, never on truth.
func (s *RefinementSession) Answer(r *noise.Rand, m *Mechanism, truth Point, scope ...string) (Point, error) {
	if m == nil {
		return nil, errors.New("prior: Protocol 2 needs a mechanism")
	}
	for _, p := range scope {
		if p == "" {
			return nil, errors.New("prior: a scope part must have a name")
		}
	}
	scope = slices.Compact(slices.Sorted(slices.Values(scope)))
	q, err := m.Refine(truth)
	if err != nil {
		return nil, err
	}
	b := m.Budget()
	s.mu.Lock()
	defer s.mu.Unlock()
	all, maxPart := s.all, s.maxPart
	if len(scope) == 0 {
		all = privacy.Sequential(all, b)
	} else {
		for _, p := range scope {
			maxPart = privacy.Parallel(maxPart, privacy.Sequential(s.parts[p], b))
		}
	}
	next := privacy.Sequential(all, maxPart)
	if !s.total.Covers(next) {
		spent := privacy.Sequential(s.all, s.maxPart)
		rem, _ := s.total.Sub(spent)
		ne, nd := next.Steps()
		te, td := s.total.Steps()
		exc, _ := privacy.FromSteps(max(ne-te, 0), max(nd-td, 0))
		return nil, fmt.Errorf("prior: Protocol 2 refuses the query: %w", &privacy.OverspendError{Requested: b, Remaining: rem, Excess: exc})
	}
	s.all, s.maxPart = all, maxPart
	for _, p := range scope {
		s.parts[p] = privacy.Sequential(s.parts[p], b)
	}
	s.answered++
	return q.Sample(r), nil
}

// Spent returns the loss of the queries answered so far.
func (s *RefinementSession) Spent() privacy.Budget {
	s.mu.Lock()
	defer s.mu.Unlock()
	return privacy.Sequential(s.all, s.maxPart)
}

// Answered returns the number of queries answered.
func (s *RefinementSession) Answered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.answered
}
