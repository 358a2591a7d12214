package repro

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/knowdp/knowdp/data"
	"github.com/knowdp/knowdp/metricdp"
	"github.com/knowdp/knowdp/noise"
)

// DX reproduces the experiments of Kamalaruban et al., "Not All Attributes
// are Created Equal: d_X-Private Mechanisms for Linear Queries" (paper 4):
// Figure 2 (synthetic single and multiple queries, the four allocation
// strategies), Figure 3 (US places, random queries and the average-elevation
// query) and Figures 4-5 (Blowfish threshold metrics).
//
// The paper's text lost its formulas and most parameters; what we could not
// recover (universe size and grid of the synthetic data, number of query
// matrices per k, the thresholds and epsilons of Section 4.4) is chosen here
// and written to dx_parameters.csv, and the city list differs (GeoNames, 842
// places, instead of SimpleMaps' 741 cities). Improvement factors and noise
// scales do not depend on the data, only on the universe, metric and
// queries, so no private data set is simulated; RMSE is the exact standard
// deviation of the released noise.
//
// Full settings (dxSettings): N = 100 points of a 100 x 100 grid, 1000
// random queries per histogram, 20 query matrices per k = 1..20 on N = 100,
// thresholds 1-30 and eps 0.5, 1, 2 with 1000 queries; about 20 s on two
// cores. Quick settings shrink the counts (about 1 s, 7 s under -race).
func DX() Experiment {
	return Experiment{
		Name:    "dx",
		Summary: "d_X-privacy for linear queries (paper 4): Figures 2-5",
		Run:     runDX,
	}
}

type dxParams struct {
	N, side            int // synthetic universe: N distinct points of {0..side-1}^2
	singleQueries      int // Figure 2b and 3b
	matricesPerK       int // Figure 2c-d
	maxK, kStep        int
	multiN             int // universe size for Figure 2c-d
	sweepN             []int
	thetas             []float64
	epsilons           []float64
	blowfishQueries    int
	blowfishIFThetas   []float64
	greatCircleQueries int
}

func dxSettings(quick bool) dxParams {
	if quick {
		return dxParams{N: 100, side: 100, singleQueries: 25, matricesPerK: 1, maxK: 20, kStep: 5, multiN: 40,
			sweepN: []int{50, 100}, thetas: []float64{2, 5, 10}, epsilons: []float64{0.5, 1},
			blowfishQueries: 25, blowfishIFThetas: []float64{2, 10}, greatCircleQueries: 3}
	}
	return dxParams{N: 100, side: 100, singleQueries: 1000, matricesPerK: 20, maxK: 20, kStep: 1, multiN: 100,
		sweepN: []int{25, 50, 100, 200, 500, 1000}, thetas: []float64{1, 2, 3, 4, 5, 7, 10, 15, 20, 30},
		epsilons: []float64{0.5, 1, 2}, blowfishQueries: 1000, blowfishIFThetas: []float64{2, 5, 10, 20}, greatCircleQueries: 200}
}

type dxRun struct {
	ctx     context.Context
	cfg     Config
	p       dxParams
	r       *noise.Rand
	summary [][]string
}

func (d *dxRun) note(figure, quantity string, ours float64, paper string) {
	d.summary = append(d.summary, []string{figure, quantity, F(ours), paper})
	d.cfg.Log.Info("dx", "figure", figure, "quantity", quantity, "value", ours, "paper", paper)
}

func runDX(ctx context.Context, cfg Config) error {
	d := &dxRun{ctx: ctx, cfg: cfg, p: dxSettings(cfg.Quick), r: noise.NewSeeded(cfg.Seed)}
	if err := d.parameters(); err != nil {
		return err
	}
	pts := randomGridPoints(d.r, d.p.N, d.p.side)
	steps := []struct {
		name string
		run  func([][]float64) error
	}{{"figure 2a-b", d.fig2ab}, {"figure 2c-d", d.fig2cd}, {"figure 3", d.fig3}, {"figures 4-5", d.fig45}}
	for _, s := range steps {
		start := time.Now()
		if err := s.run(pts); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		cfg.Log.Info("dx", "done", s.name, "elapsed", time.Since(start).Round(time.Millisecond))
	}
	return WriteCSV(cfg.Dir, "dx_summary.csv", []string{"figure", "quantity", "ours", "paper"}, d.summary)
}

