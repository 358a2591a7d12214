package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// TestErrorStyle checks that every error reads "knowdp CMD [SUB]: problem"
// with the name of the (sub)command that failed, usage errors and file
// errors alike, never a doubled prefix; that a missing or unknown
// subcommand is reported in one wording by every command that has
// subcommands; and that an output into a missing directory names the flag.
func TestErrorStyle(t *testing.T) {
	dir := t.TempDir()
	data, schema := repoFile("data/arrests.csv"), repoFile("data/arrests.schema.json")
	none := filepath.Join(dir, "none.csv")
	nodir := filepath.Join(dir, "nodir")
	refineTD := repoFile("refine/testdata") + "/"
	dxArgs := []string{"--universe", none, "--metric", "euclidean:scale=1", "--queries", none, "--histogram", none}
	edges := writeTemp(t, dir, "edges.csv", "u,v\n0,1\n")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // the start of stderr
	}{
		{"release: no doubled prefix", []string{"release", "--data", data, "--schema", schema, "--exact", "year", "--exact", "colour,sex",
			"--epsilon", "1", "--cuboid", "year,colour,sex", "--sensitivity", "1", "--out", filepath.Join(dir, "r.csv")}, 1,
			"knowdp release: sensitivity 1 is below the generic sensitivity 8"},
		{"release --out into a missing directory", []string{"release", "--data", data, "--schema", schema, "--epsilon", "1", "--out", filepath.Join(nodir, "r.csv")}, 2,
			"knowdp release: --out " + filepath.Join(nodir, "r.csv") + ": directory " + nodir + " does not exist\n"},
		{"workload --out into a missing directory", []string{"release", "--data", data, "--schema", schema, "--epsilon", "1", "--cuboid", "year", "--cuboid", "sex",
			"--out", filepath.Join(nodir, "tables")}, 2, "knowdp release: --out " + filepath.Join(nodir, "tables") + ": directory " + nodir + " does not exist\n"},
		{"refine --out into a missing directory", []string{"refine", "--answers", refineTD + "grades-noisy.csv", "--constraints", refineTD + "grades-equalities.json",
			"--out", filepath.Join(nodir, "r.csv")}, 2, "knowdp refine: --out " + filepath.Join(nodir, "r.csv") + ": directory " + nodir + " does not exist\n"},
		{"release-graph --out into a missing directory", []string{"release-graph", "--edges", edges, "--vertices", "3", "--epsilon", "1",
			"--out", filepath.Join(nodir, "g.csv")}, 2, "knowdp release-graph: --out " + filepath.Join(nodir, "g.csv") + ": directory " + nodir + " does not exist\n"},
		{"refine rho usage", []string{"refine", "rho", "--bogus"}, 2, "knowdp refine rho: flag provided but not defined: --bogus\n"},
		{"refine rho file", []string{"refine", "rho", "--queries", none, "--constraints", refineTD + "grades-equalities.json", "--epsilon", "1"}, 1,
			"knowdp refine rho: --queries: open " + none + ": no such file or directory\n"},
		{"query prior usage", []string{"query", "prior", "--bogus"}, 2, "knowdp query prior: flag provided but not defined: --bogus\n"},
		{"query prior file", []string{"query", "prior", "--data", none, "--schema", filepath.Join(dir, "none.json"), "--query", "count", "--prior", none, "--epsilon", "1"}, 1,
			"knowdp query prior: --schema: open "},
		{"dx laplace usage", []string{"dx", "laplace", "--bogus"}, 2, "knowdp dx laplace: flag provided but not defined: --bogus\n"},
		{"dx laplace file", append([]string{"dx", "laplace"}, dxArgs...), 1, "knowdp dx laplace: --universe: open " + none + ": no such file or directory\n"},
		{"query: a flag, no subcommand", []string{"query", "--bogus"}, 2, "knowdp query: missing subcommand before --bogus (want prior)\nRun 'knowdp help query' for usage.\n"},
		{"dx: a flag, no subcommand", []string{"dx", "--bogus"}, 2, "knowdp dx: missing subcommand before --bogus (want laplace, exponential, smalldb or mwem)\nRun 'knowdp help dx' for usage.\n"},
		{"query: unknown subcommand", []string{"query", "bogus"}, 2, "knowdp query: unknown subcommand \"bogus\" (want prior)\n"},
		{"dx: unknown subcommand", []string{"dx", "bogus"}, 2, "knowdp dx: unknown subcommand \"bogus\" (want laplace, exponential, smalldb or mwem)\n"},
		{"query: nothing", []string{"query"}, 2, "knowdp query: missing subcommand (want prior)\n"},
		{"dx: nothing", []string{"dx"}, 2, "knowdp dx: missing subcommand (want laplace, exponential, smalldb or mwem)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tc.args...)
			if code != tc.code || !strings.HasPrefix(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d and stderr starting %q", code, stderr, tc.code, tc.want)
			}
			if doubled(stderr) {
				t.Errorf("doubled prefix in %q", stderr)
			}
			if strings.Contains(stderr, ".tmp") {
				t.Errorf("the error names a temporary file: %q", stderr)
			}
		})
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 { // edges.csv and nothing else
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("failed runs left files behind: %v", names)
	}
}

