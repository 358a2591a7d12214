package release

// Saved measurements: the noisy cuboids of a workload release with what the
// estimator needs, so that any cuboid they determine can be estimated later.
// Estimating from them is post-processing of a release already paid for:
// it costs no privacy.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/knowdp/knowdp/contrast"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate"
	"github.com/knowdp/knowdp/estimate/resbasis"
	"github.com/knowdp/knowdp/internal/tensor"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/sensitivity"
)

// MeasurementsFormat names the version of SavedMeasurements' layout:
// version 2 keeps the dimensions' levels and parents and names views at
// their levels ("geo:state"); files of version 1 (flat cuboids) are read
// too.
const MeasurementsFormat = "knowdp-measurements/2"

// measurementsFormat1 is the layout before levels.
const measurementsFormat1 = "knowdp-measurements/1"

// SavedMeasurements is a workload release's noisy measurements, invariants
// and noise, as written by --measurements. Its privacy fields are the
// release's: the counts in it are exactly as private as the release.
type SavedMeasurements struct {
	Format string `json:"format"`
	// Dimensions are the schema's, in order, with their levels and
	// parents.
	Dimensions []domain.Dimension `json:"dimensions"`
	// Mechanism is "laplace" or "gaussian"; Epsilon (and, for Gaussian
	// noise, Rho and Delta) the release's privacy loss.
	Mechanism  string  `json:"mechanism"`
	Epsilon    float64 `json:"epsilon"`
	Rho        float64 `json:"rho,omitempty"`
	Delta      float64 `json:"delta,omitempty"`
	Neighbours string  `json:"neighbours"`
	Guarantee  string  `json:"guarantee"`
	Private    bool    `json:"private"`
	// Invariants are the exact (public) cuboids with their counts, and
	// Measurements the noisy cuboids with their noise and noisy counts
	// (row-major over the cuboid's dimensions, before any estimate).
	Invariants   []SavedTable       `json:"invariants"`
	Measurements []SavedMeasurement `json:"measurements"`
}

// SavedTable is a table with its counts: Cuboid names its dimensions, each
// at its level ("geo:state").
type SavedTable struct {
	Cuboid []string  `json:"cuboid"`
	Counts []float64 `json:"counts"`
}

// SavedMeasurement is a noisy cuboid: Laplace noise calibrated to
// Sensitivity with the share Epsilon, or Gaussian noise calibrated to
// L2Sensitivity with the share Rho; Variance is the noise's per-cell
// variance.
type SavedMeasurement struct {
	Cuboid        []string  `json:"cuboid"`
	Sensitivity   int       `json:"sensitivity,omitempty"`
	Epsilon       float64   `json:"epsilon,omitempty"`
	L2Sensitivity float64   `json:"l2_sensitivity,omitempty"`
	Rho           float64   `json:"rho,omitempty"`
	Variance      float64   `json:"variance"`
	Counts        []float64 `json:"counts"`
	// Queries is "residual" for a residual measurement: Counts are then the
	// noisy normalised Helmert contrasts of the cuboid's dimensions
	// (Π(n_i - 1) of them, row-major over each dimension's contrasts) and
	// Variance the noise's on each.
	Queries string `json:"queries,omitempty"`
}

// SaveMeasurements returns the release's measurements for writing. The
// release must have been made with Spec.KeepMeasurements.
func (w *Release) SaveMeasurements() (*SavedMeasurements, error) {
	if w.noisy == nil && len(w.Measurements) > 0 {
		return nil, errors.New("release: the noisy measurements were not kept (set Spec.KeepMeasurements)")
	}
	s := w.Schema
	meta := w.Metadata()
	out := &SavedMeasurements{
		Format: MeasurementsFormat, Mechanism: w.Mechanism.String(), Epsilon: w.Epsilon, Rho: w.Rho, Delta: w.Delta,
		Neighbours: w.Neighbours, Guarantee: meta.Guarantee, Private: meta.Private,
		Invariants: []SavedTable{}, Measurements: []SavedMeasurement{},
	}
	for i := range s.NumDims() {
		out.Dimensions = append(out.Dimensions, s.Dim(i))
	}
	for _, v := range w.Invariants {
		out.Invariants = append(out.Invariants, SavedTable{Cuboid: nonNil(s.ViewNames(v.TableView())), Counts: slices.Clone(v.Counts)})
	}
	for k, m := range w.Measurements {
		sm := SavedMeasurement{Cuboid: nonNil(s.ViewNames(m.TableView())), Counts: slices.Clone(w.noisy[k])}
		if w.Mechanism == MechanismGaussian {
			sm.L2Sensitivity, sm.Rho, sm.Variance = m.L2Sensitivity, m.RhoShare, m.Sigma*m.Sigma
			if m.Residual {
				rn, err := contrast.NewNoise(s.SubSizesOf(m.Cuboid), m.L2Sensitivity, m.RhoShare)
				if err != nil {
					return nil, fmt.Errorf("release: residual %s: %w", s.Format(m.Cuboid), err)
				}
				sm.Queries, sm.Variance = "residual", rn.Variance()
			}
		} else {
			sm.Sensitivity, sm.Epsilon = m.Sensitivity, m.Share
			lap, err := noise.NewLaplace(float64(m.Sensitivity), m.Share)
			if err != nil {
				return nil, fmt.Errorf("release: cuboid %s: %w", s.Format(m.Cuboid), err)
			}
			sm.Variance = lap.Variance()
		}
		out.Measurements = append(out.Measurements, sm)
	}
	return out, nil
}

