package domain

// Hierarchical dimensions and views.
//
// A hierarchical dimension is one dimension whose domain is its leaves (the
// finest level: counties, single years of age); each coarser level is a
// surjection from the leaves onto that level's values, the parent maps
// composed level by level. A View is a cuboid whose hierarchical dimensions
// may stand at a coarser level: {geo:state, sex} is the roll-up of
// {geo, sex} to states. Every operator on cuboids gains a level this way
// rather than a new code path: a view's counts are the roll-up of the
// leaf-level cuboid's counts.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/knowdp/knowdp/query"
)

// hierarchy is the level structure of one dimension.
type hierarchy struct {
	// names are the levels, coarsest first; the last names the leaves.
	names []string
	// values[k] are the values of level k (same order as names); the
	// leaves' are the dimension's values. A coarser level lists its values
	// in the order they are first reached from the leaves.
	values [][]string
	// up[k][leaf] is the position in values[k] of the leaf's ancestor at
	// level k (up[last] is the identity).
	up [][]int32
	// parent[k][v] is the position in values[k-1] of the parent of value v
	// of level k (k >= 1).
	parent [][]int32
}

// newHierarchy validates a hierarchical dimension. Errors name the level
// and the value.
func newHierarchy(d Dimension) (*hierarchy, error) {
	if len(d.Levels) == 0 {
		return nil, errors.New(`"parents" given without "levels"`)
	}
	seen := map[string]bool{}
	for _, l := range d.Levels {
		if strings.TrimSpace(l) == "" {
			return nil, errors.New("a level has no name")
		}
		if strings.ContainsAny(l, ":,.") {
			return nil, fmt.Errorf("level name %q must not contain ':', ',' or '.'", l)
		}
		if seen[l] {
			return nil, fmt.Errorf("level %q is listed twice", l)
		}
		seen[l] = true
	}
	L := len(d.Levels)
	for k := range d.Parents {
		if !seen[k] {
			return nil, fmt.Errorf("parents are given for %q, which is not a level (levels: %s)", k, strings.Join(d.Levels, ", "))
		}
		if k == d.Levels[L-1] {
			return nil, fmt.Errorf("parents are given for the finest level %q; give each level's map keyed by the parent level", k)
		}
	}
	h := &hierarchy{
		names:  slices.Clone(d.Levels),
		values: make([][]string, L),
		up:     make([][]int32, L),
		parent: make([][]int32, L),
	}
	h.values[L-1] = slices.Clone(d.Values)
	id := make([]int32, len(d.Values))
	for i := range id {
		id[i] = int32(i)
	}
	h.up[L-1] = id
	for k := L - 2; k >= 0; k-- {
		m, ok := d.Parents[d.Levels[k]]
		if !ok {
			return nil, fmt.Errorf("no parents for level %q: give \"parents\": {%q: {value of %q: value of %q, ...}}",
				d.Levels[k], d.Levels[k], d.Levels[k+1], d.Levels[k])
		}
		child := h.values[k+1]
		pos := map[string]int32{}
		h.parent[k+1] = make([]int32, len(child))
		for j, v := range child {
			p, ok := m[v]
			if !ok {
				return nil, fmt.Errorf("value %q of level %q has no parent at level %q", v, d.Levels[k+1], d.Levels[k])
			}
			if strings.TrimSpace(p) == "" {
				return nil, fmt.Errorf("value %q of level %q has an empty parent at level %q", v, d.Levels[k+1], d.Levels[k])
			}
			q, ok := pos[p]
			if !ok {
				q = int32(len(h.values[k]))
				pos[p] = q
				h.values[k] = append(h.values[k], p)
			}
			h.parent[k+1][j] = q
		}
		if len(m) != len(child) {
			in := make(map[string]bool, len(child))
			for _, v := range child {
				in[v] = true
			}
			var extra []string
			for v := range m {
				if !in[v] {
					extra = append(extra, v)
				}
			}
			slices.Sort(extra)
			return nil, fmt.Errorf("parents.%s names %q, which is not a value of level %q", d.Levels[k], extra[0], d.Levels[k+1])
		}
		up := make([]int32, len(d.Values))
		for leaf, c := range h.up[k+1] {
			up[leaf] = h.parent[k+1][c]
		}
		h.up[k] = up
	}
	return h, nil
}

