package metricdp

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"
)

// checkScale validates the budget per unit of distance of a metric.
func checkScale(name string, s float64) error {
	if math.IsNaN(s) || math.IsInf(s, 0) || s <= 0 {
		return fmt.Errorf("metricdp: %s must be finite and > 0, got %v", name, s)
	}
	return nil
}

// Euclidean is the scaled Euclidean metric d(u_i, u_j) = Scale * ||p_i - p_j||_2
// on points p_i: nearby points are hard to tell apart, distant ones easy
// (location privacy, geo-indistinguishability).
type Euclidean struct {
	dim   int
	pts   []float64 // n x dim, row-major
	scale float64
}

// NewEuclidean returns the scaled Euclidean metric on the given points (all
// of the same dimension, finite and pairwise distinct). scale is the budget
// per unit of distance.
func NewEuclidean(points [][]float64, scale float64) (*Euclidean, error) {
	if err := checkScale("Euclidean scale", scale); err != nil {
		return nil, err
	}
	if len(points) < 2 {
		return nil, fmt.Errorf("metricdp: the universe needs at least 2 points, got %d", len(points))
	}
	dim := len(points[0])
	if dim == 0 {
		return nil, fmt.Errorf("metricdp: point 0 has no coordinates")
	}
	e := &Euclidean{dim: dim, pts: make([]float64, 0, len(points)*dim), scale: scale}
	for i, p := range points {
		if len(p) != dim {
			return nil, fmt.Errorf("metricdp: point %d has %d coordinates, point 0 has %d", i, len(p), dim)
		}
		for c, v := range p {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("metricdp: point %d coordinate %d is %v", i, c, v)
			}
		}
		e.pts = append(e.pts, p...)
	}
	if i, j, ok := duplicateRows(e.pts, dim); ok {
		return nil, fmt.Errorf("metricdp: points %d and %d coincide; distinct universe elements need distinct points", i, j)
	}
	return e, nil
}

// duplicateRows reports two equal rows of a row-major table, if any.
func duplicateRows(v []float64, dim int) (int, int, bool) {
	n := len(v) / dim
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	row := func(i int) []float64 { return v[i*dim : (i+1)*dim] }
	slices.SortFunc(idx, func(a, b int) int {
		// Compare -0 and +0 as equal: they are the same point.
		for c := range dim {
			if x, y := row(a)[c], row(b)[c]; x != y {
				return cmp.Compare(x, y)
			}
		}
		return 0
	})
	for k := 1; k < n; k++ {
		if slices.Equal(row(idx[k-1]), row(idx[k])) {
			return min(idx[k-1], idx[k]), max(idx[k-1], idx[k]), true
		}
	}
	return 0, 0, false
}

// Len implements Metric.
func (e *Euclidean) Len() int { return len(e.pts) / e.dim }

// Dist implements Metric.
func (e *Euclidean) Dist(i, j int) float64 {
	pi, pj := e.pts[i*e.dim:(i+1)*e.dim], e.pts[j*e.dim:(j+1)*e.dim]
	var s float64
	for c := range pi {
		d := pi[c] - pj[c]
		s += d * d
	}
	return e.scale * math.Sqrt(s)
}

func (e *Euclidean) row(i int, dst []float64) {
	n := e.Len()
	if e.dim == 2 {
		x, y := e.pts[2*i], e.pts[2*i+1]
		p := e.pts[2*(i+1) : 2*n]
		for k := range dst[:n-i-1] {
			dx, dy := p[2*k]-x, p[2*k+1]-y
			dst[k] = e.scale * math.Sqrt(dx*dx+dy*dy)
		}
		return
	}
	for j := i + 1; j < n; j++ {
		dst[j-i-1] = e.Dist(i, j)
	}
}

// EarthRadiusKm is the mean Earth radius used by GreatCircle (IUGG).
const EarthRadiusKm = 6371.0088

