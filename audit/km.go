package audit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"gonum.org/v1/plot/plotter"

	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/sensitivity"
)

// KMSettings are the parameters of the Kifer–Machanavajjhala attack.
type KMSettings struct {
	Eps float64
	// Ks are the table sizes k attacked (the number of values of R).
	Ks []int
	// Trials is the number of tables attacked per k.
	Trials int
}

// KMDefaults returns the full settings, or the reduced ones of quick
// runs: eps = 1, k = 1, 2, 4, ..., 1024 (to 256 when quick), 4000 tables per
// k (300 when quick).
func KMDefaults(quick bool) KMSettings {
	s := KMSettings{Eps: 1, Trials: 4000}
	top := 1024
	if quick {
		s.Trials, top = 300, 256
	}
	for k := 1; k <= top; k *= 2 {
		s.Ks = append(s.Ks, k)
	}
	return s
}

// KMPoint is the outcome of the attack for one k.
type KMPoint struct {
	K int
	// Sensitivity is the generic sensitivity of the table given the k-1
	// public sums of adjacent counts: the L1 norm of the only move that
	// keeps them, (+1, -1, +1, ...), which is k.
	Sensitivity int
	// PlainRate and CalibratedRate are the shares of tables reconstructed
	// exactly from counts with Lap(1/eps) noise and with noise calibrated
	// to the generic sensitivity, Lap(k/eps).
	PlainRate, CalibratedRate float64
	// PlainVar and CalibratedVar are the empirical variances of the
	// attacker's estimate of c(r_1); PredictedVar is the paper's 2/(k eps^2)
	// (for the grid noise's scale) and CalibratedPredictedVar 2k/eps^2.
	PlainVar, CalibratedVar              float64
	PredictedVar, CalibratedPredictedVar float64
	// PredictedRate is P(|N(0, PredictedVar)| < 1/2), the normal
	// approximation of PlainRate (poor for small k).
	PredictedRate float64
}

// KM runs the attack of paper 3, Section 3 (Example 3.1, after Kifer and
// Machanavajjhala): a table of k counts c(r_1..r_k) whose k-1 sums of
// adjacent counts a_i = c(r_i) + c(r_{i+1}) are public. From the noisy
// counts, c(r_1) has k independent estimators (-1)^(j-1) (noisy c(r_j) -
// b_j), where b_j is the alternating sum of the a_i before j; their mean has
// variance 2b^2/k, and rounding it recovers c(r_1), hence the whole table.
// The calibrated release adds noise for the generic sensitivity k of the
// constraints instead (paper 3, Section 4), which the attack cannot average
// away.
func KM(ctx context.Context, r *noise.Rand, s KMSettings) ([]KMPoint, error) {
	if !(s.Eps > 0) || math.IsInf(s.Eps, 0) {
		return nil, fmt.Errorf("audit: KM attack: eps must be finite and > 0, got %v", s.Eps)
	}
	if s.Trials < 2 || len(s.Ks) == 0 {
		return nil, errors.New("audit: KM attack needs at least one k and two trials")
	}
	plain, err := noise.NewLaplace(1, s.Eps)
	if err != nil {
		return nil, err
	}
	var out []KMPoint
	for _, k := range s.Ks {
		if k < 1 || k > 1<<20 {
			return nil, fmt.Errorf("audit: KM attack: k must be in 1..2^20, got %d", k)
		}
		sens, err := chainSensitivity(ctx, k)
		if err != nil {
			return nil, err
		}
		cal, err := noise.NewLaplace(float64(sens), s.Eps)
		if err != nil {
			return nil, err
		}
		pt := KMPoint{
			K:                      k,
			Sensitivity:            sens,
			PredictedVar:           2 * plain.Scale() * plain.Scale() / float64(k),
			CalibratedPredictedVar: 2 * cal.Scale() * cal.Scale() / float64(k),
		}
		pt.PredictedRate = math.Erf(0.5 / math.Sqrt(2*pt.PredictedVar))
		c := make([]float64, k)
		noisy := make([]float64, k)
		var okPlain, okCal int
		var ssPlain, ssCal float64
		for range s.Trials {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			for i := range c {
				c[i] = float64(r.Uint64N(21))
			}
			for _, m := range []struct {
				lap noise.Laplace
				ok  *int
				ss  *float64
			}{{plain, &okPlain, &ssPlain}, {cal, &okCal, &ssCal}} {
				copy(noisy, c)
				if err := m.lap.AddTo(r, noisy); err != nil {
					return nil, err
				}
				est := kmEstimate(c, noisy)
				*m.ss += (est - c[0]) * (est - c[0])
				if math.Round(est) == c[0] {
					*m.ok++
				}
			}
		}
		n := float64(s.Trials)
		pt.PlainRate, pt.CalibratedRate = float64(okPlain)/n, float64(okCal)/n
		pt.PlainVar, pt.CalibratedVar = ssPlain/n, ssCal/n
		out = append(out, pt)
	}
	return out, nil
}

// kmEstimate returns the attacker's estimate of c[0] from the noisy counts
// and the public sums of adjacent true counts c[i] + c[i+1]: the mean of
// the k estimators (-1)^j (noisy[j] - b_j), where c[j] = (-1)^j c[0] + b_j.
// Rounding it gives c[0], and then every c[j] = (-1)^j c[0] + b_j.
func kmEstimate(c, noisy []float64) float64 {
	var b, sum float64
	sign := 1.0
	for j := range noisy {
		if j > 0 {
			b = c[j-1] + c[j] - b // a_{j-1} - b_{j-1}: only the public sum is used
		}
		sum += sign * (noisy[j] - b)
		sign = -sign
	}
	return sum / float64(len(noisy))
}

