package sidecar

// CuboidMetadata is the privacy story of one cuboid released on its own
// (release.CuboidRelease, as Plan.Cuboid plans it). The commands write
// Metadata for every release, a one-table release included: this form is
// the library's, for a caller that releases one cuboid and writes its
// story itself.
type CuboidMetadata struct {
	// Mechanism says in words which noise was added and how the counts
	// were made consistent; Epsilon is the loss with respect to
	// Neighbours.
	Mechanism  string  `json:"mechanism"`
	Epsilon    float64 `json:"epsilon"`
	Neighbours string  `json:"neighbours"`
	// Sensitivity is the generic sensitivity the noise is calibrated to
	// and SensitivityRule the result or method it comes from; Scale is the
	// Laplace scale of the noise and Grid the grid its outputs lie on.
	Sensitivity     int     `json:"sensitivity"`
	SensitivityRule string  `json:"sensitivity_rule"`
	Scale           float64 `json:"scale"`
	Grid            float64 `json:"grid"`
	// Cuboid names the released cuboid by its dimensions and Exact the
	// invariants.
	Cuboid []string   `json:"cuboid"`
	Exact  [][]string `json:"exact"`
	// NonNegative is true for a non-negative release, NonNegResidual the
	// largest violation of its optimality conditions.
	NonNegative    bool    `json:"nonneg"`
	NonNegResidual float64 `json:"nonneg_residual,omitempty"`
	// MOE90 is the margin of error written in the CSV's moe90 column and
	// MOE90Note says what it covers.
	MOE90     float64 `json:"moe90"`
	MOE90Note string  `json:"moe90_note"`
	// A Gaussian release: its zCDP rho, the L2 generic sensitivity it is
	// calibrated to (its square, exact, and its rule), the noise's standard
	// deviation, and the delta at which Epsilon is its equivalent (eps,
	// delta) guarantee (Canonne-Kamath-Steinke's conversion).
	Rho               float64 `json:"rho,omitempty"`
	L2Sensitivity     float64 `json:"l2_sensitivity,omitempty"`
	L2Squared         int     `json:"l2_sensitivity_squared,omitempty"`
	L2SensitivityRule string  `json:"l2_sensitivity_rule,omitempty"`
	Sigma             float64 `json:"sigma,omitempty"`
	Delta             float64 `json:"delta,omitempty"`
	// Integer releases: whether every invariant holds exactly (set, true
	// or false, for integer releases only), the largest deviation
	// otherwise, and how the rounding was done.
	Integer             bool    `json:"integer"`
	IntegerExact        *bool   `json:"integer_exact,omitempty"`
	IntegerMaxDeviation float64 `json:"integer_max_deviation,omitempty"`
	IntegerMethod       string  `json:"integer_method,omitempty"`
	// Seeded is true when the noise came from a seeded generator,
	// DomainsFromData when the domains were read from the data.
	Seeded          bool `json:"seeded"`
	DomainsFromData bool `json:"domains_from_data"`
	// Private is false for seeded runs and domains read from the data;
	// when true, Guarantee says whether it rests on the caller's claim.
	Private   bool   `json:"private"`
	Guarantee string `json:"guarantee"`
	// ReleasedExactly is true when the cuboid is determined by the
	// invariants: the counts are the true counts, with no noise.
	ReleasedExactly bool `json:"released_exactly"`
	// Warnings say, in words, what a reader must know besides epsilon.
	Warnings []string `json:"warnings"`
}
