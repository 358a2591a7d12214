package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/mat"

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
		return runRefineRho(ctx, e, args[1:])
	}
	fs := newFlagSet(e, "refine", "")
	answers := fs.String("answers", "", "noisy answers: CSV with a header, one answer per row (required)")
	nameCol := fs.String("name", "name", "column of --answers holding the answer names")
	valueCol := fs.String("value", "value", "column of --answers holding the noisy values")
	specPath := fs.String("constraints", "", "constraints JSON, format below (required)")
	out := fs.String("out", "", "output CSV of refined answers, columns as --name and --value (required)")
	fs.Usage = func() {
		fmt.Fprint(e.stderr, `Usage: knowdp refine --answers noisy.csv --constraints constraints.json --out refined.csv [flags]
       knowdp refine rho [flags]   (privacy loss of a refinement: 'knowdp refine rho --help')

Writes the least-squares refinement of the noisy answers: the answers closest to them
that satisfy every constraint.

Flags:
`)
		fs.PrintDefaults()
		fmt.Fprint(e.stderr, "\n"+refineSpecHelp)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *answers == "":
		return refineUsageErr(fs, "--answers is required")
	case *specPath == "":
		return refineUsageErr(fs, "--constraints is required")
	case *out == "":
		return refineUsageErr(fs, "--out is required")
	}
	names, values, err := refineReadAnswers(*answers, *nameCol, *valueCol)
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
	if err := fileio.WriteAtomic(*out, func(w io.Writer) error {
		cw := csv.NewWriter(w)
		if err := cw.Write([]string{*nameCol, *valueCol}); err != nil {
			return err
		}
		for i, name := range names {
			if err := cw.Write([]string{name, strconv.FormatFloat(refined[i], 'g', -1, 64)}); err != nil {
				return err
			}
		}
		cw.Flush()
		return cw.Error()
	}); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "refined %d answers (%s) -> %s\n", len(names), r.Method(), *out)
	if r.PostProcessing() {
		fmt.Fprintln(e.stdout, "privacy: every constraint is public, so this is post-processing: the refined answers keep the eps of the noisy answers")
		return nil
	}
	var dd []string
	for _, eq := range k.Equalities {
		if !eq.Public {
			dd = append(dd, fmt.Sprintf("%q", eq.Label))
		}
	}
	fmt.Fprintf(e.stdout, "privacy: WARNING: equalities %s depend on the data; the refined answers are NOT covered by the eps of the noisy answers. Run 'knowdp refine rho' to compute their privacy loss and the noise scale that keeps eps.\n", strings.Join(dd, ", "))
	return nil
}

// refineUsageErr reports a usage problem with the command's usage.
func refineUsageErr(fs *flag.FlagSet, msg string) error {
	fmt.Fprintln(fs.Output(), msg)
	fs.Usage()
	return errUsage
}

// maxRefineAnswers bounds the answers file.
const maxRefineAnswers = 1 << 27

// refineReadAnswers reads names and finite values from a CSV file.
func refineReadAnswers(path, nameCol, valueCol string) ([]string, []float64, error) {
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
		return refine.Knowledge{}, err
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
	Sigma           float64  `json:"sigma"`
	Rho             *float64 `json:"rho"` // null when Distinguishable
	Epsilon         float64  `json:"epsilon"`
	CalibratedScale *float64 `json:"calibrated_scale"` // null when no scale works
	CalibratedGrid  *float64 `json:"calibrated_grid,omitempty"`
	CalibrationNote string   `json:"calibration_note,omitempty"`
}

