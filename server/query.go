package server

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/server/store"
)

// QueryRequest is an analyst's query on a dataset. Kind selects the
// mechanism; the other fields are those of that kind:
//
//   - "cuboid": a noisy cuboid consistent with the invariants (paper 3):
//     Epsilon, Cuboid, NonNeg.
//   - "linear": linear queries over the base cuboid answered with Laplace
//     noise under Protocol 1 accounting (paper 2, Section 5.1), optionally
//     refined with the invariants (paper 1): Epsilon, Queries, Refine.
//   - "prior": prior-knowledge refinement under Protocol 2 (paper 2):
//     Epsilon, Query, Fraction, Prior, AlphaU.
//   - "dx": d_X-private Laplace answers to linear queries (paper 4):
//     Epsilon, Queries, Strategy.
type QueryRequest struct {
	Kind    string  `json:"kind"`
	Epsilon float64 `json:"epsilon"`
	// Mechanism is "laplace" (the default; pure epsilon) or, for cuboid
	// queries on a dataset with zCDP budgets, "gaussian": exact discrete
	// Gaussian noise calibrated to the L2 generic sensitivity for Rho
	// (instead of Epsilon), its equivalent (eps, delta) stated at Delta
	// (default 1e-6).
	Mechanism string  `json:"mechanism,omitempty"`
	Rho       float64 `json:"rho,omitempty"`
	Delta     float64 `json:"delta,omitempty"`

	// Cuboid names the dimensions of the cuboid to release; a
	// hierarchical dimension may stand at a coarser level, "geo:state".
	// A cuboid at a level, and every cuboid on a dataset with an invariant
	// at a coarser level, is released as a view (release.NewPlan with the
	// view as a table; see query_views.go).
	Cuboid []string `json:"cuboid,omitempty"`
	// Cuboids, instead of Cuboid, asks for a workload: several cuboids
	// released together for Epsilon in all, estimated once and consistent
	// with each other (release.NewPlan with every cuboid a table, whether
	// or not they name levels), with optional Weights and Split ("optimal",
	// "equal" or, for views, "spine", their default).
	Cuboids [][]string `json:"cuboids,omitempty"`
	Weights []float64  `json:"weights,omitempty"`
	Split   string     `json:"split,omitempty"`
	NonNeg  bool       `json:"nonneg,omitempty"`
	// Fresh asks for a new measurement of a cuboid that the analyst's
	// earlier measurements determine, at the requested budget and charged
	// it, instead of the free estimate from them (measurements.go).
	Fresh bool `json:"fresh,omitempty"`
	// Integer asks for non-negative integer counts that keep the
	// invariants (release.Spec.Integer).
	Integer bool `json:"integer,omitempty"`

	Queries []LinearQuery `json:"queries,omitempty"`
	Refine  bool          `json:"refine,omitempty"`

	Query    *LinearQuery    `json:"query,omitempty"`
	Fraction bool            `json:"fraction,omitempty"`
	Prior    json.RawMessage `json:"prior,omitempty"`
	AlphaU   float64         `json:"alpha_u,omitempty"`

	Strategy string `json:"strategy,omitempty"`
}

// LinearQuery is sum over its terms of coef times the number of rows that
// match the term's where clause: a linear query over the base cuboid with
// integer coefficients.
type LinearQuery struct {
	Terms []Term `json:"terms"`
}

// Term selects the base cells whose value of each named dimension is one of
// the listed values (dimensions not named are unrestricted) and weights them
// by Coef, an integer of magnitude at most 2^20 (default 1).
type Term struct {
	Where map[string][]string `json:"where,omitempty"`
	Coef  *json.Number        `json:"coef,omitempty"`
}

// Limits on one query, all on public quantities.
const (
	maxQueries     = 1024
	maxTerms       = 1024
	maxNonZeros    = 1 << 20 // base-cell coefficients over all queries of a request
	maxAnswerCells = 1 << 18 // cells of a released cuboid
)

// inputError is a refused query: the analyst's input is wrong. Its message
// depends only on the request and the public schema and policy.
type inputError struct{ msg string }

func (e *inputError) Error() string { return e.msg }

func badInput(format string, args ...any) error {
	return &inputError{msg: fmt.Sprintf(format, args...)}
}

