package gls

import (
	"errors"
	"fmt"
	"math"

	"github.com/knowdp/knowdp/query"
)

// Measurement is a set of noisy queries: Term's rows, each observed with
// independent noise of variance Variance. Its answers are given to
// Plan.Solve, row-major over the term's rows.
type Measurement struct {
	// Name names the measurement in errors; "" means "measurement j"
	// (counted from 1).
	Name     string
	Term     query.Term
	Variance float64
}

// Invariant is a set of exact queries: Term's rows, whose answers (given to
// Plan.Solve) the estimate reproduces exactly. Every factor is Identity,
// Total or RollUp, and along each dimension the invariants' partitions are
// nested (each a refinement or a coarsening of every other): the levels of
// one hierarchy.
type Invariant struct {
	// Name names the invariant in errors; "" means "invariant i".
	Name string
	Term query.Term
}

// Query is a set of linear queries to estimate.
type Query struct {
	// Name names the query in errors; "" means "query q".
	Name string
	Term query.Term
}

// Problem is the structure of a generalised least-squares problem over a
// product domain of the given Shape: which queries were measured with which
// noise variance, which are exact, and which are to be estimated. It holds
// no answers, so everything decided from it (which queries are determined,
// the preconditioner, the error laws) is decided from the structure alone.
type Problem struct {
	Shape        []int
	Measurements []Measurement
	Invariants   []Invariant
	Queries      []Query
}

// maxDims bounds the number of dimensions.
const maxDims = 32

func (p *Problem) measName(j int) string {
	if n := p.Measurements[j].Name; n != "" {
		return fmt.Sprintf("measurement %q", n)
	}
	return fmt.Sprintf("measurement %d", j+1)
}

func (p *Problem) invName(i int) string {
	if n := p.Invariants[i].Name; n != "" {
		return fmt.Sprintf("invariant %q", n)
	}
	return fmt.Sprintf("invariant %d", i+1)
}

func (p *Problem) queryName(q int) string {
	if n := p.Queries[q].Name; n != "" {
		return fmt.Sprintf("query %q", n)
	}
	return fmt.Sprintf("query %d", q+1)
}

// validate checks shapes, factor kinds and variances.
func (p *Problem) validate() error {
	if len(p.Shape) == 0 {
		return errors.New("gls: the domain has no dimensions")
	}
	if len(p.Shape) > maxDims {
		return fmt.Errorf("gls: %d dimensions, at most %d allowed", len(p.Shape), maxDims)
	}
	cells := 1
	for d, n := range p.Shape {
		if n < 1 {
			return fmt.Errorf("gls: dimension %d has size %d", d, n)
		}
		if cells > math.MaxInt32/n {
			return fmt.Errorf("gls: the domain %v has more than %d cells", p.Shape, math.MaxInt32)
		}
		cells *= n
	}
	for j, m := range p.Measurements {
		if err := checkTerm(m.Term, p.Shape); err != nil {
			return fmt.Errorf("gls: %s: %w", p.measName(j), err)
		}
		if !(m.Variance > 0) || math.IsInf(m.Variance, 1) {
			return fmt.Errorf("gls: %s: the noise variance must be finite and > 0, got %v", p.measName(j), m.Variance)
		}
	}
	for i, e := range p.Invariants {
		if err := checkTerm(e.Term, p.Shape); err != nil {
			return fmt.Errorf("gls: %s: %w", p.invName(i), err)
		}
		for d, f := range e.Term {
			switch f.Kind {
			case query.Identity, query.Total, query.RollUp:
			default:
				return fmt.Errorf("gls: %s: factor %d is %v; an invariant's factors must be identity, total or rollup", p.invName(i), d, f.Kind)
			}
		}
	}
	for q, x := range p.Queries {
		if err := checkTerm(x.Term, p.Shape); err != nil {
			return fmt.Errorf("gls: %s: %w", p.queryName(q), err)
		}
	}
	return nil
}

// checkTerm checks that t fits shape and that every factor is well formed.
func checkTerm(t query.Term, shape []int) error {
	if len(t) != len(shape) {
		return fmt.Errorf("%d factors for %d dimensions", len(t), len(shape))
	}
	for d, f := range t {
		if f.N != shape[d] {
			return fmt.Errorf("factor %d has %d columns, dimension %d has %d values", d, f.N, d, shape[d])
		}
		if f.Rows() < 1 {
			return fmt.Errorf("factor %d (%v) has no rows", d, f.Kind)
		}
		switch f.Kind {
		case query.RollUp:
			if len(f.Group) != f.N || f.Groups != f.Rows() {
				return fmt.Errorf("factor %d is a malformed rollup", d)
			}
		case query.Matrix:
			if len(f.M) != f.Rows()*f.N {
				return fmt.Errorf("factor %d is a malformed matrix", d)
			}
		case query.Identity, query.Total, query.Prefix, query.Ranges, query.Residual:
		default:
			return fmt.Errorf("factor %d has the unknown kind %v", d, f.Kind)
		}
	}
	return nil
}

// checkValues checks that vals has rows finite values.
func checkValues(vals []float64, rows int) error {
	if len(vals) != rows {
		return fmt.Errorf("%d values for %d rows", len(vals), rows)
	}
	for r, v := range vals {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("row %d is %v", r, v)
		}
	}
	return nil
}
