package release

// Releases per privacy unit: the rows of the fact table belong to units
// (persons, students, households) named by a column, and the guarantee is
// about a unit with all its rows. docs/sensitivity.md ("Privacy units")
// derives the sensitivities and docs/release.md ("Privacy units") what is
// published; in short:
//
//   - every unit keeps at most K of its rows, chosen uniformly at random
//     (package unit), and the measurements count the kept rows;
//   - every measurement is calibrated to K times its row-level generic
//     sensitivity (sensitivity.ForUnits), which covers one unit changed
//     in any way among tables that agree on the invariants;
//   - the invariants are the true counts of all the rows, published as
//     they are (they are public by assumption), and every table is
//     estimated consistent with them: nothing the bounding dropped is
//     published unless through a mechanism;
//   - K is given, or chosen by a private quantile of the rows per unit,
//     and the number of truncated units can be published privately; both
//     are charged to the release's budget.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/sensitivity"
	"github.com/knowdp/knowdp/sidecar"
	"github.com/knowdp/knowdp/unit"
)

// Default choices of a Unit.
const (
	// DefaultMaxRowsQuantile is the quantile of rows per unit a private
	// choice of K aims at.
	DefaultMaxRowsQuantile = 0.9
	// DefaultMaxRowsLimit is the largest K a private choice considers.
	DefaultMaxRowsLimit = 100
	// DefaultUnitShare is the part of the budget a private choice of K
	// (and the count of truncated units) takes by default.
	DefaultUnitShare = 0.1
)

// Unit says that the rows belong to privacy units and how much of a unit a
// release keeps. The guarantee is then per unit: see sidecar.Metadata.PrivacyUnit.
type Unit struct {
	// Column names the unit column: read to group the rows, never
	// released, never a dimension.
	Column string
	// MaxRows is K, the most rows a unit keeps; 0 asks for a private
	// choice: the Quantile (in (0, 1]; 0 means DefaultMaxRowsQuantile) of
	// the rows per unit among 1..Limit (0 means DefaultMaxRowsLimit).
	MaxRows  int
	Quantile float64
	Limit    int
	// Share, in [0, 1), is the part of the budget spent on the units
	// themselves: the private choice of K, and a private count of the
	// units with more than K rows (published as an estimate of the
	// bounding's bias). With MaxRows set, 0 publishes no count; with a
	// private choice, 0 means DefaultUnitShare.
	Share float64
	// chosen marks a spec re-planned with the K a private choice gave.
	chosen bool
}

// unitPlan is what NewPlan decided about the units.
type unitPlan struct {
	u    Unit
	spec Spec // the spec as given, before the units' share was taken
	k    int  // K, or the largest candidate of a private choice
	// The units' share: eps for a Laplace release; for a Gaussian one
	// rho, and the eps of the pure-DP unit mechanisms (eps^2/2 <= rho).
	eps privacy.Epsilon
	rho privacy.Rho
}

// rows returns K (0 for a plan without units).
func (u *unitPlan) rows() int {
	if u == nil {
		return 0
	}
	return u.k
}

