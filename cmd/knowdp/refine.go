package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/mat"

	"github.com/knowdp/knowdp/internal/cli"
	"github.com/knowdp/knowdp/internal/fileio"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/refine"
	"github.com/knowdp/knowdp/source"
)

func refineCommand() *command {
	return &command{
		name:    "refine",
		summary: "refine noisy answers with known constraints; 'refine rho' computes the privacy cost",
		run:     runRefine,
	}
}

// refineSpecHelp documents the constraints file (refine.Spec).
const refineSpecHelp = `Constraints (JSON; every field optional; answers named as in the answers file):

  {
    "equalities": [
      {"name": "passing", "coefficients": {"A": 1, "B": 1, "C": 1, "D": 1, "p": -1}, "public": true},
      {"name": "total",   "coefficients": {"F": 1, "p": 1, "t": -1}, "public": true},
      {"name": "AB",      "coefficients": {"A": 1, "B": 1}, "value": 80}
    ],
    "order": [["F", "D", "C"]],
    "ranges": {"A": [0, 100], "t": [0, null]},
    "nonnegative": true
  }

An equality says sum(coefficient * answer) = value (default 0). Set "public": true
only if its value is the same on every database (it holds by definition, or was
fixed without the data); a value computed from this data set, such as a published
total, is not public. An order chain says its answers are non-decreasing in the
order listed; a range is [lower, upper] with null for an open end; "nonnegative"
bounds every answer below by 0. Orders and ranges must not depend on the data.

Privacy: if every equality is public, refining is post-processing and the refined
answers keep the eps of the noisy ones. A data-dependent equality costs more:
'knowdp refine rho' computes how much and the noise scale that pays for it.
`

