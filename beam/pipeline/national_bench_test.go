package pipeline

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/fileio"
	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/release"
	"github.com/knowdp/knowdp/source"
)

// BenchmarkNational is the national release of docs/hierarchy.md
// (release.BenchmarkNationalHierarchy): synthetic persons over 10^5 tracts
// in 4 levels × sex × 18 age bands, the 13 tables of testkit.NationalTables
// (4.0 million cells), state totals exact, spine split, integer tables,
// seeded. The pipeline reads the persons from 4 CSV shards and writes a
// directory of tables; the single process (what knowdp release does) reads
// them from one CSV file, counts, releases and writes every table. Both
// report rows and cells per second of wall time and per CPU-second. The
// number of persons is KNOWDP_BENCH_PERSONS (default 10^6):
//
//	cd beam && KNOWDP_BENCH_PERSONS=10000000 go test ./pipeline -run '^$' -bench BenchmarkNational -benchtime 1x
func BenchmarkNational(b *testing.B) {
	persons := 1_000_000
	if v := os.Getenv("KNOWDP_BENCH_PERSONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("KNOWDP_BENCH_PERSONS=%q: want a positive integer", v)
		}
		persons = n
	}
	s, weights := testkit.NationalGeo(b, 100_000)
	dir := b.TempDir()
	shards := make([]string, 4)
	for i := range shards {
		shards[i] = filepath.Join(dir, fmt.Sprintf("persons-%d.csv", i))
	}
	testkit.WriteNationalPersons(b, shards, s, weights, persons)
	whole := filepath.Join(dir, "persons.csv")
	testkit.WriteNationalPersons(b, []string{whole}, s, weights, persons)
	job := Job{Cuboids: testkit.NationalTables, Exact: []string{testkit.NationalExact}, Epsilon: 1, Split: "spine", Integer: true}
	var cells float64
	for _, x := range testkit.NationalTables {
		v, err := s.ParseView(x)
		if err != nil {
			b.Fatal(err)
		}
		cells += float64(s.ViewSize(v))
	}
	rows := float64(persons)
	b.Run("pipeline", func(b *testing.B) {
		measure(b, rows, cells, func(i int) {
			out := filepath.Join(dir, fmt.Sprint("p-", i))
			if _, err := Run(context.Background(), Spec{Files: shards, Schema: s, Job: job, Out: out, Seeded: true, Seed: 1}); err != nil {
				b.Fatal(err)
			}
			os.RemoveAll(out)
		})
	})
	b.Run("single", func(b *testing.B) {
		measure(b, rows, cells, func(i int) {
			out := filepath.Join(dir, fmt.Sprint("s-", i))
			singleViews(b, s, whole, job, out)
			os.RemoveAll(out)
		})
	})
}

// singleViews is knowdp release on one machine: plan the job, count the
// CSV file into the views the plan needs, release from a seeded generator,
// write every table into the new directory out.
func singleViews(b *testing.B, s *domain.Schema, path string, j Job, out string) {
	ctx := context.Background()
	spec, err := j.request().Spec(s)
	if err != nil {
		b.Fatal(err)
	}
	plan, err := release.NewPlan(s, spec)
	if err != nil {
		b.Fatal(err)
	}
	t, err := source.OpenCSV(path)
	if err != nil {
		b.Fatal(err)
	}
	counts, _, err := cube.AggregateViews(ctx, t, s, plan.Needs(), cube.Options{})
	t.Close()
	if err != nil {
		b.Fatal(err)
	}
	w, err := plan.Run(ctx, counts, noise.NewSeeded(1))
	if err != nil {
		b.Fatal(err)
	}
	if err := os.Mkdir(out, 0o755); err != nil {
		b.Fatal(err)
	}
	for _, tab := range w.Tables {
		err := fileio.WriteAtomic(filepath.Join(out, s.ViewFileName(tab.TableView())), func(w io.Writer) error {
			return tab.WriteCSV(w, s)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