// plan is a validated query: what it costs and how to answer it. Nothing in
// a plan but compute looks at the data.
type plan struct {
	kind string
	// unit is the dataset's budget unit, "epsilon" or "rho", that the
	// charges are in.
	unit string
	hash string
	// request is the normalised request, as stored in the ledger.
	request []byte
	// uniform is the charge in steps that composes sequentially with
	// everything else; cells, for linear queries, the increments of the
	// per-cell Protocol 1 losses (see chargeState).
	uniform int64
	cells   []cellCharge
	// prepare, if set, does the part of the work that depends on the
	// request and public data only but is too costly to do before the
	// budget check (a workload's optimal split, a refinement's SVDs): it
	// runs once the query is affordable and not a repeat, under the
	// request's context; its errors are input errors or ctx's.
	prepare func(ctx context.Context) error
	// work bounds prepare's work, in base cells of planning (see
	// splitCells), from the request alone.
	work int
	// fresh, set on a one-cuboid query that could be derived from earlier
	// measurements, returns the margin of error a fresh measurement at the
	// requested budget would have (from the mechanism alone).
	fresh func(context.Context) (float64, error)
	// compute draws the answer. Its errors are internal (never shown in
	// detail to the analyst), and charged.
	compute func(ctx context.Context, r *noise.Rand) (any, error)
}

// cellCharge is the increase, in steps, of one base cell's Protocol 1 loss.
type cellCharge = store.CellCharge

// decodeQuery reads a QueryRequest strictly (see decodeStrict): exact
// field names, no duplicate keys, no trailing data.
func decodeQuery(body []byte) (QueryRequest, error) {
	var q QueryRequest
	err := decodeStrict(body, &q)
	return q, err
}

// planQuery validates q against the dataset and returns its plan.
func planQuery(ctx context.Context, d *dataset, q QueryRequest) (*plan, error) {
	if err := checkRequest(d.schema, &q); err != nil {
		return nil, err
	}
	gaussian := q.Mechanism == "gaussian"
	switch {
	case q.Mechanism != "" && q.Mechanism != "laplace" && !gaussian:
		return nil, badInput("mechanism: %q; use laplace or gaussian", clip(q.Mechanism))
	case d.zcdp && q.Kind != "cuboid":
		return nil, badInput("kind: this dataset's budgets are zCDP (rho): only cuboid queries are offered (linear, prior and dx queries have pure-epsilon accounting)")
	case gaussian && !d.zcdp:
		return nil, badInput("mechanism: a Gaussian query is charged rho, and this dataset's budgets are in epsilon (its policy has epsilon_per_analyst)")
	case !gaussian && (q.Rho != 0 || q.Delta != 0):
		return nil, badInput("rho and delta: only for mechanism gaussian")
	}
	var eps privacy.Epsilon
	var err error
	if !gaussian {
		if eps, err = privacy.NewEpsilon(q.Epsilon); err != nil {
			return nil, badInput("epsilon: %v", err)
		}
	} else if q.Epsilon != 0 {
		return nil, badInput("epsilon: a Gaussian query is calibrated to rho; leave epsilon out")
	}
	used := map[string]bool{
		"mechanism": q.Mechanism != "", "rho": q.Rho != 0, "delta": q.Delta != 0,
		"cuboid": q.Cuboid != nil, "nonneg": q.NonNeg, "integer": q.Integer,
		"cuboids": q.Cuboids != nil, "weights": q.Weights != nil, "split": q.Split != "", "fresh": q.Fresh,
		"queries": q.Queries != nil, "refine": q.Refine,
		"query": q.Query != nil, "fraction": q.Fraction, "prior": q.Prior != nil, "alpha_u": q.AlphaU != 0,
		"strategy": q.Strategy != "",
	}
	allowed := map[string][]string{
		"cuboid": {"cuboid", "nonneg", "integer", "cuboids", "weights", "split", "mechanism", "rho", "delta", "fresh"},
		"linear": {"queries", "refine"},
		"prior":  {"query", "fraction", "prior", "alpha_u"},
		"dx":     {"queries", "strategy"},
	}
	fields, ok := allowed[q.Kind]
	if !ok {
		return nil, badInput("kind: %q; use one of %s", clip(q.Kind), strings.Join(queryKinds(), ", "))
	}
	for f, set := range used {
		if set && !slices.Contains(fields, f) {
			return nil, badInput("%s: not a field of a %s query", f, q.Kind)
		}
	}
	var p *plan
	switch {
	case d.units != nil && q.Kind != "cuboid":
		return nil, badInput("kind: this dataset's guarantee is per unit (its policy has privacy_unit): only cuboid queries are offered (linear, prior and dx queries are per row)")
	case gaussian:
		p, err = planGaussian(d, q)
	case q.Kind == "cuboid":
		p, err = planTables(d, q, eps, privacy.Rho{}, 0)
	case q.Kind == "linear":
		p, err = planLinear(ctx, d, q, eps)
	case q.Kind == "prior":
		p, err = planPrior(d, q, eps)
	case q.Kind == "dx":
		p, err = planDX(ctx, d, q, eps)
	}
	if err != nil {
		return nil, err
	}
	if d.zcdp && !gaussian && p.uniform > 0 {
		// An eps-DP answer is (eps^2/2)-zCDP (Bun and Steinke, Prop. 1.4),
		// rounded up to the grid.
		p.uniform = privacy.PureAsRho(eps).RhoSteps()
	}
	p.kind, p.unit = q.Kind, d.unit()
	if !gaussian {
		q.Epsilon = eps.Float64()
	}
	p.request, _ = json.Marshal(q)
	return p, nil
}

