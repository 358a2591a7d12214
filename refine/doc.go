// Package refine improves noisy answers with what an analyst knows about
// the true ones — linear equalities (sums that hold by definition, totals,
// data-specific facts), orderings and ranges — and accounts for the
// privacy this costs (Ying, Wu and Wang, "On Linear Refinement of
// Differential Privacy-Preserving Query Answering", PAKDD 2013).
//
// # Refinement
//
// Every refinement here is the least-squares one: the vector closest to
// the noisy answers that satisfies the constraints.
//
//   - Equalities: Theorem 3's closed form, unbiased and of minimum variance
//     among linear unbiased refinements, computed from a Householder QR of
//     B in O(n m²) (never (BᵀB)⁻¹). Constraints that share no answer are
//     refined separately; a single constraint (a sum of parts) and
//     hierarchies (Hierarchy: the O(n) tree algorithm of Hay et al. 2010)
//     need no matrix.
//   - Orderings: isotonic regression (Isotonic: pool adjacent violators,
//     O(n)).
//   - Ranges and non-negativity: clipping; with an ordering, the isotonic
//     regression clipped to the bounds tightened along the chain.
//   - Combinations: Dykstra's alternating projections onto the sets above,
//     which converge to the exact least-squares solution (Refiner).
//
// # Privacy
//
// A refinement whose constants are all fixed without looking at the data
// (public equalities, orderings, ranges, non-negativity) is a function of
// the noisy answers alone: post-processing, which keeps their eps
// (Refiner.PostProcessing). The paper's point is the other case: a
// constraint whose constant is computed from this data set (mu_A + mu_B =
// 80 in the grades example) moves with the data, c − c' = Bᵀ(mu − mu'), and
// the refined answers can be far easier to tell apart than the noisy ones.
// Linear.Loss computes that loss exactly for any linear refinement
// x̂ = A x + D c + h and any set of released answers S, and
// Linear.Calibrate the Laplace scale that makes the release eps-DP:
//
//	rho_S = max over neighbours of  min { ‖v‖₁ : A_S v = (A + D Bᵀ)_S (mu − mu') } / sigma,
//
// or +Inf when the shift is outside the range of A_S (the release then
// reveals a constant exactly). Inequality refinements with data-dependent
// bounds are not analysed.
//
// # Deviations from the paper
//
//   - Theorem 2 prints rho = ‖A*D(c − c') − (mu − mu')‖₁ / ‖mu − mu'‖₁; the
//     sign is wrong. With a plus sign (Linear.Theorem2) it is exact for
//     Example 1 (2 eps; the minus gives eps) and for the appendix's
//     refinement, whose A is invertible.
//   - Even corrected, Theorem 2 is not a bound when the two databases'
//     refinements lie on different affine sets (D(c − c') outside the
//     range of A), which is the case of the least-squares refinement under
//     a data-dependent constraint: for B = (1, 0.1) the released x̂₁ has
//     loss 10.1 eps while the corrected formula gives 2.09 eps. Loss is
//     exact in every case, and checked against numerical integration of
//     the density ratio (LogDensityRatio).
//   - The appendix's (k+1) eps/2 is the loss of releasing x̂₁ alone; it is
//     also the loss of releasing (x̂₁, x̂₂) under add/remove neighbours, but
//     under the appendix's own neighbours (one record in either category,
//     a substitution) releasing both costs (k+3) eps/2.
//   - The appendix's refinement is neither constrained nor of rank n − m,
//     so Theorem 2's hypotheses (CheckTheorem2) fail for it.
//
// The analysis assumes exact arithmetic and continuous Laplace noise;
// Calibrate returns package noise's grid Laplace mechanism with
// Loss(g) <= eps for the effective sensitivity g.
package refine