// doubled reports whether the message "knowdp CMD [SUB]: ..." repeats the
// command's name after it ("knowdp release: release: ...").
func doubled(msg string) bool {
	rest, ok := strings.CutPrefix(msg, "knowdp ")
	if !ok {
		return false
	}
	name, rest, _ := strings.Cut(rest, ": ")
	cmd, _, _ := strings.Cut(name, " ")
	return strings.HasPrefix(rest, name+": ") || strings.HasPrefix(rest, cmd+": ")
}

// TestHelpValueNames checks that every command's usage line names each
// flag's value as its --help listing does (dx smalldb's --size M, not M in
// one and N in the other).
func TestHelpValueNames(t *testing.T) {
	flagValue := regexp.MustCompile(`--([a-z0-9-]+) ([A-Z][A-Z0-9|,._]*)\b`)
	for _, cmd := range [][]string{{"release"}, {"release-graph"}, {"repro"}, {"query", "prior"}, {"dx", "laplace"},
		{"dx", "exponential"}, {"dx", "smalldb"}, {"dx", "mwem"}, {"refine"}, {"refine", "rho"}, {"audit"}, {"attack"}, {"demo"}} {
		name := strings.Join(cmd, " ")
		code, stdout, _ := runCLI(t, append(cmd, "--help")...)
		if code != 0 {
			t.Fatalf("%s --help: exit %d", name, code)
		}
		listed := map[string]string{}
		var usage []string
		for _, line := range strings.Split(stdout, "\n") {
			switch {
			case strings.HasPrefix(line, "  --"):
				if m := flagValue.FindStringSubmatch(line); m != nil {
					listed[m[1]] = m[2]
				}
			case strings.HasPrefix(line, "Usage: "), strings.HasPrefix(line, "       knowdp "):
				usage = append(usage, line)
			}
		}
		if len(usage) == 0 || len(listed) == 0 {
			t.Fatalf("%s --help: no usage line or no flags:\n%s", name, stdout)
		}
		for _, line := range usage {
			for _, m := range flagValue.FindAllStringSubmatch(line, -1) {
				if v, ok := listed[m[1]]; ok && v != m[2] && !strings.Contains(m[2], "|") {
					t.Errorf("%s: the usage line says --%s %s, the flag list --%s %s", name, m[1], m[2], m[1], v)
				}
			}
		}
	}
}

// TestRunManifestRecordsTheCommand checks that knowdp-run.json records the
// command line as given, and the seed.
func TestRunManifestRecordsTheCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "repro out")
	for _, tc := range []struct {
		args []string
		want string
		seed uint64
	}{
		{[]string{"repro", "zcdp", "--out", dir, "--quick"}, "repro zcdp --out '" + dir + "' --quick", 1},
		{[]string{"repro", "--quick", "--seed", "7", "--out", dir, "--force", "zcdp"}, "repro --quick --seed 7 --out '" + dir + "' --force zcdp", 7},
	} {
		if code, stdout, stderr := runCLI(t, tc.args...); code != 0 {
			t.Fatalf("%q: exit %d\n%s\n%s", tc.args, code, stdout, stderr)
		}
		b, err := os.ReadFile(filepath.Join(dir, manifestName))
		if err != nil {
			t.Fatal(err)
		}
		var m runManifest
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if m.Command != tc.want || m.Seed == nil || *m.Seed != tc.seed || !m.Seeded || m.Private {
			t.Errorf("%q: manifest %s; want command %q, seed %d", tc.args, b, tc.want, tc.seed)
		}
	}
	if got := commandLine("attack", []string{"km", "--out", "it's", ""}); got != `attack km --out 'it'\''s' ''` {
		t.Errorf("commandLine: %s", got)
	}
}

