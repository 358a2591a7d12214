package server

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/release"
	"github.com/knowdp/knowdp/server/store"
)

// measuredView is what the tests read of a one-cuboid answer, charged or
// derived.
type measuredView struct {
	Dimensions []string  `json:"dimensions"`
	Counts     []float64 `json:"counts"`
	// MOE90 is a one-table answer's largest margin of error.
	MOE90   float64 `json:"moe90"`
	Privacy struct {
		Derived     bool     `json:"derived"`
		DerivedFrom []string `json:"derived_from"`
		Epsilon     float64  `json:"epsilon"`
		Rho         float64  `json:"rho"`
		Variance    float64  `json:"variance"`
		Note        string   `json:"note"`
		// Measurements are a released answer's: the one measured table's
		// noise for a one-table answer.
		Measurements []struct {
			Sensitivity   int     `json:"sensitivity"`
			Epsilon       float64 `json:"epsilon"`
			Rho           float64 `json:"rho"`
			L2Sensitivity float64 `json:"l2_sensitivity"`
			Sigma         float64 `json:"sigma"`
		} `json:"measurements"`
	} `json:"privacy"`
	Tables []struct {
		Dimensions []string  `json:"dimensions"`
		Counts     []float64 `json:"counts"`
	} `json:"tables"`
}

// measurementStep is one query of TestKeptMeasurements.
type measurementStep struct {
	name    string
	analyst string
	// restart restarts the server (same store) before the query.
	restart bool
	dataset string
	query   string
	idem    string
	// free: answered from the analyst's kept measurements, charged 0,
	// derived from the answers of the steps from (in ledger order).
	free bool
	from []string
	// repeat: the stored answer of step same is returned.
	same string
	// margin: the answer is the margin of the one-cuboid answer of this
	// step (derived from it alone).
	margin string
}

