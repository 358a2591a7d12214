// Package hier computes the exact weighted least-squares (GLS) estimate of
// a set of marginal tables of a data cube whose dimensions are ONE
// hierarchical dimension (a geography: leaves, coarser groups, the total)
// crossed with any number of flat dimensions, from noisy and exact
// measurements of such tables, together with the law of the error of every
// estimated cell. It is pure arithmetic: no I/O, no privacy accounting.
//
// # Model
//
// The unknown x is the base table over (hierarchy leaves × flat cells).
// Level 0 of the hierarchy holds the leaves, levels 1..L-1 coarser groups
// and level L the root; H_ℓ rolls leaves up to level ℓ. A view (S, ℓ) is the
// marginal M_{S,ℓ} x over the flat dimensions S with the hierarchy at level
// ℓ. Measurement j observes z_j = M_{S_j,ℓ_j} x + e_j with iid noise of
// variance v_j per cell (v_j = 0: exact, an invariant). The estimate
// minimises Σ_j ||z_j - M_j x||² / v_j subject to the exact measurements.
//
// # Residuals
//
// With the centring C_d = I - J/n_d along flat dimension d, the T-residual
// of x, for a set T of flat dimensions, is the table over (leaves × T cells)
//
//	u_T = (I_h ⊗ ⊗_{d∈T} C_d ⊗ ⊗_{d∉T} 1^T) x,
//
// u_∅ being the leaf totals. Writing I = C_d + J/n_d along each d ∈ S gives
//
//	M_{S,ℓ} x = Σ_{T⊆S} broadcast_{S\T}(H_ℓ u_T) / Π_{d∈S\T} n_d.
//
// Summing z_j over S_j \ T and centring over T (o_{j,T}) observes H_{ℓ_j} u_T
// with noise covariance v_j m_{j,T} (I ⊗ ⊗_{d∈T} C_d), m_{j,T} = Π_{d∈S_j\T}
// n_d; the o_{j,T} of different T are independent (the centring projectors
// are orthogonal) and z_j is recovered from them, so
//
//	Σ_j ||z_j - M_j x||²/v_j = Σ_T Σ_{j: S_j⊇T} ||o_{j,T} - H_{ℓ_j} u_T||² / (v_j m_{j,T}).
//
// The problem splits into one problem per residual T. Within T every
// measurement's covariance is the same projector, so the solution is the
// tree problem below applied to each of the Π_{d∈T} n_d columns (a linear
// map applied column by column commutes with the centring, so the result
// is centred even though the centred columns are dependent). A residual
// over a flat dimension of size 1 is identically zero and is skipped.
//
// # The tree problem
//
// One column of one residual: every node of every level is a sum of its
// children. The observations of a level (all measurements at that level
// containing T) are combined by inverse variance, an exact one winning
// (several exact ones must agree within 1e-9 of the sum of the absolute
// values of their rows; Solve checks this on every residual exact
// measurements share, also where no query needs it). Two passes:
//
//   - upward, from the leaves: the estimate z_i of node i from its subtree
//     alone, of variance w_i. With W = Σ_c w_c over its children and σ² its
//     own observation's variance, z_i = a_i y_i + b_i Σ_c z_c with
//     a = W/(σ²+W), b = σ²/(σ²+W), w = σ² W/(σ²+W); w = +Inf when some path
//     from i to a leaf is unobserved, w = 0 when exact. Infinite and zero
//     variances are handled as cases, never through NaN. An exact node
//     whose children are all exact must equal their sum (else the
//     invariants are inconsistent: an error names the measurements).
//   - downward, from the root (f_root = z_root): each node's final value
//     f_p minus Σ_c z_c is shared among the children in proportion to w_c,
//     f_c = z_c + (w_c/W)(f_p - Σ z); children with w = +Inf absorb it
//     equally (their unobserved subtrees then split equally down to the
//     leaves; a deterministic choice affecting only undetermined values).
//
// This is exact Kalman smoothing on the tree (with flat prior); with equal
// variances at every level it is the estimator of Hay et al. (2010). Each
// pass touches every node once, so a residual costs O(nodes × T cells),
// and the whole estimate O(Σ_T nodes × T cells) plus one pass over each
// measurement per residual it contains; the rows of each pass are split
// between the workers.
//
// # Determined tables
//
// The estimate of a view is unique exactly when the view is a function of
// the measured tables. The table of (S, ℓ) is determined iff H_ℓ u_T is
// for every T ⊆ S of dimensions of size > 1, that is iff some measurement
// j has S_j ⊇ T, and the lowest level ℓ* of those measurements satisfies
// ℓ* <= ℓ or Nodes(ℓ) = Nodes(ℓ*) (every group between ℓ and ℓ* has one
// child). Solve refuses a query that is not determined, naming the
// residual (Problem.Determined checks a view in advance).
//
// # Error laws
//
// Every estimated cell is a fixed linear combination of the measurement
// noise. By symmetry (permuting the values of a flat dimension permutes
// cells and noise alike) all flat cells of one hierarchy node of a view
// have the same law up to a permutation of the noise variables: the
// coefficient of noise cell (node k, flat cell t) of measurement j in the
// error of cell (i, s) of view (S, ℓ) is
//
//	K = Σ_{T ⊆ S∩S_j} λ_{T,i,k} α_{T,j} / Π_{d∈S\T} n_d · Π_{d∈T} (δ(s_d, t_d) - 1/n_d),
//
// where λ_{T,i,k} = ∂f_{T,i}/∂y_{T,k} comes from the adjoint (transpose) of
// the tree estimator applied to node i's indicator and α_{T,j} is j's weight
// in its level's combined observation. K depends on t only through the set
// p of common dimensions where t agrees with s; it is shared by
// Π_{d∈(S∩S_j)\p}(n_d - 1) Π_{d∈S_j\S} n_d noise cells. Solution.Law returns
// the terms (j, K, count), equal coefficients merged, and the variance
// Σ K² count v_j. A full law costs one adjoint pass per residual,
// O(Σ_T nodes), plus O(Σ_j Nodes(ℓ_j) 2^|S∩S_j|) for the coefficients.
//
// For national hierarchies the adjoint of node i is non-zero only on the
// chain of i's ancestors and, below it, on the subtrees hanging off that
// chain, which it enters only through the upward pass: the coefficients in
// the subtree of c are zb_c ∂z_c/∂y_k, so the subtree's variance is
// zb_c² Var z_c and its largest coefficient is bounded without expanding
// it. Every child of one chain node gets the same zb, so the children off
// the chain start as one group per chain node, whose variance and bound
// come from the sum of their Var z and the largest of their bounds (made by
// the solve); Solution.Variance sums these in O(depth) per residual.
// LawOptions.MaxTerms expands groups and subtrees best-first by their bound
// (the children of one shape as one block with their number) and keeps the
// largest-|K| terms exactly (with their full counts), returning the
// variance of the rest in Law.Dropped and a bound on each left-out
// variable's standard deviation in Law.DroppedMax.
//
// # Classes of nodes
//
// Every measurement is a whole level's table with one variance, so an
// automorphism of the hierarchy (a permutation of each group's children
// that maps the tree onto itself) maps the problem onto itself, and nodes
// it exchanges have the same error law. Hierarchy.Classes gives these
// orbits (subtree shapes bottom-up, then classes top-down as pairs of the
// parent's class and the node's shape); Solution.TableLaws and
// TableVariances compute one law per class, and Hierarchy.ShapeTree lets
// any quantity computed bottom-up per subtree and top-down per parent (the
// posterior variances of the optimal split) visit one node per shape and
// per class.
package hier
