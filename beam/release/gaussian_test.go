package release

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
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
	exact := []cube.Cuboid{0b0011, 0b1100}
	for _, c := range []cube.Cuboid{cube.Base(4), 0b0101} {
		t.Run(tb.schema.Format(c), func(t *testing.T) {
			spec := cube.ReleaseSpec{Mechanism: cube.MechanismGaussian, Rho: rho, Delta: 1e-5, Exact: exact, Cuboid: c}
			want := coreReleaseSpec(t, tb, spec, 9)
			out := filepath.Join(dir, "gauss.csv")
			res, err := Run(context.Background(), Spec{Files: tb.shards, Schema: tb.schema, Cuboid: c, Exact: exact,
				Mechanism: cube.MechanismGaussian, Rho: rho, Delta: 1e-5, Seeded: true, Seed: 9, Out: out})
			if err != nil {
				t.Fatal(err)
			}
			if res.Meta.Rho != 0.25 || res.Meta.Sigma == 0 || res.Meta.L2Sensitivity == 0 || res.Meta.Delta != 1e-5 || res.Meta.Guarantee != cube.GuaranteeNone {
				t.Fatalf("sidecar %+v", res.Meta)
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
	schema := func(sizes ...int) *cube.Schema {
		dims := make([]cube.Dimension, len(sizes))
		for i, n := range sizes {
			dims[i].Name = fmt.Sprintf("d%d", i)
			for j := range n {
				dims[i].Values = append(dims[i].Values, fmt.Sprint(j))
			}
		}
		s, err := cube.NewSchema(dims)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	tests := []struct {
		sizes []int
		c     cube.Cuboid
		exact []cube.Cuboid
		rho   float64
		delta float64
	}{
		{[]int{3, 4, 5}, 0b111, nil, 1, 1e-6},
		{[]int{3, 4, 5}, 0b111, []cube.Cuboid{0}, 0.5, 1e-6},
		{[]int{3, 4, 5}, 0b111, []cube.Cuboid{0b011, 0b110}, 0.1, 1e-9},
		{[]int{3, 4, 5}, 0b101, []cube.Cuboid{0b011, 0b110, 0b011}, 2, 0.01},
		{[]int{3, 4, 5}, 0b011, []cube.Cuboid{0b001, 0b010}, 0.05, 1e-6},
		{[]int{3, 4, 5}, 0b001, []cube.Cuboid{0b011}, 1, 1e-6},
		{[]int{3, 4, 5}, 0, []cube.Cuboid{0b100}, 1, 1e-6},
		{[]int{3, 4, 5}, 0, nil, 1, 1e-6},
		{[]int{2, 1, 7, 1}, 0b1111, []cube.Cuboid{0b0101}, 0.3, 1e-6},
		{[]int{2, 1, 7, 1}, 0b1110, []cube.Cuboid{0b0010}, 0.3, 1e-6},
		{[]int{2, 3, 4, 5}, 0b1111, []cube.Cuboid{0b0011, 0b0110, 0b1100}, 0.7, 1e-6}, // no closed form: refused
		{[]int{2, 3, 4, 5}, 0b1111, []cube.Cuboid{0b0011, 0b1100}, 0.7, 1e-6},
		{[]int{2, 3, 4, 5}, 0b1011, []cube.Cuboid{0b0011, 0b0110}, 0.7, 1e-6},
		{[]int{2, 3, 4, 5}, 0b1111, []cube.Cuboid{0b0111, 0b1000}, 0.7, 1e-6},
	}
	for i, tc := range tests {
		for _, seeded := range []bool{false, true} {
			s := schema(tc.sizes...)
			rho, err := privacy.NewRho(tc.rho)
			if err != nil {
				t.Fatal(err)
			}
			spec := cube.ReleaseSpec{Mechanism: cube.MechanismGaussian, Rho: rho, Delta: tc.delta, Exact: tc.exact, Cuboid: tc.c}
			tables := map[cube.Cuboid][]float64{}
			for _, n := range spec.Needs() {
				tables[n] = make([]float64, s.CuboidSize(n))
			}
			r := noise.NewRand()
			if seeded {
				r = noise.NewSeeded(1)
			}
			want, werr := cube.ReleaseFrom(context.Background(), s, tables, spec, r)
			got, err := plan(s, Spec{Schema: s, Cuboid: tc.c, Exact: tc.exact, Mechanism: cube.MechanismGaussian, Rho: rho, Delta: tc.delta, Seeded: seeded})
			if werr != nil || err != nil {
				// Refused alike (no closed form for the sensitivity).
				if werr == nil || err == nil || err.Error() != werr.Error() {
					t.Fatalf("case %d: plan: %v; single machine: %v", i, err, werr)
				}
				continue
			}
			gm, _ := json.MarshalIndent(got.Metadata(), "", "  ")
			wm, _ := json.MarshalIndent(want.Metadata(), "", "  ")
			if string(gm) != string(wm) {
				t.Fatalf("case %d (seeded %v): plan\n%s\nsingle machine\n%s", i, seeded, gm, wm)
			}
			if got.CellMOE90() != want.CellMOE90() || got.MOE90 != want.MOE90 || got.Sigma != want.Sigma || got.Grid != want.Grid || got.Epsilon != want.Epsilon {
				t.Fatalf("case %d: plan %+v, single machine %+v", i, got, want)
			}
		}
	}
}

// TestGaussianPlanErrors checks a Gaussian spec (and a Laplace one with a
// delta) is refused as the single machine refuses it.
func TestGaussianPlanErrors(t *testing.T) {
	tb := writeTable(t, t.TempDir(), []int{3, 4}, 0, 1, 1)
	rho, _ := privacy.NewRho(1)
	eps, _ := privacy.NewEpsilon(1)
	for _, tc := range []struct {
		spec Spec
		want string
	}{
		{Spec{Mechanism: cube.MechanismGaussian, Delta: 1e-6}, "needs rho"},
		{Spec{Mechanism: cube.MechanismGaussian, Rho: rho, Epsilon: eps, Delta: 1e-6}, "leave epsilon unset"},
		{Spec{Mechanism: cube.MechanismGaussian, Rho: rho}, "at a delta in (0, 1)"},
		{Spec{Mechanism: cube.MechanismGaussian, Rho: rho, Delta: 1}, "at a delta in (0, 1)"},
		{Spec{Epsilon: eps, Delta: 1e-6}, "delta applies to Gaussian releases only"},
	} {
		tc.spec.Schema, tc.spec.Cuboid = tb.schema, cube.Base(2)
		_, err := plan(tb.schema, tc.spec)
		core, cerr := cube.ReleaseFrom(context.Background(), tb.schema, map[cube.Cuboid][]float64{cube.Base(2): make([]float64, 12)},
			cube.ReleaseSpec{Mechanism: tc.spec.Mechanism, Rho: tc.spec.Rho, Epsilon: tc.spec.Epsilon, Delta: tc.spec.Delta, Cuboid: cube.Base(2)}, noise.NewSeeded(1))
		if err == nil || cerr == nil || err.Error() != cerr.Error() || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%+v: %v, single machine %v (%v)", tc.spec, err, cerr, core)
		}
	}
}
