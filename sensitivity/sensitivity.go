package sensitivity

// Generic sensitivity of data-cube releases under exact cuboids (paper 3,
// Section 4). With background knowledge Q, neighbours are the worst-case
// induced neighbours of Section 3.2, and S_Q(C) is the largest L1 change of
// cuboid C between two of them; graver.go explains why that is the largest
// ||M_C g||_1 over the Graver basis of the constraint matrix, and computes
// it by brute force. This file gives the closed forms, each pinned in
// sensitivity_test.go to the paper and to the brute force, with the
// corrections the brute force forced:
//
//   - Dimensions of size 1 carry no information and are ignored, exact
//     cuboids are deduplicated and an exact cuboid that is an ancestor of
//     another exact cuboid is dropped (its cells are sums of the other's).
//   - One exact cuboid C (Lemma 4.2(i)): 2, but 0 when C covers every
//     dimension of size > 1 (the table is known). Lemma 4.1(i) and 4.2(i)
//     say 2 there.
//   - Two exact cuboids, neither an ancestor of the other (Lemma 4.2(ii)):
//     2 min(size([C1]-[C2]), size([C2]-[C1])), which is right. Nested
//     cuboids reduce to one cuboid, where "2" fails in the same degenerate
//     case (Lemma 4.1(ii) with |A1| = 1 gives 2; the table is known: 0).
//   - Three or more: the paper's special case, the three one-dimensional
//     cuboids of a 2 x 2 x x table, is 6 for x = 2 and 8 for x = 4 as the
//     paper says, but 8, not 6, for x = 3: the brute force finds the
//     primitive move from {(0,1,2),(0,1,2),(1,0,0),(1,1,1)} to
//     {(0,0,1),(0,1,0),(1,1,2),(1,1,2)} (8 rows; no proper part of it keeps
//     the margins), and enumerating every table of at most 8 rows confirms
//     it from the definition. Other tiny domains (at most 24 cells) are
//     brute-forced; otherwise the error wraps ErrNoClosedForm.
//   - Exact cells (Lemma 4.3): the printed formula is garbled and its
//     natural reading is wrong; CellSensitivity gives the exact value.
//   - Other cuboids than the base (Lemma 4.4): the sensitivity of the base
//     cuboid, exact when the released cuboid has a dimension outside every
//     exact cuboid, a safe upper bound otherwise.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/knowdp/knowdp/domain"
)

// Sensitivity is a generic sensitivity and the rule it comes from, for the
// release's metadata.
type Sensitivity struct {
	// Value is the largest L1 distance between the released cuboids of two
	// worst-case induced neighbours: the Laplace scale is Value/eps.
	Value int
	// Rule names the lemma or method that gave Value.
	Rule string
}

// ErrNoClosedForm is returned (wrapped) when no closed form is known for
// the background knowledge and the domain is too large for brute force.
var ErrNoClosedForm = errors.New("no closed form for the generic sensitivity; pass an explicit sensitivity (--sensitivity)")

// Work limits of the brute force that GenericSensitivity and
// CellSensitivity run by themselves; they are deterministic so that the
// same input always gets the same answer (BruteForceSensitivity, given a
// context, goes further).
const (
	autoBruteCells   = 24
	autoBruteGraver  = 1 << 14
	autoBruteWork    = 1 << 25
	autoBruteMessage = "more than %d base cells, %d Graver elements or %d steps"
)

