package release

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
)

// TestIntegerExactWritten checks that the sidecars of integer releases say
// "integer_exact" whether it is true or false (a false one must not be
// dropped as if empty), and that releases that are not integer do not
// carry the field at all.
func TestIntegerExactWritten(t *testing.T) {
	s, err := domain.NewSchema([]domain.Dimension{{Name: "a", Values: []string{"x", "y", "z"}}, {Name: "b", Values: []string{"p", "q"}}})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := cube.New(s, cube.DefaultCellLimit)
	copy(c.Counts, []float64{3, 1, 4, 1, 5, 9})
	a, _ := s.CuboidOf("a")
	eps, _ := privacy.NewEpsilon(1)
	field := func(v any) string {
		t.Helper()
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{`"integer_exact":true`, `"integer_exact":false`} {
			if strings.Contains(string(b), f) {
				return f
			}
		}
		if strings.Contains(string(b), "integer_exact") {
			t.Fatalf("integer_exact neither true nor false: %s", b)
		}
		return ""
	}
	for _, integer := range []bool{false, true} {
		rel, err := runCube(context.Background(), c, cuboidSpec{Epsilon: eps, Exact: []domain.Cuboid{a}, Cuboid: domain.Base(2), Integer: integer}, noise.NewSeeded(1))
		if err != nil {
			t.Fatal(err)
		}
		want := ""
		if integer {
			want = `"integer_exact":true`
		}
		if got := field(rel.Metadata()); got != want {
			t.Errorf("integer %v: %q, want %q", integer, got, want)
		}
		if integer {
			rel.IntegerExact = false
			if got := field(rel.Metadata()); got != `"integer_exact":false` {
				t.Errorf("an inexact integer release: %q", got)
			}
		}

		w, err := runWorkloadCube(context.Background(), c, workloadSpec{Epsilon: eps, Exact: []domain.Cuboid{a}, Cuboids: []domain.Cuboid{domain.Base(2), a}}, noise.NewSeeded(2))
		if err != nil {
			t.Fatal(err)
		}
		if integer {
			if err := w.RoundIntegers(context.Background(), noise.NewSeeded(3)); err != nil {
				t.Fatal(err)
			}
		}
		for i := range w.Tables {
			if w.Tables[i].Public {
				continue // published as it is: nothing rounded
			}
			tm := w.Metadata().Tables[i]
			if got := field(tm); got != want {
				t.Errorf("workload table %d, integer %v: %q, want %q", i, integer, got, want)
			}
			if integer {
				w.Tables[i].IntegerExact = false
				if got := field(w.Metadata().Tables[i]); got != `"integer_exact":false` {
					t.Errorf("workload table %d, inexact: %q", i, got)
				}
			}
		}
	}
}