// marginals sums a table (rows of dimension values, counts) into the
// cuboid of the columns keep, keyed by their values joined with "|".
func marginals(head []string, rows [][]string, counts []float64, keep []string) map[string]float64 {
	var idx []int
	for _, k := range keep {
		idx = append(idx, slices.Index(head, k))
	}
	out := map[string]float64{}
	for i, r := range rows {
		var key []string
		for _, j := range idx {
			key = append(key, r[j])
		}
		out[strings.Join(key, "|")] += counts[i]
	}
	return out
}

// trueMarginal counts the arrests data into the cuboid of the columns keep.
func trueMarginal(t *testing.T, keep []string) map[string]float64 {
	t.Helper()
	rows := readCSVFile(t, repoFile("data/arrests.csv"))
	counts := make([]float64, len(rows)-1)
	for i := range counts {
		counts[i] = 1
	}
	return marginals(rows[0], rows[1:], counts, keep)
}

// readReleased reads a released table, CSV or Parquet: its dimension
// columns, rows of labels and counts.
func readReleased(t *testing.T, path string) ([]string, [][]string, []float64) {
	t.Helper()
	if strings.EqualFold(filepath.Ext(path), ".parquet") {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		var head []string
		for _, c := range f.Schema().Fields() {
			head = append(head, c.Name())
		}
		k := len(head) - 2
		if k < 0 || head[k] != "count" || head[k+1] != "moe90" {
			t.Fatalf("%s: columns %v", path, head)
		}
		r := parquet.NewReader(f)
		defer r.Close()
		var labels [][]string
		var counts []float64
		buf := make([]parquet.Row, 64)
		for {
			n, err := r.ReadRows(buf)
			for _, row := range buf[:n] {
				var l []string
				for j := range k {
					l = append(l, row[j].String())
				}
				c := row[k].Double()
				if row[k].Kind() == parquet.Int64 { // an integer table
					c = float64(row[k].Int64())
				}
				labels, counts = append(labels, l), append(counts, c)
			}
			if err != nil {
				break
			}
		}
		return head[:k], labels, counts
	}
	rows := readCSVFile(t, path)
	k := len(rows[0]) - 2
	if k < 0 || rows[0][k] != "count" || rows[0][k+1] != "moe90" {
		t.Fatalf("%s: header %v", path, rows[0])
	}
	var labels [][]string
	var counts []float64
	for _, r := range rows[1:] {
		v, err := strconv.ParseFloat(r[k], 64)
		if err != nil {
			t.Fatal(err)
		}
		labels, counts = append(labels, r[:k]), append(counts, v)
	}
	return rows[0][:k], labels, counts
}

