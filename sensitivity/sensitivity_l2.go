package sensitivity

// L2 generic sensitivity of data-cube releases under exact cuboids, for the
// Gaussian mechanism. As for L1 (graver.go), the worst-case induced
// neighbours differ by exactly the Graver basis elements g of the
// constraint matrix, so the L2 generic sensitivity of releasing cuboid C is
// the largest ||M_C g||_2 over the Graver basis. Every Graver element has
// entries summing to zero (the grand total is implied by any exact cuboid).
// The closed forms, each pinned in sensitivity_l2_test.go to the brute
// force on every shape of at most 3 dimensions of size at most 3:
//
//   - No exact cuboid: the basis is ±e_a, so 1.
//   - C computable from an exact cuboid (as every C is when an exact
//     cuboid fixes the table): 0.
//   - One exact cuboid K (any C not computable from K): the basis is
//     e_a - e_b for cells a, b of one fibre of K, so ||M_C g||_2^2 is 2 when
//     a and b project to different cells of C and 0 otherwise; C has a
//     dimension outside K, so some pair differs there: sqrt(2).
//   - Two exact cuboids K1, K2 (an antichain), with P = K1 - K2, Q = K2 - K1
//     and L = min(size(P), size(Q)) >= 2: within one value of K1 ∩ K2 the
//     constraint matrix is the incidence matrix of a bipartite multigraph
//     (the values of P and Q are the vertices, base cells the edges), which
//     is totally unimodular, so its Graver basis is its set of circuits:
//     even cycles with alternating ±1 entries. No entry exceeds 1. A cycle
//     through l >= 2 values of P and l of Q has 2l edges with distinct
//     (P, Q) values, so when C contains every dimension of P and Q its image
//     has 2l entries ±1: the maximum is 2L (at l = L), sqrt(2L); cycles of
//     two parallel edges (l = 1) give at most 2. When C
//     lacks some of them, edges of one sign can fall in one cell of C and
//     add up, and the L2 norm can exceed the base cuboid's: for example
//     releasing only a dimension outside K1 ∪ K2 maps the L edges of one
//     sign to one cell and the others to another, 2L^2. A cell of C then
//     receives at most m = min(size(P - C), size(Q - C), L) edges of each
//     sign (their P values are distinct and agree on P ∩ C, and likewise
//     for Q), so each entry of M_C g is at most m in absolute value and
//     ||M_C g||_2^2 <= m ||M_C g||_1 <= 2 L m: an upper bound, tight in
//     that example and in most small cases (the test checks it never falls
//     below the brute force; it is loose when, for example, an odd cycle
//     length forces cancellations).
//   - Otherwise, if the L1 generic sensitivity S1 of C is known (or bounded),
//     ||M_C g||_1 <= S1 and the entries of M_C g sum to zero, so at most
//     S1/2 of mass is positive and S1/2 negative: ||M_C g||_2^2 <=
//     2 (S1/2)^2 = S1^2/2, an upper bound. Entries can exceed 1 here: with
//     the three one-dimensional margins of a 2 x 3 x 3 table a Graver
//     element has six entries ±2, so ||g||_2^2 = 24 > ||g||_1 = 12.
//
// Where a bound would be returned and the domain is tiny (at most 24 base
// cells), the brute force gives the exact value instead.

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/knowdp/knowdp/domain"
)

// L2Sensitivity is an L2 generic sensitivity and the rule it comes from,
// for the release's metadata.
type L2Sensitivity struct {
	// Value is the largest L2 distance between the released cuboids of two
	// worst-case induced neighbours (or an upper bound on it, when Rule
	// says so): the Gaussian mechanism's noise scales with it.
	Value float64
	// Squared is Value^2, an exact integer.
	Squared int
	// Rule names the derivation or method that gave Value.
	Rule string
}

func l2(squared int, rule string) L2Sensitivity {
	return L2Sensitivity{Value: math.Sqrt(float64(squared)), Squared: squared, Rule: rule}
}

