package release

import (
	"fmt"
	"slices"

	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/sidecar"
)

// Metadata returns the release's privacy story.
func (w *Release) Metadata() sidecar.Metadata {
	s := w.Schema
	m := sidecar.Metadata{
		Mechanism: "Laplace noise on a power-of-two grid (exact discrete Laplace) on every cell of the declared domain of each measured cuboid, " +
			"calibrated to its generic sensitivity under the exact cuboids",
		Composition:  "sequential composition: the total epsilon is the sum of the measurements' shares",
		Epsilon:      sidecar.StatedUp(w.Epsilon),
		EpsilonExact: w.Epsilon,
		Budget:       w.Budget,
		Neighbours:   w.Neighbours,
		Split:        w.Split.String(),
		Strategy:     w.Strategy.String(),
		Objective:    w.Objective,
		Guarantee:    privacy.GuaranteeUnconditional,
		Estimate: "one weighted least-squares estimate of the base table (weights 1/variance) subject to the exact cuboids, " +
			"computed in the residual basis of the marginals; every table is derived from it, so all agree with each other and with the exact cuboids",
		MOE: "half-width of the interval that holds the true count with probability 90% under the mechanism, from the noise alone (never the data): " +
			"exact for a cell whose error is one grid Laplace variable, otherwise the error's distribution by numerical inversion of its characteristic function (Gil-Pelaez), to 1e-6 in probability",
		Measurements: []sidecar.MeasurementInfo{},
		Exact:        [][]string{},
		Seeded:       w.Seeded,
		FromData:     w.DomainsFromData,
		Private:      !w.Seeded && !w.DomainsFromData,
		Warnings:     []string{},
	}
	if w.Mechanism == MechanismGaussian {
		m.Mechanism = "Gaussian noise on a power-of-two grid (exact discrete Gaussian) on every cell of the declared domain of each measured cuboid, " +
			"calibrated to its L2 generic sensitivity under the exact cuboids"
		m.Composition = "zero-concentrated DP: the total rho is the sum of the measurements' shares; epsilon is its equivalent at delta (Canonne-Kamath-Steinke)"
		m.Rho, m.RhoExact, m.RhoBudget, m.Delta = sidecar.StatedUp(w.Rho), w.Rho, w.RhoBudget, w.Delta
		m.MOE = "half-width of the interval that holds the true count with probability 90% under the mechanism, from the noise alone (never the data): " +
			"the error of a cell is a fixed linear combination of independent discrete Gaussians, normal to within their grids: 1.645 standard deviations"
		if w.hasResiduals() {
			m.Mechanism = "Gaussian noise on a power-of-two grid (exact discrete Gaussian) on every cell of the declared domain of each measured cuboid, " +
				"and on every Helmert contrast of each measured residual (queries \"residual\": the contrasts' exact values rounded to the grid exactly, the rounding counted in the sensitivity), " +
				"each calibrated to its L2 sensitivity under the exact cuboids"
		}
	}
	if w.Strategy < 0 {
		m.Strategy = "given"
	}
	m.StrategyFamily = w.family
	m.ObjectiveOf = w.ObjectiveKind.describe()
	if w.hasQueryMeasurements() {
		m.Mechanism = "Laplace noise on a power-of-two grid (exact discrete Laplace) on every query of each measurement (integer combinations of counts, exactly on the grid: a factor with real weights is quantised to integers first), " +
			"calibrated to its L1 sensitivity under the exact cuboids"
		if w.Mechanism == MechanismGaussian {
			m.Mechanism = "Gaussian noise on a power-of-two grid (exact discrete Gaussian) on every query of each measurement (integer combinations of counts, exactly on the grid: a factor with real weights is quantised to integers first; " +
				"Helmert contrasts rounded to the grid exactly, the rounding counted in the sensitivity), calibrated to its L2 sensitivity under the exact cuboids"
		}
	}
	if c := w.Certificate; c != nil {
		bound, gap := c.Bound, c.Gap
		m.SplitBound, m.SplitGap, m.SplitMethod, m.SplitBoundOver = &bound, &gap, c.Method, c.Over
		if m.SplitBoundOver == "" {
			m.SplitBoundOver = fmt.Sprintf("every split of the budget among the %d measurements planned", len(w.Measurements))
		}
	}
	if b := w.LowerBound; b != nil {
		lb := *b
		m.LowerBound = &lb
	}
	switch {
	case !m.Private:
		m.Guarantee = privacy.GuaranteeNone
	case w.Conditional:
		m.Guarantee = privacy.GuaranteeConditional
		m.GuaranteeNote = "a sensitivity given by the caller, where knowdp could not compute one, must be at least the true generic sensitivity"
	}
	if c := w.solve; c != nil {
		m.Estimate = fmt.Sprintf("one generalised least-squares estimate of the leaf table (weights 1/variance) subject to the exact views, "+
			"by preconditioned conjugate gradients with Kronecker products: the normal equations met to a relative residual of %.3g (asked: %.3g) in %d iterations; "+
			"every table is derived from it, so all agree with each other and with the exact views", c.Residual, c.Tolerance, c.Iterations)
		if w.Mechanism != MechanismGaussian {
			m.MOE = "half-width of the interval that holds the true count with probability 90% under the mechanism, from the noise alone (never the data): " +
				"1.645 times the exact standard deviation of the cell's error, a sum of independent Laplace variables (for one Laplace variable this covers 90.2%; the coverage is tested by simulation)"
		}
	}
	if w.postProcessed() {
		m.Estimate += "; then post-processed table by table, smallest first, each kept consistent with the exact cuboids and with the tables processed before it (see each table's nonneg and integer fields)"
		m.MOE += "; for non-negative and integer tables it is the margin of the least-squares estimate (plus 1 for integer rounding): non-negativity moves cells near zero by data-dependent amounts it does not cover"
	}
	m.Hierarchy, m.Levels = w.Hierarchy, w.publishedLevels()
	if w.Hierarchy != "" && w.Mechanism != MechanismGaussian && w.solve == nil {
		m.MOE += "; across the hierarchy the smallest terms of a cell's error (many small Laplace variables, those of its law beyond the largest it keeps exactly) are taken as normal, which moves the coverage by at most each level's moe90_coverage_error (a proven bound)"
	}
	if w.Unit != nil {
		m.PrivacyUnit = w.Unit.metadata()
		m.Mechanism += fmt.Sprintf(", times %d rows per privacy unit (column %q)", w.Unit.MaxRows, w.Unit.Column)
		if w.Unit.Share > 0 {
			m.Composition += "; plus the privacy unit's own mechanisms (privacy_unit: the choice of the rows per unit, the count of truncated units)"
		}
	}
	if w.Seeded {
		m.Warnings = append(m.Warnings, "seeded noise: the release is reproducible and NOT differentially private")
	}
	if w.DomainsFromData {
		m.Warnings = append(m.Warnings, "domains read from the data: the set of cells released depends on who is in the table; NOT differentially private")
	}
	if w.Conditional {
		m.Warnings = append(m.Warnings, "the guarantee is conditional: "+m.GuaranteeNote)
	}
	for _, t := range w.Tables {
		if t.Public {
			m.Warnings = append(m.Warnings, fmt.Sprintf("the counts of %s are the TRUE counts: the table is determined by the exact tables (%s), so no noise is added", s.FormatView(t.TableView()), t.SensitivityRule))
		}
	}
	for _, t := range w.Tables {
		cells := s.ViewSize(t.TableView())
		if t.Query.Kind != QueryCells {
			cells = TableTerm(s, t.TableView(), t.Query).Rows()
		}
		tm := sidecar.TableMetadata{
			Cuboid: nonNil(s.ViewNames(t.TableView())), File: t.FileName(s), Cells: cells, Weight: t.Weight, Queries: t.Query.describe(s), TargetMOE90: t.TargetMOE90, WithoutInvariants: t.WithoutInvariants,
			Public: t.Public, Measured: t.Measured, MOE90: t.CellMOE90(), Variance: t.Variance,
			NonNegative: t.NonNegative, NonNegativeResidual: t.NonNegativeResidual,
			Integer: t.Integer, IntegerMethod: t.IntegerMethod, IntegerMaxDeviation: t.IntegerMaxDeviation,
		}
		if t.Integer {
			exact := t.IntegerExact
			tm.IntegerExact = &exact
		}
		switch {
		case t.Public:
			tm.Note = t.SensitivityRule
		case !t.Measured:
			tm.Note = "not measured itself: estimated from the measurements of the cuboids that contain it"
		}
		m.Tables = append(m.Tables, tm)
	}
	for _, x := range w.Measurements {
		m.Measurements = append(m.Measurements, sidecar.MeasurementInfo{
			Cuboid: nonNil(s.ViewNames(measuredView(x.Cuboid, x.View))), Share: x.Share, Sensitivity: x.Sensitivity,
			SensitivityRule: x.SensitivityRule, Scale: x.Scale, Grid: x.Grid,
			RhoShare: x.RhoShare, L2Sensitivity: x.L2Sensitivity, L2Rule: x.L2Rule, Sigma: x.Sigma,
		})
		switch {
		case x.Queries != "":
			m.Measurements[len(m.Measurements)-1].Queries = x.Queries
		case x.Residual:
			m.Measurements[len(m.Measurements)-1].Queries = "residual"
		}
	}
	for _, v := range w.Invariants {
		m.Exact = append(m.Exact, nonNil(s.ViewNames(measuredView(v.Cuboid, v.View))))
	}
	return m
}

// publishedLevels is the error by level with the margins of error of the
// tables as published: each cell's moe90 column (Table.CellMOE), which
// adds 1 to an integer table's margin for the rounding, so that the
// summary by level and the tables agree.
func (w *Release) publishedLevels() []sidecar.LevelError {
	if len(w.Levels) == 0 {
		return w.Levels
	}
	out := make([]sidecar.LevelError, len(w.Levels))
	for i, l := range w.Levels {
		sum, most, cells := 0.0, 0.0, 0
		for _, t := range w.Tables {
			if !slices.Contains(l.Tables, w.Schema.FormatView(t.TableView())) {
				continue
			}
			for c := range t.Counts {
				m := t.CellMOE(c)
				sum += m
				most = max(most, m)
			}
			cells += len(t.Counts)
		}
		l.Tables = slices.Clone(l.Tables)
		if cells > 0 {
			l.MeanMOE90, l.MaxMOE90 = sum/float64(cells), most
		}
		out[i] = l
	}
	return out
}
