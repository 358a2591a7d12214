// Package report renders a knowdp release as one self-contained HTML page
// that a person can read: its privacy story, what was spent and how it was
// split, what is exact, the expected error of every table and level, the
// largest cells' margins relative to their counts, and a check, recomputed
// from the released numbers, that the tables add up to each other and to
// the invariants.
//
// Load reads a release's metadata and tables from a file system (the
// release's directory: nothing else is read); Check and the statistics are
// computed from them alone; Render writes the page, with inline CSS and
// inline SVG plots and no external reference, so that opening it makes no
// network request.
package report

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/knowdp/knowdp/sidecar"
)

// Release is a release as the report reads it: its metadata and its
// tables, in the order the metadata lists them.
type Release struct {
	Meta   Metadata
	Tables []*Table
}

// Metadata is what a release's metadata file says, in one form for the
// three kinds of file knowdp writes: release.json of a release of several
// tables, the sidecar of a one-table release (OUT.json beside OUT.csv),
// and estimate.json of knowdp estimate. Fields a file does not state are
// left zero (or nil, where zero would be a claim).
type Metadata struct {
	// File is the metadata file's name.
	File string
	// OneTable is true for a one-table release's sidecar.
	OneTable bool
	// Mechanism, Composition and Estimate say what was done, in words.
	Mechanism, Composition, Estimate string
	// Note is a remark the file makes about itself (estimate.json's).
	Note string
	// Gaussian is true when the privacy loss is stated as zCDP's rho.
	Gaussian bool
	// Epsilon is the privacy loss spent; for a Gaussian release, the
	// equivalent (Epsilon, Delta)-DP guarantee of Rho.
	Epsilon, Delta, Rho float64
	// EpsilonBudget and RhoBudget are the budgets given, where stated; the
	// loss spent is at most the budget.
	EpsilonBudget, RhoBudget float64
	// Neighbours is the neighbour relation the guarantee is about.
	Neighbours string
	// Private is the file's "private"; Seeded and DomainsFromData are nil
	// where the file does not say.
	Private                 bool
	Seeded, DomainsFromData *bool
	// Guarantee is "unconditional", "conditional", "none" or "inherited";
	// GuaranteeNote says on what a conditional guarantee rests.
	Guarantee, GuaranteeNote string
	// ReleasedExactly is true when the invariants determine the released
	// table, so its counts are the true counts.
	ReleasedExactly bool
	Warnings        []string
	// The budget split of a release of several tables.
	Split, Strategy, SplitMethod string
	Objective                    *float64
	// ObjectiveBound bounds the objective over every split among the
	// candidate measurements BoundOver names (not every strategy), and
	// OptimalityGap is the objective's distance to it.
	ObjectiveBound *float64
	OptimalityGap  *float64
	BoundOver      string
	// MOE90Note says what the margins of error cover.
	MOE90Note string
	// Measurements are the noisy measurements the budget was spent on.
	Measurements []Measurement
	// Exact lists the invariants: cuboids (or views) published exactly.
	Exact [][]string
	// Hierarchy names the hierarchical dimension of a release across its
	// levels, and Levels is the error of its tables level by level.
	Hierarchy string
	Levels    []sidecar.LevelError
	// Tables describes the released tables.
	Tables []TableMeta
}

// Measurement is one noisy measurement: a cuboid, its share of the budget,
// the sensitivity its noise is calibrated to and the noise's scale.
type Measurement struct {
	Cuboid []string
	// Epsilon is the share of a Laplace measurement, Rho of a Gaussian.
	Epsilon, Rho float64
	// Sensitivity is the L1 generic sensitivity and L2Sensitivity the L2
	// one (Gaussian), each with the rule it comes from.
	Sensitivity       float64
	SensitivityRule   string
	L2Sensitivity     float64
	L2SensitivityRule string
	// Scale is the Laplace scale, Sigma the Gaussian standard deviation,
	// Grid the grid the noise is drawn on.
	Scale, Sigma, Grid float64
}