// GreatCircle is the great-circle (haversine) distance on the sphere of
// radius EarthRadiusKm between points given by latitude and longitude in
// degrees, scaled by a budget per kilometre.
type GreatCircle struct {
	lat, lon, cosLat []float64 // radians
	perKm            float64
}

// NewGreatCircle returns the great-circle metric with budget perKm per
// kilometre. Latitudes must lie in [-90, 90] and longitudes in [-180, 180];
// places must be distinct.
func NewGreatCircle(lat, lon []float64, perKm float64) (*GreatCircle, error) {
	if err := checkScale("budget per km", perKm); err != nil {
		return nil, err
	}
	if len(lat) != len(lon) {
		return nil, fmt.Errorf("metricdp: %d latitudes but %d longitudes", len(lat), len(lon))
	}
	if len(lat) < 2 {
		return nil, fmt.Errorf("metricdp: the universe needs at least 2 places, got %d", len(lat))
	}
	g := &GreatCircle{perKm: perKm}
	pts := make([]float64, 0, 2*len(lat))
	for i := range lat {
		if !(lat[i] >= -90 && lat[i] <= 90) {
			return nil, fmt.Errorf("metricdp: place %d latitude %v is outside [-90, 90]", i, lat[i])
		}
		if !(lon[i] >= -180 && lon[i] <= 180) {
			return nil, fmt.Errorf("metricdp: place %d longitude %v is outside [-180, 180]", i, lon[i])
		}
		lo := lon[i]
		if lo == -180 {
			lo = 180 // the same meridian
		}
		pts = append(pts, lat[i], lo)
		r := lat[i] * math.Pi / 180
		g.lat = append(g.lat, r)
		g.lon = append(g.lon, lo*math.Pi/180)
		g.cosLat = append(g.cosLat, math.Cos(r))
	}
	if i, j, ok := duplicateRows(pts, 2); ok {
		return nil, fmt.Errorf("metricdp: places %d and %d have the same coordinates", i, j)
	}
	for i := range g.lat {
		if math.Abs(lat[i]) == 90 {
			for j := range i {
				if lat[j] == lat[i] {
					return nil, fmt.Errorf("metricdp: places %d and %d are both at the pole", j, i)
				}
			}
		}
	}
	return g, nil
}

// Len implements Metric.
func (g *GreatCircle) Len() int { return len(g.lat) }

// Dist implements Metric: haversine, which is accurate at short distances.
func (g *GreatCircle) Dist(i, j int) float64 {
	if i == j {
		return 0
	}
	sl := math.Sin((g.lat[j] - g.lat[i]) / 2)
	so := math.Sin((g.lon[j] - g.lon[i]) / 2)
	h := sl*sl + g.cosLat[i]*g.cosLat[j]*so*so
	return g.perKm * 2 * EarthRadiusKm * math.Asin(math.Sqrt(min(h, 1)))
}

// KmBetween returns the great-circle distance between places i and j in
// kilometres.
func (g *GreatCircle) KmBetween(i, j int) float64 { return g.Dist(i, j) / g.perKm }

// NewDates returns the scaled-date metric d(u_i, u_j) = perDay * |days
// between date_i and date_j| (Chatzikokolakis et al.; the paper's Section 5):
// an exact date is protected while a date within a few days, weeks or
// months is not, depending on perDay. Dates are taken as calendar days in
// UTC and must be distinct.
func NewDates(dates []time.Time, perDay float64) (*Euclidean, error) {
	if err := checkScale("budget per day", perDay); err != nil {
		return nil, err
	}
	base := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	pts := make([][]float64, len(dates))
	for i, t := range dates {
		y, m, d := t.UTC().Date()
		day := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
		pts[i] = []float64{math.Round(day.Sub(base).Hours() / 24)}
	}
	e, err := NewEuclidean(pts, perDay)
	if err != nil {
		return nil, fmt.Errorf("dates: %w", err)
	}
	return e, nil
}