func (d *dxRun) parameters() error {
	p := d.p
	rows := [][]string{
		{"seed", strconv.FormatUint(d.cfg.Seed, 10), "seeded generator: outputs are reproducible and NOT private"},
		{"quick", strconv.FormatBool(d.cfg.Quick), ""},
		{"synthetic_N", strconv.Itoa(p.N), "paper's value lost in extraction"},
		{"synthetic_grid", fmt.Sprintf("{0..%d}^2", p.side-1), "paper's value lost in extraction"},
		{"metric", "d(u,v) = eps * ||u - v||_2 (eps cancels in improvement factors)", "Section 4.1"},
		{"single_queries", strconv.Itoa(p.singleQueries), "coefficients uniform in [0,1)"},
		{"multi_N", strconv.Itoa(p.multiN), ""},
		{"matrices_per_k", strconv.Itoa(p.matricesPerK), "paper's value lost in extraction"},
		{"blowfish_thetas", fmt.Sprint(p.thetas), "paper's values lost in extraction"},
		{"blowfish_eps", fmt.Sprint(p.epsilons), "paper's values lost in extraction"},
		{"real_data", "data/us-places.csv (GeoNames, 842 US places > 50,000 people)", "paper: SimpleMaps, 741 cities"},
	}
	return WriteCSV(d.cfg.Dir, "dx_parameters.csv", []string{"parameter", "value", "note"}, rows)
}

func randomGridPoints(r *noise.Rand, n, side int) [][]float64 {
	seen := map[[2]int]bool{}
	var pts [][]float64
	for len(pts) < n {
		p := [2]int{int(r.Uint64N(uint64(side))), int(r.Uint64N(uint64(side)))}
		if !seen[p] {
			seen[p] = true
			pts = append(pts, []float64{float64(p[0]), float64(p[1])})
		}
	}
	return pts
}

func uniform01(r *noise.Rand) float64 { return float64(r.Uint64()>>11) / (1 << 53) }

func randomRows(r *noise.Rand, k, n int, binary bool) [][]float64 {
	rows := make([][]float64, k)
	for l := range rows {
		rows[l] = make([]float64, n)
		for i := range rows[l] {
			if binary {
				rows[l][i] = float64(r.Uint64N(2))
			} else {
				rows[l][i] = uniform01(r)
			}
		}
	}
	return rows
}

// ifEval computes improvement factors of single queries on one metric; the
// baseline's eps (the smallest distance) is computed once.
type ifEval struct {
	ctx context.Context
	m   metricdp.Metric
	eps float64
}

func newIFEval(ctx context.Context, m metricdp.Metric) (*ifEval, error) {
	eps, err := metricdp.MinDist(ctx, m)
	if err != nil {
		return nil, err
	}
	if !(eps > 0) || math.IsInf(eps, 1) {
		return nil, fmt.Errorf("smallest distance %v: no eps-DP baseline", eps)
	}
	return &ifEval{ctx, m, eps}, nil
}

// single returns the improvement factor of the d_X-private Laplace
// mechanism over eps-DP Laplace for one query, and the d_X scale.
func (e *ifEval) single(q []float64) (float64, float64, error) {
	b, err := metricdp.Scale(e.ctx, e.m, q)
	if err != nil {
		return 0, 0, err
	}
	base := (slices.Max(q) - slices.Min(q)) / e.eps
	return base / b, b, nil
}

// random returns the improvement factors of count random uniform queries.
func (e *ifEval) random(r *noise.Rand, count int) ([]float64, error) {
	out := make([]float64, count)
	for c := range out {
		f, _, err := e.single(randomRows(r, 1, e.m.Len(), false)[0])
		if err != nil {
			return nil, err
		}
		out[c] = f
	}
	return out, nil
}

