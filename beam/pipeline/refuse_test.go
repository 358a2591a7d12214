package pipeline

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/tablefile"
	"github.com/knowdp/knowdp/privacy"
)

// parquetRows reads a Parquet table file: its column names, and per row
// the labels as text and the count and moe90.
func parquetRows(t *testing.T, path string) (names []string, labels [][]string, counts, moes []float64) {
	t.Helper()
	b := readFile(t, path)
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, c := range f.Schema().Fields() {
		names = append(names, c.Name())
	}
	k := len(names) - 2
	r := parquet.NewReader(f)
	defer r.Close()
	buf := make([]parquet.Row, 1024)
	for {
		n, err := r.ReadRows(buf)
		for _, row := range buf[:n] {
			var l []string
			for j := range k {
				l = append(l, row[j].String())
			}
			labels = append(labels, l)
			c := row[k].Double()
			if row[k].Kind() == parquet.Int64 { // an integer table
				c = float64(row[k].Int64())
			}
			counts, moes = append(counts, c), append(moes, row[k+1].Double())
		}
		if err != nil {
			break
		}
	}
	if int64(len(counts)) != f.NumRows() {
		t.Fatalf("%s: read %d of %d rows", path, len(counts), f.NumRows())
	}
	return names, labels, counts, moes
}

// compareParquet checks the Parquet shards of a table against the same
// table as CSV (the core's): the same columns, labels and moe90 exactly,
// counts to tol relative.
func compareParquet(t *testing.T, dir string, files []string, wantCSV []byte, tol float64) {
	t.Helper()
	var names []string
	var labels [][]string
	var counts, moes []float64
	for i, f := range files {
		n, l, c, m := parquetRows(t, filepath.Join(dir, f))
		if i > 0 && strings.Join(n, ",") != strings.Join(names, ",") {
			t.Fatalf("%s: columns %v, want %v", f, n, names)
		}
		names, labels, counts, moes = n, append(labels, l...), append(counts, c...), append(moes, m...)
	}
	lines := strings.Split(strings.TrimSuffix(string(wantCSV), "\n"), "\n")
	if strings.Join(names, ",") != lines[0] {
		t.Fatalf("columns %v, want %s", names, lines[0])
	}
	if len(counts) != len(lines)-1 {
		t.Fatalf("%d rows, want %d", len(counts), len(lines)-1)
	}
	for i, line := range lines[1:] {
		f := strings.Split(line, ",")
		k := len(f) - 2
		if strings.Join(labels[i], ",") != strings.Join(f[:k], ",") || domain.FormatExact(moes[i]) != f[k+1] {
			t.Fatalf("row %d: %v moe90 %v, want %s", i+2, labels[i], moes[i], line)
		}
		w, err := strconv.ParseFloat(f[k], 64)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(counts[i]-w) > tol*math.Max(1, math.Abs(w)) {
			t.Fatalf("row %d: count %v, want %v", i+2, counts[i], w)
		}
	}
}

