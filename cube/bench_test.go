package cube

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/knowdp/knowdp/internal/tensor"
	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/noise"
)

// BenchmarkMemoryFloor is the floor BenchmarkConsistent is compared with:
// one read pass (a sum) and one read-write pass (adding a constant) over
// the same arrays, split over GOMAXPROCS goroutines. Two-pass consistency
// cannot be faster than this.
func BenchmarkMemoryFloor(b *testing.B) {
	for _, sh := range testkit.BenchShapes {
		n := 1
		for range sh.Dims {
			n *= 10
		}
		x := make([]float64, n)
		for i := range x {
			x[i] = float64(i % 4)
		}
		b.Run("cells="+sh.Name, func(b *testing.B) {
			b.SetBytes(int64(8 * len(x)))
			workers := runtime.GOMAXPROCS(0)
			sums := make([]float64, workers)
			for b.Loop() {
				var wg sync.WaitGroup
				for w := range workers {
					wg.Go(func() { sums[w] = tensor.Sum(x[w*n/workers : (w+1)*n/workers]) })
				}
				wg.Wait()
				for w := range workers {
					wg.Go(func() {
						part := x[w*n/workers : (w+1)*n/workers]
						v := sums[w] * 1e-300
						for i := range part {
							part[i] += v
						}
					})
				}
				wg.Wait()
			}
			b.ReportMetric(float64(len(x))*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mcells/s")
		})
	}
}

// BenchmarkFromCSV measures building a cube from a fact table: rows/s and
// MB/s of CSV.
func BenchmarkFromCSV(b *testing.B) {
	const rows = 500_000
	s := testkit.TestSchema(b, 6, 2, 5, 2, 2, 2, 7)
	path := filepath.Join(b.TempDir(), "facts.csv")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "d0,d1,d2,d3,d4,d5,d6,extra")
	r := noise.NewSeeded(2)
	for range rows {
		for i := range 7 {
			fmt.Fprintf(w, "v%d,", r.Uint64N(uint64(s.Size(i))))
		}
		fmt.Fprintln(w, r.Uint64N(1000))
	}
	w.Flush()
	f.Close()
	st, _ := os.Stat(path)
	b.SetBytes(st.Size())
	for b.Loop() {
		if _, err := FromCSV(context.Background(), path, s, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mrows/s")
}