func meanOf(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func (d *dxRun) fig2ab(pts [][]float64) error {
	m, err := metricdp.NewEuclidean(pts, 1)
	if err != nil {
		return err
	}
	ev, err := newIFEval(d.ctx, m)
	if err != nil {
		return err
	}
	ifs, err := ev.random(d.r, d.p.singleQueries)
	if err != nil {
		return err
	}
	var rows [][]string
	for i, p := range pts {
		rows = append(rows, []string{strconv.Itoa(i), F(p[0]), F(p[1])})
	}
	if err := WriteCSV(d.cfg.Dir, "dx_fig2a_universe.csv", []string{"element", "x", "y"}, rows); err != nil {
		return err
	}
	if err := writeValues(d.cfg.Dir, "dx_fig2b_improvement.csv", "improvement_factor", ifs); err != nil {
		return err
	}
	if err := scatterPlot(d.cfg.Dir, "dx_fig2a_universe", "Figure 2a: synthetic universe", "x", "y", pts); err != nil {
		return err
	}
	if err := histPlot(d.cfg.Dir, "dx_fig2b_improvement", fmt.Sprintf("Figure 2b: improvement factors, %d random queries, N = %d", len(ifs), d.p.N), ifs); err != nil {
		return err
	}
	d.note("2b", "mean improvement factor, random single queries", meanOf(ifs), "histogram only (formulas lost); 'significant improvement'")
	d.note("2b", "median improvement factor", quantile(ifs, 0.5), "")
	d.note("2b", "max improvement factor", slices.Max(ifs), "")
	// How the improvement depends on the universe's density, which the
	// paper's lost parameters fix.
	var sweep [][]string
	for _, n := range d.p.sweepN {
		sm, err := metricdp.NewEuclidean(randomGridPoints(d.r, n, d.p.side), 1)
		if err != nil {
			return err
		}
		sev, err := newIFEval(d.ctx, sm)
		if err != nil {
			return err
		}
		v, err := sev.random(d.r, min(d.p.singleQueries, 200))
		if err != nil {
			return err
		}
		sweep = append(sweep, []string{strconv.Itoa(n), F(meanOf(v)), F(quantile(v, 0.5))})
	}
	return WriteCSV(d.cfg.Dir, "dx_fig2b_density_sweep.csv", []string{"N", "mean_improvement", "median_improvement"}, sweep)
}

func quantile(v []float64, q float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

func (d *dxRun) fig2cd(_ [][]float64) error {
	pts := randomGridPoints(d.r, d.p.multiN, d.p.side)
	m, err := metricdp.NewEuclidean(pts, 1)
	if err != nil {
		return err
	}
	strategies := []metricdp.Strategy{metricdp.EqualShare, metricdp.SameScale, metricdp.Greedy, metricdp.Optimal}
	var rows [][]string
	for _, binary := range []bool{false, true} {
		kind := "uniform"
		if binary {
			kind = "binary"
		}
		lines := map[metricdp.Strategy]plotter.XYs{}
		for k := 1; k <= d.p.maxK; k += d.p.kStep {
			sumIF := map[metricdp.Strategy]float64{}
			sumMSE := map[metricdp.Strategy]float64{}
			for range d.p.matricesPerK {
				q, err := metricdp.NewQueries(randomRows(d.r, k, m.Len(), binary))
				if err != nil {
					return err
				}
				_, base, err := metricdp.Baseline(d.ctx, m, q)
				if err != nil {
					return err
				}
				for _, s := range strategies {
					b, err := metricdp.Allocate(d.ctx, m, q, s)
					if err != nil {
						return fmt.Errorf("figure 2 %s k=%d %v: %w", kind, k, s, err)
					}
					_, g := metricdp.Improvement(base, b)
					sumIF[s] += g
					var mse float64
					for _, v := range b {
						mse += 2 * v * v
					}
					sumMSE[s] += mse / float64(k)
				}
			}
			for _, s := range strategies {
				mIF := sumIF[s] / float64(d.p.matricesPerK)
				rmse := math.Sqrt(sumMSE[s] / float64(d.p.matricesPerK))
				rows = append(rows, []string{kind, strconv.Itoa(k), s.String(), F(mIF), F(rmse)})
				lines[s] = append(lines[s], plotter.XY{X: float64(k), Y: mIF})
			}
		}
		fig := "2c"
		if binary {
			fig = "2d"
		}
		p := plot.New()
		p.Title.Text = fmt.Sprintf("Figure %s: %s coefficients, N = %d, mean of %d matrices", fig, kind, d.p.multiN, d.p.matricesPerK)
		p.X.Label.Text = "number of queries k"
		p.Y.Label.Text = "improvement factor (geometric mean)"
		var args []any
		for _, s := range strategies {
			args = append(args, strategyLabel(s), lines[s])
		}
		if err := plotutil.AddLinePoints(p, args...); err != nil {
			return err
		}
		p.Legend.Top = true
		if err := SavePlot(p, d.cfg.Dir, "dx_fig"+fig+"_strategies", 6*vg.Inch, 4*vg.Inch); err != nil {
			return err
		}
		for _, s := range strategies {
			pt := lines[s][len(lines[s])-1]
			d.note(fig, fmt.Sprintf("mean improvement factor at k = %v, %s, %s", pt.X, kind, strategyLabel(s)), pt.Y,
				"strategy 3 best in the paper")
		}
	}
	return WriteCSV(d.cfg.Dir, "dx_fig2cd_strategies.csv", []string{"coefficients", "k", "strategy", "mean_improvement", "rmse_per_query"}, rows)
}

func strategyLabel(s metricdp.Strategy) string {
	switch s {
	case metricdp.EqualShare:
		return "strategy 1 (equal share)"
	case metricdp.SameScale:
		return "strategy 2 (same scale)"
	case metricdp.Greedy:
		return "strategy 3 (Algorithm 3)"
	}
	return "optimal (squared loss)"
}

type place struct{ lat, lon, elevation float64 }

func loadPlaces() ([]place, error) {
	c, err := data.USPlaces()
	if err != nil {
		return nil, err
	}
	var cols [3]int
	for i, name := range []string{"lat", "lon", "elevation"} {
		if cols[i], err = c.Column(name); err != nil {
			return nil, err
		}
	}
	var out []place
	for {
		rec, err := c.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		var v [3]float64
		for i, col := range cols {
			if v[i], err = strconv.ParseFloat(rec[col], 64); err != nil {
				return nil, c.Errorf(col, "%q is not a number", rec[col])
			}
		}
		out = append(out, place{v[0], v[1], v[2]})
	}
	return out, nil
}

func (d *dxRun) fig3(_ [][]float64) error {
	places, err := loadPlaces()
	if err != nil {
		return err
	}
	d.note("3", "places", float64(len(places)), "741 cities (SimpleMaps)")
	pts := make([][]float64, len(places))
	elev := make([]float64, len(places))
	lat := make([]float64, len(places))
	lon := make([]float64, len(places))
	for i, p := range places {
		pts[i] = []float64{p.lon, p.lat}
		elev[i], lat[i], lon[i] = p.elevation, p.lat, p.lon
	}
	// The paper: Euclidean distance on the longitude-latitude plane.
	m, err := metricdp.NewEuclidean(pts, 1)
	if err != nil {
		return err
	}
	ev, err := newIFEval(d.ctx, m)
	if err != nil {
		return err
	}
	ifs, err := ev.random(d.r, d.p.singleQueries)
	if err != nil {
		return err
	}
	if err := writeValues(d.cfg.Dir, "dx_fig3b_improvement.csv", "improvement_factor", ifs); err != nil {
		return err
	}
	if err := scatterPlot(d.cfg.Dir, "dx_fig3a_places", fmt.Sprintf("Figure 3a: %d US places > 50,000 people (GeoNames)", len(places)), "longitude", "latitude", pts); err != nil {
		return err
	}
	if err := histPlot(d.cfg.Dir, "dx_fig3b_improvement", fmt.Sprintf("Figure 3b: improvement factors, %d random queries, US places", len(ifs)), ifs); err != nil {
		return err
	}
	d.note("3b", "mean improvement factor, random queries", meanOf(ifs), "between 2 and 3")
	d.note("3b", "max improvement factor, random queries", slices.Max(ifs), "more than 7.5 for some queries")
	d.note("3b", "share of queries with improvement > 7.5", shareAbove(ifs, 7.5), "")
	elevIF, elevScale, err := ev.single(elev)
	if err != nil {
		return err
	}
	d.note("3", "improvement factor, average-elevation query (lon/lat Euclidean)", elevIF, "lost in extraction ('particularly well')")
	d.note("3", "noise scale of the elevation query, metres x records, eps = 1 per degree", elevScale, "")
	gc, err := metricdp.NewGreatCircle(lat, lon, 1)
	if err != nil {
		return err
	}
	gev, err := newIFEval(d.ctx, gc)
	if err != nil {
		return err
	}
	gcIF, _, err := gev.single(elev)
	if err != nil {
		return err
	}
	d.note("3", "improvement factor, average-elevation query (great-circle km)", gcIF, "not in the paper")
	gcIFs, err := gev.random(d.r, d.p.greatCircleQueries)
	if err != nil {
		return err
	}
	d.note("3", "mean improvement factor, random queries (great-circle km)", meanOf(gcIFs), "not in the paper")
	return nil
}

func shareAbove(v []float64, t float64) float64 {
	c := 0
	for _, x := range v {
		if x > t {
			c++
		}
	}
	return float64(c) / float64(len(v))
}

func (d *dxRun) fig45(pts [][]float64) error {
	base, err := metricdp.NewEuclidean(pts, 1)
	if err != nil {
		return err
	}
	queries := randomRows(d.r, d.p.blowfishQueries, base.Len(), false)
	// Below the closest pair's distance the threshold policy protects no
	// pair at all and there is no eps-DP baseline to compare with.
	closest, err := metricdp.MinDist(d.ctx, base)
	if err != nil {
		return err
	}
	thetas := slices.DeleteFunc(slices.Clone(d.p.thetas), func(t float64) bool { return t < closest })
	if len(thetas) < len(d.p.thetas) {
		d.cfg.Log.Info("dx: thresholds below the closest pair's distance dropped", "closest", closest)
	}
	type metricKind struct {
		name  string
		build func(theta, eps float64) (metricdp.Metric, error)
	}
	kinds := []metricKind{
		{"threshold (closed)", func(theta, eps float64) (metricdp.Metric, error) {
			return metricdp.NewThreshold(d.ctx, base, theta, eps)
		}},
		{"smooth threshold", func(theta, eps float64) (metricdp.Metric, error) {
			return metricdp.NewSmoothThreshold(base, theta, eps)
		}},
	}
	var rows [][]string
	lines := map[float64][]any{} // per eps: label, XYs, ...
	var baseLines = map[float64]plotter.XYs{}
	ifsAt := map[string]map[float64][]float64{}
	for _, k := range kinds {
		ifsAt[k.name] = map[float64][]float64{}
		for _, eps := range d.p.epsilons {
			var xy, baseXY plotter.XYs
			for _, theta := range thetas {
				m, err := k.build(theta, eps)
				if err != nil {
					return err
				}
				ev, err := newIFEval(d.ctx, m)
				if err != nil {
					return fmt.Errorf("figure 4 %s theta=%v: %w", k.name, theta, err)
				}
				var rmse, baseRMSE float64
				var ifs []float64
				for _, q := range queries {
					f, b, err := ev.single(q)
					if err != nil {
						return fmt.Errorf("figure 4 %s theta=%v: %w", k.name, theta, err)
					}
					rmse += math.Sqrt2 * b
					baseRMSE += math.Sqrt2 * b * f
					ifs = append(ifs, f)
				}
				rmse /= float64(len(queries))
				baseRMSE /= float64(len(queries))
				rows = append(rows, []string{k.name, F(eps), F(theta), F(rmse), F(baseRMSE), F(meanOf(ifs))})
				xy = append(xy, plotter.XY{X: theta, Y: rmse})
				baseXY = append(baseXY, plotter.XY{X: theta, Y: baseRMSE})
				if eps == 1 {
					ifsAt[k.name][theta] = ifs
				}
			}
			lines[eps] = append(lines[eps], k.name, xy)
			baseLines[eps] = baseXY
		}
	}
	for _, eps := range d.p.epsilons {
		p4 := plot.New()
		p4.Title.Text = fmt.Sprintf("Figure 4: average RMSE of %d random queries, eps = %g", len(queries), eps)
		p4.X.Label.Text = "threshold theta"
		p4.Y.Label.Text = "average RMSE (sqrt(2) x noise scale)"
		if err := plotutil.AddLinePoints(p4, append(lines[eps], "eps-DP baseline", baseLines[eps])...); err != nil {
			return err
		}
		p4.Legend.Top = false
		p4.Legend.Left = false
		if err := SavePlot(p4, d.cfg.Dir, "dx_fig4_blowfish_rmse_eps"+F(eps), 6*vg.Inch, 4*vg.Inch); err != nil {
			return err
		}
	}
	if err := WriteCSV(d.cfg.Dir, "dx_fig4_blowfish_rmse.csv", []string{"metric", "eps", "theta", "avg_rmse", "baseline_avg_rmse", "mean_improvement"}, rows); err != nil {
		return err
	}
	// Figure 5: distributions of improvement factors at eps = 1.
	if !slices.Contains(d.p.epsilons, 1) {
		return nil
	}
	p5 := plot.New()
	p5.Title.Text = "Figure 5: improvement factors at eps = 1 (left box: threshold, right: smooth)"
	p5.X.Label.Text = "threshold theta"
	p5.Y.Label.Text = "improvement factor"
	var names []string
	var dist [][]string
	for ti, theta := range d.p.blowfishIFThetas {
		names = append(names, F(theta))
		for ki, k := range kinds {
			v := ifsAt[k.name][theta]
			if v == nil {
				continue
			}
			finite := slices.DeleteFunc(slices.Clone(v), func(x float64) bool { return math.IsInf(x, 1) })
			box, err := plotter.NewBoxPlot(vg.Points(14), float64(ti)+0.2*float64(2*ki-1), plotter.Values(finite))
			if err != nil {
				return err
			}
			box.FillColor = plotutil.Color(ki)
			p5.Add(box)
			for _, x := range v {
				dist = append(dist, []string{k.name, F(theta), F(x)})
			}
			d.note("5", fmt.Sprintf("median improvement factor, %s, theta = %g, eps = 1", k.name, theta), quantile(v, 0.5),
				"smooth below threshold at low theta, similar at high theta")
		}
	}
	p5.NominalX(names...)
	if err := SavePlot(p5, d.cfg.Dir, "dx_fig5_blowfish_improvement", 6*vg.Inch, 4*vg.Inch); err != nil {
		return err
	}
	return WriteCSV(d.cfg.Dir, "dx_fig5_blowfish_improvement.csv", []string{"metric", "theta", "improvement_factor"}, dist)
}

func writeValues(dir, name, col string, v []float64) error {
	rows := make([][]string, len(v))
	for i, x := range v {
		rows[i] = []string{strconv.Itoa(i), F(x)}
	}
	return WriteCSV(dir, name, []string{"query", col}, rows)
}

func scatterPlot(dir, name, title, xl, yl string, pts [][]float64) error {
	xy := make(plotter.XYs, len(pts))
	for i, p := range pts {
		xy[i] = plotter.XY{X: p[0], Y: p[1]}
	}
	s, err := plotter.NewScatter(xy)
	if err != nil {
		return err
	}
	s.GlyphStyle.Radius = vg.Points(1.5)
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xl
	p.Y.Label.Text = yl
	p.Add(s)
	return SavePlot(p, dir, name, 6*vg.Inch, 4*vg.Inch)
}

func histPlot(dir, name, title string, v []float64) error {
	h, err := plotter.NewHist(plotter.Values(v), 40)
	if err != nil {
		return err
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "improvement factor (eps-DP scale / d_X scale)"
	p.Y.Label.Text = "queries"
	p.Add(h)
	return SavePlot(p, dir, name, 6*vg.Inch, 4*vg.Inch)
}