// hasher builds the canonical form of a query: two requests with the same
// hash are the same query and get the same stored answer.
type hasher struct{ b []byte }

func (h *hasher) str(s string) { h.int(int64(len(s))); h.b = append(h.b, s...) }
func (h *hasher) int(v int64)  { h.b = binary.AppendVarint(h.b, v) }
func (h *hasher) float(v float64) {
	h.b = binary.BigEndian.AppendUint64(h.b, math.Float64bits(v))
}
func (h *hasher) sum() string {
	s := sha256.Sum256(h.b)
	return hex.EncodeToString(s[:])
}

func newHasher(kind string, eps privacy.Epsilon) *hasher {
	h := &hasher{}
	h.str("knowdp query v1")
	h.str(kind)
	steps, _ := privacy.Pure(eps).Steps()
	h.int(steps)
	return h
}

// epsSteps returns eps as a count of privacy.EpsilonStep.
func epsSteps(eps privacy.Epsilon) int64 {
	s, _ := privacy.Pure(eps).Steps()
	return s
}

// stepsEpsilon converts steps to epsilon for display.
func stepsEpsilon(steps int64) float64 { return float64(steps) * privacy.EpsilonStep }

// neighbourText describes the neighbour relation of a dataset's guarantees, in
// the words of release.Release's metadata.
func (d *dataset) neighbourText() string {
	if len(d.views) == 0 {
		return "add or remove one row"
	}
	names := make([]string, len(d.views))
	for i, e := range d.views {
		names[i] = d.schema.FormatView(e)
	}
	return "worst-case induced neighbours given the exact cuboids " + strings.Join(names, ", ") + " (tables that agree on them and differ by a minimal set of added and removed rows)"
}

// --- cuboid ---

// --- linear queries over the base cuboid ---

// sparseRow is one linear query over the base cells: cells ascending, with
// non-zero integer coefficients.
type sparseRow struct {
	cells []int
	coefs []int64
}

func (r sparseRow) dot(counts []float64) int64 {
	var s int64
	for i, c := range r.cells {
		s += r.coefs[i] * int64(counts[c])
	}
	return s
}

// expandQueries turns the where clauses of queries into sparse rows over the
// base cells. field names the request field in errors.
func expandQueries(s *domain.Schema, queries []LinearQuery, field string) ([]sparseRow, error) {
	if len(queries) == 0 {
		return nil, badInput("%s: at least one query is needed", field)
	}
	if len(queries) > maxQueries {
		return nil, badInput("%s: %d queries; at most %d per request", field, len(queries), maxQueries)
	}
	rows := make([]sparseRow, len(queries))
	total := 0
	for i, lq := range queries {
		name := fmt.Sprintf("%s[%d]", field, i)
		row, err := expandQuery(s, lq, name, maxNonZeros-total)
		if err != nil {
			return nil, err
		}
		total += len(row.cells)
		rows[i] = row
	}
	return rows, nil
}

// termName names a term in an error message; formatted only when one is.
type termName struct {
	query string
	term  int
}

func (n termName) String() string { return fmt.Sprintf("%s.terms[%d]", n.query, n.term) }

type cellCoef struct {
	cell int
	coef int64
}

