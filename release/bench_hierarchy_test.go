package release

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/source"
)

// nationalSchema is testkit.NationalGeo.
func nationalSchema(tb testing.TB, leaves int) (*domain.Schema, []float64) {
	return testkit.NationalGeo(tb, leaves)
}

// BenchmarkNationalHierarchy is the national-scale release of
// docs/hierarchy.md: synthetic persons over a 4-level hierarchy with 10^5
// leaves x sex x 18 age bands, three tables per level (the level alone, by
// sex, by sex and age) and the grand total, state totals exact, spine
// split, integer output. It reads the persons from a CSV file and reports
// the seconds of each phase (wall time, and for the estimate and the
// integer tables also the process's CPU time: user and system over every
// core, what the phase costs whatever else runs on the machine) and the
// peak resident memory. The number of persons is KNOWDP_BENCH_PERSONS
// (default 10^6; the documented figures use 10^7 and 10^8):
//
//	KNOWDP_BENCH_PERSONS=10000000 go test ./release -run '^$' -bench BenchmarkNationalHierarchy -benchtime 1x
func BenchmarkNationalHierarchy(b *testing.B) {
	persons := benchPersons(b, 1_000_000)
	s, weights := nationalSchema(b, 100_000)
	path := filepath.Join(b.TempDir(), "persons.csv")
	testkit.WriteNationalPersons(b, []string{path}, s, weights, persons)
	spec := nationalSpec(b, s, SplitSpine)
	ctx := context.Background()
	runtime.GC()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		plan, err := newViewsPlanContext(context.Background(), s, spec)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		tab, err := source.OpenCSV(path)
		if err != nil {
			b.Fatal(err)
		}
		counts, rows, err := cube.AggregateViews(ctx, tab, s, plan.Needs(), cube.Options{})
		tab.Close()
		if err != nil {
			b.Fatal(err)
		}
		if rows != int64(persons) {
			b.Fatalf("%d rows", rows)
		}
		t2, c2 := time.Now(), cpuSeconds()
		r := noise.NewSeeded(1)
		rel, err := plan.releaseFrom(ctx, counts, r.Split())
		if err != nil {
			b.Fatal(err)
		}
		t3, c3 := time.Now(), cpuSeconds()
		if err := rel.RoundIntegers(ctx, r.Split()); err != nil {
			b.Fatal(err)
		}
		t4, c4 := time.Now(), cpuSeconds()
		cells := 0
		for _, t := range rel.Tables {
			if err := t.WriteCSV(discard{}, s); err != nil {
				b.Fatal(err)
			}
			cells += len(t.Counts)
		}
		t5 := time.Now()
		b.ReportMetric(t1.Sub(t0).Seconds(), "plan-s")
		b.ReportMetric(t2.Sub(t1).Seconds(), "read-s")
		b.ReportMetric(t3.Sub(t2).Seconds(), "estimate-s")
		b.ReportMetric(c3-c2, "estimate-cpu-s")
		b.ReportMetric(t4.Sub(t3).Seconds(), "integer-s")
		b.ReportMetric(c4-c3, "integer-cpu-s")
		b.ReportMetric(t5.Sub(t4).Seconds(), "format-s")
		b.ReportMetric(float64(cells), "cells")
	}
	b.StopTimer()
	b.ReportMetric(peakRSSMiB(), "peak-MiB")
}

// cpuSeconds returns the CPU time of the process so far, user and system.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// nationalSpec is the release of BenchmarkNationalHierarchy: three tables
// per level (the level alone, by sex, by sex and age) and the grand total,
// state totals exact, under the given split.
func nationalSpec(tb testing.TB, s *domain.Schema, split Split) viewSpec {
	var views []domain.View
	for _, x := range testkit.NationalTables {
		v, err := s.ParseView(x)
		if err != nil {
			tb.Fatal(err)
		}
		views = append(views, v)
	}
	exact, err := s.ParseView(testkit.NationalExact)
	if err != nil {
		tb.Fatal(err)
	}
	eps, _ := privacy.NewEpsilon(1)
	return viewSpec{Epsilon: eps, Split: split, Views: views, Exact: []domain.View{exact}}
}

