package integer

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate"
	"github.com/knowdp/knowdp/internal/tensor"
	"github.com/knowdp/knowdp/noise"
)

// Margin is an integer constraint on a table being rounded: its marginal on
// Dims must equal Targets. Dims is a cuboid of the schema within the cuboid
// being rounded; Targets are non-negative whole numbers, row-major over
// Dims's dimensions. The margins of an invariant E on a released cuboid C
// are E's counts projected onto E ∩ C.
type Margin struct {
	Dims    domain.Cuboid
	Targets []float64
}

// InvariantMargins returns the margins that exact cuboids put on cuboid c:
// each invariant's counts summed onto the dimensions it shares with c, in
// the order given.
func InvariantMargins(s *domain.Schema, c domain.Cuboid, inv []estimate.Invariant) ([]Margin, error) {
	base := domain.Base(s.NumDims())
	if c&^base != 0 {
		return nil, fmt.Errorf("cuboid %#x has dimensions beyond the schema's %d", uint64(c), s.NumDims())
	}
	sizes := s.Sizes()
	out := make([]Margin, len(inv))
	for i, v := range inv {
		if v.Cuboid&^base != 0 {
			return nil, fmt.Errorf("exact cuboid %#x has dimensions beyond the schema's %d", uint64(v.Cuboid), s.NumDims())
		}
		if want := s.CuboidSize(v.Cuboid); len(v.Counts) != want {
			return nil, fmt.Errorf("exact cuboid %s has %d cells, got %d counts", s.Format(v.Cuboid), want, len(v.Counts))
		}
		k := v.Cuboid & c
		out[i] = Margin{Dims: k, Targets: make([]float64, s.CuboidSize(k))}
		tensor.Project(tensor.SubSizes(sizes, v.Cuboid), tensor.Reindex(k, v.Cuboid), v.Counts, out[i].Targets)
	}
	return out, nil
}

// IntegerResult is a non-negative integer table and how well it keeps its
// margins.
type IntegerResult struct {
	// Counts are whole numbers >= 0, row-major over the rounded cuboid.
	Counts []float64
	// Deviations holds, for each margin in the order given, the largest
	// absolute difference between a cell of the table's marginal and its
	// target; MaxDeviation is the largest of them and Exact reports that
	// it is 0.
	Deviations   []float64
	MaxDeviation float64
	Exact        bool
	// Method says, in words, how the table was made, for a release's
	// sidecar.
	Method string
	// NonNegativeResidual is the optimality residual that the non-negative
	// least-squares step reached (see ConsistentNonNegative).
	NonNegativeResidual float64
}

// maxExactInt is the largest float64 below which every integer is exact.
const maxExactInt = 1 << 53

// maxIntegerCells keeps the network's node and edge numbers within int32.
const maxIntegerCells = 1 << 30

// maxLocalSweeps and maxLocalTries bound the local search on margins
// beyond the first two: sweeps over the cells, and moves evaluated in all
// (each costs a few operations per margin).
const (
	maxLocalSweeps = 50
	maxLocalTries  = 1 << 27
)

