package release

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/internal/fileio"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
)

// BenchmarkRelease measures rows/s and cells/s of the pipeline on Prism in
// process against the single-machine release of the same table: 400,000
// rows in 4 CSV shards, a 1,050,000-cell cuboid, two invariants.
func BenchmarkRelease(b *testing.B) {
	dir := b.TempDir()
	tb := writeTable(b, dir, []int{100, 105, 100}, 400000, 4, 5)
	exact := []cube.Cuboid{0b011, 0b110}
	eps, _ := privacy.NewEpsilon(1)
	rows, cells := 400000.0, 1050000.0
	b.Run("beam", func(b *testing.B) {
		for b.Loop() {
			if _, err := Run(context.Background(), cuboidSpec(tb, cube.Base(3), exact, eps, filepath.Join(dir, "b.csv"))); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(rows*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		b.ReportMetric(cells*float64(b.N)/b.Elapsed().Seconds(), "cells/s")
	})
	b.Run("single", func(b *testing.B) {
		for b.Loop() {
			c, err := cubeFromCSV(context.Background(), tb.whole, tb.schema, cube.Options{})
			if err != nil {
				b.Fatal(err)
			}
			rel, err := c.Release(context.Background(), cube.ReleaseSpec{Epsilon: eps, Exact: exact, Cuboid: cube.Base(3)}, noise.NewRand())
			if err != nil {
				b.Fatal(err)
			}
			if err := fileio.WriteAtomic(filepath.Join(dir, "s.csv"), rel.WriteCSV); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(rows*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		b.ReportMetric(cells*float64(b.N)/b.Elapsed().Seconds(), "cells/s")
	})
}
