package release

// A workload release without its data, for computing it in pieces: a
// distributed pipeline noises each measurement block by block and computes
// every block of every table from a few small marginals of the sources.
//
// Terms. For a table C and a source S (an invariant or a measurement, with
// counts x_S), estimate adds contract_C(transfer(extend_S(x_S), w)), where w
// weighs the residuals A ⊆ K = C ∩ S (weights). Only the blocks A ⊆ K of
// extend_S(x_S) are read, and those are the residuals of m_K, the K-marginal
// of x_S: r_A = centre_A(marginal_A(m_K)). Expanding the centring,
//
//	r_A(c_A) = Σ_{B⊆A} (-1)^{|A\B|} marginal_B(x_S)(c_B) / Π_{d∈A\B} n_d,
//
// and contract along a dimension d of C divides its * block by n_d, so cell
// c of the table receives Σ_{A⊆K} w_A r_A(c_A) / Π_{d∈C\A} n_d, which is
//
//	Σ_{B⊆K} β_B marginal_B(x_S)(c_B) / Π_{d∈C\B} n_d,
//	β_B = Σ_{B⊆A⊆K} (-1)^{|A\B|} w_A
//
// (Möbius inversion over the supersets of B). Summed over the sources, this
// is the whole estimate of the table.

import (
	"cmp"
	"context"
	"slices"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/sensitivity"
)

// WorkloadPlan is a release of tables at their finest levels without its
// data, obtained from a Plan (Plan.Workload): what NewPlan decides from the
// schema and the spec alone (the tables, the measurements, their shares and
// noise, the error of every table and the privacy story), and the
// estimator as a linear map from the sources' marginals to the tables. It
// lets a pipeline that never holds a whole table on one machine noise the
// measurements and compute the tables in blocks of cells, with a seeded
// output equal to Plan.Run's.
type WorkloadPlan struct {
	spec workloadSpec
	// Release is the release the plan describes, without counts: every
	// table (Counts nil), measurement and invariant (Counts nil), and the
	// privacy story, so that Release.Metadata() is the metadata of
	// Plan.Run's release. A caller fills the
	// counts in.
	Release *Release
	p       *workloadPlan
}

// newWorkloadPlanContext plans the release spec describes: the same errors
// for a bad spec as the release, and a Release with every table,
// measurement, invariant, share, error and the privacy story (Seeded as
// given, since the plan draws no noise itself). It reads no data. The
// optimal split's search stops when ctx ends, and the plan fails with
// ctx's error.
func newWorkloadPlanContext(ctx context.Context, s *domain.Schema, spec workloadSpec, seeded bool) (*WorkloadPlan, error) {
	p, err := planWorkloadCtx(ctx, s, spec)
	if err != nil {
		return nil, err
	}
	inv := make([]estimate.Invariant, len(p.exact))
	for i, e := range p.exact {
		inv[i] = estimate.Invariant{Cuboid: e}
	}
	rel, err := p.newRelease(spec, inv, seeded)
	if err != nil {
		return nil, err
	}
	return &WorkloadPlan{spec: spec, Release: rel, p: p}, nil
}

// Needs returns the cuboids whose exact counts the release needs: the
// invariants, then the measured cuboids (the sources, in Source's order).
func (p *WorkloadPlan) Needs() []domain.Cuboid { return p.p.needs() }

// releaseFrom draws the planned release from the exact counts of the
// cuboids Needs lists, without planning it again.
func (p *WorkloadPlan) releaseFrom(ctx context.Context, exact map[domain.Cuboid][]float64, r *noise.Rand) (*Release, error) {
	return p.p.release(ctx, p.spec, exact, r)
}

// NumSources returns the number of sources the tables are estimated from:
// the invariants, then the measurements.
func (p *WorkloadPlan) NumSources() int { return len(p.p.exact) + len(p.p.meas) }

// Source returns the cuboid of source i: invariant i (in the order of
// Release.Invariants) for i < len(Release.Invariants), otherwise
// measurement i - len(Release.Invariants) (in the order of
// Release.Measurements). The counts of an invariant source are its exact
// counts, those of a measurement its noisy counts (AddNoise).
func (p *WorkloadPlan) Source(i int) domain.Cuboid {
	if i < len(p.p.exact) {
		return p.p.exact[i]
	}
	return p.p.meas[i-len(p.p.exact)].c
}

