package release

import (
	"errors"
	"fmt"
	"slices"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/privacy"
)

// ErrUsage marks an error in the words of a Request: a usage error of the
// command that took them.
var ErrUsage = errors.New("usage")

func usage(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, a...))
}

// Request is a release asked for in words, as knowdp release's flags and
// knowdp-beam's jobs give it (every word given: an empty mechanism, split
// or strategy is refused, as the flags refuse it): view
// names such as "geo:state,sex", the mechanism's name, numbers. Spec reads
// it against a schema, the same way for every caller.
type Request struct {
	// Tables are the --cuboid flags (DIMS, each DIM or DIM:LEVEL of a
	// hierarchy; "" is the grand total); none and no Workload is the base
	// cuboid.
	Tables []string
	// Workload is the content of a --workload file and WorkloadName its
	// name, for errors.
	Workload     []byte
	WorkloadName string
	// Exact are the --exact flags.
	Exact []string
	// Mechanism is "laplace" (Epsilon) or "gaussian" (Rho, and Delta for
	// the stated (eps, delta) equivalent).
	Mechanism           string
	Epsilon, Rho, Delta float64
	// Split ("optimal", "equal", "spine") and Strategy ("requested",
	// "marginals", "residuals", "lattice", "best"); Objective ("total", the
	// default when empty, "mean" or "max").
	Split, Strategy, Objective string
	// Sensitivity overrides the generic sensitivity (0: computed).
	Sensitivity     int
	NonNeg, Integer bool
	Tol             float64
	// KeepMeasurements asks for the noisy measurements (--measurements).
	KeepMeasurements bool
	// InvariantCosts asks what each invariant costs every table
	// (--invariant-costs).
	InvariantCosts bool
	// DomainsFromData says the schema was read from the data.
	DomainsFromData bool
	// PrivacyUnit is --privacy-unit, the unit column, with --max-rows
	// (MaxRows, or MaxRowsAuto for a private choice with
	// --max-rows-quantile and --max-rows-limit) and --unit-share. Columns
	// are the fact table's columns where known, and RowLevel is
	// --row-level: a table with a column that looks like an identifier is
	// released per row only when asked to (unit.go).
	PrivacyUnit                string
	MaxRows                    int
	MaxRowsAuto                bool
	MaxRowsQuantile, UnitShare float64
	MaxRowsLimit               int
	Columns                    []string
	RowLevel                   bool
}

// Check validates the words that need no schema; its errors wrap ErrUsage.
func (q Request) Check() error {
	_, err := q.budget()
	return err
}

// budget reads the mechanism, the budget and the options that need no
// schema into a Spec.
func (q Request) budget() (Spec, error) {
	var spec Spec
	mech, err := ParseMechanism(q.Mechanism)
	if err != nil {
		return spec, usage("--mechanism: %v", err)
	}
	spec.Mechanism = mech
	if mech == MechanismGaussian {
		switch {
		case q.Epsilon != 0:
			return spec, usage("--mechanism gaussian is calibrated to --rho; --epsilon does not apply (the equivalent (eps, delta) is reported for --delta)")
		case q.Sensitivity != 0:
			return spec, usage("--sensitivity overrides the L1 generic sensitivity of --mechanism laplace; gaussian uses the L2 one, which knowdp computes")
		case !(q.Delta > 0 && q.Delta < 1):
			return spec, usage("--delta must be in (0, 1), got %v", q.Delta)
		}
		if spec.Rho, err = privacy.NewRho(q.Rho); err != nil {
			return spec, usage("--rho: %v", err)
		}
		spec.Delta = q.Delta
	} else {
		if q.Rho != 0 {
			return spec, usage("--rho needs --mechanism gaussian")
		}
		if spec.Epsilon, err = privacy.NewEpsilon(q.Epsilon); err != nil {
			return spec, usage("--epsilon: %v", err)
		}
	}
	switch {
	case q.Sensitivity < 0:
		return spec, usage("--sensitivity must be positive (or 0 for the computed value), got %d", q.Sensitivity)
	case q.NonNeg && q.Integer:
		return spec, usage("--nonneg and --integer exclude each other (--integer counts are non-negative)")
	case !(q.Tol > 0) || q.Tol > 1:
		return spec, usage("--tol must be a positive number at most 1, got %v", q.Tol)
	}
	if spec.Split, err = ParseSplit(q.Split); err != nil {
		return spec, usage("--split: %v", err)
	}
	if spec.Strategy, err = ParseMeasureStrategy(q.Strategy); err != nil {
		return spec, usage("--strategy: %v", err)
	}
	if q.Objective != "" {
		if spec.Objective, err = ParseObjective(q.Objective); err != nil {
			return spec, usage("--objective: %v", err)
		}
	}
	spec.Sensitivity, spec.NonNegative, spec.Integer, spec.Tol = q.Sensitivity, q.NonNeg, q.Integer, q.Tol
	spec.KeepMeasurements, spec.DomainsFromData, spec.InvariantCosts = q.KeepMeasurements, q.DomainsFromData, q.InvariantCosts
	if spec.Unit, err = q.unit(); err != nil {
		return spec, err
	}
	return spec, nil
}

// Spec reads the request against schema s. Errors in the words that need no
// schema wrap ErrUsage; errors naming a dimension or level the schema does
// not have name the flag.
func (q Request) Spec(s *domain.Schema) (Spec, error) {
	spec, err := q.budget()
	if err != nil {
		return spec, err
	}
	for _, x := range q.Tables {
		v, err := s.ParseView(x)
		if err != nil {
			return spec, fmt.Errorf("--cuboid %q: %w", x, err)
		}
		spec.Tables, spec.Weights = append(spec.Tables, v), append(spec.Weights, 1)
	}
	if q.WorkloadName != "" || q.Workload != nil {
		entries, err := ParseWorkloadEntries(s, q.Workload)
		if err != nil {
			return spec, fmt.Errorf("--workload %s: %w", q.WorkloadName, err)
		}
		if slices.ContainsFunc(entries, func(e WorkloadEntry) bool { return e.Query.Kind != QueryCells }) {
			// The --cuboid tables before the workload publish their cells.
			spec.Queries = make([]TableQuery, len(spec.Tables))
			for _, e := range entries {
				spec.Queries = append(spec.Queries, e.Query)
			}
		}
		if slices.ContainsFunc(entries, func(e WorkloadEntry) bool { return e.TargetMOE90 != 0 }) {
			// Targets for every table, or the plan refuses naming the first
			// without one.
			spec.TargetMOE90 = make([]float64, len(spec.Tables))
			for _, e := range entries {
				spec.TargetMOE90 = append(spec.TargetMOE90, e.TargetMOE90)
			}
		}
		for _, e := range entries {
			spec.Tables, spec.Weights = append(spec.Tables, e.View), append(spec.Weights, e.Weight)
		}
	}
	if len(spec.Tables) == 0 {
		spec.Tables, spec.Weights = []domain.View{domain.ViewOf(domain.Base(s.NumDims()))}, []float64{1}
	}
	for _, x := range q.Exact {
		v, err := s.ParseView(x)
		if err != nil {
			return spec, fmt.Errorf("--exact %q: %w", x, err)
		}
		spec.Exact = append(spec.Exact, v)
	}
	if err := q.checkIdentifiers(s); err != nil {
		return spec, err
	}
	return spec, nil
}

// Several reports whether the request names several tables (more than one
// --cuboid, or a workload): they are written as a directory.
func (q Request) Several() bool {
	return len(q.Tables) > 1 || q.WorkloadName != "" || q.Workload != nil
}
