package repro

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/refine"
)

// Linear reproduces Ying, Wu and Wang, "On Linear Refinement of
// Differential Privacy-Preserving Query Answering" (paper 1):
//
//   - linear_example1.csv/.png: Example 1, the log density ratio of the
//     refined x̂₁ on neighbouring databases against the output, by numerical
//     integration of eqs. (6)-(7) and by the closed form (10). It tends to
//     2 eps, the exact loss; Theorem 2 as printed says eps.
//   - linear_appendix.csv/.png: the appendix's loss against k, for x̂₁ alone
//     ((k+1) eps/2, the paper's number) and for both refined answers under
//     add/remove ((k+1) eps/2) and substitution ((k+3) eps/2) neighbours,
//     with Theorem 2 printed and corrected.
//   - linear_grades.csv/.png: the running example's variance per query
//     before and after least-squares refinement (theory and Monte Carlo),
//     with the definitional constraints only and with mu_A + mu_B = 80.
//   - linear_grades_rho.csv: the privacy loss of those refinements.
//
// The Monte Carlo uses seeded grid Laplace noise (reproducible, not
// private). Full settings: 200,000 runs (about 2 s); quick: 5,000.
func Linear() Experiment {
	return Experiment{
		Name:    "linear",
		Summary: "linear refinement (paper 1): Example 1, the appendix's rho against k, the grades example",
		Run:     runLinear,
	}
}

func runLinear(ctx context.Context, cfg Config) error {
	for _, step := range []func(context.Context, Config) error{linearExample1, linearAppendix, linearGrades} {
		if err := step(ctx, cfg); err != nil {
			return err
		}
	}
	return nil
}

// linearExample1 writes the log density ratio of x̂₁ in Example 1 (eps = 1,
// sigma = 1/eps, mu − mu' = (1, 0), c − c' = 1) at outputs x̂₁ = mu₁ + y.
func linearExample1(_ context.Context, cfg Config) error {
	const eps = 1.0
	sigma := 1 / eps
	eqs, err := refine.NewEqualities(2, []refine.Equality{{Label: "sum", Index: []int{0, 1}, Coef: []float64{1, 1}, Value: 10}})
	if err != nil {
		return err
	}
	lin, err := refine.LeastSquares(eqs)
	if err != nil {
		return err
	}
	w := refine.Workload{Queries: mat.NewDense(2, 2, []float64{1, 0, 0, 1}), Universe: []string{"q1", "q2"}}
	loss, err := lin.Loss(w, []int{0}, sigma)
	if err != nil {
		return err
	}
	corrected, printed, err := lin.Theorem2([]float64{1, 0})
	if err != nil {
		return err
	}
	m := mat.NewDense(1, 2, mat.Row(nil, 0, lin.A()))
	var rows [][]string
	var integrated, bound, paper plotter.XYs
	for i := 0; i <= 80; i++ {
		y := float64(i) * 0.25 * sigma
		got, err := refine.LogDensityRatio(m, sigma, []float64{y}, []float64{1})
		if err != nil {
			return err
		}
		closed := 2/sigma + math.Log((1+2*y/sigma)/(1+2*(y+1)/sigma))
		rows = append(rows, []string{F(y), F(got), F(closed), F(loss.Rho), F(corrected / sigma), F(printed / sigma)})
		integrated = append(integrated, plotter.XY{X: y, Y: got})
		bound = append(bound, plotter.XY{X: y, Y: loss.Rho})
		paper = append(paper, plotter.XY{X: y, Y: printed / sigma})
	}
	if err := WriteCSV(cfg.Dir, "linear_example1.csv", []string{"x_minus_mu1", "log_ratio_integrated", "log_ratio_closed_form", "rho_exact", "theorem2_corrected", "theorem2_printed"}, rows); err != nil {
		return err
	}
	cfg.Log.Info("linear: Example 1", "rho", loss.Rho, "theorem2_printed", printed/sigma, "log_ratio_at_10", rows[40][1], "log_ratio_at_20", rows[80][1])
	p := plot.New()
	p.Title.Text = "Example 1: log density ratio of the refined x̂₁ (eps = 1)"
	p.X.Label.Text = "x̂₁ − μ₁ (units of σ = 1/eps)"
	p.Y.Label.Text = "log f(x̂₁ | D) / f(x̂₁ | D')"
	p.Y.Min, p.Y.Max = 0, 2.2
	if err := linearLines(p, []string{"numerical integration", "exact loss 2 eps", "Theorem 2 as printed: eps"}, integrated, bound, paper); err != nil {
		return err
	}
	p.Legend.Top, p.Legend.Left = false, false
	return SavePlot(p, cfg.Dir, "linear_example1", 6*vg.Inch, 4*vg.Inch)
}