// GenericL2Sensitivity returns the L2 generic sensitivity of releasing
// cuboid release (Cuboid(0) is the grand total) when the cuboids exact are
// public exactly: the largest L2 distance between the released cuboids of
// two worst-case induced neighbours. It is exact for no, one or two exact
// cuboids when the release contains every dimension in which the two
// differ, and for tiny domains (by brute force); otherwise it is an upper
// bound, and the Rule says so (see the file comment for the derivations).
// Where the L1 sensitivity has no closed form either, the error wraps
// ErrNoClosedForm.
func GenericL2Sensitivity(s *domain.Schema, exact []domain.Cuboid, release domain.Cuboid) (L2Sensitivity, error) {
	if s == nil {
		return L2Sensitivity{}, errors.New("generic L2 sensitivity: nil schema")
	}
	if err := CheckCuboid(s, release, "released cuboid"); err != nil {
		return L2Sensitivity{}, err
	}
	for i, c := range exact {
		if err := CheckCuboid(s, c, fmt.Sprintf("exact cuboid %d", i+1)); err != nil {
			return L2Sensitivity{}, err
		}
	}
	v, exactValue, err := l2ClosedForm(s, exact, release)
	if err != nil || exactValue {
		return v, err
	}
	names := make([]string, len(exact))
	for i, c := range exact {
		names[i] = s.Format(c)
	}
	what := fmt.Sprintf("exact cuboids %s, release %s", strings.Join(names, ", "), s.Format(release))
	w, berr := autoBrute(s, exact, nil, release, what)
	switch {
	case berr == nil:
		return l2(w.L2Squared, fmt.Sprintf("brute force: %s, Graver basis of %d elements", what, w.Basis)), nil
	case !errors.Is(berr, ErrNoClosedForm):
		return L2Sensitivity{}, berr
	}
	return v, nil
}

// l2ClosedForm is the closed form or bound of the file comment, and whether
// it is exact (not a bound). It fails only when the L1 sensitivity it
// would be bounded by is unknown.
func l2ClosedForm(s *domain.Schema, exact []domain.Cuboid, release domain.Cuboid) (L2Sensitivity, bool, error) {
	trivial := TrivialDims(s)
	q := maximalCuboids(exact, trivial)
	rel := release &^ trivial
	if len(q) == 0 {
		return l2(1, "no background knowledge: neighbours add or remove one row"), true, nil
	}
	for _, c := range q {
		if rel.AncestorOf(c) {
			return l2(0, fmt.Sprintf("public: %s is computable from exact cuboid %s", s.Format(release), s.Format(c))), true, nil
		}
	}
	switch len(q) {
	case 1:
		// A release not computable from q[0] has a dimension outside it,
		// so the table is not determined.
		return l2(2, fmt.Sprintf("one exact cuboid %s: moves of one row within a cell of it", s.Format(q[0]))), true, nil
	case 2:
		pd, qd := q[0]&^q[1], q[1]&^q[0]
		p, qq := satCells(s, pd), satCells(s, qd)
		ell := min(p, qq)
		pair := fmt.Sprintf("exact cuboids %s and %s", s.Format(q[0]), s.Format(q[1]))
		if ell == satLimit {
			return L2Sensitivity{}, false, fmt.Errorf("%s: the L2 generic sensitivity sqrt(2*min(size(%s), size(%s))) is above sqrt(%d)",
				pair, s.Format(pd), s.Format(qd), 2*satLimit)
		}
		if (pd|qd)&^rel == 0 {
			return l2(2*ell, fmt.Sprintf("%s: alternating cycles, 2*min(%d, %d)", pair, p, qq)), true, nil
		}
		// size(P)/size(P ∩ C) = size(P - C); m <= L as well.
		m := min(satCells(s, pd&^rel), satCells(s, qd&^rel), ell)
		return l2(2*ell*m, fmt.Sprintf("upper bound: %s: alternating cycles with at most %d rows of one sign in a cell of %s, 2*%d*%d",
			pair, m, s.Format(release), ell, m)), false, nil
	}
	s1, err := GenericSensitivity(s, exact, release)
	if err != nil {
		return L2Sensitivity{}, false, fmt.Errorf("L2 generic sensitivity: %w", err)
	}
	// An L1 norm of integers summing to zero is even: at most h = S1/2
	// (rounded down) of positive and of negative mass.
	h := s1.Value / 2
	return l2(2*h*h, fmt.Sprintf("upper bound: L1 sensitivity %d with entries summing to zero, 2*(%d/2)^2 (%s)",
		s1.Value, s1.Value, s1.Rule)), s1.Value == 0, nil
}