// LInf is the scaled L-infinity (Chebyshev) metric d(u_i, u_j) = Scale *
// max_t |s_i(t) - s_j(t)| on time series s_i of equal length: two series
// are as hard to tell apart as their largest pointwise difference, so fine
// detail (a few watts on a smart meter) is protected and gross differences
// are not.
type LInf struct {
	t      int
	series []float64 // n x t
	scale  float64
}

// NewLInf returns the scaled L-infinity metric on the given series (equal
// lengths, finite values, pairwise distinct).
func NewLInf(series [][]float64, scale float64) (*LInf, error) {
	if err := checkScale("L-infinity scale", scale); err != nil {
		return nil, err
	}
	if len(series) < 2 {
		return nil, fmt.Errorf("metricdp: the universe needs at least 2 series, got %d", len(series))
	}
	t := len(series[0])
	if t == 0 {
		return nil, fmt.Errorf("metricdp: series 0 is empty")
	}
	l := &LInf{t: t, scale: scale}
	for i, s := range series {
		if len(s) != t {
			return nil, fmt.Errorf("metricdp: series %d has %d values, series 0 has %d", i, len(s), t)
		}
		for c, v := range s {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("metricdp: series %d value %d is %v", i, c, v)
			}
		}
		l.series = append(l.series, s...)
	}
	if i, j, ok := duplicateRows(l.series, t); ok {
		return nil, fmt.Errorf("metricdp: series %d and %d are equal; distinct universe elements need distinct series", i, j)
	}
	return l, nil
}

// Len implements Metric.
func (l *LInf) Len() int { return len(l.series) / l.t }

// Dist implements Metric.
func (l *LInf) Dist(i, j int) float64 {
	si, sj := l.series[i*l.t:(i+1)*l.t], l.series[j*l.t:(j+1)*l.t]
	var m float64
	for c := range si {
		m = max(m, math.Abs(si[c]-sj[c]))
	}
	return l.scale * m
}

// Attribute is one column of a table: its values and the budget of each
// value. A smaller budget protects a value more.
type Attribute struct {
	Name   string
	Values []string
	// Budgets[v] is eps_v > 0 for Values[v]; +Inf means the value needs no
	// protection from the others.
	Budgets []float64
}

// valueDist returns the attribute's metric between values a != b: the
// budget min(eps_a, eps_b) the paper's Example 1 asks for, closed by
// shortest paths. The closure goes through the most protected value s,
// costing 2 eps_s, so d(a, b) = min(eps_a, eps_b, 2 min_v eps_v).
func (a *Attribute) valueDist(x, y int, minEps float64) float64 {
	if x == y {
		return 0
	}
	return min(a.Budgets[x], a.Budgets[y], 2*minEps)
}

// AttributeMetric is the attribute-value sensitivity metric for tabular
// data (the paper's Example 1 and Section 5): universe elements are tuples
// of attribute values, and
//
//	d(u, v) = sum over attributes k of d_k(u_k, v_k),
//	d_k(a, b) = min(eps_a, eps_b, 2 min_c eps_c)   for a != b, 0 for a = b,
//
// where eps_a is the budget of value a of attribute k. Example 1 asks for
// d_k(a, b) = min(eps_a, eps_b); for binary attributes that is exactly what
// we get. The paper notes that min breaks the triangle inequality for
// attributes with more than two values and its replacement formula was lost
// in extraction, so we use the shortest-path closure of min, the largest
// metric below it. A change of a sensitive value (small eps) therefore costs
// little budget and needs much noise to reveal, as intended; with the same
// budget for all values of an attribute it is the weighted Hamming metric
// sum_k eps_k [u_k != v_k] of the paper's introduction.
type AttributeMetric struct {
	attrs  []Attribute
	minEps []float64
	rows   []int // n x len(attrs): value indices
}