// TestKeptMeasurements: the server keeps every flat cuboid and workload
// answer's noisy measurements with it, durably, and answers a later
// one-cuboid query of the same analyst whose cuboid they determine by the
// least-squares estimate from them (cube's, to 1e-9), free and the same
// every time, listing the answers it comes from; a cuboid they do not
// determine, another analyst's query, another mechanism and a query with
// post-processing are charged as before; a restart changes nothing.
func TestKeptMeasurements(t *testing.T) {
	steps := []measurementStep{
		{name: "ab", analyst: "ann", dataset: "e", query: `{"kind":"cuboid","epsilon":0.5,"cuboid":["colour","agegroup"]}`},
		{name: "bc", analyst: "ann", dataset: "e", query: `{"kind":"cuboid","epsilon":0.25,"cuboid":["agegroup","employed"]}`},
		{name: "b", analyst: "ann", dataset: "e", query: `{"kind":"cuboid","epsilon":0.3,"cuboid":["agegroup"]}`, idem: "b-1", free: true, from: []string{"ab", "bc"}},
		{name: "b again", analyst: "ann", dataset: "e", query: `{"kind":"cuboid","epsilon":0.7,"cuboid":["agegroup"]}`, same: "b"},
		{name: "b retried", analyst: "ann", dataset: "e", query: `{"kind":"cuboid","epsilon":0.3,"cuboid":["agegroup"]}`, idem: "b-1", same: "b"},
		{name: "ac not determined", analyst: "ann", dataset: "e", query: `{"kind":"cuboid","epsilon":0.5,"cuboid":["colour","employed"]}`},
		{name: "ab nonneg", analyst: "ann", dataset: "e", query: `{"kind":"cuboid","epsilon":0.125,"cuboid":["colour","agegroup"],"nonneg":true}`},
		{name: "another analyst", analyst: "bob", dataset: "e", query: `{"kind":"cuboid","epsilon":0.3,"cuboid":["agegroup"]}`},
		{name: "bob a from ab", analyst: "bob", dataset: "e", query: `{"kind":"cuboid","epsilon":0.5,"cuboid":["colour","agegroup"]}`},
		{name: "bob a", analyst: "bob", dataset: "e", query: `{"kind":"cuboid","epsilon":0.1,"cuboid":["colour"]}`, free: true, from: []string{"another analyst", "bob a from ab"}, margin: "bob a from ab"},
		{name: "bob ab workload", analyst: "bob", dataset: "e", query: `{"kind":"cuboid","epsilon":0.25,"cuboids":[["colour","agegroup"]]}`},
		{name: "bob b", analyst: "bob", dataset: "e", query: `{"kind":"cuboid","epsilon":0.2,"cuboid":["agegroup"]}`, free: true, from: []string{"another analyst", "bob a from ab", "bob ab workload"}},
		{name: "workload", analyst: "cat", dataset: "e", query: `{"kind":"cuboid","epsilon":0.5,"cuboids":[["sex","agegroup"],["agegroup","citizen"]]}`},
		{name: "cat b", analyst: "cat", dataset: "e", query: `{"kind":"cuboid","epsilon":0.5,"cuboid":["agegroup"]}`, free: true, from: []string{"workload"}},
		{name: "restarted: b", restart: true, analyst: "ann", dataset: "e", query: `{"kind":"cuboid","epsilon":0.9,"cuboid":["agegroup"]}`, same: "b"},
		{name: "restarted: c", analyst: "ann", dataset: "e", query: `{"kind":"cuboid","epsilon":0.9,"cuboid":["employed"]}`, free: true, from: []string{"ab", "bc", "ac not determined", "ab nonneg"}},
		{name: "gaussian ab", analyst: "ann", dataset: "z", query: `{"kind":"cuboid","mechanism":"gaussian","rho":0.05,"cuboid":["sex","agegroup"]}`},
		{name: "laplace b on z", analyst: "ann", dataset: "z", query: `{"kind":"cuboid","epsilon":0.1,"cuboid":["agegroup"]}`},
		{name: "gaussian b", analyst: "ann", dataset: "z", query: `{"kind":"cuboid","mechanism":"gaussian","rho":0.01,"cuboid":["agegroup"]}`, free: true, from: []string{"gaussian ab"}, margin: "gaussian ab"},
	}
	forEachStore(t, func(t *testing.T, cfg Config) {
		cfg.AdminKey = GenerateKey()
		s := startServer(t, cfg)
		s.registerArrests("e", 10, []string{"year"})
		s.must(http.StatusCreated, "POST", "/admin/v1/datasets", s.admin, DatasetRequest{
			ID: "z", Name: "zcdp", Schema: arrestsSchema(t),
			Source: Source{CSV: filepath.Join(repoRoot(t), "data", "arrests.csv")},
			Policy: Policy{RhoPerAnalyst: 1, Invariants: [][]string{{"year"}}},
		}, nil)
		keys, ids := map[string]string{}, map[string]string{}
		for _, a := range []string{"ann", "bob", "cat"} {
			ids[a], keys[a] = s.analyst(a)
		}
		answered := map[string]response{}
		for _, st := range steps {
			if st.restart {
				s.ts.Close()
				s.srv.Close()
				s = startServer(t, cfg)
			}
			before := s.budgetOf(st.dataset, keys[st.analyst])
			status, r, raw := s.ask(st.dataset, keys[st.analyst], st.query, st.idem)
			var ans measuredView
			if status == http.StatusOK || status == http.StatusCreated {
				mustUnmarshal(t, r.Answer, &ans)
			}
			after := s.budgetOf(st.dataset, keys[st.analyst])
			switch {
			case st.same != "":
				want := answered[st.same]
				if status != http.StatusOK || !r.Repeat || r.ID != want.ID || string(r.Answer) != string(want.Answer) || after.SpentSteps != before.SpentSteps {
					t.Fatalf("%s: %d repeat %v id %s (want the answer %s of %s), spent %d -> %d: %s", st.name, status, r.Repeat, r.ID, want.ID, st.same, before.SpentSteps, after.SpentSteps, raw)
				}
			case st.free:
				var from []string
				for _, f := range st.from {
					from = append(from, answered[f].ID)
				}
				if status != http.StatusCreated || r.Steps != 0 || after.SpentSteps != before.SpentSteps ||
					!ans.Privacy.Derived || !slices.Equal(ans.Privacy.DerivedFrom, from) || ans.Privacy.Epsilon != 0 ||
					!strings.Contains(ans.Privacy.Note, "no new noise") {
					t.Fatalf("%s: want free and derived from %v: %d steps %d, spent %d -> %d: %s", st.name, from, status, r.Steps, before.SpentSteps, after.SpentSteps, raw)
				}
				want := expectedEstimate(t, s, st, answered, ids[st.analyst], ans.Dimensions)
				if len(want.Counts) != len(ans.Counts) {
					t.Fatalf("%s: %d counts, the estimate has %d", st.name, len(ans.Counts), len(want.Counts))
				}
				for i := range want.Counts {
					if math.Abs(want.Counts[i]-ans.Counts[i]) > 1e-9*max(1, math.Abs(want.Counts[i])) {
						t.Fatalf("%s: count %d is %v, cube's estimate from the measurements %v", st.name, i, ans.Counts[i], want.Counts[i])
					}
				}
				var moe float64
				moe = ans.MOE90
				if math.Abs(want.Variance-ans.Privacy.Variance) > 1e-9*want.Variance || !(moe > 0) {
					t.Errorf("%s: variance %v moe90 %v, the estimate's variance %v", st.name, ans.Privacy.Variance, moe, want.Variance)
				}
				if st.margin != "" {
					checkMargin(t, s, st, answered[st.margin], ans)
				}
				// Every table agrees with the invariants, so on the grand
				// total the derived table agrees with the earlier ones.
				total := sum(ans.Counts)
				for _, f := range st.from {
					var a measuredView
					mustUnmarshal(t, answered[f].Answer, &a)
					totals := []float64{sum(a.Counts)}
					if a.Tables != nil {
						totals = totals[:0]
						for _, tb := range a.Tables {
							totals = append(totals, sum(tb.Counts))
						}
					}
					for _, x := range totals {
						if math.Abs(x-total) > 1e-6*math.Abs(total) {
							t.Errorf("%s: total %v, the earlier answer %s has %v", st.name, total, f, x)
						}
					}
				}
			default:
				if status != http.StatusCreated || r.Steps <= 0 || after.SpentSteps != before.SpentSteps+r.Steps || ans.Privacy.Derived {
					t.Fatalf("%s: want charged: %d steps %d, spent %d -> %d: %s", st.name, status, r.Steps, before.SpentSteps, after.SpentSteps, raw)
				}
			}
			answered[st.name] = r
		}
	})
}