// TableMeta is what the metadata says about one released table.
type TableMeta struct {
	Cuboid []string
	// File is the table's file name, in the release's directory.
	File string
	// Public tables are published exactly (an invariant determines them);
	// Measured ones had noise of their own; the others are estimated from
	// the measurements of the cuboids that contain them.
	Public, Measured bool
	// MOE90 is the margin of error the metadata states for the table (the
	// largest of its cells' where they differ).
	MOE90 float64
	// Variance is a cell's error variance, where stated.
	Variance *float64
	Note     string
	// Post-processing.
	NonNeg, Integer     bool
	IntegerExact        *bool
	IntegerMaxDeviation float64
	IntegerMethod       string
}

// Name is the table's cuboid as knowdp writes it: "{geo:state,sex}", "{}"
// for the grand total.
func (t TableMeta) Name() string { return CuboidName(t.Cuboid) }

// CuboidName formats a cuboid's dimensions as knowdp does: "{year,colour}".
func CuboidName(c []string) string { return "{" + strings.Join(c, ",") + "}" }

// rawMeta is the union of the fields of the three metadata files.
type rawMeta struct {
	Mechanism     string          `json:"mechanism"`
	Composition   string          `json:"composition"`
	Note          string          `json:"note"`
	Epsilon       *float64        `json:"epsilon"`
	EpsilonBudget float64         `json:"epsilon_budget"`
	Rho           float64         `json:"rho"`
	RhoBudget     float64         `json:"rho_budget"`
	Delta         float64         `json:"delta"`
	Neighbours    string          `json:"neighbours"`
	Split         string          `json:"split"`
	Strategy      string          `json:"strategy"`
	Objective     *float64        `json:"objective"`
	ObjectiveLB   *float64        `json:"objective_lower_bound"` // before split_lower_bound
	OptimalityGap *float64        `json:"optimality_gap"`        // before split_gap
	SplitBound    *float64        `json:"split_lower_bound"`
	SplitGap      *float64        `json:"split_gap"`
	SplitOver     string          `json:"split_bound_over"`
	SplitMethod   string          `json:"split_method"`
	Guarantee     string          `json:"guarantee"`
	GuaranteeNote string          `json:"guarantee_note"`
	Estimate      string          `json:"estimate"`
	MOE90         json.RawMessage `json:"moe90"`
	MOE90Note     string          `json:"moe90_note"`
	// A list of measurements in release.json, the measurements file's
	// name in estimate.json.
	Measurements    json.RawMessage      `json:"measurements"`
	Tables          *[]rawTable          `json:"tables"`
	Exact           [][]string           `json:"exact"`
	Seeded          *bool                `json:"seeded"`
	DomainsFromData *bool                `json:"domains_from_data"`
	Private         *bool                `json:"private"`
	ReleasedExactly bool                 `json:"released_exactly"`
	Warnings        []string             `json:"warnings"`
	Hierarchy       string               `json:"hierarchy"`
	Levels          []sidecar.LevelError `json:"levels"`

	// A one-table release's sidecar.
	Cuboid              *[]string `json:"cuboid"`
	File                string    `json:"file"`
	Sensitivity         float64   `json:"sensitivity"`
	SensitivityRule     string    `json:"sensitivity_rule"`
	Scale               float64   `json:"scale"`
	Grid                float64   `json:"grid"`
	L2Sensitivity       float64   `json:"l2_sensitivity"`
	L2SensitivityRule   string    `json:"l2_sensitivity_rule"`
	Sigma               float64   `json:"sigma"`
	NonNeg              bool      `json:"nonneg"`
	Integer             bool      `json:"integer"`
	IntegerExact        *bool     `json:"integer_exact"`
	IntegerMaxDeviation float64   `json:"integer_max_deviation"`
	IntegerMethod       string    `json:"integer_method"`
}

type rawMeasurement struct {
	Cuboid            []string `json:"cuboid"`
	Epsilon           float64  `json:"epsilon"`
	Rho               float64  `json:"rho"`
	Sensitivity       float64  `json:"sensitivity"`
	SensitivityRule   string   `json:"sensitivity_rule"`
	L2Sensitivity     float64  `json:"l2_sensitivity"`
	L2SensitivityRule string   `json:"l2_sensitivity_rule"`
	Scale             float64  `json:"scale"`
	Sigma             float64  `json:"sigma"`
	Grid              float64  `json:"grid"`
}