func expandQuery(s *domain.Schema, lq LinearQuery, name string, budget int) (sparseRow, error) {
	if len(lq.Terms) == 0 {
		return sparseRow{}, badInput("%s.terms: at least one term is needed", name)
	}
	if len(lq.Terms) > maxTerms {
		return sparseRow{}, badInput("%s.terms: %d terms; at most %d", name, len(lq.Terms), maxTerms)
	}
	n := s.NumDims()
	var pairs []cellCoef
	for t, term := range lq.Terms {
		tname := termName{name, t}
		coef := int64(1)
		if term.Coef != nil {
			v, err := term.Coef.Int64()
			if err != nil || v == 0 || v < -maxCoef || v > maxCoef {
				return sparseRow{}, badInput("%s.coef: %s; use a non-zero integer between -%d and %d (scale fractional weights and divide the answer)", tname, clip(term.Coef.String()), maxCoef, maxCoef)
			}
			coef = v
		}
		for dim := range term.Where {
			if _, ok := s.Lookup(dim); !ok {
				return sparseRow{}, badInput("%s.where: unknown dimension %q (the schema has %s)", tname, clip(dim), strings.Join(s.Names(domain.Base(n)), ", "))
			}
		}
		sel := make([][]int, n)
		size := 1
		for i := range n {
			vals, restricted := term.Where[s.Dim(i).Name]
			if !restricted {
				sel[i] = make([]int, s.Size(i))
				for k := range sel[i] {
					sel[i][k] = k
				}
			} else {
				if len(vals) == 0 {
					return sparseRow{}, badInput("%s.where.%s: empty list of values", tname, s.Dim(i).Name)
				}
				seen := map[int]bool{}
				for _, v := range vals {
					k, ok := s.ValueIndex(i, v)
					if !ok {
						return sparseRow{}, badInput("%s.where.%s: unknown value %q (the domain is %s)", tname, s.Dim(i).Name, clip(v), strings.Join(s.Dim(i).Values, ", "))
					}
					if seen[k] {
						return sparseRow{}, badInput("%s.where.%s: value %q listed twice", tname, s.Dim(i).Name, clip(v))
					}
					seen[k] = true
					sel[i] = append(sel[i], k)
				}
			}
			size *= len(sel[i])
			if size > budget-len(pairs) {
				return sparseRow{}, badInput("%s: the request selects more than %d base cells in all; ask for fewer or coarser queries", name, maxNonZeros)
			}
		}
		// Enumerate the selected cells with an odometer over sel.
		pairs = slices.Grow(pairs, size)
		pos := make([]int, n)
		for {
			cell := 0
			for i := range n {
				cell += sel[i][pos[i]] * s.Stride(i)
			}
			pairs = append(pairs, cellCoef{cell, coef})
			i := n - 1
			for ; i >= 0; i-- {
				pos[i]++
				if pos[i] < len(sel[i]) {
					break
				}
				pos[i] = 0
			}
			if i < 0 {
				break
			}
		}
	}
	sortCells(pairs)
	row := sparseRow{cells: make([]int, 0, len(pairs)), coefs: make([]int64, 0, len(pairs))}
	for i := 0; i < len(pairs); {
		j, sum := i, int64(0)
		for ; j < len(pairs) && pairs[j].cell == pairs[i].cell; j++ {
			sum += pairs[j].coef
		}
		if sum < -maxCoef || sum > maxCoef {
			return sparseRow{}, badInput("%s: the terms add up to a coefficient of %d on one base cell; at most %d in magnitude", name, sum, maxCoef)
		}
		if sum != 0 {
			row.cells = append(row.cells, pairs[i].cell)
			row.coefs = append(row.coefs, sum)
		}
		i = j
	}
	if len(row.cells) == 0 {
		return sparseRow{}, badInput("%s: the terms cancel out: every coefficient is zero", name)
	}
	return row, nil
}

// hashRows adds rows to a canonical hash.
func (h *hasher) rows(rows []sparseRow) {
	n := 0
	for _, r := range rows {
		n += len(r.cells)
	}
	h.b = slices.Grow(h.b, 2*binary.MaxVarintLen32*n+binary.MaxVarintLen64*(len(rows)+1))
	h.int(int64(len(rows)))
	for _, r := range rows {
		h.int(int64(len(r.cells)))
		for i, c := range r.cells {
			h.int(int64(c))
			h.int(r.coefs[i])
		}
	}
}