// linearAppendix writes the appendix's loss for k = 1..20 (eps = 1, noise
// Lap(2/eps) as in the paper).
func linearAppendix(_ context.Context, cfg Config) error {
	const eps = 1.0
	sigma := 2 / eps
	var rows [][]string
	var x1, joint, jointSub, printedXY plotter.XYs
	for k := 1; k <= 20; k++ {
		kf := float64(k)
		eqs, err := refine.NewEqualities(2, []refine.Equality{{Label: "k mu1 - mu2", Index: []int{0, 1}, Coef: []float64{kf, -1}, Value: kf}})
		if err != nil {
			return err
		}
		lin, err := refine.NewLinear(mat.NewDense(2, 2, []float64{1 / (kf + 1), 1 / (kf + 1), 0, 1}), mat.NewDense(2, 1, []float64{1 / (kf + 1), 0}), nil, eqs)
		if err != nil {
			return err
		}
		var loss [2][2]refine.Loss // [relation][x̂₁ alone, both]
		for r, rel := range []refine.Relation{refine.AddRemove, refine.Substitute} {
			w := refine.Workload{Queries: mat.NewDense(2, 2, []float64{1, 0, 0, 1}), Universe: []string{"category 1", "category 2"}, Relation: rel}
			for s, release := range [][]int{{0}, nil} {
				if loss[r][s], err = lin.Loss(w, release, sigma); err != nil {
					return err
				}
			}
		}
		// Integration far out (x̂₁ − mu₁ = 1e4 sigma) for x̂₁ alone: the
		// shift of x̂₁ between the neighbours is 1.
		m := mat.NewDense(1, 2, mat.Row(nil, 0, lin.A()))
		far, err := refine.LogDensityRatio(m, sigma, []float64{1e4 * sigma}, []float64{1})
		if err != nil {
			return err
		}
		corrected, printed, err := lin.Theorem2([]float64{1, -1}) // the paper's pair D', D''
		if err != nil {
			return err
		}
		rows = append(rows, []string{strconv.Itoa(k), F((kf + 1) * eps / 2), F(loss[0][0].Rho), F(loss[1][0].Rho), F(far),
			F(loss[0][1].Rho), F(loss[1][1].Rho), F(corrected / sigma), F(printed / sigma)})
		x1 = append(x1, plotter.XY{X: kf, Y: loss[0][0].Rho})
		joint = append(joint, plotter.XY{X: kf, Y: loss[0][1].Rho})
		jointSub = append(jointSub, plotter.XY{X: kf, Y: loss[1][1].Rho})
		printedXY = append(printedXY, plotter.XY{X: kf, Y: printed / sigma})
	}
	if err := WriteCSV(cfg.Dir, "linear_appendix.csv", []string{"k", "paper_(k+1)eps/2", "rho_x1_add_remove", "rho_x1_substitute", "log_ratio_x1_integrated_far",
		"rho_both_add_remove", "rho_both_substitute", "theorem2_corrected_substitute", "theorem2_printed_substitute"}, rows); err != nil {
		return err
	}
	p := plot.New()
	p.Title.Text = "Appendix: privacy loss of the refinement against k (eps = 1, Lap(2/eps))"
	p.X.Label.Text = "k (background knowledge k μ₁ = μ₂)"
	p.Y.Label.Text = "rho"
	if err := linearLines(p, []string{"x̂₁ alone = (k+1) eps/2 (paper)", "(x̂₁, x̂₂), add/remove", "(x̂₁, x̂₂), substitution = (k+3) eps/2", "Theorem 2 printed (substitution pair)"}, x1, joint, jointSub, printedXY); err != nil {
		return err
	}
	p.Legend.Top, p.Legend.Left = false, false
	return SavePlot(p, cfg.Dir, "linear_appendix", 6*vg.Inch, 4*vg.Inch)
}

