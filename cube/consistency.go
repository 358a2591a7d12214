package cube

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
)

// Invariant is an exact cuboid: counts that are public and that a release
// must reproduce exactly. Counts are in the cuboid's row-major order.
type Invariant struct {
	Cuboid Cuboid
	Counts []float64
}

// Invariants returns the exact counts of the given cuboids of c.
func (c *Cube) Invariants(exact []Cuboid) []Invariant {
	inv := make([]Invariant, len(exact))
	for i, e := range exact {
		inv[i] = Invariant{Cuboid: e, Counts: c.Project(e)}
	}
	return inv
}

// constraint is an invariant re-expressed over the array being made
// consistent: the marginal of x onto keep must equal target.
type constraint struct {
	keep   Cuboid // dimensions numbered within the array
	target []float64
	deg    float64 // cells of the array per cell of the marginal
}

// Consistent replaces x, the noisy counts of cuboid over (row-major over its
// dimensions), by the least-squares solution of
//
//	minimise ||y - x||_2  subject to  marginal of y on [Ci] ∩ [over] = ci for every invariant,
//
// the consistency step of paper 3 (Section 6, eqs. 2-7). Each invariant is
// one projection, y(a) += (c(b) - sum_{a' in Base(b)} y(a')) / deg: one pass
// to sum and one to add. On a product domain the projections of different
// cuboids commute, so one sweep gives the exact least-squares solution for
// any number of overlapping invariants (MATH.md section 3), and applying one
// projection never undoes an earlier one when the invariants agree on their
// common margins. Invariants that disagree are rejected with an error naming
// the cell where they differ, and x is left unchanged.
func Consistent(s *Schema, over Cuboid, x []float64, inv []Invariant) error {
	cons, err := constraints(s, over, x, inv)
	if err != nil {
		return err
	}
	applyConstraints(s.subSizesOf(over), x, cons)
	return nil
}

func applyConstraints(sizes []int, x []float64, cons []constraint) {
	for _, c := range cons {
		sum := make([]float64, len(c.target))
		project(sizes, c.keep, x, sum)
		for i := range sum {
			sum[i] = (c.target[i] - sum[i]) / c.deg
		}
		broadcastAdd(sizes, c.keep, x, sum)
	}
}

func (s *Schema) subSizesOf(c Cuboid) []int { return subSizes(s.Sizes(), c) }

// constraints validates the invariants and reduces them to the distinct,
// non-redundant constraints they put on cuboid over.
func constraints(s *Schema, over Cuboid, x []float64, inv []Invariant) ([]constraint, error) {
	base := Base(s.NumDims())
	if over&^base != 0 {
		return nil, fmt.Errorf("cuboid %#x has dimensions beyond the schema's %d", uint64(over), s.NumDims())
	}
	if want := s.CuboidSize(over); len(x) != want {
		return nil, fmt.Errorf("cuboid %s has %d cells, got %d values", s.Format(over), want, len(x))
	}
	for _, v := range inv {
		if v.Cuboid&^base != 0 {
			return nil, fmt.Errorf("exact cuboid %#x has dimensions beyond the schema's %d", uint64(v.Cuboid), s.NumDims())
		}
		if want := s.CuboidSize(v.Cuboid); len(v.Counts) != want {
			return nil, fmt.Errorf("exact cuboid %s has %d cells, got %d counts", s.Format(v.Cuboid), want, len(v.Counts))
		}
		for i, c := range v.Counts {
			if math.IsNaN(c) || math.IsInf(c, 0) || c < 0 {
				return nil, fmt.Errorf("exact cuboid %s, cell %s: count %v must be finite and non-negative", s.Format(v.Cuboid), s.cellLabel(v.Cuboid, i), c)
			}
		}
	}
	if err := checkAgreement(s, inv); err != nil {
		return nil, err
	}
	// Each invariant constrains the marginal on [Ci] ∩ [over]. A constraint
	// whose dimensions are a subset of another's is implied by it.
	var keepers []Invariant
	for i, v := range inv {
		k := v.Cuboid & over
		implied := false
		for j, w := range inv {
			kw := w.Cuboid & over
			if k.AncestorOf(kw) && (k != kw || j < i) {
				implied = true
				break
			}
		}
		if !implied {
			keepers = append(keepers, v)
		}
	}
	sizes := s.Sizes()
	cons := make([]constraint, 0, len(keepers))
	for _, v := range keepers {
		k := v.Cuboid & over
		target := make([]float64, s.CuboidSize(k))
		project(subSizes(sizes, v.Cuboid), reindex(k, v.Cuboid), v.Counts, target)
		cons = append(cons, constraint{
			keep:   reindex(k, over),
			target: target,
			deg:    float64(s.CuboidSize(over) / s.CuboidSize(k)),
		})
	}
	return cons, nil
}

// checkAgreement verifies that every two invariants have the same counts on
// the cuboid of their common dimensions. That is also sufficient for a
// table (with real counts) satisfying all of them to exist.
func checkAgreement(s *Schema, inv []Invariant) error {
	sizes := s.Sizes()
	for i := range inv {
		for j := i + 1; j < len(inv); j++ {
			a, b := inv[i], inv[j]
			common := a.Cuboid & b.Cuboid
			pa := make([]float64, s.CuboidSize(common))
			pb := make([]float64, len(pa))
			project(subSizes(sizes, a.Cuboid), reindex(common, a.Cuboid), a.Counts, pa)
			project(subSizes(sizes, b.Cuboid), reindex(common, b.Cuboid), b.Counts, pb)
			for k := range pa {
				if math.Abs(pa[k]-pb[k]) > 1e-9*math.Max(1, math.Max(math.Abs(pa[k]), math.Abs(pb[k]))) {
					where := "the grand total"
					if common != 0 {
						where = "cell " + s.cellLabel(common, k) + " of their common cuboid " + s.Format(common)
					}
					return fmt.Errorf("%w: exact cuboids %s and %s disagree on %s: %v vs %v",
						ErrInconsistent, s.Format(a.Cuboid), s.Format(b.Cuboid), where, pa[k], pb[k])
				}
			}
		}
	}
	return nil
}