// GenericSensitivity returns S_Q(release), the generic sensitivity of
// releasing cuboid release (Cuboid(0) is the grand total, Base the base
// cuboid) when the cuboids exact are public exactly: Laplace noise of scale
// Value/eps on every cell of the release makes it eps-differentially
// private with respect to worst-case induced neighbours. The value is 0 when
// the release is computable from an exact cuboid or the table is determined,
// 1 without exact cuboids, and otherwise follows the file comment above.
// Where no closed form is known and brute force would be too costly, the
// error wraps ErrNoClosedForm.
func GenericSensitivity(s *domain.Schema, exact []domain.Cuboid, release domain.Cuboid) (Sensitivity, error) {
	if s == nil {
		return Sensitivity{}, errors.New("generic sensitivity: nil schema")
	}
	if err := CheckCuboid(s, release, "released cuboid"); err != nil {
		return Sensitivity{}, err
	}
	for i, c := range exact {
		if err := CheckCuboid(s, c, fmt.Sprintf("exact cuboid %d", i+1)); err != nil {
			return Sensitivity{}, err
		}
	}
	trivial := TrivialDims(s)
	eff := domain.Base(s.NumDims()) &^ trivial
	q := maximalCuboids(exact, trivial)
	rel := release &^ trivial
	if len(q) == 0 {
		return Sensitivity{1, "no background knowledge: neighbours add or remove one row"}, nil
	}
	for _, c := range q {
		if rel.AncestorOf(c) {
			return Sensitivity{0, fmt.Sprintf("public: %s is computable from exact cuboid %s", s.Format(release), s.Format(c))}, nil
		}
	}
	base, err := baseSensitivity(s, q, eff)
	if err != nil {
		return Sensitivity{}, err
	}
	if base.Value == 0 || rel == eff {
		return base, nil
	}
	var union domain.Cuboid
	for _, c := range q {
		union |= c
	}
	if rel&^union != 0 {
		base.Rule += fmt.Sprintf("; Lemma 4.4: equal for %s, which has a dimension outside every exact cuboid", s.Format(release))
	} else {
		base.Rule += fmt.Sprintf("; Lemma 4.4: upper bound for %s (the base cuboid's sensitivity)", s.Format(release))
	}
	return base, nil
}

// baseSensitivity is S_Q(C_base) for a nonempty antichain q of cuboids
// without trivial dimensions; eff is the base cuboid without them.
func baseSensitivity(s *domain.Schema, q []domain.Cuboid, eff domain.Cuboid) (Sensitivity, error) {
	switch len(q) {
	case 1:
		if eff&^q[0] == 0 {
			return Sensitivity{0, fmt.Sprintf("determined: exact cuboid %s fixes the table", s.Format(q[0]))}, nil
		}
		return Sensitivity{2, fmt.Sprintf("Lemma 4.2(i): one exact cuboid %s", s.Format(q[0]))}, nil
	case 2:
		// Neither is an ancestor of the other and neither has a trivial
		// dimension, so both differences have size >= 2.
		a, b := satCells(s, q[0]&^q[1]), satCells(s, q[1]&^q[0])
		if min(a, b) == satLimit {
			return Sensitivity{}, fmt.Errorf("exact cuboids %s and %s: the generic sensitivity 2*min(size(%s), size(%s)) is above %d",
				s.Format(q[0]), s.Format(q[1]), s.Format(q[0]&^q[1]), s.Format(q[1]&^q[0]), 2*satLimit)
		}
		return Sensitivity{2 * min(a, b), fmt.Sprintf("Lemma 4.2(ii): exact cuboids %s and %s, 2*min(%d, %d)",
			s.Format(q[0]), s.Format(q[1]), a, b)}, nil
	}
	if v, ok := threeMarginals(s, q, eff); ok {
		return Sensitivity{v, fmt.Sprintf("paper Section 4.1 (2 x 2 x 3 corrected from 6 by brute force): three one-dimensional exact cuboids %s, %s, %s",
			s.Format(q[0]), s.Format(q[1]), s.Format(q[2]))}, nil
	}
	names := make([]string, len(q))
	for i, c := range q {
		names[i] = s.Format(c)
	}
	return autoBruteForce(s, q, nil, fmt.Sprintf("exact cuboids %s", strings.Join(names, ", ")))
}

// threeMarginals is the paper's special case: the three one-dimensional
// cuboids of a table whose dimensions have sizes 2, 2 and x (x = 2, 3, 4),
// with the value the brute force gives (the paper has 6 for x = 3).
func threeMarginals(s *domain.Schema, q []domain.Cuboid, eff domain.Cuboid) (int, bool) {
	if len(q) != 3 || eff.Len() != 3 || q[0]|q[1]|q[2] != eff {
		return 0, false
	}
	var sizes []int
	for _, c := range q {
		if c.Len() != 1 {
			return 0, false
		}
		sizes = append(sizes, s.CuboidSize(c))
	}
	slices.Sort(sizes)
	if sizes[0] != 2 || sizes[1] != 2 {
		return 0, false
	}
	switch sizes[2] {
	case 2:
		return 6, true
	case 3, 4:
		return 8, true
	}
	return 0, false
}