// RoundInteger turns a real estimate x of cuboid c (row-major over c's
// dimensions; it may have negative cells) into non-negative integer counts
// whose margins equal the given targets exactly wherever the structure of
// the margins allows it. It is post-processing: it reads x, the public
// targets and r, nothing else.
//
// First it computes the least-squares point of {y >= 0 : every margin
// holds} nearest x (Dykstra's iteration, as in ConsistentNonNegative;
// whatever it reaches is used, it never fails on the values), with any
// cell left below 0 by the iteration's tolerance set to 0. Call that point
// z; x itself is not modified.
//
// Margins implied by others (a margin on a subset of another's dimensions)
// are dropped; the rest, the maximal margins, form an antichain.
//
//   - No margin: each cell is rounded independently to floor(z) + 1 with
//     probability frac(z), else floor(z).
//   - One or two maximal margins A and B (one margin is paired with the
//     grand total): the cells are the edges of the bipartite network of the
//     cells of A and of B, and a table is a flow on it. The incidence matrix
//     is totally unimodular, so the polytope {floor(z) <= y <= ceil(z), the
//     margins of y are the targets} has integer vertices; z is in it, so it
//     holds an integer table. Dependent rounding on the network (Gandhi et
//     al. 2006, in exact fixed-point arithmetic) picks one at random with
//     E[y] = z, cell by cell: Cox's (1987) unbiased controlled rounding.
//     The margins of z hold only to floating-point accuracy; where that
//     leaves a margin off by one after rounding, a min-cost flow moves the
//     fewest units (sum |y' - y| least) that restore every margin. That
//     repair always succeeds: for non-negative integer targets that agree
//     on A ∩ B, each slice of the network with fixed coordinates on A ∩ B
//     is a transportation problem whose supplies (targets of A) and demands
//     (targets of B) have the same total, and every supply node is joined
//     to every demand node, so the north-west corner rule gives a
//     non-negative integer table; margins on subsets of A or B then hold
//     too, because they agree with A's or B's targets.
//   - Three or more maximal margins: an integer table may not exist. The
//     two with the most cells are kept exactly as above; then a greedy
//     local search applies moves that leave those two unchanged (+1, -1 at
//     two cells differing in one dimension outside the first margin, and
//     -1, +1 at the two cells obtained by also changing one dimension
//     outside the second; or just +1, -1 at two cells differing in one
//     dimension outside both), keeping every cell >= 0, as long as a move
//     lowers the total absolute deviation of the other margins (at most 50
//     sweeps over the cells and 2^27 moves evaluated). The deviations left
//     are reported, never hidden, and the rounding is then no longer
//     exactly unbiased.
//
// Errors are only for invalid input: sizes, dimensions outside c, targets
// that are not non-negative whole numbers, and margins that disagree with
// each other on their common dimensions (naming both and the cell).
func RoundInteger(ctx context.Context, s *domain.Schema, c domain.Cuboid, x []float64, margins []Margin, r *noise.Rand) (IntegerResult, error) {
	if err := checkIntegerInput(s, c, x, margins); err != nil {
		return IntegerResult{}, fmt.Errorf("integer rounding: %w", err)
	}
	inv := make([]estimate.Invariant, len(margins))
	for i, m := range margins {
		inv[i] = estimate.Invariant{Cuboid: m.Dims, Counts: m.Targets}
	}
	nn, err := estimate.SolveNonNegative(ctx, s, c, x, inv, estimate.NonNegative{})
	if err != nil {
		return IntegerResult{}, fmt.Errorf("integer rounding: %w", err)
	}
	z := nn.Y
	for i, v := range z {
		z[i] = max(v, 0)
	}
	res := IntegerResult{NonNegativeResidual: nn.Residual}
	sizes := s.SubSizesOf(c)
	maximal := maximalMargins(s, margins)
	var y []int64
	if len(maximal) == 0 {
		y = roundIndependent(z, r)
		res.Method = "least-squares non-negative estimate, then each cell rounded independently up with probability its fractional part (unbiased; no margins to keep)"
	} else {
		a := maximal[0]
		b := Margin{Targets: []float64{targetTotal(a.Targets)}} // the grand total
		if len(maximal) > 1 {
			b = maximal[1]
		}
		g := &network{
			nA: s.CuboidSize(a.Dims), nB: s.CuboidSize(b.Dims),
			a: cellGroups(sizes, tensor.Reindex(a.Dims, c)),
			b: cellGroups(sizes, tensor.Reindex(b.Dims, c)),
		}
		tA, tB := wholeTargets(a.Targets), wholeTargets(b.Targets)
		var repaired int64
		y, repaired, err = roundOnNetwork(ctx, g, z, tA, tB, r)
		if err != nil {
			return IntegerResult{}, fmt.Errorf("integer rounding: %w", err)
		}
		res.Method = fmt.Sprintf("least-squares non-negative estimate (Dykstra), then unbiased controlled rounding (dependent rounding on the transportation network of margins %s and %s, each cell to its floor or ceiling)",
			s.Format(a.Dims), s.Format(b.Dims))
		if repaired > 0 {
			res.Method += fmt.Sprintf("; %d units moved by a min-cost-flow repair where floating-point error left a margin off by one", repaired)
		}
		if len(maximal) > 2 {
			rest := maximal[2:]
			moves, err := localSearch(ctx, s, c, y, tensor.Reindex(a.Dims, c), tensor.Reindex(b.Dims, c), rest)
			if err != nil {
				return IntegerResult{}, fmt.Errorf("integer rounding: %w", err)
			}
			names := make([]string, len(rest))
			for i, m := range rest {
				names[i] = s.Format(m.Dims)
			}
			res.Method += fmt.Sprintf("; margins %s cross the first two (no exact integer table need exist): %d local-search moves that keep %s and %s exact lowered their total absolute deviation, at the price of exact unbiasedness",
				strings.Join(names, ", "), moves, s.Format(a.Dims), s.Format(b.Dims))
		}
	}
	res.Counts = make([]float64, len(y))
	for i, v := range y {
		res.Counts[i] = float64(v)
	}
	res.Deviations = make([]float64, len(margins))
	for i, m := range margins {
		got := make([]float64, len(m.Targets))
		tensor.Project(sizes, tensor.Reindex(m.Dims, c), res.Counts, got)
		for k := range got {
			res.Deviations[i] = max(res.Deviations[i], math.Abs(got[k]-m.Targets[k]))
		}
		res.MaxDeviation = max(res.MaxDeviation, res.Deviations[i])
	}
	res.Exact = res.MaxDeviation == 0
	return res, nil
}

