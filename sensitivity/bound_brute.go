package sensitivity

// Where a closed form is only an upper bound of an L2 generic sensitivity
// and the base cuboid is small (at most MaxGraverCells = 64 cells, beyond
// the 24 of the automatic brute force), the Graver basis is computed under
// larger but still deterministic limits, and its value replaces the bound
// when it completes. The bounds of the two-view closed forms are loose in a
// few such cases: with regions of 1 and 2 states, states of 2, 1 and 3
// counties, x sex (2) x age (3), exact {geo:state} and {sex,age}, the
// release {geo:region,sex} has L2 sensitivity 2 where the bound says
// sqrt(8); with exact {geo:state,sex} and {age}, {geo} has sqrt(10) where
// the bound says sqrt(12) (4ti2's Graver bases agree).

import (
	"context"
	"errors"
	"fmt"

	"github.com/knowdp/knowdp/domain"
)

// Limits of the larger brute force: about a second of work at most on a
// 2-core machine (9,570 elements for the second case above take 0.8 s).
const (
	boundBruteGraver = 1 << 14
	boundBruteWork   = 1 << 26
)

// bruteBoundViews returns the exact L2 sensitivity by brute force when the
// schema has at most MaxGraverCells cells and the basis fits the limits;
// ok is false otherwise (the caller keeps its bound).
func bruteBoundViews(s *domain.Schema, exact []domain.View, release domain.View, what string) (L2Sensitivity, bool, error) {
	if n := s.Cells(); n < 0 || n > MaxGraverCells {
		return L2Sensitivity{}, false, nil
	}
	w, err := bruteForceViews(context.Background(), s, exact, release, graverLimits{elements: boundBruteGraver, work: boundBruteWork})
	switch {
	case errors.Is(err, ErrTooLarge):
		return L2Sensitivity{}, false, nil
	case err != nil:
		return L2Sensitivity{}, false, err
	}
	return l2(w.L2Squared, fmt.Sprintf("brute force: %s, Graver basis of %d elements (the closed form is only a bound here)", what, w.Basis)), true, nil
}
