package release

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/source"
)

// nationalSchema returns a 4-level geography (4 regions > 50 states >
// 3,000 counties > 100,000 tracts, groups of unequal sizes) crossed with
// sex and 18 age bands, and each tract's share of the population.
func nationalSchema(tb testing.TB, leaves int) (*domain.Schema, []float64) {
	rng := rand.New(rand.NewPCG(2020, 1))
	counties := max(leaves*3/100, 1)
	states := min(50, counties)
	regions := min(4, states)
	// Unequal groups: each unit picks its parent with a skewed
	// probability, every parent getting at least one child.
	assign := func(children, parents int) []int {
		p := make([]int, children)
		for i := range p {
			if i < parents {
				p[i] = i
				continue
			}
			u := rng.Float64()
			p[i] = int(u * u * float64(parents))
		}
		rng.Shuffle(children, func(i, j int) { p[i], p[j] = p[j], p[i] })
		return p
	}
	tractCounty, countyState, stateRegion := assign(leaves, counties), assign(counties, states), assign(states, regions)
	d := domain.Dimension{Name: "geo", Levels: []string{"region", "state", "county", "tract"}, Parents: map[string]map[string]string{
		"county": {}, "state": {}, "region": {},
	}}
	for i := range leaves {
		v := "t" + strconv.Itoa(i)
		d.Values = append(d.Values, v)
		d.Parents["county"][v] = "c" + strconv.Itoa(tractCounty[i])
	}
	for i := range counties {
		d.Parents["state"]["c"+strconv.Itoa(i)] = "s" + strconv.Itoa(countyState[i])
	}
	for i := range states {
		d.Parents["region"]["s"+strconv.Itoa(i)] = "r" + strconv.Itoa(stateRegion[i])
	}
	ages := make([]string, 18)
	for i := range ages {
		ages[i] = fmt.Sprintf("%d-%d", 5*i, 5*i+4)
	}
	s, err := domain.NewSchema([]domain.Dimension{d, {Name: "sex", Values: []string{"F", "M"}}, {Name: "age", Values: ages}})
	if err != nil {
		tb.Fatal(err)
	}
	w := make([]float64, leaves)
	var total float64
	for i := range w {
		w[i] = 0.2 + rng.ExpFloat64()
		total += w[i]
	}
	for i := range w {
		w[i] /= total
	}
	return s, w
}

