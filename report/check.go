package report

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/knowdp/knowdp/domain"
)

// Checks is what the released numbers say about their own consistency,
// recomputed from the tables: every pair of tables agrees on the margin
// they have in common (the grand total at least), every table that holds
// an invariant gives it the same values, and integer and non-negative
// tables are what they claim.
type Checks struct {
	// Pairs compares every two tables on their common margin.
	Pairs []PairCheck
	// Invariants compares the tables that hold each invariant.
	Invariants []InvariantCheck
	// Tables are the checks of each table on its own.
	Tables []TableCheck
	// Notes say what could not be compared, and why.
	Notes []string
	// Worst is the index in Pairs of the largest deviation (-1 if none).
	Worst int
}

// PairCheck compares tables A and B (indices into Release.Tables) on
// Margin, the finest margin both can be summed to.
type PairCheck struct {
	A, B int
	// Margin is the common margin, written as the release writes
	// cuboids: ["geo:state","sex"], [] for the grand total.
	Margin []string
	// RollUp is "A" or "B" when the margin is that whole table (the other
	// table, summed, must equal it), "" otherwise.
	RollUp string
	// FixedBy is the invariant that fixes the margin (CuboidName), "" if
	// none does.
	FixedBy string
	// Cells is the number of margin cells compared.
	Cells int
	// MaxDeviation is the largest |A's margin − B's margin| over the
	// cells, At the cell where it occurs, and Tolerance what floating-point
	// rounding allows (1e-9 of the margin's largest cell; 0 for two
	// integer tables).
	MaxDeviation, Tolerance float64
	At                      string
}

// OK reports whether the deviation is within the tolerance.
func (p PairCheck) OK() bool { return p.MaxDeviation <= p.Tolerance }

// InvariantCheck compares the margins of the tables that hold one
// invariant.
type InvariantCheck struct {
	// Exact is the invariant, as the release names it.
	Exact []string
	// Tables are the tables it is a margin of; Public is the index of a
	// public table that is the invariant itself (-1 if none).
	Tables []int
	Public int
	// MaxDeviation is the largest difference between two of the tables'
	// margins on the invariant (0 with fewer than two tables), At the cell
	// where it occurs, Tolerance as for PairCheck.
	MaxDeviation, Tolerance float64
	At                      string
	// Note says what could not be checked.
	Note string
}

// OK reports whether the tables agree within the tolerance.
func (c InvariantCheck) OK() bool { return c.MaxDeviation <= c.Tolerance }

// TableCheck is what one table's cells say about its own claims.
type TableCheck struct {
	Table int
	// NonInteger and Negative count the cells of an integer or
	// non-negative table that are not; MinCount is the smallest count.
	NonInteger, Negative int
	MinCount             float64
}

// relTol is the agreement expected of real-valued tables, relative to the
// largest cell of the margin compared: the estimate keeps the invariants
// to about 1e-12 and the files hold every float64 exactly, so 1e-9 leaves
// room for summing many cells and nothing for a real disagreement.
const relTol = 1e-9

// item is one dimension of a cuboid, at a level.
type item struct {
	dim, level string
	// rank is the level's position, coarsest 0; -1 where unknown (a level
	// named without a schema or hierarchy to place it).
	rank int
	// text is how the release wrote it ("geo:state", "geo").
	text string
}

// resolver places cuboids' dimensions at their levels, with the schema
// where one is given (which also maps values to coarser levels) and
// otherwise with the levels the metadata lists.
type resolver struct {
	s         *domain.Schema
	hierarchy string
	levels    []string // the metadata's levels of hierarchy, coarsest first
	maps      map[string]map[string]string
}

func newResolver(m Metadata, s *domain.Schema) *resolver {
	r := &resolver{s: s, hierarchy: m.Hierarchy, maps: map[string]map[string]string{}}
	for _, l := range m.Levels {
		if l.Level != "total" {
			r.levels = append(r.levels, l.Level)
		}
	}
	return r
}

