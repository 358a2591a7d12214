package pipeline

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
)

// BenchmarkCountRandomOrder measures the counting stage alone (countFn
// on one file, no runner) on rows in random order, into cuboids of 39 and
// of 1,024 blocks: the cost per row should not depend on the order of the
// rows or on the number of blocks. (Dense per-block counters, at most 32
// held, made 39 blocks of unsorted rows 10-30 times slower than sorted.)
//
//	go test ./release -run '^$' -bench CountRandomOrder -benchtime 3x
func BenchmarkCountRandomOrder(b *testing.B) {
	const rows = 1_000_000
	for _, tc := range []struct {
		name   string
		sizes  []int // the cuboid's dimensions; cells = their product
		sorted bool  // rows in cell order instead of random order
	}{
		{"4blocks-random", []int{4, 512, 512}, false},       // 1,048,576 cells: counted in an array
		{"39blocks-random", []int{39, 512, 512}, false},     // 10,223,616 cells
		{"39blocks-sorted", []int{39, 512, 512}, true},      // the same, sorted
		{"1024blocks-random", []int{1024, 512, 512}, false}, // 268,435,456 cells
	} {
		b.Run(tc.name, func(b *testing.B) {
			var dims []domain.Dimension
			for d, n := range tc.sizes {
				vals := make([]string, n)
				for j := range vals {
					vals[j] = strconv.Itoa(j)
				}
				dims = append(dims, domain.Dimension{Name: fmt.Sprintf("d%d", d), Values: vals})
			}
			s, err := domain.NewSchema(dims)
			if err != nil {
				b.Fatal(err)
			}
			path := filepath.Join(b.TempDir(), "rows.csv")
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			w := bufio.NewWriter(f)
			fmt.Fprintln(w, "d0,d1,d2")
			r := noise.NewSeeded(1)
			recs := make([][3]uint64, rows)
			for i := range recs {
				recs[i] = [3]uint64{r.Uint64N(uint64(tc.sizes[0])), r.Uint64N(uint64(tc.sizes[1])), r.Uint64N(uint64(tc.sizes[2]))}
			}
			if tc.sorted {
				slices.SortFunc(recs, func(a, b [3]uint64) int { return slices.Compare(a[:], b[:]) })
			}
			for _, x := range recs {
				fmt.Fprintf(w, "%d,%d,%d\n", x[0], x[1], x[2])
			}
			w.Flush()
			f.Close()
			sj, _ := schemaJSON(s)
			fn := &countFn{Cfg: Config{Schema: sj, Cuboid: uint64(domain.Base(3)), Counted: []uint64{uint64(domain.Base(3))}}}
			if err := fn.Setup(); err != nil {
				b.Fatal(err)
			}
			var emitted int64
			for b.Loop() {
				if err := fn.process(context.Background(), path, func(_ int64, p []byte) { emitted += int64(len(p)) }); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mrows/s")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/rows, "ns/row")
			b.ReportMetric(float64(emitted)/float64(b.N)/rows, "emitted-B/row")
		})
	}
}

// TestCellCounts counts cells in random order, with repeats, flushed
// part-way, and checks that the sparse partial counts add up to a direct
// count in every block.
func TestCellCounts(t *testing.T) {
	for _, tc := range []struct{ cells, adds, flushAt int }{
		{10, 100, 0},
		{3 * BlockSize, 200_000, 0},
		{40 * BlockSize, 300_000, 150_000},
	} {
		r := noise.NewSeeded(uint64(tc.cells))
		want := make([]float64, tc.cells)
		got := make([]float64, tc.cells)
		c := newCellCounts()
		emit := func(b int, p []byte) {
			lo := b * BlockSize
			if err := addSparse(got[lo:min(lo+BlockSize, tc.cells)], p); err != nil {
				t.Fatal(err)
			}
		}
		for i := range tc.adds {
			if i == tc.flushAt && i > 0 {
				c.emit(emit)
				c.reset()
			}
			cell, w := int(r.Uint64N(uint64(tc.cells))), r.Uint64N(5)+1
			c.add(cell, w)
			want[cell] += float64(w)
		}
		c.emit(emit)
		if !slices.Equal(got, want) {
			t.Errorf("%d cells, %d adds: partial counts differ from a direct count", tc.cells, tc.adds)
		}
	}
}