// TestParquetDirectory releases as a directory of Parquet shards
// (--format parquet): a workload (ModeWorkload) with a 2-block table and
// an --integer cuboid of 2 blocks (ModeGather), checked against the
// single machine's tables and release.json naming the Parquet files.
func TestParquetDirectory(t *testing.T) {
	dir := t.TempDir()
	tb := writeTable(t, dir, []int{700, 400, 3}, 8000, 2, 41)

	wc := wcase{cuboids: []string{"d0,d1", "d1", "d1,d2"}, exact: []string{"d2"}, eps: 1}
	w := coreWorkload(t, tb, wc, 17)
	out := filepath.Join(dir, "wl")
	job := wc.job()
	job.Format = "parquet"
	res, err := Run(context.Background(), Spec{Files: tb.shards, Schema: tb.schema, Job: job, Out: out, Seeded: true, Seed: 17})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != ModeWorkload {
		t.Fatalf("mode %d, want ModeWorkload", res.Mode)
	}
	files, stems, sidecar := wantDir(t, w, ".parquet")
	if !slicesContain(files, "d0-d1/part-00001.parquet") || !slicesContain(files, "d1.parquet") {
		t.Fatalf("files %v: want d0-d1/ of 2 shards and d1.parquet", files)
	}
	checkListing(t, out, files)
	if got := readFile(t, filepath.Join(out, "release.json")); !bytes.Equal(got, sidecar) {
		t.Fatalf("release.json\n%s\nwant\n%s", got, sidecar)
	}
	for i, tab := range w.Tables {
		// The estimate's terms are summed in another order: 1e-9 relative.
		compareParquet(t, out, tableFiles(files, stems[i]), coreCSV(t, tb.schema, tab), 1e-9)
	}

	c := parseCuboid(t, tb.schema, "d0,d1")
	eps, _ := privacy.NewEpsilon(1)
	rel := coreCuboid(t, tb, oneSpec{Epsilon: eps, Cuboid: c, Integer: true, Tol: 1e-6}, 18)
	out = filepath.Join(dir, "int")
	spec := seeded(cuboidSpec(tb, c, nil, eps, out), 18)
	spec.Job.Integer, spec.Job.Format = true, "parquet"
	if res, err = Run(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	parts := []string{"part-00000.parquet", "part-00001.parquet"}
	checkListing(t, out, append(parts, "release.json"))
	if res.Mode != ModeGather {
		t.Fatalf("mode %d, want ModeGather", res.Mode)
	}
	// The same core code on one worker: the counts exactly.
	compareParquet(t, out, parts, releaseCSV(t, rel), 0)
	if got, want := readFile(t, filepath.Join(out, "release.json")), sidecarJSON(t, storyOf(rel, out, tablefile.Parquet)); !bytes.Equal(got, want) {
		t.Fatalf("release.json\n%s\nwant\n%s", got, want)
	}
}

func slicesContain(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// TestRefusals checks releases refused before anything runs, as usage
// errors where the flags are at fault, with nothing written.
func TestRefusals(t *testing.T) {
	dir := t.TempDir()
	tb := writeTable(t, dir, []int{6, 5, 4}, 100, 1, 42)
	existing := filepath.Join(dir, "exists")
	if err := os.Mkdir(existing, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		spec  Spec
		usage bool
		want  string
	}{
		{"csv format for a parquet file", Spec{Job: Job{Cuboids: []string{"d0,d1"}, Epsilon: 1, Format: "csv"}, Out: "t.PARQUET"}, true, "--format csv does not match --out"},
		{"format mismatch", Spec{Job: Job{Epsilon: 1, Format: "parquet"}, Out: "t.csv"}, true, "--format parquet does not match --out"},
		{"existing dir", Spec{Job: Job{Cuboids: []string{"d0", "d1"}, Epsilon: 1}, Out: existing}, true, "the directory exists; nothing is overwritten: give --force to replace it"},
		{"existing dir one cuboid", Spec{Job: Job{Epsilon: 1, Integer: true}, Out: existing}, true, "the directory exists; nothing is overwritten: give --force to replace it"},
		{"measurements path one cuboid", Spec{Job: Job{Epsilon: 1}, Out: "m", Measurements: "m.json"}, true, "--measurements: the job does not keep its measurements"},
		{"nonneg and integer", Spec{Job: Job{Cuboids: []string{"d0", "d1"}, Epsilon: 1, NonNeg: true, Integer: true}, Out: "x"}, true, "--nonneg and --integer exclude each other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec
			if spec.Schema == nil {
				spec.Files, spec.Schema = tb.shards, tb.schema
			}
			if !filepath.IsAbs(spec.Out) {
				spec.Out = filepath.Join(dir, spec.Out)
			}
			before := listDir(t, dir)
			_, err := Run(context.Background(), spec)
			if err == nil || errors.Is(err, ErrUsage) != tc.usage || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error (usage %v) saying %q", err, tc.usage, tc.want)
			}
			if after := listDir(t, dir); strings.Join(after, "\n") != strings.Join(before, "\n") {
				t.Fatalf("a refused release changed %s:\n%v\nnow\n%v", dir, before, after)
			}
			t.Log(err)
		})
	}
}

// TestWorkerMemoryRefused: on a cluster a release computed on one worker
// (here --integer) that would need more than --worker-memory is refused
// before anything runs, naming the memory it would need in GB; with
// enough worker memory the same release is planned.
func TestWorkerMemoryRefused(t *testing.T) {
	dir := t.TempDir()
	tb := writeTable(t, dir, []int{600, 450, 2}, 100, 1, 43)
	old := flag.Lookup("runner").Value.String()
	if err := flag.Set("runner", "universal"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { flag.Set("runner", old) })
	c := parseCuboid(t, tb.schema, "d0,d1")
	spec := cuboidSpec(tb, c, []domain.Cuboid{parseCuboid(t, tb.schema, "d2")}, privacy.Epsilon{}, filepath.Join(dir, "big"))
	spec.Job.Epsilon, spec.Job.Integer = 1, true
	// The counts of d0,d1 and d2 and 6 copies of d0,d1 at 8 bytes a cell.
	need := cube.ReleaseMemory(tb.schema, []domain.Cuboid{c, parseCuboid(t, tb.schema, "d2")}, []domain.Cuboid{c}, true)
	if want := int64(8 * (270000 + 2 + 6*270000)); need != want {
		t.Fatalf("cube.ReleaseMemory = %d, want %d", need, want)
	}
	spec.WorkerMemory = need / 2
	_, err := Run(context.Background(), spec)
	gb := fmt.Sprintf("about %.3g GB", float64(need)/1e9)
	if err == nil || !strings.Contains(err.Error(), gb) || !strings.Contains(err.Error(), "--worker-memory") || !strings.Contains(err.Error(), "on one worker") {
		t.Fatalf("got %v, want a refusal naming %q and --worker-memory", err, gb)
	}
	t.Log(err)
	if _, err := os.Lstat(spec.Out); err == nil {
		t.Fatal("the refused release created --out")
	}
	checkNoLeftovers(t, spec.Out)
	spec.WorkerMemory = need
	pl, err := NewPlan(spec)
	if err != nil || pl.Mode() != ModeGather {
		t.Fatalf("with %d bytes of worker memory: %v", need, err)
	}
}
