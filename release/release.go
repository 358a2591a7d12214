package release

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate"
	"github.com/knowdp/knowdp/integer"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/sensitivity"
	"github.com/knowdp/knowdp/sidecar"
)

// Mechanism selects the noise of a release.
type Mechanism int

const (
	// Laplace noise (exact, on a power-of-two grid) calibrated to the L1
	// generic sensitivity: pure eps-differential privacy.
	MechanismLaplace Mechanism = iota
	// Gaussian noise (exact discrete Gaussian on a grid) calibrated to the
	// L2 generic sensitivity: rho-zero-concentrated differential privacy.
	MechanismGaussian
)

// String names the mechanism as the CLI does.
func (m Mechanism) String() string {
	if m == MechanismGaussian {
		return "gaussian"
	}
	return "laplace"
}

// ParseMechanism parses "laplace" or "gaussian".
func ParseMechanism(name string) (Mechanism, error) {
	switch name {
	case "laplace":
		return MechanismLaplace, nil
	case "gaussian":
		return MechanismGaussian, nil
	}
	return 0, fmt.Errorf("unknown mechanism %q: use laplace or gaussian", name)
}

// cuboidSpec says what to release from a cube and how.
type cuboidSpec struct {
	// Mechanism is Laplace (pure eps, the default) or Gaussian (zCDP, with
	// Rho instead of Epsilon).
	Mechanism Mechanism
	// Rho is the zCDP parameter of a Gaussian release, with respect to the
	// neighbours induced by the exact cuboids; Delta, in (0, 1), is the
	// delta at which its equivalent (eps, delta) guarantee is reported.
	Rho   privacy.Rho
	Delta float64
	// Epsilon is the privacy loss of the release with respect to the
	// neighbours induced by the exact cuboids.
	Epsilon privacy.Epsilon
	// Exact lists the invariants: cuboids that are published exactly and
	// that the release must agree with. An adversary is assumed to know them.
	Exact []domain.Cuboid
	// Cuboid is the cuboid to release; Base(n) is the base cuboid.
	Cuboid domain.Cuboid
	// Sensitivity, when > 0, replaces the generic sensitivity derived from
	// Exact. Where GenericSensitivity computes or bounds the sensitivity, a
	// value below it is refused and a value above it is used (more noise,
	// the same guarantee). Where no closed form is known (ErrNoClosedForm)
	// the value is the caller's claim: the release is then marked with a
	// conditional guarantee (Release.Guarantee), since a value below the
	// true sensitivity voids it.
	Sensitivity int
	// DomainsFromData says the schema's domains were read from the data
	// (InferSchema): the set of cells released then depends on who is in
	// the table, so the release is NOT private whatever the noise.
	DomainsFromData bool
	// NonNegative asks for the least-squares consistent release with no
	// negative counts (ConsistentNonNegative) instead of the plain one.
	NonNegative bool
	// Tol is the tolerance of the non-negative release; 0 means 1e-6.
	Tol float64
	// Integer asks for non-negative integer counts that keep every
	// invariant exactly where an integer table can (RoundInteger applied to
	// the non-negative release); it implies NonNegative.
	Integer bool
	// keepNoisy keeps a copy of the noisy counts before any estimate.
	keepNoisy bool
	// unitRows: see workloadSpec.
	unitRows int
}

