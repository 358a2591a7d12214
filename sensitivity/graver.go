package sensitivity

// An exact brute-force engine for generic sensitivity (paper 3, Section
// 3.2). Two tables T_a and T_b that both satisfy the background knowledge
// A x = c are worst-case induced neighbours when no nonempty proper subset
// of the row additions and removals that turn T_a into T_b yields a table
// satisfying A x = c. A subset of those moves is a vector z that lies
// between 0 and delta = x_b - x_a coordinate by coordinate (z ⊑ delta, the
// conformal order), so T_a and T_b are induced neighbours exactly when delta
// is a ⊑-minimal nonzero element of ker_Z(A): an element of the Graver basis
// of A. Counts are otherwise unconstrained, so every Graver element g is
// realised (T_a = max(0,-g), T_b = max(0,g)) and the generic sensitivity of
// releasing cuboid C is the largest ||M_C g||_1 over the Graver basis.
//
// The Graver basis is computed by project-and-lift (Hemmecke 2002, as in
// 4ti2): a lattice basis of ker_Z(A) is put in Hermite normal form, whose
// projection onto the pivot coordinates is injective; the Graver basis of
// that projection is lifted one coordinate at a time, and each lift is a
// completion (Pottier) that only needs pairs u, v that are sign-compatible
// on the coordinates already lifted and have opposite signs on the new one.
// Pairs are processed in order of the 1-norm of their sum on the lifted
// coordinates, so that every element the completion keeps is primitive.

import (
	"context"
	"errors"
	"fmt"
	"math/bits"

	"github.com/knowdp/knowdp/domain"
)

// MaxGraverCells is the largest number of base cells the brute-force engine
// accepts: sign supports are uint64 masks.
const MaxGraverCells = 64

// ErrTooLarge is returned (wrapped) when the brute-force engine would exceed
// its size limits.
var ErrTooLarge = errors.New("too large for the brute-force Graver engine")

const (
	// defaultMaxGraver bounds the size of the basis GraverBasis and
	// BruteForceSensitivity compute (one element per pair ±g).
	defaultMaxGraver = 1 << 18
	// entryLimit bounds the entries of the integer kernel computation, so
	// that int64 products cannot overflow.
	entryLimit = 1 << 30
	// storeLimit bounds the entries of stored elements, so that the sum of
	// two of them fits an int32.
	storeLimit = 1 << 29
	// ctxEvery is how many pair tests pass between context checks.
	ctxEvery = 1 << 14
)

// GraverBasis returns the Graver basis of ker_Z(A), where A is the 0/1
// matrix with one column per cell (0 <= cell < cells) and one row per
// element of rows, a row being the set of cells whose counts sum to a known
// value (a cell of an exact cuboid, a known degree, ...). It returns one
// element g of each pair ±g. Cells are at most MaxGraverCells; the basis is
// at most 2^18 elements; beyond either the error wraps ErrTooLarge. The
// computation stops with ctx.Err() when ctx is done.
func GraverBasis(ctx context.Context, cells int, rows [][]int) ([][]int, error) {
	return graverBasis(ctx, cells, rows, graverLimits{elements: defaultMaxGraver})
}

// graverLimits bounds the engine's work: elements is the largest basis
// size, work (if positive) the largest number of pair tests and reducer
// searches. Both are deterministic, unlike a deadline.
type graverLimits struct {
	elements int
	work     int
}

func graverBasis(ctx context.Context, cells int, rows [][]int, lim graverLimits) ([][]int, error) {
	a, err := incidenceMatrix(cells, rows)
	if err != nil {
		return nil, err
	}
	e, err := newGraverEngine(ctx, cells, a, lim)
	if err != nil {
		return nil, err
	}
	return e.basis(), nil
}

// incidenceMatrix validates rows and returns the dense 0/1 matrix.
func incidenceMatrix(cells int, rows [][]int) ([][]int64, error) {
	if cells < 1 {
		return nil, fmt.Errorf("graver: %d cells; need at least one", cells)
	}
	if cells > MaxGraverCells {
		return nil, fmt.Errorf("graver: %d cells, above the limit of %d: %w", cells, MaxGraverCells, ErrTooLarge)
	}
	a := make([][]int64, len(rows))
	for i, r := range rows {
		a[i] = make([]int64, cells)
		for _, c := range r {
			if c < 0 || c >= cells {
				return nil, fmt.Errorf("graver: row %d names cell %d, outside [0, %d)", i, c, cells)
			}
			if a[i][c] != 0 {
				return nil, fmt.Errorf("graver: row %d names cell %d twice", i, c)
			}
			a[i][c] = 1
		}
	}
	return a, nil
}