func sum(x []float64) float64 {
	var t float64
	for _, v := range x {
		t += v
	}
	return t
}

// expectedEstimate returns cube's estimate of the cuboid dims from the
// measurements of the steps st.from: the counts and noise of their
// one-cuboid answers, as the analyst holds them, or a workload's noisy
// measurements as the ledger keeps them.
func expectedEstimate(t *testing.T, s *testServer, st measurementStep, answered map[string]response, analyst string, dims []string) release.Table {
	t.Helper()
	d := s.srv.sets[st.dataset]
	mech := "laplace"
	if strings.Contains(st.query, "gaussian") {
		mech = "gaussian"
	}
	sm := &release.SavedMeasurements{Format: release.MeasurementsFormat, Mechanism: mech, Invariants: []release.SavedTable{}}
	for _, v := range d.inv {
		sm.Invariants = append(sm.Invariants, release.SavedTable{Cuboid: nonNilNames(d.schema.Names(v.Cuboid)), Counts: v.Counts})
	}
	kept, err := measurementsOf(context.Background(), s.srv.st, analyst, st.dataset)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range st.from {
		var a measuredView
		mustUnmarshal(t, answered[f].Answer, &a)
		if a.Tables != nil {
			// A workload: its noisy measurements are not in the answer;
			// read them from the ledger row.
			i := slices.IndexFunc(kept, func(m storedMeasurement) bool { return m.id == answered[f].ID })
			if i < 0 || len(kept[i].record.Measurements) == 0 {
				t.Fatalf("%s: no measurements kept with %s", st.name, f)
			}
			sm.Measurements = append(sm.Measurements, kept[i].record.Measurements...)
			continue
		}
		m := release.SavedMeasurement{Cuboid: a.Dimensions, Counts: a.Counts}
		if mech == "gaussian" {
			x := a.Privacy.Measurements[0]
			m.L2Sensitivity, m.Rho, m.Variance = x.L2Sensitivity, x.Rho, x.Sigma*x.Sigma
		} else {
			x := a.Privacy.Measurements[0]
			lap, err := noise.NewLaplace(float64(x.Sensitivity), x.Epsilon)
			if err != nil {
				t.Fatal(err)
			}
			m.Sensitivity, m.Epsilon, m.Variance = x.Sensitivity, x.Epsilon, lap.Variance()
		}
		sm.Measurements = append(sm.Measurements, m)
	}
	cb, err := d.schema.CuboidOf(dims...)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := sm.Estimate(d.schema, []domain.Cuboid{cb})
	if err != nil {
		t.Fatalf("%s: %v", st.name, err)
	}
	return tables[0]
}

