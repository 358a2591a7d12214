package refine

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/gonum/mat"
)

// Equality is one linear constraint on the true answers,
// sum_j Coef[j] * mu[Index[j]] = Value (a column b of the paper's B, and
// its constant c).
type Equality struct {
	// Label names the constraint in errors and reports; empty means "#k"
	// with k its position in the list.
	Label string
	Index []int
	Coef  []float64
	Value float64
	// Public is true when Value is the same on every database: the
	// constraint holds by definition (passing = A + B + C + D) or its
	// constant was fixed without looking at the data. A constant computed
	// from this data set (mu_A + mu_B = 80, a published total) is not
	// public: it moves with the data, and refining with it costs privacy
	// (see Linear.Loss). The zero value, false, is the safe choice.
	Public bool
}

// Equalities is a validated set of m linearly independent equalities over
// n answers, factorised for least-squares refinement. It is safe for
// concurrent use.
type Equalities struct {
	n     int
	eqs   []Equality
	comps []component
}

// component is a group of constraints that share answers; groups are
// refined independently.
type component struct {
	answers []int // global indices, ascending
	cons    []int // constraint indices
	// One of the following, by structure:
	coef   []float64    // one constraint: its coefficients, aligned with answers
	normSq float64      // and their squared norm
	tree   *Hierarchy   // "node = sum of children" constraints forming a forest
	qr     *householder // anything else: QR of the dense block of B
	values []float64    // constants, in qr's column order
}

// maxEntries bounds the total number of coefficients, so that a
// constraint file cannot exhaust memory before it is rejected.
const maxEntries = 1 << 30

// NewEqualities validates the constraints over n answers and prepares the
// least-squares refinement. Constraints that share no answer are refined
// separately; a single constraint, and constraints that form a hierarchy
// (every one says "node = sum of at least two children", value 0, and the
// nodes form a forest), need no matrix. Other groups are factorised by a
// Householder QR of their n_g × m_g block of B, in O(n_g m_g²).
//
// It fails for an index outside 0..n-1, an index repeated in a
// constraint, a coefficient or value that is not finite, a constraint with
// no nonzero coefficient, and constraints that are linearly dependent
// (rank(B) < m): the error says whether the dependent one is redundant or
// contradicts the others.
func NewEqualities(n int, eqs []Equality) (*Equalities, error) {
	if n <= 0 {
		return nil, fmt.Errorf("refine: the number of answers must be positive, got %d", n)
	}
	if len(eqs) == 0 {
		return nil, errors.New("refine: no equality constraints")
	}
	e := &Equalities{n: n, eqs: make([]Equality, len(eqs))}
	total := 0
	for k, eq := range eqs {
		if len(eq.Index) != len(eq.Coef) {
			return nil, fmt.Errorf("refine: equality %s has %d indices and %d coefficients", e.labelOf(eq, k), len(eq.Index), len(eq.Coef))
		}
		if math.IsNaN(eq.Value) || math.IsInf(eq.Value, 0) {
			return nil, fmt.Errorf("refine: equality %s: value is %v; it must be finite", e.labelOf(eq, k), eq.Value)
		}
		total += len(eq.Index)
		if total > maxEntries {
			return nil, fmt.Errorf("refine: more than %d coefficients in all", maxEntries)
		}
		clean := Equality{Label: eq.Label, Value: eq.Value, Public: eq.Public,
			Index: make([]int, 0, len(eq.Index)), Coef: make([]float64, 0, len(eq.Index))}
		sorted := true
		for j, i := range eq.Index {
			c := eq.Coef[j]
			switch {
			case i < 0 || i >= n:
				return nil, fmt.Errorf("refine: equality %s: answer index %d is outside 0..%d", e.labelOf(eq, k), i, n-1)
			case math.IsNaN(c) || math.IsInf(c, 0):
				return nil, fmt.Errorf("refine: equality %s: coefficient of answer %d is %v; it must be finite", e.labelOf(eq, k), i, c)
			case c == 0:
				continue
			}
			if l := len(clean.Index); l > 0 && i <= clean.Index[l-1] {
				sorted = false
			}
			clean.Index = append(clean.Index, i)
			clean.Coef = append(clean.Coef, c)
		}
		if len(clean.Index) == 0 {
			return nil, fmt.Errorf("refine: equality %s has no nonzero coefficient", e.labelOf(eq, k))
		}
		if !sorted {
			perm := make([]int, len(clean.Index))
			for j := range perm {
				perm[j] = j
			}
			slices.SortFunc(perm, func(a, b int) int { return clean.Index[a] - clean.Index[b] })
			idx, coef := make([]int, len(perm)), make([]float64, len(perm))
			for j, p := range perm {
				idx[j], coef[j] = clean.Index[p], clean.Coef[p]
				if j > 0 && idx[j] == idx[j-1] {
					return nil, fmt.Errorf("refine: equality %s names answer %d twice", e.labelOf(eq, k), idx[j])
				}
			}
			clean.Index, clean.Coef = idx, coef
		}
		e.eqs[k] = clean
	}
	if err := e.group(); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *Equalities) labelOf(eq Equality, k int) string {
	if eq.Label != "" {
		return fmt.Sprintf("%q", eq.Label)
	}
	return fmt.Sprintf("#%d", k)
}

