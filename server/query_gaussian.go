package server

import (
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/release"
	"github.com/knowdp/knowdp/sensitivity"
)

// defaultGaussianDelta is the delta at which a Gaussian answer states its
// equivalent (eps, delta) guarantee unless the query gives one.
const defaultGaussianDelta = 1e-6

// planGaussianCuboid plans a cuboid query with Gaussian noise on a dataset
// with zCDP budgets: charged rho (0 for a cuboid the invariants determine),
// calibrated to the L2 generic sensitivity, which knowdp must be able to
// compute (a curator's sensitivity claim is an L1 one). Everything is
// decided from the request, the schema and the policy.
func planGaussianCuboid(d *dataset, q QueryRequest) (*plan, error) {
	rho, err := privacy.NewRho(q.Rho)
	if err != nil {
		return nil, badInput("rho: %v", err)
	}
	delta := q.Delta
	if delta == 0 {
		delta = defaultGaussianDelta
	}
	if !(delta > 0 && delta < 1) {
		return nil, badInput("delta: must be in (0, 1), got %v", q.Delta)
	}
	if d.viewQuery(q) {
		return planViewQuery(d, q, privacy.Epsilon{}, rho, delta)
	}
	switch {
	case q.Cuboids != nil:
		return planGaussianWorkload(d, q, rho, delta)
	case q.Weights != nil || q.Split != "":
		return nil, badInput("weights and split apply to a workload: give cuboids, a list of cuboids")
	case q.Cuboid == nil:
		return nil, badInput("cuboid: required: the dimensions of the cuboid to release ([] is the grand total)")
	case q.NonNeg && q.Integer:
		return nil, badInput("nonneg and integer exclude each other (integer counts are non-negative)")
	}
	cb, err := d.schema.CuboidOf(q.Cuboid...)
	if err != nil {
		return nil, badInput("cuboid: %v", err)
	}
	if size := d.schema.CuboidSize(cb); size > maxAnswerCells {
		return nil, badInput("cuboid: %s has %d cells; at most %d per answer", d.schema.Format(cb), size, maxAnswerCells)
	}
	sens, err := sensitivity.GenericSensitivity(d.schema, d.exact, cb)
	if err != nil {
		return nil, badInput("cuboid: %v", err)
	}
	l2, err := sensitivity.GenericL2Sensitivity(d.schema, d.exact, cb)
	if err != nil {
		return nil, badInput("cuboid: %v", err)
	}
	charge := rho.Steps()
	h := newHasher("cuboid/gaussian", privacy.Epsilon{})
	if sens.Value == 0 {
		charge = 0 // public: released exactly, the same whatever rho
	} else {
		if _, err := noise.NewGaussian(l2.Value, rho.Float64()); err != nil {
			return nil, badInput("rho: %v is too small for this cuboid (L2 generic sensitivity %.6g): %v", rho.Float64(), l2.Value, err)
		}
		h.int(rho.Steps())
		h.float(delta)
	}
	h.int(int64(cb))
	h.postProcessing(q)
	spec := release.ReleaseSpec{Mechanism: release.MechanismGaussian, Rho: rho, Delta: delta, Exact: d.exact, Cuboid: cb, NonNegative: q.NonNeg, Integer: q.Integer}
	return &plan{hash: h.sum(), uniform: charge, compute: releaseCuboid(d, spec, ""), fresh: freshMOE90(d.schema, spec)}, nil
}

// planGaussianWorkload plans a workload ("cuboids") with Gaussian noise, as
// knowdp release --workload --mechanism gaussian releases it: the measured
// cuboids share rho (optimal or equal split), each calibrated to its L2
// generic sensitivity; every table is estimated once and consistent with
// the invariants; nonneg and integer post-process it. It is charged rho (0
// when every cuboid is public). Everything is decided from the request, the
// schema and the policy.
func planGaussianWorkload(d *dataset, q QueryRequest, rho privacy.Rho, delta float64) (*plan, error) {
	s := d.schema
	spec, public, err := workloadCuboids(d, q)
	if err != nil {
		return nil, err
	}
	spec.Mechanism, spec.Rho, spec.Delta = release.MechanismGaussian, rho, delta
	charge := rho.Steps()
	h := newHasher("cuboid/gaussian", privacy.Epsilon{})
	if public {
		charge = 0 // released exactly, the same whatever rho
	} else {
		h.int(rho.Steps())
		h.float(delta)
	}
	h.workload(spec, q)
	p := &plan{hash: h.sum(), uniform: charge}
	// Refuse what the release would refuse (duplicates, a cuboid without
	// an L2 sensitivity, a rho too small for the noise), from the request
	// alone, once the query is affordable: the plan solves the split.
	if p.prepare, p.compute, p.work, err = planWorkloadRelease(d, s, spec, q, ""); err != nil {
		return nil, err
	}
	return p, nil
}
