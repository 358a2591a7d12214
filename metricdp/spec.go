package metricdp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/knowdp/knowdp/source"
)

// Universe is a universe read from a CSV file: one row per element, with a
// unique, non-empty "id" column and whatever columns its metric needs.
type Universe struct {
	path   string
	header []string
	ids    []string
	index  map[string]int
	rows   [][]string
}

// LoadUniverse reads a universe CSV file.
func LoadUniverse(path string) (*Universe, error) {
	c, err := source.OpenCSV(path)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	idCol, err := c.Column("id")
	if err != nil {
		return nil, err
	}
	u := &Universe{path: path, header: slices.Clone(c.Header()), index: map[string]int{}}
	for {
		rec, err := c.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		id := strings.TrimSpace(rec[idCol])
		if id == "" {
			return nil, c.Errorf(idCol, "empty id")
		}
		if prev, dup := u.index[id]; dup {
			return nil, c.Errorf(idCol, "id %q already used on row %d", id, prev+2)
		}
		u.index[id] = len(u.ids)
		u.ids = append(u.ids, id)
		u.rows = append(u.rows, slices.Clone(rec))
	}
	if len(u.ids) < 2 {
		return nil, fmt.Errorf("%s: the universe needs at least 2 elements, got %d", path, len(u.ids))
	}
	return u, nil
}

// Len returns the number of elements.
func (u *Universe) Len() int { return len(u.ids) }

// IDs returns the element ids in file order.
func (u *Universe) IDs() []string { return slices.Clone(u.ids) }

// Index returns the position of the element with the given id.
func (u *Universe) Index(id string) (int, bool) {
	i, ok := u.index[id]
	return i, ok
}

func (u *Universe) column(name string) (int, error) {
	for i, h := range u.header {
		if h == name {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%s: no column %q (the header has %s)", u.path, name, strings.Join(u.header, ", "))
}

// floats returns a numeric column, with errors naming the file, row and
// column.
func (u *Universe) floats(name string) ([]float64, error) {
	c, err := u.column(name)
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(u.rows))
	for i, r := range u.rows {
		v, err := strconv.ParseFloat(strings.TrimSpace(r[c]), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%s: row %d, column %q: %q is not a finite number", u.path, i+2, name, r[c])
		}
		out[i] = v
	}
	return out, nil
}

func (u *Universe) strings(name string) ([]string, error) {
	c, err := u.column(name)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(u.rows))
	for i, r := range u.rows {
		out[i] = strings.TrimSpace(r[c])
	}
	return out, nil
}

// SpecHelp documents the metric specification language.
const SpecHelp = `A metric SPEC is KIND:key=value,key=value. Distances are privacy budgets:
moving a record from element u to v may change output odds by exp(d(u,v)).
The universe CSV has an "id" column and the columns the metric reads.

  euclidean:scale=S[,cols=x+y]         S * Euclidean distance on the columns (default x+y)
  greatcircle:eps_per_km=E[,lat=lat,lon=lon]
                                       E * great-circle km between lat/lon in degrees
  dates:eps_per_day=E[,col=date]       E * days between dates (YYYY-MM-DD)
  linf:scale=S,cols=t1+t2+...          S * max_t |s_u(t) - s_v(t)| (time series)
  attribute:budgets=B.csv[,default=E]  attribute-value sensitivity: B.csv has columns
                                       attribute,value,eps (eps may be "inf"); each attribute
                                       names a universe column; values not listed get E
  graph:file=G.csv                     shortest paths; G.csv has columns from,to,weight (ids)
  threshold:theta=T,eps=E[,base=euclidean|greatcircle][,cols=x+y]
                                       Blowfish threshold: eps within distance T (km for
                                       greatcircle), none beyond; closed by shortest paths
  smooth-threshold:theta=T,eps=E[,base=...][,cols=...]
                                       eps * max(1, distance / T)`

// ParseSpec builds the metric a SPEC describes (see SpecHelp) on universe u.
// It reports which pairs a closure lowered, if any, in the returned note.
func ParseSpec(ctx context.Context, spec string, u *Universe) (Metric, string, error) {
	kind, rest, _ := strings.Cut(strings.TrimSpace(spec), ":")
	params := map[string]string{}
	if rest != "" {
		for _, kv := range strings.Split(rest, ",") {
			k, v, ok := strings.Cut(kv, "=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if !ok || k == "" || v == "" {
				return nil, "", fmt.Errorf("metric spec %q: %q is not key=value", spec, kv)
			}
			if _, dup := params[k]; dup {
				return nil, "", fmt.Errorf("metric spec %q: %s given twice", spec, k)
			}
			params[k] = v
		}
	}
	p := &specParams{spec: spec, kv: params}
	m, note, err := buildSpec(ctx, kind, p, u)
	if err != nil {
		return nil, "", err
	}
	for k := range p.kv {
		if !p.used[k] {
			return nil, "", fmt.Errorf("metric spec %q: unknown parameter %q for %s", spec, k, kind)
		}
	}
	return m, note, nil
}

