package release

import (
	"context"
	"runtime"
	"slices"
	"testing"

	"github.com/knowdp/knowdp/noise"
)

// TestReleaseViewsCores checks that a seeded release across a hierarchy
// large enough for its work to be split (20,000 tracts: the estimate's rows,
// the error laws, the integer tables' parents) gives the same counts and
// margins of error on one core and on four.
func TestReleaseViewsCores(t *testing.T) {
	if testing.Short() {
		t.Skip("two releases of 720,000 leaf cells; skipped with -short")
	}
	s, weights := nationalSchema(t, 20_000)
	spec := nationalSpec(t, s, SplitSpine)
	plan, err := PlanViews(s, spec)
	if err != nil {
		t.Fatal(err)
	}
	counts := nationalCounts(t, s, weights, 500_000, plan.Needs())
	run := func(procs int) *Release {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		r := noise.NewSeeded(3)
		rel, err := plan.ReleaseFrom(context.Background(), counts, r.Split())
		if err != nil {
			t.Fatal(err)
		}
		if err := rel.RoundIntegers(context.Background(), r.Split()); err != nil {
			t.Fatal(err)
		}
		return rel
	}
	one, four := run(1), run(4)
	for i, a := range one.Tables {
		b := four.Tables[i]
		name := s.FormatView(a.TableView())
		if !slices.Equal(a.Counts, b.Counts) {
			t.Errorf("%s: counts differ between 1 and 4 cores", name)
		}
		if !slices.Equal(a.MOE90s, b.MOE90s) || a.MOE90 != b.MOE90 || a.Variance != b.Variance {
			t.Errorf("%s: margins of error differ between 1 and 4 cores", name)
		}
	}
	if len(one.Levels) != len(four.Levels) {
		t.Fatalf("%d and %d levels", len(one.Levels), len(four.Levels))
	}
	for i := range one.Levels {
		if one.Levels[i].MeanMOE90 != four.Levels[i].MeanMOE90 || one.Levels[i].MOE90CoverageError != four.Levels[i].MOE90CoverageError {
			t.Errorf("level %s differs between 1 and 4 cores", one.Levels[i].Level)
		}
	}
}
