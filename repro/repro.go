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
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	"github.com/knowdp/knowdp/internal/fileio"
)

// Experiment is one reproducible set of a paper's tables and figures.
type Experiment struct {
	Name    string // short name used on the command line: "linear", "knowledge", "dx"
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

// SavePlot writes p as dir/name.png and dir/name.svg, atomically, at the
// given size (for example 6*vg.Inch by 4*vg.Inch).
func SavePlot(p *plot.Plot, dir, name string, w, h vg.Length) error {
	for _, ext := range []string{"png", "svg"} {
		wt, err := p.WriterTo(w, h, ext)
		if err != nil {
			return fmt.Errorf("plot %s: %w", name, err)
		}
		path := filepath.Join(dir, name+"."+ext)
		if err := fileio.WriteAtomic(path, func(out io.Writer) error {
			_, err := wt.WriteTo(out)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// F formats a float for CSV output with full precision and no exponent
// for ordinary magnitudes.
func F(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