func (e *Equalities) label(k int) string { return e.labelOf(e.eqs[k], k) }

// group splits the constraints into components that share answers and
// prepares each one's refinement.
func (e *Equalities) group() error {
	m := len(e.eqs)
	// Union-find over constraints, joined through the answers they share.
	up := make([]int32, m)
	for k := range up {
		up[k] = int32(k)
	}
	find := func(k int32) int32 {
		for up[k] != k {
			up[k] = up[up[k]]
			k = up[k]
		}
		return k
	}
	owner := make([]int32, e.n) // first constraint seen on each answer, +1
	for k, eq := range e.eqs {
		for _, i := range eq.Index {
			if o := owner[i]; o == 0 {
				owner[i] = int32(k) + 1
			} else if a, b := find(o-1), find(int32(k)); a != b {
				up[max(a, b)] = min(a, b)
			}
		}
	}
	byRoot := map[int32]int{}
	for k := range e.eqs {
		r := find(int32(k))
		c, ok := byRoot[r]
		if !ok {
			c = len(e.comps)
			byRoot[r] = c
			e.comps = append(e.comps, component{})
		}
		e.comps[c].cons = append(e.comps[c].cons, k)
	}
	local := owner // reuse: local index of each answer within its component
	for c := range e.comps {
		comp := &e.comps[c]
		for _, k := range comp.cons {
			for _, i := range e.eqs[k].Index {
				local[i] = -1
			}
		}
		for _, k := range comp.cons {
			for _, i := range e.eqs[k].Index {
				if local[i] == -1 {
					local[i] = 0
					comp.answers = append(comp.answers, i)
				}
			}
		}
		if !slices.IsSorted(comp.answers) {
			slices.Sort(comp.answers)
		}
		for j, i := range comp.answers {
			local[i] = int32(j)
		}
		if err := e.prepare(comp, local); err != nil {
			return err
		}
	}
	return nil
}

func (e *Equalities) prepare(comp *component, local []int32) error {
	nc := len(comp.answers)
	if len(comp.cons) == 1 {
		eq := e.eqs[comp.cons[0]]
		comp.coef = eq.Coef // same order: both ascending by answer
		comp.normSq = norm2(eq.Coef)
		comp.normSq *= comp.normSq
		comp.values = []float64{eq.Value}
		return nil
	}
	if parent, ok := e.hierarchy(comp, local); ok {
		tree, err := NewHierarchy(parent)
		if err == nil {
			comp.tree = tree
			return nil
		}
	}
	cols := make([][]float64, len(comp.cons))
	comp.values = make([]float64, len(comp.cons))
	for j, k := range comp.cons {
		col := make([]float64, nc)
		for t, i := range e.eqs[k].Index {
			col[local[i]] = e.eqs[k].Coef[t]
		}
		cols[j] = col
		comp.values[j] = e.eqs[k].Value
	}
	qr, err := factor(cols)
	if err != nil {
		var dep *dependentError
		if errors.As(err, &dep) {
			return e.dependence(comp, dep)
		}
		return err
	}
	comp.qr = qr
	return nil
}

// dependence turns a rank deficiency into an error that names the
// constraints involved and says whether they agree.
func (e *Equalities) dependence(comp *component, dep *dependentError) error {
	k := comp.cons[dep.k]
	var terms []string
	implied, scale := 0.0, math.Abs(e.eqs[k].Value)
	for j, a := range dep.alpha {
		if math.Abs(a) < 1e-9 {
			continue
		}
		v := e.eqs[comp.cons[j]].Value
		implied += a * v
		scale += math.Abs(a * v)
		terms = append(terms, fmt.Sprintf("%.6g × %s", a, e.label(comp.cons[j])))
	}
	combo := "zero"
	if len(terms) > 0 {
		combo = strings.Join(terms, " + ")
	}
	if math.Abs(e.eqs[k].Value-implied) <= 1e-9*max(scale, 1) {
		return fmt.Errorf("refine: equality %s is redundant: its left-hand side is %s (rank(B) < m); remove it", e.label(k), combo)
	}
	return fmt.Errorf("refine: the equalities are inconsistent: the left-hand side of %s is %s, which implies value %.6g, but it says %.6g", e.label(k), combo, implied, e.eqs[k].Value)
}