// CuboidRelease is a noisy cuboid made consistent with the invariants, together
// with its privacy story. Plan.Cuboid returns one as planned, without
// counts, for pipelines that draw a one-table release block by block.
type CuboidRelease struct {
	Schema *domain.Schema
	Cuboid domain.Cuboid
	// Counts are the released counts, row-major over Cuboid's dimensions.
	Counts []float64
	// Invariants are the exact cuboids, published as they are.
	Invariants []estimate.Invariant
	// Epsilon is the privacy loss with respect to Neighbours.
	Epsilon float64
	// Neighbours describes the neighbour relation the guarantee is about.
	Neighbours string
	// Sensitivity is the generic sensitivity the noise is calibrated to and
	// SensitivityRule the result or method it comes from.
	Sensitivity     int
	SensitivityRule string
	// Scale is the Laplace scale of the noise on each cell and Grid the
	// grid its outputs lie on before consistency (0 if no noise was needed).
	Scale, Grid float64
	NonNegative bool
	// NonNegativeResidual is, for a non-negative release, the largest
	// violation of its optimality conditions that Dykstra's iteration
	// reached (see ConsistentNonNegative): at most the requested tolerance
	// unless the iteration hit its sweep limit. Counts may be negative by
	// at most this much.
	NonNegativeResidual float64
	// Mechanism is the noise added. For a Gaussian release Rho is its zCDP
	// parameter (Epsilon is then the equivalent eps at Delta, if Delta >
	// 0), L2Sensitivity (L2Squared its square, from L2Rule) the L2 generic
	// sensitivity the noise is calibrated to, and Sigma its standard
	// deviation per cell.
	Mechanism     Mechanism
	Rho, Delta    float64
	L2Sensitivity float64
	L2Squared     int
	L2Rule        string
	Sigma         float64
	// MOE90 is the margin of error of the least-squares estimate: the true
	// count lies within its value ± MOE90 with probability 90% under the
	// mechanism (computed from the noise alone, see (*Release).MOE90). The
	// non-negative and integer releases post-process that estimate, moving
	// cells by data-dependent amounts MOE90 does not cover (rounding by
	// less than 1 more).
	MOE90 float64
	// Integer is true for an integer release; IntegerMethod describes the
	// rounding, IntegerExact says whether every invariant holds exactly and
	// IntegerMaxDeviation is the largest deviation from one otherwise.
	Integer             bool
	IntegerExact        bool
	IntegerMethod       string
	IntegerMaxDeviation float64
	// Seeded is true when the noise came from a seeded generator: the
	// release is then reproducible and NOT private.
	Seeded bool
	// DomainsFromData is true when the domains were read from the data
	// (Spec.DomainsFromData): the release is then NOT private.
	DomainsFromData bool
	// SensitivityGiven is true when the sensitivity came from
	// Spec.Sensitivity, and SensitivityClaimed when knowdp could not
	// check it (no closed form): the guarantee then rests on the claim.
	SensitivityGiven, SensitivityClaimed bool
	// ReleasedExactly is true when no noise was added because the cuboid
	// is determined by the exact cuboids: the released counts are the true
	// counts (public already, by the invariants).
	ReleasedExactly bool
	// noisy are the noisy counts before any estimate, when the spec asked
	// to keep them.
	noisy []float64
}

// Private reports whether the release is differentially private (possibly
// conditionally, see Guarantee): its noise is not seeded and its domains
// were not read from the data.
func (rel *CuboidRelease) Private() bool { return !rel.Seeded && !rel.DomainsFromData }

// Guarantee returns privacy.GuaranteeNone, privacy.GuaranteeConditional or
// privacy.GuaranteeUnconditional.
func (rel *CuboidRelease) Guarantee() string {
	switch {
	case !rel.Private():
		return privacy.GuaranteeNone
	case rel.SensitivityClaimed:
		return privacy.GuaranteeConditional
	}
	return privacy.GuaranteeUnconditional
}

// Warnings returns what a reader of the release must know besides its
// epsilon: that it is not private and why, that its guarantee is
// conditional, or that its counts are the true counts.
func (rel *CuboidRelease) Warnings() []string {
	var w []string
	if rel.Seeded {
		w = append(w, "seeded noise: the release is reproducible and NOT differentially private")
	}
	if rel.DomainsFromData {
		w = append(w, "domains read from the data: the set of cells released depends on who is in the table; NOT differentially private")
	}
	if rel.SensitivityClaimed {
		w = append(w, fmt.Sprintf("the sensitivity %d was given by the caller and knowdp cannot check it: the guarantee holds only if it is at least the true generic sensitivity", rel.Sensitivity))
	}
	if rel.ReleasedExactly {
		w = append(w, "the released counts are the TRUE counts: the cuboid is determined by the exact cuboids ("+rel.SensitivityRule+"), so no noise is added")
	}
	return w
}

// Needs returns the cuboids whose exact counts releaseFrom needs: the
// released cuboid and the exact cuboids. They are decided by the spec
// alone, so a caller can aggregate just them (Aggregate) instead of
// building the base cube.
func (spec cuboidSpec) Needs() []domain.Cuboid {
	return dedupe(append([]domain.Cuboid{spec.Cuboid}, spec.Exact...))
}