// autoBruteForce runs the brute force within the deterministic limits, or
// fails with ErrNoClosedForm.
func autoBruteForce(s *domain.Schema, exact []domain.Cuboid, known []ExactCells, what string) (Sensitivity, error) {
	w, err := autoBrute(s, exact, known, domain.Base(s.NumDims()), what)
	if err != nil {
		return Sensitivity{}, err
	}
	return Sensitivity{w.Value, fmt.Sprintf("brute force: %s, Graver basis of %d elements", what, w.Basis)}, nil
}

// autoBrute is the brute force for release within the deterministic
// limits; beyond them the error wraps ErrNoClosedForm.
func autoBrute(s *domain.Schema, exact []domain.Cuboid, known []ExactCells, release domain.Cuboid, what string) (Witness, error) {
	if s.Cells() < 0 || s.Cells() > autoBruteCells {
		return Witness{}, fmt.Errorf("%s on %d base cells (brute force stops at "+autoBruteMessage+"): %w",
			what, s.Cells(), autoBruteCells, autoBruteGraver, autoBruteWork, ErrNoClosedForm)
	}
	lim := graverLimits{elements: autoBruteGraver, work: autoBruteWork}
	w, err := bruteForce(context.Background(), s, exact, known, release, lim)
	if errors.Is(err, ErrTooLarge) {
		return Witness{}, fmt.Errorf("%s (brute force stops at "+autoBruteMessage+"): %w",
			what, autoBruteCells, autoBruteGraver, autoBruteWork, ErrNoClosedForm)
	}
	return w, err
}

// ExactCells are cells of one cuboid whose counts are public exactly
// (general background knowledge, paper 3 Definition 4.1). Cells are indices
// in the cuboid's row-major order (the last of its dimensions varies
// fastest).
type ExactCells struct {
	Cuboid domain.Cuboid
	Cells  []int
}