// parentMaps returns the parent maps in the form Dimension.Parents takes.
func (h *hierarchy) parentMaps() map[string]map[string]string {
	out := make(map[string]map[string]string, len(h.names)-1)
	for k := 1; k < len(h.names); k++ {
		m := make(map[string]string, len(h.values[k]))
		for j, v := range h.values[k] {
			m[v] = h.values[k-1][h.parent[k][j]]
		}
		out[h.names[k-1]] = m
	}
	return out
}

// Levels returns the level names of dimension i, coarsest first (the last
// names its values), or nil for a flat dimension.
func (s *Schema) Levels(i int) []string {
	if h := s.hier[i]; h != nil {
		return slices.Clone(h.names)
	}
	return nil
}

// Hierarchical reports whether dimension i has levels.
func (s *Schema) Hierarchical(i int) bool { return s.hier[i] != nil }

// NumLevels returns how many levels dimension i has: 1 for a flat one.
func (s *Schema) NumLevels(i int) int {
	if h := s.hier[i]; h != nil {
		return len(h.names)
	}
	return 1
}

// LevelValues returns the values of dimension i at level up (0 = its
// values, 1 = their parents, ...). The caller must not modify them.
func (s *Schema) LevelValues(i, up int) []string {
	h := s.hier[i]
	if h == nil {
		return s.dims[i].Values
	}
	return h.values[len(h.names)-1-up]
}

// LevelSize returns the number of values of dimension i at level up.
func (s *Schema) LevelSize(i, up int) int { return len(s.LevelValues(i, up)) }

// Ancestor returns the position, among the values of level up, of the
// ancestor of value v of dimension i.
func (s *Schema) Ancestor(i, up, v int) int {
	if up == 0 {
		return v
	}
	h := s.hier[i]
	return int(h.up[len(h.names)-1-up][v])
}

// Parent returns the position at level up+1 of the parent of value v of
// level up of dimension i.
func (s *Schema) Parent(i, up, v int) int {
	h := s.hier[i]
	return int(h.parent[len(h.names)-1-up][v])
}

// View is a cuboid whose hierarchical dimensions may stand at a coarser
// level: Up[i] is how many levels dimension i is rolled up from its values
// (0 = the values themselves). A View with every Up 0 is the cuboid Dims;
// the zero View is the grand total. Views are comparable and can be map
// keys.
type View struct {
	Dims Cuboid
	Up   [MaxDims]uint8
}

// ViewOf returns the view of cuboid c at its finest levels.
func ViewOf(c Cuboid) View { return View{Dims: c} }

// Flat reports whether every dimension of v stands at its finest level, so
// that v is the cuboid v.Dims.
func (v View) Flat() bool {
	for _, i := range v.Dims.Dims() {
		if v.Up[i] != 0 {
			return false
		}
	}
	return true
}

// RollUpOf reports whether v can be computed from w by summing: every
// dimension of v is in w, at the same or a coarser level.
func (v View) RollUpOf(w View) bool {
	if !v.Dims.AncestorOf(w.Dims) {
		return false
	}
	for _, i := range v.Dims.Dims() {
		if v.Up[i] < w.Up[i] {
			return false
		}
	}
	return true
}

// normal clears the levels of dimensions that are not in the view, so that
// equal views compare equal.
func (v View) Normal() View {
	for i := range v.Up {
		if !v.Dims.Has(i) {
			v.Up[i] = 0
		}
	}
	return v
}

// ParseView parses a comma-separated list of dimensions, each optionally at
// a level: "geo:state,sex". A bare hierarchical dimension stands at its
// finest level; "" is the grand total.
func (s *Schema) ParseView(list string) (View, error) {
	var v View
	if strings.TrimSpace(list) == "" {
		return v, nil
	}
	for _, item := range strings.Split(list, ",") {
		name, level, hasLevel := strings.Cut(strings.TrimSpace(item), ":")
		name = strings.TrimSpace(name)
		i, ok := s.byName[name]
		if !ok {
			return View{}, fmt.Errorf("unknown dimension %q (the schema has %s)", name, strings.Join(s.names(), ", "))
		}
		if v.Dims.Has(i) {
			return View{}, fmt.Errorf("dimension %q appears twice", name)
		}
		v.Dims |= 1 << i
		if !hasLevel {
			continue
		}
		up, err := s.levelUp(i, strings.TrimSpace(level))
		if err != nil {
			return View{}, err
		}
		v.Up[i] = uint8(up)
	}
	return v, nil
}