// releaseFrom is (*Cube).Release from the exact counts of the cuboids
// spec.Needs() lists (row-major over each cuboid's dimensions), so that a
// release costs memory and time in the cells of the released and exact
// cuboids, not in those of the base domain. The release takes the released
// cuboid's counts over: noise is added to them in place (so a large cuboid
// is not copied), and the caller must not use them afterwards.
func releaseFrom(ctx context.Context, s *domain.Schema, tables map[domain.Cuboid][]float64, spec cuboidSpec, r *noise.Rand) (*CuboidRelease, error) {
	rel, dist, err := planRelease(s, spec, r.Seeded())
	if err != nil {
		return nil, err
	}
	table := func(c domain.Cuboid) ([]float64, error) {
		t, ok := tables[c]
		if !ok || len(t) != s.CuboidSize(c) {
			return nil, fmt.Errorf("release: the counts of cuboid %s are missing or have the wrong size (%d values for %d cells)", s.Format(c), len(t), s.CuboidSize(c))
		}
		return t, nil
	}
	for i, v := range rel.Invariants {
		if rel.Invariants[i].Counts, err = table(v.Cuboid); err != nil {
			return nil, err
		}
	}
	if rel.Counts, err = table(spec.Cuboid); err != nil {
		return nil, err
	}
	if rel.ReleasedExactly {
		return rel, nil // determined by the invariants: public already
	}
	if err := noise.AddParallel(ctx, dist, r, rel.Counts); err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	if spec.keepNoisy {
		rel.noisy = slices.Clone(rel.Counts)
	}
	if rel.NonNegative {
		// Whatever the iteration reaches is a function of the noisy counts
		// and the public invariants only, so it is released as it is: a
		// failure to converge must not become an error, which would tell
		// the caller something about the noise without the release.
		res, err := estimate.SolveNonNegative(ctx, s, spec.Cuboid, rel.Counts, rel.Invariants, estimate.NonNegative{Tol: spec.Tol})
		if err != nil {
			return nil, fmt.Errorf("release: %w", err)
		}
		copy(rel.Counts, res.Y)
		rel.NonNegativeResidual = res.Residual
		if spec.Integer {
			margins, err := integer.InvariantMargins(s, spec.Cuboid, rel.Invariants)
			if err != nil {
				return nil, fmt.Errorf("release: %w", err)
			}
			ir, err := integer.RoundInteger(ctx, s, spec.Cuboid, rel.Counts, margins, r.Split())
			if err != nil {
				return nil, fmt.Errorf("release: %w", err)
			}
			copy(rel.Counts, ir.Counts)
			rel.IntegerExact, rel.IntegerMethod, rel.IntegerMaxDeviation = ir.Exact, ir.Method, ir.MaxDeviation
		}
		return rel, nil
	}
	if err := estimate.Consistent(s, spec.Cuboid, rel.Counts, rel.Invariants); err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	return rel, nil
}