// resolve places each dimension of cuboid c.
func (r *resolver) resolve(c []string) ([]item, error) {
	out := make([]item, len(c))
	for k, text := range c {
		name, level, named := strings.Cut(text, ":")
		it := item{dim: name, level: level, rank: -1, text: text}
		var levels []string
		switch {
		case r.s != nil:
			i, ok := r.s.Lookup(name)
			if !ok {
				return nil, fmt.Errorf("dimension %q is not in the schema", name)
			}
			levels = r.s.Levels(i)
			if levels == nil && named {
				return nil, fmt.Errorf("dimension %q has no levels in the schema, so %q is not one of them", name, level)
			}
		case name == r.hierarchy:
			levels = r.levels
		}
		switch {
		case levels == nil && !named:
			it.rank = 0
		case levels != nil && !named:
			it.level, it.rank = levels[len(levels)-1], len(levels)-1
		case levels != nil:
			it.rank = slices.Index(levels, level)
			if it.rank < 0 && r.s != nil {
				return nil, fmt.Errorf("dimension %q has no level %q (its levels: %s)", name, level, strings.Join(levels, ", "))
			}
		}
		out[k] = it
	}
	return out, nil
}

// finest reports whether it stands at its dimension's finest level, where
// the release writes the bare name.
func (r *resolver) finest(it item) bool {
	if r.s != nil {
		i, _ := r.s.Lookup(it.dim)
		return it.rank == r.s.NumLevels(i)-1
	}
	return it.dim == r.hierarchy && len(r.levels) > 0 && it.rank == len(r.levels)-1
}

// name writes a margin item as the release would.
func (r *resolver) name(it item) string {
	if it.level == "" || r.finest(it) {
		return it.dim
	}
	return it.dim + ":" + it.level
}

// mapper returns the map from dimension dim's values at level rank from to
// their ancestors at level rank to (coarser), or nil without a schema.
func (r *resolver) mapper(dim string, from, to int) map[string]string {
	if r.s == nil || from == to {
		return nil
	}
	key := fmt.Sprintf("%s\x00%d\x00%d", dim, from, to)
	if m, ok := r.maps[key]; ok {
		return m
	}
	i, _ := r.s.Lookup(dim)
	n := r.s.NumLevels(i)
	upFrom, upTo := n-1-from, n-1-to
	vals := r.s.LevelValues(i, upFrom)
	m := make(map[string]string, len(vals))
	for v := range vals {
		a := v
		for u := upFrom; u < upTo; u++ {
			a = r.s.Parent(i, u, a)
		}
		m[vals[v]] = r.s.LevelValues(i, upTo)[a]
	}
	r.maps[key] = m
	return m
}

// common returns the finest margin tables a and b can both be summed to:
// their common dimensions, each at the coarser of the two levels. A
// dimension at two levels that cannot be mapped one to the other (no
// schema) is left out and named in dropped.
func (r *resolver) common(a, b []item) (m []item, dropped []string) {
	for _, x := range a {
		k := slices.IndexFunc(b, func(y item) bool { return y.dim == x.dim })
		if k < 0 {
			continue
		}
		y := b[k]
		switch {
		case x.level == y.level:
			m = append(m, x)
		case r.s != nil && x.rank >= 0 && y.rank >= 0:
			if y.rank < x.rank {
				x = y
			}
			m = append(m, x)
		default:
			dropped = append(dropped, x.dim)
		}
	}
	return m, dropped
}

// rollUpOf reports whether margin m can be computed from view v: each of
// its dimensions in v at the same level, or a finer one the schema maps.
func (r *resolver) rollUpOf(m, v []item) bool {
	for _, x := range m {
		k := slices.IndexFunc(v, func(y item) bool { return y.dim == x.dim })
		if k < 0 {
			return false
		}
		y := v[k]
		if x.level != y.level && (r.s == nil || x.rank < 0 || y.rank < x.rank) {
			return false
		}
	}
	return true
}

// sameView reports whether two resolved cuboids are the same view.
func sameView(a, b []item) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.ContainsFunc(b, func(y item) bool { return y.dim == x.dim && y.level == x.level }) {
			return false
		}
	}
	return true
}

