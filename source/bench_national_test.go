package source

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
)

// nationalPerson is one row of the national benchmark's fact table.
type nationalPerson struct {
	Geo string `parquet:"geo,dict"`
	Sex string `parquet:"sex,dict"`
	Age string `parquet:"age,dict"`
}

// nationalFiles writes n persons over 10^5 tracts x sex x 18 age bands (the
// leaves of BenchmarkNationalHierarchy; tracts uniform, rows in random
// order) to a CSV and a Parquet file of 10^6-row groups, once per process.
var nationalFiles = sync.OnceValues(func() (*domain.Schema, [2]string) {
	n := 1_000_000
	if v := os.Getenv("KNOWDP_BENCH_PERSONS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	tracts := make([]string, 100_000)
	for i := range tracts {
		tracts[i] = "t" + strconv.Itoa(i)
	}
	ages := make([]string, 18)
	for i := range ages {
		ages[i] = fmt.Sprintf("%d-%d", 5*i, 5*i+4)
	}
	s, err := domain.NewSchema([]domain.Dimension{{Name: "geo", Values: tracts}, {Name: "sex", Values: []string{"F", "M"}}, {Name: "age", Values: ages}})
	if err != nil {
		panic(err)
	}
	dir, err := os.MkdirTemp("", "knowdp-bench-national")
	if err != nil {
		panic(err)
	}
	paths := [2]string{filepath.Join(dir, "persons.csv"), filepath.Join(dir, "persons.parquet")}
	cf, err := os.Create(paths[0])
	if err != nil {
		panic(err)
	}
	pf, err := os.Create(paths[1])
	if err != nil {
		panic(err)
	}
	cw := bufio.NewWriterSize(cf, 1<<20)
	cw.WriteString("geo,sex,age\n")
	pw := parquet.NewGenericWriter[nationalPerson](pf, parquet.MaxRowsPerRowGroup(1_000_000))
	r := noise.NewSeeded(2020)
	batch := make([]nationalPerson, 0, 4096)
	for i := range n {
		p := nationalPerson{Geo: tracts[r.Uint64N(uint64(len(tracts)))], Sex: []string{"F", "M"}[r.Uint64N(2)], Age: ages[r.Uint64N(18)]}
		fmt.Fprintf(cw, "%s,%s,%s\n", p.Geo, p.Sex, p.Age)
		if batch = append(batch, p); len(batch) == cap(batch) || i == n-1 {
			if _, err := pw.Write(batch); err != nil {
				panic(err)
			}
			batch = batch[:0]
		}
	}
	if err := cw.Flush(); err != nil {
		panic(err)
	}
	if err := pw.Close(); err != nil {
		panic(err)
	}
	cf.Close()
	pf.Close()
	return s, paths
})

// BenchmarkReadNational counts the persons of the national benchmark (10^5
// tracts x sex x 18 ages) from CSV and from Parquet into the four tables
// BenchmarkNationalHierarchy reads ({geo,sex,age}, {geo,sex}, {geo}, the
// total), on GOMAXPROCS cores. KNOWDP_BENCH_PERSONS sets the rows (default
// 10^6; the documented figures use 10^7):
//
//	KNOWDP_BENCH_PERSONS=10000000 go test ./source -run '^$' -bench BenchmarkReadNational -benchtime 5x
func BenchmarkReadNational(b *testing.B) {
	s, paths := nationalFiles()
	cuboids := []domain.Cuboid{7, 3, 1, 0}
	for k, name := range []string{"csv", "parquet"} {
		b.Run(name, func(b *testing.B) {
			st, err := os.Stat(paths[k])
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(st.Size())
			var rows int64
			cpu0 := cpuSeconds()
			for b.Loop() {
				t, err := Open(context.Background(), Spec{Path: paths[k]})
				if err != nil {
					b.Fatal(err)
				}
				_, rows, err = cube.Aggregate(context.Background(), t, s, cuboids, cube.Options{})
				t.Close()
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*1e7/float64(rows), "s/1e7rows")
			// CPU time (all cores), which other jobs on a shared machine
			// disturb less than the wall clock.
			b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N)*1e7/float64(rows), "cpu-s/1e7rows")
		})
	}
}

// cpuSeconds returns the process's user and system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
