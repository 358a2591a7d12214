package server

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/metricdp"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
)

// MetricPolicy is a dataset's d_X metric (paper 4): the attribute-value
// metric of metricdp.AttributeMetric on the base cells, with a budget for
// every value of every dimension. Moving one record from base cell u to v
// may change the odds of a d_X answer by exp(epsilon * d(u, v)), where
// epsilon is what the query is charged; a smaller budget protects a value
// more.
type MetricPolicy struct {
	// Default is the budget of every value not listed in Dimensions.
	Default float64 `json:"default"`
	// Dimensions gives budgets per dimension: a default for its values
	// and budgets for single values.
	Dimensions map[string]DimensionBudgets `json:"dimensions,omitempty"`
}

// DimensionBudgets are the d_X budgets of one dimension's values.
type DimensionBudgets struct {
	Default float64            `json:"default,omitempty"`
	Values  map[string]float64 `json:"values,omitempty"`
}

// maxDXWork bounds the pair checks of one d_X request: (universe size)^2
// times the number of queries.
const maxDXWork = 1 << 24

func (d *dataset) hasMetric() bool { return d.policy.Metric != nil }

// attributes returns the metric's attributes for the dimensions of cuboid c
// (in schema order), with every budget multiplied by scale.
func (d *dataset) attributes(c domain.Cuboid, scale float64) ([]metricdp.Attribute, error) {
	mp := d.policy.Metric
	var out []metricdp.Attribute
	for _, i := range c.Dims() {
		dim := d.schema.Dim(i)
		db := mp.Dimensions[dim.Name]
		def := mp.Default
		if db.Default != 0 {
			def = db.Default
		}
		a := metricdp.Attribute{Name: dim.Name, Values: dim.Values, Budgets: make([]float64, len(dim.Values))}
		for v, name := range dim.Values {
			b := def
			if x, ok := db.Values[name]; ok {
				b = x
			}
			a.Budgets[v] = b * scale
		}
		out = append(out, a)
	}
	return out, nil
}

// checkMetric validates a metric policy against the schema (curator-facing).
func (d *dataset) checkMetric() error {
	mp := d.policy.Metric
	if mp == nil {
		return nil
	}
	if len(d.views) == 0 {
		return fmt.Errorf("policy.metric: d_X privacy moves records and keeps their number fixed, so the number of rows must be public: declare at least one invariant")
	}
	ok := func(b float64) bool { return b > 0 && !math.IsInf(b, 0) && !math.IsNaN(b) }
	if !ok(mp.Default) {
		return fmt.Errorf("policy.metric.default: %v; a budget must be a positive number", mp.Default)
	}
	names := make([]string, 0, len(mp.Dimensions))
	for n := range mp.Dimensions {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		i, found := d.schema.Lookup(n)
		if !found {
			return fmt.Errorf("policy.metric.dimensions: unknown dimension %q", n)
		}
		db := mp.Dimensions[n]
		if db.Default != 0 && !ok(db.Default) {
			return fmt.Errorf("policy.metric.dimensions.%s.default: %v; a budget must be a positive number", n, db.Default)
		}
		for v, b := range db.Values {
			if _, found := d.schema.ValueIndex(i, v); !found {
				return fmt.Errorf("policy.metric.dimensions.%s.values: %q is not in the domain", n, v)
			}
			if !ok(b) {
				return fmt.Errorf("policy.metric.dimensions.%s.values.%s: %v; a budget must be a positive number", n, v, b)
			}
		}
	}
	return nil
}

// dxAnswer is the answer to a d_X query.
type dxAnswer struct {
	Answers []float64 `json:"answers"`
	Privacy dxPrivacy `json:"privacy"`
}

type dxPrivacy struct {
	Mechanism string  `json:"mechanism"`
	Epsilon   float64 `json:"epsilon"`
	Metric    string  `json:"metric"`
	// Universe are the dimensions the queries depend on: the mechanism
	// runs on that cuboid, which for the attribute metric is exact.
	Universe []string  `json:"universe"`
	Strategy string    `json:"strategy"`
	Scales   []float64 `json:"scales"`
	// BaselineScale is the scale the eps-DP Laplace mechanism would need
	// for the same per-pair protection (metricdp.Baseline).
	BaselineScale float64 `json:"baseline_scale"`
	Neighbours    string  `json:"neighbours"`
	Accounting    string  `json:"accounting"`
	Seeded        bool    `json:"seeded"`
}