// EstimateTerm is one term of a table's estimate: Coef times the marginal
// on Margin of source Source's counts, broadcast to the table's cells
// (every cell c of the table receives Coef · marginal(c restricted to
// Margin)). Margin is a subset of both the table and the source, so a
// worker needs only that small marginal, never the source itself, unless
// Margin is the whole table (then it needs the block of the source's
// marginal on the table that it is computing).
type EstimateTerm struct {
	Source int
	Margin domain.Cuboid
	Coef   float64
}

// Terms returns the estimate of table i (Release.Tables[i]) as a sum of
// terms:
//
//	ŷ_C(c) = Σ_terms Coef · marginal_Margin(x_Source)(c_Margin),
//
// where for a source S with weights w_A over the residuals A of
// K = C ∩ S (those of the least-squares estimate, zero for residuals the
// source does not inform) and every B ⊆ K,
//
//	Coef = β_B / Π_{d∈C\B} n_d,  β_B = Σ_{B⊆A⊆K} (-1)^{|A\B|} w_A,
//
// by Möbius inversion of the projections onto the residuals (see the file
// comment). Terms whose coefficient is exactly zero are left out (others,
// however small, are kept, so the sum is the estimate's to rounding). A
// public table has exactly one term: the first invariant that determines
// it, on the table's dimensions within it, with coefficient 1, so that it
// stays the exact sum of integer counts. The terms are in a fixed order:
// by source, then by increasing Margin.
func (p *WorkloadPlan) Terms(table int) []EstimateTerm {
	q := p.p
	c := q.tables[table].Cuboid
	if q.tables[table].Public {
		eff := c &^ sensitivity.TrivialDims(q.s)
		for e, v := range q.exact {
			if eff.AncestorOf(v) {
				return []EstimateTerm{{Source: e, Margin: c & v, Coef: 1}}
			}
		}
		panic("cube: public cuboid without an invariant") // planWorkload checked it
	}
	var out []EstimateTerm
	for e, v := range q.exact {
		if w, nz := q.basis.Weights(c, v, e, -1); nz {
			out = q.appendTerms(out, e, c, v, w)
		}
	}
	for k, m := range q.meas {
		if w, nz := q.basis.Weights(c, m.c, -1, k); nz {
			out = q.appendTerms(out, len(q.exact)+k, c, m.c, w)
		}
	}
	return out
}

// appendTerms appends to out the terms of source i, of cuboid src, in the
// estimate of table c, whose weights w are indexed by pattern over the
// common dimensions (see transfer).
func (p *workloadPlan) appendTerms(out []EstimateTerm, i int, c, src domain.Cuboid, w []float64) []EstimateTerm {
	common := (c & src).Dims()
	// β_B = Σ_{A⊇B} (-1)^{|A\B|} w_A, one dimension at a time: after the
	// pass over bit b, beta[B] is the alternating sum over the supersets
	// of B that differ from it in the bits done so far.
	beta := slices.Clone(w)
	for b := range common {
		bit := 1 << b
		for pat := range beta {
			if pat&bit == 0 {
				beta[pat] -= beta[pat|bit]
			}
		}
	}
	type term struct {
		b    domain.Cuboid
		coef float64
	}
	var terms []term
	for pat, v := range beta {
		if v == 0 {
			continue
		}
		var b domain.Cuboid
		for k, d := range common {
			if pat&(1<<k) != 0 {
				b |= 1 << d
			}
		}
		terms = append(terms, term{b, v / float64(p.s.CuboidSize(c&^b))})
	}
	slices.SortFunc(terms, func(x, y term) int { return cmp.Compare(x.b, y.b) })
	for _, t := range terms {
		out = append(out, EstimateTerm{Source: i, Margin: t.b, Coef: t.coef})
	}
	return out
}

// Noise returns the distribution of the measurement's noise, as Plan.Run
// draws it: grid Laplace noise of its Sensitivity and Share, or, for a
// Gaussian measurement (RhoShare > 0), the grid discrete Gaussian of its
// L2Sensitivity and RhoShare. Plan.Run's noise is
// reproduced block by block when measurement k's generator is the
// (k+1)-th Split of the release's generator and, for a measurement of more
// than 1<<18 cells, block i (cells [i<<18, (i+1)<<18)) is noised from the
// i-th Split of that generator (a measurement of at most 1<<18 cells is
// noised from the generator itself, in one block).
func (m Measurement) Noise() (interface {
	AddTo(r *noise.Rand, xs []float64) error
}, error) {
	if m.RhoShare > 0 {
		return noise.NewGaussian(m.L2Sensitivity, m.RhoShare)
	}
	return noise.NewLaplace(float64(m.Sensitivity), m.Share)
}