type specParams struct {
	spec string
	kv   map[string]string
	used map[string]bool
}

func (p *specParams) str(k, def string) (string, error) {
	if p.used == nil {
		p.used = map[string]bool{}
	}
	p.used[k] = true
	v, ok := p.kv[k]
	if !ok {
		if def == "" {
			return "", fmt.Errorf("metric spec %q: missing parameter %s", p.spec, k)
		}
		return def, nil
	}
	return v, nil
}

func (p *specParams) num(k string) (float64, error) {
	s, err := p.str(k, "")
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
		return 0, fmt.Errorf("metric spec %q: %s=%s must be a finite number > 0", p.spec, k, s)
	}
	return v, nil
}

func buildSpec(ctx context.Context, kind string, p *specParams, u *Universe) (Metric, string, error) {
	wrap := func(m Metric, err error) (Metric, string, error) {
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", u.path, err)
		}
		return m, "", nil
	}
	switch kind {
	case "euclidean":
		s, err := p.num("scale")
		if err != nil {
			return nil, "", err
		}
		pts, err := points(p, u)
		if err != nil {
			return nil, "", err
		}
		return wrap(NewEuclidean(pts, s))
	case "greatcircle":
		e, err := p.num("eps_per_km")
		if err != nil {
			return nil, "", err
		}
		g, err := greatCircle(p, u, e)
		return wrap(g, err)
	case "dates":
		e, err := p.num("eps_per_day")
		if err != nil {
			return nil, "", err
		}
		col, _ := p.str("col", "date")
		raw, err := u.strings(col)
		if err != nil {
			return nil, "", err
		}
		dates := make([]time.Time, len(raw))
		for i, s := range raw {
			if dates[i], err = time.Parse(time.DateOnly, s); err != nil {
				return nil, "", fmt.Errorf("%s: row %d, column %q: %q is not a date YYYY-MM-DD", u.path, i+2, col, s)
			}
		}
		return wrap(NewDates(dates, e))
	case "linf":
		s, err := p.num("scale")
		if err != nil {
			return nil, "", err
		}
		cols, err := p.str("cols", "")
		if err != nil {
			return nil, "", err
		}
		series, err := table(u, strings.Split(cols, "+"))
		if err != nil {
			return nil, "", err
		}
		return wrap(NewLInf(series, s))
	case "attribute":
		return attributeSpec(p, u)
	case "graph":
		return graphSpec(ctx, p, u)
	case "threshold", "smooth-threshold":
		theta, err := p.num("theta")
		if err != nil {
			return nil, "", err
		}
		eps, err := p.num("eps")
		if err != nil {
			return nil, "", err
		}
		var base Metric
		switch b, _ := p.str("base", "euclidean"); b {
		case "euclidean":
			pts, err := points(p, u)
			if err != nil {
				return nil, "", err
			}
			if base, err = NewEuclidean(pts, 1); err != nil {
				return nil, "", fmt.Errorf("%s: %w", u.path, err)
			}
		case "greatcircle":
			if base, err = greatCircle(p, u, 1); err != nil {
				return nil, "", fmt.Errorf("%s: %w", u.path, err)
			}
		default:
			return nil, "", fmt.Errorf("metric spec %q: base=%s; want euclidean or greatcircle", p.spec, b)
		}
		if kind == "smooth-threshold" {
			return wrap(NewSmoothThreshold(base, theta, eps))
		}
		m, err := NewThreshold(ctx, base, theta, eps)
		if err != nil {
			return nil, "", err
		}
		return m, fmt.Sprintf("threshold policy closed by shortest paths: d(u,v) = %g x (hops between u and v along pairs within %g); pairs no path joins are not protected", eps, theta), nil
	case "":
		return nil, "", fmt.Errorf("metric spec is empty\n%s", SpecHelp)
	}
	return nil, "", fmt.Errorf("metric spec: unknown kind %q\n%s", kind, SpecHelp)
}

func points(p *specParams, u *Universe) ([][]float64, error) {
	cols, _ := p.str("cols", "x+y")
	return table(u, strings.Split(cols, "+"))
}

func table(u *Universe, cols []string) ([][]float64, error) {
	out := make([][]float64, u.Len())
	for i := range out {
		out[i] = make([]float64, len(cols))
	}
	for c, name := range cols {
		v, err := u.floats(strings.TrimSpace(name))
		if err != nil {
			return nil, err
		}
		for i := range out {
			out[i][c] = v[i]
		}
	}
	return out, nil
}

func greatCircle(p *specParams, u *Universe, perKm float64) (*GreatCircle, error) {
	latCol, _ := p.str("lat", "lat")
	lonCol, _ := p.str("lon", "lon")
	lat, err := u.floats(latCol)
	if err != nil {
		return nil, err
	}
	lon, err := u.floats(lonCol)
	if err != nil {
		return nil, err
	}
	return NewGreatCircle(lat, lon, perKm)
}