// chainSensitivity returns the generic sensitivity of a table of k counts
// given the sums of adjacent counts: the largest L1 norm of a Graver basis
// element of the constraints, computed by sensitivity.GraverBasis for k up to
// sensitivity.MaxGraverCells. The basis is always the one move (+1, -1, +1, ...),
// so the value is k, which is used beyond that size.
func chainSensitivity(ctx context.Context, k int) (int, error) {
	if k > sensitivity.MaxGraverCells {
		return k, nil
	}
	rows := make([][]int, 0, k-1)
	for i := 0; i+1 < k; i++ {
		rows = append(rows, []int{i, i + 1})
	}
	basis, err := sensitivity.GraverBasis(ctx, k, rows)
	if err != nil {
		return 0, err
	}
	best := 0
	for _, g := range basis {
		l1 := 0
		for _, v := range g {
			l1 += max(v, -v)
		}
		best = max(best, l1)
	}
	return best, nil
}

// KMAttack is the Kifer–Machanavajjhala reconstruction (paper 3, Section 3).
func KMAttack() Attack {
	return Attack{
		Name:    "km",
		Summary: "paper 3, Section 3: exact sums of adjacent counts plus Lap(1/eps) counts reconstruct the table",
		Explanation: "A table of k counts c(r_1..r_k) is released with Lap(1/eps) noise on every count while the k-1 sums " +
			"c(r_i)+c(r_{i+1}) are public exactly (paper 3, Example 3.1, after Kifer and Machanavajjhala). Every noisy count, " +
			"combined with the public sums, is an independent estimate of c(r_1); averaging the k of them leaves a variance of " +
			"2/(k eps^2), so rounding recovers c(r_1), and with it the whole table, almost surely once k is in the hundreds. " +
			"The noise was calibrated to neighbours that add or remove one row, but the public sums only allow moving a table " +
			"to another with the same sums, and the smallest such move, (+1,-1,+1,...), changes k rows: the generic " +
			"sensitivity is k (computed here with sensitivity.GraverBasis). Lap(k/eps), what knowdp's cube release uses, makes the " +
			"attacker's variance grow as 2k/eps^2 and the reconstruction rate fall with k instead.",
		Run: runKM,
	}
}

func runKM(ctx context.Context, cfg AttackConfig) (*Report, error) {
	if err := checkAttackConfig(cfg); err != nil {
		return nil, err
	}
	s := KMDefaults(cfg.Quick)
	pts, err := KM(ctx, cfg.Rand, s)
	if err != nil {
		return nil, err
	}
	rep := &Report{}
	var rows [][]string
	var plainXY, calXY, predXY plotter.XYs
	for _, p := range pts {
		rows = append(rows, []string{strconv.Itoa(p.K), f(s.Eps), strconv.Itoa(p.Sensitivity), f(p.PlainRate), f(p.CalibratedRate),
			f(p.PredictedRate), f(p.PlainVar), f(p.PredictedVar), f(p.CalibratedVar), f(p.CalibratedPredictedVar), strconv.Itoa(s.Trials)})
		plainXY = append(plainXY, plotter.XY{X: float64(p.K), Y: p.PlainRate})
		calXY = append(calXY, plotter.XY{X: float64(p.K), Y: p.CalibratedRate})
		predXY = append(predXY, plotter.XY{X: float64(p.K), Y: p.PredictedRate})
	}
	if err := rep.writeCSV(cfg.Dir, "km.csv", []string{"k", "eps", "generic_sensitivity", "reconstruction_rate_lap_1_over_eps",
		"reconstruction_rate_calibrated", "predicted_rate_normal_approx", "estimator_variance", "predicted_variance_2_over_k_eps2",
		"calibrated_estimator_variance", "calibrated_predicted_variance_2k_over_eps2", "trials"}, rows); err != nil {
		return nil, err
	}
	p, err := linePlot(fmt.Sprintf("Kifer-Machanavajjhala reconstruction (eps = %g)", s.Eps), "k (counts in the table)",
		"share of tables reconstructed exactly", true,
		series{"Lap(1/eps): add/remove sensitivity", plainXY, vulnerable},
		series{"Lap(k/eps): generic sensitivity k (knowdp)", calXY, protected},
		series{"normal approximation, variance 2/(k eps^2)", predXY, predicted})
	if err != nil {
		return nil, err
	}
	p.Y.Min, p.Y.Max = 0, 1.35 // room for the legend
	if err := rep.savePlot(p, cfg.Dir, "km"); err != nil {
		return nil, err
	}
	first, last := pts[0], pts[len(pts)-1]
	rep.Headline = []string{
		fmt.Sprintf("k = %d: one count with Lap(1/eps) is guessed exactly in %.1f%% of tables", first.K, 100*first.PlainRate),
		fmt.Sprintf("k = %d, Lap(1/eps) + exact adjacent sums: whole table reconstructed in %.1f%% of %d tables (estimator variance %.4g, predicted 2/(k eps^2) = %.4g)",
			last.K, 100*last.PlainRate, s.Trials, last.PlainVar, last.PredictedVar),
		fmt.Sprintf("k = %d, Lap(k/eps) for the generic sensitivity %d: %.1f%% (variance %.4g, predicted 2k/eps^2 = %.4g)",
			last.K, last.Sensitivity, 100*last.CalibratedRate, last.CalibratedVar, last.CalibratedPredictedVar),
	}
	return rep, nil
}