// CellSensitivity returns the generic sensitivity of releasing the base
// cuboid when the given cells are public exactly (Lemma 4.3, corrected).
//
// With cells of at most two cuboids C1 and C2 the constraint matrix has at
// most one 1 among the known cells of C1 and one among those of C2 in each
// column, so it is totally unimodular and its Graver basis is its set of
// circuits. It is the incidence matrix of a multigraph: the known cells are
// vertices, a base cell is an edge between its C1 cell and its C2 cell,
// half an edge (an edge to a common "ground" vertex) when only one of them is
// known, and a loop at the ground when neither is. Circuits are cycles:
// alternating even cycles among known cells, alternating paths between two
// half edges, and single free cells. The known cells split by their values
// x on [C1]∩[C2]; within x the graph is the complete bipartite multigraph
// between the k1(x) known C1 cells and k2(x) known C2 cells, each pair joined
// by m = size(dimensions outside [C1]∪[C2]) edges, each known C1 cell
// carrying (q - k2(x))·m half edges and each known C2 cell (p - k1(x))·m,
// where p = size([C1]-[C2]) and q = size([C2]-[C1]). The longest cycle is
// then the largest of: 2 min(k1, k2) when both are >= 2 (2 when one is 1 and
// m >= 2); 2j+2 for a path between two half edges at C1 cells through j =
// min(k2, k1-1) C2 cells (2 from two half edges at one cell); the same with
// C1 and C2 swapped; 2 min(k1, k2) + 1 for a path from a half edge at a C1
// cell to one at a C2 cell; and 1 for a free cell.
//
// The paper's Lemma 4.3(ii) prints 2 max_x min{n1(x), n1(x)}; its natural
// reading 2 max_x min{k1(x), k2(x)} fails, for instance, for a 2-D table
// with every row sum and one column sum known: moving a row from (i,j1) and
// one from (i',j0) to (i,j0) and (i',j2) is a primitive move of 4 rows,
// where the formula gives 2. Lemma 4.3(i) (cells of one cuboid: 2) fails
// when every known cell is a single base cell: then 1, or 0 if the table is
// known. Cells of three or more cuboids are brute-forced on tiny domains and
// otherwise fail with ErrNoClosedForm.
func CellSensitivity(s *domain.Schema, known []ExactCells) (Sensitivity, error) {
	if s == nil {
		return Sensitivity{}, errors.New("cell sensitivity: nil schema")
	}
	trivial := TrivialDims(s)
	eff := domain.Base(s.NumDims()) &^ trivial
	byCuboid := map[domain.Cuboid]map[int]bool{}
	var order []domain.Cuboid
	for i, k := range known {
		if err := CheckCuboid(s, k.Cuboid, fmt.Sprintf("exact cells %d", i+1)); err != nil {
			return Sensitivity{}, err
		}
		size := satCells(s, k.Cuboid)
		for _, c := range k.Cells {
			if c < 0 || (size < satLimit && c >= size) {
				return Sensitivity{}, fmt.Errorf("exact cells %d: cell %d of cuboid %s is outside [0, %d)",
					i+1, c, s.Format(k.Cuboid), size)
			}
		}
		if len(k.Cells) == 0 {
			continue
		}
		// Trivial dimensions do not change a cell's row-major index.
		c := k.Cuboid &^ trivial
		if byCuboid[c] == nil {
			byCuboid[c] = map[int]bool{}
			order = append(order, c)
		}
		for _, x := range k.Cells {
			byCuboid[c][x] = true
		}
	}
	switch len(order) {
	case 0:
		return Sensitivity{1, "no background knowledge: neighbours add or remove one row"}, nil
	case 1:
		c := order[0]
		switch {
		case eff&^c != 0:
			return Sensitivity{2, fmt.Sprintf("Lemma 4.3(i): exact cells of %s", s.Format(c))}, nil
		case len(byCuboid[c]) < satCells(s, c):
			return Sensitivity{1, fmt.Sprintf("exact cells of %s are single base cells; the others add or remove one row (Lemma 4.3(i) says 2)", s.Format(c))}, nil
		default:
			return Sensitivity{0, fmt.Sprintf("determined: every base cell is an exact cell of %s", s.Format(c))}, nil
		}
	case 2:
		return twoCuboidCells(s, eff, order[0], order[1], byCuboid[order[0]], byCuboid[order[1]]), nil
	}
	var cells []ExactCells
	names := make([]string, len(order))
	for i, c := range order {
		e := ExactCells{Cuboid: c}
		for x := range byCuboid[c] {
			e.Cells = append(e.Cells, x)
		}
		slices.Sort(e.Cells)
		cells = append(cells, e)
		names[i] = s.Format(c)
	}
	return autoBruteForce(s, nil, cells, fmt.Sprintf("exact cells of %s", strings.Join(names, ", ")))
}