// TestPrintedTablesKeepInvariants releases tables under exact cuboids, one
// and several, CSV and Parquet, real, non-negative and integer, Laplace and
// Gaussian, reads back the files written, and checks that they keep every
// invariant to 1e-9: each exact cuboid summed from each released table
// that contains its dimensions equals the true counts. Counts rounded to 6
// decimals miss them by up to 5e-7 per cell summed.
func TestPrintedTablesKeepInvariants(t *testing.T) {
	data, schema := repoFile("data/arrests.csv"), repoFile("data/arrests.schema.json")
	exact := [][]string{{"year"}, {"colour", "sex"}}
	truth := map[string]map[string]float64{}
	for _, e := range exact {
		truth[strings.Join(e, ",")] = trueMarginal(t, e)
	}
	for i, tc := range []struct {
		name  string
		extra []string
		files []string // released tables, relative to the output
	}{
		{"one cuboid, CSV", []string{"--cuboid", "year,colour,sex,agegroup", "--out", "r.csv"}, []string{"r.csv"}},
		{"one cuboid, Parquet", []string{"--cuboid", "year,colour,sex,agegroup", "--out", "r.parquet"}, []string{"r.parquet"}},
		{"one cuboid, Gaussian", []string{"--mechanism", "gaussian", "--rho", "0.5", "--cuboid", "year,colour,sex", "--out", "r.csv"}, []string{"r.csv"}},
		{"workload, CSV", []string{"--cuboid", "year,colour", "--cuboid", "sex,agegroup,colour", "--cuboid", "year,released", "--out", "tables"},
			[]string{"tables/year-colour.csv", "tables/colour-sex-agegroup.csv", "tables/year-released.csv"}},
		{"workload, Parquet", []string{"--cuboid", "year,colour", "--cuboid", "sex,agegroup,colour", "--format", "parquet", "--out", "tables"},
			[]string{"tables/year-colour.parquet", "tables/colour-sex-agegroup.parquet"}},
		{"workload, non-negative", []string{"--nonneg", "--cuboid", "year,colour", "--cuboid", "colour,sex,employed", "--out", "tables"},
			[]string{"tables/year-colour.csv", "tables/colour-sex-employed.csv"}},
		{"workload, integer", []string{"--integer", "--cuboid", "year,colour", "--cuboid", "colour,sex,employed", "--out", "tables"},
			[]string{"tables/year-colour.csv", "tables/colour-sex-employed.csv"}},
		{"workload, Gaussian", []string{"--mechanism", "gaussian", "--rho", "0.5", "--cuboid", "year,colour", "--cuboid", "colour,sex,checks", "--out", "tables"},
			[]string{"tables/year-colour.csv", "tables/colour-sex-checks.csv"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for j, a := range tc.extra {
				if j > 0 && tc.extra[j-1] == "--out" {
					tc.extra[j] = filepath.Join(dir, a)
				}
			}
			args := []string{"release", "--data", data, "--schema", schema, "--exact", "year", "--exact", "colour,sex", "--seed", strconv.Itoa(11 + i)}
			if !slices.Contains(tc.extra, "gaussian") {
				args = append(args, "--epsilon", "1")
			}
			if code, stdout, stderr := runCLI(t, append(args, tc.extra...)...); code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
			}
			checked := 0
			for _, file := range tc.files {
				head, labels, counts := readReleased(t, filepath.Join(dir, file))
				for _, e := range exact {
					if !containsAll(head, e) {
						continue
					}
					got := marginals(head, labels, counts, e)
					for key, want := range truth[strings.Join(e, ",")] {
						if d := math.Abs(got[key] - want); d > 1e-9 {
							t.Errorf("%s: invariant {%s} cell %s: %v, true %v (off by %.3g)", file, strings.Join(e, ","), key, got[key], want, d)
						}
					}
					checked++
				}
			}
			if checked == 0 {
				t.Fatal("no table contains an invariant: the test checks nothing")
			}
		})
	}
}

func containsAll(s, sub []string) bool {
	for _, x := range sub {
		if !slices.Contains(s, x) {
			return false
		}
	}
	return true
}

