package pipeline

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/tablefile"
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
	// Objective is what the optimal split minimises ("auto" when empty);
	// InvariantCosts asks for each table's error without each invariant.
	Objective       string
	InvariantCosts  bool
	Sensitivity     int
	NonNeg, Integer bool
	Tol             float64
	// KeepMeasurements asks for the noisy measurements (--measurements).
	KeepMeasurements bool
	// Format is the tables' format: csv (the default) or parquet.
	Format string
	// PrivacyUnit is --privacy-unit, MaxRows --max-rows and UnitShare
	// --unit-share: a release per unit (see units.go). RowLevel is
	// --row-level, Columns the fact table's columns (a release per row of
	// a table with a column that looks like an identifier is refused
	// unless RowLevel, as knowdp release refuses it).
	PrivacyUnit string
	MaxRows     int
	UnitShare   float64
	RowLevel    bool
	Columns     []string
}

// job is a Job read against the schema: the core's plan of the release,
// what the rows are counted into, and the tables it writes, in order.
type job struct {
	plan *release.Plan
	// counted are the finest-level cuboids counted from the rows.
	counted []domain.Cuboid
	// tables are the released tables, in the order of the release;
	// several says they are written as a directory of tables (several
	// cuboids or --workload), as knowdp release writes them.
	tables  []domain.View
	several bool
	// post says the tables are non-negative or integer, keep that the
	// noisy measurements are kept; format is the tables' format.
	post, keep bool
	format     tablefile.Format
}

// ErrUsage marks an error in the flags' words (a usage error of the
// command, exit status 2).
var ErrUsage = release.ErrUsage

func jobErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, a...))
}

// request returns the release j asks for in the core's words, a zero field
// standing for the flag's default.
func (j Job) request() release.Request {
	j.Mechanism, j.Split, j.Strategy = cmp.Or(j.Mechanism, "laplace"), cmp.Or(j.Split, "auto"), cmp.Or(j.Strategy, "best")
	j.Tol = cmp.Or(j.Tol, 1e-6)
	return release.Request{Tables: j.Cuboids, Workload: j.Workload, WorkloadName: j.WorkloadName, Exact: j.Exact,
		Mechanism: j.Mechanism, Epsilon: j.Epsilon, Rho: j.Rho, Delta: j.Delta, Split: j.Split, Strategy: j.Strategy,
		Objective: j.Objective, InvariantCosts: j.InvariantCosts,
		Sensitivity: j.Sensitivity, NonNeg: j.NonNeg, Integer: j.Integer, Tol: j.Tol, KeepMeasurements: j.KeepMeasurements,
		PrivacyUnit: j.PrivacyUnit, MaxRows: j.MaxRows, UnitShare: j.UnitShare, RowLevel: j.RowLevel, Columns: j.Columns}
}

// parseJob reads j against s and plans the release, exactly as knowdp
// release reads its flags (release.Request) and plans (release.NewPlan).
// Every error it returns is decided by the schema and the flags alone.
func parseJob(s *domain.Schema, j Job) (*job, error) {
	q := j.request()
	spec, err := q.Spec(s)
	if err != nil {
		return nil, err
	}
	format, err := tablefile.ParseFormat(cmp.Or(j.Format, "csv"))
	if err != nil {
		return nil, jobErr("%v", err)
	}
	plan, err := release.NewPlan(s, spec)
	if err != nil {
		return nil, err
	}
	if plan.QueryTables() {
		return nil, jobErr("tables of prefix sums or ranges are released by knowdp release, not by the pipeline yet")
	}
	jb := &job{plan: plan, tables: spec.Tables, several: q.Several(), post: j.NonNeg || j.Integer, keep: j.KeepMeasurements, format: format}
	if wp := plan.Workload(); wp != nil {
		// A workload's sources in their order (WorkloadPlan.Source).
		for i := range wp.NumSources() {
			if c := wp.Source(i); !slices.Contains(jb.counted, c) {
				jb.counted = append(jb.counted, c)
			}
		}
	}
	for _, v := range plan.Needs() {
		if !slices.Contains(jb.counted, v.Dims) {
			jb.counted = append(jb.counted, v.Dims)
		}
	}
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
