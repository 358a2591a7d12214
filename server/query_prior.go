package server

import (
	"context"
	"encoding/json"
	"math"

	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/prior"
	"github.com/knowdp/knowdp/privacy"
)

// priorAnswer is the answer to a prior-refinement query.
type priorAnswer struct {
	Answer    float64      `json:"answer"`
	Formatted string       `json:"formatted"`
	Privacy   priorPrivacy `json:"privacy"`
}

type priorPrivacy struct {
	Mechanism  string  `json:"mechanism"`
	Epsilon    float64 `json:"epsilon"`
	AlphaU     float64 `json:"alpha_u"`
	AlphaD     float64 `json:"alpha_d"`
	Distance   string  `json:"distance"`
	Neighbours string  `json:"neighbours"`
	Accounting string  `json:"accounting"`
	Seeded     bool    `json:"seeded"`
}

// planPrior plans a prior-knowledge refinement query (paper 2, Algorithm 1)
// under Protocol 2: the analyst sends a linear query f (optionally divided by
// the number of rows), a prior for its answer and eps_i; the answer is drawn
// from the prior refined around f(D), and eps_i is charged sequentially.
//
// Only statistical queries are served: their factors make the output
// distributions of any two true values within e^eps of each other, so the
// guarantee holds for every neighbour relation, the invariants' included.
// (An individual query is only within e^eps of the prior; two values of the
// individual can then be e^(2 eps) apart.)
func planPrior(d *dataset, q QueryRequest, eps privacy.Epsilon) (*plan, error) {
	if q.Query == nil {
		return nil, badInput("query: the linear query f whose answer the prior describes is required")
	}
	if len(q.Prior) == 0 {
		return nil, badInput("prior: required")
	}
	rows, err := expandQueries(d.schema, []LinearQuery{*q.Query}, "query")
	if err != nil {
		return nil, err
	}
	row := rows[0]
	pr, err := prior.Parse(q.Prior, nil)
	if err != nil {
		return nil, badInput("prior: %v", err)
	}
	comps := pr.Components()
	if len(comps) != 1 || comps[0].Level != prior.Numeric {
		return nil, badInput("prior: a statistical query needs a prior with one numeric component (values and probabilities, or pieces)")
	}
	if !(q.AlphaU == 0 || q.AlphaU >= 1) || math.IsInf(q.AlphaU, 0) {
		return nil, badInput("alpha_u: %v; use a number in [1, e^epsilon], or leave it out for e^(epsilon/2)", q.AlphaU)
	}
	m, err := prior.New(pr, prior.Config{Kind: prior.Statistical, Epsilon: eps, AlphaU: q.AlphaU})
	if err != nil {
		return nil, badInput("prior: %v", err)
	}
	// The canonical form of the prior: re-encoded with sorted keys and
	// numbers as float64, so that spacing and key order do not matter.
	var canon any
	if err := json.Unmarshal(q.Prior, &canon); err != nil {
		return nil, badInput("prior: %v", err)
	}
	canonPrior, _ := json.Marshal(canon)
	h := newHasher("prior", eps)
	h.rows(rows)
	if q.Fraction {
		h.int(1)
	} else {
		h.int(0)
	}
	h.str(string(canonPrior))
	h.float(q.AlphaU)
	charge, _ := m.Budget().Steps()
	priv := priorPrivacy{
		Mechanism:  m.String(),
		Epsilon:    eps.Float64(),
		AlphaU:     m.AlphaU(),
		AlphaD:     m.AlphaD(),
		Distance:   m.Distance().String(),
		Neighbours: "any two tables: the output distributions of any two true answers are within a factor e^epsilon (statistical query)",
		Accounting: "Protocol 2 (paper 2, Section 5.1): each answer is charged its epsilon, composed sequentially with the analyst's other answers on this dataset",
	}
	return &plan{
		hash:    h.sum(),
		uniform: charge,
		compute: func(ctx context.Context, r *noise.Rand) (any, error) {
			truth := float64(row.dot(d.cube.Counts))
			if q.Fraction {
				truth /= float64(d.total) // NaN for an empty table: not an error, the prior is returned
			}
			x, err := m.Respond(r, prior.Point{truth})
			if err != nil {
				return nil, err
			}
			priv.Seeded = r.Seeded()
			return priorAnswer{Answer: x[0], Formatted: pr.Format(x), Privacy: priv}, nil
		},
	}, nil
}
