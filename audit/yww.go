package audit

import (
	"context"
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/plot/plotter"

	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/refine"
)

// YWWSettings are the parameters of the Ying–Wu–Wang appendix attack.
type YWWSettings struct {
	Eps float64
	// Ks are the ratios k of the background knowledge k mu_1 = mu_2.
	Ks []int
	// Samples is the number of refined answers drawn on each database by
	// the sampling audit; Accuracy uses as many again.
	Samples int
}

// YWWDefaults returns the full settings (eps = 1, k = 1..32, a million
// samples per database) or the quick ones (k = 1..8, 20000 samples).
func YWWDefaults(quick bool) YWWSettings {
	if quick {
		return YWWSettings{Eps: 1, Ks: []int{1, 2, 4, 8}, Samples: 20000}
	}
	return YWWSettings{Eps: 1, Ks: []int{1, 2, 4, 8, 16, 32}, Samples: 1_000_000}
}

// YWWPoint is the outcome of the attack for one k.
type YWWPoint struct {
	K int
	// Predicted is the appendix's loss of releasing the refined x̂_1 with
	// Lap(2/eps) noise on the raw answers, (k+1) eps/2, approached in the
	// tails and never attained, as refine.Linear.Loss computes it.
	Predicted float64
	// Lower is the sampling audit's lower confidence bound on the loss
	// (confidence 0.95), Estimate its point estimate on the output set
	// chosen, and SetExact that set's exact log ratio (continuous Laplace).
	Lower, Estimate, SetExact float64
	// Accuracy is how often the attacker names the database the refined
	// answer came from (threshold half-way between the two means), and
	// AccuracyExact its exact value; eps-DP allows at most e^eps/(1+e^eps).
	Accuracy, AccuracyExact float64
	// CalibratedScale is the noise scale refine.Linear.Calibrate gives for
	// releasing x̂_1 eps-DP ((k+1)/eps: the effective sensitivity k+1 over
	// eps, plus a grid step), and
	// CalibratedLower, CalibratedEstimate and CalibratedAccuracy the
	// audit and the attack against it.
	CalibratedScale                                         float64
	CalibratedLower, CalibratedEstimate, CalibratedAccuracy float64
}

// ywwDatabases are the appendix's two neighbours: D0 has mu = (m, k m),
// so k mu_1 = mu_2, and one record is added to category 1 (D') or 2
// (D”). Each database's constant c = k mu_1 - mu_2 is k (D') or -1 (D”).
func ywwDatabases(k int) (mu1, mu2 [2]float64, c1, c2 float64) {
	const m = 10
	kf := float64(k)
	return [2]float64{m + 1, kf * m}, [2]float64{m, kf*m + 1}, kf, -1
}

// ywwLinear is the appendix's refinement (eqs. 17-18) on a database whose
// constant is c: the knowledge k mu_1 - mu_2 = c and the noisy total give
// x̂_1 = (x_1 + x_2 + c)/(k+1), x̂_2 = x_2, that is A = [[1/(k+1),
// 1/(k+1)], [0, 1]], D = (1/(k+1), 0), h = 0.
func ywwLinear(k int, c float64) (*refine.Linear, error) {
	kf := float64(k)
	eqs, err := refine.NewEqualities(2, []refine.Equality{{Label: "k mu_1 - mu_2", Index: []int{0, 1}, Coef: []float64{kf, -1}, Value: c}})
	if err != nil {
		return nil, err
	}
	a := mat.NewDense(2, 2, []float64{1 / (kf + 1), 1 / (kf + 1), 0, 1})
	d := mat.NewDense(2, 1, []float64{1 / (kf + 1), 0})
	return refine.NewLinear(a, d, nil, eqs)
}

// ywwWorkload: the two answers are the two categories' counts, and the
// neighbours replace one record's category (the appendix's D', D”).
func ywwWorkload() refine.Workload {
	return refine.Workload{Queries: mat.NewDense(2, 2, []float64{1, 0, 0, 1}), Universe: []string{"category 1", "category 2"}, Relation: refine.Substitute}
}

// ywwSurvival returns P(S >= t) for S the sum of two independent
// Laplace(sigma) variables: (1/2)(1 + t/(2 sigma)) e^(-t/sigma) for t >= 0.
func ywwSurvival(t, sigma float64) float64 {
	if t < 0 {
		return 1 - ywwSurvival(-t, sigma)
	}
	return 0.5 * (1 + t/(2*sigma)) * math.Exp(-t/sigma)
}