// graverEngine holds a set of lattice vectors (one of each pair ±v) in a
// flat slab, with their sign supports as bit masks.
type graverEngine struct {
	ctx   context.Context
	n     int     // coordinates
	vals  []int32 // element i is vals[i*n : (i+1)*n]
	pos   []uint64
	neg   []uint64
	act   uint64 // the coordinates lifted so far
	lim   graverLimits
	work  int // pair tests and reducer searches so far
	tests int // pair tests since the last context check
	buf   []int32
	tree  supportTree
}

// newGraverEngine computes the Graver basis of ker_Z(a), a having n columns.
func newGraverEngine(ctx context.Context, n int, a [][]int64, lim graverLimits) (*graverEngine, error) {
	kernel, err := integerKernel(a, n)
	if err != nil {
		return nil, err
	}
	e := &graverEngine{ctx: ctx, n: n, lim: lim, buf: make([]int32, n)}
	if len(kernel) == 0 {
		return e, nil
	}
	hnf, pivots, err := rowEchelon(kernel, n)
	if err != nil {
		return nil, err
	}
	unit := true
	for i, p := range pivots {
		e.act |= 1 << p
		if hnf[i][p] != 1 {
			unit = false
		}
		if err := e.addInt64(hnf[i]); err != nil {
			return nil, err
		}
	}
	if !unit {
		// The projection onto the pivots is a proper sublattice of Z^r:
		// complete it there first (otherwise its Graver basis is ±e_i,
		// which is what the rows already are).
		if err := e.completeUnordered(); err != nil {
			return nil, err
		}
	}
	for j := range n {
		if e.act&(1<<j) != 0 {
			continue
		}
		if err := e.lift(j); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func (e *graverEngine) size() int { return len(e.pos) }

func (e *graverEngine) elem(i int) []int32 { return e.vals[i*e.n : (i+1)*e.n] }

func (e *graverEngine) basis() [][]int {
	out := make([][]int, e.size())
	for i := range out {
		g := make([]int, e.n)
		for k, v := range e.elem(i) {
			g[k] = int(v)
		}
		out[i] = g
	}
	return out
}

func (e *graverEngine) addInt64(v []int64) error {
	for _, x := range v {
		if x > storeLimit || x < -storeLimit {
			return fmt.Errorf("graver: lattice entries exceed %d: %w", storeLimit, ErrTooLarge)
		}
	}
	for k, x := range v {
		e.buf[k] = int32(x)
	}
	return e.add(e.buf)
}

// add appends v (copied) to the set.
func (e *graverEngine) add(v []int32) error {
	if e.size() >= e.lim.elements {
		return fmt.Errorf("graver: more than %d basis elements: %w", e.lim.elements, ErrTooLarge)
	}
	p, q := signMasks(v)
	e.vals = append(e.vals, v...)
	e.pos = append(e.pos, p)
	e.neg = append(e.neg, q)
	if e.tree.root != nil {
		e.tree.insert(e, e.size()-1)
	}
	return nil
}

func signMasks(v []int32) (pos, neg uint64) {
	for k, x := range v {
		switch {
		case x > 0:
			pos |= 1 << k
		case x < 0:
			neg |= 1 << k
		}
	}
	return pos, neg
}

// tick counts a pair test and checks the limits and the context now and
// then.
func (e *graverEngine) tick() error {
	e.tests++
	if e.tests >= ctxEvery {
		e.work += e.tests
		e.tests = 0
		if e.lim.work > 0 && e.work > e.lim.work {
			return fmt.Errorf("graver: more than %d steps: %w", e.lim.work, ErrTooLarge)
		}
		return e.ctx.Err()
	}
	return nil
}

// reduce replaces s by its normal form with respect to the set: while some
// element h (or -h) satisfies h ⊑ s on the active coordinates, s -= h. It
// reports whether s is nonzero on the active coordinates afterwards.
func (e *graverEngine) reduce(s []int32) bool {
	for {
		sp, sn := signMasks(s)
		sp, sn = sp&e.act, sn&e.act
		if sp|sn == 0 {
			return false
		}
		e.tests++
		i, sign := e.tree.find(e, s, sp, sn, e.tree.root)
		if i < 0 {
			return true
		}
		h := e.elem(i)
		for k := range s {
			s[k] -= sign * h[k]
		}
	}
}

// supportTree indexes the elements by their signs on the active
// coordinates (4ti2's support tree): a node splits on one coordinate into
// the elements that are zero, positive and negative there, so that the
// search for an h with h ⊑ s or -h ⊑ s skips every branch whose sign at a
// coordinate s cannot match.
type supportTree struct {
	coords []int // split order: the active coordinates
	root   *supportNode
}

type supportNode struct {
	depth int
	items []int           // a leaf's elements
	kids  *[3]supportNode // zero, positive, negative; nil for a leaf
}

const supportLeaf = 12

// rebuild indexes every element on the active coordinates.
func (e *graverEngine) rebuild() {
	t := &e.tree
	t.coords = t.coords[:0]
	for m := e.act; m != 0; m &= m - 1 {
		t.coords = append(t.coords, bits.TrailingZeros64(m))
	}
	t.root = &supportNode{}
	for i := range e.pos {
		t.insert(e, i)
	}
}

func (t *supportTree) insert(e *graverEngine, i int) {
	n := t.root
	for n.kids != nil {
		n = &n.kids[signIndex(e, i, t.coords[n.depth])]
	}
	n.items = append(n.items, i)
	if len(n.items) > supportLeaf && n.depth < len(t.coords) {
		n.kids = &[3]supportNode{{depth: n.depth + 1}, {depth: n.depth + 1}, {depth: n.depth + 1}}
		for _, j := range n.items {
			k := &n.kids[signIndex(e, j, t.coords[n.depth])]
			k.items = append(k.items, j)
		}
		n.items = nil
	}
}

func signIndex(e *graverEngine, i, k int) int {
	switch {
	case e.pos[i]&(1<<k) != 0:
		return 1
	case e.neg[i]&(1<<k) != 0:
		return 2
	}
	return 0
}

// find returns an element h and a sign with sign*h ⊑ s on the active
// coordinates, or -1.
func (t *supportTree) find(e *graverEngine, s []int32, sp, sn uint64, n *supportNode) (int, int32) {
	if n.kids == nil {
		for _, i := range n.items {
			hp, hn := e.pos[i]&e.act, e.neg[i]&e.act
			var sign int32
			switch {
			case hp&^sp == 0 && hn&^sn == 0:
				sign = 1
			case hn&^sp == 0 && hp&^sn == 0:
				sign = -1
			default:
				continue
			}
			if conformalBelow(e.elem(i), s, sign, hp|hn) {
				return i, sign
			}
		}
		return -1, 0
	}
	if i, sign := t.find(e, s, sp, sn, &n.kids[0]); i >= 0 {
		return i, sign
	}
	// An element nonzero at k can reduce s (up to sign) only if s is
	// nonzero at k.
	if k := uint64(1) << t.coords[n.depth]; (sp|sn)&k != 0 {
		for c := 1; c <= 2; c++ {
			if i, sign := t.find(e, s, sp, sn, &n.kids[c]); i >= 0 {
				return i, sign
			}
		}
	}
	return -1, 0
}

// conformalBelow reports whether |h_k| <= |s_k| on the coordinates of supp,
// where sign*h and s already have the same signs there.
func conformalBelow(h, s []int32, sign int32, supp uint64) bool {
	for m := supp; m != 0; m &= m - 1 {
		k := bits.TrailingZeros64(m)
		if sign*h[k]*signOf(s[k]) > signOf(s[k])*s[k] {
			return false
		}
	}
	return true
}

func signOf(x int32) int32 {
	if x < 0 {
		return -1
	}
	return 1
}

// graverSum sets dst = u + sign*v and reports whether every entry is within
// storeLimit.
func graverSum(dst, u, v []int32, sign int32) bool {
	for k := range dst {
		x := u[k] + sign*v[k]
		if x > storeLimit || x < -storeLimit {
			return false
		}
		dst[k] = x
	}
	return true
}

// completeUnordered is Pottier's completion on the active coordinates,
// followed by the removal of non-minimal elements. It is only used on the
// pivot coordinates when the Hermite normal form has a pivot other than 1.
func (e *graverEngine) completeUnordered() error {
	e.rebuild()
	s := make([]int32, e.n)
	for i := 1; i < e.size(); i++ {
		for j := 0; j < i; j++ {
			for _, sign := range []int32{1, -1} {
				if err := e.tick(); err != nil {
					return err
				}
				// u + sign*v needs cancellation somewhere, else it
				// reduces to zero by u then v.
				up, un := e.pos[i]&e.act, e.neg[i]&e.act
				vp, vn := e.pos[j]&e.act, e.neg[j]&e.act
				if sign < 0 {
					vp, vn = vn, vp
				}
				if up&vn == 0 && un&vp == 0 {
					continue
				}
				if !graverSum(s, e.elem(i), e.elem(j), sign) {
					return fmt.Errorf("graver: entries exceed %d: %w", storeLimit, ErrTooLarge)
				}
				if e.reduce(s) {
					if err := e.add(s); err != nil {
						return err
					}
				}
			}
		}
	}
	e.keepMinimal()
	return nil
}

// keepMinimal drops every element that is reducible by another one.
func (e *graverEngine) keepMinimal() {
	keep := make([]bool, e.size())
	for i := range keep {
		keep[i] = true
		gi := e.elem(i)
		for j := range e.pos {
			if j == i {
				continue
			}
			hp, hn := e.pos[j]&e.act, e.neg[j]&e.act
			sp, sn := e.pos[i]&e.act, e.neg[i]&e.act
			var sign int32
			switch {
			case hp&^sp == 0 && hn&^sn == 0:
				sign = 1
			case hn&^sp == 0 && hp&^sn == 0:
				sign = -1
			default:
				continue
			}
			if conformalBelow(e.elem(j), gi, sign, hp|hn) && !e.sameUpToSign(i, j) {
				keep[i] = false
				break
			}
		}
	}
	w := 0
	for i, ok := range keep {
		if !ok {
			continue
		}
		copy(e.vals[w*e.n:(w+1)*e.n], e.elem(i))
		e.pos[w], e.neg[w] = e.pos[i], e.neg[i]
		w++
	}
	e.vals, e.pos, e.neg = e.vals[:w*e.n], e.pos[:w], e.neg[:w]
	e.tree.root = nil
}

func (e *graverEngine) sameUpToSign(i, j int) bool {
	a, b := e.elem(i), e.elem(j)
	same, opp := true, true
	for k := range a {
		same = same && a[k] == b[k]
		opp = opp && a[k] == -b[k]
	}
	return same || opp
}

// lift extends the set, a Graver basis of the projection onto the active
// coordinates, to a Graver basis of the projection onto those and j.
func (e *graverEngine) lift(j int) error {
	old := e.act
	e.act |= 1 << j
	e.rebuild()
	norm := func(v []int32) int {
		t := 0
		for m := old; m != 0; m &= m - 1 {
			x := v[bits.TrailingZeros64(m)]
			if x < 0 {
				x = -x
			}
			t += int(x)
		}
		return t
	}
	// Only elements nonzero at j take part in critical pairs; bucket them
	// by their norm on the old coordinates.
	var buckets [][]int
	maxNorm := 0
	put := func(i, nm int) {
		for len(buckets) <= nm {
			buckets = append(buckets, nil)
		}
		buckets[nm] = append(buckets[nm], i)
		maxNorm = max(maxNorm, nm)
	}
	for i := range e.pos {
		if v := e.elem(i); v[j] != 0 {
			put(i, norm(v))
		}
	}
	s := make([]int32, e.n)
	bit := uint64(1) << j
	for total := 2; total <= 2*maxNorm; total++ {
		for a := 1; a <= total/2; a++ {
			b := total - a
			if b >= len(buckets) || a >= len(buckets) {
				continue
			}
			for ui, u := range buckets[a] {
				vs := buckets[b]
				if a == b {
					vs = vs[ui+1:]
				}
				up, un := e.pos[u]&old, e.neg[u]&old
				uj := e.pos[u]&bit != 0
				for _, v := range vs {
					if err := e.tick(); err != nil {
						return err
					}
					// Exactly one of u+v, u-v cancels at j; it is a
					// critical pair when the two summands are sign-
					// compatible on the old coordinates.
					vp, vn := e.pos[v]&old, e.neg[v]&old
					sign := int32(1)
					if (e.pos[v]&bit != 0) == uj {
						sign = -1
						vp, vn = vn, vp
					}
					if up&vn != 0 || un&vp != 0 {
						continue
					}
					if !graverSum(s, e.elem(u), e.elem(v), sign) {
						return fmt.Errorf("graver: entries exceed %d: %w", storeLimit, ErrTooLarge)
					}
					if !e.reduce(s) {
						continue
					}
					if nm := norm(s); nm != total {
						// Cannot happen: a normal form of smaller norm
						// would be a Graver element missed earlier.
						return fmt.Errorf("graver: internal error: new element of norm %d while completing norm %d", nm, total)
					}
					i := e.size()
					if err := e.add(s); err != nil {
						return err
					}
					if s[j] != 0 {
						put(i, total)
					}
				}
			}
		}
	}
	return nil
}

// integerKernel returns a basis of ker_Z(a) (a has n columns): unimodular
// column operations bring a to column echelon form, and the transformed
// identity's columns beyond the pivots span the kernel.
func integerKernel(a [][]int64, n int) ([][]int64, error) {
	m := len(a)
	cols := make([][]int64, n)
	for j := range cols {
		c := make([]int64, m+n)
		for i := range m {
			c[i] = a[i][j]
		}
		c[m+j] = 1
		cols[j] = c
	}
	k := 0
	for i := 0; i < m && k < n; i++ {
		found, err := eliminate(cols, k, i)
		if err != nil {
			return nil, err
		}
		if found {
			k++
		}
	}
	basis := make([][]int64, 0, n-k)
	for j := k; j < n; j++ {
		basis = append(basis, cols[j][m:])
	}
	return basis, nil
}

// rowEchelon brings the rows of b (n columns) to Hermite normal form:
// echelon, positive pivots, entries above a pivot reduced modulo it. It
// returns the rows and the pivot columns.
func rowEchelon(b [][]int64, n int) ([][]int64, []int, error) {
	r := len(b)
	var pivots []int
	p := 0
	for c := 0; c < n && p < r; c++ {
		found, err := eliminate(b, p, c)
		if err != nil {
			return nil, nil, err
		}
		if !found {
			continue
		}
		if b[p][c] < 0 {
			for k := range b[p] {
				b[p][k] = -b[p][k]
			}
		}
		for i := range p {
			q := b[i][c] / b[p][c]
			if b[i][c]-q*b[p][c] < 0 {
				q--
			}
			if err := kernelAxpy(b[i], b[p], -q); err != nil {
				return nil, nil, err
			}
		}
		pivots = append(pivots, c)
		p++
	}
	return b, pivots, nil
}

// eliminate makes vs[p] the only vector of vs[p:] with a non-zero entry at
// coordinate c, by the Euclidean algorithm on those entries (swaps and
// integer combinations, so the lattice the vectors span is unchanged). It
// reports whether any of them had a non-zero entry there.
func eliminate(vs [][]int64, p, c int) (bool, error) {
	for {
		piv := -1
		for j := p; j < len(vs); j++ {
			if vs[j][c] != 0 && (piv < 0 || kernelAbs(vs[j][c]) < kernelAbs(vs[piv][c])) {
				piv = j
			}
		}
		if piv < 0 {
			return false, nil
		}
		vs[p], vs[piv] = vs[piv], vs[p]
		done := true
		for j := p + 1; j < len(vs); j++ {
			if vs[j][c] == 0 {
				continue
			}
			if err := kernelAxpy(vs[j], vs[p], -(vs[j][c] / vs[p][c])); err != nil {
				return false, err
			}
			if vs[j][c] != 0 {
				done = false
			}
		}
		if done {
			return true, nil
		}
	}
}

// axpy sets y += q*x, failing if an entry leaves [-entryLimit, entryLimit].
func kernelAxpy(y, x []int64, q int64) error {
	if q == 0 {
		return nil
	}
	if kernelAbs(q) > entryLimit {
		return fmt.Errorf("graver: integer kernel entries exceed %d: %w", entryLimit, ErrTooLarge)
	}
	for k := range y {
		v := y[k] + q*x[k]
		if kernelAbs(v) > entryLimit {
			return fmt.Errorf("graver: integer kernel entries exceed %d: %w", entryLimit, ErrTooLarge)
		}
		y[k] = v
	}
	return nil
}

func kernelAbs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// Witness is the result of BruteForceSensitivity: the generic sensitivity
// and a pair of worst-case induced neighbours that attains it.
type Witness struct {
	// Value is S_Q(C) for the released cuboid C.
	Value int
	// Before and After are the counts per base cell (row-major) of two
	// tables that satisfy the same background knowledge, are induced
	// neighbours and whose released cuboids are Value apart in L1. Both
	// are all zero when the knowledge determines the table.
	Before, After []int
	// Basis is the number of Graver elements (one of each pair ±g).
	Basis int
	// L2Squared is the largest squared L2 distance between the released
	// cuboids of two worst-case induced neighbours (the L2 generic
	// sensitivity is its square root), attained by L2Before and L2After.
	// The element that maximises the L2 distance need not maximise the L1
	// distance.
	L2Squared         int
	L2Before, L2After []int
}

// BruteForceSensitivity computes S_Q(release) exactly from the definition
// for tiny domains: the Graver basis of the constraints (the cells of the
// exact cuboids and the exact cells) and the largest ||M_release g||_1 over
// it, and the largest ||M_release g||_2^2 (the squared L2 sensitivity). The base cuboid has at most MaxGraverCells cells; the basis at most
// 2^18 elements (beyond either the error wraps ErrTooLarge); it stops with
// ctx.Err() when ctx is done.
func BruteForceSensitivity(ctx context.Context, s *domain.Schema, exact []domain.Cuboid, known []ExactCells, release domain.Cuboid) (Witness, error) {
	if s == nil {
		return Witness{}, errors.New("brute force: nil schema")
	}
	if n := s.Cells(); n < 0 || n > MaxGraverCells {
		return Witness{}, fmt.Errorf("brute force: the base cuboid has more than %d cells: %w", MaxGraverCells, ErrTooLarge)
	}
	if err := CheckCuboid(s, release, "released cuboid"); err != nil {
		return Witness{}, err
	}
	for i, c := range exact {
		if err := CheckCuboid(s, c, fmt.Sprintf("exact cuboid %d", i+1)); err != nil {
			return Witness{}, err
		}
	}
	for i, k := range known {
		if err := CheckCuboid(s, k.Cuboid, fmt.Sprintf("exact cells %d", i+1)); err != nil {
			return Witness{}, err
		}
		for _, c := range k.Cells {
			if size := s.CuboidSize(k.Cuboid); c < 0 || c >= size {
				return Witness{}, fmt.Errorf("exact cells %d: cell %d of cuboid %s is outside [0, %d)", i+1, c, s.Format(k.Cuboid), size)
			}
		}
	}
	return bruteForce(ctx, s, exact, known, release, graverLimits{elements: defaultMaxGraver})
}

func bruteForce(ctx context.Context, s *domain.Schema, exact []domain.Cuboid, known []ExactCells, release domain.Cuboid, lim graverLimits) (Witness, error) {
	n := s.Cells()
	if n < 0 || n > MaxGraverCells {
		return Witness{}, fmt.Errorf("brute force: the base cuboid has more than %d cells: %w", MaxGraverCells, ErrTooLarge)
	}
	base := domain.Base(s.NumDims())
	members := func(c domain.Cuboid) [][]int {
		rows := make([][]int, s.CuboidSize(c))
		for a := range n {
			x := cellProjection(s, base, c, a)
			rows[x] = append(rows[x], a)
		}
		return rows
	}
	var rows [][]int
	for _, c := range exact {
		rows = append(rows, members(c)...)
	}
	for _, k := range known {
		m := members(k.Cuboid)
		for _, x := range k.Cells {
			rows = append(rows, m[x])
		}
	}
	basis, err := graverBasis(ctx, n, rows, lim)
	if err != nil {
		return Witness{}, err
	}
	cell := make([]int, n)
	for a := range n {
		cell[a] = cellProjection(s, base, release, a)
	}
	return worstMove(basis, cell, s.CuboidSize(release)), nil
}

// worstMove returns the witness of the largest L1 and L2 change of a
// released table over the Graver basis elements (moves on the base cells),
// where cell maps each base cell to its cell of the released table (of
// cells cells).
func worstMove(basis [][]int, cell []int, cells int) Witness {
	n := len(cell)
	w := Witness{Before: make([]int, n), After: make([]int, n), Basis: len(basis),
		L2Before: make([]int, n), L2After: make([]int, n)}
	proj := make([]int, cells)
	for _, g := range basis {
		clear(proj)
		for a, v := range g {
			proj[cell[a]] += v
		}
		d, d2 := 0, 0
		for _, v := range proj {
			d += max(v, -v)
			d2 += v * v
		}
		if d > w.Value {
			w.Value = d
			for a, v := range g {
				w.Before[a], w.After[a] = max(0, -v), max(0, v)
			}
		}
		if d2 > w.L2Squared {
			w.L2Squared = d2
			for a, v := range g {
				w.L2Before[a], w.L2After[a] = max(0, -v), max(0, v)
			}
		}
	}
	return w
}
