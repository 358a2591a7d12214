package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/knowdp/knowdp/domain"
	"github.com/parquet-go/parquet-go"
)

// The parity tests run the real knowdp CLI (built once from the core
// module) and knowdp-beam on the same data with the same flags and seed,
// and compare what they write: every table's rows, the privacy story, the
// noisy measurements and the exit codes.

var knowdpCLI struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// buildKnowdp builds the knowdp command of the core module (../../.. from
// this package) once per test binary, into a directory TestMain removes.
func buildKnowdp(t *testing.T) string {
	t.Helper()
	knowdpCLI.once.Do(func() {
		root, err := filepath.Abs(filepath.Join("..", "..", ".."))
		if err != nil {
			knowdpCLI.err = err
			return
		}
		if _, err := os.Stat(filepath.Join(root, "cmd", "knowdp")); err != nil {
			knowdpCLI.err = fmt.Errorf("the core module is not at %s: %w", root, err)
			return
		}
		if knowdpCLI.dir, err = os.MkdirTemp("", "knowdp-parity"); err != nil {
			knowdpCLI.err = err
			return
		}
		knowdpCLI.path = filepath.Join(knowdpCLI.dir, "knowdp")
		cmd := exec.Command("go", "build", "-o", knowdpCLI.path, "./cmd/knowdp")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			knowdpCLI.err = fmt.Errorf("go build ./cmd/knowdp: %v\n%s", err, out)
		}
	})
	if knowdpCLI.err != nil {
		t.Fatal(knowdpCLI.err)
	}
	return knowdpCLI.path
}

// knowdp runs the knowdp CLI and returns its exit code, stdout and stderr.
func knowdp(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runCommand(t, exec.Command(buildKnowdp(t), args...))
}

// geoSchemaJSON is a hierarchy (levels coarsest first, and each level's
// parents) of 3 regions > 8 states > 40 counties, crossed with sex and a
// 5-band age: 400 cells in the base cuboid.
func geoSchemaJSON() string {
	var counties, countyParent, stateParent []string
	for i := 1; i <= 40; i++ {
		counties = append(counties, fmt.Sprintf("%q", fmt.Sprintf("c%d", i)))
		countyParent = append(countyParent, fmt.Sprintf(`"c%d":"s%d"`, i, i%8+1))
	}
	for i := 1; i <= 8; i++ {
		stateParent = append(stateParent, fmt.Sprintf(`"s%d":"r%d"`, i, i%3+1))
	}
	return `{"dimensions":[
 {"name":"geo","levels":["region","state","county"],"values":[` + strings.Join(counties, ",") + `],
  "parents":{"state":{` + strings.Join(countyParent, ",") + `},"region":{` + strings.Join(stateParent, ",") + `}}},
 {"name":"sex","values":["F","M"]},
 {"name":"age","values":["0-17","18-34","35-64","65-79","80+"]}]}`
}

// bigSchemaJSON is flat, 700 x 400 = 280,000 cells: more than one block of
// 262,144, so knowdp-beam shards its base cuboid.
func bigSchemaJSON() string {
	vals := func(p string, n int) string {
		v := make([]string, n)
		for i := range v {
			v[i] = fmt.Sprintf(`"%s%d"`, p, i)
		}
		return strings.Join(v, ",")
	}
	return `{"dimensions":[{"name":"a","values":[` + vals("a", 700) + `]},{"name":"b","values":[` + vals("b", 400) + `]}]}`
}

// parityData are the inputs of the parity tests.
type parityData struct {
	geoSchema, geoFacts, bigSchema, bigFacts, workload, gaussWorkload, viewWorkload string
}

