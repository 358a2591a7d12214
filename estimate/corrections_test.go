package estimate

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/tensor"
)

// TestCorrectionsMatchConsistent checks that x plus the broadcast
// corrections, computed from marginals alone, is the least-squares
// consistent release Consistent computes on the whole array.
func TestCorrectionsMatchConsistent(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 13))
	for trial := range 200 {
		nd := 2 + rng.IntN(4)
		dims := make([]domain.Dimension, nd)
		for d := range dims {
			vals := make([]string, 1+rng.IntN(4))
			for v := range vals {
				vals[v] = string(rune('a'+d)) + string(rune('0'+v))
			}
			dims[d] = domain.Dimension{Name: string(rune('A' + d)), Values: vals}
		}
		s, err := domain.NewSchema(dims)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := cube.New(s, 1<<20)
		for i := range c.Counts {
			c.Counts[i] = float64(rng.IntN(5))
		}
		all := domain.Base(nd)
		over := domain.Cuboid(rng.Uint64()) & all
		var exact []domain.Cuboid
		for range rng.IntN(4) {
			exact = append(exact, domain.Cuboid(rng.Uint64())&all)
		}
		inv := invariantsOf(c, exact)
		x := c.Project(over)
		for i := range x {
			x[i] += rng.NormFloat64() * 3
		}
		marg := make([][]float64, len(inv))
		for i, v := range inv {
			k := v.Cuboid & over
			marg[i] = make([]float64, s.CuboidSize(k))
			tensor.Project(tensor.SubSizes(s.Sizes(), over), tensor.Reindex(k, over), x, marg[i])
		}
		corr, err := Corrections(s, over, marg, inv)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		got := append([]float64(nil), x...)
		for _, cr := range corr {
			if cr.Keep&^over != 0 {
				t.Fatalf("trial %d: correction over %s is not within %s", trial, s.Format(cr.Keep), s.Format(over))
			}
			tensor.BroadcastAdd(tensor.SubSizes(s.Sizes(), over), tensor.Reindex(cr.Keep, over), got, cr.Delta)
		}
		want := append([]float64(nil), x...)
		if err := Consistent(s, over, want, inv); err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		for i := range want {
			if d := math.Abs(got[i] - want[i]); d > 1e-12*math.Max(1, math.Abs(want[i])) {
				t.Fatalf("trial %d (over %s, exact %v): cell %d: corrections give %v, Consistent %v", trial, s.Format(over), exact, i, got[i], want[i])
			}
		}
	}
}

func TestCorrectionsErrors(t *testing.T) {
	s, err := domain.NewSchema([]domain.Dimension{{Name: "a", Values: []string{"0", "1"}}, {Name: "b", Values: []string{"x", "y", "z"}}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := domain.Cuboid(1), domain.Cuboid(2)
	tests := []struct {
		name  string
		over  domain.Cuboid
		marg  [][]float64
		inv   []Invariant
		wants string
	}{
		{"count mismatch", a | b, nil, []Invariant{{Cuboid: a, Counts: []float64{1, 2}}}, "1 invariants"},
		{"short marginal", a | b, [][]float64{{1}}, []Invariant{{Cuboid: a, Counts: []float64{1, 2}}}, "marginal of the release on {a} has 2 cells, got 1"},
		{"short invariant", a | b, [][]float64{{1, 2}}, []Invariant{{Cuboid: a, Counts: []float64{1}}}, "exact cuboid {a} has 2 cells, got 1"},
		{"negative count", a | b, [][]float64{{1, 2}}, []Invariant{{Cuboid: a, Counts: []float64{1, -1}}}, "cell a=1: count -1"},
		{"beyond schema", 4, nil, nil, "beyond the schema"},
		{"disagree", a | b, [][]float64{{1, 2}, {1, 2, 3}}, []Invariant{{Cuboid: a, Counts: []float64{1, 2}}, {Cuboid: b, Counts: []float64{1, 1, 2}}}, "disagree on the grand total"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Corrections(s, tc.over, tc.marg, tc.inv)
			if err == nil || !strings.Contains(err.Error(), tc.wants) {
				t.Fatalf("got %v, want an error containing %q", err, tc.wants)
			}
		})
	}
}
