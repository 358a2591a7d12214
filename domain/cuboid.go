package domain

import (
	"fmt"
	"math/bits"
	"strings"
)

// Cuboid is a set of dimensions of a schema, as a bit set: dimension i is in
// the cuboid when bit i is set. The cuboid of all dimensions is the base
// cuboid; the empty cuboid is the grand total. Cuboids form a lattice under
// inclusion; C1 is an ancestor of C2 (C1 ⪯ C2, C1 can be computed from C2)
// when C1's dimensions are a subset of C2's.
type Cuboid uint64

// Base returns the base cuboid of a schema with n dimensions.
func Base(n int) Cuboid {
	if n >= 64 {
		return ^Cuboid(0)
	}
	return Cuboid(1)<<n - 1
}

// CuboidOf returns the cuboid of the named dimensions.
func (s *Schema) CuboidOf(names ...string) (Cuboid, error) {
	var c Cuboid
	for _, n := range names {
		i, ok := s.byName[n]
		if !ok {
			return 0, fmt.Errorf("unknown dimension %q (the schema has %s)", n, strings.Join(s.names(), ", "))
		}
		c |= 1 << i
	}
	return c, nil
}

// ParseCuboid parses a comma-separated list of dimension names, such as
// "sex,age". The empty string is the empty cuboid (the grand total).
func (s *Schema) ParseCuboid(list string) (Cuboid, error) {
	if strings.TrimSpace(list) == "" {
		return 0, nil
	}
	var names []string
	for _, n := range strings.Split(list, ",") {
		names = append(names, strings.TrimSpace(n))
	}
	return s.CuboidOf(names...)
}

func (s *Schema) names() []string {
	n := make([]string, len(s.dims))
	for i, d := range s.dims {
		n[i] = d.Name
	}
	return n
}

// Names returns the names of the cuboid's dimensions in schema order.
func (s *Schema) Names(c Cuboid) []string {
	var n []string
	for _, i := range c.Dims() {
		n = append(n, s.dims[i].Name)
	}
	return n
}

// Format returns the cuboid as "{sex,age}".
func (s *Schema) Format(c Cuboid) string {
	return "{" + strings.Join(s.Names(c), ",") + "}"
}

// FormatList formats cuboids as Format does, separated by ", ":
// "{a,b}, {c}".
func (s *Schema) FormatList(cs []Cuboid) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = s.Format(c)
	}
	return strings.Join(names, ", ")
}

// CuboidSize returns size([C]), the number of cells of cuboid c: the
// product of its dimensions' domain sizes (1 for the empty cuboid).
func (s *Schema) CuboidSize(c Cuboid) int {
	n := 1
	for _, i := range c.Dims() {
		n *= len(s.dims[i].Values)
	}
	return n
}

// Deg returns deg(C), the number of base cells that aggregate into one cell
// of cuboid c: Cells()/CuboidSize(c).
func (s *Schema) Deg(c Cuboid) int {
	return s.CuboidSize(Base(len(s.dims)) &^ c)
}

// Has reports whether dimension i is in c.
func (c Cuboid) Has(i int) bool { return c&(1<<i) != 0 }

// Dims returns the dimensions of c in increasing order.
func (c Cuboid) Dims() []int {
	d := make([]int, 0, bits.OnesCount64(uint64(c)))
	for x := uint64(c); x != 0; x &= x - 1 {
		d = append(d, bits.TrailingZeros64(x))
	}
	return d
}

// Len returns the number of dimensions of c.
func (c Cuboid) Len() int { return bits.OnesCount64(uint64(c)) }

// AncestorOf reports whether c ⪯ d: every dimension of c is in d, so c can
// be computed from d.
func (c Cuboid) AncestorOf(d Cuboid) bool { return c&^d == 0 }

func (s *Schema) SubSizesOf(c Cuboid) []int {
	var out []int
	for _, d := range c.Dims() {
		out = append(out, s.Size(d))
	}
	return out
}

// cellLabel formats cell i of cuboid c as "sex=F, age=21-30".
func (s *Schema) CellLabel(c Cuboid, i int) string {
	dims := c.Dims()
	parts := make([]string, len(dims))
	for k := len(dims) - 1; k >= 0; k-- {
		d := s.dims[dims[k]]
		parts[k] = d.Name + "=" + d.Values[i%len(d.Values)]
		i /= len(d.Values)
	}
	return strings.Join(parts, ", ")
}