// hierarchy reports whether the component's constraints all say
// "node = sum of children" (one coefficient of one sign, at least two of
// the other, all of equal magnitude, value 0) with every node the parent
// in at most one constraint and a child in at most one, and if so returns
// the parent of each answer (in local indices).
func (e *Equalities) hierarchy(comp *component, local []int32) ([]int, bool) {
	parent := make([]int, len(comp.answers))
	for i := range parent {
		parent[i] = -1
	}
	isParent := make([]bool, len(comp.answers))
	for _, k := range comp.cons {
		eq := e.eqs[k]
		if eq.Value != 0 || len(eq.Index) < 3 {
			return nil, false
		}
		a := math.Abs(eq.Coef[0])
		pos, neg, pi, ni := 0, 0, 0, 0
		for t, c := range eq.Coef {
			if math.Abs(c) != a {
				return nil, false
			}
			if c > 0 {
				pos, pi = pos+1, t
			} else {
				neg, ni = neg+1, t
			}
		}
		var p int
		switch {
		case pos == 1:
			p = pi
		case neg == 1:
			p = ni
		default:
			return nil, false
		}
		pl := local[eq.Index[p]]
		if isParent[pl] {
			return nil, false
		}
		isParent[pl] = true
		for t, i := range eq.Index {
			if t == p {
				continue
			}
			cl := local[i]
			if parent[cl] != -1 {
				return nil, false
			}
			parent[cl] = int(pl)
		}
	}
	return parent, true
}

// Len returns the number of answers n.
func (e *Equalities) Len() int { return e.n }

// Constraints returns the validated constraints (zero coefficients
// dropped, indices ascending). The caller must not modify them.
func (e *Equalities) Constraints() []Equality { return e.eqs }

// Public reports whether every constraint is public, in which case
// refining with them is post-processing and keeps the privacy guarantee of
// the noisy answers.
func (e *Equalities) Public() bool {
	for _, eq := range e.eqs {
		if !eq.Public {
			return false
		}
	}
	return true
}

// Matrix returns B as a dense n×m matrix (column k is constraint k).
func (e *Equalities) Matrix() *mat.Dense {
	b := mat.NewDense(e.n, len(e.eqs), nil)
	for k, eq := range e.eqs {
		for t, i := range eq.Index {
			b.Set(i, k, eq.Coef[t])
		}
	}
	return b
}

// Values returns the constants c.
func (e *Equalities) Values() []float64 {
	c := make([]float64, len(e.eqs))
	for k, eq := range e.eqs {
		c[k] = eq.Value
	}
	return c
}

// Refine writes to dst the least-squares refinement of the noisy answers
// x under the constraints (Theorem 3 of the paper):
//
//	x̂ = (I − B(BᵀB)⁻¹Bᵀ) x + B(BᵀB)⁻¹ c,
//
// the point closest to x on which every constraint holds exactly. It is
// unbiased and has the smallest variance of every answer among linear
// unbiased refinements. Answers in no constraint are copied. dst may be x.
func (e *Equalities) Refine(dst, x []float64) error {
	if err := checkVectors(e.n, dst, x); err != nil {
		return err
	}
	if &dst[0] != &x[0] {
		copy(dst, x)
	}
	var buf, z, s []float64
	for c := range e.comps {
		comp := &e.comps[c]
		switch {
		case comp.coef != nil:
			r := -comp.values[0]
			for t, i := range comp.answers {
				r += comp.coef[t] * dst[i]
			}
			r /= comp.normSq
			for t, i := range comp.answers {
				dst[i] -= r * comp.coef[t]
			}
			continue
		case comp.tree != nil:
			if len(z) < len(comp.answers) {
				z, s = make([]float64, len(comp.answers)), make([]float64, len(comp.answers))
			}
		}
		// A component over every answer (its answers are 0..n-1 in order)
		// is refined in place; others are gathered into a buffer.
		whole := len(comp.answers) == e.n
		y := dst
		if !whole {
			if len(buf) < len(comp.answers) {
				buf = make([]float64, len(comp.answers))
			}
			y = buf[:len(comp.answers)]
			for t, i := range comp.answers {
				y[t] = dst[i]
			}
		}
		if comp.tree != nil {
			comp.tree.refine(y, y, z, s)
		} else {
			comp.qr.project(y, comp.values)
		}
		if !whole {
			for t, i := range comp.answers {
				dst[i] = y[t]
			}
		}
	}
	return nil
}