// planRelease validates spec and decides everything about its release that
// does not depend on the data: the sensitivity, the noise distribution (nil
// when the invariants determine the cuboid), the margin of error and the
// privacy story. The returned Release has its invariants' cuboids but no
// counts.
func planRelease(s *domain.Schema, spec cuboidSpec, seeded bool) (*CuboidRelease, noise.Adder, error) {
	eps := spec.Epsilon.Float64()
	gaussian := spec.Mechanism == MechanismGaussian
	switch {
	case !gaussian && !(eps > 0):
		return nil, nil, errors.New("release: epsilon must be set (> 0)")
	case gaussian && spec.Rho.IsZero():
		return nil, nil, errors.New("release: a Gaussian release needs rho (> 0)")
	case gaussian && !spec.Epsilon.IsZero():
		return nil, nil, errors.New("release: a Gaussian release is calibrated to rho; leave epsilon unset (its equivalent (eps, delta) is reported for Delta)")
	case gaussian && spec.Sensitivity != 0:
		return nil, nil, errors.New("release: a Gaussian release is calibrated to the L2 generic sensitivity, which cannot be overridden")
	case gaussian && !(spec.Delta > 0 && spec.Delta < 1):
		// zCDP implies no pure eps: the equivalent eps is stated at a delta.
		return nil, nil, fmt.Errorf("release: a Gaussian release states its equivalent (eps, delta) guarantee at a delta in (0, 1), got %v", spec.Delta)
	case !gaussian && spec.Delta != 0:
		return nil, nil, errors.New("release: delta applies to Gaussian releases only")
	}
	base := domain.Base(s.NumDims())
	if spec.Cuboid&^base != 0 {
		return nil, nil, fmt.Errorf("release: cuboid %#x has dimensions beyond the schema", uint64(spec.Cuboid))
	}
	if spec.Sensitivity < 0 {
		return nil, nil, fmt.Errorf("release: sensitivity must be positive, got %d", spec.Sensitivity)
	}
	exact := dedupe(spec.Exact)
	for _, e := range exact {
		if e&^base != 0 {
			return nil, nil, fmt.Errorf("release: exact cuboid %#x has dimensions beyond the schema", uint64(e))
		}
	}
	rel := &CuboidRelease{
		Schema:      s,
		Cuboid:      spec.Cuboid,
		Epsilon:     eps,
		Neighbours:  neighbours(s, exact),
		NonNegative: spec.NonNegative || spec.Integer,
		Integer:     spec.Integer,
		Seeded:      seeded,
		// The spec, not the schema, says where the domains came from: a
		// library caller that infers them must say so.
		DomainsFromData: spec.DomainsFromData,
	}
	for _, e := range exact {
		rel.Invariants = append(rel.Invariants, estimate.Invariant{Cuboid: e})
	}
	if err := rel.setSensitivity(exact, spec.Sensitivity); err != nil {
		return nil, nil, fmt.Errorf("release: %w", err)
	}
	if spec.unitRows > 1 && rel.Sensitivity > 0 {
		sens, err := unitL1(sensitivity.Sensitivity{Value: rel.Sensitivity, Rule: rel.SensitivityRule}, spec.unitRows)
		if err != nil {
			return nil, nil, fmt.Errorf("release: %w", err)
		}
		rel.Sensitivity, rel.SensitivityRule = sens.Value, sens.Rule
	}
	if gaussian {
		l2, err := sensitivity.GenericL2Sensitivity(s, exact, spec.Cuboid)
		if err == nil {
			l2, err = unitL2(l2, spec.unitRows)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("release: %w", err)
		}
		rel.Mechanism, rel.Rho, rel.Delta = MechanismGaussian, spec.Rho.Float64(), spec.Delta
		rel.L2Sensitivity, rel.L2Squared, rel.L2Rule = l2.Value, l2.Squared, l2.Rule
		if rel.Epsilon, err = privacy.EpsilonFor(rel.Rho, spec.Delta); err != nil {
			return nil, nil, fmt.Errorf("release: %w", err)
		}
	}
	if rel.Sensitivity == 0 {
		rel.ReleasedExactly = true
		return rel, nil, nil
	}
	if gaussian {
		g, err := noise.NewGaussian(rel.L2Sensitivity, rel.Rho)
		if err != nil {
			return nil, nil, fmt.Errorf("release: %w", err)
		}
		rel.Sigma, rel.Grid = g.Sigma(), g.Grid()
		rel.MOE90 = rel.gaussianMOE90(g)
		return rel, g, nil
	}
	lap, err := noise.NewLaplace(float64(rel.Sensitivity), eps)
	if err != nil {
		return nil, nil, fmt.Errorf("release: %w", err)
	}
	rel.Scale, rel.Grid = lap.Scale(), lap.Grid()
	if rel.MOE90, err = rel.lsMOE90(lap); err != nil {
		return nil, nil, fmt.Errorf("release: %w", err)
	}
	return rel, lap, nil
}

