package pipeline

import (
	"cmp"
	"errors"
	"fmt"
	"strings"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/tablefile"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/release"
)

// Job is what a release asks for, in the terms of knowdp release's flags
// (a zero field is the flag's default). It travels to the workers in Config, where parseJob reads it again, so
// the driver and the workers plan the same release from the same words.
type Job struct {
	// Cuboids are the --cuboid flags (DIMS, or DIM:LEVEL of a hierarchy);
	// none is the base cuboid.
	Cuboids []string
	// Workload is the content of the --workload file, WorkloadName its name.
	Workload     []byte
	WorkloadName string
	Exact        []string
	// Mechanism is "laplace" (Epsilon) or "gaussian" (Rho, Delta).
	Mechanism           string
	Epsilon, Rho, Delta float64
	Split, Strategy     string
	Sensitivity         int
	NonNeg, Integer     bool
	Tol                 float64
	// KeepMeasurements asks for the noisy measurements (--measurements).
	KeepMeasurements bool
	// Format is the tables' format: csv (the default) or parquet.
	Format string
}

// kind is the shape of a release.
type kind int

const (
	// kindCuboid is one cuboid (release.ReleaseFrom).
	kindCuboid kind = iota
	// kindWorkload is several cuboids under one budget (release.ReleaseWorkload).
	kindWorkload
	// kindViews is tables at levels of a hierarchy (release.ReleaseViews).
	kindViews
)

// job is a Job read against the schema: the core's spec of the release,
// what the rows are counted into, and the tables it writes, in order.
type job struct {
	kind     kind
	single   release.ReleaseSpec
	workload release.WorkloadSpec
	views    release.ViewSpec
	// counted are the finest-level cuboids counted from the rows (for a
	// workload or views, set by NewPlan from the plan).
	counted []domain.Cuboid
	// tables are the released tables, in the order of the release;
	// several says they are written as a directory of tables (several
	// cuboids or --workload), as knowdp release writes them.
	tables  []domain.View
	several bool
	// Post-processing of a workload or views (a single cuboid's is in
	// single), and the format of the tables.
	nonneg, integer bool
	tol             float64
	format          tablefile.Format
}

// ErrUsage marks an error in the flags' words (a usage error of the
// command, exit status 2).
var ErrUsage = errors.New("usage")

func jobErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, a...))
}