func runRefineRho(_ context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "refine rho", "refine rho --queries W.csv --constraints constraints.json --epsilon E [--sigma S] [--release all|worst|A,B,..] [--neighbours add-remove|substitute] [--json]")
	queriesPath := fs.String("queries", "", "query matrix CSV (required): a header 'name,<universe element>,...' and one row per answer, its name then its coefficient on each universe element (the answer is the sum of coefficient × count)")
	specPath := fs.String("constraints", "", "constraints JSON with equalities only (required; same format as 'knowdp refine')")
	epsilon := fs.Float64("epsilon", 0, "target eps for the calibrated scale (required)")
	sigma := fs.Float64("sigma", 0, "Laplace scale of the noise on the raw answers at which to report rho (default: the calibrated scale)")
	releaseFlag := fs.String("release", "all", "refined answers released: all, worst (Definition 5: the worst subset that does not reveal a constant; at most 12 answers), or a comma-separated list of names")
	neighbours := fs.String("neighbours", "add-remove", "neighbouring databases: add-remove (one record added or removed) or substitute (one record replaced)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "Usage: knowdp refine rho --queries W.csv --constraints constraints.json --epsilon E [flags]\n\n")
		fmt.Fprint(e.stderr, `Computes the privacy loss rho of releasing the least-squares refinement of noisy
answers (Laplace noise of scale sigma on each) under the equalities of the constraints
file, over all neighbouring databases of the query matrix's universe, names the worst
neighbours, and calibrates the Laplace scale that makes the release eps-DP. Each
equality's constant is b·mu on each database, so it moves with the data unless the
constraint holds by definition; equalities marked "public" are checked not to move.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *queriesPath == "":
		return refineUsageErr(fs, "--queries is required")
	case *specPath == "":
		return refineUsageErr(fs, "--constraints is required")
	case *epsilon == 0:
		return refineUsageErr(fs, "--epsilon is required")
	case math.IsNaN(*sigma) || math.IsInf(*sigma, 0) || *sigma < 0:
		return refineUsageErr(fs, fmt.Sprintf("--sigma must be a positive number, got %v", *sigma))
	}
	eps, err := privacy.NewEpsilon(*epsilon)
	if err != nil {
		return fmt.Errorf("--epsilon: %w", err)
	}
	var rel refine.Relation
	switch *neighbours {
	case "add-remove":
		rel = refine.AddRemove
	case "substitute":
		rel = refine.Substitute
	default:
		return refineUsageErr(fs, fmt.Sprintf("--neighbours must be add-remove or substitute, got %q", *neighbours))
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
	res.Sigma = *sigma
	if res.Sigma == 0 {
		if res.CalibratedScale == nil {
			res.Sigma = loss.Raw / eps.Float64() // the plain Laplace scale
		} else {
			res.Sigma = *res.CalibratedScale
		}
	}
	if !loss.Distinguishable {
		rho := loss.Sensitivity / res.Sigma
		res.Rho = &rho
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	refinePrintRho(e.stdout, res)
	return nil
}

func refinePrintRho(w io.Writer, r refineRhoResult) {
	quoted := func(s []string) string {
		if len(s) == 0 {
			return "none"
		}
		q := make([]string, len(s))
		for i, x := range s {
			q[i] = fmt.Sprintf("%q", x)
		}
		return strings.Join(q, ", ")
	}
	fmt.Fprintf(w, "refinement:            least squares of %d answers under %d equalities (data-dependent: %s)\n", r.Answers, len(r.Constraints), quoted(r.DataDependent))
	fmt.Fprintf(w, "neighbours:            %s over %d universe elements\n", r.Neighbours, r.Universe)
	fmt.Fprintf(w, "released:              %s\n", quoted(r.Release))
	fmt.Fprintf(w, "raw sensitivity:       %.6g (what plain Laplace noise is calibrated to)\n", r.RawSensitivity)
	if r.Distinguishable {
		fmt.Fprintf(w, "effective sensitivity: infinite: for the neighbours %s the release reveals a data-dependent constant exactly\n", r.WorstNeighbour)
		fmt.Fprintf(w, "rho:                   +Inf at any Laplace scale\n")
	} else {
		fmt.Fprintf(w, "effective sensitivity: %.6g (worst neighbours: %s)\n", *r.Sensitivity, r.WorstNeighbour)
		fmt.Fprintf(w, "rho:                   %.6g at Laplace scale %.6g\n", *r.Rho, r.Sigma)
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