// planUnit validates the spec's unit and returns its plan and the spec of
// the tables, whose budget is what the units' share leaves.
func planUnit(s *domain.Schema, spec Spec) (*unitPlan, Spec, error) {
	u := *spec.Unit
	up := &unitPlan{u: u, spec: spec}
	auto := u.MaxRows == 0
	switch {
	case u.Column == "":
		return nil, spec, errors.New("release: the privacy unit has no column")
	case u.MaxRows < 0 || u.MaxRows > sensitivity.MaxUnitRows:
		return nil, spec, fmt.Errorf("release: the rows per unit must be in [1, %d] (or 0 for a private choice), got %d", sensitivity.MaxUnitRows, u.MaxRows)
	case !(u.Share >= 0 && u.Share < 1):
		return nil, spec, fmt.Errorf("release: the units' share of the budget must be in [0, 1), got %v", u.Share)
	case u.Quantile < 0 || u.Quantile > 1 || math.IsNaN(u.Quantile):
		return nil, spec, fmt.Errorf("release: the quantile of rows per unit must be in (0, 1], got %v", u.Quantile)
	case u.Limit < 0 || u.Limit > sensitivity.MaxUnitRows:
		return nil, spec, fmt.Errorf("release: the largest rows per unit considered must be in [1, %d], got %d", sensitivity.MaxUnitRows, u.Limit)
	case !auto && (u.Quantile != 0 || u.Limit != 0) && !u.chosen:
		return nil, spec, errors.New("release: a quantile and a limit of rows per unit apply to a private choice of the rows per unit only")
	case spec.DomainsFromData:
		// Not an error: such a release is not private anyway.
	}
	if _, ok := s.Lookup(u.Column); ok {
		return nil, spec, fmt.Errorf("release: the privacy unit %q is a dimension of the schema: a unit is never released, so it cannot be a dimension", u.Column)
	}
	if auto {
		if u.Quantile == 0 {
			up.u.Quantile = DefaultMaxRowsQuantile
		}
		if u.Limit == 0 {
			up.u.Limit = DefaultMaxRowsLimit
		}
		if u.Share == 0 {
			up.u.Share = DefaultUnitShare
		}
		up.k = up.u.Limit
	} else {
		up.k = u.MaxRows
	}
	if up.u.Share > 0 {
		var err error
		if spec, err = takeShare(spec, up); err != nil {
			return nil, spec, err
		}
	}
	return up, spec, nil
}

// takeShare sets the units' share of the budget and returns the spec with
// what is left for the tables.
func takeShare(spec Spec, up *unitPlan) (Spec, error) {
	f := up.u.Share
	if spec.Mechanism == MechanismGaussian {
		total := spec.Rho.Float64()
		rho, err := privacy.NewRho(total * f)
		if err != nil {
			return spec, fmt.Errorf("release: the units' share of rho: %w", err)
		}
		rest, err := privacy.NewRho(total * (1 - f))
		if err != nil {
			return spec, fmt.Errorf("release: rho left for the tables: %w", err)
		}
		// The unit mechanisms are pure eps-DP, hence eps^2/2-zCDP.
		eps, err := privacy.NewEpsilon(math.Sqrt(2 * rho.Float64()))
		if err != nil {
			return spec, fmt.Errorf("release: the units' share of rho: %w", err)
		}
		up.rho, up.eps, spec.Rho = rho, eps, rest
		return spec, nil
	}
	total := spec.Epsilon.Float64()
	eps, err := privacy.NewEpsilon(total * f)
	if err != nil {
		return spec, fmt.Errorf("release: the units' share of epsilon: %w", err)
	}
	rest, err := privacy.NewEpsilon(total * (1 - f))
	if err != nil {
		return spec, fmt.Errorf("release: epsilon left for the tables: %w", err)
	}
	up.eps, spec.Epsilon = eps, rest
	return spec, nil
}

func unitL1(s sensitivity.Sensitivity, k int) (sensitivity.Sensitivity, error) {
	if k <= 1 {
		return s, nil
	}
	return sensitivity.ForUnits(s, k)
}

func unitL2(s sensitivity.L2Sensitivity, k int) (sensitivity.L2Sensitivity, error) {
	if k <= 1 {
		return s, nil
	}
	return sensitivity.ForUnitsL2(s, k)
}

// Unit returns the plan's privacy unit (nil for a release per row). For a
// private choice of K, MaxRows is 0 until RunUnits has chosen it.
func (p *Plan) Unit() *Unit {
	if p.unit == nil {
		return nil
	}
	u := p.unit.u
	return &u
}

