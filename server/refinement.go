package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/knowdp/knowdp/refine"
)

// maxRefineWork bounds the SVDs of a refinement: distinct base-cell patterns
// times (queries + invariant cells)^2. It depends only on the query and the
// public invariants.
const maxRefineWork = 1 << 28

// maxRefineCells bounds the base cells a refinement scans.
const maxRefineCells = 1 << 22

// maxRefineScan bounds the scan of a refinement over the base cells: cells
// times (queries + invariants).
const maxRefineScan = 1 << 26

// maxRefineColumns bounds the columns of the null-space SVD (queries plus
// invariant cells): its cost grows as their cube.
const maxRefineColumns = 512

// checkRefineWork refuses, from the request and the public schema alone, a
// refinement whose work would exceed the bounds above, before any budget is
// checked or any work done.
func checkRefineWork(d *dataset, rows []sparseRow) error {
	if len(d.inv) == 0 {
		return nil
	}
	cells := d.schema.Cells()
	if cells > maxRefineCells {
		return badInput("refine: the dataset has %d base cells; refinement is available up to %d", cells, maxRefineCells)
	}
	m := 0
	for _, inv := range d.inv {
		m += len(inv.Counts)
	}
	k := len(rows)
	if k+m > maxRefineColumns {
		return badInput("refine: %d queries and %d invariant cells are too many to refine together (at most %d); ask fewer queries or set refine to false", k, m, maxRefineColumns)
	}
	if cells*(k+len(d.inv)) > maxRefineScan {
		return badInput("refine: %d queries over %d base cells are too much work to refine (cells x (queries + invariants) at most %d); ask fewer queries or set refine to false", k, cells, maxRefineScan)
	}
	return nil
}

// invariantRefiner refines noisy answers to linear queries with the equalities
// that the public invariants imply on them.
//
// The invariants say I^T x = c for the base cuboid x (one column of I per
// invariant cell). The answers are mu = W x for the k x N query matrix W.
// An equality beta^T mu = gamma^T c holds on every table that satisfies the
// invariants exactly when W^T beta = I gamma, so the equalities available are
// the null space of [W^T | -I]. Its beta parts, orthonormalised, are the
// constraint matrix B of paper 1 and its gamma parts give the constants. The
// least-squares refinement under B^T mu = c' (refine.Equalities, Theorem 3)
// then uses every piece of invariant knowledge that bears on the answers.
type invariantRefiner struct {
	eqs *refine.Equalities // nil when the invariants imply nothing on the answers
}

func (r *invariantRefiner) constraints() int {
	if r.eqs == nil {
		return 0
	}
	return len(r.eqs.Constraints())
}

func (r *invariantRefiner) refine(ctx context.Context, x []float64) error {
	if r.eqs == nil {
		return nil
	}
	return r.eqs.Refine(x, x)
}