// margin is a table summed to a margin: values by cell key, and the
// cells' labels in first-seen order.
type margin struct {
	sum    map[string]float64
	labels map[string]string
	keys   []string
	maxAbs float64
}

// marginOf sums table t (resolved as v) to margin m.
func (r *resolver) marginOf(t *Table, v, m []item) *margin {
	cols := make([]int, len(m))
	maps := make([]map[string]string, len(m))
	for j, x := range m {
		cols[j] = slices.IndexFunc(v, func(y item) bool { return y.dim == x.dim })
		maps[j] = r.mapper(x.dim, v[cols[j]].rank, x.rank)
	}
	out := &margin{sum: map[string]float64{}, labels: map[string]string{}}
	var kb strings.Builder
	parts := make([]string, len(m))
	for i := range t.Counts {
		kb.Reset()
		for j, c := range cols {
			val := t.Values[c][i]
			if maps[j] != nil {
				val = maps[j][val]
			}
			parts[j] = val
			kb.WriteString(val)
			kb.WriteByte(0)
		}
		key := kb.String()
		if _, ok := out.sum[key]; !ok {
			out.keys = append(out.keys, key)
			if len(m) == 0 {
				out.labels[key] = "total"
			} else {
				out.labels[key] = strings.Join(parts, ", ")
			}
		}
		out.sum[key] += t.Counts[i]
	}
	for _, s := range out.sum {
		out.maxAbs = max(out.maxAbs, math.Abs(s))
	}
	return out
}

// deviation is the largest |a − b| over the cells of both margins (a cell
// missing from one counts as 0 there), and the label of its cell.
func deviation(a, b *margin) (dev float64, at string) {
	at = ""
	for _, k := range a.keys {
		if d := math.Abs(a.sum[k] - b.sum[k]); d > dev || at == "" {
			dev, at = d, a.labels[k]
		}
	}
	for _, k := range b.keys {
		if _, ok := a.sum[k]; !ok {
			if d := math.Abs(b.sum[k]); d > dev {
				dev, at = d, b.labels[k]
			}
		}
	}
	return dev, at
}

