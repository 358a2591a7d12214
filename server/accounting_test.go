package server

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"testing"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/prior"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/sensitivity"
)

// TestProtocol1 checks the linear queries' accounting against Protocol 1 as
// package prior implements it in memory (prior.LaplaceSession): on a dataset
// without invariants, with every request at scale lambda = 2, each request
// is charged exactly what it adds to Delta(f_1..f_i)/lambda, queries on
// disjoint cells compose in parallel (for free), and the refusals coincide.
func TestProtocol1(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerArrests("plain", 2)
	_, key := s.analyst("p1")
	d := s.srv.sets["plain"]
	eps2, _ := privacy.NewEpsilon(2)
	session, err := prior.NewLaplaceSession(d.cube.Counts, eps2, 2)
	if err != nil {
		t.Fatal(err)
	}
	w := func(kv ...string) map[string][]string {
		m := map[string][]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = append(m[kv[i]], kv[i+1])
		}
		return m
	}
	for i, tc := range []struct {
		coef   int
		where  map[string][]string
		eps    float64 // lambda = coef/eps = 2
		charge float64 // what the request adds to the loss
		ok     bool
	}{
		{1, w("year", "1997"), 0.5, 0.5, true},
		{1, w("year", "1998"), 0.5, 0, true}, // disjoint cells: parallel composition
		{1, nil, 0.5, 0.5, true},             // every cell: 1997 and 1998 cells now at 1
		{2, w("year", "1997", "sex", "Female"), 1, 1, true},
		{1, w("year", "1999"), 0.5, 0, true}, // 1999 cells reach 1, below the maximum 2
		{1, w("year", "1997", "sex", "Female"), 0.5, 0, false},
		{1, w("year", "2000", "sex", "Male"), 0.5, 0, true},
		{-3, w("year", "2001"), 1.5, 0, true}, // 2001 cells: 0.5 + 3/2 = 2, fits exactly
		{1, w("year", "2001", "sex", "Male"), 0.5, 0, false},
	} {
		q := map[string]any{"kind": "linear", "epsilon": tc.eps, "queries": []LinearQuery{countQuery(tc.coef, tc.where)}}
		st, r, raw := s.ask("plain", key, q, "")
		row, err := expandQuery(d.schema, countQuery(tc.coef, tc.where), "q", maxNonZeros)
		if err != nil {
			t.Fatal(err)
		}
		dense := make([]float64, d.schema.Cells())
		for j, c := range row.cells {
			dense[c] = float64(row.coefs[j])
		}
		_, serr := session.Answer(noise.NewSeeded(1), dense)
		if (st == http.StatusCreated) != tc.ok || (serr == nil) != tc.ok {
			t.Fatalf("request %d: server status %d (%s), session error %v; want answered=%v", i, st, raw, serr, tc.ok)
		}
		b := s.budgetOf("plain", key)
		want, _ := session.Spent().Steps()
		if b.SpentSteps != want {
			t.Fatalf("request %d: server spent %d steps, Protocol 1 session %d", i, b.SpentSteps, want)
		}
		want = 0
		if tc.charge > 0 {
			want = steps(tc.charge)
		}
		if tc.ok && r.Steps != want {
			t.Fatalf("request %d charged %d steps, want eps %v", i, r.Steps, tc.charge)
		}
		if tc.ok {
			var ans linearAnswer
			json.Unmarshal(r.Answer, &ans)
			if ans.Privacy.Scale != 2 || ans.Privacy.GenericSensitivity != 1 {
				t.Fatalf("request %d: scale %v, S %d", i, ans.Privacy.Scale, ans.Privacy.GenericSensitivity)
			}
		}
	}
}

// TestLinearGenericSensitivity checks that with invariants the noise and the
// charge are calibrated to the induced neighbours: scale S*Delta/eps with S
// the generic sensitivity (4 for {year} and {colour}: Lemma 4.2), and a
// request on fresh cells costs exactly its eps.
func TestLinearGenericSensitivity(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerArrests("inv", 1, []string{"year"}, []string{"colour"})
	_, key := s.analyst("s")
	q := map[string]any{"kind": "linear", "epsilon": 0.3, "queries": []LinearQuery{
		countQuery(1, map[string][]string{"sex": {"Female"}}),
		countQuery(2, map[string][]string{"sex": {"Female"}, "citizen": {"No"}}),
	}}
	st, r, raw := s.ask("inv", key, q, "")
	if st != http.StatusCreated || r.Steps != steps(0.3) {
		t.Fatalf("status %d, charge %d steps (want %d): %s", st, r.Steps, steps(0.3), raw)
	}
	var ans linearAnswer
	if err := json.Unmarshal(r.Answer, &ans); err != nil {
		t.Fatal(err)
	}
	// Delta = 1 + 2 on female non-citizens' cells.
	eps, _ := privacy.NewEpsilon(0.3)
	if want := 4 * 3 / eps.Float64(); math.Abs(ans.Privacy.Scale-want) > 1e-15*want || ans.Privacy.Sensitivity != 3 || ans.Privacy.GenericSensitivity != 4 {
		t.Fatalf("privacy %+v, want scale %v, sensitivity 3, S 4", ans.Privacy, want)
	}
	for _, a := range ans.Answers {
		if a != math.Trunc(a) {
			t.Fatalf("unrefined answers are integers, got %v", a)
		}
	}
	// Male cells are fresh: another 0.3 there is free.
	q["queries"] = []LinearQuery{countQuery(1, map[string][]string{"sex": {"Male"}})}
	if st, r, raw := s.ask("inv", key, q, ""); st != http.StatusCreated || r.Steps != 0 {
		t.Fatalf("disjoint cells: status %d, charge %d: %s", st, r.Steps, raw)
	}
}

