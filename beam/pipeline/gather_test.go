package pipeline

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/tablefile"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/release"
	"github.com/knowdp/knowdp/sidecar"
	"github.com/knowdp/knowdp/source"
)

// oneSpec is a release of one cuboid at the finest levels as the tests
// give it, the flags of knowdp release --cuboid.
type oneSpec struct {
	Mechanism            release.Mechanism
	Rho                  privacy.Rho
	Delta                float64
	Epsilon              privacy.Epsilon
	Exact                []domain.Cuboid
	Cuboid               domain.Cuboid
	Sensitivity          int
	NonNegative, Integer bool
	Tol                  float64
}

// release is the spec knowdp release makes of o.
func (o oneSpec) release() release.Spec {
	one := release.Spec{Tables: []domain.View{domain.ViewOf(o.Cuboid)}, Weights: []float64{1}, Strategy: release.MeasureBest, Mechanism: o.Mechanism, Epsilon: o.Epsilon,
		Rho: o.Rho, Delta: o.Delta, Sensitivity: o.Sensitivity, NonNegative: o.NonNegative, Integer: o.Integer, Tol: o.Tol}
	for _, e := range o.Exact {
		one.Exact = append(one.Exact, domain.ViewOf(e))
	}
	return one
}

// coreCuboid is knowdp release --seed seed of one cuboid with
// post-processing (--nonneg or --integer), on the whole table: the core's
// one release path.
func coreCuboid(t *testing.T, tb table, spec oneSpec, seed uint64) *release.Release {
	t.Helper()
	plan, err := release.NewPlan(tb.schema, spec.release())
	if err != nil {
		t.Fatal(err)
	}
	src, err := source.OpenCSV(tb.whole)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	counts, _, err := cube.AggregateViews(context.Background(), src, tb.schema, plan.Needs(), cube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rel, err := plan.Run(context.Background(), counts, noise.NewSeeded(seed))
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

// releaseOne is the core's one release path for a one-cuboid spec, from
// the counts of c.
func releaseOne(ctx context.Context, c *cube.Cube, spec oneSpec, r *noise.Rand) (*release.Release, error) {
	plan, err := release.NewPlan(c.Schema, spec.release())
	if err != nil {
		return nil, err
	}
	counts, err := c.ProjectViews(plan.Needs())
	if err != nil {
		return nil, err
	}
	return plan.Run(ctx, counts, r)
}

// releaseCSV and sidecarJSON are a single cuboid's table and privacy
// story as knowdp release writes them.
func releaseCSV(t *testing.T, rel *release.Release) []byte {
	t.Helper()
	var b bytes.Buffer
	tab := rel.Tables[0]
	if err := tablefile.WriteRows(&b, tablefile.CSV, rel.Schema, tab.TableView(), 0, tab.Counts, tab.CellMOE, tab.Integer); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// storyOf is a one-table release's privacy story with its table's file as
// written at out: the file itself, or a directory of parts.
func storyOf(rel *release.Release, out string, f tablefile.Format) sidecar.Metadata {
	m := rel.Metadata()
	if len(m.Tables) == 1 {
		if strings.HasSuffix(out, ".csv") || strings.HasSuffix(out, ".parquet") {
			m.Tables[0].File = filepath.Base(out)
		} else {
			m.Tables[0].File = onlyTableFile(len(rel.Tables[0].Counts), f)
		}
	}
	return m
}

func sidecarJSON(t *testing.T, meta any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGatherCuboidMatchesCore releases one cuboid of 270,000 cells (2
// blocks) with --nonneg and --integer on one worker (ModeGather), as one
// CSV file and as a directory of shards, and checks the table and the
// privacy story are byte for byte knowdp release --seed's: the worker runs
// the same core code on the same counts from the same generator.
func TestGatherCuboidMatchesCore(t *testing.T) {
	dir := t.TempDir()
	tb := writeTable(t, dir, []int{600, 450, 2}, 6000, 2, 31)
	c := parseCuboid(t, tb.schema, "d0,d1")
	// The grand total exact (d2 lies outside the cuboid): an invariant
	// the post-processing must keep, at a tenth of the cost of d1's.
	exact := []domain.Cuboid{parseCuboid(t, tb.schema, "d2")}
	eps, _ := privacy.NewEpsilon(1)
	for _, tc := range []struct {
		name            string
		nonneg, integer bool
		out             string
	}{
		{"nonneg-file", true, false, "nonneg.csv"},
		{"nonneg-dir", true, false, "nonneg"},
		{"integer-file", false, true, "integer.csv"},
		{"integer-dir", false, true, "integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := coreCuboid(t, tb, oneSpec{Epsilon: eps, Exact: exact, Cuboid: c, NonNegative: tc.nonneg, Integer: tc.integer, Tol: 1e-6}, 8)
			out := filepath.Join(dir, tc.out)
			spec := seeded(cuboidSpec(tb, c, exact, eps, out), 8)
			spec.Job.NonNeg, spec.Job.Integer = tc.nonneg, tc.integer
			res, err := Run(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			if res.Mode != ModeGather || res.Cells != 270000 {
				t.Fatalf("result %+v, want ModeGather over 270000 cells", res)
			}
			wantCSV, wantSide := releaseCSV(t, want), sidecarJSON(t, storyOf(want, out, tablefile.CSV))
			var got, side []byte
			if strings.HasSuffix(tc.out, ".csv") {
				got, side = readFile(t, out), readFile(t, strings.TrimSuffix(out, ".csv")+".json")
				if res.Directory {
					t.Fatal("a .csv --out written as a directory")
				}
			} else {
				checkListing(t, out, []string{"part-00000.csv", "part-00001.csv", "release.json"})
				got, side = joinShards(t, out, []string{"part-00000.csv", "part-00001.csv"}), readFile(t, filepath.Join(out, "release.json"))
			}
			if !bytes.Equal(got, wantCSV) {
				t.Fatalf("table differs from the single machine's (%d and %d bytes)", len(got), len(wantCSV))
			}
			if !bytes.Equal(side, wantSide) || !bytes.Equal(res.Sidecar, wantSide) {
				t.Fatalf("sidecar\n%s\nwant\n%s", side, wantSide)
			}
			// Post-processed: non-negative, and integers for --integer, but
			// not the exact counts (noise was added).
			var differ int
			for i, v := range want.Tables[0].Counts {
				// --nonneg is met to --tol (1e-6), --integer exactly.
				if v < -1e-6 || (tc.integer && (v < 0 || v != math.Round(v))) {
					t.Fatalf("cell %d: %v", i, v)
				}
				if tc.integer && v != 0 {
					differ++
				}
			}
			if tc.integer && differ == 0 {
				t.Fatal("every integer count is 0")
			}
			checkNoLeftovers(t, out)
		})
	}
}

// TestGatherWorkloadMatchesCore releases several cuboids with --integer,
// --nonneg, and with --measurements (one table of 2 blocks), on one
// worker, and checks every
// table, release.json and the measurements file are byte for byte the
// single machine's.
func TestGatherWorkloadMatchesCore(t *testing.T) {
	dir := t.TempDir()
	tb := writeTable(t, dir, []int{600, 450, 3}, 6000, 2, 32)
	for k, wc := range []wcase{
		{name: "integer", cuboids: []string{"d0,d2", "d1", "d1,d2"}, exact: []string{"d2"}, eps: 1, integer: true},
		{name: "nonneg", cuboids: []string{"d0,d2", "d1,d2", "d2"}, exact: []string{"d0"}, eps: 1, nonneg: true},
		{name: "measurements", cuboids: []string{"d0,d1", "d1", "d0,d2"}, exact: []string{"d2"}, eps: 1, keep: true},
		{name: "measurements-gaussian", cuboids: []string{"d0,d2", "d1"}, gauss: true, rho: 0.3, delta: 1e-6, keep: true},
	} {
		t.Run(wc.name, func(t *testing.T) {
			seed := uint64(200 + k)
			w := coreWorkload(t, tb, wc, seed)
			out := filepath.Join(dir, wc.name)
			spec := Spec{Files: tb.shards, Schema: tb.schema, Job: wc.job(), Out: out, Seeded: true, Seed: seed}
			if wc.keep {
				spec.Measurements = filepath.Join(dir, wc.name+"-measurements.json")
			}
			res, err := Run(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			if res.Mode != ModeGather || !res.Directory || res.Tables != len(wc.cuboids) {
				t.Fatalf("result %+v, want ModeGather, a directory of %d tables", res, len(wc.cuboids))
			}
			compareWorkloadDir(t, out, w, true)
			if wc.keep {
				saved, err := w.SaveMeasurements()
				if err != nil {
					t.Fatal(err)
				}
				if got, want := readFile(t, spec.Measurements), sidecarJSON(t, saved); !bytes.Equal(got, want) {
					t.Fatalf("measurements differ from the single machine's (%d and %d bytes)", len(got), len(want))
				}
				if res.Files[len(res.Files)-1] != spec.Measurements {
					t.Fatalf("files %v do not end with the measurements", res.Files)
				}
			}
			for _, tab := range w.Tables {
				for i, v := range tab.Counts {
					if (wc.integer || wc.nonneg) && v < -1e-6 || wc.integer && (v < 0 || v != math.Round(v)) {
						t.Fatalf("table %s cell %d: %v", tb.schema.Format(tab.Cuboid), i, v)
					}
				}
			}
			checkNoLeftovers(t, out)
		})
	}
}

// geoSchema is 2 regions > 4 states > 10 counties (unequal groups),
// crossed with sex and a 3-band age (cube's smallGeoJSON).
const geoSchema = `{"dimensions":[
 {"name":"geo","levels":["region","state","county"],
  "values":["c1","c2","c3","c4","c5","c6","c7","c8","c9","c10"],
  "parents":{"state":{"c1":"s1","c2":"s1","c3":"s2","c4":"s2","c5":"s2","c6":"s3","c7":"s4","c8":"s4","c9":"s4","c10":"s4"},
             "region":{"s1":"r1","s2":"r1","s3":"r2","s4":"r2"}}},
 {"name":"sex","values":["F","M"]},
 {"name":"age","values":["0-17","18-64","65+"]}]}`

// geoTable writes rows facts over geoSchema in two shards and one whole
// file.
func geoTable(t *testing.T, dir string, rows int) table {
	t.Helper()
	s, err := domain.ParseSchema([]byte(geoSchema))
	if err != nil {
		t.Fatal(err)
	}
	tb := table{schema: s, whole: filepath.Join(dir, "geo-whole.csv")}
	rng := rand.New(rand.NewPCG(5, 6))
	var whole strings.Builder
	whole.WriteString("age,geo,sex\n")
	for k := range 2 {
		var b strings.Builder
		b.WriteString("age,geo,sex\n")
		for range rows / 2 {
			line := fmt.Sprintf("%s,%s,%s\n", s.Dim(2).Values[rng.IntN(3)], s.Dim(0).Values[rng.IntN(10)], s.Dim(1).Values[rng.IntN(2)])
			b.WriteString(line)
			whole.WriteString(line)
		}
		p := filepath.Join(dir, fmt.Sprintf("geo-%d.csv", k))
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		tb.shards = append(tb.shards, p)
	}
	if err := os.WriteFile(tb.whole, []byte(whole.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return tb
}

// coreViews is knowdp release --seed seed of views at levels of a
// hierarchy: release.NewPlan and Plan.Run on the whole table.
func coreViews(t *testing.T, tb table, spec release.Spec, seed uint64) *release.Release {
	t.Helper()
	ctx := context.Background()
	plan, err := release.NewPlan(tb.schema, spec)
	if err != nil {
		t.Fatal(err)
	}
	src, err := source.OpenCSV(tb.whole)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	counts, _, err := cube.AggregateViews(ctx, src, tb.schema, plan.Needs(), cube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := plan.Run(ctx, counts, noise.NewSeeded(seed))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestGatherViewsMatchesCore releases tables at the levels of a hierarchy
// (ModeGather) with Laplace and Gaussian noise, with and without
// --integer, as a directory and as one file, and checks tables and
// privacy story are byte for byte knowdp release --seed's.
func TestGatherViewsMatchesCore(t *testing.T) {
	dir := t.TempDir()
	tb := geoTable(t, dir, 3000)
	s := tb.schema
	view := func(x string) domain.View {
		v, err := s.ParseView(x)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	eps, _ := privacy.NewEpsilon(1)
	rho, _ := privacy.NewRho(0.5)
	for k, tc := range []struct {
		name    string
		cuboids []string
		exact   []string
		gauss   bool
		integer bool
		out     string
	}{
		{name: "laplace", cuboids: []string{"geo:state,sex", "geo:region", "age"}, exact: []string{"geo:region"}},
		{name: "integer", cuboids: []string{"geo,sex", "geo:state,sex", "geo:region,age"}, integer: true},
		{name: "gaussian", cuboids: []string{"geo:state", "geo:region,sex"}, gauss: true},
		{name: "gaussian-integer", cuboids: []string{"geo:state,age", "geo"}, gauss: true, integer: true},
		{name: "one-view", cuboids: []string{"geo:state,sex"}, integer: true, out: "one.csv"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seed := uint64(300 + k)
			// The total objective (the default across a hierarchy is the
			// mean), given on both routes.
			vs := release.Spec{Epsilon: eps, Split: release.SplitOptimal, Objective: release.ObjectiveTotal, Integer: tc.integer}
			j := Job{Cuboids: tc.cuboids, Exact: tc.exact, Epsilon: 1, Integer: tc.integer, Objective: "total"}
			if tc.gauss {
				vs = release.Spec{Mechanism: release.MechanismGaussian, Rho: rho, Delta: 1e-6, Split: release.SplitOptimal, Objective: release.ObjectiveTotal, Integer: tc.integer}
				j.Mechanism, j.Epsilon, j.Rho, j.Delta = "gaussian", 0, 0.5, 1e-6
			}
			for _, x := range tc.cuboids {
				vs.Tables, vs.Weights = append(vs.Tables, view(x)), append(vs.Weights, 1)
			}
			for _, x := range tc.exact {
				vs.Exact = append(vs.Exact, view(x))
			}
			w := coreViews(t, tb, vs, seed)
			out := filepath.Join(dir, cmp.Or(tc.out, tc.name))
			res, err := Run(context.Background(), Spec{Files: tb.shards, Schema: s, Job: j, Out: out, Seeded: true, Seed: seed})
			if err != nil {
				t.Fatal(err)
			}
			if res.Mode != ModeGather || !res.Workload {
				t.Fatalf("result %+v, want ModeGather", res)
			}
			if tc.out != "" {
				// One view: one CSV and its sidecar, as the CLI writes it.
				if res.Directory {
					t.Fatal("one view written as a directory")
				}
				if got, want := readFile(t, out), coreCSV(t, s, w.Tables[0]); !bytes.Equal(got, want) {
					t.Fatalf("table\n%s\nwant\n%s", got, want)
				}
				if got, want := readFile(t, strings.TrimSuffix(out, ".csv")+".json"), sidecarJSON(t, storyOf(w, out, tablefile.CSV)); !bytes.Equal(got, want) {
					t.Fatalf("sidecar\n%s\nwant\n%s", got, want)
				}
			} else {
				compareWorkloadDir(t, out, w, true)
			}
			var nonInt int
			for _, tab := range w.Tables {
				for _, v := range tab.Counts {
					if v != math.Round(v) {
						nonInt++
					}
				}
			}
			if tc.integer != (nonInt == 0) {
				t.Fatalf("%d counts are not integers (--integer %v)", nonInt, tc.integer)
			}
			checkNoLeftovers(t, out)
		})
	}
}