// checkIntegerInput validates everything RoundInteger's guarantees rest on.
func checkIntegerInput(s *domain.Schema, c domain.Cuboid, x []float64, margins []Margin) error {
	if c&^domain.Base(s.NumDims()) != 0 {
		return fmt.Errorf("cuboid %#x has dimensions beyond the schema's %d", uint64(c), s.NumDims())
	}
	if want := s.CuboidSize(c); len(x) != want {
		return fmt.Errorf("cuboid %s has %d cells, got %d values", s.Format(c), want, len(x))
	}
	if len(x) > maxIntegerCells {
		return fmt.Errorf("cuboid %s has %d cells; integer rounding handles at most %d", s.Format(c), len(x), maxIntegerCells)
	}
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("cuboid %s, cell %s: value %v is not finite", s.Format(c), s.CellLabel(c, i), v)
		}
	}
	for i, m := range margins {
		if m.Dims&^c != 0 {
			return fmt.Errorf("margin %d has dimensions outside the cuboid %s being rounded", i+1, s.Format(c))
		}
		if want := s.CuboidSize(m.Dims); len(m.Targets) != want {
			return fmt.Errorf("margin %d %s has %d cells, got %d targets", i+1, s.Format(m.Dims), want, len(m.Targets))
		}
		for k, t := range m.Targets {
			if !(t >= 0 && t <= maxExactInt && t == math.Trunc(t)) {
				return fmt.Errorf("margin %d %s, %s: target %v is not a non-negative whole number (at most 2^53)", i+1, s.Format(m.Dims), marginCell(s, m.Dims, k), t)
			}
		}
	}
	// Every two margins must have the same counts on their common
	// dimensions. The sums are of whole numbers below 2^53, so exact.
	sizes := s.Sizes()
	for i := range margins {
		for j := i + 1; j < len(margins); j++ {
			a, b := margins[i], margins[j]
			common := a.Dims & b.Dims
			pa := make([]float64, s.CuboidSize(common))
			pb := make([]float64, len(pa))
			tensor.Project(tensor.SubSizes(sizes, a.Dims), tensor.Reindex(common, a.Dims), a.Targets, pa)
			tensor.Project(tensor.SubSizes(sizes, b.Dims), tensor.Reindex(common, b.Dims), b.Targets, pb)
			for k := range pa {
				if pa[k] != pb[k] {
					return fmt.Errorf("%w: margins %d %s and %d %s disagree on %s: %v vs %v",
						estimate.ErrInconsistent, i+1, s.Format(a.Dims), j+1, s.Format(b.Dims), marginCell(s, common, k), pa[k], pb[k])
				}
			}
		}
	}
	return nil
}