// TestLinearPrivacy checks, exactly and by brute force on a small table, that
// the ledger's charge bounds the real privacy loss of every answered linear
// request together. The loss for a pair of neighbouring tables is the log of
// the largest ratio of the answers' joint probabilities; with independent
// discrete Laplace noise it is the sum over answers of |mu - mu'|/lambda,
// attained far in the tails (checked with noise.DiscreteLaplace.Prob).
// Neighbours are the induced neighbours of the invariants: the Graver basis
// of their constraints (sensitivity.GraverBasis), or single added or removed rows
// without invariants, where Protocol 1's bound is attained exactly.
func TestLinearPrivacy(t *testing.T) {
	schema, err := domain.NewSchema([]domain.Dimension{
		{Name: "a", Values: []string{"0", "1"}},
		{Name: "b", Values: []string{"0", "1", "2"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := cube.New(schema, 100)
	copy(c.Counts, []float64{3, 0, 5, 2, 7, 1})
	requests := []struct {
		eps     float64
		queries []LinearQuery
	}{
		{0.5, []LinearQuery{countQuery(1, map[string][]string{"a": {"0"}})}},
		{0.25, []LinearQuery{countQuery(2, map[string][]string{"b": {"1", "2"}}), countQuery(-1, map[string][]string{"a": {"1"}, "b": {"0"}})}},
		{0.7, []LinearQuery{countQuery(3, nil)}},
		{0.4, []LinearQuery{countQuery(1, map[string][]string{"b": {"0"}}), countQuery(1, map[string][]string{"b": {"1"}})}},
	}
	for _, tc := range []struct {
		name string
		inv  [][]string
	}{
		{"no invariants", nil},
		{"invariant {a}", [][]string{{"a"}}},
		{"invariants {a} and {b}", [][]string{{"a"}, {"b"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &dataset{schema: schema, policy: Policy{EpsilonPerAnalyst: 100, Invariants: tc.inv}}
			if err := d.applyPolicy(); err != nil {
				t.Fatal(err)
			}
			if err := d.setCube(c); err != nil {
				t.Fatal(err)
			}
			// The neighbours: moves g (per-cell count changes).
			var moves [][]int
			if len(d.exact) == 0 {
				for cell := range schema.Cells() {
					g := make([]int, schema.Cells())
					g[cell] = 1
					moves = append(moves, g)
				}
			} else {
				var rows [][]int
				for _, inv := range d.inv {
					rows = append(rows, cellsOf(schema, inv.Cuboid)...)
				}
				if moves, err = sensitivity.GraverBasis(context.Background(), schema.Cells(), rows); err != nil {
					t.Fatal(err)
				}
			}
			loss := make([]int64, schema.Cells())
			var spent int64
			type answered struct {
				rows   []sparseRow
				lambda float64
			}
			var done []answered
			for _, req := range requests {
				eps, _ := privacy.NewEpsilon(req.eps)
				p, err := planQuery(context.Background(), d, QueryRequest{Kind: "linear", Epsilon: req.eps, Queries: req.queries})
				if err != nil {
					t.Fatal(err)
				}
				before := slices.Max(loss)
				for _, cc := range p.cells {
					loss[cc.Cell] += cc.Steps
				}
				spent += slices.Max(loss) - before
				rows, _ := expandQueries(schema, req.queries, "q")
				var delta int64
				for _, cl := range columnL1(rows) {
					delta = max(delta, cl.coef)
				}
				done = append(done, answered{rows, linearScale(int64(d.sens.Value), delta, eps)})
			}
			// The exact worst case over neighbours and far outputs.
			worst := 0.0
			for _, g := range moves {
				total := 0.0
				for _, a := range done {
					dl, _ := noise.NewDiscreteLaplace(a.lambda)
					for _, r := range a.rows {
						var shift int64
						for i, cell := range r.cells {
							shift += r.coefs[i] * int64(g[cell])
						}
						// log P(z - shift)/P(z) at z in the upper tail,
						// where the ratio is at its largest
						z := abs64(shift) + 10
						total += math.Log(dl.Prob(z-abs64(shift))) - math.Log(dl.Prob(z))
					}
				}
				worst = max(worst, total)
			}
			charged := stepsEpsilon(spent)
			if math.IsNaN(worst) || worst <= 0 || worst > charged*(1+1e-9) {
				t.Fatalf("real loss %v exceeds the charge %v", worst, charged)
			}
			if len(d.exact) == 0 && math.Abs(worst-charged) > 1e-9 {
				t.Fatalf("without invariants Protocol 1 is exact: loss %v, charged %v", worst, charged)
			}
			t.Logf("S=%d: worst loss %.6f <= charged %.6f over %d neighbours", d.sens.Value, worst, charged, len(moves))
		})
	}
}

// cellsOf returns, for each cell of cuboid cb, the base cells that add up to
// it.
func cellsOf(s *domain.Schema, cb domain.Cuboid) [][]int {
	out := make([][]int, s.CuboidSize(cb))
	n := s.NumDims()
	coord := make([]int, n)
	for cell := range s.Cells() {
		k, st := 0, 1
		for i := n - 1; i >= 0; i-- {
			if cb.Has(i) {
				k += coord[i] * st
				st *= s.Size(i)
			}
		}
		out[k] = append(out[k], cell)
		for i := n - 1; i >= 0; i-- {
			coord[i]++
			if coord[i] < s.Size(i) {
				break
			}
			coord[i] = 0
		}
	}
	return out
}