// Schema returns the saved release's schema.
func (sm *SavedMeasurements) Schema() (*domain.Schema, error) {
	if sm.Format != MeasurementsFormat && sm.Format != measurementsFormat1 {
		return nil, fmt.Errorf("measurements: format %q, want %q", sm.Format, MeasurementsFormat)
	}
	return domain.NewSchema(sm.Dimensions)
}

// Estimate returns the least-squares estimate of each cuboid from the saved
// measurements and invariants, with its variance and margin of error: the
// estimate a release requesting these cuboids with the same measurements
// would give (derived in docs/release.md). It costs no privacy. A cuboid
// with a residual that no measurement covers and no invariant fixes is
// refused, naming both.
func (sm *SavedMeasurements) Estimate(s *domain.Schema, cuboids []domain.Cuboid) ([]Table, error) {
	if len(cuboids) == 0 {
		return nil, errors.New("measurements: no cuboid to estimate")
	}
	mech, err := ParseMechanism(sm.Mechanism)
	if err != nil {
		return nil, fmt.Errorf("measurements: %w", err)
	}
	p := &workloadPlan{s: s, sizes: s.Sizes(), mech: mech}
	inv := make([]estimate.Invariant, len(sm.Invariants))
	for i, v := range sm.Invariants {
		c, err := s.CuboidOf(v.Cuboid...)
		if err != nil {
			return nil, fmt.Errorf("measurements: invariant %d: %w", i+1, err)
		}
		if len(v.Counts) != s.CuboidSize(c) {
			return nil, fmt.Errorf("measurements: invariant %s has %d counts for %d cells", s.Format(c), len(v.Counts), s.CuboidSize(c))
		}
		p.exact = append(p.exact, c)
		inv[i] = estimate.Invariant{Cuboid: c, Counts: slices.Clone(v.Counts)}
	}
	noisy := make([][]float64, len(sm.Measurements))
	for k, x := range sm.Measurements {
		c, err := s.CuboidOf(x.Cuboid...)
		if err != nil {
			return nil, fmt.Errorf("measurements: measurement %d: %w", k+1, err)
		}
		if x.Queries != "" {
			m, y, err := savedResidual(s, mech, c, x)
			if err != nil {
				return nil, err
			}
			p.meas = append(p.meas, m)
			noisy[k] = y
			continue
		}
		if len(x.Counts) != s.CuboidSize(c) {
			return nil, fmt.Errorf("measurements: measurement %s has %d counts for %d cells", s.Format(c), len(x.Counts), s.CuboidSize(c))
		}
		m := measurement{c: c, sens: x.Sensitivity}
		if mech == MechanismGaussian {
			share, err := privacy.NewRho(x.Rho)
			if err != nil {
				return nil, fmt.Errorf("measurements: measurement %s: %w", s.Format(c), err)
			}
			if m.gauss, err = noise.NewGaussian(x.L2Sensitivity, share.Float64()); err != nil {
				return nil, fmt.Errorf("measurements: measurement %s: %w", s.Format(c), err)
			}
			m.l2, m.rhoShare, m.v = x.L2Sensitivity, share, m.gauss.Variance()
		} else {
			share, err := privacy.NewEpsilon(x.Epsilon)
			if err != nil {
				return nil, fmt.Errorf("measurements: measurement %s: %w", s.Format(c), err)
			}
			if m.lap, err = noise.NewLaplace(float64(x.Sensitivity), share.Float64()); err != nil {
				return nil, fmt.Errorf("measurements: measurement %s: %w", s.Format(c), err)
			}
			m.share, m.v = share, m.lap.Variance()
		}
		if math.Abs(m.v-x.Variance) > 1e-9*m.v {
			return nil, fmt.Errorf("measurements: measurement %s: its noise has variance %v, the file says %v", s.Format(c), m.v, x.Variance)
		}
		p.meas = append(p.meas, m)
		noisy[k] = make([]float64, len(x.Counts), tensor.ExtSize(tensor.SubSizes(p.sizes, c)))
		copy(noisy[k], x.Counts)
	}
	for i, c := range cuboids {
		if err := sensitivity.CheckCuboid(s, c, fmt.Sprintf("measurements: cuboid %d", i+1)); err != nil {
			return nil, err
		}
		p.tables = append(p.tables, Table{Cuboid: c, Weight: 1})
	}
	p.classify()
	p.setCoverage()
	fixed := make([]bool, len(p.tables))
	for i, t := range p.tables {
		fixed[i] = true
		for a := range p.basis.Subsets(t.Cuboid) {
			switch r := p.basis.Res[a]; {
			case r.Status == resbasis.Free && len(r.Covers) == 0:
				return nil, fmt.Errorf("measurements: cuboid %s is not determined: no measured cuboid contains %s and no invariant fixes it", s.Format(t.Cuboid), s.Format(a))
			case r.Status == resbasis.Free:
				fixed[i] = false
			}
		}
	}
	// A table the invariants fix has no error; it is estimated like the
	// others (from several invariants, possibly).
	for i := range p.tables {
		p.tables[i].Public = fixed[i]
	}
	p.finishErrors()
	for i := range p.tables {
		p.tables[i].Public = false
	}
	p.estimate(p.tables, inv, noisy)
	for i := range p.tables {
		p.tables[i].Public = fixed[i]
	}
	return p.tables, nil
}