// levelUp returns how many levels the named level of dimension i is above
// its values.
func (s *Schema) levelUp(i int, level string) (int, error) {
	h := s.hier[i]
	if h == nil {
		return 0, fmt.Errorf("dimension %q has no levels, so %q is not one of them", s.dims[i].Name, level)
	}
	k := slices.Index(h.names, level)
	if k < 0 {
		return 0, fmt.Errorf("dimension %q has no level %q (its levels: %s)", s.dims[i].Name, level, strings.Join(h.names, ", "))
	}
	return len(h.names) - 1 - k, nil
}

// ViewOfNames returns the view of the named dimensions, each "name" or
// "name:level" (as a server request or a workload file lists them).
func (s *Schema) ViewOfNames(names ...string) (View, error) {
	for _, n := range names {
		if strings.Contains(n, ",") {
			return View{}, fmt.Errorf("dimension name %q contains a comma", n)
		}
	}
	return s.ParseView(strings.Join(names, ","))
}

// ViewNames returns the view's dimensions in schema order, a coarser level
// written "name:level".
func (s *Schema) ViewNames(v View) []string {
	var n []string
	for _, i := range v.Dims.Dims() {
		name := s.dims[i].Name
		if up := int(v.Up[i]); up > 0 {
			h := s.hier[i]
			name += ":" + h.names[len(h.names)-1-up]
		}
		n = append(n, name)
	}
	return n
}

// FormatView returns the view as "{geo:state,sex}".
func (s *Schema) FormatView(v View) string {
	return "{" + strings.Join(s.ViewNames(v), ",") + "}"
}

// ViewColumns returns the column names of a table of view v, one per
// dimension: a flat dimension's name, and for a hierarchical one the name
// of the level the view stands at ("state" for geo:state, "place" for the
// finest level of geo), which is what its values are. A level name that
// another dimension or another hierarchy's level also bears, or that is
// "count" or "moe90", would be ambiguous: it is written "geo.state".
func (s *Schema) ViewColumns(v View) []string {
	var cols []string
	for _, i := range v.Dims.Dims() {
		name := s.dims[i].Name
		if h := s.hier[i]; h != nil {
			level := h.names[len(h.names)-1-int(v.Up[i])]
			if s.levelNameUnique(i, level) {
				name = level
			} else {
				name += "." + level
			}
		}
		cols = append(cols, name)
	}
	return cols
}

// levelNameUnique reports whether a level name of dimension i names
// nothing else in the schema (another dimension, a level of another
// dimension) and no count column.
func (s *Schema) levelNameUnique(i int, level string) bool {
	if level == "count" || level == "moe90" {
		return false
	}
	for j, d := range s.dims {
		if d.Name == level && j != i {
			return false
		}
		if j != i && s.hier[j] != nil && slices.Contains(s.hier[j].names, level) {
			return false
		}
	}
	return true
}