type rawTable struct {
	Cuboid              *[]string `json:"cuboid"`
	File                string    `json:"file"`
	Public              bool      `json:"public"`
	Measured            bool      `json:"measured"`
	MOE90               float64   `json:"moe90"`
	Variance            *float64  `json:"variance"`
	Note                string    `json:"note"`
	NonNeg              bool      `json:"nonneg"`
	Integer             bool      `json:"integer"`
	IntegerExact        *bool     `json:"integer_exact"`
	IntegerMaxDeviation float64   `json:"integer_max_deviation"`
	IntegerMethod       string    `json:"integer_method"`
}

// allPublic reports whether a release.json's tables are all public (the
// invariants determine them, so their counts are the true counts), the
// way knowdp release says what release-graph's released_exactly says.
func allPublic(tables *[]rawTable) bool {
	if tables == nil || len(*tables) == 0 {
		return false
	}
	for _, t := range *tables {
		if !t.Public {
			return false
		}
	}
	return true
}

// ErrNotRelease is wrapped by ParseMetadata's error for a JSON file that is
// not a release's metadata (a refine or release-graph sidecar, a schema).
var ErrNotRelease = errors.New("not the metadata of a knowdp release")

// ParseMetadata parses a release's metadata file (named name, for errors):
// release.json, a one-table release's sidecar or estimate.json. A field
// the privacy story needs that is missing or of the wrong type is an error
// naming it.
func ParseMetadata(name string, b []byte) (Metadata, error) {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	var r rawMeta
	if err := json.Unmarshal(b, &r); err != nil {
		return Metadata{}, fmt.Errorf("%s: %w", name, jsonError(err))
	}
	switch {
	case r.Tables == nil && r.Cuboid == nil:
		return Metadata{}, fmt.Errorf(`%s: %w (it has neither "tables" nor "cuboid")`, name, ErrNotRelease)
	case r.Private == nil:
		return Metadata{}, fmt.Errorf(`%s: %w (it has no "private" field)`, name, ErrNotRelease)
	case r.Epsilon == nil:
		return Metadata{}, fmt.Errorf(`%s: %w (it has no "epsilon" field)`, name, ErrNotRelease)
	}
	m := Metadata{
		File:            name,
		Mechanism:       r.Mechanism,
		Composition:     r.Composition,
		Estimate:        r.Estimate,
		Note:            r.Note,
		Epsilon:         *r.Epsilon,
		EpsilonBudget:   r.EpsilonBudget,
		Rho:             r.Rho,
		RhoBudget:       r.RhoBudget,
		Delta:           r.Delta,
		Gaussian:        r.Rho > 0,
		Neighbours:      r.Neighbours,
		Private:         *r.Private,
		Seeded:          r.Seeded,
		DomainsFromData: r.DomainsFromData,
		Guarantee:       r.Guarantee,
		GuaranteeNote:   r.GuaranteeNote,
		ReleasedExactly: r.ReleasedExactly || allPublic(r.Tables),
		Warnings:        r.Warnings,
		Split:           r.Split,
		Strategy:        r.Strategy,
		SplitMethod:     r.SplitMethod,
		Objective:       r.Objective,
		ObjectiveBound:  cmp.Or(r.SplitBound, r.ObjectiveLB),
		OptimalityGap:   cmp.Or(r.SplitGap, r.OptimalityGap),
		BoundOver:       r.SplitOver,
		MOE90Note:       r.MOE90Note,
		Exact:           r.Exact,
		Hierarchy:       r.Hierarchy,
		Levels:          r.Levels,
	}
	if r.Tables == nil {
		return Metadata{}, fmt.Errorf(`%s: %w (it has no "tables": written by a knowdp older than the one release path?)`, name, ErrNotRelease)
	}
	if len(r.MOE90) > 0 && r.MOE90[0] == '"' {
		if err := json.Unmarshal(r.MOE90, &m.MOE90Note); err != nil {
			return Metadata{}, fmt.Errorf("%s: moe90: %w", name, err)
		}
	}
	if len(r.Measurements) > 0 && r.Measurements[0] == '[' {
		var ms []rawMeasurement
		if err := json.Unmarshal(r.Measurements, &ms); err != nil {
			return Metadata{}, fmt.Errorf("%s: measurements: %w", name, jsonError(err))
		}
		for _, x := range ms {
			m.Measurements = append(m.Measurements, Measurement(x))
		}
	}
	if len(*r.Tables) == 0 {
		return Metadata{}, fmt.Errorf("%s: the release lists no tables", name)
	}
	for i, t := range *r.Tables {
		if t.Cuboid == nil {
			return Metadata{}, fmt.Errorf(`%s: table %d has no "cuboid"`, name, i+1)
		}
		if t.File == "" {
			return Metadata{}, fmt.Errorf(`%s: table %d (%s) has no "file"`, name, i+1, CuboidName(*t.Cuboid))
		}
		m.Tables = append(m.Tables, TableMeta{
			Cuboid: *t.Cuboid, File: t.File, Public: t.Public, Measured: t.Measured,
			MOE90: t.MOE90, Variance: t.Variance, Note: t.Note,
			NonNeg: t.NonNeg, Integer: t.Integer, IntegerExact: t.IntegerExact,
			IntegerMaxDeviation: t.IntegerMaxDeviation, IntegerMethod: t.IntegerMethod,
		})
	}
	// One table measured once (or public): the whole loss is spent on it.
	m.OneTable = len(m.Tables) == 1 && (len(m.Measurements) == 1 || len(m.Measurements) == 0 && m.Tables[0].Public)
	return m, nil
}

