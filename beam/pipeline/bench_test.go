package pipeline

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/fileio"
	"github.com/knowdp/knowdp/internal/tablefile"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/release"
	"github.com/knowdp/knowdp/source"
)

// cpuTime is the CPU time this process has used, user and system: the
// pipeline's stages and, in process, the runner itself.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure runs f b.N times and reports rows and cells per second of wall
// time and per CPU-second.
func measure(b *testing.B, rows, cells float64, f func(i int)) {
	b.Helper()
	start := cpuTime()
	i := 0
	for b.Loop() {
		f(i)
		i++
	}
	cpu := (cpuTime() - start).Seconds()
	n := float64(b.N)
	b.ReportMetric(rows*n/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(cells*n/b.Elapsed().Seconds(), "cells/s")
	b.ReportMetric(rows*n/cpu, "rows/cpu-s")
	b.ReportMetric(cells*n/cpu, "cells/cpu-s")
}

// BenchmarkRelease measures the pipeline on Prism in process against the
// single-machine release of the same table (read, release, write): 400,000
// rows in 4 CSV shards, a 1,050,000-cell cuboid (5 blocks), two invariants;
// the pipeline writes the single-file form (the driver joins the shards)
// and the directory form (no join).
func BenchmarkRelease(b *testing.B) {
	dir := b.TempDir()
	tb := writeTable(b, dir, []int{100, 105, 100}, 400000, 4, 5)
	exact := []domain.Cuboid{0b011, 0b110}
	eps, _ := privacy.NewEpsilon(1)
	rows, cells := 400000.0, 1050000.0
	for _, form := range []string{"file", "dir"} {
		b.Run("pipeline-"+form, func(b *testing.B) {
			measure(b, rows, cells, func(i int) {
				out := filepath.Join(dir, fmt.Sprintf("%s-%d", form, i))
				if form == "file" {
					out += ".csv"
				}
				if _, err := Run(context.Background(), cuboidSpec(tb, domain.Base(3), exact, eps, out)); err != nil {
					b.Fatal(err)
				}
				os.RemoveAll(out)
			})
		})
	}
	b.Run("single", func(b *testing.B) {
		measure(b, rows, cells, func(int) {
			singleCuboid(b, tb, oneSpec{Epsilon: eps, Exact: exact, Cuboid: domain.Base(3)}, dir)
		})
	})
}

// BenchmarkWorkload measures a workload release of four tables under one
// budget (a 1,050,000-cell table, two of its marginals and a 3-way
// marginal of 10,500 cells; one invariant) from 400,000 rows in 4 shards:
// the pipeline (directory form) against the single machine (count the
// needed cuboids, release, write every table).
func BenchmarkWorkload(b *testing.B) {
	dir := b.TempDir()
	tb := writeTable(b, dir, []int{100, 105, 100}, 400000, 4, 5)
	s := tb.schema
	tables := []domain.Cuboid{0b111, 0b011, 0b110, 0b101}
	spec := release.Spec{Exact: []domain.View{domain.ViewOf(0b001)}}
	for _, c := range tables {
		spec.Tables = append(spec.Tables, domain.ViewOf(c))
	}
	spec.Epsilon, _ = privacy.NewEpsilon(1)
	job := Job{Epsilon: 1, Exact: []string{flagDims(s, 0b001)}}
	var cells float64
	for _, c := range tables {
		job.Cuboids = append(job.Cuboids, flagDims(s, c))
		cells += float64(s.CuboidSize(c))
	}
	rows := 400000.0
	b.Run("pipeline", func(b *testing.B) {
		measure(b, rows, cells, func(i int) {
			out := filepath.Join(dir, fmt.Sprint("w-", i))
			if _, err := Run(context.Background(), Spec{Files: tb.shards, Schema: s, Job: job, Out: out}); err != nil {
				b.Fatal(err)
			}
			os.RemoveAll(out)
		})
	})
	b.Run("single", func(b *testing.B) {
		measure(b, rows, cells, func(int) { singleWorkload(b, tb, spec, dir) })
	})
	// The pipeline's worker alone, the runner in a process of its own
	// (see BenchmarkCells).
	b.Run("jobserver-pipeline", func(b *testing.B) {
		useJobServer(b, dir)
		measure(b, rows, cells, func(i int) {
			out := filepath.Join(dir, fmt.Sprint("jw-", i))
			if _, err := Run(context.Background(), Spec{Files: tb.shards, Schema: s, Job: job, Out: out}); err != nil {
				b.Fatal(err)
			}
			os.RemoveAll(out)
		})
	})
}

// BenchmarkCells measures what a release costs per cell once the rows are
// counted: a 16,777,216-cell cuboid (64 blocks) from 10,000 rows, with one
// invariant (noise, marginals, corrections, formatting and writing every
// row), and a workload of that cuboid and two of its marginals, on the
// pipeline (directory form) and on the single machine. With
// BenchmarkCountRandomOrder (per row) it gives docs/beam.md's estimate for
// 10^10 cells.
func BenchmarkCells(b *testing.B) {
	dir := b.TempDir()
	tb := writeTable(b, dir, []int{256, 256, 256}, 10000, 2, 9)
	s := tb.schema
	eps, _ := privacy.NewEpsilon(1)
	exact := []domain.Cuboid{0b001}
	tables := []domain.Cuboid{0b111, 0b011, 0b110}
	cells := float64(s.CuboidSize(domain.Base(3)))
	wcells := cells + 2*65536
	job := Job{Epsilon: 1, Exact: []string{flagDims(s, 0b001)}}
	for _, c := range tables {
		job.Cuboids = append(job.Cuboids, flagDims(s, c))
	}
	b.Run("cuboid-pipeline", func(b *testing.B) {
		measure(b, 10000, cells, func(i int) {
			out := filepath.Join(dir, fmt.Sprint("c-", i))
			if _, err := Run(context.Background(), cuboidSpec(tb, domain.Base(3), exact, eps, out)); err != nil {
				b.Fatal(err)
			}
			os.RemoveAll(out)
		})
	})
	b.Run("cuboid-single", func(b *testing.B) {
		measure(b, 10000, cells, func(int) {
			singleCuboid(b, tb, oneSpec{Epsilon: eps, Exact: exact, Cuboid: domain.Base(3)}, dir)
		})
	})
	b.Run("workload-pipeline", func(b *testing.B) {
		measure(b, 10000, wcells, func(i int) {
			out := filepath.Join(dir, fmt.Sprint("w-", i))
			if _, err := Run(context.Background(), Spec{Files: tb.shards, Schema: s, Job: job, Out: out}); err != nil {
				b.Fatal(err)
			}
			os.RemoveAll(out)
		})
	})
	b.Run("workload-single", func(b *testing.B) {
		spec := release.Spec{Epsilon: eps, Exact: []domain.View{domain.ViewOf(exact[0])}}
		for _, c := range tables {
			spec.Tables = append(spec.Tables, domain.ViewOf(c))
		}
		measure(b, 10000, wcells, func(int) { singleWorkload(b, tb, spec, dir) })
	})
	// On a separately started Prism job server the runner's engine runs
	// in that process, as on a cluster it runs on its own machines: this
	// process's CPU is the SDK worker's and the driver's.
	b.Run("jobserver", func(b *testing.B) {
		useJobServer(b, dir)
		b.Run("cuboid-pipeline", func(b *testing.B) {
			measure(b, 10000, cells, func(i int) {
				out := filepath.Join(dir, fmt.Sprint("jc-", i))
				if _, err := Run(context.Background(), cuboidSpec(tb, domain.Base(3), exact, eps, out)); err != nil {
					b.Fatal(err)
				}
				os.RemoveAll(out)
			})
		})
		b.Run("workload-pipeline", func(b *testing.B) {
			measure(b, 10000, wcells, func(i int) {
				out := filepath.Join(dir, fmt.Sprint("jw-", i))
				if _, err := Run(context.Background(), Spec{Files: tb.shards, Schema: s, Job: job, Out: out}); err != nil {
					b.Fatal(err)
				}
				os.RemoveAll(out)
			})
		})
	})
}

// singleCuboid is what knowdp release does for one cuboid from the cube
// of the whole table: plan, run, write the table.
func singleCuboid(b *testing.B, tb table, spec oneSpec, dir string) {
	c, err := cubeFromCSV(context.Background(), tb.whole, tb.schema, cube.Options{})
	if err != nil {
		b.Fatal(err)
	}
	rel, err := releaseOne(context.Background(), c, spec, noise.NewRand())
	if err != nil {
		b.Fatal(err)
	}
	tab := rel.Tables[0]
	err = fileio.WriteAtomic(filepath.Join(dir, "s.csv"), func(w io.Writer) error {
		return tablefile.WriteRows(w, tablefile.CSV, tb.schema, tab.TableView(), 0, tab.Counts, tab.CellMOE, tab.Integer)
	})
	if err != nil {
		b.Fatal(err)
	}
}

// singleWorkload is what knowdp release does for a workload: plan it,
// count the cuboids it needs, release, write every table.
func singleWorkload(b *testing.B, tb table, spec release.Spec, dir string) {
	s := tb.schema
	plan, err := release.NewPlan(s, spec)
	if err != nil {
		b.Fatal(err)
	}
	t, err := source.OpenCSV(tb.whole)
	if err != nil {
		b.Fatal(err)
	}
	counts, _, err := cube.AggregateViews(context.Background(), t, s, plan.Needs(), cube.Options{})
	t.Close()
	if err != nil {
		b.Fatal(err)
	}
	w, err := plan.Run(context.Background(), counts, noise.NewRand())
	if err != nil {
		b.Fatal(err)
	}
	for _, tab := range w.Tables {
		err := fileio.WriteAtomic(filepath.Join(dir, release.TableFileName(s, tab.Cuboid)), func(w io.Writer) error {
			return tablefile.Write(w, tablefile.CSV, s, tab.Cuboid, tab.Counts, tab.CellMOE90())
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
