package repro

import (
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