// ErrInconsistent is matched by errors about invariants that no table can
// satisfy together.
var ErrInconsistent = errors.New("inconsistent invariants")

// cellLabel formats cell i of cuboid c as "sex=F, age=21-30".
func (s *Schema) cellLabel(c Cuboid, i int) string {
	dims := c.Dims()
	parts := make([]string, len(dims))
	for k := len(dims) - 1; k >= 0; k-- {
		d := s.dims[dims[k]]
		parts[k] = d.Name + "=" + d.Values[i%len(d.Values)]
		i /= len(d.Values)
	}
	return strings.Join(parts, ", ")
}

// NonNegative configures ConsistentNonNegative.
type NonNegative struct {
	// Tol bounds the optimality conditions of the result (see
	// ConsistentNonNegative); 0 means 1e-6.
	Tol float64
	// MaxIter bounds the number of alternating projections; 0 means 10000.
	MaxIter int
}

// ConsistentNonNegative replaces x by the least-squares point of
// {y >= 0 : y satisfies every invariant}, computed with Dykstra's
// alternating projections between the invariants' affine set (one sweep of
// Consistent) and the non-negative orthant.
//
// The result satisfies the invariants exactly (to float rounding) and meets
// the Karush-Kuhn-Tucker conditions of the problem to within Tol: no cell is
// below -Tol, and with the multipliers mu >= 0 that Dykstra's corrections
// carry for the orthant, the stationarity residual (the part of x - y + mu
// the invariants cannot absorb) and the complementarity products mu_i y_i
// are at most Tol in every cell. It fails if that is not reached within
// MaxIter sweeps (for example when no non-negative table satisfies the
// invariants), leaving x unchanged. It returns the number of sweeps used.
func ConsistentNonNegative(ctx context.Context, s *Schema, over Cuboid, x []float64, inv []Invariant, opt NonNegative) (int, error) {
	res, err := nonNegative(ctx, s, over, x, inv, opt)
	if err != nil {
		return res.sweeps, err
	}
	if res.residual > res.tol {
		return res.sweeps, fmt.Errorf("non-negative consistency did not meet tolerance %g in %d sweeps (residual %g); the invariants may admit no non-negative table", res.tol, res.sweeps, res.residual)
	}
	copy(x, res.y)
	return res.sweeps, nil
}

// nnResult is the outcome of Dykstra's iteration: the last iterate (which
// satisfies the invariants), its KKT residual and the tolerance asked for.
type nnResult struct {
	y        []float64
	sweeps   int
	residual float64
	tol      float64
}

// nonNegative runs Dykstra's iteration until the KKT residual is within
// tolerance or MaxIter sweeps are done. It fails only for invalid input or a
// cancelled context.
func nonNegative(ctx context.Context, s *Schema, over Cuboid, x []float64, inv []Invariant, opt NonNegative) (nnResult, error) {
	if opt.Tol == 0 {
		opt.Tol = 1e-6
	}
	if opt.MaxIter == 0 {
		opt.MaxIter = 10000
	}
	if !(opt.Tol > 0) || math.IsInf(opt.Tol, 0) {
		return nnResult{}, fmt.Errorf("non-negative tolerance must be finite and > 0, got %v", opt.Tol)
	}
	cons, err := constraints(s, over, x, inv)
	if err != nil {
		return nnResult{}, err
	}
	sizes := s.subSizesOf(over)
	// The linear part of the affine projection, for the stationarity test.
	lin := make([]constraint, len(cons))
	for i, c := range cons {
		lin[i] = constraint{keep: c.keep, target: make([]float64, len(c.target)), deg: c.deg}
	}
	// Dykstra: y = P_A(z); z = max(y + q, 0); q = y + q - z. The affine set
	// needs no correction term of its own; -q converges to the orthant's
	// multipliers.
	z := append([]float64(nil), x...)
	res := nnResult{y: make([]float64, len(x)), tol: opt.Tol}
	q := make([]float64, len(x))
	r := make([]float64, len(x))
	for it := 1; it <= opt.MaxIter; it++ {
		copy(res.y, z)
		applyConstraints(sizes, res.y, cons)
		for i := range res.y {
			w := res.y[i] + q[i]
			z[i] = max(w, 0)
			q[i] = w - z[i]
		}
		if it%8 != 1 && it != opt.MaxIter {
			continue
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		res.sweeps = it
		res.residual = kktResidual(sizes, x, res.y, q, r, lin)
		if res.residual <= opt.Tol {
			break
		}
	}
	return res, nil
}

// kktResidual returns the largest violation of the optimality conditions:
// y >= 0, mu_i y_i = 0 with mu = -q, and x - y + mu in the invariants'
// normal space.
func kktResidual(sizes []int, x, y, q, r []float64, lin []constraint) float64 {
	var worst float64
	for i := range y {
		worst = max(worst, -y[i], math.Abs(q[i]*y[i]))
		r[i] = x[i] - y[i] - q[i]
	}
	applyConstraints(sizes, r, lin)
	for _, v := range r {
		worst = max(worst, math.Abs(v))
	}
	return worst
}
