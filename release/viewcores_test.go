package release

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/testkit"
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
	plan, err := newViewsPlanContext(context.Background(), s, spec)
	if err != nil {
		t.Fatal(err)
	}
	counts := nationalCounts(t, s, weights, 500_000, plan.Needs())
	run := func(procs int) *Release {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		r := noise.NewSeeded(3)
		rel, err := plan.releaseFrom(context.Background(), counts, r.Split())
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

// TestViewMetadataStatesApproximation checks that the privacy story of a
// Laplace release across a hierarchy says that its margins take the
// smallest terms of an error as normal and where the bound is, that each
// level reports the bound, and that a Gaussian release (whose margins are
// exact) says nothing of it.
func TestViewMetadataStatesApproximation(t *testing.T) {
	s := testkit.SmallGeo(t)
	for _, gaussian := range []bool{false, true} {
		spec := viewSpec{Split: SplitSpine,
			Views: []domain.View{testkit.MustView(t, s, "geo:region,sex,age"), testkit.MustView(t, s, "geo,sex,age")},
			Exact: []domain.View{testkit.MustView(t, s, "geo:state")}}
		if gaussian {
			spec.Mechanism, spec.Rho, spec.Delta = MechanismGaussian, mustRho(t, 0.5), 1e-6
		} else {
			spec.Epsilon = mustEps(t, 1)
		}
		needs, err := needsOf(s, spec.spec())
		if err != nil {
			t.Fatal(err)
		}
		base := make([]float64, s.Cells())
		for i := range base {
			base[i] = float64(i % 7)
		}
		counts := map[domain.View][]float64{}
		for _, v := range needs {
			counts[v], _ = s.RollUp(domain.View{Dims: domain.Base(3)}, base, v)
		}
		rel, err := runViews(context.Background(), s, counts, spec, noise.NewSeeded(1))
		if err != nil {
			t.Fatal(err)
		}
		m := rel.Metadata()
		says := strings.Contains(m.MOE, "moe90_coverage_error")
		if says == gaussian {
			t.Errorf("gaussian=%v: the moe90 story %q", gaussian, m.MOE)
		}
		if len(m.Levels) == 0 {
			t.Fatalf("gaussian=%v: no levels", gaussian)
		}
		for _, l := range m.Levels {
			if gaussian && l.MOE90CoverageError != 0 || !(l.MOE90CoverageError >= 0 && l.MOE90CoverageError <= 0.002) {
				t.Errorf("gaussian=%v level %s: coverage error %v", gaussian, l.Level, l.MOE90CoverageError)
			}
		}
	}
}
