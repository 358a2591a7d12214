package release

import (
	"context"
	"math"
	"testing"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/moe"
	"github.com/knowdp/knowdp/noise"
)

// coverage returns the fraction of released cells within their margin of
// error of the truth, over n seeded releases.
func coverage(t *testing.T, n int, release func(r *noise.Rand) (got, truth [][]float64, moe []float64)) float64 {
	t.Helper()
	r := noise.NewSeeded(31)
	in, all := 0, 0
	for range n {
		got, truth, moe := release(noise.NewSeeded(r.Uint64()))
		for i := range got {
			for k := range got[i] {
				all++
				if math.Abs(got[i][k]-truth[i][k]) <= moe[i] {
					in++
				}
			}
		}
	}
	return float64(in) / float64(all)
}

// TestMOE90Coverage: over many seeded releases, 90% ± 1.5% of released
// cells lie within their margin of error, for one cuboid alone (exact
// discrete margin), one cuboid with invariants (Release.MOE90), and a
// workload of overlapping cuboids with invariants.
func TestMOE90Coverage(t *testing.T) {
	s := testkit.TestSchema(t, 3, 4, 2)
	c := &cube.Cube{Schema: s, Counts: testkit.RandomTable(noise.NewSeeded(2), s.Cells())}
	ctx := context.Background()
	workload := func(spec workloadSpec) func(r *noise.Rand) ([][]float64, [][]float64, []float64) {
		needs, err := flatNeeds(s, spec)
		if err != nil {
			t.Fatal(err)
		}
		exact := map[domain.Cuboid][]float64{}
		for _, n := range needs {
			exact[n] = c.Project(n)
		}
		return func(r *noise.Rand) (got, truth [][]float64, moe []float64) {
			rel, err := runWorkload(ctx, s, exact, spec, r)
			if err != nil {
				t.Fatal(err)
			}
			for _, tb := range rel.Tables {
				if tb.Public {
					continue
				}
				got = append(got, tb.Counts)
				truth = append(truth, c.Project(tb.Cuboid))
				moe = append(moe, tb.MOE90)
			}
			return got, truth, moe
		}
	}
	for _, tc := range []struct {
		name string
		n    int
		rel  func(r *noise.Rand) ([][]float64, [][]float64, []float64)
	}{
		{"one cuboid", 800, workload(workloadSpec{Epsilon: eps(t, 0.5), Cuboids: []domain.Cuboid{0b011}})},
		{"workload", 300, workload(workloadSpec{Epsilon: eps(t, 1), Exact: []domain.Cuboid{0b001}, Cuboids: []domain.Cuboid{0b011, 0b110, 0b101, 0b010}})},
		{"invariants", 800, func(r *noise.Rand) ([][]float64, [][]float64, []float64) {
			rel, err := runCube(ctx, c, cuboidSpec{Epsilon: eps(t, 0.5), Exact: []domain.Cuboid{0b011, 0b110}, Cuboid: domain.Base(3)}, r)
			if err != nil {
				t.Fatal(err)
			}
			return [][]float64{rel.Counts}, [][]float64{c.Counts}, []float64{rel.MOE90}
		}},
	} {
		cov := coverage(t, tc.n, tc.rel)
		t.Logf("%s: coverage %.4f", tc.name, cov)
		if math.Abs(cov-0.9) > 0.015 {
			t.Errorf("%s: coverage %v, want 0.9 ± 0.015", tc.name, cov)
		}
	}
}

// Release.MOE90 is the workload's margin for the same single measurement,
// 0 for a public cuboid; a non-negative release keeps the least-squares
// estimate's margin, an integer release adds 1 in its moe90 column.
func TestReleaseMOE90(t *testing.T) {
	s := testkit.TestSchema(t, 3, 4, 2)
	c := &cube.Cube{Schema: s, Counts: testkit.RandomTable(noise.NewSeeded(2), s.Cells())}
	ctx := context.Background()
	exact := []domain.Cuboid{0b001, 0b110}
	rel, err := runCube(ctx, c, cuboidSpec{Epsilon: eps(t, 0.8), Exact: exact, Cuboid: 0b011}, noise.NewSeeded(1))
	if err != nil {
		t.Fatal(err)
	}
	got := rel.MOE90
	w, err := runWorkloadCube(ctx, c, workloadSpec{Epsilon: eps(t, 0.8), Exact: exact, Cuboids: []domain.Cuboid{0b011}}, noise.NewSeeded(1))
	if err != nil {
		t.Fatal(err)
	}
	if want := w.Tables[0].MOE90; got != want || got <= 0 {
		t.Errorf("Release.MOE90 %v, workload %v", got, want)
	}
	// Alone, the margin is the exact one of the grid Laplace noise.
	alone, _ := runCube(ctx, c, cuboidSpec{Epsilon: eps(t, 0.8), Cuboid: 0b011}, noise.NewSeeded(1))
	lap, _ := noise.NewLaplace(1, 0.8)
	if m := alone.MOE90; m != moe.Laplace90(lap) {
		t.Errorf("alone: %v, want %v", m, moe.Laplace90(lap))
	}
	pub, _ := runCube(ctx, c, cuboidSpec{Epsilon: eps(t, 0.8), Exact: exact, Cuboid: 0b100}, noise.NewSeeded(1))
	if m := pub.MOE90; m != 0 {
		t.Errorf("public: %v", m)
	}
	nn, _ := runCube(ctx, c, cuboidSpec{Epsilon: eps(t, 0.8), Exact: exact, Cuboid: 0b011, NonNegative: true}, noise.NewSeeded(1))
	if nn.MOE90 != got || nn.CellMOE90() != got {
		t.Errorf("non-negative: %v (column %v), want the least-squares margin %v", nn.MOE90, nn.CellMOE90(), got)
	}
	in, err := runCube(ctx, c, cuboidSpec{Epsilon: eps(t, 0.8), Exact: exact, Cuboid: 0b011, Integer: true}, noise.NewSeeded(1))
	if err != nil {
		t.Fatal(err)
	}
	if in.CellMOE90() != got+1 || !in.NonNegative {
		t.Errorf("integer: column %v, want %v + 1; nonneg %v", in.CellMOE90(), got, in.NonNegative)
	}
}