// jsonError names the field of a type mismatch.
func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Errorf("field %q: %s where %s is expected", te.Field, te.Value, te.Type)
	}
	return err
}

// Verdict is the privacy story's headline: whether the release is private,
// in which sense, and why not where it is not.
type Verdict struct {
	// Class is "private", "conditional", "exact" (the released counts are
	// the true counts, determined by the invariants) or "not-private".
	Class string
	// Headline is one sentence; Reasons are the facts behind a release
	// that is not private or privately only under a condition.
	Headline string
	Reasons  []string
}

// Verdict decides the headline from the metadata. A release is shown as
// private only if the file says so and nothing in it contradicts that: a
// seeded run, domains read from the data or a guarantee of "none" make it
// not private whatever "private" says.
func (m Metadata) Verdict() Verdict {
	var why []string
	if m.Seeded != nil && *m.Seeded {
		why = append(why, "the noise was seeded (--seed): anyone who knows the seed can subtract it")
	}
	if m.DomainsFromData != nil && *m.DomainsFromData {
		why = append(why, "the domains were read from the data (--infer-domains): the set of cells depends on who is in the table")
	}
	if m.Guarantee == "none" {
		why = append(why, `the metadata states the guarantee "none"`)
	}
	if !m.Private {
		why = append(why, `the metadata states "private": false`)
	}
	if len(why) > 0 {
		return Verdict{Class: "not-private", Headline: "NOT differentially private: do not publish these tables as private.", Reasons: why}
	}
	loss := m.LossText()
	if m.ReleasedExactly {
		return Verdict{Class: "exact", Headline: "The released counts are the TRUE counts: " + loss + " holds only because they add nothing to the invariants, which are public by assumption.",
			Reasons: []string{"the invariants determine the released table, so no noise was added to it: publish it only if the invariants are public"}}
	}
	switch m.Guarantee {
	case "conditional":
		r := []string{"the guarantee rests on a sensitivity given by the caller that knowdp could not check"}
		if m.GuaranteeNote != "" {
			r = append(r, m.GuaranteeNote)
		}
		return Verdict{Class: "conditional", Headline: "Private only under a condition: " + loss + ", if the sensitivity given is at least the true one.", Reasons: r}
	case "inherited":
		return Verdict{Class: "private", Headline: "As private as the release it was estimated from: " + loss + " (post-processing).", Reasons: nil}
	}
	return Verdict{Class: "private", Headline: "Differentially private: " + loss + ".", Reasons: nil}
}

// LossText states the privacy loss spent, rounded up: "ε = 1", or for a
// Gaussian release "ρ = 1 (zCDP), which implies (ε, δ) = (7.76622, 1e-06)".
func (m Metadata) LossText() string {
	if m.Gaussian {
		s := "ρ = " + Up(m.Rho, 6) + " (zero-concentrated DP)"
		if m.Delta > 0 {
			s += ", which implies (ε, δ)-DP with ε = " + Up(m.Epsilon, 6) + " at δ = " + Up(m.Delta, 6)
		}
		return s
	}
	return "ε = " + Up(m.Epsilon, 6)
}