// parseJob reads j against s as knowdp release reads its flags: several
// cuboids (or --workload) are a workload; a cuboid or invariant at a
// coarser level of a hierarchy, or --split spine, makes a release of views.
// Every error it returns is decided by the schema and the flags alone.
func parseJob(s *domain.Schema, j Job) (*job, error) {
	// A Job's zero values are knowdp release's defaults.
	j.Mechanism, j.Split, j.Strategy = cmp.Or(j.Mechanism, "laplace"), cmp.Or(j.Split, "optimal"), cmp.Or(j.Strategy, "best")
	j.Tol = cmp.Or(j.Tol, 1e-6)
	mech, err := release.ParseMechanism(j.Mechanism)
	if err != nil {
		return nil, jobErr("--mechanism: %v", err)
	}
	var (
		eps privacy.Epsilon
		rho privacy.Rho
	)
	if mech == release.MechanismGaussian {
		switch {
		case j.Epsilon != 0:
			return nil, jobErr("--mechanism gaussian is calibrated to --rho; --epsilon does not apply (the equivalent (eps, delta) is reported for --delta)")
		case j.Sensitivity != 0:
			return nil, jobErr("--sensitivity overrides the L1 generic sensitivity of --mechanism laplace; gaussian uses the L2 one, which knowdp computes")
		case !(j.Delta > 0 && j.Delta < 1):
			return nil, jobErr("--delta must be in (0, 1), got %v", j.Delta)
		}
		if rho, err = privacy.NewRho(j.Rho); err != nil {
			return nil, jobErr("--rho: %v", err)
		}
	} else {
		if j.Rho != 0 {
			return nil, jobErr("--rho needs --mechanism gaussian")
		}
		if eps, err = privacy.NewEpsilon(j.Epsilon); err != nil {
			return nil, jobErr("--epsilon: %v", err)
		}
	}
	switch {
	case j.Sensitivity < 0:
		return nil, jobErr("--sensitivity must be positive (or 0 for the computed value), got %d", j.Sensitivity)
	case j.NonNeg && j.Integer:
		return nil, jobErr("--nonneg and --integer exclude each other (--integer counts are non-negative)")
	case (j.NonNeg || j.Integer) && !(j.Tol > 0):
		return nil, jobErr("--tol must be a positive number, got %v", j.Tol)
	}
	split, err := release.ParseSplit(j.Split)
	if err != nil {
		return nil, jobErr("--split: %v", err)
	}
	strategy, err := release.ParseMeasureStrategy(j.Strategy)
	if err != nil {
		return nil, jobErr("--strategy: %v", err)
	}
	several := len(j.Cuboids) > 1 || j.WorkloadName != ""
	if j.KeepMeasurements && !several {
		return nil, jobErr("--measurements needs several cuboids (repeat --cuboid, or --workload)")
	}
	var views, exact []domain.View
	var weights []float64
	coarse := false
	for _, x := range j.Cuboids {
		v, err := s.ParseView(x)
		if err != nil {
			return nil, fmt.Errorf("--cuboid %q: %w", x, err)
		}
		views, weights = append(views, v), append(weights, 1)
		coarse = coarse || !v.Flat()
	}
	if j.WorkloadName != "" {
		vs, ws, err := release.ParseViewWorkload(s, j.Workload)
		if err != nil {
			return nil, fmt.Errorf("--workload %s: %w", j.WorkloadName, err)
		}
		for _, v := range vs {
			coarse = coarse || !v.Flat()
		}
		views, weights = append(views, vs...), append(weights, ws...)
	}
	if len(views) == 0 {
		views, weights = []domain.View{domain.ViewOf(domain.Base(s.NumDims()))}, []float64{1}
	}
	for _, x := range j.Exact {
		v, err := s.ParseView(x)
		if err != nil {
			return nil, fmt.Errorf("--exact %q: %w", x, err)
		}
		exact = append(exact, v)
		coarse = coarse || !v.Flat()
	}
	format, err := tablefile.ParseFormat(cmp.Or(j.Format, "csv"))
	if err != nil {
		return nil, jobErr("%v", err)
	}
	jb := &job{tables: views, several: several, nonneg: j.NonNeg, integer: j.Integer, tol: j.Tol, format: format}
	if coarse || split == release.SplitSpine {
		if j.NonNeg {
			return nil, jobErr("--nonneg: views at coarser levels are published as real counts or, with --integer, as non-negative integers that add up level by level; use --integer")
		}
		if j.KeepMeasurements {
			return nil, jobErr("--measurements: the noisy measurements of views at coarser levels are not saved (knowdp estimate answers flat cuboids)")
		}
		jb.kind = kindViews
		jb.views = release.ViewSpec{Epsilon: eps, Mechanism: mech, Rho: rho, Exact: exact, Views: views, Weights: weights,
			Split: split, Sensitivity: j.Sensitivity}
		if mech == release.MechanismGaussian {
			jb.views.Delta = j.Delta
		}
		return jb, nil
	}
	var cuboids, exactC []domain.Cuboid
	for _, v := range views {
		cuboids = append(cuboids, v.Dims)
	}
	for _, v := range exact {
		exactC = append(exactC, v.Dims)
	}
	if several {
		jb.kind = kindWorkload
		jb.workload = release.WorkloadSpec{Epsilon: eps, Exact: exactC, Cuboids: cuboids, Weights: weights, Split: split,
			Sensitivity: j.Sensitivity, Mechanism: mech, Rho: rho, Strategy: strategy, KeepMeasurements: j.KeepMeasurements}
		if mech == release.MechanismGaussian {
			jb.workload.Delta = j.Delta
		}
		// The cuboids counted are the plan's (planned once, by the driver:
		// see Plan).
		return jb, nil
	}
	jb.kind = kindCuboid
	jb.single = release.ReleaseSpec{Epsilon: eps, Exact: exactC, Cuboid: cuboids[0], Sensitivity: j.Sensitivity,
		NonNegative: j.NonNeg, Integer: j.Integer, Tol: j.Tol, Mechanism: mech, Rho: rho}
	if mech == release.MechanismGaussian {
		jb.single.Delta = j.Delta
	}
	jb.counted = jb.single.Needs()
	return jb, nil
}

// postProcessed reports whether the release ends with non-negative or
// integer tables, which are solved on one worker.
func (j Job) postProcessed() bool { return j.NonNeg || j.Integer }

// tableStems names each table's files: "" for a single table (its parts
// are the output itself), otherwise the name knowdp release gives its file
// without the extension.
func (jb *job) tableStems(s *domain.Schema) []string {
	if !jb.several {
		return []string{""}
	}
	out := make([]string, len(jb.tables))
	for i, v := range jb.tables {
		out[i] = strings.TrimSuffix(s.ViewFileName(v), ".csv")
	}
	return out
}
