// Package query is knowdp's one model of linear queries on a product
// domain: a set of queries is a Kronecker product of one small matrix per
// dimension, and a workload, a strategy or a set of invariants is a
// weighted union of such products.
//
// A domain is the product of dimensions of sizes n_1, ..., n_d, and a
// table over it is a flat []float64 in row-major order (the last dimension
// varies fastest). Along each dimension a Factor is one of a small family:
//
//   - Identity: every value (n rows);
//   - Total: the sum over the dimension (1 row);
//   - RollUp: the sums over the groups of a partition of the values (a
//     level of a hierarchy: one row per group);
//   - Prefix: every prefix sum x_0 + ... + x_i of an ordered dimension
//     (n rows);
//   - Ranges: every contiguous range x_i + ... + x_j, i <= j, of an ordered
//     dimension (n(n+1)/2 rows, in the order (0,0), (0,1), ..., (0,n-1),
//     (1,1), ...);
//   - Residual: an orthonormal basis of the contrasts (the vectors summing to
//     zero), the Helmert rows: n-1 rows, row k (k = 1, ..., n-1) is
//     (e_0 + ... + e_{k-1} - k e_k) / sqrt(k(k+1)); ResidualPlanner's
//     residual along a dimension, with orthonormal rows so that iid noise on
//     it is noise projected onto the contrasts;
//   - Matrix: a given small matrix.
//
// A cuboid is Identity on its dimensions and Total elsewhere; a table at
// levels of hierarchies is RollUp (Identity at the finest level, Total at
// the root); a ResidualPlanner measurement is Residual on its dimensions and
// Total elsewhere; a prefix workload is Prefix on one ordered dimension.
// The Kronecker product is never formed: Term.Apply and Term.ApplyT apply
// the factors axis by axis, at the cost of the table's cells times the
// factors' work per value.
//
// The package is pure arithmetic: no schema, no names, no privacy.
package query

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Kind says which member of the family a Factor is.
type Kind uint8

const (
	// Identity keeps every value of the dimension.
	Identity Kind = iota
	// Total sums the dimension out.
	Total
	// RollUp sums the values of each group of a partition.
	RollUp
	// Prefix gives every prefix sum of an ordered dimension.
	Prefix
	// Ranges gives the sum of every contiguous range of an ordered
	// dimension.
	Ranges
	// Residual gives the orthonormal Helmert contrasts.
	Residual
	// Matrix applies a given matrix.
	Matrix
)

