package repro

import (
	"context"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"testing"
)

func TestLinear(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir, Seed: 1, Quick: true, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := Linear().Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"linear_example1", "linear_appendix", "linear_grades"} {
		for _, ext := range []string{".png", ".svg"} {
			if st, err := os.Stat(filepath.Join(dir, name+ext)); err != nil || st.Size() == 0 {
				t.Errorf("%s%s missing: %v", name, ext, err)
			}
		}
	}

	// Example 1: integration agrees with eq. (10), tends to the exact 2 eps
	// from below, and passes the printed Theorem 2's eps.
	rows := readCSV(t, dir, "linear_example1.csv")
	prev := math.Inf(-1)
	for _, r := range rows[1:] {
		x, integ, closed := num(t, r[0]), num(t, r[1]), num(t, r[2])
		if math.Abs(integ-closed) > 1e-9 || integ > 2 || integ < prev {
			t.Fatalf("Example 1 at %v: integrated %v, closed form %v (previous %v)", x, integ, closed, prev)
		}
		prev = integ
		if num(t, r[3]) != 2 || math.Abs(num(t, r[5])-1) > 1e-9 {
			t.Fatalf("Example 1: rho %s, printed Theorem 2 %s; want 2 and 1", r[3], r[5])
		}
		if x == 10 && math.Abs(integ-(2+math.Log(21.0/23))) > 1e-9 {
			t.Errorf("log ratio at 10 sigma = %v, want 2 + log(21/23)", integ)
		}
	}

	// Appendix: (k+1) eps/2 for x̂₁, (k+3) eps/2 for both under
	// substitution, for k = 1..20.
	rows = readCSV(t, dir, "linear_appendix.csv")
	if len(rows) != 21 {
		t.Fatalf("appendix has %d rows", len(rows))
	}
	for _, r := range rows[1:] {
		k := num(t, r[0])
		for col, want := range map[int]float64{1: (k + 1) / 2, 2: (k + 1) / 2, 3: (k + 1) / 2, 5: (k + 1) / 2, 6: (k + 3) / 2, 7: (k + 3) / 2, 8: (k + 1) / 2} {
			if got := num(t, r[col]); math.Abs(got-want) > 1e-9 {
				t.Errorf("k=%v, %s = %v, want %v", k, rows[0][col], got, want)
			}
		}
		if far := num(t, r[4]); far > (k+1)/2 || far < (k+1)/2-1e-3 {
			t.Errorf("k=%v: integrated log ratio far out %v, want just below %v", k, far, (k+1)/2)
		}
	}

	// Grades: the exact variances 2 sigma² M_ii (sigma = 3), and the Monte
	// Carlo within 5 standard errors (Laplace noise has kurtosis 6, so the
	// sample variance has standard error at most var sqrt(5/n)).
	rows = readCSV(t, dir, "linear_grades.csv")
	wantDef := map[string]float64{"A": 18 * 11 / 14.0, "F": 18 * 9 / 14.0, "p": 18 * 4 / 7.0, "t": 18 * 9 / 14.0}
	wantAB := map[string]float64{"A": 9, "B": 9, "C": 11.25, "p": 9, "t": 11.25}
	const runs = 5000
	for _, r := range rows[1:] {
		for col, want := range map[int]float64{3: wantDef[r[0]], 6: wantAB[r[0]]} {
			if want == 0 {
				continue
			}
			if got := num(t, r[col]); math.Abs(got-want) > 1e-9 {
				t.Errorf("%s: %s = %v, want %v", r[0], rows[0][col], got, want)
			}
		}
		for _, col := range []int{1, 3, 6} {
			theory, mc := num(t, r[col]), num(t, r[col+1])
			if math.Abs(mc-theory) > 5*theory*math.Sqrt(5.0/runs) {
				t.Errorf("%s: Monte Carlo %s = %v, theory %v", r[0], rows[0][col+1], mc, theory)
			}
		}
	}

	rows = readCSV(t, dir, "linear_grades_rho.csv")
	if len(rows) != 5 {
		t.Fatalf("grades rho has %d rows", len(rows))
	}
	if rho := num(t, rows[1][6]); math.Abs(rho-1) > 1e-9 {
		t.Errorf("definitional constraints: rho %v, want 1 (= eps)", rho)
	}
	if rows[3][6] != "+Inf" || rows[3][8] != "impossible" {
		t.Errorf("full release with AB = 80: rho %s, scale %s; want +Inf, impossible", rows[3][6], rows[3][8])
	}
	if rho := num(t, rows[4][6]); math.Abs(rho-5.0/3) > 1e-9 {
		t.Errorf("Definition 5 rho with AB = 80: %v, want 5/3", rho)
	}
}
