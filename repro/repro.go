// Package repro regenerates the papers' tables and figures from the
// library: each experiment writes CSV files and PNG and SVG plots into a
// directory. Experiments use seeded (non-private) randomness so that their
// numbers are reproducible; the outputs say so.
package repro

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/knowdp/knowdp/internal/fileio"
)

// Experiment is one reproducible set of a paper's tables and figures.
type Experiment struct {
	Name    string // short name used on the command line: "linear", "knowledge", "dx", "zcdp"
	Summary string
	Run     func(ctx context.Context, cfg Config) error
}

// Config is shared by all experiments.
type Config struct {
	Dir   string       // output directory; must exist
	Seed  uint64       // seed of the (non-private) random generator
	Quick bool         // reduced sample sizes, for CI
	Log   *slog.Logger // progress messages; never nil
}

// All returns the experiments in the order "knowdp repro all" runs them.
func All() []Experiment {
	return []Experiment{
		Linear(),
		DX(),
		Knowledge(),
		ZCDP(),
	}
}

// WriteCSV writes a header and rows to dir/name atomically.
func WriteCSV(dir, name string, header []string, rows [][]string) error {
	return fileio.WriteAtomic(filepath.Join(dir, name), func(w io.Writer) error {
		cw := csv.NewWriter(w)
		if err := cw.Write(header); err != nil {
			return err
		}
		if err := cw.WriteAll(rows); err != nil {
			return err
		}
		cw.Flush()
		return cw.Error()
	})
}

// PlotDPI is the resolution of the PNG plots: twice the usual 96, so that a
// 6 x 4 inch plot is 1152 x 768 pixels and reads well on today's screens.
const PlotDPI = 192

// SavePlot writes p as dir/name.png and dir/name.svg, atomically, at the
// given size (for example 6*vg.Inch by 4*vg.Inch; the PNG at PlotDPI),
// after FitAxes.
func SavePlot(p *plot.Plot, dir, name string, w, h vg.Length) error {
	FitAxes(p)
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(PlotDPI))
	p.Draw(draw.New(img))
	svg := vgsvg.New(w, h)
	p.Draw(draw.New(svg))
	return writePlotFiles(dir, name, img, svg)
}

// writePlotFiles writes the PNG and SVG renderings of a plot.
func writePlotFiles(dir, name string, img *vgimg.Canvas, svg *vgsvg.Canvas) error {
	for _, out := range []struct {
		ext string
		wt  io.WriterTo
	}{{"png", vgimg.PngCanvas{Canvas: img}}, {"svg", svg}} {
		if err := fileio.WriteAtomic(filepath.Join(dir, name+"."+out.ext), func(w io.Writer) error {
			_, err := out.wt.WriteTo(w)
			return err
		}); err != nil {
			return fmt.Errorf("plot %s: %w", name, err)
		}
	}
	return nil
}

// plotMargin is the share of the y range left free above the data (and
// below it, unless the axis starts at 0), so that no curve runs along the
// frame.
const plotMargin = 0.05

// FitAxes pads the y axis by plotMargin of its range: gonum's automatic
// range ends exactly at the data, which puts the highest curve on the top
// frame. An axis starting at 0 keeps its 0 (counts, probabilities, shares);
// one starting above 0 is not padded below it.
func FitAxes(p *plot.Plot) {
	lo, hi := p.Y.Min, p.Y.Max
	span := hi - lo
	if _, linear := p.Y.Scale.(plot.LinearScale); !linear || !(span > 0) || math.IsInf(span, 0) {
		return // a log scale is not padded additively
	}
	p.Y.Max = hi + plotMargin*span
	if lo > 0 {
		p.Y.Min = max(0, lo-plotMargin*span)
	} else if lo < 0 {
		p.Y.Min = lo - plotMargin*span
	}
}

// F formats a float for CSV output with full precision and no exponent
// for ordinary magnitudes.
func F(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
