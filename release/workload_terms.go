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
	"context"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate"
	"github.com/knowdp/knowdp/noise"
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
// by Möbius inversion of the projections onto the residuals
// (resbasis.Basis.Terms). Terms whose coefficient is exactly zero are left out (others,
// however small, are kept, so the sum is the estimate's to rounding). A
// public table has exactly one term: the first invariant that determines
// it, on the table's dimensions within it, with coefficient 1, so that it
// stays the exact sum of integer counts. The terms are in a fixed order:
// by source, then by increasing Margin.
func (p *WorkloadPlan) Terms(table int) []EstimateTerm {
	q := p.p
	ts := q.basis.Terms(q.tables[table].Cuboid)
	out := make([]EstimateTerm, len(ts))
	for i, t := range ts {
		out[i] = EstimateTerm{Source: t.Source, Margin: t.Margin, Coef: t.Coef}
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