// setSensitivity sets the sensitivity the noise is calibrated to: the
// generic sensitivity, or the caller's value where it is not below it or
// where knowdp cannot compute it. It depends on the schema and the cuboids
// only, never on the counts.
func (rel *CuboidRelease) setSensitivity(exact []domain.Cuboid, given int) error {
	sens, err := sensitivity.GenericSensitivity(rel.Schema, exact, rel.Cuboid)
	switch {
	case given == 0 && err != nil:
		return err
	case given == 0:
		rel.Sensitivity, rel.SensitivityRule = sens.Value, sens.Rule
	case errors.Is(err, sensitivity.ErrNoClosedForm):
		rel.Sensitivity, rel.SensitivityGiven, rel.SensitivityClaimed = given, true, true
		rel.SensitivityRule = "given by the caller (no closed form known): " + err.Error()
	case err != nil:
		return err
	case given < sens.Value:
		return fmt.Errorf("sensitivity %d is below the generic sensitivity %d that knowdp computes (%s); the noise would not be private", given, sens.Value, sens.Rule)
	default:
		rel.Sensitivity, rel.SensitivityGiven = given, true
		rel.SensitivityRule = fmt.Sprintf("given by the caller: %d, at least the generic sensitivity %d (%s)", given, sens.Value, sens.Rule)
	}
	return nil
}

func dedupe(cs []domain.Cuboid) []domain.Cuboid {
	var out []domain.Cuboid
	for _, c := range cs {
		dup := false
		for _, d := range out {
			dup = dup || c == d
		}
		if !dup {
			out = append(out, c)
		}
	}
	return out
}

func neighbours(s *domain.Schema, exact []domain.Cuboid) string {
	names := make([]string, len(exact))
	for i, e := range exact {
		names[i] = s.Format(e)
	}
	return inducedNeighbours("cuboids", names)
}

// inducedNeighbours describes the neighbour relation the exact tables
// (cuboids or views, named) induce.
func inducedNeighbours(kind string, names []string) string {
	if len(names) == 0 {
		return "add or remove one row"
	}
	return "worst-case induced neighbours given the exact " + kind + " " + strings.Join(names, ", ") + " (tables that agree on them and differ by a minimal set of added and removed rows)"
}

// WriteCSV writes the release with one column per dimension of the cuboid,
// then "count" and "moe90" (the cell's margin of error, CellMOE90), every
// number in full (WriteTableCSV).
func (rel *CuboidRelease) WriteCSV(w io.Writer) error {
	moe := rel.CellMOE90()
	return WriteTableCSV(w, rel.Schema, domain.ViewOf(rel.Cuboid), rel.Counts, func(int) float64 { return moe })
}

// WriteTableCSV writes the counts of view v of s (row-major over its
// dimensions at their levels) as CSV: a header row with one column per
// dimension (named by its level for a hierarchy: s.ViewColumns), "count"
// and "moe90", then one row per cell with the level's
// values (quoted where they need it), the count and moe90(cell), every
// number as FormatExact writes it, so that the printed table keeps its
// sums.
func WriteTableCSV(w io.Writer, s *domain.Schema, v domain.View, counts []float64, moe90 func(cell int) float64) error {
	if want := s.ViewSize(v); len(counts) != want {
		return fmt.Errorf("%d counts for the %d cells of %s", len(counts), want, s.FormatView(v))
	}
	return WriteTableRowsCSV(w, s, v, 0, counts, moe90)
}

