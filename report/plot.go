package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Colours of the plots (and of the page's CSS: keep them in step).
var (
	colBar    = color.RGBA{R: 0x3b, G: 0x6e, B: 0xa8, A: 0xff}
	colRange  = color.RGBA{R: 0x9d, G: 0xb9, B: 0xd8, A: 0xff}
	colMedian = color.RGBA{R: 0x1d, G: 0x3a, B: 0x5c, A: 0xff}
)

// plotWidth is the width of every plot; the page scales them to fit.
const plotWidth = 7 * vg.Inch

// newPlot returns a plot whose text is set in Liberation Sans (falling
// back, in the page, to the browser's sans-serif font: see svgOf).
func newPlot(title, xlabel string) *plot.Plot {
	p := plot.New()
	sans := func(s *plot.Plot) {
		s.Title.TextStyle.Font.Variant = "Sans"
		s.X.Label.TextStyle.Font.Variant = "Sans"
		s.Y.Label.TextStyle.Font.Variant = "Sans"
		s.X.Tick.Label.Font.Variant = "Sans"
		s.Y.Tick.Label.Font.Variant = "Sans"
		s.Legend.TextStyle.Font.Variant = "Sans"
	}
	sans(p)
	p.Title.Text = title
	p.Title.Padding = vg.Points(6)
	p.X.Label.Text = xlabel
	p.X.Padding, p.Y.Padding = 0, 0
	p.Add(plotter.NewGrid())
	return p
}

// rowsHeight is the height of a plot with one row per label.
func rowsHeight(n int) vg.Length {
	return max(2*vg.Inch, vg.Length(n)*0.32*vg.Inch+1.1*vg.Inch)
}

// svgOf renders p as an SVG element for inlining in HTML: no XML prolog,
// and font families that fall back to the browser's own sans-serif when
// Liberation Sans is not installed (the font is named, never fetched).
func svgOf(p *plot.Plot, w, h vg.Length, label string) (string, error) {
	c := vgsvg.New(w, h)
	p.Draw(draw.New(c))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return "", fmt.Errorf("plot %q: %w", label, err)
	}
	s := b.String()
	if i := strings.Index(s, "<svg"); i >= 0 {
		s = s[i:]
	}
	s = strings.Replace(s, "<svg ", `<svg class="plot" role="img" aria-label="`+attrEscape(label)+`" `, 1)
	s = strings.ReplaceAll(s, "font-family:Liberation Sans;", "font-family:'Liberation Sans',Arial,Helvetica,sans-serif;")
	return s, nil
}

// attrEscape escapes s for a double-quoted HTML attribute.
func attrEscape(s string) string {
	return strings.NewReplacer(`&`, "&amp;", `"`, "&quot;", `<`, "&lt;", `>`, "&gt;").Replace(s)
}

// barPlot draws one horizontal bar per label, the first at the top.
func barPlot(title, xlabel string, labels []string, values []float64) (string, error) {
	n := len(labels)
	vs := make(plotter.Values, n)
	rev := make([]string, n)
	top := 0.0
	for i, v := range values {
		vs[n-1-i] = v
		rev[n-1-i] = labels[i]
		top = max(top, v)
	}
	p := newPlot(title, xlabel)
	bars, err := plotter.NewBarChart(vs, vg.Points(14))
	if err != nil {
		return "", fmt.Errorf("plot %q: %w", title, err)
	}
	bars.Horizontal = true
	bars.Color = colBar
	bars.LineStyle.Width = 0
	p.Add(bars)
	p.NominalY(rev...)
	p.X.Min = 0
	p.X.Max = 1.08 * top
	if top <= 0 {
		p.X.Max = 1
	}
	return svgOf(p, plotWidth, rowsHeight(n), title)
}