// EstimateViews returns the least-squares estimate of each view (a table at
// any levels of the schema's hierarchies) from the saved measurements and
// invariants, with every cell's margin of error: the estimate a release of
// these views with the same measurements would give, computed by the same
// estimator, chosen as NewPlan chooses it (the residual basis when every
// view stands at its finest levels, the tree passes across one hierarchy,
// the iterative solver across two or more). It costs no privacy. A view the
// measurements and invariants do not determine is refused, naming it.
func (sm *SavedMeasurements) EstimateViews(ctx context.Context, s *domain.Schema, views []domain.View) ([]Table, error) {
	if len(views) == 0 {
		return nil, errors.New("measurements: no table to estimate")
	}
	mech, err := ParseMechanism(sm.Mechanism)
	if err != nil {
		return nil, fmt.Errorf("measurements: %w", err)
	}
	parse := func(names []string, what string) (domain.View, error) {
		v, err := s.ViewOfNames(names...)
		if err != nil {
			return v, fmt.Errorf("measurements: %s: %w", what, err)
		}
		return v.Normal(), nil
	}
	var exact []domain.View
	var inv [][]float64
	for i, x := range sm.Invariants {
		v, err := parse(x.Cuboid, fmt.Sprintf("invariant %d", i+1))
		if err != nil {
			return nil, err
		}
		if len(x.Counts) != s.ViewSize(v) {
			return nil, fmt.Errorf("measurements: invariant %s has %d counts for %d cells", s.FormatView(v), len(x.Counts), s.ViewSize(v))
		}
		exact, inv = append(exact, v), append(inv, slices.Clone(x.Counts))
	}
	var meas []viewMeasurement
	var noisy [][]float64
	residuals := false
	for _, x := range sm.Measurements {
		residuals = residuals || x.Queries != ""
	}
	for k, x := range sm.Measurements {
		if residuals {
			break // flat tables only: see below
		}
		v, err := parse(x.Cuboid, fmt.Sprintf("measurement %d", k+1))
		if err != nil {
			return nil, err
		}
		if len(x.Counts) != s.ViewSize(v) {
			return nil, fmt.Errorf("measurements: measurement %s has %d counts for %d cells", s.FormatView(v), len(x.Counts), s.ViewSize(v))
		}
		m := viewMeasurement{v: v, sens: x.Sensitivity}
		if mech == MechanismGaussian {
			if m.rhoShare, err = privacy.NewRho(x.Rho); err != nil {
				return nil, fmt.Errorf("measurements: measurement %s: %w", s.FormatView(v), err)
			}
			if m.gauss, err = noise.NewGaussian(x.L2Sensitivity, m.rhoShare.Float64()); err != nil {
				return nil, fmt.Errorf("measurements: measurement %s: %w", s.FormatView(v), err)
			}
			m.l2.Value, m.variance = x.L2Sensitivity, m.gauss.Variance()
		} else {
			if m.share, err = privacy.NewEpsilon(x.Epsilon); err != nil {
				return nil, fmt.Errorf("measurements: measurement %s: %w", s.FormatView(v), err)
			}
			if m.lap, err = noise.NewLaplace(float64(x.Sensitivity), m.share.Float64()); err != nil {
				return nil, fmt.Errorf("measurements: measurement %s: %w", s.FormatView(v), err)
			}
			m.variance = m.lap.Variance()
		}
		if math.Abs(m.variance-x.Variance) > 1e-9*m.variance {
			return nil, fmt.Errorf("measurements: measurement %s: its noise has variance %v, the file says %v", s.FormatView(v), m.variance, x.Variance)
		}
		meas, noisy = append(meas, m), append(noisy, slices.Clone(x.Counts))
	}
	tables := make([]Table, len(views))
	for i, v := range views {
		if err := s.CheckView(v); err != nil {
			return nil, fmt.Errorf("measurements: table %d: %w", i+1, err)
		}
		v = v.Normal()
		tables[i] = Table{Cuboid: v.Dims, View: v, Weight: 1}
		for _, e := range exact {
			if v.RollUpOf(e) {
				tables[i].Public, tables[i].SensitivityRule = true, "public: a roll-up of the exact view "+s.FormatView(e)
			}
		}
	}
	var measured []domain.View
	for _, m := range meas {
		measured = append(measured, m.v)
	}
	coarse := coarseDims(Spec{Tables: views, Exact: exact, Measure: measured})
	if residuals && len(coarse) > 0 {
		return nil, errors.New("measurements: residual measurements estimate tables at the finest levels of every dimension only")
	}
	switch len(coarse) {
	case 0:
		var cs []domain.Cuboid
		for _, v := range views {
			cs = append(cs, v.Dims)
		}
		return sm.Estimate(s, cs)
	case 1:
		p := &viewPlan{s: s, h: coarse[0], exact: exact, tables: tables, meas: meas, mech: mech}
		invs := make([]estimate.Invariant, len(exact))
		for i, e := range exact {
			invs[i] = estimate.Invariant{Cuboid: e.Dims, View: e, Counts: inv[i]}
		}
		if err := p.estimate(ctx, tables, invs, noisy); err != nil {
			return nil, err
		}
		return tables, nil
	default:
		p := &crossPlan{s: s, spec: Spec{Mechanism: mech}, hier: coarse, exact: exact, tables: tables, meas: meas}
		if err := p.buildSolver(); err != nil {
			return nil, err
		}
		rel := &Release{Schema: s, Tables: tables}
		if _, err := p.estimate(ctx, rel, noisy, inv); err != nil {
			return nil, err
		}
		return rel.Tables, nil
	}
}