// WriteTableRowsCSV writes the header row and the rows of cells first,
// first+1, ... of view v, as WriteTableCSV writes them: one shard of a
// table too large for one file (moe90 is given the cell's index in the
// whole table).
func WriteTableRowsCSV(w io.Writer, s *domain.Schema, v domain.View, first int, counts []float64, moe90 func(cell int) float64) error {
	if n := s.ViewSize(v); first < 0 || first > n || len(counts) > n-first {
		return fmt.Errorf("cells %d to %d are not all in the %d cells of %s", first, first+len(counts), n, s.FormatView(v))
	}
	dims := v.Dims.Dims()
	cols := s.ViewColumns(v)
	buf := make([]byte, 0, 1<<16)
	labels := make([][]string, len(dims))
	for k, d := range dims {
		for _, x := range s.LevelValues(d, int(v.Up[d])) {
			labels[k] = append(labels[k], domain.CsvField(x))
		}
		buf = append(buf, domain.CsvField(cols[k])...)
		buf = append(buf, ',')
	}
	buf = append(buf, "count,moe90\n"...)
	idx := make([]int, len(dims))
	for k, rest := len(dims)-1, first; k >= 0; k-- {
		idx[k] = rest % len(labels[k])
		rest /= len(labels[k])
	}
	// The margin of error is mostly one number for a whole table: it is
	// formatted again only when it changes.
	var moe []byte
	lastMOE := math.NaN()
	for i, x := range counts {
		for k := range dims {
			buf = append(buf, labels[k][idx[k]]...)
			buf = append(buf, ',')
		}
		buf = domain.AppendExact(buf, x)
		buf = append(buf, ',')
		if m := moe90(first + i); m != lastMOE || moe == nil {
			moe, lastMOE = domain.AppendExact(moe[:0], m), m
		}
		buf = append(buf, moe...)
		buf = append(buf, '\n')
		if len(buf) > 1<<16-512 {
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
		for k := len(idx) - 1; k >= 0; k-- {
			idx[k]++
			if idx[k] < len(labels[k]) {
				break
			}
			idx[k] = 0
		}
	}
	_, err := w.Write(buf)
	return err
}

// CellMOE90 is the moe90 column of the release: MOE90, plus 1 for an
// integer release (rounding moves a cell by less than 1).
func (rel *CuboidRelease) CellMOE90() float64 {
	if rel.Integer {
		return rel.MOE90 + 1
	}
	return rel.MOE90
}

// Metadata returns the release's privacy story.
func (rel *CuboidRelease) Metadata() sidecar.CuboidMetadata {
	m := sidecar.CuboidMetadata{
		Mechanism:           "Laplace noise on a power-of-two grid (exact discrete Laplace) on every cell of the declared domain, then least-squares consistency with the exact cuboids",
		Epsilon:             rel.Epsilon,
		Neighbours:          rel.Neighbours,
		Sensitivity:         rel.Sensitivity,
		SensitivityRule:     rel.SensitivityRule,
		Scale:               rel.Scale,
		Grid:                rel.Grid,
		Cuboid:              nonNil(rel.Schema.Names(rel.Cuboid)),
		Exact:               [][]string{},
		NonNegative:         rel.NonNegative,
		NonNegResidual:      rel.NonNegativeResidual,
		MOE90:               rel.CellMOE90(),
		Integer:             rel.Integer,
		IntegerMaxDeviation: rel.IntegerMaxDeviation,
		IntegerMethod:       rel.IntegerMethod,
		Seeded:              rel.Seeded,
		DomainsFromData:     rel.DomainsFromData,
		Private:             rel.Private(),
		Guarantee:           rel.Guarantee(),
		ReleasedExactly:     rel.ReleasedExactly,
		Warnings:            nonNil(rel.Warnings()),
	}
	m.MOE90Note = "each released count is within moe90 of the true count with probability 90% under the mechanism (computed from the noise alone, never from the data)"
	if rel.Mechanism == MechanismGaussian {
		m.Mechanism = "Gaussian noise on a power-of-two grid (exact discrete Gaussian) on every cell of the declared domain, calibrated to the L2 generic sensitivity (rho-zCDP), then least-squares consistency with the exact cuboids"
		m.Rho, m.L2Sensitivity, m.L2Squared, m.L2SensitivityRule = rel.Rho, rel.L2Sensitivity, rel.L2Squared, rel.L2Rule
		m.Sigma, m.Delta, m.Scale = rel.Sigma, rel.Delta, 0
		m.SensitivityRule = "L1, for reference (the noise is calibrated to the L2 sensitivity): " + m.SensitivityRule
	}
	if rel.NonNegative {
		m.Mechanism += " subject to non-negativity (Dykstra's alternating projections)"
		m.MOE90Note = "moe90 is that of the least-squares estimate before non-negativity, which moves cells near zero by data-dependent amounts it does not cover (up, on average, for true zeros)"
	}
	if rel.Integer {
		exact := rel.IntegerExact
		m.IntegerExact = &exact
		m.Mechanism += ", rounded to integers keeping the invariants (unbiased controlled rounding: " + rel.IntegerMethod + ")"
		m.MOE90Note = "moe90 is that of the least-squares estimate plus 1 for the rounding; non-negativity moves cells near zero by data-dependent amounts it does not cover (up, on average, for true zeros)"
	}
	if rel.Sensitivity == 0 {
		m.Mechanism = "none: the cuboid is determined by the exact cuboids, which are public"
		m.MOE90Note = "the counts are exact: no noise"
	}
	for _, v := range rel.Invariants {
		m.Exact = append(m.Exact, nonNil(rel.Schema.Names(v.Cuboid)))
	}
	return m
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