// linearGrades runs the grades example at eps = 1: sigma = 3, the L1
// sensitivity of (A, B, C, D, F, p, t) under add/remove.
func linearGrades(ctx context.Context, cfg Config) error {
	names := []string{"A", "B", "C", "D", "F", "p", "t"}
	truth := []float64{30, 50, 40, 20, 10, 140, 150}
	const sigma = 3.0
	runs := 200_000
	if cfg.Quick {
		runs = 5_000
	}
	definitional := []refine.Equality{
		{Label: "passing", Index: []int{0, 1, 2, 3, 5}, Coef: []float64{1, 1, 1, 1, -1}, Public: true},
		{Label: "total", Index: []int{4, 5, 6}, Coef: []float64{1, 1, -1}, Public: true},
	}
	all := append(append([]refine.Equality(nil), definitional...), refine.Equality{Label: "AB", Index: []int{0, 1}, Coef: []float64{1, 1}, Value: 80})
	var sets [2]*refine.Equalities
	var err error
	for i, eqs := range [][]refine.Equality{definitional, all} {
		if sets[i], err = refine.NewEqualities(7, eqs); err != nil {
			return err
		}
	}
	lap, err := noise.NewLaplaceScale(sigma, 1)
	if err != nil {
		return err
	}
	r := noise.NewSeeded(cfg.Seed)
	var sumSq [3][7]float64 // raw, definitional, all
	x, y := make([]float64, 7), make([]float64, 7)
	for run := range runs {
		if run%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		copy(x, truth)
		if err := lap.AddTo(r, x); err != nil {
			return err
		}
		for i, v := range x {
			sumSq[0][i] += (v - truth[i]) * (v - truth[i])
		}
		for s, eqs := range sets {
			if err := eqs.Refine(y, x); err != nil {
				return err
			}
			for i, v := range y {
				sumSq[s+1][i] += (v - truth[i]) * (v - truth[i])
			}
		}
	}
	var theory [2][7]float64
	for s, eqs := range sets {
		lin, err := refine.LeastSquares(eqs)
		if err != nil {
			return err
		}
		for i := range 7 {
			theory[s][i] = lap.Variance() * lin.A().At(i, i) // Var = 2 sigma² M_ii, M = A
		}
	}
	var rows [][]string
	var bars [2]plotter.Values
	for i, name := range names {
		raw := sumSq[0][i] / float64(runs)
		row := []string{name, F(lap.Variance()), F(raw)}
		for s := range 2 {
			mc := sumSq[s+1][i] / float64(runs)
			row = append(row, F(theory[s][i]), F(mc), F(1-theory[s][i]/lap.Variance()))
			bars[s] = append(bars[s], 100*(1-theory[s][i]/lap.Variance()))
		}
		rows = append(rows, row)
	}
	if err := WriteCSV(cfg.Dir, "linear_grades.csv", []string{"query", "variance_noisy", "variance_noisy_mc",
		"variance_definitional", "variance_definitional_mc", "reduction_definitional",
		"variance_with_AB", "variance_with_AB_mc", "reduction_with_AB"}, rows); err != nil {
		return err
	}
	if err := linearGradesRho(cfg, sets, sigma); err != nil {
		return err
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Grades example: variance reduction by least-squares refinement (%d runs)", runs)
	p.Y.Label.Text = "variance reduction (%)"
	p.NominalX(names...)
	for s, label := range []string{"definitional constraints (public)", "with μ_A + μ_B = 80 (data-dependent)"} {
		b, err := plotter.NewBarChart(bars[s], vg.Points(14))
		if err != nil {
			return err
		}
		b.Color = plotutil.Color(s)
		b.Offset = vg.Points(float64(2*s-1) * 7)
		b.LineStyle.Width = 0
		p.Add(b)
		p.Legend.Add(label, b)
	}
	p.Legend.Top = true
	p.Y.Min, p.Y.Max = 0, 65
	return SavePlot(p, cfg.Dir, "linear_grades", 6*vg.Inch, 4*vg.Inch)
}

// linearGradesRho writes the privacy loss of the grades refinements at
// scale sigma under add/remove neighbours over the universe of grades.
func linearGradesRho(cfg Config, sets [2]*refine.Equalities, sigma float64) error {
	q := mat.NewDense(7, 5, nil)
	for g := range 5 {
		q.Set(g, g, 1)
		if g < 4 {
			q.Set(5, g, 1)
		}
		q.Set(6, g, 1)
	}
	names := []string{"A", "B", "C", "D", "F", "p", "t"}
	w := refine.Workload{Queries: q, Universe: names[:5]}
	eps, err := privacy.NewEpsilon(1)
	if err != nil {
		return err
	}
	var rows [][]string
	for s, label := range []string{"definitional constraints", "with AB = 80"} {
		lin, err := refine.LeastSquares(sets[s])
		if err != nil {
			return err
		}
		full, err := lin.Loss(w, nil, sigma)
		if err != nil {
			return err
		}
		worst, err := lin.WorstRelease(w, sigma)
		if err != nil {
			return err
		}
		for _, c := range []struct {
			what string
			l    refine.Loss
		}{{"all answers", full}, {"worst subset (Definition 5)", worst}} {
			release := make([]string, len(c.l.Release))
			for i, j := range c.l.Release {
				release[i] = names[j]
			}
			scale := "impossible"
			if !c.l.Distinguishable {
				lap, _, err := lin.Calibrate(w, c.l.Release, eps)
				if err != nil {
					return err
				}
				scale = F(lap.Scale())
			}
			rows = append(rows, []string{label, c.what, strings.Join(release, " "), F(c.l.Raw), F(c.l.Sensitivity), F(sigma), F(c.l.Rho), c.l.Worst.Name, scale})
		}
	}
	return WriteCSV(cfg.Dir, "linear_grades_rho.csv", []string{"constraints", "release", "answers", "raw_sensitivity", "effective_sensitivity", "sigma", "rho", "worst_neighbour", "calibrated_scale_eps_1"}, rows)
}

// linearLines adds one line per series with its own colour, dashes and
// point shape (series that coincide stay distinguishable).
func linearLines(p *plot.Plot, labels []string, series ...plotter.XYs) error {
	for i, xy := range series {
		l, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.5)
		l.Dashes = plotutil.Dashes(i)
		pts.Shape = plotutil.Shape(i)
		pts.Color = l.Color
		if len(xy) > 30 {
			pts.Radius = 0 // dense curves: lines only
		}
		p.Add(l, pts)
		p.Legend.Add(labels[i], l, pts)
	}
	p.Add(plotter.NewGrid())
	return nil
}