// planDX plans d_X-private Laplace answers to linear queries (paper 4,
// Theorem 1 and Section 4.2, via metricdp.NewLaplace).
//
// The queries are linear over the base cells and depend only on the
// dimensions their where clauses name (the cuboid T). Under the attribute
// metric, d(u, v) is a sum over dimensions, so it is smallest, for given
// values on T, when u and v agree elsewhere; the answers change only with
// the values on T. The per-pair condition over base cells is therefore
// exactly the condition over the cells of T, and the mechanism runs there.
func planDX(ctx context.Context, d *dataset, q QueryRequest, eps privacy.Epsilon) (*plan, error) {
	if !d.hasMetric() {
		return nil, badInput("kind: this dataset has no d_X metric; its curator has not enabled dx queries")
	}
	if _, err := expandQueries(d.schema, q.Queries, "queries"); err != nil {
		return nil, err // validates the where clauses and sizes
	}
	strategy := metricdp.Optimal
	if q.Strategy != "" {
		var err error
		if strategy, err = metricdp.ParseStrategy(q.Strategy); err != nil {
			return nil, badInput("strategy: %v", err)
		}
	}
	var T domain.Cuboid
	for _, lq := range q.Queries {
		for _, t := range lq.Terms {
			for name := range t.Where {
				i, _ := d.schema.Lookup(name)
				T |= 1 << i
			}
		}
	}
	N := d.schema.CuboidSize(T)
	if N < 2 {
		return nil, badInput("queries: a d_X query must restrict at least one dimension with two or more values (the number of rows is already public)")
	}
	if N*N*len(q.Queries) > maxDXWork {
		return nil, badInput("queries: the queries depend on %s, %d cells; d_X queries need (cells)^2 x queries <= %d", d.schema.Format(T), N, maxDXWork)
	}
	// The rows over T's cells: expand with the schema restricted to T.
	sub, err := d.subSchema(T)
	if err != nil {
		return nil, err
	}
	rows, err := expandQueries(sub, q.Queries, "queries")
	if err != nil {
		return nil, err
	}
	F := make([][]float64, len(rows))
	for l, r := range rows {
		F[l] = make([]float64, N)
		for i, c := range r.cells {
			F[l][c] = float64(r.coefs[i])
		}
	}
	Q, err := metricdp.NewQueries(F)
	if err != nil {
		return nil, badInput("queries: %v", err)
	}
	attrs, err := d.attributes(T, eps.Float64())
	if err != nil {
		return nil, err
	}
	metric, err := metricdp.NewAttributeMetric(attrs, metricdp.FullProduct(attrs))
	if err != nil {
		return nil, badInput("metric: %v", err)
	}
	h := newHasher("dx", eps)
	h.int(int64(T))
	h.rows(rows)
	h.int(int64(strategy))
	names := d.schema.Names(T)
	priv := dxPrivacy{
		Mechanism:  "d_X-private Laplace (paper 4, Theorem 1), grid noise checked per pair",
		Epsilon:    eps.Float64(),
		Metric:     "epsilon x the dataset's attribute-value metric (metricdp.AttributeMetric)",
		Universe:   names,
		Strategy:   strategy.String(),
		Neighbours: "one record moved from base cell u to base cell v, with loss at most epsilon * d(u, v)",
		Accounting: "charged epsilon, composed sequentially with the analyst's other answers on this dataset (d_X budgets add along every pair)",
	}
	var lm *metricdp.Laplace
	return &plan{
		hash:    h.sum(),
		uniform: epsSteps(eps),
		// The noise allocation (an optimisation for the optimal strategy)
		// depends on the request and the public metric and row count only,
		// but costs enough to wait for the budget check.
		prepare: func(ctx context.Context) error {
			var err error
			if lm, err = metricdp.NewLaplace(ctx, metric, Q, strategy, d.total); err != nil {
				return badInput("queries: %v", err)
			}
			_, base, err := metricdp.Baseline(ctx, metric, Q)
			if err != nil {
				return badInput("queries: %v", err)
			}
			priv.Scales, priv.BaselineScale = lm.Scales(), base
			return nil
		},
		compute: func(ctx context.Context, r *noise.Rand) (any, error) {
			proj := d.cube.Project(T)
			x := make([]int64, len(proj))
			for i, v := range proj {
				x[i] = int64(v)
			}
			ans, err := lm.Release(r, x)
			if err != nil {
				return nil, err
			}
			priv.Seeded = r.Seeded()
			return dxAnswer{Answers: ans, Privacy: priv}, nil
		},
	}, nil
}

// subSchema returns the schema of cuboid T's dimensions.
func (d *dataset) subSchema(T domain.Cuboid) (*domain.Schema, error) {
	var dims []domain.Dimension
	for _, i := range T.Dims() {
		dim := d.schema.Dim(i)
		dims = append(dims, domain.Dimension{Name: dim.Name, Values: slices.Clone(dim.Values)})
	}
	return domain.NewSchema(dims)
}