func writeParityData(t *testing.T) parityData {
	t.Helper()
	dir := t.TempDir()
	d := parityData{
		geoSchema: filepath.Join(dir, "geo.schema.json"), geoFacts: filepath.Join(dir, "geo.csv"),
		bigSchema: filepath.Join(dir, "big.schema.json"), bigFacts: filepath.Join(dir, "big.csv"),
		workload: filepath.Join(dir, "workload.json"), gaussWorkload: filepath.Join(dir, "gauss.json"),
		viewWorkload: filepath.Join(dir, "views.json"),
	}
	r := rand.New(rand.NewPCG(1, 2))
	ages := []string{"0-17", "18-34", "35-64", "65-79", "80+"}
	var geo, big strings.Builder
	geo.WriteString("geo,sex,age\n")
	for range 20000 {
		// Skewed, so that some cells are empty and some large.
		c := 1 + int(40*math.Pow(r.Float64(), 2))
		fmt.Fprintf(&geo, "c%d,%s,%s\n", c, []string{"F", "M"}[r.IntN(2)], ages[r.IntN(5)])
	}
	big.WriteString("a,b\n")
	for range 20000 {
		fmt.Fprintf(&big, "a%d,b%d\n", r.IntN(700), r.IntN(400))
	}
	for p, b := range map[string]string{
		d.geoSchema: geoSchemaJSON(), d.geoFacts: geo.String(), d.bigSchema: bigSchemaJSON(), d.bigFacts: big.String(),
		d.workload:      `[["sex"], {"cuboid": ["geo","age"], "weight": 2}, {"cuboid": ["sex","age"], "weight": 0.5}]`,
		d.gaussWorkload: `[["geo","sex"], {"cuboid": ["age"], "weight": 3}]`,
		d.viewWorkload:  `[["geo:state","sex"], {"cuboid": ["geo:region"], "weight": 4}]`,
	} {
		if err := os.WriteFile(p, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// releaseTable is a released table as text: its header and rows.
type releaseTable struct {
	header []string
	rows   [][]string
}

// readTableFile reads a CSV or Parquet table (by its extension); Parquet
// numbers are written as the CSV writes them (domain.FormatExact).
func readTableFile(t *testing.T, path string) releaseTable {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Ext(path) != ".parquet" {
		recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
		if err != nil || len(recs) == 0 {
			t.Fatalf("%s: %v (%d records)", path, err, len(recs))
		}
		return releaseTable{header: recs[0], rows: recs[1:]}
	}
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var tab releaseTable
	for _, c := range f.Schema().Fields() {
		tab.header = append(tab.header, c.Name())
	}
	r := parquet.NewReader(f)
	defer r.Close()
	buf := make([]parquet.Row, 256)
	for {
		n, err := r.ReadRows(buf)
		for _, row := range buf[:n] {
			var rec []string
			for _, v := range row {
				if v.Kind() == parquet.Double {
					rec = append(rec, domain.FormatExact(v.Double()))
				} else {
					rec = append(rec, v.String())
				}
			}
			tab.rows = append(tab.rows, rec)
		}
		if err != nil {
			break
		}
	}
	if int64(len(tab.rows)) != f.NumRows() {
		t.Fatalf("%s: read %d rows of %d", path, len(tab.rows), f.NumRows())
	}
	return tab
}

// readParts reads the shards of one table in order as one table; every
// shard has the same header.
func readParts(t *testing.T, paths []string) releaseTable {
	t.Helper()
	if len(paths) == 0 {
		t.Fatal("no shards")
	}
	var all releaseTable
	for i, p := range paths {
		tab := readTableFile(t, p)
		if i == 0 {
			all.header = tab.header
		} else if !slices.Equal(tab.header, all.header) {
			t.Fatalf("%s: header %q, the first shard's is %q", p, tab.header, all.header)
		}
		all.rows = append(all.rows, tab.rows...)
	}
	return all
}

// parts lists dir's part-NNNNN files, in order.
func parts(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "part-[0-9][0-9][0-9][0-9][0-9].*"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(m)
	for i, p := range m {
		if want := fmt.Sprintf("part-%05d", i); !strings.HasPrefix(filepath.Base(p), want+".") {
			t.Fatalf("%s: shards %v are not numbered from 0 without gaps", dir, m)
		}
	}
	return m
}

// releaseOutput is what a release wrote: its tables by their file name in
// the sidecar ("" for the only table of a single-table release), with a
// directory of shards "STEM/" named "STEM.csv" (or .parquet), and its
// sidecar with those names.
type releaseOutput struct {
	tables  map[string]releaseTable
	sidecar map[string]any
	// sharded lists the tables written as a directory of shards.
	sharded []string
	// rawSidecar is the sidecar as written; renamed says the file of a
	// table in sidecar is not the one written there.
	rawSidecar []byte
	renamed    bool
}

// readOutput reads the release written at out: a table file and its
// sidecar, or a directory with release.json.
func readOutput(t *testing.T, out string) releaseOutput {
	t.Helper()
	ro := releaseOutput{tables: map[string]releaseTable{}}
	st, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	side := strings.TrimSuffix(out, filepath.Ext(out)) + ".json"
	if st.IsDir() {
		side = filepath.Join(out, "release.json")
	}
	if ro.rawSidecar, err = os.ReadFile(side); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(ro.rawSidecar, &ro.sidecar); err != nil {
		t.Fatalf("%s: %v", side, err)
	}
	// The only table of a release is named by its output, which each
	// command was given its own name for.
	only := func() {
		if tabs, _ := ro.sidecar["tables"].([]any); len(tabs) == 1 {
			tabs[0].(map[string]any)["file"] = ""
		}
	}
	if !st.IsDir() {
		ro.tables[""] = readTableFile(t, out)
		only()
		return ro
	}
	if ps := parts(t, out); len(ps) > 0 {
		// The only table of a release, as shards.
		ro.tables[""] = readParts(t, ps)
		only()
		ro.renamed = true
		if len(ps) > 1 {
			ro.sharded = append(ro.sharded, "")
		}
		return ro
	}
	tabs, _ := ro.sidecar["tables"].([]any)
	if len(tabs) == 0 {
		t.Fatalf("%s: no part-NNNNN files and no tables in release.json", out)
	}
	for _, x := range tabs {
		m := x.(map[string]any)
		name, _ := m["file"].(string)
		if stem, ok := strings.CutSuffix(name, "/"); ok {
			ps := parts(t, filepath.Join(out, stem))
			if len(ps) < 2 {
				t.Fatalf("%s: a table of one block is sharded: %v", name, ps)
			}
			tab := readParts(t, ps)
			name = stem + filepath.Ext(ps[0])
			m["file"] = name
			ro.sharded = append(ro.sharded, name)
			ro.renamed = true
			ro.tables[name] = tab
			continue
		}
		ro.tables[name] = readTableFile(t, filepath.Join(out, name))
	}
	return ro
}

// compareTables checks that got has want's header and rows: labels equal,
// counts equal to 1e-9 relative, moe90 equal as text.
func compareTables(t *testing.T, name string, got, want releaseTable) {
	t.Helper()
	if !slices.Equal(got.header, want.header) {
		t.Fatalf("table %q: header %q, knowdp writes %q", name, got.header, want.header)
	}
	if len(got.rows) != len(want.rows) {
		t.Fatalf("table %q: %d rows, knowdp writes %d", name, len(got.rows), len(want.rows))
	}
	k := len(want.header) - 2 // count, then moe90
	if k < 0 || want.header[k] != "count" || want.header[k+1] != "moe90" {
		t.Fatalf("table %q: header %q does not end in count, moe90", name, want.header)
	}
	bad := 0
	for i := range want.rows {
		g, w := got.rows[i], want.rows[i]
		ok := len(g) == len(w) && slices.Equal(g[:k], w[:k]) && g[k+1] == w[k+1]
		if ok {
			gv, err1 := strconv.ParseFloat(g[k], 64)
			wv, err2 := strconv.ParseFloat(w[k], 64)
			ok = err1 == nil && err2 == nil && math.Abs(gv-wv) <= 1e-9*math.Max(1, math.Abs(wv))
		}
		if !ok {
			t.Errorf("table %q row %d: %q, knowdp writes %q", name, i+1, g, w)
			if bad++; bad == 5 {
				t.FailNow()
			}
		}
	}
}

// compareOutputs compares knowdp-beam's release (got) with knowdp's (want).
func compareOutputs(t *testing.T, got, want releaseOutput) {
	t.Helper()
	if len(got.tables) != len(want.tables) {
		t.Fatalf("%d tables %v, knowdp writes %d %v", len(got.tables), mapKeys(got.tables), len(want.tables), mapKeys(want.tables))
	}
	for name, w := range want.tables {
		g, ok := got.tables[name]
		if !ok {
			t.Fatalf("no table %q; tables %v", name, mapKeys(got.tables))
		}
		compareTables(t, name, g, w)
	}
	if !reflect.DeepEqual(got.sidecar, want.sidecar) {
		gb, _ := json.MarshalIndent(got.sidecar, "", "  ")
		wb, _ := json.MarshalIndent(want.sidecar, "", "  ")
		t.Errorf("sidecar (tables' files normalised)\n%s\nknowdp writes\n%s", gb, wb)
	}
	if !got.renamed && !bytes.Equal(got.rawSidecar, want.rawSidecar) {
		t.Errorf("sidecar not byte for byte knowdp's:\n%s\nknowdp writes\n%s", got.rawSidecar, want.rawSidecar)
	}
}

func mapKeys[V any](m map[string]V) []string {
	var k []string
	for x := range m {
		k = append(k, x)
	}
	slices.Sort(k)
	return k
}

// parityCase is a release both commands run with the same flags.
type parityCase struct {
	name string
	big  bool     // the 700 x 400 flat schema, else the geo hierarchy
	args []string // the release's flags, besides --data, --schema, --seed and --out
	// kout and bout name knowdp's and knowdp-beam's --out ("rel.csv" if
	// empty); bargs are flags knowdp-beam alone is given (--format parquet
	// for a directory of Parquet shards where knowdp writes rel.parquet).
	kout, bout string
	bargs      []string
	// measurements: both write --measurements, compared byte for byte.
	measurements bool
	// sharded lists the tables knowdp-beam must write as a directory of
	// shards (by their normalised names; "" for the only table).
	sharded []string
}

func TestParity(t *testing.T) {
	d := writeParityData(t)
	buildKnowdp(t)
	lap := []string{"--epsilon", "1"}
	gauss := []string{"--mechanism", "gaussian", "--rho", "0.5"}
	cat := func(xs ...[]string) []string { return slices.Concat(xs...) }
	cases := []parityCase{
		{name: "one cuboid laplace", args: cat(lap, []string{"--cuboid", "geo,sex", "--exact", "sex"})},
		{name: "one cuboid laplace as a directory", args: cat(lap, []string{"--cuboid", "geo,age"}), bout: "rel"},
		{name: "one cuboid gaussian", args: cat(gauss, []string{"--cuboid", "geo,age", "--exact", "", "--delta", "1e-5"})},
		{name: "base cuboid nonneg", args: []string{"--epsilon", "0.5", "--exact", "geo", "--nonneg", "--tol", "1e-8"}},
		{name: "one cuboid integer", args: cat(lap, []string{"--cuboid", "geo,age", "--exact", "age", "--integer"})},
		{name: "one cuboid sensitivity", args: cat(lap, []string{"--cuboid", "sex,age", "--sensitivity", "3"})},
		{name: "several cuboids", args: cat(lap, []string{"--cuboid", "geo,sex", "--cuboid", "sex,age", "--cuboid", "age", "--exact", ""}), kout: "rel", bout: "rel"},
		{name: "workload with weights", args: cat(lap, []string{"--workload", d.workload, "--exact", "sex"}), kout: "rel", bout: "rel"},
		{name: "workload and cuboids", args: cat(lap, []string{"--cuboid", "geo", "--workload", d.workload}), kout: "rel", bout: "rel"},
		{name: "strategy marginals", args: cat(lap, []string{"--cuboid", "geo,sex", "--cuboid", "geo,age", "--cuboid", "sex,age", "--strategy", "marginals"}), kout: "rel", bout: "rel"},
		{name: "strategy requested split equal", args: cat(lap, []string{"--cuboid", "geo,sex", "--cuboid", "age", "--strategy", "requested", "--split", "equal"}), kout: "rel", bout: "rel"},
		{name: "split equal", args: cat(lap, []string{"--cuboid", "geo,sex", "--cuboid", "sex,age", "--split", "equal"}), kout: "rel", bout: "rel"},
		{name: "workload sensitivity", args: cat(lap, []string{"--cuboid", "geo", "--cuboid", "sex", "--sensitivity", "4"}), kout: "rel", bout: "rel"},
		{name: "gaussian workload", args: []string{"--mechanism", "gaussian", "--rho", "0.3", "--delta", "1e-5", "--workload", d.gaussWorkload, "--exact", "sex"}, kout: "rel", bout: "rel"},
		{name: "workload nonneg", args: cat(lap, []string{"--cuboid", "geo,sex", "--cuboid", "sex,age", "--nonneg"}), kout: "rel", bout: "rel"},
		{name: "workload integer", args: cat(lap, []string{"--cuboid", "geo,sex", "--cuboid", "sex,age", "--exact", "", "--integer"}), kout: "rel", bout: "rel"},
		{name: "measurements", args: cat(lap, []string{"--cuboid", "geo,sex", "--cuboid", "geo,age", "--exact", "geo"}), kout: "rel", bout: "rel", measurements: true},
		{name: "gaussian measurements", args: cat(gauss, []string{"--workload", d.workload}), kout: "rel", bout: "rel", measurements: true},
		{name: "views", args: cat(lap, []string{"--cuboid", "geo:state,sex", "--cuboid", "geo:region"}), kout: "rel", bout: "rel"},
		{name: "views nonneg", args: cat(lap, []string{"--cuboid", "geo:state,sex", "--cuboid", "geo:region", "--nonneg"}), kout: "rel", bout: "rel"},
		{name: "views nonneg split spine", args: cat(lap, []string{"--cuboid", "geo", "--cuboid", "geo:region", "--split", "spine", "--nonneg"}), kout: "rel", bout: "rel"},
		{name: "one cuboid measurements", args: cat(lap, []string{"--cuboid", "geo,sex", "--exact", "sex"}), measurements: true},
		{name: "views measurements", args: cat(lap, []string{"--cuboid", "geo:state,sex", "--cuboid", "geo,age", "--exact", "geo:region"}), kout: "rel", bout: "rel", measurements: true},
		{name: "views integer", args: cat(lap, []string{"--cuboid", "geo:state,sex", "--cuboid", "geo:region", "--integer"}), kout: "rel", bout: "rel"},
		{name: "views gaussian", args: cat(gauss, []string{"--cuboid", "geo:state,sex", "--cuboid", "geo:region", "--cuboid", "geo,age"}), kout: "rel", bout: "rel"},
		{name: "views workload", args: cat(lap, []string{"--workload", d.viewWorkload, "--exact", "geo:region"}), kout: "rel", bout: "rel"},
		{name: "split spine", args: cat(lap, []string{"--cuboid", "geo", "--cuboid", "geo:state", "--cuboid", "geo:region", "--split", "spine"}), kout: "rel", bout: "rel"},
		{name: "one view as a single file", args: cat(lap, []string{"--cuboid", "geo:state,age"})},
		{name: "one view integer as a single file", args: cat(lap, []string{"--cuboid", "geo:state,age", "--exact", "geo:region", "--integer"})},
		{name: "level invariant", args: cat(lap, []string{"--cuboid", "geo,sex", "--exact", "geo:state"})},
		{name: "one cuboid parquet", args: cat(lap, []string{"--cuboid", "geo,sex"}), kout: "rel.parquet", bout: "rel", bargs: []string{"--format", "parquet"}},
		{name: "workload parquet", args: cat(lap, []string{"--cuboid", "geo,sex", "--cuboid", "age", "--format", "parquet"}), kout: "rel", bout: "rel"},
		// More than one block (262,144 cells): knowdp-beam shards the table.
		{name: "big cuboid as a directory", big: true, args: lap, bout: "rel", sharded: []string{""}},
		{name: "big cuboid as a file", big: true, args: cat(lap, []string{"--exact", "a"})},
		{name: "big cuboid integer", big: true, args: cat(lap, []string{"--exact", "a", "--integer"}), bout: "rel", sharded: []string{""}},
		{name: "big workload", big: true, args: cat(lap, []string{"--cuboid", "a,b", "--cuboid", "b"}), kout: "rel", bout: "rel", sharded: []string{"a-b.csv"}},
		{name: "big workload parquet", big: true, args: cat(gauss, []string{"--cuboid", "a,b", "--cuboid", "a", "--format", "parquet"}), kout: "rel", bout: "rel", sharded: []string{"a-b.parquet"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data, schema := d.geoFacts, d.geoSchema
			if tc.big {
				data, schema = d.bigFacts, d.bigSchema
			}
			dir := t.TempDir()
			kdir, bdir := filepath.Join(dir, "k"), filepath.Join(dir, "b")
			os.Mkdir(kdir, 0o755)
			os.Mkdir(bdir, 0o755)
			kout, bout := filepath.Join(kdir, cmpOr(tc.kout, "rel.csv")), filepath.Join(bdir, cmpOr(tc.bout, "rel.csv"))
			seed := strconv.Itoa(10 + i)
			common := []string{"release", "--data", data, "--schema", schema, "--seed", seed}
			kargs := cat(common, tc.args, []string{"--out", kout})
			bargs := cat(common, tc.args, tc.bargs, []string{"--out", bout})
			if tc.measurements {
				kargs = append(kargs, "--measurements", filepath.Join(kdir, "m.json"))
				bargs = append(bargs, "--measurements", filepath.Join(bdir, "m.json"))
			}
			kc, kstdout, kstderr := knowdp(t, kargs...)
			if kc != 0 {
				t.Fatalf("knowdp %q: exit %d\n%s\n%s", kargs, kc, kstdout, kstderr)
			}
			bc, bstdout, bstderr := knowdpBeam(t, bargs...)
			if bc != 0 {
				t.Fatalf("knowdp-beam %q: exit %d (knowdp 0)\n%s\n%s", bargs, bc, bstdout, bstderr)
			}
			if !strings.Contains(bstderr, "WARNING: --seed "+seed+" makes the noise predictable") || strings.Contains(bstdout, "WARNING") {
				t.Errorf("the seed's warning is not (only) on stderr:\nstdout:\n%s", bstdout)
			}
			got, want := readOutput(t, bout), readOutput(t, kout)
			compareOutputs(t, got, want)
			if !slices.Equal(got.sharded, tc.sharded) {
				t.Errorf("sharded tables %q, want %q", got.sharded, tc.sharded)
			}
			if tc.measurements {
				gm, err1 := os.ReadFile(filepath.Join(bdir, "m.json"))
				wm, err2 := os.ReadFile(filepath.Join(kdir, "m.json"))
				if err1 != nil || err2 != nil || !bytes.Equal(gm, wm) {
					t.Errorf("--measurements: %v %v; knowdp-beam wrote\n%.2000s\nknowdp\n%.2000s", err1, err2, gm, wm)
				}
			}
			if m, _ := filepath.Glob(filepath.Join(bdir, ".*")); len(m) != 0 {
				t.Errorf("temporaries left behind: %v", m)
			}
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestParityRefusals runs flag combinations that knowdp-beam refuses, as
// knowdp does or on its own, and checks the exit codes, that the message
// names the flag, the conventions of a usage error (stdout empty; "knowdp-beam
// release: ..." and a hint line on stderr) and that nothing is written.
func TestParityRefusals(t *testing.T) {
	d := writeParityData(t)
	lap := []string{"--epsilon", "1"}
	cat := func(xs ...[]string) []string { return slices.Concat(xs...) }
	existing, existingFile := filepath.Join(t.TempDir(), "existing"), filepath.Join(t.TempDir(), "file")
	os.Mkdir(existing, 0o755)
	os.WriteFile(existingFile, []byte("keep"), 0o644)
	tests := []struct {
		name string
		args []string
		out  string // "rel.csv" if empty
		// kcode and bcode are knowdp's and knowdp-beam's exit codes; want
		// is in knowdp-beam's message (and in knowdp's when it refuses).
		kcode, bcode int
		want         string
		kwant        string // knowdp's message where it differs
	}{
		{name: "infer domains", args: cat(lap, []string{"--infer-domains", "--dims", "geo,sex"}), kcode: 2, bcode: 2, want: "--infer-domains"},
		{name: "cell limit", args: cat(lap, []string{"--cell-limit", "100000"}), kcode: 0, bcode: 2, want: "--cell-limit"},
		{name: "csv format for a parquet file", args: cat(lap, []string{"--format", "csv"}), out: "rel.parquet", kcode: 2, bcode: 2, want: "--format csv does not match --out"},
		{name: "rho without gaussian", args: cat(lap, []string{"--rho", "0.5"}), kcode: 2, bcode: 2, want: "--rho"},
		{name: "nonneg and integer", args: cat(lap, []string{"--nonneg", "--integer"}), kcode: 2, bcode: 2, want: "--nonneg and --integer"},
		{name: "format does not match out", args: cat(lap, []string{"--format", "parquet"}), kcode: 2, bcode: 2, want: "--format parquet does not match --out"},
		{name: "bad format", args: cat(lap, []string{"--format", "xlsx"}), out: "rel", kcode: 2, bcode: 2, want: "xlsx"},
		{name: "bad split", args: cat(lap, []string{"--cuboid", "geo", "--cuboid", "sex", "--split", "fair"}), out: "rel", kcode: 2, bcode: 2, want: "--split"},
		{name: "bad strategy", args: cat(lap, []string{"--cuboid", "geo", "--cuboid", "sex", "--strategy", "all"}), out: "rel", kcode: 2, bcode: 2, want: "--strategy"},
		{name: "negative sensitivity", args: cat(lap, []string{"--sensitivity", "-1"}), kcode: 2, bcode: 2, want: "--sensitivity"},
		{name: "gaussian sensitivity", args: []string{"--mechanism", "gaussian", "--rho", "1", "--sensitivity", "2"}, kcode: 2, bcode: 2, want: "--sensitivity"},
		{name: "tol 0", args: cat(lap, []string{"--nonneg", "--tol", "0"}), kcode: 2, bcode: 2, want: "--tol must be a positive number, got 0"},
		{name: "tol negative", args: cat(lap, []string{"--tol", "-1"}), kcode: 2, bcode: 2, want: "--tol must be a positive number, got -1"},
		{name: "tol NaN", args: cat(lap, []string{"--cuboid", "sex", "--cuboid", "age", "--tol", "NaN"}), out: "rel", kcode: 2, bcode: 2, want: "--tol must be a positive number, got NaN"},
		{name: "tol infinite", args: cat(lap, []string{"--integer", "--tol", "+Inf"}), kcode: 2, bcode: 2, want: "--tol must be a positive number, got +Inf"},
		{name: "empty mechanism", args: cat(lap, []string{"--mechanism", ""}), kcode: 2, bcode: 2, want: `--mechanism: unknown mechanism ""`},
		{name: "empty split", args: cat(lap, []string{"--cuboid", "sex", "--cuboid", "age", "--split", ""}), out: "rel", kcode: 2, bcode: 2, want: "--split: "},
		{name: "empty strategy", args: cat(lap, []string{"--cuboid", "sex", "--cuboid", "age", "--strategy", ""}), out: "rel", kcode: 2, bcode: 2, want: "--strategy: "},
		{name: "missing workload", args: cat(lap, []string{"--workload", filepath.Join(t.TempDir(), "none.json")}), out: "rel", kcode: 1, bcode: 1, want: "--workload"},
		{name: "unknown level", args: cat(lap, []string{"--cuboid", "geo:city"}), kcode: 1, bcode: 1, want: `--cuboid "geo:city"`},
		{name: "existing directory", args: cat(lap, []string{"--cuboid", "geo", "--cuboid", "sex"}), out: existing, kcode: 2, bcode: 2, want: "--out " + existing + ": the directory exists; nothing is overwritten: give --force to replace it"},
		// knowdp writes one table as a file named --out.
		{name: "existing directory for one table", args: lap, out: existing, kcode: 2, bcode: 2, want: "--out " + existing + ": the directory exists; nothing is overwritten", kwant: "--out " + existing + ": is a directory"},
		{name: "existing file for several tables", args: cat(lap, []string{"--cuboid", "geo", "--cuboid", "sex"}), out: existingFile, kcode: 2, bcode: 2, want: "--out " + existingFile + " exists and is not a directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			kdir, bdir := filepath.Join(dir, "k"), filepath.Join(dir, "b")
			os.Mkdir(kdir, 0o755)
			os.Mkdir(bdir, 0o755)
			kout, bout := filepath.Join(kdir, cmpOr(tc.out, "rel.csv")), filepath.Join(bdir, cmpOr(tc.out, "rel.csv"))
			if filepath.IsAbs(tc.out) { // shared by both
				kout, bout = tc.out, tc.out
			}
			args := func(out, dir string) []string {
				a := cat([]string{"release", "--data", d.geoFacts, "--schema", d.geoSchema, "--seed", "1"}, tc.args, []string{"--out", out})
				for i := range a {
					if a[i] == "m.json" {
						a[i] = filepath.Join(dir, "m.json")
					}
				}
				return a
			}
			kc, kstdout, kstderr := knowdp(t, args(kout, kdir)...)
			if kwant := cmpOr(tc.kwant, tc.want); kc != tc.kcode || kc != 0 && !strings.Contains(kstderr, kwant) {
				t.Errorf("knowdp: exit %d, want %d with %q in stderr:\n%s\n%s", kc, tc.kcode, kwant, kstderr, kstdout)
			}
			bc, bstdout, bstderr := knowdpBeam(t, args(bout, bdir)...)
			if bc != tc.bcode || !strings.Contains(bstderr, "knowdp-beam release: ") || !strings.Contains(bstderr, tc.want) {
				t.Fatalf("knowdp-beam: exit %d, want %d with %q in stderr:\n%s\n%s", bc, tc.bcode, tc.want, bstderr, bstdout)
			}
			if bstdout != "" {
				t.Errorf("knowdp-beam printed to stdout on a failure:\n%s", bstdout)
			}
			if bc == 2 && !strings.HasSuffix(bstderr, "\nRun 'knowdp-beam release --help' for usage.\n") {
				t.Errorf("a usage error does not end with the hint line:\n%s", bstderr)
			}
			if bout == existing || bout == existingFile {
				if m, _ := os.ReadDir(existing); len(m) != 0 {
					t.Errorf("the existing directory was written into: %v", m)
				}
				if b, _ := os.ReadFile(existingFile); string(b) != "keep" {
					t.Errorf("the existing file was replaced: %q", b)
				}
				return
			}
			if m, _ := os.ReadDir(bdir); len(m) != 0 {
				t.Errorf("a refused release left %v behind", m)
			}
		})
	}
}

// TestParityJSON checks --json: the summary is valid JSON on stdout, its
// files are those written and its privacy story is the sidecar, and the
// story is knowdp's.
func TestParityJSON(t *testing.T) {
	d := writeParityData(t)
	for _, tc := range []struct {
		name   string
		data   []string
		args   []string
		out    string
		single bool
	}{
		{"one cuboid", []string{"--data", d.geoFacts, "--schema", d.geoSchema}, []string{"--cuboid", "geo,sex"}, "rel.csv", true},
		{"one cuboid as a directory", []string{"--data", d.bigFacts, "--schema", d.bigSchema}, nil, "rel", false},
		{"workload", []string{"--data", d.geoFacts, "--schema", d.geoSchema}, []string{"--workload", d.workload}, "rel", false},
		{"views", []string{"--data", d.geoFacts, "--schema", d.geoSchema}, []string{"--cuboid", "geo:state,sex", "--cuboid", "geo:region"}, "rel", false},
		{"sharded workload", []string{"--data", d.bigFacts, "--schema", d.bigSchema}, []string{"--cuboid", "a,b", "--cuboid", "a"}, "rel", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			kout, bout := filepath.Join(dir, "k-"+tc.out), filepath.Join(dir, "b-"+tc.out)
			args := slices.Concat([]string{"release"}, tc.data, []string{"--epsilon", "1", "--seed", "5", "--json"}, tc.args)
			kc, kstdout, kstderr := knowdp(t, append(args, "--out", kout)...)
			bc, bstdout, bstderr := knowdpBeam(t, append(args, "--out", bout)...)
			if kc != 0 || bc != 0 {
				t.Fatalf("knowdp exit %d: %s\nknowdp-beam exit %d: %s", kc, kstderr, bc, bstderr)
			}
			var got struct {
				Out     string          `json:"out"`
				Sidecar string          `json:"sidecar"`
				Files   []string        `json:"files"`
				Cells   int64           `json:"cells"`
				Privacy json.RawMessage `json:"privacy"`
			}
			var want struct {
				Privacy json.RawMessage `json:"privacy"`
			}
			dec := json.NewDecoder(strings.NewReader(bstdout))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&got); err != nil || dec.More() {
				t.Fatalf("stdout is not one JSON summary (%v):\n%s", err, bstdout)
			}
			if err := json.Unmarshal([]byte(kstdout), &want); err != nil {
				t.Fatalf("knowdp --json: %v\n%s", err, kstdout)
			}
			if got.Out != bout || len(got.Files) == 0 || len(got.Privacy) == 0 || got.Cells <= 0 {
				t.Fatalf("summary %s", bstdout)
			}
			side := filepath.Join(bout, "release.json")
			if tc.single {
				side = strings.TrimSuffix(bout, ".csv") + ".json"
				if !slices.Equal(got.Files, []string{bout, side}) || got.Sidecar != side {
					t.Errorf("files %q, sidecar %q; want %q and %q", got.Files, got.Sidecar, []string{bout, side}, side)
				}
			} else {
				var written []string
				filepath.WalkDir(bout, func(p string, e os.DirEntry, err error) error {
					if err == nil && !e.IsDir() {
						rel, _ := filepath.Rel(bout, p)
						written = append(written, rel)
					}
					return err
				})
				files := slices.Sorted(slices.Values(got.Files))
				if !slices.Equal(files, written) || got.Sidecar != side {
					t.Errorf("files %q, sidecar %q; written %q, %s", got.Files, got.Sidecar, written, side)
				}
			}
			sb, err := os.ReadFile(side)
			if err != nil {
				t.Fatal(err)
			}
			var p, s, k any
			json.Unmarshal(got.Privacy, &p)
			json.Unmarshal(sb, &s)
			json.Unmarshal(want.Privacy, &k)
			if !reflect.DeepEqual(p, s) {
				t.Errorf("privacy\n%s\nis not the sidecar\n%s", got.Privacy, sb)
			}
			normalise := func(v any) any {
				if m, ok := v.(map[string]any); ok {
					tabs, _ := m["tables"].([]any)
					for _, x := range tabs {
						if tm, ok := x.(map[string]any); ok {
							if f, ok := tm["file"].(string); ok && strings.HasSuffix(f, "/") {
								tm["file"] = strings.TrimSuffix(f, "/") + ".csv"
							}
							if len(tabs) == 1 {
								tm["file"] = "" // named after each command's own output
							}
						}
					}
				}
				return v
			}
			if !reflect.DeepEqual(normalise(p), normalise(k)) {
				t.Errorf("privacy\n%s\nknowdp --json prints\n%s", got.Privacy, want.Privacy)
			}
		})
	}
}

// TestParityParquetViews: tables at the levels of a hierarchy written as
// Parquet by both commands have the same rows and privacy story.
func TestParityParquetViews(t *testing.T) {
	d := writeParityData(t)
	dir := t.TempDir()
	args := []string{"release", "--data", d.geoFacts, "--schema", d.geoSchema, "--epsilon", "1", "--seed", "8",
		"--cuboid", "geo:state,sex", "--cuboid", "geo:region", "--integer", "--format", "parquet"}
	kOut, pqOut := filepath.Join(dir, "k"), filepath.Join(dir, "pq")
	if c, _, stderr := knowdp(t, append(args, "--out", kOut)...); c != 0 {
		t.Fatalf("knowdp: exit %d: %s", c, stderr)
	}
	if c, _, stderr := knowdpBeam(t, append(args, "--out", pqOut)...); c != 0 {
		t.Fatalf("knowdp-beam: exit %d: %s", c, stderr)
	}
	got, want := readOutput(t, pqOut), readOutput(t, kOut)
	if len(got.tables) != 2 {
		t.Fatalf("%d tables, want 2", len(got.tables))
	}
	for name := range got.tables {
		if !strings.HasSuffix(name, ".parquet") {
			t.Errorf("table file %q is not Parquet", name)
		}
	}
	compareOutputs(t, got, want)
}

// TestParityOneViewDirectory: the only table of a release in directory
// form is written as part-NNNNN files; release.json must name what is
// there.
func TestParityOneViewDirectory(t *testing.T) {
	d := writeParityData(t)
	out := filepath.Join(t.TempDir(), "rel")
	c, _, stderr := knowdpBeam(t, "release", "--data", d.geoFacts, "--schema", d.geoSchema, "--epsilon", "1", "--seed", "3",
		"--cuboid", "geo:state,sex", "--out", out)
	if c != 0 {
		t.Fatalf("exit %d: %s", c, stderr)
	}
	kout := filepath.Join(t.TempDir(), "rel.csv")
	if c, _, stderr := knowdp(t, "release", "--data", d.geoFacts, "--schema", d.geoSchema, "--epsilon", "1", "--seed", "3",
		"--cuboid", "geo:state,sex", "--out", kout); c != 0 {
		t.Fatalf("knowdp: exit %d: %s", c, stderr)
	}
	got, want := readOutput(t, out), readOutput(t, kout)
	compareTables(t, "", got.tables[""], want.tables[""])
	for _, x := range got.sidecar["tables"].([]any) {
		f := x.(map[string]any)["file"].(string)
		if m, _ := filepath.Glob(filepath.Join(out, strings.TrimSuffix(f, "/"))); len(m) == 0 {
			entries, _ := os.ReadDir(out)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Fatalf("release.json names the table's file %q, but the directory holds %q", f, names)
		}
	}
}

// TestParityConventions: help on stdout with exit 0 and every flag of
// knowdp release listed; an unknown flag exits 2 with the message and a
// hint on stderr, as knowdp's.
func TestParityConventions(t *testing.T) {
	kc, khelp, kstderr := knowdp(t, "release", "--help")
	bc, bhelp, bstderr := knowdpBeam(t, "release", "--help")
	if kc != 0 || bc != 0 || kstderr != "" || bstderr != "" {
		t.Fatalf("--help: knowdp exit %d stderr %q, knowdp-beam exit %d stderr %q", kc, kstderr, bc, bstderr)
	}
	n := 0
	for _, line := range strings.Split(khelp, "\n") {
		if !strings.HasPrefix(line, "  --") {
			continue
		}
		n++
		if !strings.Contains(bhelp, "\n"+line+"\n") {
			t.Errorf("knowdp release's flag %q is not in knowdp-beam release --help", line)
		}
	}
	if n < 20 {
		t.Fatalf("found %d flags in knowdp release --help:\n%s", n, khelp)
	}
	for _, args := range [][]string{{"release", "--bogus"}, {"release", "--data", "x", "--bogus", "--help"}} {
		kc, kout, kerr := knowdp(t, args...)
		bc, bout, berr := knowdpBeam(t, args...)
		if args[len(args)-1] == "--help" {
			// Help wins over an unknown flag in both.
			if kc != 0 || bc != 0 || !strings.Contains(bout, "Usage: knowdp-beam release") || berr != "" {
				t.Errorf("%q: knowdp exit %d, knowdp-beam exit %d, stderr %q", args, kc, bc, berr)
			}
			continue
		}
		if kc != 2 || bc != 2 || kout != "" || bout != "" {
			t.Errorf("%q: exit %d and %d, want 2; stdout %q and %q", args, kc, bc, kout, bout)
		}
		if want := "knowdp-beam release: flag provided but not defined: --bogus\nRun 'knowdp-beam release --help' for usage.\n"; berr != want {
			t.Errorf("knowdp-beam stderr %q, want %q", berr, want)
		}
		if !strings.Contains(kerr, "flag provided but not defined: --bogus") {
			t.Errorf("knowdp stderr %q", kerr)
		}
	}
}

// TestParityParquetFile: one table written as one Parquet file (the
// driver joins the shards) is byte for byte knowdp's, from the blocks
// pipeline (a cuboid of one block, corrected by the same sums in the same
// order as on one machine) and from the one worker (--integer), with
// --format given or taken from the name.
func TestParityParquetFile(t *testing.T) {
	d := writeParityData(t)
	for _, extra := range [][]string{
		{"--exact", "sex", "--cuboid", "geo,sex"},
		{"--exact", "geo:region", "--cuboid", "geo,age", "--integer", "--format", "parquet"},
		{"--cuboid", "geo:state,sex", "--integer"},
	} {
		dir := t.TempDir()
		args := append([]string{"release", "--data", d.geoFacts, "--schema", d.geoSchema, "--epsilon", "1", "--seed", "6"}, extra...)
		kout, bout := filepath.Join(dir, "k.parquet"), filepath.Join(dir, "b.parquet")
		if c, _, stderr := knowdp(t, append(args, "--out", kout)...); c != 0 {
			t.Fatalf("%v: knowdp: exit %d: %s", extra, c, stderr)
		}
		if c, _, stderr := knowdpBeam(t, append(args, "--out", bout)...); c != 0 {
			t.Fatalf("%v: knowdp-beam: exit %d: %s", extra, c, stderr)
		}
		for _, pair := range [][2]string{{kout, bout}, {strings.TrimSuffix(kout, ".parquet") + ".json", strings.TrimSuffix(bout, ".parquet") + ".json"}} {
			want, err := os.ReadFile(pair[0])
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(pair[1])
			// The sidecar names the table's file, which differs by name only.
			got = bytes.ReplaceAll(got, []byte(`"file": "b.parquet"`), []byte(`"file": "k.parquet"`))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%v: %s differs from knowdp's %s (%v)", extra, filepath.Base(pair[1]), filepath.Base(pair[0]), err)
			}
		}
	}
}
