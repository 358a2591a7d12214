package privacy

// Guarantee values of a release's privacy story (a release's sidecar, "guarantee").
const (
	// GuaranteeUnconditional: eps-DP w.r.t. the stated neighbours, with a
	// sensitivity that knowdp computed or checked.
	GuaranteeUnconditional = "unconditional"
	// GuaranteeConditional: eps-DP only if the sensitivity the caller gave
	// (where knowdp knows no closed form) is at least the true one.
	GuaranteeConditional = "conditional"
	// GuaranteeNone: not private (seeded noise or domains from the data).
	GuaranteeNone = "none"
)