// checkMargin checks that a cuboid derived from one earlier answer alone is
// that answer's margin: consistent with the table the analyst holds.
func checkMargin(t *testing.T, s *testServer, st measurementStep, from response, got measuredView) {
	t.Helper()
	d := s.srv.sets[st.dataset]
	var a measuredView
	mustUnmarshal(t, from.Answer, &a)
	big, err := d.schema.CuboidOf(a.Dimensions...)
	if err != nil {
		t.Fatal(err)
	}
	small, err := d.schema.CuboidOf(got.Dimensions...)
	if err != nil {
		t.Fatal(err)
	}
	margin := marginal(d.schema, big, a.Counts, small)
	for i := range margin {
		if math.Abs(margin[i]-got.Counts[i]) > 1e-9*max(1, math.Abs(margin[i])) {
			t.Fatalf("%s: count %d is %v, the margin of the earlier answer %v", st.name, i, got.Counts[i], margin[i])
		}
	}
}

// marginal sums the counts x of cuboid big (row-major over its dimensions,
// in schema order) down to cuboid small, a subset of big.
func marginal(s *domain.Schema, big domain.Cuboid, x []float64, small domain.Cuboid) []float64 {
	var dims []int
	for i := range s.NumDims() {
		if big&(1<<i) != 0 {
			dims = append(dims, i)
		}
	}
	out := make([]float64, s.CuboidSize(small))
	for cell, v := range x {
		// Decode cell into its coordinates (last dimension fastest) and
		// re-encode those of small.
		idx, stride, rest := 0, 1, cell
		for k := len(dims) - 1; k >= 0; k-- {
			i := dims[k]
			c := rest % s.Size(i)
			rest /= s.Size(i)
			if small&(1<<i) != 0 {
				idx += c * stride
				stride *= s.Size(i)
			}
		}
		out[idx] += v
	}
	return out
}

