// Package sidecar holds the one sidecar format: the privacy story written
// beside every knowdp release, as release.json beside the tables of a
// release of several tables, or OUT.json beside the OUT.csv of a one-table
// release.
//
// A sidecar says what was done to the data, in numbers and in words: the
// mechanism, the privacy loss spent (epsilon, or zCDP rho with its
// equivalent epsilon at delta), the neighbour relation the guarantee is
// about, every noisy measurement with its sensitivity and noise, every
// released table with its margin of error, the invariants published
// exactly, and whether the release is private at all (a seeded run, or
// one whose domains were read from the data, is not, and says so).
//
// knowdp release and knowdp-beam write it, knowdp serve answers with it
// (the "privacy" of an answer), and knowdp report, the Python package and
// any other reader read it. The types here are the format only: package
// release fills them (Release.Metadata, CuboidRelease.Metadata), and this
// package imports nothing of knowdp, so that a reader needs none of the
// engines.
package sidecar

// Metadata is the privacy story of a release of tables, as written to
// release.json.
type Metadata struct {
	// Mechanism says in words which noise was added to what; Composition
	// how the measurements' losses add up.
	Mechanism   string `json:"mechanism"`
	Composition string `json:"composition"`
	// Epsilon is the loss spent, as a reader reads it: the shortest
	// decimal at least the exact spend (StatedUp: 1 for a spend of
	// 0.9999999999990905 on the 2^-40 grid), so that it is never
	// understated; EpsilonExact is the spend itself.
	Epsilon      float64 `json:"epsilon"`
	EpsilonExact float64 `json:"epsilon_exact"`
	Budget       float64 `json:"epsilon_budget,omitempty"`
	// A Gaussian release: its zCDP loss (stated up as Epsilon is, and
	// exactly), budget, and the delta at which Epsilon is its equivalent
	// (eps, delta) guarantee.
	Rho       float64 `json:"rho,omitempty"`
	RhoExact  float64 `json:"rho_exact,omitempty"`
	RhoBudget float64 `json:"rho_budget,omitempty"`
	Delta     float64 `json:"delta,omitempty"`
	// Neighbours describes the neighbour relation the guarantee is about;
	// Split how the budget was divided among the measurements.
	Neighbours string `json:"neighbours"`
	Split      string `json:"split"`
	// Strategy is what was measured: "requested", "marginals" (cuboids
	// under the requested ones, chosen by the split), "residuals"
	// (ResidualPlanner's Helmert contrasts, Gaussian noise), "lattice"
	// (cuboids anywhere in the lattice, Laplace noise) or "given"; for
	// prefix and range tables "best", and StrategyFamily names the family
	// the strategy search chose.
	Strategy       string `json:"strategy"`
	StrategyFamily string `json:"strategy_family,omitempty"`
	// Objective is the weighted total variance Σ_C w_C |C| Var ŷ_C that the
	// split minimises, at the shares given, and ObjectiveOf says so in
	// words. With the optimal split, SplitBound is a proved lower bound of
	// its minimum over every split of the budget among the candidate
	// measurements of the families searched (SplitBoundOver names them: it
	// is not a bound over every strategy), SplitGap is (Objective -
	// SplitBound) / Objective, and SplitMethod says how both were found.
	// LowerBound, where one is known, bounds the objective over every
	// strategy of the mechanism class.
	Objective      float64  `json:"objective"`
	ObjectiveOf    string   `json:"objective_of"`
	SplitBound     *float64 `json:"split_lower_bound,omitempty"`
	SplitGap       *float64 `json:"split_gap,omitempty"`
	SplitBoundOver string   `json:"split_bound_over,omitempty"`
	SplitMethod    string   `json:"split_method,omitempty"`
	LowerBound     *Bound   `json:"lower_bound,omitempty"`
	// Guarantee is "unconditional", "conditional" or "none"
	// (privacy.GuaranteeUnconditional...); GuaranteeNote says on what a
	// conditional guarantee rests.
	Guarantee     string `json:"guarantee"`
	GuaranteeNote string `json:"guarantee_note,omitempty"`
	// Estimate says how the tables were estimated from the measurements,
	// and MOE what their margins of error are and how they were computed.
	Estimate string `json:"estimate"`
	MOE      string `json:"moe90"`
	// Measurements are the noisy measurements the budget was spent on,
	// Tables the released tables, and Exact the invariants (each named by
	// its dimensions, or its dimensions at their levels), published as
	// they are.
	Measurements []MeasurementInfo `json:"measurements"`
	Tables       []TableMetadata   `json:"tables"`
	Exact        [][]string        `json:"exact"`
	// Seeded is true when the noise came from a seeded generator, FromData
	// when the domains were read from the data: Private is then false.
	Seeded   bool `json:"seeded"`
	FromData bool `json:"domains_from_data"`
	Private  bool `json:"private"`
	// Warnings say, in words, what a reader must know: that the release
	// is not private, that its guarantee rests on a claim, that a table's
	// counts are the true counts.
	Warnings []string `json:"warnings"`
	// A release of views across a hierarchy: its dimension and the
	// error of its tables level by level.
	Hierarchy string       `json:"hierarchy,omitempty"`
	Levels    []LevelError `json:"levels,omitempty"`
	// PrivacyUnit is set for a release per privacy unit: what the
	// guarantee protects and how each unit was bounded.
	PrivacyUnit *UnitMetadata `json:"privacy_unit,omitempty"`
}

