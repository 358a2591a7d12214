package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/tablefile"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/release"
)

// TestSeededGaussianMatchesCore runs a Gaussian (zCDP) release on Prism in
// process over 2 shards of a 288,000-cell cube (2 blocks, the last one
// partial) with a trivial dimension and two overlapping invariants, and a
// one-block cuboid of it, and checks both reproduce the single-machine
// seeded release: counts, moe90 column and sidecar.
func TestSeededGaussianMatchesCore(t *testing.T) {
	dir := t.TempDir()
	tb := writeTable(t, dir, []int{64, 1, 90, 50}, 40000, 2, 11)
	rho, _ := privacy.NewRho(0.25)
	exact := []domain.Cuboid{0b0011, 0b1100}
	for _, c := range []domain.Cuboid{domain.Base(4), 0b0101} {
		t.Run(tb.schema.Format(c), func(t *testing.T) {
			spec := oneSpec{Mechanism: release.MechanismGaussian, Rho: rho, Delta: 1e-5, Exact: exact, Cuboid: c}
			want := coreReleaseSpec(t, tb, spec, 9)
			out := filepath.Join(dir, "gauss.csv")
			res, err := Run(context.Background(), gaussian(seeded(cuboidSpec(tb, c, exact, privacy.Epsilon{}, out), 9), rho, 1e-5))
			if err != nil {
				t.Fatal(err)
			}
			if m := metadata(t, res); m.Rho != 0.25 || len(m.Measurements) != 1 || m.Measurements[0].Sigma == 0 || m.Measurements[0].L2Sensitivity == 0 || m.Delta != 1e-5 || m.Guarantee != privacy.GuaranteeNone {
				t.Fatalf("sidecar %+v", m)
			}
			compare(t, out, want)
		})
	}
}

// TestGaussianPlanMatchesCore checks the Gaussian plan (sidecar and
// margin of error, which the pipeline computes without the core's planner)
// against the single-machine release over small schemas: invariants or
// none, nested, overlapping, trivial dimensions, a cuboid the invariants
// determine, a grand total, unseeded and seeded; and a spec both refuse.
func TestGaussianPlanMatchesCore(t *testing.T) {
	tests := []struct {
		sizes []int
		c     domain.Cuboid
		exact []domain.Cuboid
		rho   float64
		delta float64
	}{
		{[]int{3, 4, 5}, 0b111, nil, 1, 1e-6},
		{[]int{3, 4, 5}, 0b111, []domain.Cuboid{0}, 0.5, 1e-6},
		{[]int{3, 4, 5}, 0b111, []domain.Cuboid{0b011, 0b110}, 0.1, 1e-9},
		{[]int{3, 4, 5}, 0b101, []domain.Cuboid{0b011, 0b110, 0b011}, 2, 0.01},
		{[]int{3, 4, 5}, 0b011, []domain.Cuboid{0b001, 0b010}, 0.05, 1e-6},
		{[]int{3, 4, 5}, 0b001, []domain.Cuboid{0b011}, 1, 1e-6},
		{[]int{3, 4, 5}, 0, []domain.Cuboid{0b100}, 1, 1e-6},
		{[]int{3, 4, 5}, 0, nil, 1, 1e-6},
		{[]int{2, 1, 7, 1}, 0b1111, []domain.Cuboid{0b0101}, 0.3, 1e-6},
		{[]int{2, 1, 7, 1}, 0b1110, []domain.Cuboid{0b0010}, 0.3, 1e-6},
		{[]int{2, 3, 4, 5}, 0b1111, []domain.Cuboid{0b0011, 0b0110, 0b1100}, 0.7, 1e-6}, // no closed form: refused
		{[]int{2, 3, 4, 5}, 0b1111, []domain.Cuboid{0b0011, 0b1100}, 0.7, 1e-6},
		{[]int{2, 3, 4, 5}, 0b1011, []domain.Cuboid{0b0011, 0b0110}, 0.7, 1e-6},
		{[]int{2, 3, 4, 5}, 0b1111, []domain.Cuboid{0b0111, 0b1000}, 0.7, 1e-6},
	}
	for i, tc := range tests {
		for _, seeded := range []bool{false, true} {
			s := numberedSchema(t, tc.sizes...)
			rho, err := privacy.NewRho(tc.rho)
			if err != nil {
				t.Fatal(err)
			}
			spec := oneSpec{Mechanism: release.MechanismGaussian, Rho: rho, Delta: tc.delta, Exact: tc.exact, Cuboid: tc.c}
			c, err := cube.New(s, cube.DefaultCellLimit)
			if err != nil {
				t.Fatal(err)
			}
			r := noise.NewRand()
			if seeded {
				r = noise.NewSeeded(1)
			}
			want, werr := releaseOne(context.Background(), c, spec, r)
			tb := table{schema: s, shards: []string{"unread.csv"}}
			bspec := gaussian(cuboidSpec(tb, tc.c, tc.exact, privacy.Epsilon{}, "out.csv"), rho, tc.delta)
			bspec.Seeded = seeded
			got, err := NewPlan(bspec)
			if werr != nil || err != nil {
				// Refused alike (no closed form for the sensitivity).
				if werr == nil || err == nil || err.Error() != werr.Error() {
					t.Fatalf("case %d: plan: %v; single machine: %v", i, err, werr)
				}
				continue
			}
			wm, _ := json.MarshalIndent(storyOf(want, "out.csv", tablefile.CSV), "", "  ")
			if string(got.sidecar) != string(wm)+"\n" {
				t.Fatalf("case %d (seeded %v): plan\n%s\nsingle machine\n%s", i, seeded, got.sidecar, wm)
			}
			var l2 float64
			if len(want.Measurements) > 0 {
				l2 = want.Measurements[0].L2Sensitivity
			}
			// The noise's rho, where there is noise.
			if got.cfg.MOE90 != want.Tables[0].CellMOE90() || got.cfg.L2 != l2 || (l2 > 0 && got.cfg.Rho != want.Rho) {
				t.Fatalf("case %d: plan %+v, single machine %+v", i, got.cfg, want)
			}
		}
	}
}

// TestGaussianPlanErrors checks a Gaussian job (and a Laplace one with
// rho) is refused before anything runs, as a usage error, as knowdp
// release refuses its flags.
func TestGaussianPlanErrors(t *testing.T) {
	tb := writeTable(t, t.TempDir(), []int{3, 4}, 0, 1, 1)
	for _, tc := range []struct {
		job  Job
		want string
	}{
		{Job{Mechanism: "gaussian", Delta: 1e-6}, "--rho"},
		{Job{Mechanism: "gaussian", Rho: 1, Epsilon: 1, Delta: 1e-6}, "--epsilon does not apply"},
		{Job{Mechanism: "gaussian", Rho: 1}, "--delta must be in (0, 1)"},
		{Job{Mechanism: "gaussian", Rho: 1, Delta: 1}, "--delta must be in (0, 1)"},
		{Job{Mechanism: "gaussian", Rho: 1, Delta: 1e-6, Sensitivity: 3}, "--sensitivity overrides the L1"},
		{Job{Epsilon: 1, Rho: 1}, "--rho needs --mechanism gaussian"},
		{Job{Mechanism: "uniform", Epsilon: 1}, "--mechanism"},
	} {
		_, err := NewPlan(Spec{Files: tb.shards, Schema: tb.schema, Job: tc.job, Out: "x.csv"})
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want a usage error saying %q", tc.job, err, tc.want)
		}
	}
}
