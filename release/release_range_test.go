package release

import (
	"bytes"
	"context"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
)

// largeCounts is a 2x3 table whose first cell holds all but a few of total
// (every sum exact in float64 for totals up to 2^53).
func largeCounts(total float64) []float64 {
	return []float64{total - 10, 1, 2, 3, 1, 3}
}

// checkNear fails unless every released count is within 40 margins of
// error of the true one, give or take 16 (a few float64 spacings at 2^53,
// from the consistency step's arithmetic). A clamped count misses by
// millions.
func checkNear(t *testing.T, what string, got, want []float64, moe90 float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d counts, want %d", what, len(got), len(want))
	}
	for i := range got {
		if d := math.Abs(got[i] - want[i]); !(d <= 40*moe90+16) {
			t.Fatalf("%s: cell %d released as %.17g, true count %.17g (off by %g, moe90 %g)", what, i, got[i], want[i], d, moe90)
		}
	}
}

// TestReleaseLargeCountsNotClamped releases counts no real table reaches
// (issue 19: 20,000,000 at eps 100 came back as 16,777,216 and
// 2,147,483,000 at eps 1.1 as 2^30) as one cuboid, with Laplace and
// Gaussian noise, up to 2^53 at the largest epsilon and rho the library
// accepts, and checks that each is released as itself plus noise, in the
// Release and in its CSV.
func TestReleaseLargeCountsNotClamped(t *testing.T) {
	s := testkit.TestSchema(t, 2, 3)
	d0 := testkit.CuboidOf([]int{0})
	for _, tc := range []struct {
		name   string
		total  float64
		cuboid domain.Cuboid
		exact  []domain.Cuboid
		eps    float64 // Laplace when > 0
		rho    float64 // Gaussian when > 0
	}{
		{"grand total 20,000,000 at eps 100", 20_000_000, 0, nil, 100, 0},
		{"cell 2,147,483,000 at eps 1.1", 2_147_483_010, domain.Base(2), nil, 1.1, 0},
		{"330,000,000 at eps 10", 330_000_010, d0, nil, 10, 0},
		{"2^53 grand total at eps MaxEpsilon", 0x1p53, 0, nil, privacy.MaxEpsilon, 0},
		{"2^53 base cuboid at eps 1, {d0} exact", 0x1p53, domain.Base(2), []domain.Cuboid{d0}, 1, 0},
		{"Gaussian: grand total 20,000,000 at rho 5000", 20_000_000, 0, nil, 0, 5000},
		{"Gaussian: cell 2,147,483,000 at rho 0.605", 2_147_483_010, domain.Base(2), nil, 0, 0.605},
		{"Gaussian: 2^53 grand total at rho MaxRho", 0x1p53, 0, nil, 0, privacy.MaxRho},
		{"Gaussian: 2^53 base cuboid at rho 0.5, {d0} exact", 0x1p53, domain.Base(2), []domain.Cuboid{d0}, 0, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cube.Cube{Schema: s, Counts: largeCounts(tc.total)}
			spec := cuboidSpec{Exact: tc.exact, Cuboid: tc.cuboid}
			if tc.eps > 0 {
				spec.Epsilon = eps(t, tc.eps)
			} else {
				spec.Mechanism, spec.Rho, spec.Delta = MechanismGaussian, rho(t, tc.rho), 1e-6
			}
			rel, err := runCube(context.Background(), c, spec, noise.NewSeeded(11))
			if err != nil {
				t.Fatal(err)
			}
			want := c.Project(tc.cuboid)
			checkNear(t, "release", rel.Counts, want, rel.MOE90)
			var buf bytes.Buffer
			if err := rel.WriteCSV(&buf); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")[1:]
			fromCSV := make([]float64, len(lines))
			for i, line := range lines {
				f := strings.Split(line, ",")
				if fromCSV[i], err = strconv.ParseFloat(f[len(f)-2], 64); err != nil {
					t.Fatal(err)
				}
			}
			checkNear(t, "CSV", fromCSV, want, rel.MOE90)
		})
	}
}

// TestWorkloadLargeCountsNotClamped is TestReleaseLargeCountsNotClamped for
// a workload of the grand total, a margin and the base cuboid under one
// budget.
func TestWorkloadLargeCountsNotClamped(t *testing.T) {
	s := testkit.TestSchema(t, 2, 3)
	cuboids := []domain.Cuboid{0, testkit.CuboidOf([]int{0}), domain.Base(2)}
	for _, tc := range []struct {
		name  string
		total float64
		eps   float64
		rho   float64
	}{
		{"20,000,000 at eps 100", 20_000_000, 100, 0},
		{"2,147,483,000 at eps 1.1", 2_147_483_010, 1.1, 0},
		{"2^53 at eps MaxEpsilon", 0x1p53, privacy.MaxEpsilon, 0},
		{"Gaussian: 20,000,000 at rho 5000", 20_000_000, 0, 5000},
		{"Gaussian: 2^53 at rho MaxRho", 0x1p53, 0, privacy.MaxRho},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cube.Cube{Schema: s, Counts: largeCounts(tc.total)}
			spec := workloadSpec{Cuboids: cuboids}
			if tc.eps > 0 {
				spec.Epsilon = eps(t, tc.eps)
			} else {
				spec.Mechanism, spec.Rho, spec.Delta = MechanismGaussian, rho(t, tc.rho), 1e-6
			}
			rel, err := runWorkloadCube(context.Background(), c, spec, noise.NewSeeded(12))
			if err != nil {
				t.Fatal(err)
			}
			for _, tb := range rel.Tables {
				checkNear(t, s.Format(tb.Cuboid), tb.Counts, c.Project(tb.Cuboid), tb.MOE90)
			}
		})
	}
}

// TestFormatCountLarge checks that FormatCount prints counts up to 2^53 as
// they are (rounding v*1e6 printed 2^53-1 as 2^53) and still rounds small
// ones to 6 decimals.
func TestFormatCountLarge(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0x1p53, "9007199254740992"},
		{0x1p53 - 1, "9007199254740991"},
		{0x1p53 - 7919*3, "9007199254717235"},
		{0x1p53 + 2, "9007199254740994"},
		{-(0x1p53 - 1), "-9007199254740991"},
		{2_147_483_000, "2147483000"},
		{20_000_000.02017387, "20000000.020174"},
		{0x1p33 + 0x1p-19, "8589934592.000002"},
		{0x1p33 - 0x1p-20, "8589934591.999999"},
		{2.5000004, "2.5"},
		{-1e-9, "0"},
	} {
		if got := domain.FormatCount(tc.v); got != tc.want {
			t.Errorf("FormatCount(%.17g) = %q, want %q", tc.v, got, tc.want)
		}
	}
	// Every integer in a stretch below 2^53 prints as itself.
	for i := range int64(100_000) {
		n := int64(1)<<53 - 7919*i
		if got, want := domain.FormatCount(float64(n)), strconv.FormatInt(n, 10); got != want {
			t.Fatalf("FormatCount(%d) = %q", n, got)
		}
	}
}
