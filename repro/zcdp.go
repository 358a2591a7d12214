package repro

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/knowdp/knowdp/data"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/release"
	"github.com/knowdp/knowdp/sensitivity"
)

// ZCDP compares Laplace noise under pure eps with Gaussian noise under
// zCDP at the same (eps, delta), for releases of many cuboids with
// invariants (issue: "when each wins").
func ZCDP() Experiment {
	return Experiment{
		Name:    "zcdp",
		Summary: "Laplace (pure eps) against Gaussian (zCDP) noise at equal (eps, delta) for 1, 4, 16 and 64 cuboids of the arrests data with invariants",
		Run:     runZCDP,
	}
}

// ZCDPRow is one line of the comparison: k cuboids released separately,
// each with 1/k of the budget, made consistent with the invariants.
type ZCDPRow struct {
	Cuboids int
	// Rho is the zCDP budget whose (eps, delta) guarantee is the same as
	// the Laplace releases' pure eps (for the given delta).
	Rho float64
	// LaplaceRMSE and GaussianRMSE are the root-mean-square errors per
	// cell, averaged over the cuboids' cells, from the mechanisms alone.
	LaplaceRMSE, GaussianRMSE float64
}

// CompareZCDP returns the rows for k cuboids of the arrests data (its 2- and
// 3-dimensional cuboids in order, skipping those the invariants make
// public) with the invariants {year} and {colour,sex}, at (eps, delta).
// Laplace: eps/k per cuboid (sequential composition), noise calibrated to
// the L1 generic sensitivity. Gaussian: rho/k per cuboid (zCDP composes by
// adding rho), calibrated to the L2 generic sensitivity, with rho the
// largest zCDP budget that is (eps, delta)-DP (Canonne-Kamath-Steinke).
// Both are unbiased; their per-cell variance after least-squares
// consistency is the noise variance times the same factor of the cuboid
// and invariants.
func CompareZCDP(eps, delta float64, ks []int) ([]ZCDPRow, error) {
	_, s, err := data.Arrests()
	if err != nil {
		return nil, err
	}
	year, _ := s.CuboidOf("year")
	colourSex, _ := s.CuboidOf("colour", "sex")
	exact := []domain.Cuboid{year, colourSex}
	exactViews := []domain.View{domain.ViewOf(year), domain.ViewOf(colourSex)}
	var cuboids []domain.Cuboid
	for size := 2; size <= 3; size++ {
		for c := domain.Cuboid(1); c < domain.Base(s.NumDims()); c++ {
			if c.Len() != size {
				continue
			}
			if sens, err := sensitivity.GenericSensitivity(s, exact, c); err == nil && sens.Value > 0 {
				cuboids = append(cuboids, c)
			}
		}
	}
	rho, err := rhoFor(eps, delta)
	if err != nil {
		return nil, err
	}
	var rows []ZCDPRow
	for _, k := range ks {
		if k > len(cuboids) {
			return nil, fmt.Errorf("zcdp: %d cuboids asked for, the schema has %d", k, len(cuboids))
		}
		share, err := privacy.NewEpsilon(eps / float64(k))
		if err != nil {
			return nil, err
		}
		row := ZCDPRow{Cuboids: k, Rho: rho}
		var cells, sumL, sumG float64
		for _, c := range cuboids[:k] {
			l1, err := sensitivity.GenericSensitivity(s, exact, c)
			if err != nil {
				return nil, err
			}
			l2, err := sensitivity.GenericL2Sensitivity(s, exact, c)
			if err != nil {
				return nil, err
			}
			lap, err := noise.NewLaplace(float64(l1.Value), share.Float64())
			if err != nil {
				return nil, err
			}
			g, err := noise.NewGaussian(l2.Value, rho/float64(k))
			if err != nil {
				return nil, err
			}
			rmse, err := release.ExpectedRMSE(s, release.Spec{Epsilon: share, Exact: exactViews, Tables: []domain.View{domain.ViewOf(c)}}, release.StrategyEqual)
			if err != nil {
				return nil, err
			}
			factor := rmse[0] * rmse[0] / lap.Variance() // consistency's variance reduction
			n := float64(s.CuboidSize(c))
			cells += n
			sumL += n * lap.Variance() * factor
			sumG += n * g.Variance() * factor
		}
		row.LaplaceRMSE, row.GaussianRMSE = math.Sqrt(sumL/cells), math.Sqrt(sumG/cells)
		rows = append(rows, row)
	}
	return rows, nil
}

// rhoFor returns the largest rho (to 1e-12 relative) whose tight
// (eps, delta) conversion is at most eps.
func rhoFor(eps, delta float64) (float64, error) {
	lo, hi := 0.0, eps
	for range 200 {
		mid := (lo + hi) / 2
		e, err := privacy.EpsilonFor(mid, delta)
		if err != nil {
			return 0, err
		}
		if e <= eps {
			lo = mid
		} else {
			hi = mid
		}
		if hi-lo < 1e-12*hi {
			break
		}
	}
	return lo, nil
}

func runZCDP(_ context.Context, cfg Config) error {
	const eps, delta = 1.0, 1e-6
	rows, err := CompareZCDP(eps, delta, []int{1, 4, 16, 64})
	if err != nil {
		return err
	}
	var out [][]string
	for _, r := range rows {
		winner := "laplace"
		if r.GaussianRMSE < r.LaplaceRMSE {
			winner = "gaussian"
		}
		out = append(out, []string{strconv.Itoa(r.Cuboids), fmt.Sprint(eps), fmt.Sprint(delta), strconv.FormatFloat(r.Rho, 'g', 6, 64),
			strconv.FormatFloat(r.LaplaceRMSE, 'f', 3, 64), strconv.FormatFloat(r.GaussianRMSE, 'f', 3, 64), winner})
		cfg.Log.Info("zcdp", "cuboids", r.Cuboids, "laplace_rmse", r.LaplaceRMSE, "gaussian_rmse", r.GaussianRMSE)
	}
	return WriteCSV(cfg.Dir, "zcdp.csv", []string{"cuboids", "epsilon", "delta", "rho", "laplace_rmse", "gaussian_rmse", "lower_error"}, out)
}
