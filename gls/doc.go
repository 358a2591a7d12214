// Package gls computes the generalised least-squares estimate of linear
// queries on a product domain from noisy measurements subject to exact
// ones (invariants), where every set of queries is a Kronecker product of
// one factor per dimension (query.Term). It covers what the closed-form
// estimators do not: two or more hierarchies at coarse levels, prefix and
// range strategies, Helmert residuals, given matrices. It is pure
// mathematics: no schema, no I/O, no privacy accounting.
//
// # Problem
//
// The unknown x is a table over a domain of sizes n_1 × ... × n_D.
// Measurement j observes z_j = M_j x + e_j, with M_j a query.Term and e_j
// independent noise of variance v_j on every row; invariant i states E_i x
// = e_i exactly. The estimate minimises
//
//	Σ_j ||M_j x - z_j||² / v_j  subject to  E_i x = e_i for every i,
//
// and a query Q is answered by Q x̂. With N = Σ_j M_j^T M_j / v_j, b = Σ_j
// M_j^T z_j / v_j, P the orthogonal projector onto the invariants' null
// space and x0 any table meeting them, x̂ = x0 + u where u ∈ range(P)
// solves the normal equations P N P u = P (b - N x0). A query is
// determined when its rows lie in the row space of the measurements and
// invariants; then Q x̂ is the same for every solution, and only then is
// it answered (NewPlan refuses the others, naming them).
//
// NewPlan works from the structure alone (terms and variances, never
// answers); Plan.Solve takes the answers. The answers it reads are the
// noisy measurements and the public invariants, so its iteration count,
// its time and its failures are post-processing.
//
// # Reduction
//
// Along a dimension where every measurement and invariant factor is
// Identity, Total or RollUp, the objective and the constraints depend on x
// only through its sums over the blocks of the meet (coarsest common
// refinement) of their partitions, a surjective linear map; the problem is
// solved over those sums. A dimension used only as a total becomes one
// value; a hierarchy used only at coarse levels is solved at its finest
// used level. A query that does not factor through the blocks tells apart
// values no measurement or invariant does, and is not determined.
//
// # Invariants: one sweep of projections
//
// Let A_π be the averaging projector of a partition π of one dimension
// ((A_π x)_a = the mean of x over a's group). An invariant's factors are
// Identity, Total or RollUp, partitions π_{i,d}; its rows are indicators of
// disjoint blocks, so E_i E_i^T = diag(block sizes) and the projector onto
// its row space is A_i = E_i^T (E_i E_i^T)^{-1} E_i = ⊗_d A_{π_{i,d}}.
// Along each dimension the invariants' partitions are nested (NewPlan
// checks it): if π refines σ, A_π A_σ = A_σ A_π = A_σ. So the A_i commute
// factor by factor, hence as Kronecker products, and
//
//	P = Π_i (I - A_i)
//
// (a product of commuting orthogonal projectors is the orthogonal
// projector onto the intersection of their ranges, here ∩_i ker E_i). The
// projection onto one invariant's affine set is y ↦ y + E_i^T ((e_i - E_i
// y) / size); if x* meets every invariant, it is y ↦ x* + (I - A_i)(y - x*),
// and composing them in any order gives x* + P (y - x*): the projection
// onto {E x = e}. One sweep, each projection a product and a transposed
// product of E_i, is exact; with e = 0 it applies P.
//
// # Consistency
//
// The invariants have a common solution iff every pair agrees on its
// common roll-up (per dimension the coarser of the two partitions, which
// is the join of nested partitions). Necessity is clear. Sufficiency:
// sweep from 0 and suppose y_{k-1} meets invariants 1..k-1; for m < k,
// A_m A_k = A_{mk} (the projector onto the common roll-up), so A_m y_k =
// A_m y_{k-1} + A_{mk} (x*_k - y_{k-1}) = A_m x*_m + A_{mk} x*_k - A_{mk}
// x*_m, and pairwise agreement is A_{mk} x*_k = A_{mk} x*_m. Plan.Solve
// checks every pair (within 1e-9 of the sum of the absolute values added)
// and names the two invariants and the cell where they disagree.
//
// # Atoms and determinacy
//
// Along each dimension R^n splits into orthogonal atoms such that the row
// space of every measurement and invariant factor is a sum of atoms:
//
//   - when the measurements' and invariants' partitions are nested, a
//     chain π_0 (identity) ⊂ π_1 ⊂ ... ⊂ π_L (total), the atoms are W_l =
//     V_l ⊖ V_{l+1} (the functions constant on the groups of π_l summing to
//     zero on each group of π_{l+1}) and the constants V_L, where V_l is
//     π_l's row space (the functions constant on its groups). A level's
//     row space is V_l = W_l ⊕ ... ⊕ W_{L-1} ⊕ V_L; identity, prefix and
//     ranges have full column rank (all atoms); residuals span the
//     contrasts (all but V_L). The Haar basis below is adapted to them.
//   - otherwise (small dimensions only), the atoms are the minimal
//     non-zero products of the row-space projectors and their complements,
//     found by splitting eigenspaces; the projectors must commute, and a
//     factor that cuts across them is refused.
//
// Products of atoms, one per dimension, are then an orthogonal
// decomposition of the domain, and the row space of a term whose factors
// are sums of atoms (a box of atoms) is the sum of the products in its
// box. A query row q = ⊗_d q_d has a component on the product ⊗_d W_{a_d}
// iff every q_d has one on W_{a_d}; choosing such q_d shows that a query
// term is determined iff every product of atoms its factors touch (the
// atoms on which ||F_d P_a|| > 0) lies in the box of some measurement or
// invariant. Plan checks this by splitting the query's box along the
// other boxes' boundaries, and the refusal names the uncovered part.
//
// # Solving
//
// Preconditioned conjugate gradients run on range(P), from u = 0, with the
// operator P N P applied as one product and one transposed product per
// measurement term (axis by axis, never forming the Kronecker product) and
// one sweep; the preconditioner C maps into range(P). The recurrence's
// residual is recomputed from the iterate before it is trusted, and the
// Certificate reports the iterations and the relative residual ||P(b - N
// x̂)|| / (||b|| + ||N x0||) reached (an error when the tolerance is not
// reached within MaxIterations). The final iterate is swept once more so
// that the invariants hold to rounding.
//
// # Preconditioner
//
// Each dimension d has an orthonormal basis U_d whose vectors lie in
// atoms: the Haar basis of its chain (the constant and, for each node with
// children c_1..c_k, the weighted Helmert contrasts f_i ∝ mean over
// c_1..c_{i-1} - mean over c_i, i = 2..k; transforms in O(n + nodes)), or
// an explicit basis (the atoms rotated to the eigenvectors of Σ_j ω_j
// F_j^T F_j compressed to each atom, ω_j = Π_{e≠d} of the mean diagonal of
// F_j's other Grams; transforms in O(n) per cell) for dimensions of at most
// 16 values, and of at most 1,024 where prefix, ranges or given matrices
// are measured or the partitions are not nested. On an ordered dimension
// of 1,000 values measured by prefix sums the explicit basis takes 4
// iterations where the Haar basis takes about 1,800 (BenchmarkPrefix*: go
// test ./gls -run '^$' -bench Prefix). In the tensor basis U = ⊗ U_d every A_i is diagonal with
// 0/1 entries, so P is a mask, and the Kronecker approximation
//
//	N ≈ Σ_j w_j ⊗_d diag(U_d^T F_{j,d}^T F_{j,d} U_d)
//
// is inverted exactly on the unmasked cells (zero where it vanishes, which
// is exactly where N does). The approximation is exact when every Gram is
// diagonal in its basis: identity, total, residuals, and roll-ups whose
// groups within each parent have equal sizes. Unequal groups (counties per
// state) are where it is not; so along one hierarchy, the largest
// dimension whose measurements are all levels of its chain, the Grams are
// kept whole: on each fibre (fixed basis coefficients of the other
// dimensions) the operator is M = Σ_l p_l R_l^T R_l (R_0 = I, R_l the
// roll-up to level l, p_l the fibre's precision at level l), restricted to
// zero sums on the finest level an invariant fixes on that fibre, and it
// is inverted exactly by two passes over the tree. With s(h) a node's sum
// and φ(h) = Σ of p_l s over h and its ancestors, M u = r reads u_x = (r_x
// - φ(parent x))/p_0 at the leaves; by induction upward every node's sum is
// s(h) = α_h - β_h φ(parent h), with at the leaves α = r/p_0, β = 1/p_0
// and above A = Σ_children α, B = Σ_children β, α = A/(1 + B p_l), β =
// B/(1 + B p_l). At the root φ(parent) = 0; downward s(h) = α_h - β_h
// φ(parent), φ(h) = p_l s(h) + φ(parent). A level with zero sums forced
// by a Lagrange multiplier has s = 0, φ = A/B and reports α = β = 0 above
// it. When the lowest levels carry no precision, the pass starts at the
// lowest level that does (r averaged onto its groups: the pseudo-inverse
// on the range of M). The result is symmetric positive semi-definite and
// exact whenever the other dimensions' Grams are diagonal in their bases.
// On the census shape (BenchmarkCensusSolveKronecker and
// BenchmarkCensusSolveJacobi; go test ./gls -run '^$' -bench Census) it
// reaches a relative residual of 1e-10 in 10 iterations where Jacobi takes
// about 160.
//
// # Error laws
//
// For a determined query row q, x̂'s error is q^T (P N P)^+ P Σ_j M_j^T e_j
// / v_j. With g solving P N P g = P q (the same solver), the error is Σ_j
// c_j^T e_j with c_j = M_j g / v_j, and its variance is Σ_j v_j ||c_j||² =
// g^T N g. Plan.Law returns the c_j and the variance: one solve and one
// product per measurement.
//
// Plan.Variances computes every row of a query term with one solve per
// class of rows that share their variance by symmetry:
//
//   - along a dimension where every measurement and invariant factor is
//     identity, total or residual, every permutation of the values fixes
//     N and P, so by Schur's lemma the inverse acts on that dimension as
//     K_0 ⊗ J/n + K_1 ⊗ (I - J/n), and a row's variance depends on its
//     factor's row v only through (Σv)²/n and ||v||² - (Σv)²/n: rows that
//     agree on both share it, and any row is a combination of the
//     variances of the constant and of one contrast;
//   - along a chain whose measurement factors are levels or residuals, the
//     automorphisms of its tree fix N and P: rows of identity, total or
//     roll-up query factors share their variance with their node's orbit
//     (nodes whose parents are in one orbit and whose subtrees are
//     isomorphic).
//
// A census query such as county × broad age takes one solve per
// (state orbit × broad age group) instead of one per cell.
//
// # Costs
//
// With C the reduced domain's cells, one iteration costs, per measurement,
// a product and a transposed product (O(C) per non-identity factor, the
// most shrinking factors first), per invariant two more for the sweep, and
// one preconditioner application (a transform per dimension: O(C) for Haar
// bases, O(C n_d) for explicit ones; the tree passes O(C + fibres ×
// nodes)). NewPlan costs O(n_d²) for the basis diagonals of factors that
// are not levels of their chain, O(n_d³) per explicit basis, and a few
// passes over C.
package gls