// savedResidual reads a saved residual measurement: its noise, recomputed
// from its sensitivity and share and checked against the file's variance,
// and its contribution to the residual of its cuboid (H_Aᵀ z).
func savedResidual(s *domain.Schema, mech Mechanism, c domain.Cuboid, x SavedMeasurement) (measurement, []float64, error) {
	switch {
	case x.Queries != "residual":
		return measurement{}, nil, fmt.Errorf("measurements: measurement %s: queries %q, want \"residual\" or none", s.Format(c), x.Queries)
	case mech != MechanismGaussian:
		return measurement{}, nil, fmt.Errorf("measurements: measurement %s: residual measurements are Gaussian", s.Format(c))
	}
	sizes := s.SubSizesOf(c)
	rows := 1
	for _, n := range sizes {
		rows *= n - 1
	}
	if len(x.Counts) != rows {
		return measurement{}, nil, fmt.Errorf("measurements: residual %s has %d contrasts, want %d", s.Format(c), len(x.Counts), rows)
	}
	share, err := privacy.NewRho(x.Rho)
	if err != nil {
		return measurement{}, nil, fmt.Errorf("measurements: residual %s: %w", s.Format(c), err)
	}
	rn, err := contrast.NewNoise(sizes, x.L2Sensitivity, share.Float64())
	if err != nil {
		return measurement{}, nil, fmt.Errorf("measurements: residual %s: %w", s.Format(c), err)
	}
	m := measurement{c: c, resid: true, l2: x.L2Sensitivity, rhoShare: share, rn: rn, v: rn.Variance()}
	if math.Abs(m.v-x.Variance) > 1e-9*m.v {
		return measurement{}, nil, fmt.Errorf("measurements: residual %s: its noise has variance %v, the file says %v", s.Format(c), m.v, x.Variance)
	}
	y := contrast.PseudoMarginal(x.Counts, sizes)
	out := make([]float64, len(y), tensor.ExtSize(sizes))
	copy(out, y)
	return m, out, nil
}