// YWW runs the attack of Ying, Wu and Wang's appendix (paper 1): an
// attacker who knows k mu_1 = mu_2 held before one record was added
// refines the noisy counts with it, and the refined x̂_1 tells the two
// databases apart with a loss approaching (k+1) eps/2, although the raw
// counts carry Lap(2/eps) noise, eps-DP for the substitution. The
// refinement is package refine's general linear refinement (Linear.Apply)
// with the appendix's A and D; the predicted loss is refine's exact loss of
// releasing x̂_1 (Linear.Loss), and the calibrated release uses the noise
// refine calibrates for it (Linear.Calibrate: scale (k+1)/eps). The attack
// itself, the sampling audit and the distinguishing test, is this
// package's.
func YWW(ctx context.Context, r *noise.Rand, s YWWSettings) ([]YWWPoint, error) {
	if !(s.Eps > 0) || math.IsInf(s.Eps, 0) {
		return nil, fmt.Errorf("audit: YWW attack: eps must be finite and > 0, got %v", s.Eps)
	}
	if s.Samples < 100 || len(s.Ks) == 0 {
		return nil, errors.New("audit: YWW attack needs at least one k and 100 samples")
	}
	eps, err := privacy.NewEpsilon(s.Eps)
	if err != nil {
		return nil, fmt.Errorf("audit: YWW attack: %w", err)
	}
	w := ywwWorkload()
	var out []YWWPoint
	for _, k := range s.Ks {
		if k < 1 || k > 1<<20 {
			return nil, fmt.Errorf("audit: YWW attack: k must be in 1..2^20, got %d", k)
		}
		mu1, mu2, c1, c2 := ywwDatabases(k)
		lin1, err := ywwLinear(k, c1)
		if err != nil {
			return nil, err
		}
		lin2, err := ywwLinear(k, c2)
		if err != nil {
			return nil, err
		}
		plainSigma := 2 / s.Eps
		plain, err := noise.NewLaplaceScale(plainSigma, 1)
		if err != nil {
			return nil, err
		}
		loss, err := lin1.Loss(w, []int{0}, plainSigma)
		if err != nil {
			return nil, err
		}
		cal, _, err := lin1.Calibrate(w, []int{0}, eps)
		if err != nil {
			return nil, err
		}
		pt := YWWPoint{K: k, Predicted: loss.Rho, CalibratedScale: cal.Scale()}
		for _, run := range []struct {
			lap                noise.Laplace
			lower, est, acc    *float64
			setExact, accExact *float64
		}{
			{plain, &pt.Lower, &pt.Estimate, &pt.Accuracy, &pt.SetExact, &pt.AccuracyExact},
			{cal, &pt.CalibratedLower, &pt.CalibratedEstimate, &pt.CalibratedAccuracy, nil, nil},
		} {
			d1, d2 := refinedRelease(run.lap, lin1, mu1[:]), refinedRelease(run.lap, lin2, mu2[:])
			res, err := Sample(ctx, r, d1, d2, s.Eps, SampleConfig{Samples: s.Samples})
			if err != nil {
				return nil, err
			}
			*run.lower, *run.est = res.Lower, res.Estimate
			// The two means of x̂_1 are (n+k)/(k+1) and (n-1)/(k+1), with
			// n = mu_1 + mu_2 the same on both: guess D' above the middle.
			n := mu1[0] + mu1[1]
			mid := (n + (float64(k)-1)/2) / float64(k+1)
			hits := 0
			for i := range s.Samples {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				d, want := d1, true
				if i%2 == 1 {
					d, want = d2, false
				}
				v, err := d(r)
				if err != nil {
					return nil, err
				}
				if (v > mid) == want {
					hits++
				}
			}
			*run.acc = float64(hits) / float64(s.Samples)
			if run.setExact != nil {
				sigma := run.lap.Scale()
				// x̂_1 >= v on a database with constant c means
				// x_1 + x_2 - n >= (k+1) v - c - n.
				prob := func(c float64) float64 {
					t := float64(k+1)*res.Set.Value - c - n
					if res.Set.Op == AtLeast {
						return ywwSurvival(t, sigma)
					}
					return 1 - ywwSurvival(t, sigma)
				}
				p, q := prob(c1), prob(c2)
				if res.Set.Swapped {
					p, q = q, p
				}
				*run.setExact = math.Log(p) - math.Log(q)
				*run.accExact = 1 - ywwSurvival(float64(k+1)/2, sigma)
			}
		}
		out = append(out, pt)
	}
	return out, nil
}