// TestKeptMeasurementsStored: the measurements are in the ledger row of
// the answer they were drawn for (the transaction of its charge), count
// against the ledger quota, and are never shown in an answer.
func TestKeptMeasurementsStored(t *testing.T) {
	cases := []struct {
		query string
		want  [][]string // the measured cuboids kept; nil: none
	}{
		{`{"kind":"cuboid","epsilon":0.5,"cuboid":["sex","year"]}`, [][]string{{"year", "sex"}}},
		{`{"kind":"cuboid","epsilon":0.5,"cuboid":["agegroup"],"integer":true}`, [][]string{{"agegroup"}}},
		{`{"kind":"cuboid","epsilon":0.5,"cuboid":["year"]}`, nil},                                                                   // public: released exactly
		{`{"kind":"cuboid","epsilon":0.5,"cuboids":[["citizen"],["employed"]],"integer":true}`, [][]string{{"employed", "citizen"}}}, // the strategy measures their cross: both from one table at the whole epsilon
		{`{"kind":"cuboid","epsilon":0.5,"cuboids":[["citizen"],["employed"]],"integer":true,"split":"equal"}`, [][]string{{"citizen"}, {"employed"}}},
	}
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerArrests("e", 10, []string{"year"})
	aid, key := s.analyst("dan")
	for _, c := range cases {
		status, r, raw := s.ask("e", key, c.query, "")
		if status != http.StatusCreated || strings.Contains(string(raw), measurementsFormat) {
			t.Fatalf("%s: %d %s", c.query, status, raw)
		}
		var row struct{ meas *string }
		if err := s.sqlite().QueryRow(`SELECT record FROM ledger LEFT JOIN measurements ON ledger_id = id WHERE id = ?`, r.ID).Scan(&row.meas); err != nil {
			t.Fatal(err)
		}
		if c.want == nil {
			if row.meas != nil {
				t.Errorf("%s: kept %s", c.query, *row.meas)
			}
			continue
		}
		if row.meas == nil {
			t.Fatalf("%s: no measurements kept", c.query)
		}
		var rec measurementRecord
		mustUnmarshal(t, []byte(*row.meas), &rec)
		var got [][]string
		for _, m := range rec.Measurements {
			got = append(got, m.Cuboid)
			if !(m.Variance > 0) || len(m.Counts) == 0 {
				t.Errorf("%s: measurement %+v", c.query, m)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) || rec.Mechanism != "laplace" || rec.Invariants != s.srv.sets["e"].invKey {
			t.Errorf("%s: kept %v (%s), want %v", c.query, got, rec.Mechanism, c.want)
		}
	}
	var total int64
	for _, e := range s.ledger(aid, "e") {
		var meas *string
		if err := s.sqlite().QueryRow(`SELECT record FROM ledger LEFT JOIN measurements ON ledger_id = id WHERE id = ?`, e.ID).Scan(&meas); err != nil {
			t.Fatal(err)
		}
		total += int64(len(e.Request) + len(e.Answer))
		if meas != nil {
			total += int64(len(*meas))
		}
	}
	var lb int64
	if err := s.sqlite().QueryRow(`SELECT ledger_bytes FROM budgets WHERE analyst_id = ? AND dataset_id = 'e'`, aid).Scan(&lb); err != nil {
		t.Fatal(err)
	}
	if total == 0 || lb != total {
		t.Errorf("ledger bytes %d, the rows hold %d", lb, total)
	}
}

// TestKeptMeasurementsStoreDown: reading the kept measurements from an
// unreachable database is a storage failure (503 with Retry-After), not an
// internal error; a budget with nothing stored reads nothing.
func TestKeptMeasurementsStoreDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dead, err := store.OpenPostgres("postgres://nobody@" + addr + "/x?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	var cache keptCache
	for _, c := range []struct {
		ledgerBytes int64
		wantErr     bool
	}{{0, false}, {1, true}} {
		kept, err := cache.get(context.Background(), dead, "a", "d", store.Budget{LedgerBytes: c.ledgerBytes})
		switch {
		case c.wantErr && (err == nil || !store.Unavailable(err)):
			t.Errorf("ledger bytes %d: %v, want a storage failure", c.ledgerBytes, err)
		case !c.wantErr && (err != nil || kept != nil):
			t.Errorf("ledger bytes %d: %v %v, want nothing read", c.ledgerBytes, kept, err)
		}
	}
}

// TestKeptMeasurementsAtomic: the measurements are stored in the
// transaction of the answer's charge: when storing them fails, neither the
// answer nor its charge is stored (503, nothing spent), and once the store
// works again the query is answered and charged once, with its
// measurements.
func TestKeptMeasurementsAtomic(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerArrests("e", 10, []string{"year"})
	aid, key := s.analyst("eve")
	if _, err := s.sqlite().Exec(`CREATE TRIGGER refuse_measurements BEFORE INSERT ON measurements BEGIN SELECT RAISE(ABORT, 'disk full'); END`); err != nil {
		t.Fatal(err)
	}
	q := `{"kind":"cuboid","epsilon":0.5,"cuboid":["sex","agegroup"]}`
	cases := []struct {
		name    string
		setup   string
		status  int
		entries int
		spent   int64
	}{
		{"measurements refused", "", http.StatusServiceUnavailable, 0, 0},
		{"measurements stored", `DROP TRIGGER refuse_measurements`, http.StatusCreated, 1, steps(0.5)},
	}
	for _, st := range cases {
		if st.setup != "" {
			if _, err := s.sqlite().Exec(st.setup); err != nil {
				t.Fatal(err)
			}
		}
		status, _, raw := s.ask("e", key, q, "atomic-1")
		var n int
		if err := s.sqlite().QueryRow(`SELECT COUNT(*) FROM measurements WHERE analyst_id = ?`, aid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if status != st.status || len(s.ledger(aid, "e")) != st.entries || n != st.entries || s.budgetOf("e", key).SpentSteps != st.spent {
			t.Fatalf("%s: %d, %d ledger entries, %d measurements, spent %d: %s", st.name, status, len(s.ledger(aid, "e")), n, s.budgetOf("e", key).SpentSteps, raw)
		}
	}
}