func newInvariantRefiner(ctx context.Context, d *dataset, rows []sparseRow) (*invariantRefiner, error) {
	k := len(rows)
	if len(d.inv) == 0 {
		return &invariantRefiner{}, nil
	}
	s := d.schema
	n := s.NumDims()
	if s.Cells() > maxRefineCells {
		return nil, badInput("refine: the dataset has %d base cells; refinement is available up to %d", s.Cells(), maxRefineCells)
	}
	// Offsets of each invariant's cells among the columns of I.
	m := 0
	offsets := make([]int, len(d.inv))
	for j, inv := range d.inv {
		offsets[j] = m
		m += len(inv.Counts)
	}
	cols := k + m
	if cols > 4096 {
		return nil, badInput("refine: %d queries and %d invariant cells are too many to refine together; ask fewer queries or set refine to false", k, m)
	}
	// W's column at each base cell in the support.
	wcol := map[int][]int64{}
	for i, r := range rows {
		for t, c := range r.cells {
			v := wcol[c]
			if v == nil {
				v = make([]int64, k)
				wcol[c] = v
			}
			v[i] = r.coefs[t]
		}
	}
	// Strides of each invariant cuboid, per schema dimension (0 if absent).
	istride := make([][]int, len(d.inv))
	for j, inv := range d.inv {
		istride[j] = make([]int, n)
		st := 1
		for i := n - 1; i >= 0; i-- {
			if inv.Cuboid.Has(i) {
				istride[j][i] = st
				st *= s.Size(i)
			}
		}
	}
	// One row of [W^T | -I] per distinct pattern of (W column, invariant
	// cells); identical rows do not change the null space.
	patterns := map[string][]int{} // key -> invariant cell per invariant, plus marker
	var order []string
	coord := make([]int, n)
	var key []byte
	zero := make([]int64, k)
	for cell := range s.Cells() {
		if cell&0xffff == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		key = key[:0]
		w := wcol[cell]
		if w == nil {
			w = zero
		}
		for _, v := range w {
			key = binary.AppendVarint(key, v)
		}
		idx := make([]int, len(d.inv))
		for j := range d.inv {
			c := 0
			for i := range n {
				c += coord[i] * istride[j][i]
			}
			idx[j] = c
			key = binary.AppendUvarint(key, uint64(c))
		}
		if _, ok := patterns[string(key)]; !ok {
			patterns[string(key)] = append(idx, cell)
			order = append(order, string(key))
			if len(order)*cols*cols > maxRefineWork {
				return nil, badInput("refine: the queries and invariants are too fine-grained to refine together (over %d distinct cell patterns); ask fewer queries or set refine to false", maxRefineWork/(cols*cols))
			}
		}
		for i := n - 1; i >= 0; i-- {
			coord[i]++
			if coord[i] < s.Size(i) {
				break
			}
			coord[i] = 0
		}
	}
	M := mat.NewDense(len(order), cols, nil)
	for r, key := range order {
		p := patterns[key]
		cell := p[len(p)-1]
		if w := wcol[cell]; w != nil {
			for i, v := range w {
				M.Set(r, i, float64(v))
			}
		}
		for j := range d.inv {
			M.Set(r, k+offsets[j]+p[j], -1)
		}
	}
	null, err := nullSpace(M)
	if err != nil {
		return nil, err
	}
	if null == nil {
		return &invariantRefiner{}, nil
	}
	_, r := null.Dims()
	beta := null.Slice(0, k, 0, r)
	gamma := null.Slice(k, cols, 0, r)
	// Orthonormalise the beta parts: beta = U Sigma V^T, so U_q^T mu =
	// Sigma_q^-1 V_q^T gamma^T c for the q significant directions.
	var svd mat.SVD
	if !svd.Factorize(beta, mat.SVDThin) {
		return nil, fmt.Errorf("refine: SVD failed")
	}
	sv := svd.Values(nil)
	var u, v mat.Dense
	svd.UTo(&u)
	svd.VTo(&v)
	// The columns of null are unit vectors, so beta's singular values are
	// at most 1; a direction with a tiny beta part is a redundancy among
	// the invariants themselves (both margins add up to the total), not
	// an equality on the answers.
	const tol = 1e-9
	cinv := make([]float64, m)
	for j, inv := range d.inv {
		copy(cinv[offsets[j]:], inv.Counts)
	}
	var gc mat.VecDense // gamma^T c
	gc.MulVec(gamma.T(), mat.NewVecDense(m, cinv))
	var eqs []refine.Equality
	for q, sigma := range sv {
		if sigma <= tol {
			continue
		}
		// constant: (1/sigma_q) V_q^T (gamma^T c)
		val := mat.Dot(v.ColView(q), &gc) / sigma
		eq := refine.Equality{Label: fmt.Sprintf("invariant equality %d", len(eqs)+1), Value: val, Public: true}
		for i := range k {
			if b := u.At(i, q); math.Abs(b) > 1e-12 {
				eq.Index = append(eq.Index, i)
				eq.Coef = append(eq.Coef, b)
			}
		}
		eqs = append(eqs, eq)
	}
	if len(eqs) == 0 {
		return &invariantRefiner{}, nil
	}
	e, err := refine.NewEqualities(k, eqs)
	if err != nil {
		return nil, fmt.Errorf("refine: %w", err)
	}
	return &invariantRefiner{eqs: e}, nil
}

// nullSpace returns an orthonormal basis of the null space of M as the
// columns of a matrix, or nil if it is trivial.
func nullSpace(M *mat.Dense) (*mat.Dense, error) {
	rows, cols := M.Dims()
	var svd mat.SVD
	if !svd.Factorize(M, mat.SVDFullV) {
		return nil, fmt.Errorf("refine: SVD failed")
	}
	sv := svd.Values(nil)
	tol := svdTol(sv, rows, cols)
	rank := 0
	for _, s := range sv {
		if s > tol {
			rank++
		}
	}
	if rank == cols {
		return nil, nil
	}
	var v mat.Dense
	svd.VTo(&v)
	out := mat.DenseCopyOf(v.Slice(0, cols, rank, cols))
	return out, nil
}

// svdTol is the threshold below which a singular value counts as zero.
func svdTol(sv []float64, rows, cols int) float64 {
	top := 0.0
	for _, s := range sv {
		top = max(top, s)
	}
	return float64(max(rows, cols)) * top * 1e-12
}