// Measured returns the views that get noise: the ones whose counts RunUnits
// takes from the bounded rows. Every other view Needs lists is an
// invariant (or a table they determine), counted on all the rows.
func (p *Plan) Measured() []domain.View {
	var out []domain.View
	add := func(v domain.View) {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	switch {
	case p.cross != nil:
		for _, m := range p.cross.meas {
			add(m.v)
		}
	case p.single != nil:
		if len(p.flat.Release.Measurements) > 0 {
			add(domain.ViewOf(p.single.Cuboid))
		}
	case p.flat != nil:
		for _, m := range p.flat.Release.Measurements {
			add(domain.ViewOf(m.Cuboid))
		}
	default:
		exact := map[domain.View]bool{}
		for _, v := range p.spec.Exact {
			exact[v.Normal()] = true
		}
		for _, v := range p.views.Needs() {
			if !exact[v.Normal()] {
				add(v)
			}
		}
	}
	return out
}

// UnitDims returns the dimensions a collector of units must read the rows
// over: those of the views Needs lists.
func (p *Plan) UnitDims() domain.Cuboid {
	var d domain.Cuboid
	for _, v := range p.Needs() {
		d |= v.Dims
	}
	return d
}

// RunUnits draws a release per privacy unit. counts are the exact counts of
// the views Needs lists on all the rows (the invariants among them are
// published as they are); rows are the same rows grouped by unit over
// UnitDims (unit.Collector). The randomness is taken from r in a fixed
// order, which knowdp-beam follows to give the same seeded release:
//
//  1. the bounding key: r's next four 64-bit words (unit.NewKey(r));
//  2. the unit statistics (the private choice of K, then the count of
//     truncated units): one r.Split();
//  3. the release itself: Plan.Run with r.
//
// The rows are bounded to K per unit, the measured views counted on the
// bounded rows, and the plan (re-planned at the chosen K) run on them.
func (p *Plan) RunUnits(ctx context.Context, counts map[domain.View][]float64, rows *unit.Rows, r *noise.Rand) (*Release, error) {
	if p.unit == nil {
		return nil, errors.New("release: RunUnits needs a plan with a privacy unit")
	}
	if rows == nil {
		return nil, errors.New("release: no rows grouped by unit")
	}
	key := unit.NewKey(r)
	stats := r.Split()
	q, story, err := p.chooseUnits(stats, unit.NewHistogram(rows.RowsPerUnit(), p.unit.k))
	if err != nil {
		return nil, err
	}
	bounded, err := rows.Bound(ctx, story.MaxRows, key)
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	noisy, err := bounded.Counts(q.Measured())
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	story.Seeded = key.Seeded()
	return p.finishUnits(ctx, q, story, counts, noisy, r)
}

// RunBounded is RunUnits for a caller that groups and bounds the rows
// itself (knowdp-beam, with unit.Key.Keep): counts are the exact counts of
// the views Needs lists on all the rows, bounded the counts of the views
// Measured lists on the rows bounded to Unit().MaxRows per unit with the
// key drawn first from r (unit.NewKey(r), so r must be past it), and hist
// the histogram of rows per unit, exact up to MaxRows
// (unit.NewHistogram(perUnit, MaxRows)). The rest is RunUnits': one
// r.Split() for the unit statistics, then the release. A private choice of
// K needs the rows before they are bounded, so it is refused here.
func (p *Plan) RunBounded(ctx context.Context, counts, bounded map[domain.View][]float64, hist unit.Histogram, seeded bool, r *noise.Rand) (*Release, error) {
	if p.unit == nil {
		return nil, errors.New("release: RunBounded needs a plan with a privacy unit")
	}
	if p.unit.u.MaxRows == 0 {
		return nil, errors.New("release: a private choice of the rows per unit needs the rows before they are bounded: give the rows per unit, or use RunUnits")
	}
	stats := r.Split()
	q, story, err := p.chooseUnits(stats, hist)
	if err != nil {
		return nil, err
	}
	story.Seeded = seeded
	return p.finishUnits(ctx, q, story, counts, bounded, r)
}

// chooseUnits draws the unit statistics from stats, in order: the private
// choice of K (if asked for; q is then the plan re-planned at that K), then
// the count of truncated units (if the units have a share).
func (p *Plan) chooseUnits(stats *noise.Rand, hist unit.Histogram) (*Plan, *UnitStory, error) {
	up := p.unit
	q := p
	story := &UnitStory{Column: up.u.Column, MaxRows: up.k, Invariants: len(p.spec.Exact) > 0}
	auto := up.u.MaxRows == 0 || up.u.chosen
	epsChoice, epsCount := up.eps, privacy.Epsilon{}
	if auto && up.u.Share > 0 {
		// Three quarters to the choice, a quarter to the count.
		var err error
		if epsChoice, err = privacy.NewEpsilon(up.eps.Float64() * 3 / 4); err != nil {
			return nil, nil, fmt.Errorf("release: %w", err)
		}
		if epsCount, err = privacy.NewEpsilon(up.eps.Float64() / 4); err != nil {
			return nil, nil, fmt.Errorf("release: %w", err)
		}
	} else if up.u.Share > 0 {
		epsChoice, epsCount = privacy.Epsilon{}, up.eps
	}
	if up.u.MaxRows == 0 {
		k, err := unit.ChooseMaxRows(stats, hist, up.u.Quantile, up.u.Limit, epsChoice)
		if err != nil {
			return nil, nil, fmt.Errorf("release: %w", err)
		}
		spec := up.spec
		u := up.u
		u.MaxRows, u.chosen = k, true
		spec.Unit = &u
		if q, err = NewPlan(p.schema, spec); err != nil {
			// Every K up to the limit was planned by NewPlan already.
			return nil, nil, fmt.Errorf("release: planning at %d rows per unit: %w", k, err)
		}
		story.MaxRows = k
	}
	if auto {
		story.Choice = &UnitChoice{Quantile: up.u.Quantile, Limit: up.u.Limit, Epsilon: epsChoice.Float64()}
	}
	if !epsCount.IsZero() {
		tr, err := unit.CountTruncated(stats, hist, story.MaxRows, epsCount)
		if err != nil {
			return nil, nil, fmt.Errorf("release: %w", err)
		}
		story.Truncated = &tr
	}
	return q, story, nil
}

// finishUnits runs q on the true counts with the measured views' counts
// replaced by the bounded ones, and tells the units' story.
func (p *Plan) finishUnits(ctx context.Context, q *Plan, story *UnitStory, counts, bounded map[domain.View][]float64, r *noise.Rand) (*Release, error) {
	up := p.unit
	all := maps.Clone(counts)
	for _, v := range q.Measured() {
		x, ok := bounded[v.Normal()]
		if !ok {
			return nil, fmt.Errorf("release: the bounded counts of %s are missing", p.schema.FormatView(v))
		}
		all[v.Normal()] = x
	}
	w, err := q.run(ctx, all, r)
	if err != nil {
		return nil, err
	}
	story.Epsilon, story.Rho = up.eps.Float64(), up.rho.Float64()
	story.Share = up.u.Share
	story.Gaussian = q.spec.Mechanism == MechanismGaussian
	w.Unit = story
	w.Neighbours = story.neighbours(w.Schema, p.spec.Exact)
	story.Neighbours = w.Neighbours
	if err := addUnitBudget(w, up, up.spec); err != nil {
		return nil, err
	}
	return w, nil
}

// addUnitBudget adds the units' share to the release's loss and restores
// the budget the caller gave.
func addUnitBudget(w *Release, up *unitPlan, spec Spec) error {
	if up.u.Share == 0 {
		return nil
	}
	if w.Mechanism == MechanismGaussian {
		w.Rho += up.rho.Float64()
		w.RhoBudget = spec.Rho.Float64()
		eps, err := privacy.EpsilonFor(w.Rho, w.Delta)
		if err != nil {
			return fmt.Errorf("release: %w", err)
		}
		w.Epsilon = eps
		return nil
	}
	w.Epsilon += up.eps.Float64()
	w.Budget = spec.Epsilon.Float64()
	return nil
}

// UnitStory is what a release per unit did with the units, for its
// metadata.
type UnitStory struct {
	Column  string
	MaxRows int
	// Choice is set when K was chosen privately.
	Choice *UnitChoice
	// Truncated is the private count of units with more than MaxRows
	// rows, when one was asked for.
	Truncated *unit.Truncated
	// Epsilon (and Rho for a Gaussian release) is what the units' share
	// cost, Share its part of the budget.
	Epsilon, Rho, Share float64
	Gaussian            bool
	Invariants          bool
	Seeded              bool
	Neighbours          string
}

// UnitChoice is a private choice of K.
type UnitChoice struct {
	Quantile float64
	Limit    int
	Epsilon  float64
}

func (u *UnitStory) neighbours(s *domain.Schema, exact []domain.View) string {
	if !u.Invariants {
		return fmt.Sprintf("add or remove one privacy unit (column %q) with all its rows, of which the bounding keeps at most %d", u.Column, u.MaxRows)
	}
	names := make([]string, len(exact))
	for i, v := range exact {
		names[i] = s.FormatView(v)
	}
	return fmt.Sprintf("two tables that agree on the exact tables %s and differ in the rows of one privacy unit (column %q): any number of rows, of which the bounding keeps at most %d",
		strings.Join(names, ", "), u.Column, u.MaxRows)
}

func (u *UnitStory) metadata() *sidecar.UnitMetadata {
	m := &sidecar.UnitMetadata{
		Column: u.Column, MaxRows: u.MaxRows, MaxRowsChoice: "given", Neighbours: u.Neighbours,
		Bounding: fmt.Sprintf("each unit keeps at most %d of its rows, chosen uniformly at random among them, independently for each unit "+
			"(ChaCha8 keyed with SHA-256 of a 256-bit key drawn from the release's generator and the unit's identifier); the unit column is never released", u.MaxRows),
		Guarantee: fmt.Sprintf("per unit: the release is as private as stated for every unit, whatever its number of rows (the bounding keeps %d); "+
			"a row-level guarantee would not protect a unit with several rows", u.MaxRows),
		Sensitivity: fmt.Sprintf("every measurement is calibrated to %d times its row-level generic sensitivity: "+
			"at least the change one unit can make (%d rows added or removed without invariants; %d rows removed and %d added among tables that agree on the invariants), "+
			"and with one row per unit and K = 1 exactly the row-level release", u.MaxRows, u.MaxRows, u.MaxRows, u.MaxRows),
		Noise:      fmt.Sprintf("the noise of every table is proportional to K: its moe90 at another K' is moe90 x K'/%d; a smaller K means less noise and more truncated units", u.MaxRows),
		Truncation: "the rows the bounding dropped are not published: no count of them, exact or noisy, is in the release",
	}
	if u.Invariants {
		m.Invariants = "the exact tables are the true counts of all the rows, published as they are (public by assumption); the noisy measurements count the bounded rows; " +
			"every table is estimated consistent with the true exact tables, so the bounding's bias is pulled toward them"
	}
	if u.Choice != nil {
		m.MaxRowsChoice = fmt.Sprintf("a private %g-quantile of the rows per unit among 1..%d (exponential mechanism over 1-10 and a geometric grid above, eps %.6g per unit)", u.Choice.Quantile, u.Choice.Limit, u.Choice.Epsilon)
		m.MaxRowsEpsilon = u.Choice.Epsilon
	}
	if t := u.Truncated; t != nil {
		m.TruncatedUnits = &sidecar.TruncatedUnits{MaxRows: t.K, Count: t.Count, MOE90: t.MOE90, Epsilon: t.Epsilon}
		m.Truncation = "the rows the bounding dropped are not published; only a private count of the units with more than K rows (truncated_units: discrete Laplace noise, sensitivity 1 per unit) estimates its bias"
	}
	if u.Share > 0 {
		m.Epsilon = u.Epsilon
		if u.Gaussian {
			m.Rho = u.Rho
		}
	}
	return m
}

// unit reads the privacy unit's words; its errors wrap ErrUsage.
func (q Request) unit() (*Unit, error) {
	if q.PrivacyUnit == "" {
		switch {
		case q.MaxRows != 0 || q.MaxRowsAuto:
			return nil, usage("--max-rows needs --privacy-unit (the column that names each row's unit)")
		case q.MaxRowsQuantile != 0 || q.MaxRowsLimit != 0 || q.UnitShare != 0:
			return nil, usage("--max-rows-quantile, --max-rows-limit and --unit-share need --privacy-unit")
		}
		return nil, nil
	}
	switch {
	case q.RowLevel:
		return nil, usage("--row-level and --privacy-unit exclude each other")
	case q.MaxRows == 0 && !q.MaxRowsAuto:
		return nil, usage("--privacy-unit needs --max-rows K (the most rows a unit keeps) or --max-rows auto (a private choice)")
	case q.MaxRowsAuto && q.MaxRows != 0:
		return nil, usage("--max-rows is a number or auto, not both")
	case q.MaxRows < 0 || q.MaxRows > sensitivity.MaxUnitRows:
		return nil, usage("--max-rows must be in [1, %d], got %d", sensitivity.MaxUnitRows, q.MaxRows)
	case !q.MaxRowsAuto && (q.MaxRowsQuantile != 0 || q.MaxRowsLimit != 0):
		return nil, usage("--max-rows-quantile and --max-rows-limit apply to --max-rows auto")
	case q.MaxRowsQuantile < 0 || q.MaxRowsQuantile > 1 || math.IsNaN(q.MaxRowsQuantile):
		return nil, usage("--max-rows-quantile must be in (0, 1], got %v", q.MaxRowsQuantile)
	case q.MaxRowsLimit < 0 || q.MaxRowsLimit > sensitivity.MaxUnitRows:
		return nil, usage("--max-rows-limit must be in [1, %d], got %d", sensitivity.MaxUnitRows, q.MaxRowsLimit)
	case !(q.UnitShare >= 0 && q.UnitShare < 1):
		return nil, usage("--unit-share must be in [0, 1), got %v", q.UnitShare)
	}
	return &Unit{Column: q.PrivacyUnit, MaxRows: q.MaxRows, Quantile: q.MaxRowsQuantile, Limit: q.MaxRowsLimit, Share: q.UnitShare}, nil
}

// ErrIdentifier marks the refusal of a release per row of a table with a
// column that looks like an identifier; it wraps ErrUsage (the flags must
// say what the rows are).
var ErrIdentifier = fmt.Errorf("%w: a column looks like an identifier", ErrUsage)

// checkIdentifiers refuses a release per row of a table with a column
// (other than the schema's dimensions) whose name looks like an
// identifier of a person or household, unless RowLevel says the user means
// it: such a table may have several rows per unit, which a row-level
// guarantee does not protect. It reads column names only.
func (q Request) checkIdentifiers(s *domain.Schema) error {
	if q.PrivacyUnit != "" || q.RowLevel {
		return nil
	}
	for _, c := range q.Columns {
		if _, dim := s.Lookup(c); dim || !unit.LooksLikeIdentifier(c) {
			continue
		}
		return fmt.Errorf("%w: column %q of the fact table looks like it names who each row is about; "+
			"if a person (or household...) can have several rows, a guarantee per row does not protect them: "+
			"give --privacy-unit %s --max-rows K (or auto) for a guarantee per unit, or --row-level if every row is a different unit", ErrIdentifier, c, c)
	}
	return nil
}