// NewAttributeMetric returns the attribute metric on the universe whose
// element i has value rows[i][k] (an index into attrs[k].Values) for
// attribute k. Elements must be distinct tuples; budgets must be > 0 (+Inf
// allowed).
func NewAttributeMetric(attrs []Attribute, rows [][]int) (*AttributeMetric, error) {
	if len(attrs) == 0 {
		return nil, fmt.Errorf("metricdp: no attributes")
	}
	m := &AttributeMetric{attrs: make([]Attribute, len(attrs)), minEps: make([]float64, len(attrs))}
	for k, a := range attrs {
		if len(a.Values) == 0 {
			return nil, fmt.Errorf("metricdp: attribute %q has no values", a.Name)
		}
		if len(a.Budgets) != len(a.Values) {
			return nil, fmt.Errorf("metricdp: attribute %q has %d values but %d budgets", a.Name, len(a.Values), len(a.Budgets))
		}
		m.minEps[k] = math.Inf(1)
		for v, e := range a.Budgets {
			if math.IsNaN(e) || e <= 0 {
				return nil, fmt.Errorf("metricdp: attribute %q value %q budget %v; budgets must be > 0 (+Inf for none)", a.Name, a.Values[v], e)
			}
			m.minEps[k] = min(m.minEps[k], e)
		}
		m.attrs[k] = Attribute{Name: a.Name, Values: slices.Clone(a.Values), Budgets: slices.Clone(a.Budgets)}
	}
	if len(rows) < 2 {
		return nil, fmt.Errorf("metricdp: the universe needs at least 2 elements, got %d", len(rows))
	}
	key := make([]float64, 0, len(rows)*len(attrs))
	for i, r := range rows {
		if len(r) != len(attrs) {
			return nil, fmt.Errorf("metricdp: element %d has %d attribute values, want %d", i, len(r), len(attrs))
		}
		for k, v := range r {
			if v < 0 || v >= len(attrs[k].Values) {
				return nil, fmt.Errorf("metricdp: element %d attribute %q value index %d is out of range [0, %d)", i, attrs[k].Name, v, len(attrs[k].Values))
			}
			key = append(key, float64(v))
		}
		m.rows = append(m.rows, r...)
	}
	if i, j, ok := duplicateRows(key, len(attrs)); ok {
		return nil, fmt.Errorf("metricdp: elements %d and %d have the same attribute values", i, j)
	}
	return m, nil
}

// FullProduct returns the rows of the universe of all combinations of the
// attributes' values, the last attribute varying fastest.
func FullProduct(attrs []Attribute) [][]int {
	rows := [][]int{{}}
	for _, a := range attrs {
		var next [][]int
		for _, r := range rows {
			for v := range a.Values {
				next = append(next, append(slices.Clone(r), v))
			}
		}
		rows = next
	}
	return rows
}

// Len implements Metric.
func (m *AttributeMetric) Len() int { return len(m.rows) / len(m.attrs) }

// Dist implements Metric.
func (m *AttributeMetric) Dist(i, j int) float64 {
	k := len(m.attrs)
	ri, rj := m.rows[i*k:(i+1)*k], m.rows[j*k:(j+1)*k]
	var d float64
	for a := range ri {
		d += m.attrs[a].valueDist(ri[a], rj[a], m.minEps[a])
	}
	return d
}

// ValueDist returns d_k between values x and y of attribute k.
func (m *AttributeMetric) ValueDist(k, x, y int) float64 {
	return m.attrs[k].valueDist(x, y, m.minEps[k])
}

// Edge is an undirected edge of a weighted graph on universe elements.
type Edge struct {
	From, To int
	Weight   float64
}

