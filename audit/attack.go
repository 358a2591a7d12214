package audit

import (
	"context"
	"errors"
	"image/color"
	"math"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/repro"
)

// Attack is a demonstration, from the papers, of how a mechanism leaks
// more than its eps, and of the knowdp mechanism that stops it.
type Attack struct {
	Name    string // command-line name: "km", "yww", "mironov", "averaging"
	Summary string
	// Explanation is one paragraph on what the attack does and shows.
	Explanation string
	Run         func(ctx context.Context, cfg AttackConfig) (*Report, error)
}

// AttackConfig is shared by all attacks.
type AttackConfig struct {
	// Dir is the directory the CSV files and plots are written to; it
	// must exist.
	Dir string
	// Quick selects reduced settings that run in seconds (as in CI).
	Quick bool
	// Rand is the randomness of the victims' noise and of the attacks.
	// A seeded generator makes the run reproducible and NOT private.
	Rand *noise.Rand
}

// Report is what an attack run found.
type Report struct {
	// Headline lists the key numbers, one finding per line.
	Headline []string
	// Files lists the paths written.
	Files []string
}

// Attacks returns the attacks in the order "knowdp attack all" runs them.
func Attacks() []Attack {
	return []Attack{KMAttack(), YWWAttack(), MironovAttack(), AveragingAttack()}
}

func checkAttackConfig(cfg AttackConfig) error {
	if cfg.Dir == "" {
		return errors.New("audit: attack output directory not set")
	}
	if cfg.Rand == nil {
		return errors.New("audit: attack needs a random generator")
	}
	return nil
}

// writeCSV writes a header and rows to dir/name atomically and adds the
// path to the report.
func (rep *Report) writeCSV(dir, name string, header []string, rows [][]string) error {
	if err := repro.WriteCSV(dir, name, header, rows); err != nil {
		return err
	}
	rep.Files = append(rep.Files, filepath.Join(dir, name))
	return nil
}

// savePlot writes p as dir/name.png and dir/name.svg atomically and adds
// the paths to the report.
func (rep *Report) savePlot(p *plot.Plot, dir, name string) error {
	if err := repro.SavePlot(p, dir, name, 6*vg.Inch, 4*vg.Inch); err != nil {
		return err
	}
	rep.Files = append(rep.Files, filepath.Join(dir, name+".png"), filepath.Join(dir, name+".svg"))
	return nil
}

// series is one line of a plot, in the colour of its role.
type series struct {
	name string
	xy   plotter.XYs
	role role
}

// role is what a line shows; it picks the colour and dashes.
type role int

const (
	vulnerable role = iota // red, solid: the attacked mechanism
	protected              // blue, solid: knowdp's mechanism
	predicted              // grey, dashed: theory
	other                  // green, dashed
	claim                  // orange, dashed: the claimed eps
)

// linePlot returns a plot of the series as lines with points.
func linePlot(title, x, y string, logX bool, ss ...series) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	if logX && len(ss) > 0 {
		// Label every x of the data: powers of two, or a few eps values.
		var ticks []plot.Tick
		for _, xy := range ss[0].xy {
			ticks = append(ticks, plot.Tick{Value: xy.X, Label: strconv.FormatFloat(xy.X, 'g', 4, 64)})
		}
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
	}
	p.Legend.Top = true
	for i, s := range ss {
		l, pts, err := plotter.NewLinePoints(s.xy)
		if err != nil {
			return nil, err
		}
		c := palette[s.role]
		l.Color, pts.Color = c, c
		pts.Shape = shapes[i%len(shapes)]
		if s.role >= predicted {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l, pts)
		p.Legend.Add(s.name, l, pts)
	}
	return p, nil
}

// palette and shapes tell the lines of a plot apart, also in grey.
var (
	palette = map[role]color.Color{
		vulnerable: color.RGBA{0xd6, 0x27, 0x28, 0xff},
		protected:  color.RGBA{0x1f, 0x77, 0xb4, 0xff},
		predicted:  color.RGBA{0x55, 0x55, 0x55, 0xff},
		other:      color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
		claim:      color.RGBA{0xff, 0x7f, 0x0e, 0xff},
	}
	shapes = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{}, draw.PlusGlyph{}}
)

// logTicks labels 1, 2 and 5 times each power of ten on a log axis.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for _, m := range []float64{1, 2, 5} {
			if v := m * math.Pow(10, e); v >= lo && v <= hi {
				ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', 3, 64)})
			}
		}
	}
	return ticks
}

func f(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