// Check recomputes the release's consistency from its tables. s, if not
// nil, is the release's schema: it places hierarchical levels and maps
// finer levels to coarser ones, so that tables at different levels are
// compared level by level; without it they are compared on their other
// dimensions, and a Note says so. Values outside the schema are an error
// naming the file, row and column.
func Check(rel *Release, s *domain.Schema) (*Checks, error) {
	r := newResolver(rel.Meta, s)
	views := make([][]item, len(rel.Tables))
	for i, t := range rel.Tables {
		v, err := r.resolve(t.Cuboid)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", t.File, t.Name(), err)
		}
		views[i] = v
		if s != nil {
			if err := checkValues(t, v, s); err != nil {
				return nil, err
			}
		}
	}
	exact := make([][]item, len(rel.Meta.Exact))
	for i, e := range rel.Meta.Exact {
		v, err := r.resolve(e)
		if err != nil {
			return nil, fmt.Errorf("%s: exact %s: %w", rel.Meta.File, CuboidName(e), err)
		}
		exact[i] = v
	}
	margins := map[string]*margin{}
	marginFor := func(i int, m []item) *margin {
		key := fmt.Sprint(i, r.names(m))
		if mg, ok := margins[key]; ok {
			return mg
		}
		mg := r.marginOf(rel.Tables[i], views[i], m)
		margins[key] = mg
		return mg
	}
	integer := func(i int) bool {
		t := rel.Tables[i]
		return t.Integer && (t.IntegerExact == nil || *t.IntegerExact)
	}
	tolerance := func(a, b *margin, ints bool) float64 {
		if ints {
			return 0
		}
		return relTol * max(1, a.maxAbs, b.maxAbs)
	}

	c := &Checks{Worst: -1}
	droppedDims := map[string]bool{}
	for a := range rel.Tables {
		for b := a + 1; b < len(rel.Tables); b++ {
			m, dropped := r.common(views[a], views[b])
			for _, d := range dropped {
				droppedDims[d] = true
			}
			ma, mb := marginFor(a, m), marginFor(b, m)
			p := PairCheck{A: a, B: b, Margin: r.names(m), Cells: len(ma.keys)}
			switch {
			case sameView(m, views[b]):
				p.RollUp = "B"
			case sameView(m, views[a]):
				p.RollUp = "A"
			}
			for k, e := range exact {
				if r.rollUpOf(m, e) {
					p.FixedBy = CuboidName(rel.Meta.Exact[k])
					break
				}
			}
			p.MaxDeviation, p.At = deviation(ma, mb)
			p.Tolerance = tolerance(ma, mb, integer(a) && integer(b))
			c.Pairs = append(c.Pairs, p)
			if c.Worst < 0 || p.MaxDeviation > c.Pairs[c.Worst].MaxDeviation {
				c.Worst = len(c.Pairs) - 1
			}
		}
	}
	for _, d := range slices.Sorted(maps.Keys(droppedDims)) {
		c.Notes = append(c.Notes, fmt.Sprintf("Tables with %q at different levels are compared on their other dimensions only: "+
			"without the schema (--schema) the report cannot tell which finer values make up a coarser one.", d))
	}

	for k, e := range exact {
		ic := InvariantCheck{Exact: rel.Meta.Exact[k], Public: -1}
		for i := range rel.Tables {
			if r.rollUpOf(e, views[i]) {
				ic.Tables = append(ic.Tables, i)
				if sameView(e, views[i]) {
					ic.Public = i
				}
			}
		}
		switch len(ic.Tables) {
		case 0:
			ic.Note = "no released table holds it"
			if s == nil && rel.Meta.Hierarchy != "" {
				ic.Note += " at a level the report can sum to without the schema"
			}
		case 1:
			ic.Note = "only " + rel.Tables[ic.Tables[0]].Name() + " holds it, and the invariant's own values are not among the release's files: nothing to compare it with"
		default:
			first := marginFor(ic.Tables[0], e)
			ints := integer(ic.Tables[0])
			for _, i := range ic.Tables[1:] {
				mi := marginFor(i, e)
				d, at := deviation(first, mi)
				if d > ic.MaxDeviation || ic.At == "" {
					ic.MaxDeviation, ic.At = d, at
				}
				ints = ints && integer(i)
				ic.Tolerance = max(ic.Tolerance, tolerance(first, mi, ints))
			}
			if ints {
				ic.Tolerance = 0
			}
		}
		c.Invariants = append(c.Invariants, ic)
	}

	for i, t := range rel.Tables {
		tc := TableCheck{Table: i, MinCount: math.Inf(1)}
		for _, v := range t.Counts {
			tc.MinCount = min(tc.MinCount, v)
			if (t.Integer || t.NonNeg) && v < 0 {
				tc.Negative++
			}
			if t.Integer && v != math.Trunc(v) {
				tc.NonInteger++
			}
		}
		if len(t.Counts) == 0 {
			tc.MinCount = 0
		}
		c.Tables = append(c.Tables, tc)
	}
	return c, nil
}

// names writes a margin's items as the release would.
func (r *resolver) names(m []item) []string {
	out := make([]string, len(m))
	for j, it := range m {
		out[j] = r.name(it)
	}
	return out
}

// checkValues refuses a value that is not in the schema's domain of its
// dimension at its level.
func checkValues(t *Table, v []item, s *domain.Schema) error {
	for d, it := range v {
		i, _ := s.Lookup(it.dim)
		up := s.NumLevels(i) - 1 - max(it.rank, 0)
		if !s.Hierarchical(i) {
			up = 0
		}
		ok := make(map[string]bool, s.LevelSize(i, up))
		for _, x := range s.LevelValues(i, up) {
			ok[x] = true
		}
		for row, x := range t.Values[d] {
			if !ok[x] {
				return fmt.Errorf("%s: row %d, column %q: %q is not a value of %s in the schema", t.File, t.Row(row), t.Columns[d], x, it.text)
			}
		}
	}
	return nil
}