// NewGraph returns the shortest-path metric of an undirected graph on n
// universe elements with positive edge weights (budgets): moving a record
// along an edge costs its weight, and further moves cost the cheapest path
// (the paper's social-network example, after Blowfish). Elements that no
// path connects are at distance +Inf: nothing protects one from the other.
// It computes all N^2 distances (Dijkstra from every element), so n is at
// most MaxDense.
func NewGraph(ctx context.Context, n int, edges []Edge) (*Dense, error) {
	if n < 2 {
		return nil, fmt.Errorf("metricdp: the universe needs at least 2 elements, got %d", n)
	}
	if n > MaxDense {
		return nil, fmt.Errorf("metricdp: %d universe elements exceed the dense-matrix limit of %d", n, MaxDense)
	}
	adj := make([][]Edge, n)
	for k, e := range edges {
		switch {
		case e.From < 0 || e.From >= n || e.To < 0 || e.To >= n:
			return nil, fmt.Errorf("metricdp: edge %d (%d, %d) has an endpoint outside [0, %d)", k, e.From, e.To, n)
		case e.From == e.To:
			return nil, fmt.Errorf("metricdp: edge %d is a loop at element %d", k, e.From)
		case math.IsNaN(e.Weight) || math.IsInf(e.Weight, 0) || e.Weight <= 0:
			return nil, fmt.Errorf("metricdp: edge %d (%d, %d) weight %v; weights must be finite and > 0", k, e.From, e.To, e.Weight)
		}
		adj[e.From] = append(adj[e.From], Edge{e.From, e.To, e.Weight})
		adj[e.To] = append(adj[e.To], Edge{e.To, e.From, e.Weight})
	}
	m := &Dense{n: n, d: make([]float64, n*n)}
	for s := range n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		dijkstra(adj, s, m.d[s*n:(s+1)*n])
	}
	// Paths found from both ends can differ in the last bit; keep the
	// metric exactly symmetric.
	for i := range n {
		for j := i + 1; j < n; j++ {
			v := min(m.d[i*n+j], m.d[j*n+i])
			m.d[i*n+j], m.d[j*n+i] = v, v
		}
	}
	return m, nil
}

func dijkstra(adj [][]Edge, s int, dist []float64) {
	for i := range dist {
		dist[i] = math.Inf(1)
	}
	dist[s] = 0
	h := &distHeap{}
	h.push(s, 0)
	for h.len() > 0 {
		u, du := h.pop()
		if du > dist[u] {
			continue
		}
		for _, e := range adj[u] {
			if nd := du + e.Weight; nd < dist[e.To] {
				dist[e.To] = nd
				h.push(e.To, nd)
			}
		}
	}
}

// distHeap is a binary min-heap of (element, distance).
type distHeap struct {
	v []int
	d []float64
}

func (h *distHeap) len() int { return len(h.v) }

func (h *distHeap) push(v int, d float64) {
	h.v, h.d = append(h.v, v), append(h.d, d)
	for c := len(h.v) - 1; c > 0; {
		p := (c - 1) / 2
		if h.d[p] <= h.d[c] {
			break
		}
		h.swap(p, c)
		c = p
	}
}

func (h *distHeap) pop() (int, float64) {
	v, d := h.v[0], h.d[0]
	last := len(h.v) - 1
	h.swap(0, last)
	h.v, h.d = h.v[:last], h.d[:last]
	for p := 0; ; {
		c := 2*p + 1
		if c >= last {
			break
		}
		if c+1 < last && h.d[c+1] < h.d[c] {
			c++
		}
		if h.d[p] <= h.d[c] {
			break
		}
		h.swap(p, c)
		p = c
	}
	return v, d
}

func (h *distHeap) swap(a, b int) {
	h.v[a], h.v[b] = h.v[b], h.v[a]
	h.d[a], h.d[b] = h.d[b], h.d[a]
}

