package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
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

// TestMain lets the tests run this test binary as the command itself, so
// that flags and exit codes are those of a real process.
func TestMain(m *testing.M) {
	if os.Getenv("KNOWDP_BEAM_RUN_MAIN") == "1" {
		main() // as the command runs, signal handling included
	}
	code := m.Run()
	if knowdpCLI.dir != "" { // the knowdp command the parity tests built
		os.RemoveAll(knowdpCLI.dir)
	}
	os.Exit(code)
}

// knowdpBeam runs the command and returns its exit code, stdout and stderr.
func knowdpBeam(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "KNOWDP_BEAM_RUN_MAIN=1")
	return runCommand(t, cmd)
}

// runCommand runs cmd and returns its exit code, stdout and stderr.
func runCommand(t *testing.T, cmd *exec.Cmd) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

const schemaJSON = `{"dimensions":[
 {"name":"sex","values":["F","M"]},
 {"name":"age","values":["0-17","18-64","65+"]},
 {"name":"town","values":["Ash","Elm, North","Oak"]}]}`

const facts = `town,sex,age
Ash,F,18-64
Ash,M,18-64
"Elm, North",F,0-17
Oak,M,65+
Oak,M,65+
Ash,F,65+
"Elm, North",M,18-64
`

func writeInputs(t *testing.T, data string) (dir, schema, table string) {
	t.Helper()
	dir = t.TempDir()
	schema = filepath.Join(dir, "schema.json")
	table = filepath.Join(dir, "facts.csv")
	if err := os.WriteFile(schema, []byte(schemaJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(table, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, schema, table
}

// TestReleaseMatchesKnowdpRelease checks the command's CSV and sidecar
// against what knowdp release writes (release.Release.WriteCSV and Metadata)
// for the same seed, and that an unseeded run is labelled private.
func TestReleaseMatchesKnowdpRelease(t *testing.T) {
	dir, schema, table := writeInputs(t, facts)
	out := filepath.Join(dir, "rel.csv")
	tests := []struct {
		name  string
		args  []string
		exact []domain.Cuboid
		cb    domain.Cuboid
	}{
		{"two invariants", []string{"--exact", "sex", "--exact", "age,town", "--cuboid", "sex,town"}, []domain.Cuboid{1, 6}, 5},
		{"base cuboid", []string{"--exact", "age"}, []domain.Cuboid{2}, 7},
		{"grand total", []string{"--cuboid", "", "--exact", "town"}, []domain.Cuboid{4}, 0},
		{"determined by the invariants", []string{"--cuboid", "sex", "--exact", "sex,age"}, []domain.Cuboid{3}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkAgainstCore(t, dir, schema, table, out, tc.args, tc.exact, tc.cb)
		})
	}
	// The same releases with Gaussian noise (zCDP): --delta's default, and
	// a delta given.
	rho, _ := privacy.NewRho(0.5)
	for _, delta := range []string{"", "1e-3"} {
		for _, tc := range tests {
			t.Run("gaussian "+tc.name+" delta "+delta, func(t *testing.T) {
				flags := []string{"--mechanism", "gaussian", "--rho", "0.5"}
				spec := release.Spec{Mechanism: release.MechanismGaussian, Rho: rho, Delta: 1e-6}
				if delta != "" {
					flags, spec.Delta = append(flags, "--delta", delta), 1e-3
				}
				stdout := checkSpec(t, dir, schema, table, out, flags, spec, tc.args, tc.exact, tc.cb)
				// A table the invariants determine spends nothing and says so.
				if !(strings.Contains(stdout, "rho 0.5 (zCDP; (") && strings.Contains(stdout, "Gaussian sigma")) && !strings.Contains(stdout, "are the TRUE counts") {
					t.Errorf("the summary does not describe the Gaussian release:\n%s", stdout)
				}
			})
		}
	}

	code, stdout, stderr := knowdpBeam(t, "release", "--data", table, "--schema", schema, "--epsilon", "1",
		"--exact", "sex", "--cuboid", "sex,town", "--out", out, "--force")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	var meta sidecar.Metadata
	side, _ := os.ReadFile(filepath.Join(dir, "rel.json"))
	if err := json.Unmarshal(side, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Seeded || !meta.Private || strings.Contains(stdout, "NOT differentially private") {
		t.Fatalf("an unseeded run must be private and say so: %+v\n%s", meta, stdout)
	}
}

// checkAgainstCore runs a seeded release and compares its CSV and sidecar
// with the single-machine release of the same seed.
func checkAgainstCore(t *testing.T, dir, schema, table, out string, args []string, exact []domain.Cuboid, cb domain.Cuboid) {
	t.Helper()
	eps, _ := privacy.NewEpsilon(1)
	checkSpec(t, dir, schema, table, out, []string{"--epsilon", "1"}, release.Spec{Epsilon: eps}, args, exact, cb)
}

// checkSpec is checkAgainstCore for the privacy flags given and the
// single-machine spec they stand for (its tables and invariants aside);
// it returns the command's stdout.
func checkSpec(t *testing.T, dir, schema, table, out string, privFlags []string, spec release.Spec, args []string, exact []domain.Cuboid, cb domain.Cuboid) string {
	t.Helper()
	args = append(append([]string{"release", "--data", table, "--schema", schema, "--seed", "3", "--out", out, "--force"}, privFlags...), args...)
	code, stdout, stderr := knowdpBeam(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "NOT differentially private") || !strings.Contains(stderr, "NOT differentially private") {
		t.Errorf("a seeded run must say it is not private; stdout:\n%s\nstderr:\n%s", stdout, stderr)
	}

	s, err := domain.LoadSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cubeFromCSV(context.Background(), table, s, cube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// As knowdp release makes the spec of one --cuboid.
	spec.Tables, spec.Weights, spec.Strategy = []domain.View{domain.ViewOf(cb)}, []float64{1}, release.MeasureBest
	for _, e := range exact {
		spec.Exact = append(spec.Exact, domain.ViewOf(e))
	}
	plan, err := release.NewPlan(s, spec)
	if err != nil {
		t.Fatal(err)
	}
	counts, err := c.ProjectViews(plan.Needs())
	if err != nil {
		t.Fatal(err)
	}
	rel, err := plan.Run(context.Background(), counts, noise.NewSeeded(3))
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	tab := rel.Tables[0]
	if err := tablefile.WriteRows(&want, tablefile.CSV, s, tab.TableView(), 0, tab.Counts, tab.CellMOE, tab.Integer); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	gr, err := csv.NewReader(bytes.NewReader(got)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	wr, err := csv.NewReader(&want).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(gr) != len(wr) {
		t.Fatalf("%d rows, knowdp release writes %d:\n%s", len(gr), len(wr), got)
	}
	for i := range wr {
		// Labels and moe90 equal; counts equal up to the last of their 6
		// decimals, which a float rounding difference far below 1e-9 can
		// flip.
		g, w := gr[i], wr[i]
		k := len(w) - 2
		if len(g) != len(w) || !slices.Equal(g[:k], w[:k]) || g[k+1] != w[k+1] {
			t.Fatalf("row %d: %q, want %q", i+1, g, w)
		}
		if i == 0 {
			if g[k] != w[k] {
				t.Fatalf("header %q, want %q", g, w)
			}
			continue
		}
		gv, _ := strconv.ParseFloat(g[k], 64)
		wv, _ := strconv.ParseFloat(w[k], 64)
		if math.Abs(gv-wv) > 1.0000001e-6 {
			t.Fatalf("row %d: %q, want %q", i+1, g, w)
		}
	}
	side, err := os.ReadFile(filepath.Join(dir, "rel.json"))
	if err != nil {
		t.Fatal(err)
	}
	story := rel.Metadata()
	story.Tables[0].File = filepath.Base(out)
	wantSide, _ := json.MarshalIndent(story, "", "  ")
	if string(side) != string(wantSide)+"\n" {
		t.Fatalf("sidecar\n%s\nwant\n%s", side, wantSide)
	}
	return stdout
}

func TestErrors(t *testing.T) {
	bad := strings.Replace(facts, "Oak,M,65+\nOak", "Oak,M,65+\nPine", 1)
	dir, schema, table := writeInputs(t, bad)
	out := filepath.Join(dir, "rel.csv")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown flag", []string{"release", "--data", table, "--schema", schema, "--epsilon", "1", "--out", out, "--bogus"}, 2, "knowdp-beam release: flag provided but not defined: --bogus\nRun 'knowdp-beam release --help' for usage."},
		{"missing out", []string{"release", "--data", table, "--schema", schema, "--epsilon", "1"}, 2, "knowdp-beam release: missing required flag --out"},
		{"missing data", []string{"release", "--schema", schema, "--epsilon", "1", "--out", out}, 2, "knowdp-beam release: missing required flag --data"},
		{"missing schema", []string{"release", "--data", table, "--epsilon", "1", "--out", out}, 2, "knowdp-beam release: missing required flag --schema"},
		{"no command", []string{"--data", table}, 2, "knowdp-beam: unknown command \"--data\" (want release)\nUsage: knowdp-beam release"},
		{"nothing", nil, 2, "knowdp-beam: missing command (want release)"},
		{"epsilon 0", []string{"release", "--data", table, "--schema", schema, "--epsilon", "0", "--out", out}, 2, "knowdp-beam release: --epsilon: "},
		{"no epsilon", []string{"release", "--data", table, "--schema", schema, "--out", out}, 2, "knowdp-beam release: --epsilon: "},
		{"out -", []string{"release", "--data", table, "--schema", schema, "--epsilon", "1", "--out", "-"}, 2, "--out -: writing to standard output is not supported"},
		{"missing schema file", []string{"release", "--data", table, "--schema", filepath.Join(dir, "none.json"), "--epsilon", "1", "--out", out}, 1,
			"knowdp-beam release: --schema: open " + filepath.Join(dir, "none.json") + ": no such file or directory"},
		// Several cuboids are a workload, written as a new directory
		// (here named rel.csv): planned, then refused for the data.
		{"two cuboids", []string{"release", "--data", table, "--schema", schema, "--epsilon", "1", "--cuboid", "sex", "--cuboid", "age", "--out", out}, 1,
			table + `: row 6, column "town": value "Pine" is not in the declared domain of "town"`},
		{"bad epsilon", []string{"release", "--data", table, "--schema", schema, "--epsilon", "-1", "--out", out}, 2, "--epsilon"},
		{"bad mechanism", []string{"release", "--data", table, "--schema", schema, "--mechanism", "exponential", "--out", out}, 2, `knowdp-beam release: --mechanism: unknown mechanism "exponential": use laplace or gaussian`},
		{"rho without gaussian", []string{"release", "--data", table, "--schema", schema, "--epsilon", "1", "--rho", "0.5", "--out", out}, 2, "knowdp-beam release: --rho needs --mechanism gaussian\nRun 'knowdp-beam release --help' for usage."},
		{"epsilon with gaussian", []string{"release", "--data", table, "--schema", schema, "--mechanism", "gaussian", "--rho", "0.5", "--epsilon", "1", "--out", out}, 2, "knowdp-beam release: --mechanism gaussian is calibrated to --rho; --epsilon does not apply"},
		{"gaussian without rho", []string{"release", "--data", table, "--schema", schema, "--mechanism", "gaussian", "--out", out}, 2, "knowdp-beam release: --rho: rho must be > 0"},
		{"bad rho", []string{"release", "--data", table, "--schema", schema, "--mechanism", "gaussian", "--rho", "-1", "--out", out}, 2, "knowdp-beam release: --rho: "},
		{"delta 1", []string{"release", "--data", table, "--schema", schema, "--mechanism", "gaussian", "--rho", "0.5", "--delta", "1", "--out", out}, 2, "knowdp-beam release: --delta must be in (0, 1), got 1"},
		{"delta 0", []string{"release", "--data", table, "--schema", schema, "--mechanism", "gaussian", "--rho", "0.5", "--delta", "0", "--out", out}, 2, "knowdp-beam release: --delta must be in (0, 1), got 0"},
		{"gaussian value outside the domain", []string{"release", "--data", table, "--schema", schema, "--mechanism", "gaussian", "--rho", "0.5", "--out", out}, 1,
			table + `: row 6, column "town": value "Pine" is not in the declared domain of "town"`},
		{"bad cuboid", []string{"release", "--data", table, "--schema", schema, "--epsilon", "1", "--cuboid", "sex,colour", "--out", out}, 1, `--cuboid "sex,colour": unknown dimension "colour"`},
		// Levels of a hierarchy are released (see TestParity); what knowdp
		// release refuses with them is refused.
		{"unknown level", []string{"release", "--data", filepath.Join("..", "..", "..", "data", "us-persons.csv"), "--schema", filepath.Join("..", "..", "..", "data", "us-geo.schema.json"), "--epsilon", "1", "--cuboid", "geo:county,sex", "--out", out}, 1, `--cuboid "geo:county,sex": `},
		{"infer domains", []string{"release", "--data", table, "--infer-domains", "--dims", "sex", "--epsilon", "1", "--out", out}, 2, "knowdp-beam release: --infer-domains: a domain read from the data is not private"},
		{"cell limit", []string{"release", "--data", table, "--schema", schema, "--epsilon", "1", "--cell-limit", "1000", "--out", out}, 2, "knowdp-beam release: --cell-limit guards knowdp release's memory"},
		{"csv format for a parquet file", []string{"release", "--data", table, "--schema", schema, "--epsilon", "1", "--format", "csv", "--out", filepath.Join(dir, "rel.parquet")}, 2,
			"knowdp-beam release: --format csv does not match --out " + filepath.Join(dir, "rel.parquet")},
		{"format mismatch", []string{"release", "--data", table, "--schema", schema, "--epsilon", "1", "--format", "parquet", "--out", out}, 2, "knowdp-beam release: --format parquet does not match --out " + out},
		{"nonneg and integer", []string{"release", "--data", table, "--schema", schema, "--epsilon", "1", "--nonneg", "--integer", "--out", out}, 2, "knowdp-beam release: --nonneg and --integer exclude each other"},
		{"tol 0", []string{"release", "--data", table, "--schema", schema, "--epsilon", "1", "--nonneg", "--tol", "0", "--out", out}, 2, "knowdp-beam release: --tol must be a positive number, got 0\nRun 'knowdp-beam release --help' for usage."},
		{"tol NaN", []string{"release", "--data", table, "--schema", schema, "--epsilon", "1", "--tol", "NaN", "--out", out}, 2, "knowdp-beam release: --tol must be a positive number, got NaN"},
		{"empty split", []string{"release", "--data", table, "--schema", schema, "--epsilon", "1", "--cuboid", "sex", "--cuboid", "age", "--split", "", "--out", out}, 2, `knowdp-beam release: --split: split "": want auto, optimal, equal or spine`},
		{"worker memory", []string{"release", "--data", table, "--schema", schema, "--epsilon", "1", "--worker-memory", "0", "--out", out}, 2, "knowdp-beam release: --worker-memory must be a positive number of GB, got 0"},
		{"missing workload", []string{"release", "--data", table, "--schema", schema, "--epsilon", "1", "--workload", filepath.Join(dir, "none.json"), "--out", out}, 1, "knowdp-beam release: --workload: open " + filepath.Join(dir, "none.json")},
		{"no data", []string{"release", "--data", filepath.Join(dir, "none*.csv"), "--schema", schema, "--epsilon", "1", "--out", out}, 1, "no such file"},
		{"value outside the domain", []string{"release", "--data", table, "--schema", schema, "--epsilon", "1", "--out", out}, 1,
			table + `: row 6, column "town": value "Pine" is not in the declared domain of "town" (Ash, Elm, North, Oak)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := knowdpBeam(t, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, want %d with %q in stderr:\n%s\n%s", code, tc.code, tc.want, stderr, stdout)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a failed release left %s behind", out)
			}
			if _, err := os.Stat(filepath.Join(dir, "m.json")); !errors.Is(err, os.ErrNotExist) {
				t.Fatal("a failed release left its --measurements behind")
			}
		})
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".*")); len(m) != 0 {
		t.Errorf("temporaries left behind: %v", m)
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

// TestHelpAndVersion checks knowdp's conventions: help on stdout with exit
// status 0 and the flags in the --flag VALUE style, and --version.
func TestHelpAndVersion(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"-h"}, {"release", "--help"}, {"help", "release"}, {"release", "--data", "x", "-h"}} {
		code, stdout, stderr := knowdpBeam(t, args...)
		if code != 0 || stderr != "" || !strings.Contains(stdout, "Usage: knowdp-beam release --data FILE") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
		if args[len(args)-1] != "help" && len(args) > 1 && (!strings.Contains(stdout, "\n  --out FILE\n") || !strings.Contains(stdout, "\n  --epsilon X\n") || !strings.Contains(stdout, "\n  --mechanism NAME\n") || !strings.Contains(stdout, "\n  --rho X\n") || !strings.Contains(stdout, "\n  --delta X\n") || !strings.Contains(stdout, "\n  --runner STRING\n")) {
			t.Errorf("%q: the flags are not listed as --flag VALUE, Beam's included:\n%s", args, stdout)
		}
	}
	for _, arg := range []string{"--version", "version", "-version"} {
		code, stdout, stderr := knowdpBeam(t, arg)
		if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "knowdp-beam ") || !strings.Contains(stdout, "revision ") || !strings.Contains(stdout, "go1.") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", arg, code, stdout, stderr)
		}
	}
}