func parseBudget(s string) (float64, error) {
	if strings.EqualFold(s, "inf") || strings.EqualFold(s, "+inf") {
		return math.Inf(1), nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
		return 0, fmt.Errorf("%q is not a budget > 0 (or inf)", s)
	}
	return v, nil
}

func attributeSpec(p *specParams, u *Universe) (Metric, string, error) {
	path, err := p.str("budgets", "")
	if err != nil {
		return nil, "", err
	}
	def := math.NaN()
	if s, _ := p.str("default", "-"); s != "-" {
		if def, err = parseBudget(s); err != nil {
			return nil, "", fmt.Errorf("metric spec %q: default: %w", p.spec, err)
		}
	}
	c, err := source.OpenCSV(path)
	if err != nil {
		return nil, "", err
	}
	defer c.Close()
	var cols [3]int
	for i, name := range []string{"attribute", "value", "eps"} {
		if cols[i], err = c.Column(name); err != nil {
			return nil, "", err
		}
	}
	var order []string
	budgets := map[string]map[string]float64{}
	for {
		rec, err := c.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, "", err
		}
		a, v := strings.TrimSpace(rec[cols[0]]), strings.TrimSpace(rec[cols[1]])
		e, err := parseBudget(strings.TrimSpace(rec[cols[2]]))
		if err != nil {
			return nil, "", c.Errorf(cols[2], "%v", err)
		}
		if budgets[a] == nil {
			budgets[a] = map[string]float64{}
			order = append(order, a)
		}
		if _, dup := budgets[a][v]; dup {
			return nil, "", c.Errorf(cols[1], "value %q of attribute %q listed twice", v, a)
		}
		budgets[a][v] = e
	}
	if len(order) == 0 {
		return nil, "", fmt.Errorf("%s: no budgets listed", path)
	}
	attrs := make([]Attribute, len(order))
	rows := make([][]int, u.Len())
	for k, a := range order {
		vals, err := u.strings(a)
		if err != nil {
			return nil, "", err
		}
		at := Attribute{Name: a}
		idx := map[string]int{}
		add := func(v string) {
			if _, ok := idx[v]; !ok {
				idx[v] = len(at.Values)
				at.Values = append(at.Values, v)
			}
		}
		listed := make([]string, 0, len(budgets[a]))
		for v := range budgets[a] {
			listed = append(listed, v)
		}
		slices.Sort(listed)
		for _, v := range listed {
			add(v)
		}
		for i, v := range vals {
			if _, ok := budgets[a][v]; !ok && math.IsNaN(def) {
				return nil, "", fmt.Errorf("%s: row %d, column %q: value %q has no budget in %s and the spec gives no default", u.path, i+2, a, v, path)
			}
			add(v)
			rows[i] = append(rows[i], idx[v])
		}
		for _, v := range at.Values {
			e, ok := budgets[a][v]
			if !ok {
				e = def
			}
			at.Budgets = append(at.Budgets, e)
		}
		attrs[k] = at
	}
	m, err := NewAttributeMetric(attrs, rows)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", u.path, err)
	}
	return m, "attribute budgets min(eps_a, eps_b) closed by shortest paths per attribute: d_k(a,b) = min(eps_a, eps_b, 2 min eps)", nil
}

func graphSpec(ctx context.Context, p *specParams, u *Universe) (Metric, string, error) {
	path, err := p.str("file", "")
	if err != nil {
		return nil, "", err
	}
	c, err := source.OpenCSV(path)
	if err != nil {
		return nil, "", err
	}
	defer c.Close()
	var cols [3]int
	for i, name := range []string{"from", "to", "weight"} {
		if cols[i], err = c.Column(name); err != nil {
			return nil, "", err
		}
	}
	var edges []Edge
	for {
		rec, err := c.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, "", err
		}
		var e Edge
		var ok bool
		if e.From, ok = u.Index(strings.TrimSpace(rec[cols[0]])); !ok {
			return nil, "", c.Errorf(cols[0], "unknown id %q (not in %s)", rec[cols[0]], u.path)
		}
		if e.To, ok = u.Index(strings.TrimSpace(rec[cols[1]])); !ok {
			return nil, "", c.Errorf(cols[1], "unknown id %q (not in %s)", rec[cols[1]], u.path)
		}
		if e.From == e.To {
			return nil, "", c.Errorf(cols[1], "edge from %q to itself", rec[cols[0]])
		}
		w, err := strconv.ParseFloat(strings.TrimSpace(rec[cols[2]]), 64)
		if err != nil || math.IsNaN(w) || math.IsInf(w, 0) || w <= 0 {
			return nil, "", c.Errorf(cols[2], "%q is not a weight > 0", rec[cols[2]])
		}
		e.Weight = w
		edges = append(edges, e)
	}
	m, err := NewGraph(ctx, u.Len(), edges)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	return m, "", nil
}
