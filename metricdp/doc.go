// Package metricdp answers linear queries over histograms with d_X-privacy
// (Kamalaruban, Perrier, Asghar and Kaafar, "Not All Attributes are Created
// Equal: d_X-Private Mechanisms for Linear Queries", PoPETs 2020): every pair
// of universe elements (u_i, u_j) has its own privacy budget d(u_i, u_j), and
// moving one record from u_i to u_j changes the probability of any output
// by at most a factor exp(d(u_i, u_j)). A constant d = eps is ordinary
// (bounded) eps-differential privacy; a distance that grows with how
// different two elements are protects fine detail (a house, a date, a rare
// attribute value) while letting coarse structure through with less noise.
//
// The package has
//
//   - metrics over a finite universe (Metric): scaled Euclidean, great-circle,
//     attribute-value sensitivity for tabular data, scaled dates, L-infinity
//     for time series, shortest paths on a weighted graph, and threshold
//     ("Blowfish") policies closed into metrics by shortest paths, with
//     Validate and Closure for metrics given as matrices;
//   - generalised sensitivity and the noise scales of the d_X-private Laplace
//     mechanism for one query (Scale) and for k queries (Allocate, with the
//     paper's strategies 1-3 and the optimal allocation), and the baseline
//     eps-DP scale they improve on (Baseline);
//   - mechanisms: Laplace, Exponential, SmallDB, MWEM, and the
//     statistical-query (k-way marginal) variant of the paper's Appendix C;
//   - ParseSpec, the metric specification language of "knowdp dx".
//
// The paper's text lost its formulas; what is implemented is derived in the
// doc comments (and, for the optimal allocation, in docs/metricdp.md), and
// each place where we had to reconstruct the paper (its Algorithm 3, the
// Blowfish metrics of Section 4.4, the attribute metric of Section 5) says
// so in its doc comment.
//
// Noise is floating-point safe: answers are computed exactly and rounded to
// the power-of-two grid of noise.Laplace, and each mechanism checks its
// per-pair condition (the exact worst-case privacy loss of the grid noise
// for every pair of universe elements is at most their distance) before it
// releases anything.
package metricdp
