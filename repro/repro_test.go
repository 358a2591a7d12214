package repro

import (
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

func TestWriteCSVAndSavePlot(t *testing.T) {
	dir := t.TempDir()
	if err := WriteCSV(dir, "t.csv", []string{"k", "rho"}, [][]string{{"1", F(0.5)}, {"2", F(1.5)}}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "t.csv"))
	if err != nil || string(b) != "k,rho\n1,0.5\n2,1.5\n" {
		t.Fatalf("csv %q, %v", b, err)
	}
	p := plot.New()
	l, _ := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 1}})
	p.Add(l)
	if err := SavePlot(p, dir, "fig", 3*vg.Inch, 2*vg.Inch); err != nil {
		t.Fatal(err)
	}
	png, _ := os.ReadFile(filepath.Join(dir, "fig.png"))
	svg, _ := os.ReadFile(filepath.Join(dir, "fig.svg"))
	if !strings.HasPrefix(string(png), "\x89PNG") || !strings.Contains(string(svg), "<svg") {
		t.Error("plot files are not PNG and SVG")
	}
}

// TestSavePlotSizeAndAxes pins the PNG resolution (PlotDPI: a 6 x 4 inch
// plot is 1152 x 768 pixels) and FitAxes: the y axis ends above the data,
// keeps a 0 origin, and is padded below data that start above 0.
func TestSavePlotSizeAndAxes(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name           string
		lo, hi         float64
		wantLo, wantHi float64
	}{
		{"from zero", 0, 1, 0, 1.05},
		{"above zero", 0.97, 1.32, 0.97 - 0.05*0.35, 1.32 + 0.05*0.35},
		{"near zero", 0.01, 1, 0, 1 + 0.05*0.99},
		{"negative", -2, 2, -2.2, 2.2},
	} {
		p := plot.New()
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: tc.lo}, {X: 1, Y: tc.hi}})
		if err != nil {
			t.Fatal(err)
		}
		p.Add(l)
		if err := SavePlot(p, dir, "fig", 6*vg.Inch, 4*vg.Inch); err != nil {
			t.Fatal(err)
		}
		if math.Abs(p.Y.Min-tc.wantLo) > 1e-12 || math.Abs(p.Y.Max-tc.wantHi) > 1e-12 {
			t.Errorf("%s: y axis [%v, %v], want [%v, %v]", tc.name, p.Y.Min, p.Y.Max, tc.wantLo, tc.wantHi)
		}
	}
	f, err := os.Open(filepath.Join(dir, "fig.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Width != 1152 || cfg.Height != 768 {
		t.Errorf("PNG is %d x %d, want 1152 x 768", cfg.Width, cfg.Height)
	}
}
