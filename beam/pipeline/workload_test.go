package pipeline

import (
	"bytes"
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/release"
	"github.com/knowdp/knowdp/source"
)

// wcase is a release of several cuboids, written once and read both as
// knowdp release's flags (Job) and as the core's spec (release.Spec),
// so that the pipeline and the single machine are given the same release
// by independent routes.
type wcase struct {
	name    string
	cuboids []string // as --cuboid names them: "d0,d1"
	// weights, if set, sends the cuboids through a --workload JSON file
	// with these weights.
	weights         []float64
	exact           []string
	gauss           bool
	eps, rho, delta float64
	split, strategy string
	nonneg, integer bool
	keep            bool // --measurements
}

func (wc wcase) job() Job {
	j := Job{Exact: wc.exact, Split: wc.split, Strategy: wc.strategy, NonNeg: wc.nonneg, Integer: wc.integer, KeepMeasurements: wc.keep}
	if wc.weights == nil {
		j.Cuboids = wc.cuboids
	} else {
		var b strings.Builder
		b.WriteString("[")
		for i, c := range wc.cuboids {
			names, _ := json.Marshal(strings.Split(c, ","))
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "\n {\"cuboid\": %s, \"weight\": %v}", names, wc.weights[i])
		}
		b.WriteString("\n]\n")
		j.Workload, j.WorkloadName = []byte(b.String()), "workload.json"
	}
	if wc.gauss {
		j.Mechanism, j.Rho, j.Delta = "gaussian", wc.rho, wc.delta
	} else {
		j.Epsilon = wc.eps
	}
	return j
}

// spec is the core's spec of the release, built as cmd/knowdp/release.go
// builds it from the same flags.
func (wc wcase) spec(t *testing.T, s *domain.Schema) release.Spec {
	t.Helper()
	spec := release.Spec{NonNegative: wc.nonneg, Integer: wc.integer, KeepMeasurements: wc.keep}
	for i, c := range wc.cuboids {
		spec.Tables = append(spec.Tables, domain.ViewOf(parseCuboid(t, s, c)))
		w := 1.0
		if wc.weights != nil {
			w = wc.weights[i]
		}
		spec.Weights = append(spec.Weights, w)
	}
	for _, e := range wc.exact {
		spec.Exact = append(spec.Exact, domain.ViewOf(parseCuboid(t, s, e)))
	}
	var err error
	if spec.Split, err = release.ParseSplit(cmp.Or(wc.split, "optimal")); err != nil {
		t.Fatal(err)
	}
	if spec.Strategy, err = release.ParseMeasureStrategy(cmp.Or(wc.strategy, "best")); err != nil {
		t.Fatal(err)
	}
	if wc.gauss {
		spec.Mechanism, spec.Delta = release.MechanismGaussian, wc.delta
		if spec.Rho, err = privacy.NewRho(wc.rho); err != nil {
			t.Fatal(err)
		}
	} else if spec.Epsilon, err = privacy.NewEpsilon(wc.eps); err != nil {
		t.Fatal(err)
	}
	return spec
}