// nationalCounts counts persons drawn as testkit.WriteNationalPersons draws them
// straight into the leaf-level table and rolls it up to the views needs.
func nationalCounts(tb testing.TB, s *domain.Schema, weights []float64, persons int, needs []domain.View) map[domain.View][]float64 {
	rng := rand.New(rand.NewPCG(2020, 2))
	cum := make([]float64, len(weights))
	var c float64
	for i, x := range weights {
		c += x
		cum[i] = c
	}
	base := make([]float64, s.Cells())
	for range persons {
		u := rng.Float64()
		lo, _ := slices.BinarySearch(cum, u)
		lo = min(lo, len(cum)-1)
		base[(lo*2+rng.IntN(2))*18+rng.IntN(18)]++
	}
	counts := make(map[domain.View][]float64, len(needs))
	for _, v := range needs {
		x, err := s.RollUp(domain.View{Dims: domain.Base(s.NumDims())}, base, v)
		if err != nil {
			tb.Fatal(err)
		}
		counts[v] = x
	}
	return counts
}

// BenchmarkNationalEstimate is the estimate phase of
// BenchmarkNationalHierarchy alone (noise, the least-squares estimate and
// every margin of error), from counts made in memory
// (KNOWDP_BENCH_PERSONS persons, default 10^7):
//
//	go test ./release -run '^$' -bench 'BenchmarkNational(Estimate|Integer)' -benchtime 5x
func BenchmarkNationalEstimate(b *testing.B) {
	s, weights := nationalSchema(b, 100_000)
	spec := nationalSpec(b, s, SplitSpine)
	plan, err := newViewsPlanContext(context.Background(), s, spec)
	if err != nil {
		b.Fatal(err)
	}
	counts := nationalCounts(b, s, weights, benchPersons(b, 10_000_000), plan.Needs())
	ctx := context.Background()
	b.ResetTimer()
	c0 := cpuSeconds()
	for b.Loop() {
		if _, err := plan.releaseFrom(ctx, counts, noise.NewSeeded(1)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric((cpuSeconds()-c0)/float64(b.N), "cpu-s/op")
}

// BenchmarkNationalInteger is the integer phase of
// BenchmarkNationalHierarchy alone: the top-down integer tables of the
// release BenchmarkNationalEstimate makes.
func BenchmarkNationalInteger(b *testing.B) {
	s, weights := nationalSchema(b, 100_000)
	spec := nationalSpec(b, s, SplitSpine)
	plan, err := newViewsPlanContext(context.Background(), s, spec)
	if err != nil {
		b.Fatal(err)
	}
	counts := nationalCounts(b, s, weights, benchPersons(b, 10_000_000), plan.Needs())
	ctx := context.Background()
	rel, err := plan.releaseFrom(ctx, counts, noise.NewSeeded(1))
	if err != nil {
		b.Fatal(err)
	}
	estimates := make([][]float64, len(rel.Tables))
	for i, t := range rel.Tables {
		estimates[i] = slices.Clone(t.Counts)
	}
	b.ResetTimer()
	var cpu float64
	for b.Loop() {
		b.StopTimer()
		for i := range rel.Tables {
			rel.Tables[i].Counts = slices.Clone(estimates[i])
		}
		b.StartTimer()
		c0 := cpuSeconds()
		if err := rel.RoundIntegers(ctx, noise.NewSeeded(2)); err != nil {
			b.Fatal(err)
		}
		cpu += cpuSeconds() - c0
	}
	b.ReportMetric(cpu/float64(b.N), "cpu-s/op")
}

// benchPersons returns KNOWDP_BENCH_PERSONS, or def when it is not set.
func benchPersons(tb testing.TB, def int) int {
	v := os.Getenv("KNOWDP_BENCH_PERSONS")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("KNOWDP_BENCH_PERSONS=%q: want a positive integer", v)
	}
	return n
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// peakRSSMiB returns the process's peak resident memory (VmHWM), or 0
// where /proc does not say.
func peakRSSMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// BenchmarkNationalPlan plans the release of BenchmarkNationalHierarchy
// with the optimal split (the shares of the 11 measured tables across the
// 4-level hierarchy of 10^5 leaves), under pure DP (epsilon 1) and zCDP
// (rho 1), and reports the certified gap:
//
//	go test ./release -run '^$' -bench BenchmarkNationalPlan -benchtime 1x
func BenchmarkNationalPlan(b *testing.B) {
	s, _ := nationalSchema(b, 100_000)
	for _, gaussian := range []bool{false, true} {
		name := "laplace"
		if gaussian {
			name = "gaussian"
		}
		b.Run(name, func(b *testing.B) {
			spec := nationalSpec(b, s, SplitOptimal)
			if gaussian {
				rho, _ := privacy.NewRho(1)
				spec.Epsilon, spec.Mechanism, spec.Rho, spec.Delta = privacy.Epsilon{}, MechanismGaussian, rho, 1e-6
			}
			var p *viewsPlan
			for b.Loop() {
				var err error
				if p, err = newViewsPlanContext(context.Background(), s, spec); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(p.p.cert.Gap, "gap")
		})
	}
}
