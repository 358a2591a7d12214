package release

// Margins of error. A released cell's error is a fixed linear combination of
// the independent noise variables of the measurements, so its distribution
// comes from the mechanism alone, never from the data.
//
// By symmetry (permuting the values of a dimension permutes cells and noise
// alike), the coefficient of noise cell c' of measurement j in the error of
// cell c of table C depends only on the set p of common dimensions on which
// c and c' agree:
//
//	K_{j,p} = Σ_{A ⊆ C∩C_j free} β_{A,j} (|A|/|C|) Π_{i∈A} (δ_i(p) - 1/n_i),
//
// (δ_i(p) = 1 when i ∈ p), with n_p = Π_{i∈(C∩C_j)\p} (n_i - 1) Π_{i∈C_j\C} n_i
// noise cells sharing pattern p. The error is Σ_{j,p} K_{j,p} times a sum of
// n_p independent Laplace(b_j) variables, the same law for every cell of C.
//
// Its 0.9 quantile of |error| is exact when the error is one grid Laplace
// variable (a measured table that no invariant or other measurement
// touches), and otherwise inverts the characteristic function of the
// continuous Laplace approximation, φ(t) = Π (1 + K² b² t²)^(-n_p)
// (package moe).

import (
	"fmt"
	"math"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/moe"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
)

// lawTerm is K Σ_{n iid} L with L ~ Laplace(b): scale c = K b.
type lawTerm struct {
	c float64
	n float64
}

// cellLaw returns the terms of the error of a cell of table c, and, when
// that error is exactly one noise variable of one measurement, its index.
func (p *workloadPlan) cellLaw(c domain.Cuboid) (terms []moe.Term, single int) {
	single = -1
	all := p.basis.CellLaw(c)
	var kmax float64
	for _, t := range all {
		kmax = max(kmax, math.Abs(t.Coef))
	}
	for _, t := range all {
		// Coefficients that are zero in exact arithmetic come out as
		// rounding noise; drop them.
		if math.Abs(t.Coef) <= 1e-12*kmax || t.Count == 0 {
			continue
		}
		terms = append(terms, moe.Term{Scale: t.Coef * p.meas[t.K].lap.Scale(), Count: t.Count})
		single = t.K
		if t.Count != 1 || math.Abs(t.Coef-1) > 1e-9 {
			single = -2
		}
	}
	if len(terms) != 1 || single < 0 {
		single = -1
	}
	return terms, single
}

// moe90 returns the margin of error of every cell of table c.
func (p *workloadPlan) moe90(c domain.Cuboid) float64 {
	if p.mech == MechanismGaussian {
		// A fixed linear combination of independent discrete Gaussians on
		// grids far finer than their sigmas: normal.
		return moe.Z95 * math.Sqrt(p.basis.CellVariance(c))
	}
	terms, single := p.cellLaw(c)
	if single >= 0 {
		return moe.Laplace90(p.meas[single].lap)
	}
	return moe.Quantile90(terms)
}

// MOE90 returns the margin of error of the release's least-squares
// estimate (the Release.MOE90 field): the true count lies within the
// estimate ± MOE90 with probability 90% under the mechanism. It is exact for
// a cuboid no invariant touches (one grid Laplace variable per cell) and
// otherwise inverts the characteristic function of the cell's error; it
// uses the mechanism only, never the data. It is 0 for a public cuboid. A
// non-negative or integer release post-processes that estimate by
// data-dependent amounts the margin does not cover.
func (rel *CuboidRelease) lsMOE90(lap noise.Laplace) (float64, error) {
	if rel.Sensitivity == 0 {
		return 0, nil
	}
	eps, err := privacy.NewEpsilon(rel.Epsilon)
	if err != nil {
		return 0, fmt.Errorf("moe90: %w", err)
	}
	p := &workloadPlan{s: rel.Schema, sizes: rel.Schema.Sizes(), tables: []Table{{Cuboid: rel.Cuboid, Weight: 1}}}
	for _, v := range rel.Invariants {
		p.exact = append(p.exact, v.Cuboid)
	}
	p.meas = []measurement{{c: rel.Cuboid, sens: rel.Sensitivity, share: eps, lap: lap, v: lap.Variance()}}
	p.classify()
	p.setCoverage()
	return p.moe90(rel.Cuboid), nil
}

// gaussianMOE90 is MOE90 for a Gaussian release: the error of every cell of
// the least-squares estimate is a fixed linear combination of independent
// discrete Gaussians on a grid far finer than sigma, so it is normal to
// within that discretisation, and its 90% half-width is z_0.95 = 1.6449
// times its standard deviation (the variance from the residual basis, as
// for Laplace noise).
func (rel *CuboidRelease) gaussianMOE90(g noise.Gaussian) float64 {
	p := &workloadPlan{s: rel.Schema, sizes: rel.Schema.Sizes(), tables: []Table{{Cuboid: rel.Cuboid, Weight: 1}}}
	for _, v := range rel.Invariants {
		p.exact = append(p.exact, v.Cuboid)
	}
	p.meas = []measurement{{c: rel.Cuboid, sens: rel.Sensitivity, v: g.Variance()}}
	p.classify()
	p.setCoverage()
	return moe.Z95 * math.Sqrt(p.basis.CellVariance(rel.Cuboid))
}