// twoCuboidCells is the longest circuit of the known-cell graph (see
// CellSensitivity).
func twoCuboidCells(s *domain.Schema, eff, c1, c2 domain.Cuboid, k1set, k2set map[int]bool) Sensitivity {
	// Sizes saturate at satLimit, far above any number of listed cells,
	// which is all they are compared with.
	inter := c1 & c2
	p, q := satCells(s, c1&^c2), satCells(s, c2&^c1)
	m := satCells(s, eff&^(c1|c2))
	k1, k2 := map[int]int{}, map[int]int{}
	for x := range k1set {
		k1[cellProjection(s, c1, inter, x)]++
	}
	for x := range k2set {
		k2[cellProjection(s, c2, inter, x)]++
	}
	comps := map[int]bool{}
	for x := range k1 {
		comps[x] = true
	}
	for x := range k2 {
		comps[x] = true
	}
	best, why := 0, "determined: the exact cells fix the table"
	take := func(v int, rule string) {
		if v > best {
			best, why = v, rule
		}
	}
	if len(comps) < satCells(s, inter) {
		take(1, "a base cell in no known cell")
	}
	for x := range comps {
		a, b := k1[x], k2[x]
		hl, hr := satMul(q-b, m), satMul(p-a, m) // half edges at each known C1 cell, C2 cell
		switch {
		case a >= 2 && b >= 2:
			take(2*min(a, b), "an alternating cycle through known cells of both cuboids")
		case a >= 1 && b >= 1 && m >= 2:
			take(2, "two base cells between the same known cells")
		}
		if a >= 1 && hl >= 2 {
			take(2, "two base cells of one known cell, outside the other cuboid's known cells")
		}
		if b >= 1 && hr >= 2 {
			take(2, "two base cells of one known cell, outside the other cuboid's known cells")
		}
		if j := min(b, a-1); hl >= 1 && j >= 1 {
			take(2*j+2, fmt.Sprintf("an alternating path between two half edges at known cells of %s", s.Format(c1)))
		}
		if j := min(a, b-1); hr >= 1 && j >= 1 {
			take(2*j+2, fmt.Sprintf("an alternating path between two half edges at known cells of %s", s.Format(c2)))
		}
		if a >= 1 && b >= 1 && hl >= 1 && hr >= 1 {
			take(2*min(a, b)+1, "an alternating path between half edges at known cells of both cuboids")
		}
		if p > a && q > b {
			take(1, "a base cell in no known cell")
		}
	}
	return Sensitivity{best, fmt.Sprintf("exact cells of %s and %s, longest circuit (corrected Lemma 4.3(ii)): %s",
		s.Format(c1), s.Format(c2), why)}
}

// satLimit caps cuboid sizes in the closed forms, so that products cannot
// overflow.
const satLimit = 1 << 30

// satCells is size([c]), or satLimit if that is larger.
func satCells(s *domain.Schema, c domain.Cuboid) int {
	n := 1
	for _, i := range c.Dims() {
		n = satMul(n, s.Size(i))
	}
	return n
}

// satMul is a*b for 0 <= a, b <= satLimit, or satLimit if that is larger.
func satMul(a, b int) int {
	return min(a*b, satLimit)
}

// checkCuboid rejects cuboids with dimensions the schema does not have.
func CheckCuboid(s *domain.Schema, c domain.Cuboid, what string) error {
	if extra := c &^ domain.Base(s.NumDims()); extra != 0 {
		return fmt.Errorf("%s names dimension %d, but the schema has %d dimensions", what, extra.Dims()[0], s.NumDims())
	}
	return nil
}

// trivialDims is the cuboid of the dimensions of size 1.
func TrivialDims(s *domain.Schema) domain.Cuboid {
	var t domain.Cuboid
	for i := range s.NumDims() {
		if s.Size(i) == 1 {
			t |= 1 << i
		}
	}
	return t
}

// maximalCuboids drops trivial dimensions, duplicates and cuboids that are
// ancestors of another, and returns the rest in increasing order.
func maximalCuboids(cs []domain.Cuboid, trivial domain.Cuboid) []domain.Cuboid {
	var q []domain.Cuboid
	for _, c := range cs {
		q = append(q, c&^trivial)
	}
	slices.Sort(q)
	q = slices.Compact(q)
	var out []domain.Cuboid
	for i, c := range q {
		dominated := false
		for j, d := range q {
			if i != j && c.AncestorOf(d) {
				dominated = true
				break
			}
		}
		if !dominated {
			out = append(out, c)
		}
	}
	return out
}

// cellProjection maps cell x of cuboid from (row-major) to the index of its
// cell in cuboid to, an ancestor of from.
func cellProjection(s *domain.Schema, from, to domain.Cuboid, x int) int {
	dims := from.Dims()
	y, stride := 0, 1
	for i := len(dims) - 1; i >= 0; i-- {
		d := dims[i]
		v := x % s.Size(d)
		x /= s.Size(d)
		if to.Has(d) {
			y += v * stride
			stride *= s.Size(d)
		}
	}
	return y
}