// ViewFileName returns the file name of a released view: its columns
// (ViewColumns) joined with "-", as in "state-sex.csv" for {geo:state,sex}
// and "place-sex.csv" for {geo,sex}; "total.csv" for the grand total. Path
// separators in names become "_".
func (s *Schema) ViewFileName(v View) string {
	if v.Dims == 0 {
		return "total.csv"
	}
	return strings.NewReplacer("/", "_", `\`, "_").Replace(strings.Join(s.ViewColumns(v), "-")) + ".csv"
}

// ViewSize returns the number of cells of view v.
func (s *Schema) ViewSize(v View) int {
	n := 1
	for _, i := range v.Dims.Dims() {
		n *= s.LevelSize(i, int(v.Up[i]))
	}
	return n
}

// CheckView returns an error unless v names dimensions and levels the
// schema has.
func (s *Schema) CheckView(v View) error {
	if v.Dims&^Base(len(s.dims)) != 0 {
		return fmt.Errorf("view %#x names dimensions the schema (%d dimensions) does not have", uint64(v.Dims), len(s.dims))
	}
	for _, i := range v.Dims.Dims() {
		if int(v.Up[i]) >= s.NumLevels(i) {
			return fmt.Errorf("dimension %q has %d levels; level %d above its values does not exist", s.dims[i].Name, s.NumLevels(i), v.Up[i])
		}
	}
	return nil
}

// RollUp sums the counts of view from (row-major over its dimensions at
// their levels) into view to, which must be a roll-up of it.
func (s *Schema) RollUp(from View, counts []float64, to View) ([]float64, error) {
	if !to.RollUpOf(from) {
		return nil, fmt.Errorf("%s is not a roll-up of %s", s.FormatView(to), s.FormatView(from))
	}
	if len(counts) != s.ViewSize(from) {
		return nil, fmt.Errorf("%s has %d cells, not %d", s.FormatView(from), s.ViewSize(from), len(counts))
	}
	out := make([]float64, s.ViewSize(to))
	dims := from.Dims.Dims()
	// For each dimension of from: where its value goes in to (-1: summed out).
	maps := make([][]int, len(dims))
	strides := make([]int, len(dims))
	st := 1
	for k := len(dims) - 1; k >= 0; k-- {
		i := dims[k]
		if to.Dims.Has(i) {
			strides[k] = st
			st *= s.LevelSize(i, int(to.Up[i]))
		}
	}
	for k, i := range dims {
		n := s.LevelSize(i, int(from.Up[i]))
		m := make([]int, n)
		for v := range n {
			if !to.Dims.Has(i) {
				m[v] = 0
				continue
			}
			m[v] = s.LevelAncestor(i, int(from.Up[i]), int(to.Up[i]), v) * strides[k]
		}
		maps[k] = m
	}
	idx := make([]int, len(dims))
	off := 0
	for k := range maps {
		off += maps[k][0]
	}
	for _, x := range counts {
		out[off] += x
		// Advance the odometer, keeping off = Σ maps[k][idx[k]].
		for k := len(dims) - 1; k >= 0; k-- {
			off -= maps[k][idx[k]]
			idx[k]++
			if idx[k] < len(maps[k]) {
				off += maps[k][idx[k]]
				break
			}
			idx[k] = 0
			off += maps[k][0]
		}
	}
	return out, nil
}

// levelAncestor maps value v of dimension i at level from to its ancestor at
// level to (to >= from).
func (s *Schema) LevelAncestor(i, from, to, v int) int {
	for l := from; l < to; l++ {
		v = s.Parent(i, l, v)
	}
	return v
}

// LeafView returns the view of v's dimensions at their finest levels: the
// cuboid to count data into before rolling up to v.
func LeafView(v View) View { return View{Dims: v.Dims} }

// checkDuplicateKeys reports the first JSON object key that appears twice
// in one object (encoding/json silently keeps the last), or a key that
// differs from another only in case, naming its path.
func checkDuplicateKeys(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var walk func(path string) error
	walk = func(path string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			keys := map[string]string{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				k, _ := kt.(string)
				if prev, dup := keys[strings.ToLower(k)]; dup {
					if prev == k {
						return fmt.Errorf("%s: key %q appears twice", pathOr(path), k)
					}
					return fmt.Errorf("%s: keys %q and %q differ only in case", pathOr(path), prev, k)
				}
				keys[strings.ToLower(k)] = k
				if err := walk(path + "." + k); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		case json.Delim('['):
			for n := 0; dec.More(); n++ {
				if err := walk(fmt.Sprintf("%s[%d]", path, n)); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		}
		return nil
	}
	if err := walk(""); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

func pathOr(p string) string {
	if p == "" {
		return "the document"
	}
	return strings.TrimPrefix(p, ".")
}

// Term returns view v as a set of linear queries on the schema's leaves, in
// the query model: along each dimension of v, the identity at its finest
// level or the roll-up to its level; the total along the others. Its rows
// are v's cells in v's row-major order.
func (s *Schema) Term(v View) query.Term {
	t := make(query.Term, s.NumDims())
	for d := range s.NumDims() {
		n := s.Size(d)
		switch up := int(v.Up[d]); {
		case !v.Dims.Has(d):
			t[d] = query.NewTotal(n)
		case up == 0:
			t[d] = query.NewIdentity(n)
		default:
			group := make([]int32, n)
			for i := range group {
				group[i] = int32(s.Ancestor(d, up, i))
			}
			f, err := query.NewRollUp(group)
			if err != nil {
				// Every value of a level has a leaf below it (NewSchema
				// checks the parents), so no group is empty.
				panic("domain: " + err.Error())
			}
			t[d] = f
		}
	}
	return t
}