func runRefine(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 && args[0] == "rho" {
		return inSubcommand("refine rho", runRefineRho(ctx, e, args[1:]))
	}
	fs := newFlagSet(e, "refine", "")
	answers := fs.String("answers", "", "noisy answers: CSV `FILE` with a header, one answer per row (required)")
	nameCol := fs.String("name", "name", "`COLUMN` of --answers holding the answer names")
	valueCol := fs.String("value", "value", "`COLUMN` of --answers holding the noisy values")
	specPath := fs.String("constraints", "", "constraints JSON `FILE`, format below (required)")
	out := fs.String("out", "", "output CSV `FILE` of refined answers, columns as --name and --value (required); a JSON sidecar of the same name says what was refined and its privacy")
	asJSON := fs.Bool("json", false, "print the summary and the refined answers as JSON (full precision)")
	force := fs.Bool("force", false, forceUsage)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: knowdp refine --answers FILE --constraints FILE --out FILE [--force] [flags]
       knowdp refine rho [flags]   (privacy loss of a refinement: 'knowdp refine rho --help')

Writes the least-squares refinement of the noisy answers: the answers closest to them
that satisfy every constraint. Values are written rounded to 12 significant digits.

Flags:
`)
		cli.PrintFlags(fs.Output(), fs)
		fmt.Fprint(fs.Output(), "\n"+refineSpecHelp)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := requireFlags(fs, "answers", *answers, "constraints", *specPath, "out", *out); err != nil {
		return err
	}
	sidecar := sidecarPath(*out)
	if err := fileio.CheckOutputs(
		[]fileio.Named{{Flag: "--answers", Path: *answers}, {Flag: "--constraints", Path: *specPath}},
		[]fileio.Named{{Flag: "--out", Path: *out}, {Flag: "sidecar", Path: sidecar}}, *force,
	); err != nil {
		return usageErr(fs, "%v", err)
	}
	names, values, err := refineReadAnswers("--answers", *answers, *nameCol, *valueCol)
	if err != nil {
		return err
	}
	k, err := refineReadKnowledge(*specPath, names)
	if err != nil {
		return err
	}
	r, err := refine.NewRefiner(len(names), k)
	if err != nil {
		return fmt.Errorf("%s: %w", *specPath, err)
	}
	refined := make([]float64, len(values))
	if err := r.Refine(ctx, refined, values); err != nil {
		return err
	}
	res := refineResult{Answers: *answers, Constraints: *specPath, Out: *out, Sidecar: sidecar, Method: r.Method(),
		Order: len(k.Order), Ranges: k.Lower != nil || k.Upper != nil, PostProcessing: r.PostProcessing()}
	for _, eq := range k.Equalities {
		res.Equalities = append(res.Equalities, refineEquality{Name: eq.Label, Public: eq.Public})
		if !eq.Public {
			res.DataDependent = append(res.DataDependent, eq.Label)
		}
	}
	if res.PostProcessing {
		res.Guarantee = "inherited"
		res.Privacy = "post-processing: every constraint is public, so the refined answers are exactly as private as the noisy answers (same eps)"
	} else {
		f := false
		res.Private, res.Guarantee = &f, "none"
		res.Privacy = fmt.Sprintf("equalities %s depend on the data: the refined answers are NOT covered by the eps of the noisy answers; 'knowdp refine rho' computes their privacy loss and the noise scale that keeps eps", quoteList(res.DataDependent))
	}
	meta, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	writeCSV := func(w io.Writer) error {
		cw := csv.NewWriter(w)
		if err := cw.Write([]string{*nameCol, *valueCol}); err != nil {
			return err
		}
		for i, name := range names {
			if err := cw.Write([]string{name, formatValue(refined[i])}); err != nil {
				return err
			}
		}
		cw.Flush()
		return cw.Error()
	}
	if err := fileio.WritePair(
		fileio.File{Path: *out, Write: writeCSV},
		fileio.File{Path: sidecar, Write: func(w io.Writer) error { _, err := w.Write(append(meta, '\n')); return err }}, *force,
	); err != nil {
		return err
	}
	if *asJSON {
		res.Refined = map[string]float64{}
		for i, n := range names {
			res.Refined[n] = refined[i]
		}
		return writeJSON(e.stdout, res)
	}
	fmt.Fprintf(e.stdout, "refined %d answers (%s) -> %s and %s\n", len(names), r.Method(), *out, sidecar)
	if res.PostProcessing {
		fmt.Fprintln(e.stdout, "privacy: every constraint is public, so this is post-processing: the refined answers keep the eps of the noisy answers")
		return nil
	}
	fmt.Fprintf(e.stdout, "privacy: WARNING: equalities %s depend on the data; the refined answers are NOT covered by the eps of the noisy answers. Run 'knowdp refine rho' to compute their privacy loss and the noise scale that keeps eps.\n", quoteList(res.DataDependent))
	return nil
}

// refineResult is the sidecar of knowdp refine and its --json output.
type refineResult struct {
	Answers        string           `json:"answers"`
	Constraints    string           `json:"constraints"`
	Out            string           `json:"out"`
	Sidecar        string           `json:"sidecar"`
	Method         string           `json:"method"`
	Equalities     []refineEquality `json:"equalities"`
	Order          int              `json:"order_chains"`
	Ranges         bool             `json:"ranges"`
	DataDependent  []string         `json:"data_dependent"`
	PostProcessing bool             `json:"post_processing"`
	// Private is null when the refinement is post-processing (the answers
	// are as private as the noisy answers, which knowdp did not produce)
	// and false when a data-dependent equality voids that.
	Private   *bool              `json:"private"`
	Guarantee string             `json:"guarantee"`
	Privacy   string             `json:"privacy"`
	Refined   map[string]float64 `json:"refined,omitempty"`
}

type refineEquality struct {
	Name   string `json:"name"`
	Public bool   `json:"public"`
}

// formatValue formats a computed value rounded to 12 significant digits,
// so that floating-point artefacts of the solve (21.787499999999998) do
// not reach the output, in plain notation where that is reasonable.
func formatValue(v float64) string {
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 12, 64), 64)
	if err != nil {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	if r == 0 {
		return "0"
	}
	if a := math.Abs(r); a >= 1e-6 && a < 1e21 {
		return strconv.FormatFloat(r, 'f', -1, 64)
	}
	return strconv.FormatFloat(r, 'g', -1, 64)
}

func quoteList(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	q := make([]string, len(s))
	for i, x := range s {
		q[i] = strconv.Quote(x)
	}
	return strings.Join(q, ", ")
}

// openInput opens a file named by a flag, so that a missing or unreadable
// file is reported with the flag and the file, and closes it.
func checkInput(flagName, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", flagName, err)
	}
	return f.Close()
}

// maxRefineAnswers bounds the answers file.
const maxRefineAnswers = 1 << 27

// refineReadAnswers reads names and finite values from a CSV file named by
// flag flagName.
func refineReadAnswers(flagName, path, nameCol, valueCol string) ([]string, []float64, error) {
	if err := checkInput(flagName, path); err != nil {
		return nil, nil, err
	}
	c, err := source.OpenCSV(path)
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	ni, err := c.Column(nameCol)
	if err != nil {
		return nil, nil, err
	}
	vi, err := c.Column(valueCol)
	if err != nil {
		return nil, nil, err
	}
	var names []string
	var values []float64
	seen := map[string]int{}
	for {
		rec, err := c.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		name := strings.TrimSpace(rec[ni])
		if name == "" {
			return nil, nil, c.Errorf(ni, "empty answer name")
		}
		if row, dup := seen[name]; dup {
			return nil, nil, c.Errorf(ni, "answer %q already appears in row %d", name, row)
		}
		seen[name] = c.Row()
		v, err := strconv.ParseFloat(strings.TrimSpace(rec[vi]), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, nil, c.Errorf(vi, "value %q of answer %q is not a finite number", rec[vi], name)
		}
		if len(names) == maxRefineAnswers {
			return nil, nil, fmt.Errorf("%s: more than %d answers", path, maxRefineAnswers)
		}
		names, values = append(names, name), append(values, v)
	}
	if len(names) == 0 {
		return nil, nil, fmt.Errorf("%s: no answers", path)
	}
	return names, values, nil
}

// refineReadKnowledge reads a constraints file and resolves it against names.
func refineReadKnowledge(path string, names []string) (refine.Knowledge, error) {
	f, err := os.Open(path)
	if err != nil {
		return refine.Knowledge{}, fmt.Errorf("--constraints: %w", err)
	}
	defer f.Close()
	spec, err := refine.DecodeSpec(f)
	if err != nil {
		return refine.Knowledge{}, fmt.Errorf("%s: %w", path, err)
	}
	k, err := spec.Knowledge(names)
	if err != nil {
		return refine.Knowledge{}, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// refineRhoResult is the machine-readable output of "refine rho".
type refineRhoResult struct {
	Answers         int      `json:"answers"`
	Universe        int      `json:"universe"`
	Neighbours      string   `json:"neighbours"`
	Constraints     []string `json:"constraints"`
	DataDependent   []string `json:"data_dependent"`
	Release         []string `json:"release"`
	RawSensitivity  float64  `json:"raw_sensitivity"`
	Sensitivity     *float64 `json:"sensitivity"` // null when Distinguishable
	Distinguishable bool     `json:"distinguishable"`
	WorstNeighbour  string   `json:"worst_neighbour"`
	// Sigma is the Laplace scale rho is reported at: --sigma, or by default
	// the plain Laplace scale raw_sensitivity/eps (SigmaSource says which).
	Sigma       float64 `json:"sigma"`
	SigmaSource string  `json:"sigma_source"`
	// Rho is the privacy loss at Sigma; null, with RhoInfinite true, when
	// the release reveals a data-dependent constant (the command then exits
	// with status 1).
	Rho             *float64 `json:"rho"`
	RhoInfinite     bool     `json:"rho_infinite"`
	Epsilon         float64  `json:"epsilon"`
	CalibratedScale *float64 `json:"calibrated_scale"` // null when no scale works
	CalibratedGrid  *float64 `json:"calibrated_grid,omitempty"`
	CalibrationNote string   `json:"calibration_note,omitempty"`
}

// errRhoInfinite is returned (after the result is printed) when no noise
// scale makes the refinement private.
var errRhoInfinite = errors.New("rho is infinite: the released refined answers reveal a data-dependent constant exactly; release fewer answers (try --release worst) or use public constraints only")

func runRefineRho(_ context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "refine rho", "refine rho --queries FILE --constraints FILE --epsilon X [--sigma X] [--release all|worst|A,B,..] [--neighbours add-remove|substitute] [--json]")
	queriesPath := fs.String("queries", "", "query matrix CSV `FILE` (required): a header 'name,<universe element>,...' and one row per answer, its name then its coefficient on each universe element (the answer is the sum of coefficient × count)")
	specPath := fs.String("constraints", "", "constraints JSON `FILE` with equalities only (required; same format as 'knowdp refine')")
	epsilon := fs.Float64("epsilon", 0, "eps of the noisy answers: sets the default --sigma and the target of the calibrated scale (required)")
	sigma := fs.Float64("sigma", 0, "Laplace scale of the noise on the raw answers at which to report rho (default: the plain scale raw sensitivity/eps)")
	releaseFlag := fs.String("release", "all", "refined answers released: all, worst (Definition 5: the worst subset that does not reveal a constant; at most 12 answers), or a comma-separated list of `NAMES`")
	neighbours := fs.String("neighbours", "add-remove", "neighbouring databases: add-remove (one record added or removed) or substitute (one record replaced)")
	asJSON := fs.Bool("json", false, "print the result as JSON (full precision)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: knowdp refine rho --queries FILE --constraints FILE --epsilon X [flags]\n\n")
		fmt.Fprint(fs.Output(), `Computes the privacy loss rho of releasing the least-squares refinement of noisy
answers (Laplace noise of scale sigma on each) under the equalities of the constraints
file, over all neighbouring databases of the query matrix's universe, names the worst
neighbours, and calibrates the Laplace scale that makes the release eps-DP. Each
equality's constant is b·mu on each database, so it moves with the data unless the
constraint holds by definition; equalities marked "public" are checked not to move.
It reports rho at --sigma (default: the plain Laplace scale raw sensitivity/eps, the
noise the answers would have at eps) and the scale that keeps eps. It exits with
status 1 when rho is infinite at every scale.

Flags:
`)
		cli.PrintFlags(fs.Output(), fs)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := requireFlags(fs, "queries", *queriesPath, "constraints", *specPath); err != nil {
		return err
	}
	switch {
	case *epsilon == 0:
		return usageErr(fs, "missing required flag --epsilon")
	case math.IsNaN(*sigma) || math.IsInf(*sigma, 0) || *sigma < 0:
		return usageErr(fs, "--sigma must be a positive number, got %v", *sigma)
	}
	eps, err := privacy.NewEpsilon(*epsilon)
	if err != nil {
		return usageErr(fs, "--epsilon: %v", err)
	}
	var rel refine.Relation
	switch *neighbours {
	case "add-remove":
		rel = refine.AddRemove
	case "substitute":
		rel = refine.Substitute
	default:
		return usageErr(fs, "--neighbours must be add-remove or substitute, got %q", *neighbours)
	}
	names, universe, q, err := refineReadQueryMatrix(*queriesPath)
	if err != nil {
		return err
	}
	k, err := refineReadKnowledge(*specPath, names)
	if err != nil {
		return err
	}
	if len(k.Order) > 0 || k.Lower != nil || k.Upper != nil {
		return fmt.Errorf("%s: 'refine rho' analyses linear refinements, so equalities only: remove the order, ranges and nonnegative fields (refinements by orders and ranges fixed without the data are post-processing and keep eps)", *specPath)
	}
	if len(k.Equalities) == 0 {
		return fmt.Errorf("%s: no equalities to analyse", *specPath)
	}
	eqs, err := refine.NewEqualities(len(names), k.Equalities)
	if err != nil {
		return fmt.Errorf("%s: %w", *specPath, err)
	}
	lin, err := refine.LeastSquares(eqs)
	if err != nil {
		return err
	}
	w := refine.Workload{Queries: q, Universe: universe, Relation: rel}
	var release []int
	worst := false
	switch *releaseFlag {
	case "all":
	case "worst":
		worst = true
	default:
		index := map[string]int{}
		for i, n := range names {
			index[n] = i
		}
		for _, n := range strings.Split(*releaseFlag, ",") {
			i, ok := index[strings.TrimSpace(n)]
			if !ok {
				return fmt.Errorf("--release: unknown answer %q (the answers are in %s)", strings.TrimSpace(n), *queriesPath)
			}
			release = append(release, i)
		}
	}
	res := refineRhoResult{Answers: len(names), Universe: len(universe), Neighbours: *neighbours, Epsilon: eps.Float64()}
	for _, eq := range eqs.Constraints() {
		res.Constraints = append(res.Constraints, eq.Label)
		if !eq.Public {
			res.DataDependent = append(res.DataDependent, eq.Label)
		}
	}
	// The loss at scale 1 gives the effective sensitivity; rho scales as
	// 1/sigma.
	var loss refine.Loss
	if worst {
		loss, err = lin.WorstRelease(w, 1)
	} else {
		loss, err = lin.Loss(w, release, 1)
	}
	if err != nil {
		return err
	}
	for _, i := range loss.Release {
		res.Release = append(res.Release, names[i])
	}
	res.RawSensitivity = loss.Raw
	res.Distinguishable = loss.Distinguishable
	res.WorstNeighbour = loss.Worst.Name
	if !loss.Distinguishable {
		g := loss.Sensitivity
		res.Sensitivity = &g
	}
	switch {
	case loss.Distinguishable:
		res.CalibrationNote = "no noise scale works: the released refined answers reveal a data-dependent constant exactly; release fewer answers (try --release worst) or use public constraints only"
	case loss.Sensitivity == 0:
		res.CalibrationNote = "the released refined answers do not depend on the data"
	default:
		lap, _, err := lin.Calibrate(w, loss.Release, eps)
		if err != nil {
			return err
		}
		scale, grid := lap.Scale(), lap.Grid()
		res.CalibratedScale, res.CalibratedGrid = &scale, &grid
	}
	res.Sigma, res.SigmaSource = *sigma, "given (--sigma)"
	if res.Sigma == 0 {
		res.Sigma, res.SigmaSource = loss.Raw/eps.Float64(), "default: the plain Laplace scale raw_sensitivity/eps"
	}
	if !loss.Distinguishable {
		rho := loss.Sensitivity / res.Sigma
		res.Rho = &rho
	}
	res.RhoInfinite = loss.Distinguishable
	if *asJSON {
		if err := writeJSON(e.stdout, res); err != nil {
			return err
		}
	} else {
		refinePrintRho(e.stdout, res)
	}
	if res.RhoInfinite {
		return errRhoInfinite
	}
	return nil
}

func refinePrintRho(w io.Writer, r refineRhoResult) {
	quoted := quoteList
	fmt.Fprintf(w, "refinement:            least squares of %d answers under %d equalities (data-dependent: %s)\n", r.Answers, len(r.Constraints), quoted(r.DataDependent))
	fmt.Fprintf(w, "neighbours:            %s over %d universe elements\n", r.Neighbours, r.Universe)
	fmt.Fprintf(w, "released:              %s\n", quoted(r.Release))
	fmt.Fprintf(w, "raw sensitivity:       %.6g (what plain Laplace noise is calibrated to)\n", r.RawSensitivity)
	if r.Distinguishable {
		fmt.Fprintf(w, "effective sensitivity: infinite: for the neighbours %s the release reveals a data-dependent constant exactly\n", r.WorstNeighbour)
		fmt.Fprintf(w, "rho:                   +Inf at any Laplace scale\n")
	} else {
		fmt.Fprintf(w, "effective sensitivity: %.6g (worst neighbours: %s)\n", *r.Sensitivity, r.WorstNeighbour)
		fmt.Fprintf(w, "rho:                   %.6g at Laplace scale %.6g (%s)\n", *r.Rho, r.Sigma, r.SigmaSource)
	}
	if r.CalibratedScale != nil {
		fmt.Fprintf(w, "calibrated:            Laplace scale %.9g (grid %g) makes the release %g-DP\n", *r.CalibratedScale, *r.CalibratedGrid, r.Epsilon)
	} else {
		fmt.Fprintf(w, "calibrated:            %s\n", r.CalibrationNote)
	}
}

// refineMaxUniverse bounds the query matrix's columns.
const refineMaxUniverse = 1 << 16

// refineReadQueryMatrix reads a query matrix: a header "name,<universe...>" and one
// row per answer.
func refineReadQueryMatrix(path string) (names, universe []string, q *mat.Dense, err error) {
	if err := checkInput("--queries", path); err != nil {
		return nil, nil, nil, err
	}
	c, err := source.OpenCSV(path)
	if err != nil {
		return nil, nil, nil, err
	}
	defer c.Close()
	h := c.Header()
	if len(h) < 2 {
		return nil, nil, nil, fmt.Errorf("%s: the header needs a name column and at least one universe element", path)
	}
	if len(h)-1 > refineMaxUniverse {
		return nil, nil, nil, fmt.Errorf("%s: %d universe elements, more than the limit %d", path, len(h)-1, refineMaxUniverse)
	}
	universe = append([]string(nil), h[1:]...)
	var data []float64
	seen := map[string]int{}
	for {
		rec, err := c.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, nil, err
		}
		name := strings.TrimSpace(rec[0])
		if name == "" {
			return nil, nil, nil, c.Errorf(0, "empty answer name")
		}
		if row, dup := seen[name]; dup {
			return nil, nil, nil, c.Errorf(0, "answer %q already appears in row %d", name, row)
		}
		seen[name] = c.Row()
		for j := 1; j < len(rec); j++ {
			v, err := strconv.ParseFloat(strings.TrimSpace(rec[j]), 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, nil, nil, c.Errorf(j, "coefficient %q of answer %q is not a finite number", rec[j], name)
			}
			data = append(data, v)
		}
		names = append(names, name)
		if len(names) > 2048 {
			return nil, nil, nil, fmt.Errorf("%s: more than 2048 answers; the privacy analysis is dense (O(n³))", path)
		}
	}
	if len(names) == 0 {
		return nil, nil, nil, fmt.Errorf("%s: no answers", path)
	}
	return names, universe, mat.NewDense(len(names), len(universe), data), nil
}
