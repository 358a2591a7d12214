package hier

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
)

// Term is one group of noise variables in the error of an estimated cell:
// Coef times the sum of Count independent noise variables of measurement
// Measurement (each of that measurement's variance).
type Term struct {
	Measurement int
	Coef        float64
	Count       int64
}

// Law is the error of an estimated cell as a linear combination of the
// measurements' independent noise: error = Σ_terms Coef · (sum of Count iid
// noise variables of Measurement). Exact measurements carry no noise and
// never appear.
type Law struct {
	// Terms, by decreasing |Coef| (ties by measurement, then coefficient);
	// terms whose coefficients agree within 1e-12 relative are merged.
	Terms []Term
	// Variance is the variance of the error, Σ Coef² Count v_j over all
	// terms, those left out by MaxTerms included.
	Variance float64
	// Dropped is the part of Variance carried by the terms left out by
	// MaxTerms (0 when none were).
	Dropped float64
	// DroppedMax bounds the standard deviation of every noise variable
	// left out: |Coef| times the noise's standard deviation, for every term
	// the law does not keep (0 when Dropped is). With Dropped, it bounds how
	// far the left-out part can be from normal.
	DroppedMax float64
}

// LawOptions bounds the size of a law.
type LawOptions struct {
	// MaxTerms, when > 0, keeps at most MaxTerms terms: those of largest
	// |Coef|, each exact and with its full count (fewer only when a term
	// could not be completed without expanding past the bound). The
	// variance of the others is Law.Dropped = Law.Variance - the kept
	// terms' variance, and only the parts of the hierarchy that can hold
	// a kept term are visited.
	MaxTerms int
}

// coefTol is the relative tolerance within which coefficients are merged,
// and below which (relative to the largest) they are rounding noise.
const coefTol = 1e-12

// checkCell checks a query index and a node of its level.
func (s *Solution) checkCell(q, node int) error {
	if q < 0 || q >= len(s.queries) {
		return fmt.Errorf("hier: query %d out of range (%d queries)", q, len(s.queries))
	}
	v := s.queries[q]
	if n := s.p.Hierarchy.Nodes(v.Level); node < 0 || node >= n {
		return fmt.Errorf("hier: node %d out of range: level %d has %d nodes", node, v.Level, n)
	}
	return nil
}

// Law returns the error law of every cell of node `node` (the caller's
// numbering at the query's level) of the q-th query's table: the error of
// each of those cells is the same linear combination of independent noise
// variables up to a permutation of the variables, so one law serves them
// all. The coefficients are the adjoint (transpose) of the estimator
// applied to a cell's indicator, taken along the chain of the node's
// ancestors and expanded into the subtrees hanging off it (a subtree the
// adjoint does not reach, such as one outside an exact ancestor, costs
// nothing). The cost is O(Σ_{T⊆S} depth × fan-out) plus, for each node k
// of a measured level that the adjoint reaches, O(Σ_{j at k's level}
// 2^|S∩S_j| |S∩S_j|): at most about one pass over the measured cells, and
// a sort of the terms. With MaxTerms, only the subtrees whose bound
// exceeds the kept coefficients are expanded.
func (s *Solution) Law(q, node int, opt LawOptions) (Law, error) {
	return s.blockLaw(q, node, opt.MaxTerms)
}

// mergeTerms drops rounding noise (coefficients below 1e-12 of the
// largest), merges terms of one measurement whose coefficients agree within
// 1e-12 relative, and sorts the result by decreasing |Coef|. It returns the
// variance of the dropped noise and the largest standard deviation of one
// of its variables.
func mergeTerms(terms []Term, p *Problem) ([]Term, float64, float64) {
	var kmax, noise, noiseMax float64
	for _, t := range terms {
		kmax = max(kmax, math.Abs(t.Coef))
	}
	kept := terms[:0]
	for _, t := range terms {
		// Coefficients that are zero in exact arithmetic come out as
		// rounding noise; they are left out of the terms.
		if math.Abs(t.Coef) <= coefTol*kmax {
			v := p.Measurements[t.Measurement].Variance
			noise += t.Coef * t.Coef * float64(t.Count) * v
			noiseMax = max(noiseMax, math.Abs(t.Coef)*math.Sqrt(v))
			continue
		}
		kept = append(kept, t)
	}
	slices.SortFunc(kept, func(a, b Term) int {
		return cmp.Or(cmp.Compare(a.Measurement, b.Measurement), cmp.Compare(a.Coef, b.Coef))
	})
	merged := kept[:0]
	for _, t := range kept {
		if n := len(merged); n > 0 {
			last := &merged[n-1]
			if last.Measurement == t.Measurement && math.Abs(last.Coef-t.Coef) <= coefTol*max(math.Abs(last.Coef), math.Abs(t.Coef)) {
				last.Count += t.Count
				continue
			}
		}
		merged = append(merged, t)
	}
	slices.SortStableFunc(merged, func(a, b Term) int {
		return cmp.Compare(math.Abs(b.Coef), math.Abs(a.Coef))
	})
	return slices.Clip(merged), noise, noiseMax
}

// TableLaws returns the error laws of every cell of the q-th query's table,
// one law per class of nodes of its level (see Hierarchy.Classes): the law
// of the cells of node i is laws[class[i]]. Each class's law is computed
// once, from its lowest-numbered node, on up to Problem.Workers goroutines;
// the result does not depend on their number.
func (s *Solution) TableLaws(ctx context.Context, q int, opt LawOptions) (laws []Law, class []int32, err error) {
	if q < 0 || q >= len(s.queries) {
		return nil, nil, fmt.Errorf("hier: query %d out of range (%d queries)", q, len(s.queries))
	}
	vl := s.viewLaw(q)
	class, reps := s.p.Hierarchy.Classes(vl.v.Level)
	laws = make([]Law, len(reps))
	err = parallel(ctx, len(reps), s.p.Workers, func(c int) error {
		laws[c] = vl.law(reps[c], opt.MaxTerms)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return laws, class, nil
}

// TableVariances is TableLaws for the variances alone (Variance): the
// variance of the error of every cell of node i of the q-th query's table
// is variances[class[i]].
func (s *Solution) TableVariances(ctx context.Context, q int) (variances []float64, class []int32, err error) {
	if q < 0 || q >= len(s.queries) {
		return nil, nil, fmt.Errorf("hier: query %d out of range (%d queries)", q, len(s.queries))
	}
	vl := s.viewLaw(q)
	class, reps := s.p.Hierarchy.Classes(vl.v.Level)
	variances = make([]float64, len(reps))
	err = parallel(ctx, len(reps), s.p.Workers, func(c int) error {
		variances[c] = vl.nodeVariance(reps[c])
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return variances, class, nil
}
