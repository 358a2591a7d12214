package source

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"testing"

	"github.com/knowdp/knowdp/noise"
)

// benchCSV is 200,000 rows of eight short fields, one in ten quoted.
func benchCSV() []byte {
	var b bytes.Buffer
	b.WriteString("d0,d1,d2,d3,d4,d5,d6,extra\n")
	r := noise.NewSeeded(1)
	for i := range 200_000 {
		for j := range 7 {
			if i%10 == 0 && j == 3 {
				fmt.Fprintf(&b, "\"v%d\",", r.Uint64N(10))
				continue
			}
			fmt.Fprintf(&b, "v%d,", r.Uint64N(10))
		}
		fmt.Fprintf(&b, "%d\n", r.Uint64N(1000))
	}
	return b.Bytes()
}

// BenchmarkReadCSV splits the records of a CSV file into fields: the fast
// reader (NextRecord, as cube.Build reads) against encoding/csv with
// ReuseRecord, on the same bytes.
func BenchmarkReadCSV(b *testing.B) {
	data := benchCSV()
	cols := []string{"d0", "d1", "d2", "d3", "d4", "d5", "d6"}
	b.Run("knowdp", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			c, err := NewCSV("bench.csv", bytes.NewReader(data))
			if err != nil {
				b.Fatal(err)
			}
			if err := c.Select(context.Background(), cols); err != nil {
				b.Fatal(err)
			}
			for {
				if _, _, err := c.NextRecord(); err == io.EOF {
					break
				} else if err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("encoding-csv", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			r := csv.NewReader(bytes.NewReader(data))
			r.ReuseRecord = true
			for {
				if _, err := r.Read(); err == io.EOF {
					break
				} else if err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