// MeasurementInfo describes one noisy measurement of a release.
type MeasurementInfo struct {
	// Cuboid names the measured table by its dimensions (at their levels
	// for a view of a hierarchy).
	Cuboid []string `json:"cuboid"`
	// Share is the epsilon of a Laplace measurement; Sensitivity the L1
	// sensitivity its noise is calibrated to, from SensitivityRule; Scale
	// the Laplace scale and Grid the grid its outputs lie on.
	Share           float64 `json:"epsilon,omitempty"`
	Sensitivity     int     `json:"sensitivity"`
	SensitivityRule string  `json:"sensitivity_rule"`
	Scale           float64 `json:"scale,omitempty"`
	Grid            float64 `json:"grid"`
	// A Gaussian measurement: its rho, L2 sensitivity (from L2Rule) and
	// the noise's standard deviation.
	RhoShare      float64 `json:"rho,omitempty"`
	L2Sensitivity float64 `json:"l2_sensitivity,omitempty"`
	L2Rule        string  `json:"l2_sensitivity_rule,omitempty"`
	Sigma         float64 `json:"sigma,omitempty"`
	// Queries says what was measured when it is not the cuboid's cells:
	// "residual" for the cuboid's Helmert contrasts (Sigma is then the
	// noise on each normalised contrast).
	Queries string `json:"queries,omitempty"`
}

// TableMetadata describes one released table.
type TableMetadata struct {
	// Cuboid names the table by its dimensions, File is its file in the
	// release's directory and Cells its number of cells.
	Cuboid []string `json:"cuboid"`
	File   string   `json:"file"`
	Cells  int      `json:"cells"`
	// Weight is the table's weight in the objective.
	Weight float64 `json:"weight"`
	// Public is true when the table is determined by the invariants (its
	// counts are the true counts); Measured when it has a measurement of
	// its own.
	Public   bool `json:"public"`
	Measured bool `json:"measured"`
	// MOE90 is the margin of error of its cells (as written in the moe90
	// column: plus 1 for an integer table) and Variance their variance.
	MOE90    float64 `json:"moe90"`
	Variance float64 `json:"variance"`
	// Queries says what the table publishes when it is not its cells
	// ("prefix sums along checks", "every range along age"; Cells is then
	// the number of queries).
	Queries string `json:"queries,omitempty"`
	// TargetMOE90 is the margin of error the budget was chosen to meet.
	TargetMOE90 float64 `json:"target_moe90,omitempty"`
	// WithoutInvariants is what each invariant costs the table: its error
	// without it (and without every invariant), beside Variance and MOE90
	// with them all.
	WithoutInvariants []InvariantCost `json:"without_invariants,omitempty"`
	// Note says why a table is public or has no measurement of its own.
	Note string `json:"note,omitempty"`
	// Post-processing: a non-negative table and the largest violation of
	// its optimality conditions; an integer table, whether every invariant
	// holds exactly (set, true or false, for integer tables only), how it
	// was rounded and the largest deviation from an invariant.
	NonNegative         bool    `json:"nonneg,omitempty"`
	NonNegativeResidual float64 `json:"nonneg_residual,omitempty"`
	Integer             bool    `json:"integer,omitempty"`
	IntegerExact        *bool   `json:"integer_exact,omitempty"`
	IntegerMethod       string  `json:"integer_method,omitempty"`
	IntegerMaxDeviation float64 `json:"integer_max_deviation,omitempty"`
}