// rangePlot draws one distribution per label, the first at the top: a line
// from the minimum to the maximum, a box from the 10th to the 90th
// percentile and a tick at the median.
func rangePlot(title, xlabel string, labels []string, sums []Summary) (string, error) {
	n := len(labels)
	rev := make([]string, n)
	rb := &rangeBars{}
	top := 0.0
	for i, s := range sums {
		rev[n-1-i] = labels[i]
		rb.rows = append(rb.rows, rangeRow{y: float64(n - 1 - i), s: s})
		top = max(top, s.Max)
	}
	p := newPlot(title, xlabel)
	p.Add(rb)
	p.NominalY(rev...)
	p.X.Min = 0
	p.X.Max = 1.08 * top
	if top <= 0 {
		p.X.Max = 1
	}
	p.Y.Min, p.Y.Max = -0.6, float64(n)-0.4
	return svgOf(p, plotWidth, rowsHeight(n), title)
}

type rangeRow struct {
	y float64
	s Summary
}

// rangeBars is a plot.Plotter of horizontal distributions (rangePlot).
type rangeBars struct{ rows []rangeRow }

// Plot implements plot.Plotter.
func (r *rangeBars) Plot(c draw.Canvas, plt *plot.Plot) {
	tx, ty := plt.Transforms(&c)
	half := vg.Points(7)
	for _, row := range r.rows {
		if row.s.N == 0 {
			continue
		}
		y := ty(row.y)
		c.StrokeLine2(draw.LineStyle{Color: colMedian, Width: vg.Points(1)}, tx(row.s.Min), y, tx(row.s.Max), y)
		x0, x1 := tx(row.s.P10), tx(row.s.P90)
		if x1-x0 < vg.Points(2) { // a constant margin still shows as a box
			x0, x1 = x0-vg.Points(1), x1+vg.Points(1)
		}
		c.FillPolygon(colRange, []vg.Point{{X: x0, Y: y - half}, {X: x1, Y: y - half}, {X: x1, Y: y + half}, {X: x0, Y: y + half}})
		m := tx(row.s.Median)
		c.StrokeLine2(draw.LineStyle{Color: colMedian, Width: vg.Points(2.5)}, m, y-half, m, y+half)
	}
}

// DataRange implements plot.DataRanger.
func (r *rangeBars) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = math.Inf(1), math.Inf(-1)
	for _, row := range r.rows {
		xmin, xmax = min(xmin, row.s.Min), max(xmax, row.s.Max)
	}
	return xmin, xmax, -0.5, float64(len(r.rows)) - 0.5
}

// maxCDFPoints bounds the points of a distribution function plot: the
// page stays small for tables of millions of cells.
const maxCDFPoints = 240

// cdfPlot draws the empirical distribution function of sorted xs > 0 on a
// logarithmic axis, as percentages.
func cdfPlot(title, xlabel string, xs []float64) (string, error) {
	n := len(xs)
	k := min(n, maxCDFPoints)
	pts := make(plotter.XYs, 0, k+1)
	for j := range k {
		i := j
		if n > k {
			i = int(math.Round(float64(j) * float64(n-1) / float64(k-1)))
		}
		pts = append(pts, plotter.XY{X: 100 * xs[i], Y: float64(i+1) / float64(n)})
	}
	p := newPlot(title, xlabel)
	p.Y.Label.Text = "fraction of cells at or below"
	p.Y.Min, p.Y.Max = 0, 1
	l, err := plotter.NewLine(pts)
	if err != nil {
		return "", fmt.Errorf("plot %q: %w", title, err)
	}
	l.StepStyle = plotter.PostStep
	l.Color = colBar
	l.Width = vg.Points(2)
	p.Add(l)
	lo, hi := 100*xs[0], 100*xs[n-1]
	if hi <= lo*1.5 {
		lo, hi = lo/1.5, hi*1.5
	}
	p.X.Min, p.X.Max = lo, hi
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = percentTicks{}
	return svgOf(p, plotWidth, 2.6*vg.Inch, title)
}

// percentTicks marks a logarithmic axis of percentages at 1, 2, 5 times
// powers of ten.
type percentTicks struct{}

// Ticks implements plot.Ticker.
func (percentTicks) Ticks(lo, hi float64) []plot.Tick {
	var t []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			t = append(t, plot.Tick{Value: v, Label: Num(roundSig(v)) + "%"})
		}
	}
	return t
}

// roundSig rounds v to 6 significant digits, for tick labels that a power
// of ten computed in floating point would print as 0.30000000000000004.
func roundSig(v float64) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	return r
}