// writeNationalPersons writes n synthetic persons over the schema's tracts
// (in the tracts' proportions, sex and age uniform) to a CSV file.
func writeNationalPersons(tb testing.TB, path string, s *domain.Schema, weights []float64, n int) {
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	w.WriteString("geo,sex,age\n")
	rng := rand.New(rand.NewPCG(2020, 2))
	cum := make([]float64, len(weights))
	var c float64
	for i, x := range weights {
		c += x
		cum[i] = c
	}
	tracts, ages := s.Dim(0).Values, s.Dim(2).Values
	// Rows in random order, as a real file would have them.
	for range n {
		u := rng.Float64()
		lo, hi := 0, len(cum)-1
		for lo < hi {
			mid := (lo + hi) / 2
			if cum[mid] < u {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		w.WriteString(tracts[lo])
		if rng.IntN(2) == 0 {
			w.WriteString(",F,")
		} else {
			w.WriteString(",M,")
		}
		w.WriteString(ages[rng.IntN(18)])
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkNationalHierarchy is the national-scale release of
// docs/hierarchy.md: synthetic persons over a 4-level hierarchy with 10^5
// leaves x sex x 18 age bands, three tables per level (the level alone, by
// sex, by sex and age) and the grand total, state totals exact, integer
// output. It reads the persons from a CSV file and reports the seconds of
// each phase and the peak resident memory. The number of persons is
// KNOWDP_BENCH_PERSONS (default 10^6; the documented figure uses 10^8):
//
//	KNOWDP_BENCH_PERSONS=100000000 go test ./cube -run '^$' -bench BenchmarkNationalHierarchy -benchtime 1x -timeout 60m
func BenchmarkNationalHierarchy(b *testing.B) {
	persons := 1_000_000
	if v := os.Getenv("KNOWDP_BENCH_PERSONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("KNOWDP_BENCH_PERSONS=%q: want a positive integer", v)
		}
		persons = n
	}
	s, weights := nationalSchema(b, 100_000)
	path := filepath.Join(b.TempDir(), "persons.csv")
	writeNationalPersons(b, path, s, weights, persons)
	var views []domain.View
	for _, level := range []string{"region", "state", "county", "tract"} {
		for _, x := range []string{"geo:" + level, "geo:" + level + ",sex", "geo:" + level + ",sex,age"} {
			v, err := s.ParseView(x)
			if err != nil {
				b.Fatal(err)
			}
			views = append(views, v)
		}
	}
	views = append(views, domain.View{})
	exact, _ := s.ParseView("geo:state")
	eps, _ := privacy.NewEpsilon(1)
	spec := ViewSpec{Epsilon: eps, Split: SplitSpine, Views: views, Exact: []domain.View{exact}}
	needs, err := spec.Needs(s)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	runtime.GC()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		tab, err := source.OpenCSV(path)
		if err != nil {
			b.Fatal(err)
		}
		counts, rows, err := cube.AggregateViews(ctx, tab, s, needs, cube.Options{})
		tab.Close()
		if err != nil {
			b.Fatal(err)
		}
		if rows != int64(persons) {
			b.Fatalf("%d rows", rows)
		}
		t1 := time.Now()
		r := noise.NewSeeded(1)
		rel, err := ReleaseViews(ctx, s, counts, spec, r.Split())
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if err := rel.RoundIntegers(ctx, r.Split()); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		cells := 0
		for _, t := range rel.Tables {
			if err := t.WriteCSV(discard{}, s); err != nil {
				b.Fatal(err)
			}
			cells += len(t.Counts)
		}
		t4 := time.Now()
		b.ReportMetric(t1.Sub(t0).Seconds(), "read-s")
		b.ReportMetric(t2.Sub(t1).Seconds(), "estimate-s")
		b.ReportMetric(t3.Sub(t2).Seconds(), "integer-s")
		b.ReportMetric(t4.Sub(t3).Seconds(), "format-s")
		b.ReportMetric(float64(cells), "cells")
	}
	b.StopTimer()
	b.ReportMetric(peakRSSMiB(), "peak-MiB")
}

// nationalSpec is the release of BenchmarkNationalHierarchy: three tables
// per level (the level alone, by sex, by sex and age) and the grand total,
// state totals exact, under the given split.
func nationalSpec(tb testing.TB, s *domain.Schema, split Split) ViewSpec {
	var views []domain.View
	for _, level := range []string{"region", "state", "county", "tract"} {
		for _, x := range []string{"geo:" + level, "geo:" + level + ",sex", "geo:" + level + ",sex,age"} {
			v, err := s.ParseView(x)
			if err != nil {
				tb.Fatal(err)
			}
			views = append(views, v)
		}
	}
	views = append(views, domain.View{})
	exact, err := s.ParseView("geo:state")
	if err != nil {
		tb.Fatal(err)
	}
	eps, _ := privacy.NewEpsilon(1)
	return ViewSpec{Epsilon: eps, Split: split, Views: views, Exact: []domain.View{exact}}
}

// nationalCounts counts persons drawn as writeNationalPersons draws them
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
	plan, err := PlanViews(s, spec)
	if err != nil {
		b.Fatal(err)
	}
	counts := nationalCounts(b, s, weights, benchPersons(b, 10_000_000), plan.Needs())
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		if _, err := plan.ReleaseFrom(ctx, counts, noise.NewSeeded(1)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNationalInteger is the integer phase of
// BenchmarkNationalHierarchy alone: the top-down integer tables of the
// release BenchmarkNationalEstimate makes.
func BenchmarkNationalInteger(b *testing.B) {
	s, weights := nationalSchema(b, 100_000)
	spec := nationalSpec(b, s, SplitSpine)
	plan, err := PlanViews(s, spec)
	if err != nil {
		b.Fatal(err)
	}
	counts := nationalCounts(b, s, weights, benchPersons(b, 10_000_000), plan.Needs())
	ctx := context.Background()
	rel, err := plan.ReleaseFrom(ctx, counts, noise.NewSeeded(1))
	if err != nil {
		b.Fatal(err)
	}
	estimates := make([][]float64, len(rel.Tables))
	for i, t := range rel.Tables {
		estimates[i] = slices.Clone(t.Counts)
	}
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		for i := range rel.Tables {
			rel.Tables[i].Counts = slices.Clone(estimates[i])
		}
		b.StartTimer()
		if err := rel.RoundIntegers(ctx, noise.NewSeeded(2)); err != nil {
			b.Fatal(err)
		}
	}
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
			var p *ViewPlan
			for b.Loop() {
				var err error
				if p, err = PlanViews(s, spec); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(p.p.cert.Gap, "gap")
		})
	}
}
