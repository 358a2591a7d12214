package pipeline

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/tablefile"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/release"
	"github.com/knowdp/knowdp/sidecar"
	"github.com/knowdp/knowdp/source"
)

func TestMain(m *testing.M) {
	flag.Parse()
	beam.Init()
	os.Exit(m.Run())
}

// table is a synthetic fact table written as CSV shards, and as one file
// for the single-machine release.
type table struct {
	schema *domain.Schema
	shards []string
	whole  string
}

// writeTable writes rows random rows over sizes (dimension i has values
// "d<i>_<j>") in shards files, with the columns in reverse schema order and
// an extra column, which the readers must ignore.
func writeTable(t testing.TB, dir string, sizes []int, rows, shards int, seed uint64) table {
	t.Helper()
	dims := make([]domain.Dimension, len(sizes))
	for i, n := range sizes {
		dims[i].Name = fmt.Sprintf("d%d", i)
		for j := range n {
			dims[i].Values = append(dims[i].Values, fmt.Sprintf("d%d_%d", i, j))
		}
	}
	s, err := domain.NewSchema(dims)
	if err != nil {
		t.Fatal(err)
	}
	var header []string
	for i := len(sizes) - 1; i >= 0; i-- {
		header = append(header, dims[i].Name)
	}
	header = append(header, "note")
	tb := table{schema: s, whole: filepath.Join(dir, "whole.csv")}
	wf, err := os.Create(tb.whole)
	if err != nil {
		t.Fatal(err)
	}
	ww := bufio.NewWriter(wf)
	fmt.Fprintln(ww, strings.Join(header, ","))
	rng := rand.New(rand.NewPCG(seed, 1))
	for k := range shards {
		name := filepath.Join(dir, fmt.Sprintf("shard-%d.csv", k))
		tb.shards = append(tb.shards, name)
		f, err := os.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w := bufio.NewWriter(f)
		fmt.Fprintln(w, strings.Join(header, ","))
		for range rows / shards {
			var rec []string
			for i := len(sizes) - 1; i >= 0; i-- {
				// Skewed, so that some cells stay empty.
				j := int(float64(sizes[i]) * math.Pow(rng.Float64(), 2))
				rec = append(rec, dims[i].Values[j])
			}
			rec = append(rec, "x")
			line := strings.Join(rec, ",")
			fmt.Fprintln(w, line)
			fmt.Fprintln(ww, line)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if err := ww.Flush(); err != nil {
		t.Fatal(err)
	}
	wf.Close()
	return tb
}

// flagDims is a cuboid as a flag names it: "d0,d2".
func flagDims(s *domain.Schema, c domain.Cuboid) string {
	return strings.Join(s.ViewNames(domain.ViewOf(c)), ",")
}

// cuboidSpec is the Spec of knowdp release --data <shards> --cuboid c
// --exact e... --epsilon eps --out out: one cuboid, Laplace noise.
func cuboidSpec(tb table, c domain.Cuboid, exact []domain.Cuboid, eps privacy.Epsilon, out string) Spec {
	j := Job{Cuboids: []string{flagDims(tb.schema, c)}, Epsilon: eps.Float64()}
	for _, e := range exact {
		j.Exact = append(j.Exact, flagDims(tb.schema, e))
	}
	// Force: the tests release into the same path again and again.
	return Spec{Files: tb.shards, Schema: tb.schema, Job: j, Out: out, Force: true}
}

// seeded is spec with --seed seed.
func seeded(spec Spec, seed uint64) Spec {
	spec.Seeded, spec.Seed = true, seed
	return spec
}

// gaussian is spec with --mechanism gaussian --rho rho --delta delta.
func gaussian(spec Spec, rho privacy.Rho, delta float64) Spec {
	spec.Job.Mechanism, spec.Job.Epsilon, spec.Job.Rho, spec.Job.Delta = "gaussian", 0, rho.Float64(), delta
	return spec
}

// metadata is a single table's sidecar as the release wrote it.
func metadata(t *testing.T, res *Result) sidecar.Metadata {
	t.Helper()
	var m sidecar.Metadata
	if err := json.Unmarshal(res.Sidecar, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// coreRelease is the single-machine seeded release of the same table.
func coreRelease(t *testing.T, tb table, c domain.Cuboid, exact []domain.Cuboid, eps privacy.Epsilon, seed uint64) *release.Release {
	t.Helper()
	return coreReleaseSpec(t, tb, oneSpec{Epsilon: eps, Exact: exact, Cuboid: c}, seed)
}

// coreReleaseSpec is coreRelease for any spec (a Gaussian one).
func coreReleaseSpec(t *testing.T, tb table, spec oneSpec, seed uint64) *release.Release {
	t.Helper()
	cb, err := cubeFromCSV(context.Background(), tb.whole, tb.schema, cube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rel, err := releaseOne(context.Background(), cb, spec, noise.NewSeeded(seed))
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

// readCounts reads the count column of a release CSV and checks its label
// columns run over the cuboid's cells in row-major order and its moe90
// column holds moe.
func readCounts(t *testing.T, path string, s *domain.Schema, c domain.Cuboid, moe string) []float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if got, want := lines[0], strings.Join(append(s.ViewNames(domain.ViewOf(c)), "count", "moe90"), ","); got != want {
		t.Fatalf("header %q, want %q", got, want)
	}
	dims := c.Dims()
	idx := make([]int, len(dims))
	var out []float64
	for n, line := range lines[1:] {
		f := strings.Split(line, ",")
		for k, d := range dims {
			if f[k] != s.Dim(d).Values[idx[k]] {
				t.Fatalf("row %d: %s = %q, want %q", n+2, s.Dim(d).Name, f[k], s.Dim(d).Values[idx[k]])
			}
		}
		if len(f) != len(dims)+2 || f[len(dims)+1] != moe {
			t.Fatalf("row %d: %q: want %d label columns, the count and moe90 %s", n+2, line, len(dims), moe)
		}
		v, err := strconv.ParseFloat(f[len(dims)], 64)
		if err != nil {
			t.Fatalf("row %d: %v", n+2, err)
		}
		out = append(out, v)
		for k := len(idx) - 1; k >= 0; k-- {
			idx[k]++
			if idx[k] < s.Size(dims[k]) {
				break
			}
			idx[k] = 0
		}
	}
	return out
}

// compare checks the pipeline's release against the single-machine one: the
// same counts to 1e-9 relative and the same privacy story.
func compare(t *testing.T, got string, want *release.Release) {
	t.Helper()
	tab := want.Tables[0]
	counts := readCounts(t, got, want.Schema, tab.Cuboid, domain.FormatExact(tab.CellMOE90()))
	if len(counts) != len(tab.Counts) {
		t.Fatalf("%d cells, want %d", len(counts), len(tab.Counts))
	}
	var noisy int
	for i, v := range counts {
		w := tab.Counts[i]
		if math.Abs(v-w) > 1e-9*math.Max(1, math.Abs(w)) {
			t.Fatalf("cell %d: pipeline %v, single-machine release %v", i, v, w)
		}
		if v != math.Round(v) {
			noisy++
		}
	}
	if noisy < len(counts)/2 {
		t.Fatalf("only %d of %d counts are not integers: was noise added?", noisy, len(counts))
	}
	side, err := os.ReadFile(strings.TrimSuffix(got, ".csv") + ".json")
	if err != nil {
		t.Fatal(err)
	}
	wantMeta, err := json.MarshalIndent(storyOf(want, got, tablefile.CSV), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if string(side) != string(wantMeta)+"\n" {
		t.Fatalf("sidecar\n%s\nwant\n%s", side, wantMeta)
	}
}

// TestSeededMatchesCore runs the pipeline on Prism in process over 3 shards
// of a 1,050,000-cell cube (5 blocks, the last one partial) with two
// overlapping invariants, and checks it reproduces the single-machine
// seeded release.
func TestSeededMatchesCore(t *testing.T) {
	dir := t.TempDir()
	tb := writeTable(t, dir, []int{100, 105, 100}, 150000, 3, 1)
	c := domain.Base(3)
	exact := []domain.Cuboid{0b011, 0b110, 0b011}
	eps, _ := privacy.NewEpsilon(0.5)
	want := coreRelease(t, tb, c, exact, eps, 42)
	out := filepath.Join(dir, "beam.csv")
	res, err := Run(context.Background(), seeded(cuboidSpec(tb, c, exact, eps, out), 42))
	if err != nil {
		t.Fatal(err)
	}
	if m := metadata(t, res); res.Cells != 1050000 || res.Mode != ModeCuboid || !m.Seeded || m.Private {
		t.Fatalf("result %+v", res)
	}
	compare(t, out, want)
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".beam.csv*"))
	if len(leftovers) > 0 {
		t.Fatalf("temporary files left behind: %v", leftovers)
	}
}

// TestPortableRunner submits the pipeline to a Prism job server started as
// its own process, through the portable runner, as for a cluster.
func TestPortableRunner(t *testing.T) {
	dir := t.TempDir()
	useJobServer(t, dir)

	tb := writeTable(t, dir, []int{60, 70, 80}, 30000, 2, 2)
	c := domain.Cuboid(0b101)
	exact := []domain.Cuboid{0b001, 0b100}
	eps, _ := privacy.NewEpsilon(2)
	want := coreRelease(t, tb, domain.Base(3), exact, eps, 7)
	out := filepath.Join(dir, "portable.csv")
	if _, err := Run(context.Background(), seeded(cuboidSpec(tb, domain.Base(3), exact, eps, out), 7)); err != nil {
		t.Fatal(err)
	}
	compare(t, out, want)
	// A 2-D cuboid of the same table: one block, noised from the root
	// generator itself.
	want = coreRelease(t, tb, c, exact, eps, 7)
	if _, err := Run(context.Background(), seeded(cuboidSpec(tb, c, exact, eps, out), 7)); err != nil {
		t.Fatal(err)
	}
	compare(t, out, want)
	// A Gaussian (zCDP) release of the base cuboid: 2 blocks.
	rho, _ := privacy.NewRho(0.5)
	want = coreReleaseSpec(t, tb, oneSpec{Mechanism: release.MechanismGaussian, Rho: rho, Delta: 1e-6, Exact: exact, Cuboid: domain.Base(3)}, 7)
	if _, err := Run(context.Background(), gaussian(seeded(cuboidSpec(tb, domain.Base(3), exact, eps, out), 7), rho, 1e-6)); err != nil {
		t.Fatal(err)
	}
	compare(t, out, want)

	// A workload (ModeWorkload) with the base cuboid, 2 blocks, among its
	// tables: the stages after the count, and the side inputs of the
	// tables' estimates, through the job server.
	wc := wcase{cuboids: []string{"d0,d1,d2", "d0,d2", "d1"}, exact: []string{"d0", "d1,d2"}, eps: 1}
	w := coreWorkload(t, tb, wc, 7)
	wout := filepath.Join(dir, "portable-workload")
	res, err := Run(context.Background(), Spec{Files: tb.shards, Schema: tb.schema, Job: wc.job(), Out: wout, Seeded: true, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != ModeWorkload {
		t.Fatalf("mode %d, want ModeWorkload", res.Mode)
	}
	if cells, nonInt := compareWorkloadDir(t, wout, w, false); nonInt < cells/2 {
		t.Fatalf("only %d of %d noisy cells are not integers: was noise added?", nonInt, cells)
	}
	checkNoLeftovers(t, wout)

	// An --integer cuboid (ModeGather): the counts gathered on one worker
	// of the job server, the same table and sidecar as the single machine.
	c2 := parseCuboid(t, tb.schema, "d0,d2")
	rel := coreCuboid(t, tb, oneSpec{Epsilon: eps, Exact: exact[:1], Cuboid: c2, Integer: true, Tol: 1e-6}, 7)
	iout := filepath.Join(dir, "portable-integer.csv")
	ispec := seeded(cuboidSpec(tb, c2, exact[:1], eps, iout), 7)
	ispec.Job.Integer = true
	if res, err = Run(context.Background(), ispec); err != nil {
		t.Fatal(err)
	}
	if res.Mode != ModeGather {
		t.Fatalf("mode %d, want ModeGather", res.Mode)
	}
	if got, want := readFile(t, iout), releaseCSV(t, rel); !bytes.Equal(got, want) {
		t.Fatalf("integer table differs from the single machine's (%d and %d bytes)", len(got), len(want))
	}
	if got, want := readFile(t, strings.TrimSuffix(iout, ".csv")+".json"), sidecarJSON(t, storyOf(rel, iout, tablefile.CSV)); !bytes.Equal(got, want) {
		t.Fatalf("sidecar\n%s\nwant\n%s", got, want)
	}
}

// useJobServer builds Prism's job server, starts it as a process of its
// own on free ports, and points Beam's flags at it (--runner=universal,
// LOOPBACK: the SDK worker runs in this process, the runner in the other)
// until the test ends.
func useJobServer(t testing.TB, dir string) {
	t.Helper()
	prism := filepath.Join(dir, "prism")
	build := exec.Command("go", "build", "-o", prism, "github.com/apache/beam/sdks/v2/go/cmd/prism")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the Prism job server: %v\n%s", err, out)
	}
	jobPort, webPort := freePort(t), freePort(t)
	srv := exec.Command(prism, "-job_port", strconv.Itoa(jobPort), "-web_port", strconv.Itoa(webPort), "-serve_http=false")
	srv.Stdout, srv.Stderr = os.Stderr, os.Stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Process.Kill()
		srv.Wait()
	})
	endpoint := "localhost:" + strconv.Itoa(jobPort)
	waitListening(t, endpoint)
	for name, v := range map[string]string{"runner": "universal", "endpoint": endpoint, "environment_type": "LOOPBACK"} {
		old := flag.Lookup(name).Value.String()
		if err := flag.Set(name, v); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { flag.Set(name, old) })
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "localhost:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitListening(t testing.TB, addr string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the Prism job server did not listen on %s within a minute", addr)
}

// TestEmptyBlocksGetNoise releases a table whose rows all fall in the
// first block of a 2-block cuboid: the second block, which no row reaches,
// must come out of the domain stage and be noised like the first, as in the
// single-machine release.
func TestEmptyBlocksGetNoise(t *testing.T) {
	dir := t.TempDir()
	tb := writeTable(t, dir, []int{60, 70, 80}, 0, 1, 4)
	var b strings.Builder
	b.WriteString("d2,d1,d0,note\n")
	for i := range 200 {
		fmt.Fprintf(&b, "d2_%d,d1_%d,d0_0,x\n", i%80, i%70)
	}
	for _, p := range []string{tb.shards[0], tb.whole} {
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	exact := []domain.Cuboid{0b010}
	eps, _ := privacy.NewEpsilon(1)
	want := coreRelease(t, tb, domain.Base(3), exact, eps, 5)
	if Blocks(len(want.Tables[0].Counts)) != 2 {
		t.Fatalf("%d blocks, want 2", Blocks(len(want.Tables[0].Counts)))
	}
	out := filepath.Join(dir, "empty.csv")
	if _, err := Run(context.Background(), seeded(cuboidSpec(tb, domain.Base(3), exact, eps, out), 5)); err != nil {
		t.Fatal(err)
	}
	compare(t, out, want)
}

// TestUnseededIsPrivate checks that without a seed the sidecar says the
// release is private and the noise is fresh: two runs on the same table
// differ in almost every cell.
func TestUnseededIsPrivate(t *testing.T) {
	dir := t.TempDir()
	tb := writeTable(t, dir, []int{20, 30, 40}, 2000, 2, 6)
	eps, _ := privacy.NewEpsilon(1)
	var runs [][]float64
	for k := range 2 {
		out := filepath.Join(dir, fmt.Sprintf("u%d.csv", k))
		res, err := Run(context.Background(), cuboidSpec(tb, domain.Base(3), []domain.Cuboid{1}, eps, out))
		if err != nil {
			t.Fatal(err)
		}
		if m := metadata(t, res); m.Seeded || !m.Private || m.Guarantee != privacy.GuaranteeUnconditional {
			t.Fatalf("unseeded release labelled %+v", m)
		}
		plan, err := release.NewPlan(tb.schema, oneSpec{Epsilon: eps, Cuboid: domain.Base(3), Exact: []domain.Cuboid{1}}.release())
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, readCounts(t, out, tb.schema, domain.Base(3), domain.FormatExact(plan.Cuboid().CellMOE90())))
	}
	same := 0
	for i := range runs[0] {
		if runs[0][i] == runs[1][i] {
			same++
		}
	}
	// Laplace noise of scale at least 1 on a grid 2^-20 of it: two
	// independent draws coincide with probability about 1e-6 per cell.
	if same > len(runs[0])/100 {
		t.Fatalf("%d of %d cells equal in two unseeded runs", same, len(runs[0]))
	}
}

// cubeFromCSV counts a CSV fact table into a cube over s (package cube
// reads no files itself).
func cubeFromCSV(ctx context.Context, path string, s *domain.Schema, opt cube.Options) (*cube.Cube, error) {
	t, err := source.OpenCSV(path)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	return cube.Build(ctx, t, s, opt)
}