// YWWAttack is the appendix attack of Ying, Wu and Wang (paper 1).
func YWWAttack() Attack {
	return Attack{
		Name:    "yww",
		Summary: "paper 1, appendix: refining with data-dependent knowledge tells neighbours apart with loss (k+1) eps/2",
		Explanation: "Two counts get Lap(2/eps) noise, eps-differentially private when one record may be in either " +
			"category. The attacker knows that before the record was added the counts satisfied k mu_1 = mu_2, so " +
			"k mu_1 - mu_2 is k if the record is in category 1 and -1 if it is in category 2, and refines the noisy " +
			"counts with it (Ying, Wu and Wang, appendix, eqs. 17-18): x̂_1 = (x_1 + x_2 + c)/(k+1). The two " +
			"hypotheses shift x̂_1 by a full unit while its noise shrinks with k, so the refined answer tells them " +
			"apart with a privacy loss approaching (k+1) eps/2, unbounded in k. The sampling audit measures a lower " +
			"bound on that loss from the refined answers alone. Post-processing with knowledge whose constant moves " +
			"with the data is not free: calibrating the raw noise to the refinement's effective sensitivity, " +
			"sigma = (k+1)/eps for releasing x̂_1 (docs/math.md section 1), brings the loss back to eps.",
		Run: runYWW,
	}
}

func runYWW(ctx context.Context, cfg AttackConfig) (*Report, error) {
	if err := checkAttackConfig(cfg); err != nil {
		return nil, err
	}
	s := YWWDefaults(cfg.Quick)
	pts, err := YWW(ctx, cfg.Rand, s)
	if err != nil {
		return nil, err
	}
	rep := &Report{}
	var rows [][]string
	var predXY, lowXY, estXY, calXY, epsXY plotter.XYs
	for _, p := range pts {
		rows = append(rows, []string{f(float64(p.K)), f(s.Eps), f(p.Predicted), f(p.Lower), f(p.Estimate), f(p.SetExact),
			f(p.Accuracy), f(p.AccuracyExact), f(p.CalibratedScale), f(p.CalibratedLower), f(p.CalibratedEstimate),
			f(p.CalibratedAccuracy), f(dpAccuracy(s.Eps)), f(float64(s.Samples))})
		x := float64(p.K)
		predXY = append(predXY, plotter.XY{X: x, Y: p.Predicted})
		lowXY = append(lowXY, plotter.XY{X: x, Y: p.Lower})
		estXY = append(estXY, plotter.XY{X: x, Y: p.SetExact})
		calXY = append(calXY, plotter.XY{X: x, Y: p.CalibratedLower})
		epsXY = append(epsXY, plotter.XY{X: x, Y: s.Eps})
	}
	if err := rep.writeCSV(cfg.Dir, "yww.csv", []string{"k", "eps", "predicted_loss_(k+1)eps/2", "sampled_lower_bound",
		"sampled_estimate", "exact_loss_of_chosen_set", "attack_accuracy", "attack_accuracy_exact", "calibrated_scale",
		"calibrated_lower_bound", "calibrated_estimate", "calibrated_attack_accuracy", "dp_accuracy_cap", "samples_per_database"}, rows); err != nil {
		return nil, err
	}
	p, err := linePlot(fmt.Sprintf("Ying-Wu-Wang appendix: loss of the refined answer (eps = %g)", s.Eps), "k (knowledge k mu_1 = mu_2)",
		"privacy loss", true,
		series{"sampled lower bound, Lap(2/eps)", lowXY, vulnerable},
		series{"sampled lower bound, calibrated Lap((k+1)/eps)", calXY, protected},
		series{"predicted (k+1) eps/2", predXY, predicted},
		series{"exact loss of the set the audit chose", estXY, other},
		series{"claimed eps", epsXY, claim})
	if err != nil {
		return nil, err
	}
	p.Y.Min = 0
	p.Legend.Left = true
	if err := rep.savePlot(p, cfg.Dir, "yww"); err != nil {
		return nil, err
	}
	last := pts[len(pts)-1]
	rep.Headline = []string{
		fmt.Sprintf("k = %d, Lap(2/eps) on the raw counts: predicted loss (k+1) eps/2 = %.3g; sampled lower bound %.3g (estimate %.3g, exact on that set %.3g), claimed eps %g",
			last.K, last.Predicted, last.Lower, last.Estimate, last.SetExact, s.Eps),
		fmt.Sprintf("the attacker names the database in %.1f%% of releases (exact %.1f%%; eps-DP allows %.1f%%)",
			100*last.Accuracy, 100*last.AccuracyExact, 100*dpAccuracy(s.Eps)),
		fmt.Sprintf("calibrated Lap((k+1)/eps) = Lap(%.3g): sampled lower bound %.3g <= eps, attack accuracy %.1f%%",
			last.CalibratedScale, last.CalibratedLower, 100*last.CalibratedAccuracy),
	}
	for _, p := range pts {
		rep.Headline = append(rep.Headline, fmt.Sprintf("  k %-3d predicted %.3g  sampled bound %.3g  calibrated bound %.3g", p.K, p.Predicted, p.Lower, p.CalibratedLower))
	}
	return rep, nil
}

// dpAccuracy is the largest accuracy an eps-DP release allows an attacker
// telling two neighbours apart with equal priors: e^eps/(1+e^eps).
func dpAccuracy(eps float64) float64 { return 1 / (1 + math.Exp(-eps)) }