// NewThreshold returns the Blowfish distance-threshold policy closed into a
// metric (the first metric of the paper's Section 4.4): pairs within
// distance theta of each other under base (a "secret pair") get budget eps,
// all other pairs are not protected, and the closure by shortest paths makes
// that a metric: d(u, v) = eps * (fewest hops from u to v along pairs within
// theta), +Inf when there is no such path. The policy itself ("eps within
// theta, unlimited beyond") breaks the triangle inequality; the closure is
// what it really guarantees (Blowfish's policy-graph distance), and it gives
// far pairs more protection than the policy wrote down, never less than eps
// for any pair. The paper's formulas for its two metrics were lost in
// extraction; this one is the standard Blowfish threshold policy.
func NewThreshold(ctx context.Context, base Metric, theta, eps float64) (*Dense, error) {
	if err := checkScale("threshold theta", theta); err != nil {
		return nil, err
	}
	if err := checkScale("threshold eps", eps); err != nil {
		return nil, err
	}
	n := base.Len()
	if n < 2 {
		return nil, fmt.Errorf("metricdp: the universe needs at least 2 elements, got %d", n)
	}
	if n > MaxDense {
		return nil, fmt.Errorf("metricdp: %d universe elements exceed the dense-matrix limit of %d", n, MaxDense)
	}
	adj := make([][]int32, n)
	buf := make([]float64, n)
	for i := range n - 1 {
		d := buf[:n-i-1]
		fillRow(base, i, d)
		for k, v := range d {
			if math.IsNaN(v) {
				return nil, fmt.Errorf("metricdp: base distance between %d and %d is NaN", i, i+1+k)
			}
			if v <= theta {
				adj[i] = append(adj[i], int32(i+1+k))
				adj[i+1+k] = append(adj[i+1+k], int32(i))
			}
		}
	}
	m := &Dense{n: n, d: make([]float64, n*n)}
	hops := make([]int32, n)
	queue := make([]int32, 0, n)
	for s := range n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for i := range hops {
			hops[i] = -1
		}
		hops[s] = 0
		queue = append(queue[:0], int32(s))
		for q := 0; q < len(queue); q++ {
			u := queue[q]
			for _, v := range adj[u] {
				if hops[v] < 0 {
					hops[v] = hops[u] + 1
					queue = append(queue, v)
				}
			}
		}
		row := m.d[s*n : (s+1)*n]
		for j, h := range hops {
			if h < 0 {
				row[j] = math.Inf(1)
			} else {
				row[j] = eps * float64(h)
			}
		}
	}
	return m, nil
}

// SmoothThreshold is the second metric of the paper's Section 4.4 as we
// reconstruct it (its formula was lost in extraction): budget eps for pairs
// within distance theta, growing in proportion to the distance beyond it,
//
//	d(u, v) = eps * max(1, base(u, v) / theta).
//
// It is a metric whenever base is (max(1, a) + max(1, b) >= max(1, a+b)),
// behaves like the scaled base metric beyond the threshold, and lies below
// the closed threshold metric of NewThreshold (a path of h hops of length
// <= theta spans at most h*theta), so it protects more and costs more noise,
// which is what the paper reports.
type SmoothThreshold struct {
	base       Metric
	theta, eps float64
}

// NewSmoothThreshold returns the smooth threshold metric over base.
func NewSmoothThreshold(base Metric, theta, eps float64) (*SmoothThreshold, error) {
	if err := checkScale("threshold theta", theta); err != nil {
		return nil, err
	}
	if err := checkScale("threshold eps", eps); err != nil {
		return nil, err
	}
	if base.Len() < 2 {
		return nil, fmt.Errorf("metricdp: the universe needs at least 2 elements, got %d", base.Len())
	}
	return &SmoothThreshold{base: base, theta: theta, eps: eps}, nil
}

// Len implements Metric.
func (s *SmoothThreshold) Len() int { return s.base.Len() }

// Dist implements Metric.
func (s *SmoothThreshold) Dist(i, j int) float64 {
	if i == j {
		return 0
	}
	return s.eps * max(1, s.base.Dist(i, j)/s.theta)
}

func (s *SmoothThreshold) row(i int, dst []float64) {
	fillRow(s.base, i, dst)
	for k, v := range dst[:s.Len()-i-1] {
		dst[k] = s.eps * max(1, v/s.theta)
	}
}

// scaled multiplies a metric's distances by a factor: MWEM gives each of its
// rounds a fixed fraction of every pair's budget.
type scaled struct {
	m Metric
	f float64
}

func (s scaled) Len() int              { return s.m.Len() }
func (s scaled) Dist(i, j int) float64 { return s.f * s.m.Dist(i, j) }
func (s scaled) row(i int, dst []float64) {
	fillRow(s.m, i, dst)
	for k := range dst[:s.Len()-i-1] {
		dst[k] *= s.f
	}
}