// String names the kind as workload files and sidecars write it.
func (k Kind) String() string {
	switch k {
	case Identity:
		return "identity"
	case Total:
		return "total"
	case RollUp:
		return "rollup"
	case Prefix:
		return "prefix"
	case Ranges:
		return "ranges"
	case Residual:
		return "residual"
	case Matrix:
		return "matrix"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Factor is the matrix a Kronecker term applies along one dimension of size
// N. Build it with the constructors; the zero Factor is not valid.
type Factor struct {
	Kind Kind
	// N is the dimension's size: the factor's number of columns.
	N int
	// Group, for RollUp, gives each value's group, 0 <= Group[i] < Groups,
	// every group non-empty.
	Group  []int32
	Groups int
	// M, for Matrix, is the matrix, row-major with N columns.
	M    []float64
	rows int
}

// NewIdentity returns the identity along a dimension of size n.
func NewIdentity(n int) Factor { return Factor{Kind: Identity, N: n, rows: n} }

// NewTotal returns the sum along a dimension of size n.
func NewTotal(n int) Factor { return Factor{Kind: Total, N: n, rows: 1} }

// NewPrefix returns the prefix sums along an ordered dimension of size n.
func NewPrefix(n int) Factor { return Factor{Kind: Prefix, N: n, rows: n} }

// NewRanges returns the sums of every contiguous range of an ordered
// dimension of size n.
func NewRanges(n int) Factor { return Factor{Kind: Ranges, N: n, rows: n * (n + 1) / 2} }

// NewResidual returns the n-1 orthonormal Helmert contrasts of a dimension
// of size n.
func NewResidual(n int) Factor { return Factor{Kind: Residual, N: n, rows: n - 1} }

// NewRollUp returns the sums over the groups of a partition: group[i] is the
// group of value i. Groups are numbered 0, 1, ... and none may be empty.
func NewRollUp(group []int32) (Factor, error) {
	if len(group) == 0 {
		return Factor{}, errors.New("query: a roll-up of an empty dimension")
	}
	k := int(slices.Max(group)) + 1
	seen := make([]bool, k)
	for i, g := range group {
		if g < 0 {
			return Factor{}, fmt.Errorf("query: value %d has the negative group %d", i, g)
		}
		seen[g] = true
	}
	for g, ok := range seen {
		if !ok {
			return Factor{}, fmt.Errorf("query: group %d of the roll-up is empty", g)
		}
	}
	return Factor{Kind: RollUp, N: len(group), Group: slices.Clone(group), Groups: k, rows: k}, nil
}

// NewMatrix returns the given rows x n matrix (row-major).
func NewMatrix(rows, n int, m []float64) (Factor, error) {
	switch {
	case rows < 1 || n < 1:
		return Factor{}, fmt.Errorf("query: a %d x %d matrix", rows, n)
	case len(m) != rows*n:
		return Factor{}, fmt.Errorf("query: a %d x %d matrix needs %d entries, got %d", rows, n, rows*n, len(m))
	}
	for i, v := range m {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return Factor{}, fmt.Errorf("query: matrix entry (%d, %d) is %v", i/n, i%n, v)
		}
	}
	return Factor{Kind: Matrix, N: n, M: slices.Clone(m), rows: rows}, nil
}

// Rows returns the number of queries the factor asks along its dimension.
func (f Factor) Rows() int { return f.rows }

// Equal reports whether f and g are the same matrix by construction.
func (f Factor) Equal(g Factor) bool {
	return f.Kind == g.Kind && f.N == g.N && f.rows == g.rows && f.Groups == g.Groups &&
		slices.Equal(f.Group, g.Group) && slices.Equal(f.M, g.M)
}

// Dense returns the factor as a dense Rows() x N matrix, row-major, for
// tests and small computations.
func (f Factor) Dense() []float64 {
	out := make([]float64, f.rows*f.N)
	x := make([]float64, f.N)
	y := make([]float64, f.rows)
	for j := range f.N {
		clear(x)
		x[j] = 1
		f.Apply(x, y)
		for i, v := range y {
			out[i*f.N+j] = v
		}
	}
	return out
}

// Apply sets y = F x (len(x) = N, len(y) = Rows()).
func (f Factor) Apply(x, y []float64) {
	switch f.Kind {
	case Identity:
		copy(y, x)
	case Total:
		var s float64
		for _, v := range x {
			s += v
		}
		y[0] = s
	case RollUp:
		clear(y[:f.Groups])
		for i, v := range x {
			y[f.Group[i]] += v
		}
	case Prefix:
		var s float64
		for i, v := range x {
			s += v
			y[i] = s
		}
	case Ranges:
		r := 0
		for i := range f.N {
			var s float64
			for j := i; j < f.N; j++ {
				s += x[j]
				y[r] = s
				r++
			}
		}
	case Residual:
		var s float64
		for k := 1; k < f.N; k++ {
			s += x[k-1]
			y[k-1] = (s - float64(k)*x[k]) / math.Sqrt(float64(k)*float64(k+1))
		}
	case Matrix:
		for i := range f.rows {
			row := f.M[i*f.N : (i+1)*f.N]
			var s float64
			for j, v := range row {
				s += v * x[j]
			}
			y[i] = s
		}
	default:
		panic("query: invalid factor")
	}
}

// ApplyT sets x = F^T y (len(y) = Rows(), len(x) = N).
func (f Factor) ApplyT(y, x []float64) {
	switch f.Kind {
	case Identity:
		copy(x, y)
	case Total:
		for i := range x {
			x[i] = y[0]
		}
	case RollUp:
		for i := range x {
			x[i] = y[f.Group[i]]
		}
	case Prefix:
		// x_j = sum over i >= j of y_i.
		var s float64
		for j := f.N - 1; j >= 0; j-- {
			s += y[j]
			x[j] = s
		}
	case Ranges:
		// Range (i, j) covers k when i <= k <= j: x_k sums the rows of
		// every start i <= k over the ends j >= k.
		clear(x)
		r := 0
		for i := range f.N {
			// Rows (i, i..n-1): a suffix sum over the ends gives, for
			// each k >= i, the sum of the rows ending at k or later.
			var s float64
			for j := f.N - 1; j >= i; j-- {
				s += y[r+j-i]
				x[j] += s
			}
			r += f.N - i
		}
	case Residual:
		clear(x)
		// Row k-1 is (e_0 + ... + e_{k-1} - k e_k)/sqrt(k(k+1)):
		// x_j gets y_{k-1}/c_k for every k > j, and -j y_{j-1}/c_j.
		var s float64
		for k := f.N - 1; k >= 1; k-- {
			c := y[k-1] / math.Sqrt(float64(k)*float64(k+1))
			x[k] -= float64(k) * c
			s += c
			x[k-1] += s
		}
	case Matrix:
		clear(x)
		for i := range f.rows {
			row := f.M[i*f.N : (i+1)*f.N]
			for j, v := range row {
				x[j] += v * y[i]
			}
		}
	default:
		panic("query: invalid factor")
	}
}

// Term is a set of queries: the Kronecker product of one factor per
// dimension of the domain, in the domain's order.
type Term []Factor

// Shape returns the sizes of the term's domain.
func (t Term) Shape() []int {
	s := make([]int, len(t))
	for i, f := range t {
		s[i] = f.N
	}
	return s
}

// Rows returns the number of queries of the term: the product of the
// factors' rows.
func (t Term) Rows() int {
	n := 1
	for _, f := range t {
		n *= f.rows
	}
	return n
}

// Cells returns the size of the term's domain.
func (t Term) Cells() int {
	n := 1
	for _, f := range t {
		n *= f.N
	}
	return n
}

// Equal reports whether t and u are the same product by construction.
func (t Term) Equal(u Term) bool {
	return slices.EqualFunc(t, u, Factor.Equal)
}

// Apply returns the answers of the term's queries on table x (row-major
// over the domain), row-major over the factors' rows.
func (t Term) Apply(x []float64) []float64 {
	shape := t.Shape()
	cur := x
	for d, f := range t {
		cur = applyAxis(cur, shape, d, f.rows, f.Apply)
		shape[d] = f.rows
	}
	if len(t) == 0 {
		return slices.Clone(x)
	}
	return cur
}

// ApplyT returns the transpose of the term applied to answers y: the table
// sum over queries q of y_q times q's coefficients.
func (t Term) ApplyT(y []float64) []float64 {
	shape := make([]int, len(t))
	for i, f := range t {
		shape[i] = f.rows
	}
	cur := y
	for d := len(t) - 1; d >= 0; d-- {
		f := t[d]
		cur = applyAxis(cur, shape, d, f.N, f.ApplyT)
		shape[d] = f.N
	}
	if len(t) == 0 {
		return slices.Clone(y)
	}
	return cur
}

// applyAxis applies op along axis d of x (row-major of the given shape),
// whose length changes from shape[d] to out.
func applyAxis(x []float64, shape []int, d, out int, op func(in, out []float64)) []float64 {
	outer, inner := 1, 1
	for _, n := range shape[:d] {
		outer *= n
	}
	for _, n := range shape[d+1:] {
		inner *= n
	}
	n := shape[d]
	y := make([]float64, outer*out*inner)
	if inner == 1 {
		for o := range outer {
			op(x[o*n:(o+1)*n], y[o*out:(o+1)*out])
		}
		return y
	}
	in := make([]float64, n)
	res := make([]float64, out)
	for o := range outer {
		xb, yb := x[o*n*inner:], y[o*out*inner:]
		for i := range inner {
			for k := range n {
				in[k] = xb[k*inner+i]
			}
			op(in, res)
			for k := range out {
				yb[k*inner+i] = res[k]
			}
		}
	}
	return y
}

// Weighted is a term with its weight in a workload's objective (or, in a
// strategy, the precision or share it is measured with).
type Weighted struct {
	Term   Term
	Weight float64
}

// Workload is a weighted union of terms over one domain.
type Workload []Weighted

// Check reports an error naming the first term that does not fit shape or
// whose weight is not finite and > 0.
func (w Workload) Check(shape []int) error {
	for i, x := range w {
		if len(x.Term) != len(shape) {
			return fmt.Errorf("query: term %d has %d factors for %d dimensions", i+1, len(x.Term), len(shape))
		}
		for d, f := range x.Term {
			if f.N != shape[d] {
				return fmt.Errorf("query: term %d: factor %d has %d columns, the dimension %d values", i+1, d+1, f.N, shape[d])
			}
			if f.rows < 1 {
				return fmt.Errorf("query: term %d: factor %d (%v) has no rows", i+1, d+1, f.Kind)
			}
		}
		if !(x.Weight > 0) || math.IsInf(x.Weight, 0) {
			return fmt.Errorf("query: term %d: weight must be finite and > 0, got %v", i+1, x.Weight)
		}
	}
	return nil
}

// Marginal returns the cuboid over the dimensions keep: Identity on them,
// Total on the others.
func Marginal(shape []int, keep func(d int) bool) Term {
	t := make(Term, len(shape))
	for d, n := range shape {
		if keep(d) {
			t[d] = NewIdentity(n)
		} else {
			t[d] = NewTotal(n)
		}
	}
	return t
}