// InvariantCost is a table's error when some invariants are left out:
// publishing a view exactly fixes the residuals under it but changes the
// neighbours every measurement is calibrated to, so an invariant can lower
// the error of some tables and raise that of others.
type InvariantCost struct {
	// Without names the invariants left out (each as its dimensions).
	Without [][]string `json:"without"`
	// Variance is the table's cell variance (the largest, across a
	// hierarchy) in the plan without them; MOE90 its margin of error.
	Variance float64 `json:"variance"`
	MOE90    float64 `json:"moe90"`
	// Note says why there is no figure (the plan without them is
	// refused), when there is none.
	Note string `json:"note,omitempty"`
}

// Bound is a lower bound on a release's objective, named for what it
// bounds.
type Bound struct {
	// Value is the bound.
	Value float64 `json:"value"`
	// Over says which strategies it bounds.
	Over string `json:"over"`
	// Method says how it was obtained.
	Method string `json:"method"`
}

// LevelError is the expected error of the cells of a release's tables at
// one level of its hierarchy, as statistical agencies report accuracy by
// geographic level. It is computed from the mechanism alone, never the
// data.
type LevelError struct {
	// Level names the hierarchy's level, or "total" for tables that sum it
	// out.
	Level string `json:"level"`
	// Tables are the released tables at that level, and Cells their cells.
	Tables []string `json:"tables"`
	Cells  int      `json:"cells"`
	// MeanAbsError is the expected absolute error of a cell, averaged over
	// the cells (of the least-squares estimate); MeanMOE90 and MaxMOE90 the
	// mean and largest margin of error: in a release's own summary those
	// of the estimate, in Metadata.Levels those the tables publish in their
	// moe90 column (plus 1 for integer rounding).
	MeanAbsError float64 `json:"expected_mean_abs_error"`
	MeanMOE90    float64 `json:"mean_moe90"`
	MaxMOE90     float64 `json:"max_moe90"`
	// MOE90CoverageError bounds how far the probability that a margin of
	// error covers the true count may be from 90% because the smallest
	// terms of a cell's error (many tiny Laplace variables) were taken as
	// normal: a proven bound, the largest over the level's cells, beside
	// the 1e-6 of the numerical inversion; 0 when every margin is computed
	// from its whole law.
	MOE90CoverageError float64 `json:"moe90_coverage_error"`
}

// UnitMetadata is the privacy unit's part of a release's metadata: what
// the guarantee protects when rows belong to units (persons, households)
// and how each unit was bounded.
type UnitMetadata struct {
	// Column is the unit column (read, never released); MaxRows is K.
	Column  string `json:"column"`
	MaxRows int    `json:"max_rows"`
	// MaxRowsChoice says where K came from: "given", or the private
	// quantile that chose it (with MaxRowsEpsilon, its cost).
	MaxRowsChoice  string  `json:"max_rows_choice"`
	MaxRowsEpsilon float64 `json:"max_rows_epsilon,omitempty"`
	// Bounding, Neighbours, Guarantee, Sensitivity and Invariants say in
	// words how the units were bounded and what the guarantee covers.
	Bounding    string `json:"bounding"`
	Neighbours  string `json:"neighbours"`
	Guarantee   string `json:"guarantee"`
	Sensitivity string `json:"sensitivity"`
	Invariants  string `json:"invariants,omitempty"`
	// Noise says how the tables' error depends on K; Truncation what is
	// published about the rows the bounding dropped.
	Noise      string `json:"noise"`
	Truncation string `json:"truncation"`
	// TruncatedUnits is the private count of units with more than MaxRows
	// rows, when one was published.
	TruncatedUnits *TruncatedUnits `json:"truncated_units,omitempty"`
	// Epsilon (Rho for a Gaussian release) is what the units' own
	// mechanisms cost, included in the release's total.
	Epsilon float64 `json:"epsilon,omitempty"`
	Rho     float64 `json:"rho,omitempty"`
}

// TruncatedUnits is a private count of the units with more than MaxRows
// rows: the true count plus discrete Laplace noise.
type TruncatedUnits struct {
	// MaxRows is K; Count the noisy count, MOE90 its margin of error and
	// Epsilon its cost.
	MaxRows int     `json:"max_rows"`
	Count   float64 `json:"count"`
	MOE90   float64 `json:"moe90"`
	Epsilon float64 `json:"epsilon"`
}
