package release

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/tensor"
	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/noise"
)

// Saved measurements give back the release's tables exactly (counts,
// variances, margins), through JSON; a cuboid they determine but the
// release did not request is the marginal of a larger estimate; a cuboid
// they do not determine is refused.
func TestSavedMeasurements(t *testing.T) {
	s := testkit.TestSchema(t, 3, 4, 2)
	c := &cube.Cube{Schema: s, Counts: testkit.RandomTable(noise.NewSeeded(8), s.Cells())}
	for _, tc := range []struct {
		name string
		spec workloadSpec
	}{
		{"laplace", workloadSpec{Epsilon: eps(t, 1), Exact: []domain.Cuboid{0b001}, Cuboids: []domain.Cuboid{0b011, 0b110, 0b010}, KeepMeasurements: true}},
		{"gaussian", workloadSpec{Mechanism: MechanismGaussian, Rho: rho(t, 0.5), Delta: 1e-6, Exact: []domain.Cuboid{0b100}, Cuboids: []domain.Cuboid{0b011, 0b110}, KeepMeasurements: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rel, err := runWorkloadCube(t.Context(), c, tc.spec, noise.NewSeeded(9))
			if err != nil {
				t.Fatal(err)
			}
			saved, err := rel.SaveMeasurements()
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(saved)
			if err != nil {
				t.Fatal(err)
			}
			var back SavedMeasurements
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			s2, err := back.Schema()
			if err != nil {
				t.Fatal(err)
			}
			got, err := back.Estimate(s2, tc.spec.Cuboids)
			if err != nil {
				t.Fatal(err)
			}
			for i, tb := range rel.Tables {
				g := got[i]
				if math.Abs(g.Variance-tb.Variance) > 1e-12*tb.Variance || math.Abs(g.MOE90-tb.MOE90) > 1e-9*tb.MOE90 || g.Public != tb.Public {
					t.Errorf("%s: variance %v moe %v public %v, release %v %v %v", s.Format(tb.Cuboid), g.Variance, g.MOE90, g.Public, tb.Variance, tb.MOE90, tb.Public)
				}
				for k := range tb.Counts {
					if math.Abs(g.Counts[k]-tb.Counts[k]) > 1e-9 {
						t.Fatalf("%s cell %d: %v, release %v", s.Format(tb.Cuboid), k, g.Counts[k], tb.Counts[k])
					}
				}
			}
			// {d1} is not requested: its estimate is the marginal of the
			// {d1,d2} estimate, and the invariant's margin is exact.
			extra, err := back.Estimate(s2, []domain.Cuboid{0b110, 0b010, tc.spec.Exact[0]})
			if err != nil {
				t.Fatal(err)
			}
			marg := make([]float64, 4)
			tensor.Project(tensor.SubSizes(s.Sizes(), 0b110), tensor.Reindex(0b010, 0b110), extra[0].Counts, marg)
			for k := range marg {
				if math.Abs(marg[k]-extra[1].Counts[k]) > 1e-9 {
					t.Errorf("{d1}: %v, margin of {d1,d2} %v", extra[1].Counts, marg)
				}
			}
			truth := c.Project(tc.spec.Exact[0])
			for k := range truth {
				if extra[2].Counts[k] != truth[k] || !extra[2].Public || extra[2].MOE90 != 0 {
					t.Errorf("invariant: %v (public %v, moe %v), want %v", extra[2].Counts, extra[2].Public, extra[2].MOE90, truth)
				}
			}
			if _, err := back.Estimate(s2, []domain.Cuboid{0b111}); err == nil || !strings.Contains(err.Error(), "not determined") {
				t.Errorf("base cuboid: %v, want not determined", err)
			}
		})
	}
	spec := workloadSpec{Epsilon: eps(t, 1), Cuboids: []domain.Cuboid{0b011}}
	rel, err := runWorkloadCube(t.Context(), c, spec, noise.NewSeeded(9))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rel.SaveMeasurements(); err == nil || !strings.Contains(err.Error(), "KeepMeasurements") {
		t.Errorf("without KeepMeasurements: %v", err)
	}
	if _, err := (&SavedMeasurements{Format: "other"}).Schema(); err == nil {
		t.Error("a file of another format was accepted")
	}
}