// TestParquetOutput checks --out FILE.parquet and --format parquet: the
// Parquet tables have the CSV's columns in its order and its counts, the
// sidecar is beside them and names them, and a --format that contradicts
// the --out name is a usage error that writes nothing.
func TestParquetOutput(t *testing.T) {
	dir := t.TempDir()
	data, schema := repoFile("data/arrests.csv"), repoFile("data/arrests.schema.json")
	base := []string{"release", "--data", data, "--schema", schema, "--exact", "year", "--epsilon", "1", "--seed", "9"}
	run := func(extra ...string) {
		t.Helper()
		if code, stdout, stderr := runCLI(t, append(append([]string(nil), base...), extra...)...); code != 0 {
			t.Fatalf("%q: exit %d\n%s\n%s", extra, code, stdout, stderr)
		}
	}
	same := func(a, b string) {
		t.Helper()
		ha, la, ca := readReleased(t, a)
		hb, lb, cb := readReleased(t, b)
		if !slices.Equal(ha, hb) || !slices.EqualFunc(la, lb, slices.Equal) || !slices.Equal(ca, cb) {
			t.Errorf("%s and %s differ: %v %v", a, b, ha, hb)
		}
	}
	run("--cuboid", "year,colour", "--out", filepath.Join(dir, "r.csv"))
	run("--cuboid", "year,colour", "--out", filepath.Join(dir, "p.parquet"))
	run("--cuboid", "year,colour", "--format", "parquet", "--out", filepath.Join(dir, "q.PARQUET"))
	same(filepath.Join(dir, "r.csv"), filepath.Join(dir, "p.parquet"))
	same(filepath.Join(dir, "r.csv"), filepath.Join(dir, "q.PARQUET"))
	for _, side := range []string{"r.json", "p.json", "q.json"} {
		if m, _ := readSidecar(t, filepath.Join(dir, side)); m["seeded"] != true {
			t.Errorf("%s: %v", side, m)
		}
	}
	run("--cuboid", "year,colour", "--cuboid", "sex", "--out", filepath.Join(dir, "csv"))
	run("--cuboid", "year,colour", "--cuboid", "sex", "--format", "parquet", "--out", filepath.Join(dir, "pq"))
	same(filepath.Join(dir, "csv", "year-colour.csv"), filepath.Join(dir, "pq", "year-colour.parquet"))
	same(filepath.Join(dir, "csv", "sex.csv"), filepath.Join(dir, "pq", "sex.parquet"))
	m, _ := readSidecar(t, filepath.Join(dir, "pq", "release.json"))
	var files []string
	for _, tb := range m["tables"].([]any) {
		files = append(files, tb.(map[string]any)["file"].(string))
	}
	if !slices.Equal(files, []string{"year-colour.parquet", "sex.parquet"}) {
		t.Errorf("release.json names the files %v", files)
	}
	for _, tc := range []struct {
		extra []string
		want  string
	}{
		{[]string{"--format", "parquet", "--out", filepath.Join(dir, "x.csv")}, "--format parquet does not match --out " + filepath.Join(dir, "x.csv")},
		{[]string{"--format", "csv", "--out", filepath.Join(dir, "x.parquet")}, "--format csv does not match --out"},
		{[]string{"--format", "json", "--out", filepath.Join(dir, "x.csv")}, `--format: unknown format "json" (want csv or parquet)`},
	} {
		code, _, stderr := runCLI(t, append(append([]string(nil), base...), tc.extra...)...)
		if code != 2 || !strings.HasPrefix(stderr, "knowdp release: "+tc.want) {
			t.Errorf("%q: exit %d, %q; want 2 and %q", tc.extra, code, stderr, tc.want)
		}
	}
	for _, name := range []string{"x.csv", "x.parquet", "x.json"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("a refused run wrote %s", name)
		}
	}
}

// TestSchemaNumbers checks that a schema may write domain values as JSON
// numbers: they match the data's text.
func TestSchemaNumbers(t *testing.T) {
	dir := t.TempDir()
	s := writeTemp(t, dir, "s.json", `{"dimensions":[{"name":"year","values":[1997,1998,1999,2000,2001,2002]},{"name":"sex","values":["Female","Male"]}]}`)
	out := filepath.Join(dir, "r.csv")
	code, stdout, stderr := runCLI(t, "release", "--data", repoFile("data/arrests.csv"), "--schema", s, "--exact", "year", "--epsilon", "1", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	head, labels, counts := readReleased(t, out)
	got := marginals(head, labels, counts, []string{"year"})
	for k, v := range trueMarginal(t, []string{"year"}) {
		if math.Abs(got[k]-v) > 1e-9 {
			t.Errorf("year %s: %v, true %v", k, got[k], v)
		}
	}
	bad := writeTemp(t, dir, "bad.json", `{"dimensions":[{"name":"year","values":[1997,true]}]}`)
	code, _, stderr = runCLI(t, "release", "--data", repoFile("data/arrests.csv"), "--schema", bad, "--epsilon", "1", "--out", filepath.Join(dir, "b.csv"))
	if want := fmt.Sprintf(`knowdp release: schema %s: dimension "year": value 2 is true; domain values are strings (or numbers, taken as written)`, bad); code != 1 || !strings.HasPrefix(stderr, want) {
		t.Errorf("exit %d, %q; want 1 and %q", code, stderr, want)
	}
}