// columnL1 returns, for each base cell in the support of rows, the sum over
// the rows of |coefficient|: by how much, in L1, the answers move when one row
// of that cell is added or removed. Cells are ascending.
func columnL1(rows []sparseRow) []cellCoef {
	if len(rows) == 1 {
		// One row's cells are ascending and distinct already.
		r := rows[0]
		out := make([]cellCoef, len(r.cells))
		for i, c := range r.cells {
			out[i] = cellCoef{c, abs64(r.coefs[i])}
		}
		return out
	}
	n := 0
	for _, r := range rows {
		n += len(r.cells)
	}
	all := make([]cellCoef, 0, n)
	for _, r := range rows {
		for i, c := range r.cells {
			all = append(all, cellCoef{c, abs64(r.coefs[i])})
		}
	}
	sortCells(all)
	out := all[:0]
	for _, p := range all {
		if k := len(out) - 1; k >= 0 && out[k].cell == p.cell {
			out[k].coef += p.coef
		} else {
			out = append(out, p)
		}
	}
	return out
}

// sortCells sorts pairs by cell, stably, in time linear in their number
// (least-significant-digit radix sort, 11 bits a pass): planning a request
// of 2^20 base cells must stay cheap, as it is done before anything is
// charged.
func sortCells(pairs []cellCoef) {
	if slices.IsSortedFunc(pairs, func(a, b cellCoef) int { return a.cell - b.cell }) {
		return
	}
	if len(pairs) < 256 {
		slices.SortStableFunc(pairs, func(a, b cellCoef) int { return a.cell - b.cell })
		return
	}
	top := 0
	for _, p := range pairs {
		top = max(top, p.cell)
	}
	const bits = 11
	buf := make([]cellCoef, len(pairs))
	src, dst := pairs, buf
	for shift := 0; top>>shift > 0; shift += bits {
		var count [1<<bits + 1]int
		for _, p := range src {
			count[(p.cell>>shift)&(1<<bits-1)+1]++
		}
		for i := 1; i < len(count); i++ {
			count[i] += count[i-1]
		}
		for _, p := range src {
			d := (p.cell >> shift) & (1<<bits - 1)
			dst[count[d]] = p
			count[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &pairs[0] {
		copy(pairs, src)
	}
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// linearAnswer is the answer to a linear query request.
type linearAnswer struct {
	// Answers are the released answers: refined when refinement was asked
	// for, otherwise the noisy ones.
	Answers []float64 `json:"answers"`
	// Noisy are the noisy answers before refinement (only with refine).
	Noisy   []int64       `json:"noisy,omitempty"`
	Privacy linearPrivacy `json:"privacy"`
}

type linearPrivacy struct {
	Mechanism string  `json:"mechanism"`
	Epsilon   float64 `json:"epsilon"`
	// Scale is the discrete Laplace scale lambda of each answer's noise.
	Scale float64 `json:"scale"`
	// Sensitivity is the largest, over base cells, sum over the queries of
	// |coefficient|: the L1 sensitivity under add/remove neighbours.
	Sensitivity int64 `json:"sensitivity"`
	// GenericSensitivity is S: induced neighbours' base cuboids differ by
	// at most S in L1, which multiplies the loss.
	GenericSensitivity int    `json:"generic_sensitivity"`
	SensitivityRule    string `json:"sensitivity_rule"`
	Neighbours         string `json:"neighbours"`
	Accounting         string `json:"accounting"`
	Refinement         string `json:"refinement,omitempty"`
	Constraints        int    `json:"constraints,omitempty"`
	Seeded             bool   `json:"seeded"`
	// Guarantee qualifies the guarantee when it rests on the curator's
	// sensitivity claim (see Policy.Sensitivity).
	Guarantee string `json:"guarantee,omitempty"`
}

const protocol1Accounting = "Protocol 1 (paper 2, Section 5.1) over all linear answers of this analyst on this dataset: " +
	"their loss is S times the largest, over base cells, sum of |coefficient|/scale over every query answered; " +
	"a request is charged what it adds to that loss, and refused if the total would exceed the budget"

func planLinear(ctx context.Context, d *dataset, q QueryRequest, eps privacy.Epsilon) (*plan, error) {
	rows, err := expandQueries(d.schema, q.Queries, "queries")
	if err != nil {
		return nil, err
	}
	cols := columnL1(rows)
	var delta int64
	for _, c := range cols {
		delta = max(delta, c.coef)
	}
	S := int64(d.sens.Value)
	h := newHasher("linear", eps)
	if S == 0 {
		h = newHasher("linear", privacy.Epsilon{}) // exact answers: the same whatever epsilon
	}
	h.rows(rows)
	if q.Refine {
		h.int(1)
	}
	if q.Refine {
		if d.coarse {
			return nil, badInput("refine: not offered on this dataset: its invariants include tables at coarser levels of a hierarchy, which the refinement does not take; set refine to false")
		}
		if err := checkRefineWork(d, rows); err != nil {
			return nil, err
		}
	}
	priv := linearPrivacy{
		Mechanism:          "discrete Laplace noise on each integer answer (exact sampler)",
		Epsilon:            eps.Float64(),
		Sensitivity:        delta,
		GenericSensitivity: d.sens.Value,
		SensitivityRule:    d.sens.Rule,
		Neighbours:         d.neighbourText(),
		Accounting:         protocol1Accounting,
		Guarantee:          d.guarantee,
	}
	p := &plan{hash: h.sum()}
	if S == 0 {
		// The invariants determine the table: every answer is public.
		priv.Mechanism = "exact: the invariants determine the table"
		p.compute = func(ctx context.Context, r *noise.Rand) (any, error) {
			ans := linearAnswer{Answers: make([]float64, len(rows)), Privacy: priv}
			for i, row := range rows {
				ans.Answers[i] = float64(row.dot(d.cube.Counts))
			}
			return ans, nil
		}
		return p, nil
	}
	lambda := linearScale(S, delta, eps)
	if !(lambda <= noise.MaxScale) {
		return nil, badInput("epsilon: %v is too small for these queries: the noise scale S*sensitivity/epsilon = %d*%d/%v exceeds %v", eps.Float64(), S, delta, eps.Float64(), float64(noise.MaxScale))
	}
	dl, err := d.samplers.get(lambda)
	if err != nil {
		return nil, badInput("epsilon: %v", err)
	}
	priv.Scale = lambda
	memo := map[int64]int64{}
	p.cells = make([]cellCharge, 0, len(cols))
	for _, c := range cols {
		st, ok := memo[c.coef]
		if !ok {
			st = lossSteps(S, c.coef, lambda)
			memo[c.coef] = st
		}
		p.cells = append(p.cells, cellCharge{Cell: c.cell, Steps: st})
	}
	var refiner *invariantRefiner
	if q.Refine {
		p.prepare = func(ctx context.Context) error {
			var err error
			if refiner, err = newInvariantRefiner(ctx, d, rows); err != nil {
				return err
			}
			priv.Refinement = "least-squares refinement (paper 1, Theorem 3) with the equalities the invariants imply on these answers; " +
				"the invariants are the same for every pair of induced neighbours, so this is post-processing and costs nothing more"
			priv.Constraints = refiner.constraints()
			return nil
		}
	}
	p.compute = func(ctx context.Context, r *noise.Rand) (any, error) {
		priv.Seeded = r.Seeded()
		ans := linearAnswer{Answers: make([]float64, len(rows)), Privacy: priv}
		noisy := make([]int64, len(rows))
		for i, row := range rows {
			noisy[i] = row.dot(d.cube.Counts) + dl.Sample(r)
			ans.Answers[i] = float64(noisy[i])
		}
		if refiner != nil {
			ans.Noisy = noisy
			if err := refiner.refine(ctx, ans.Answers); err != nil {
				return nil, err
			}
		}
		return ans, nil
	}
	return p, nil
}

// linearScale returns the smallest float64 lambda >= S*delta/eps, exactly:
// then S*delta/lambda <= eps and a request on fresh cells costs at most eps.
func linearScale(S, delta int64, eps privacy.Epsilon) float64 {
	lambda := float64(S*delta) / eps.Float64()
	want := new(big.Rat).SetFrac(big.NewInt(S*delta), big.NewInt(1))
	want.Quo(want, new(big.Rat).SetFloat64(eps.Float64()))
	for new(big.Rat).SetFloat64(lambda).Cmp(want) < 0 {
		lambda = math.Nextafter(lambda, math.Inf(1))
	}
	return lambda
}

// lossSteps returns ceil(S * a / lambda / EpsilonStep), exactly: the
// Protocol 1 loss, in steps, of a base cell whose coefficients sum to a in
// absolute value, rounded up so that the ledger never under-counts.
func lossSteps(S, a int64, lambda float64) int64 {
	num := new(big.Rat).SetFrac(big.NewInt(S*a), big.NewInt(1))
	num.Quo(num, new(big.Rat).SetFloat64(lambda))
	num.Mul(num, new(big.Rat).SetFloat64(1/privacy.EpsilonStep))
	q, m := new(big.Int).QuoRem(num.Num(), num.Denom(), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return math.MaxInt64
	}
	return q.Int64()
}

// queryKinds lists the query kinds this server answers.
func queryKinds() []string { return []string{"cuboid", "linear", "prior", "dx"} }