func marginCell(s *domain.Schema, c domain.Cuboid, k int) string {
	if c == 0 {
		return "the grand total"
	}
	return "cell " + s.CellLabel(c, k)
}

// maximalMargins returns the margins not implied by another one (whose
// dimensions are not a subset of another's; of equal ones, the first),
// those with the most cells first (ties in the order given).
func maximalMargins(s *domain.Schema, margins []Margin) []Margin {
	var out []Margin
	for i, m := range margins {
		implied := false
		for j, o := range margins {
			if m.Dims.AncestorOf(o.Dims) && (m.Dims != o.Dims || j < i) {
				implied = true
				break
			}
		}
		if !implied {
			out = append(out, m)
		}
	}
	// Insertion sort: stable and the list is short.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && s.CuboidSize(out[j].Dims) > s.CuboidSize(out[j-1].Dims); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func targetTotal(v []float64) float64 {
	var t float64
	for _, x := range v {
		t += x
	}
	return t
}

func wholeTargets(v []float64) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

// splitFixed returns floor(z) and the fractional part in fixed point.
func splitFixed(z float64) (int64, int64) {
	f := math.Floor(z)
	w := int64(math.Round((z - f) * float64(fixedOne)))
	if w == fixedOne {
		return int64(f) + 1, 0
	}
	return int64(f), w
}

// roundIndependent rounds each cell up with probability its fractional
// part (to 2^-32).
func roundIndependent(z []float64, r *noise.Rand) []int64 {
	y := make([]int64, len(z))
	for i, v := range z {
		f, w := splitFixed(v)
		if int64(r.Uint64N(uint64(fixedOne))) < w {
			f++
		}
		y[i] = f
	}
	return y
}

// roundOnNetwork rounds z >= 0 to an integer table with margins tA and tB
// on g: dependent rounding of the fractional parts, then, if floating-point
// error in z's margins left one off, the min-cost repair. It returns the
// table and the number of units the repair moved.
func roundOnNetwork(ctx context.Context, g *network, z []float64, tA, tB []int64, r *noise.Rand) ([]int64, int64, error) {
	y := make([]int64, len(z))
	w := make([]int64, len(z))
	for i, v := range z {
		y[i], w[i] = splitFixed(v)
	}
	if err := dependentRound(ctx, g, w, r); err != nil {
		return nil, 0, err
	}
	for i := range y {
		if w[i] == fixedOne {
			y[i]++
		}
	}
	if marginsHold(g, y, tA, tB) {
		return y, 0, nil
	}
	before := append([]int64(nil), y...)
	p := make([]float64, len(y))
	for i, v := range y {
		p[i] = float64(v)
	}
	if _, err := repairTable(ctx, g, p, y, tA, tB); err != nil {
		return nil, 0, err
	}
	var moved int64
	for i := range y {
		moved += iabs(y[i] - before[i])
	}
	return y, moved, nil
}

func iabs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func marginsHold(g *network, y []int64, tA, tB []int64) bool {
	sa := make([]int64, g.nA)
	sb := make([]int64, g.nB)
	for c, v := range y {
		sa[g.a[c]] += v
		sb[g.b[c]] += v
	}
	for i := range sa {
		if sa[i] != tA[i] {
			return false
		}
	}
	for i := range sb {
		if sb[i] != tB[i] {
			return false
		}
	}
	return true
}

