package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const refineTD = "../../refine/testdata/"

func runRefineArgs(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	code := run(context.Background(), e, append([]string{"refine"}, args...))
	return code, out.String(), errb.String()
}

func readRefined(t *testing.T, path string) map[string]float64 {
	t.Helper()
	recs := readCSVFile(t, path)
	if strings.Join(recs[0], ",") != "name,value" {
		t.Fatalf("header %v", recs[0])
	}
	got := map[string]float64{}
	for _, r := range recs[1:] {
		v, err := strconv.ParseFloat(r[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		got[r[0]] = v
	}
	return got
}

func TestRefineCommand(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "refined.csv")
	code, stdout, stderr := runRefineArgs(t, "--answers", refineTD+"grades-noisy.csv", "--constraints", refineTD+"grades.json", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	got := readRefined(t, out)
	if len(got) != 7 {
		t.Fatalf("%d refined answers, want 7", len(got))
	}
	// The constraints hold, the counts are non-negative, and the warning
	// names the data-dependent equality.
	for _, c := range []struct {
		name string
		v    float64
	}{
		{"A+B−80", got["A"] + got["B"] - 80},
		{"passing", got["A"] + got["B"] + got["C"] + got["D"] - got["p"]},
		{"total", got["F"] + got["p"] - got["t"]},
	} {
		if math.Abs(c.v) > 1e-9 {
			t.Errorf("constraint %s off by %v", c.name, c.v)
		}
	}
	if !strings.Contains(stdout, `equalities "AB" depend on the data`) || !strings.Contains(stdout, "knowdp refine rho") {
		t.Errorf("missing privacy warning:\n%s", stdout)
	}
	// The refined answers exist now: a second run is refused, before it
	// reads anything, unless --force.
	before, _ := os.ReadFile(out)
	code, _, stderr = runRefineArgs(t, "--answers", refineTD+"grades-noisy.csv", "--constraints", refineTD+"grades-definitional.json", "--out", out)
	if after, _ := os.ReadFile(out); code != 2 || !strings.Contains(stderr, "--out "+out+": the file exists") || !strings.Contains(stderr, "--force") || !bytes.Equal(before, after) {
		t.Fatalf("existing --out: exit %d (want 2), file changed %v: %s", code, !bytes.Equal(before, after), stderr)
	}
	// Definitional constraints only: post-processing, and the grades'
	// sums are the tree fast path (the exact least-squares answer is
	// checked in package refine).
	code, stdout, stderr = runRefineArgs(t, "--answers", refineTD+"grades-noisy.csv", "--constraints", refineTD+"grades-definitional.json", "--out", out, "--force")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "keep the eps") {
		t.Errorf("missing post-processing note:\n%s", stdout)
	}
}

func TestRefineRhoCommand(t *testing.T) {
	base := []string{"rho", "--queries", refineTD + "grades-queries.csv", "--epsilon", "1"}
	// Definitional constraints: rho = eps at the plain scale 3/eps.
	code, stdout, stderr := runRefineArgs(t, append(base, "--constraints", refineTD+"grades-definitional.json", "--sigma", "3", "--json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res refineRhoResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	if res.Rho == nil || math.Abs(*res.Rho-1) > 1e-9 || res.RawSensitivity != 3 || len(res.DataDependent) != 0 {
		t.Errorf("definitional constraints: %+v", res)
	}
	// With mu_A + mu_B = 80 released in full: the release reveals the
	// constant, for an A (or B) record.
	code, stdout, stderr = runRefineArgs(t, append(base, "--constraints", refineTD+"grades-equalities.json", "--json")...)
	if code != 1 || !strings.Contains(stderr, "knowdp refine rho: rho is infinite") {
		t.Fatalf("infinite rho: exit %d (want 1): %s", code, stderr)
	}
	res = refineRhoResult{}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	if !res.Distinguishable || !res.RhoInfinite || res.Rho != nil || res.CalibratedScale != nil || !strings.Contains(res.WorstNeighbour, `"A"`) {
		t.Errorf("full release with a data-dependent constraint: %+v", res)
	}
	// The worst subset that does not reveal it (Definition 5), in text.
	code, stdout, stderr = runRefineArgs(t, append(base, "--constraints", refineTD+"grades-equalities.json", "--release", "worst")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"effective sensitivity: 5", "calibrated:            Laplace scale 5 ", `data-dependent: "AB"`, `worst neighbours: add or remove a record of type "A"`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	// A chosen release.
	code, stdout, _ = runRefineArgs(t, append(base, "--constraints", refineTD+"grades-equalities.json", "--release", "C,F", "--json")...)
	if code != 0 {
		t.Fatal(stdout)
	}
	res = refineRhoResult{}
	_ = json.Unmarshal([]byte(stdout), &res)
	if strings.Join(res.Release, ",") != "C,F" || res.Rho == nil || res.CalibratedScale == nil {
		t.Errorf("release C,F: %+v", res)
	}
	// Without --sigma, rho is reported at the plain Laplace scale
	// raw/eps (not at the calibrated scale, where it would be eps by
	// construction), and the calibrated scale is shown beside it.
	code, stdout, _ = runRefineArgs(t, append(base, "--constraints", refineTD+"grades-equalities.json", "--release", "worst", "--json")...)
	if code != 0 {
		t.Fatal(stdout)
	}
	res = refineRhoResult{}
	_ = json.Unmarshal([]byte(stdout), &res)
	if res.Sigma != res.RawSensitivity/1 || !strings.HasPrefix(res.SigmaSource, "default") || res.Rho == nil ||
		math.Abs(*res.Rho-*res.Sensitivity/res.Sigma) > 1e-12 || res.CalibratedScale == nil || math.Abs(*res.CalibratedScale-5) > 1e-4 {
		t.Errorf("default sigma: %+v", res)
	}
}

// artefact matches a decimal with a run of 9s or 0s inside its fraction,
// the mark of a floating-point rounding error (9.06249999999999).
var artefact = regexp.MustCompile(`\.\d*(9999|0000)\d`)

// TestRefineSidecarAndFormat checks the refine sidecar's privacy fields and
// that values are written without floating-point artefacts.
func TestRefineSidecarAndFormat(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		constraints string
		post        bool
		private     any
		guarantee   string
	}{
		{"grades.json", false, false, "none"},
		{"grades-definitional.json", true, nil, "inherited"},
	} {
		out := filepath.Join(dir, "r.csv")
		code, _, stderr := runRefineArgs(t, "--answers", refineTD+"grades-noisy.csv", "--constraints", refineTD+tc.constraints, "--out", out, "--force")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		b, err := os.ReadFile(filepath.Join(dir, "r.json"))
		if err != nil {
			t.Fatal(err)
		}
		var meta map[string]any
		if err := json.Unmarshal(b, &meta); err != nil {
			t.Fatal(err)
		}
		for name, v := range readRefined(t, out) {
			if s := strconv.FormatFloat(v, 'f', -1, 64); artefact.MatchString(s) {
				t.Errorf("%s: refined %s = %s has a floating-point artefact", tc.constraints, name, s)
			}
		}
		if meta["post_processing"] != tc.post || meta["private"] != tc.private || meta["guarantee"] != tc.guarantee || meta["constraints"] != refineTD+tc.constraints {
			t.Errorf("%s: sidecar %s", tc.constraints, b)
		}
	}
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{21.787499999999998, "21.7875"}, {9.06249999999999, "9.0625"}, {0.1 + 0.2, "0.3"}, {-3, "-3"}, {0, "0"}, {1e-9, "1e-09"}, {123456789.125, "123456789.125"}, {2.5e22, "2.5e+22"},
	} {
		if got := formatValue(tc.v); got != tc.want {
			t.Errorf("formatValue(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestRefineErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	answers := write("a.csv", "name,value\nA,1\nB,2\n")
	spec := write("s.json", `{"equalities":[{"coefficients":{"A":1,"B":1},"value":5,"public":true}]}`)
	out := filepath.Join(dir, "out.csv")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no answers flag", []string{"--constraints", spec, "--out", out}, 2, "knowdp refine: missing required flag --answers"},
		{"no out", []string{"--answers", answers, "--constraints", spec}, 2, "knowdp refine: missing required flag --out"},
		{"missing file", []string{"--answers", filepath.Join(dir, "none.csv"), "--constraints", spec, "--out", out}, 1, "--answers: open " + filepath.Join(dir, "none.csv") + ": no such file"},
		{"missing constraints", []string{"--answers", answers, "--constraints", filepath.Join(dir, "none.json"), "--out", out}, 1, "--constraints: open " + filepath.Join(dir, "none.json") + ": no such file"},
		{"out is answers", []string{"--answers", answers, "--constraints", spec, "--out", answers}, 2, "--out " + answers + " is the same file as --answers"},
		{"sidecar is constraints", []string{"--answers", answers, "--constraints", spec, "--out", filepath.Join(dir, "s.csv")}, 2, "is the same file as --constraints"},
		{"rho missing queries", []string{"rho", "--queries", filepath.Join(dir, "none.csv"), "--constraints", spec, "--epsilon", "1"}, 1, "knowdp refine rho: --queries: open "},
		{"NaN value", []string{"--answers", write("nan.csv", "name,value\nA,NaN\nB,2\n"), "--constraints", spec, "--out", out}, 1, `nan.csv: row 2, column "value": value "NaN" of answer "A" is not a finite number`},
		{"duplicate name", []string{"--answers", write("dup.csv", "name,value\nA,1\nA,2\n"), "--constraints", spec, "--out", out}, 1, `answer "A" already appears in row 2`},
		{"no value column", []string{"--answers", answers, "--value", "v", "--constraints", spec, "--out", out}, 1, `no column "v"`},
		{"unknown name", []string{"--answers", answers, "--constraints", write("u.json", `{"equalities":[{"name":"s","coefficients":{"A":1,"Q":1}}]}`), "--out", out}, 1, `u.json: equalities[0] ("s"): unknown answer "Q"`},
		{"bad json", []string{"--answers", answers, "--constraints", write("b.json", "{\n\"order\": [[\"A\" \"B\"]]}"), "--out", out}, 1, "b.json: line 2"},
		{"rank deficient", []string{"--answers", answers, "--constraints", write("r.json", `{"equalities":[{"name":"x","coefficients":{"A":1,"B":1},"value":2},{"name":"y","coefficients":{"A":2,"B":2},"value":4}]}`), "--out", out}, 1, `r.json: refine: equality "y" is redundant`},
		{"inconsistent", []string{"--answers", answers, "--constraints", write("i.json", `{"equalities":[{"name":"x","coefficients":{"A":1,"B":1},"value":2}],"ranges":{"A":[0,0.5],"B":[0,0.5]}}`), "--out", out}, 1, "inconsistent"},
		{"rho without epsilon", []string{"rho", "--queries", refineTD + "grades-queries.csv", "--constraints", refineTD + "grades.json"}, 2, "knowdp refine rho: missing required flag --epsilon"},
		{"rho with ranges", []string{"rho", "--queries", refineTD + "grades-queries.csv", "--constraints", refineTD + "grades.json", "--epsilon", "1"}, 1, "equalities only"},
		{"rho bad epsilon", []string{"rho", "--queries", refineTD + "grades-queries.csv", "--constraints", refineTD + "grades-equalities.json", "--epsilon", "-1"}, 2, "--epsilon: epsilon must be > 0"},
		{"rho neighbours", []string{"rho", "--queries", refineTD + "grades-queries.csv", "--constraints", refineTD + "grades-equalities.json", "--epsilon", "1", "--neighbours", "swap"}, 2, "add-remove or substitute"},
		{"rho release name", []string{"rho", "--queries", refineTD + "grades-queries.csv", "--constraints", refineTD + "grades-equalities.json", "--epsilon", "1", "--release", "A,Z"}, 1, `--release: unknown answer "Z"`},
		{"rho public moves", []string{"rho", "--queries", refineTD + "grades-queries.csv", "--constraints", write("p.json", `{"equalities":[{"name":"AB","coefficients":{"A":1,"B":1},"value":80,"public":true}]}`), "--epsilon", "1"}, 1, `"AB" is marked public`},
		{"rho query value", []string{"rho", "--queries", write("q.csv", "name,u\nA,x\nB,1\n"), "--constraints", spec, "--epsilon", "1"}, 1, `q.csv: row 2, column "u": coefficient "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runRefineArgs(t, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d (want %d), stderr %q, want it to contain %q", code, tc.code, stderr, tc.want)
			}
		})
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed run left %s behind", out)
	}
	code, stdout, _ := runRefineArgs(t, "--help")
	if code != 0 || !strings.Contains(stdout, "only if its value is the same on every database") || !strings.Contains(stdout, "--constraints FILE") {
		t.Errorf("--help should document the constraints format (exit %d):\n%s", code, stdout)
	}
}