func parseCuboid(t *testing.T, s *domain.Schema, names string) domain.Cuboid {
	t.Helper()
	c, err := s.ParseCuboid(names)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// coreWorkload is knowdp release --seed seed of the case on the whole
// table: the counts aggregated from the one CSV file as the CLI counts
// them, then release.NewPlan and Plan.Run (with --integer or --nonneg).
func coreWorkload(t *testing.T, tb table, wc wcase, seed uint64) *release.Release {
	t.Helper()
	ctx := context.Background()
	s := tb.schema
	plan, err := release.NewPlan(s, wc.spec(t, s))
	if err != nil {
		t.Fatal(err)
	}
	src, err := source.OpenCSV(tb.whole)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	counts, _, err := cube.AggregateViews(ctx, src, s, plan.Needs(), cube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := plan.Run(ctx, counts, noise.NewSeeded(seed))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// beamTable is where a table of a directory release is: its file (one
// block) or its directory of shards, as release.json names it, and the
// files within the output directory.
func beamTable(stem string, cells int, ext string) (meta string, files []string) {
	n := Blocks(cells)
	if n == 1 {
		return stem + ext, []string{stem + ext}
	}
	for b := range n {
		files = append(files, fmt.Sprintf("%s/part-%05d%s", stem, b, ext))
	}
	return stem + "/", files
}

// wantDir is what a directory release of w must hold: every table's
// files (named as knowdp release names them: release.TableFileName for a
// cuboid, Schema.ViewFileName for a view), release.json, and the core's
// privacy story with each table's file set to its beam name.
func wantDir(t *testing.T, w *release.Release, ext string) (files []string, stems []string, sidecar []byte) {
	t.Helper()
	s := w.Schema
	m := w.Metadata()
	for i, tab := range w.Tables {
		name := release.TableFileName(s, tab.Cuboid)
		if !tab.TableView().Flat() {
			name = s.ViewFileName(tab.TableView())
		}
		stem := strings.TrimSuffix(name, ".csv")
		meta, tf := beamTable(stem, len(tab.Counts), ext)
		m.Tables[i].File = meta
		files, stems = append(files, tf...), append(stems, stem)
	}
	files = append(files, "release.json")
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return files, stems, append(b, '\n')
}

// listDir lists the files under dir, relative to it with "/", sorted.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// checkListing checks the output directory holds exactly the files want.
func checkListing(t *testing.T, dir string, want []string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	if got := listDir(t, dir); !slices.Equal(got, want) {
		t.Fatalf("%s holds\n%v\nwant\n%v", dir, got, want)
	}
}

// checkNoLeftovers checks nothing but out itself (if it exists) is left
// beside it: no staging or scratch directory, no temporary file.
func checkNoLeftovers(t *testing.T, out string) {
	t.Helper()
	dir, base := filepath.Split(filepath.Clean(out))
	left, err := filepath.Glob(filepath.Join(dir, "."+base+"*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Fatalf("left behind beside %s: %v", out, left)
	}
}

// joinShards reads a table of a directory release as one CSV: its file,
// or its shards in order with the header of the first only (each shard
// must start with the same header).
func joinShards(t *testing.T, dir string, files []string) []byte {
	t.Helper()
	var out []byte
	var header string
	for i, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		h, rest, ok := bytes.Cut(b, []byte("\n"))
		if !ok {
			t.Fatalf("%s: no header row", f)
		}
		if i == 0 {
			header, out = string(h), b
			continue
		}
		if string(h) != header {
			t.Fatalf("%s: header %q, want %q as in %s", f, h, header, files[0])
		}
		out = append(out, rest...)
	}
	return out
}

// tableFiles picks the files of the table with the given stem out of a
// directory's files (as wantDir lists them).
func tableFiles(files []string, stem string) []string {
	var out []string
	for _, f := range files {
		if strings.TrimSuffix(f, ".csv") == stem || strings.TrimSuffix(f, ".parquet") == stem || strings.HasPrefix(f, stem+"/") {
			out = append(out, f)
		}
	}
	return out
}

// compareRows checks a released CSV table against the core's: the same
// header and labels, the moe90 column as the same text, the counts to
// 1e-9 relative (the pipeline sums the estimate's terms in another order).
// It returns the number of cells and how many are not integers.
func compareRows(t *testing.T, name string, got, want []byte) (cells, nonInt int) {
	t.Helper()
	g, err := csv.NewReader(bytes.NewReader(got)).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	w, err := csv.NewReader(bytes.NewReader(want)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(g) != len(w) {
		t.Fatalf("%s: %d rows, want %d", name, len(g), len(w))
	}
	if !slices.Equal(g[0], w[0]) {
		t.Fatalf("%s: header %v, want %v", name, g[0], w[0])
	}
	k := len(w[0]) - 2 // the count column
	for i := 1; i < len(w); i++ {
		gr, wr := g[i], w[i]
		if !slices.Equal(gr[:k], wr[:k]) || gr[k+1] != wr[k+1] {
			t.Fatalf("%s row %d: %v, want %v (labels and moe90 alike)", name, i+1, gr, wr)
		}
		a, err := strconv.ParseFloat(gr[k], 64)
		if err != nil {
			t.Fatalf("%s row %d: %v", name, i+1, err)
		}
		b, _ := strconv.ParseFloat(wr[k], 64)
		if math.Abs(a-b) > 1e-9*math.Max(1, math.Abs(b)) {
			t.Fatalf("%s row %d: count %v, single machine %v", name, i+1, a, b)
		}
		if a != math.Round(a) {
			nonInt++
		}
	}
	return len(w) - 1, nonInt
}

// coreCSV is a table of the core's release as knowdp release writes it.
func coreCSV(t *testing.T, s *domain.Schema, tab release.Table) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := tab.WriteCSV(&b, s); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// compareWorkloadDir checks a directory release against the core's seeded
// release w: the exact listing, release.json byte for byte, every table's
// labels and moe90 exactly and counts to 1e-9 relative, or (exact) every
// table byte for byte. It returns the noisy tables' cells and how many are
// not integers.
func compareWorkloadDir(t *testing.T, out string, w *release.Release, exact bool) (cells, nonInt int) {
	t.Helper()
	files, stems, sidecar := wantDir(t, w, ".csv")
	checkListing(t, out, files)
	got, err := os.ReadFile(filepath.Join(out, "release.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, sidecar) {
		t.Fatalf("release.json\n%s\nwant\n%s", got, sidecar)
	}
	for i, tab := range w.Tables {
		g := joinShards(t, out, tableFiles(files, stems[i]))
		want := coreCSV(t, w.Schema, tab)
		if exact {
			if !bytes.Equal(g, want) {
				t.Fatalf("table %s differs from the single machine's (%d and %d bytes)", stems[i], len(g), len(want))
			}
			continue
		}
		n, k := compareRows(t, stems[i], g, want)
		if !tab.Public {
			cells, nonInt = cells+n, nonInt+k
		}
	}
	return cells, nonInt
}

// workloadTable is the fact table of the workload tests: d0 x d1 is
// 700 x 400 = 280,000 cells, two blocks (the second partial).
func workloadTable(t *testing.T, dir string) table {
	return writeTable(t, dir, []int{700, 400, 3, 5}, 20000, 2, 21)
}

// TestWorkloadMatchesCore runs seeded releases of several cuboids (ModeWorkload)
// on Prism in process and checks each reproduces knowdp release --seed:
// release.json byte for byte, the tables' labels and moe90 exactly and
// their counts to 1e-9 relative (the estimate's terms are summed block by
// block in another order, a few ulps apart), the files named as the CLI
// names them, nothing left beside --out.
func TestWorkloadMatchesCore(t *testing.T) {
	dir := t.TempDir()
	tb := workloadTable(t, dir)
	const big = "d0,d1" // 2 blocks
	inv := []string{"d2,d3", "d0,d3"}
	cases := []wcase{
		// d1 is a strict marginal of d0,d1; d2 is public (in d2,d3).
		{name: "laplace", cuboids: []string{big, "d1", "d2", "d1,d2"}, exact: inv, eps: 1},
		{name: "marginals", cuboids: []string{big, "d1", "d1,d2"}, exact: inv[:1], eps: 0.7, strategy: "marginals"},
		{name: "equal", cuboids: []string{big, "d1", "d2"}, exact: inv, eps: 2, split: "equal"},
		{name: "gaussian", cuboids: []string{big, "d1", "d1,d2"}, exact: inv, gauss: true, rho: 0.5, delta: 1e-6},
		{name: "weights", cuboids: []string{big, "d1", "d1,d2"}, weights: []float64{1, 3, 0.5}, exact: inv[1:], eps: 1},
		// d0,d1 (2 blocks) and d0 are public, marginals of the larger
		// invariant d0,d1,d2: their estimates are whole-table marginals,
		// combined block by block (Pair.Blocked).
		{name: "blocked", cuboids: []string{big, "d0", "d3", "d1,d3"}, exact: []string{"d0,d1,d2"}, eps: 1},
	}
	for k, wc := range cases {
		t.Run(wc.name, func(t *testing.T) {
			seed := uint64(100 + k)
			w := coreWorkload(t, tb, wc, seed)
			if wc.name == "laplace" && (!w.Tables[2].Public || w.Tables[0].Public || w.Tables[1].Public) {
				t.Fatalf("the case must have exactly d2 public: %+v", w.Metadata().Tables)
			}
			if wc.name == "blocked" && (!w.Tables[0].Public || !w.Tables[1].Public || w.Tables[2].Public) {
				t.Fatalf("the case must have d0,d1 and d0 public: %+v", w.Metadata().Tables)
			}
			if wc.strategy == "marginals" && w.Strategy != release.MeasureMarginals {
				t.Fatalf("strategy %v, want marginals", w.Strategy)
			}
			out := filepath.Join(dir, wc.name)
			spec := Spec{Files: tb.shards, Schema: tb.schema, Job: wc.job(), Out: out, Seeded: true, Seed: seed}
			res, err := Run(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			if res.Mode != ModeWorkload || !res.Directory || !res.Workload || res.Tables != len(wc.cuboids) {
				t.Fatalf("result %+v, want ModeWorkload, a directory of %d tables", res, len(wc.cuboids))
			}
			cells, nonInt := compareWorkloadDir(t, out, w, false)
			if wc.name == "blocked" {
				pl, err := NewPlan(Spec{Files: tb.shards, Schema: tb.schema, Job: wc.job(), Out: out + "-plan"})
				if err != nil {
					t.Fatal(err)
				}
				var blocked int
				for _, p := range pl.cfg.Pairs {
					if p.Blocked {
						blocked++
					}
				}
				if blocked < 2 {
					t.Fatalf("%d blocked marginals, want the two public tables'", blocked)
				}
			} else if nonInt < cells/2 {
				t.Fatalf("only %d of %d noisy cells are not integers: was noise added?", nonInt, cells)
			}
			files, _, sidecar := wantDir(t, w, ".csv")
			if !bytes.Equal(res.Sidecar, sidecar) || res.SidecarPath != filepath.Join(out, "release.json") || len(res.Files) != len(files) {
				t.Fatalf("result %+v", res)
			}
			checkNoLeftovers(t, out)
		})
	}
}

// TestCancelledRun cancels a workload release once its staging directory
// exists (the pipeline running) and checks Run fails, leaving neither
// --out nor any staging or scratch directory beside it.
func TestCancelledRun(t *testing.T) {
	dir := t.TempDir()
	tb := workloadTable(t, dir)
	for _, tc := range []struct {
		name string
		job  Job
	}{
		{"workload", Job{Cuboids: []string{"d0,d1", "d1"}, Exact: []string{"d2,d3"}, Epsilon: 1}},
		{"gather", Job{Cuboids: []string{"d0,d1", "d1"}, Epsilon: 1, KeepMeasurements: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, "cancelled-"+tc.name)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// Cancel as soon as a stage has written a file to the scratch
			// or staging directory: the pipeline is running.
			started := make(chan struct{})
			go func() {
				defer close(started)
				for ctx.Err() == nil {
					m, _ := filepath.Glob(filepath.Join(dir, ".cancelled-"+tc.name+".s*", "*"))
					for _, f := range m {
						if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() {
							cancel()
							return
						}
					}
					time.Sleep(time.Millisecond)
				}
			}()
			spec := Spec{Files: tb.shards, Schema: tb.schema, Job: tc.job, Out: out, Seeded: true, Seed: 1}
			if tc.job.KeepMeasurements {
				spec.Measurements = out + "-measurements.json"
			}
			res, err := Run(ctx, spec)
			<-started
			if err == nil {
				t.Fatalf("a cancelled release succeeded: %v", res.Files)
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v, want an error saying the release was stopped (context.Canceled)", err)
			}
			t.Log(err)
			// Give a worker still writing its last shard time to fail.
			time.Sleep(200 * time.Millisecond)
			if _, err := os.Lstat(out); err == nil {
				t.Fatal("a cancelled release left --out")
			}
			if _, err := os.Lstat(out + "-measurements.json"); err == nil {
				t.Fatal("a cancelled release wrote its measurements")
			}
			checkNoLeftovers(t, out)
		})
	}
}