// localSearch lowers the total absolute deviation of the margins rest by
// moves that keep the marginals on a and b (dimensions numbered within c)
// unchanged and every cell >= 0; see RoundInteger. It returns the number
// of moves made.
func localSearch(ctx context.Context, s *domain.Schema, c domain.Cuboid, y []int64, a, b domain.Cuboid, rest []Margin) (int, error) {
	sizes := s.SubSizesOf(c)
	n := len(sizes)
	stride := make([]int, n)
	st := 1
	for i := n - 1; i >= 0; i-- {
		stride[i] = st
		st *= sizes[i]
	}
	groups := make([][]int32, len(rest))
	dev := make([][]int64, len(rest))
	for j, m := range rest {
		groups[j] = cellGroups(sizes, tensor.Reindex(m.Dims, c))
		dev[j] = make([]int64, len(m.Targets))
		for k, t := range m.Targets {
			dev[j][k] = -int64(t)
		}
		for cell, v := range y {
			dev[j][groups[j][cell]] += v
		}
	}
	// delta returns the change in total absolute deviation if the cells
	// in cs change by ch.
	var gs [4]int32
	delta := func(cs []int, ch []int64, apply bool) int64 {
		var d int64
		for j := range rest {
			for i, cell := range cs {
				gs[i] = groups[j][cell]
			}
			distinct := func(i int) bool {
				for k := range i {
					if gs[k] == gs[i] {
						return false
					}
				}
				return true
			}
			for i := range cs {
				if distinct(i) {
					d -= iabs(dev[j][gs[i]])
				}
			}
			for i := range cs {
				dev[j][gs[i]] += ch[i]
			}
			for i := range cs {
				if distinct(i) {
					d += iabs(dev[j][gs[i]])
				}
			}
			if !apply {
				for i := range cs {
					dev[j][gs[i]] -= ch[i]
				}
			}
		}
		return d
	}
	tries := 0
	try := func(cs []int, ch []int64) bool {
		tries++
		if delta(cs, ch, false) >= 0 {
			return false
		}
		delta(cs, ch, true)
		for i, cell := range cs {
			y[cell] += ch[i]
		}
		return true
	}
	coord := make([]int, n)
	cells := [4]int{}
	two := []int64{1, -1}
	four := []int64{1, -1, -1, 1}
	moves := 0
	for range maxLocalSweeps {
		improved := false
		for c1 := range y {
			if c1%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return moves, err
				}
			}
			if tries >= maxLocalTries {
				return moves, nil
			}
			// A move adds 1 at c1: worth trying only where some margin is
			// below its target.
			under := false
			for j := range rest {
				under = under || dev[j][groups[j][c1]] < 0
			}
			if !under {
				continue
			}
			rem := c1
			for i := n - 1; i >= 0; i-- {
				coord[i] = rem % sizes[i]
				rem /= sizes[i]
			}
			for p := range n {
				if a.Has(p) {
					continue
				}
				for v := range sizes[p] {
					if v == coord[p] {
						continue
					}
					c2 := c1 + (v-coord[p])*stride[p]
					if y[c2] == 0 {
						continue
					}
					if !b.Has(p) {
						cells[0], cells[1] = c1, c2
						if try(cells[:2], two) {
							moves++
							improved = true
							continue
						}
					}
					for q := range n {
						if q == p || b.Has(q) {
							continue
						}
						for u := range sizes[q] {
							if u == coord[q] || y[c2] == 0 {
								continue
							}
							c3 := c1 + (u-coord[q])*stride[q]
							if y[c3] == 0 {
								continue
							}
							cells = [4]int{c1, c2, c3, c2 + (u-coord[q])*stride[q]}
							if try(cells[:], four) {
								moves++
								improved = true
							}
						}
					}
				}
			}
		}
		if !improved {
			break
		}
	}
	return moves, nil
}
