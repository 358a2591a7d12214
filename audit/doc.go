// Package audit measures the privacy loss of mechanisms empirically and
// demonstrates the attacks of the papers knowdp implements.
//
// # Auditing
//
// A mechanism M claims eps between two neighbouring inputs x and x':
// P[M(x) in S] <= e^eps P[M(x') in S] for every output set S, both ways.
//
//   - Exact auditing, for mechanisms whose output distributions can be
//     computed: eps = max over outputs of |ln P(o|x) - ln P(o|x')|, with
//     the output where it is attained. ExactFinite takes finite
//     distributions (the exponential mechanism, prior refinement, SmallDB),
//     ExactIntegers integer outputs on a window plus Laplace-type tails
//     (discrete and grid Laplace, in grid units), ExactDensities
//     piecewise-constant densities (prior refinement of a continuous prior).
//   - Sampling auditing, for the rest (Sample): draw outputs on both inputs,
//     choose an output set on one half of them, and bound its probabilities
//     on the other half with exact Clopper–Pearson intervals (ClopperPearson).
//     The result is a lower confidence bound on eps: it exceeds the true loss
//     with probability at most alpha, so a bound above the claim (Violation)
//     proves the mechanism broken at that level, while a bound below it only
//     says no violation was found. This is the approach of DP-Sniper
//     (Bichsel et al., S&P 2021) and StatDP (Ding et al., CCS 2018), with the
//     set chosen among thresholds of a scalar statistic of the output.
//
// Cases lists every mechanism of the library with representative (worst-case
// where the library can find them) neighbours, and deliberately broken
// controls that the audit must flag; "knowdp audit" prints the table.
//
// # Attacks
//
// Attacks returns the demonstrations behind "knowdp attack": the
// Kifer–Machanavajjhala reconstruction from exact adjacent sums (paper 3,
// Section 3), the Ying–Wu–Wang refinement attack (paper 1, appendix),
// Mironov's floating-point attack on textbook Laplace noise, and averaging
// repeated answers of a server that does not cache and of knowdp serve
// (package server, run in process), which does. Each writes a CSV file and a
// plot, and contrasts the vulnerable mechanism with knowdp's.
//
// The vulnerable mechanisms (the textbook float Laplace sampler, a server
// that re-noises every repeat) exist only inside the attacks, as victims.
// Runs with a seeded generator are reproducible and NOT private.
package audit
