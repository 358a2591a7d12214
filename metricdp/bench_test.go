package metricdp

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"testing"

	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/source"
)

// placesMetric is the Euclidean metric on (longitude, latitude) of the 842
// US places of data/us-places.csv, as in the paper's Section 4.3.
func placesMetric(b *testing.B) *Euclidean {
	b.Helper()
	c, err := source.OpenCSV("../data/us-places.csv")
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	lat, _ := c.Column("lat")
	lon, _ := c.Column("lon")
	var pts [][]float64
	for {
		rec, err := c.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		x, err1 := strconv.ParseFloat(rec[lon], 64)
		y, err2 := strconv.ParseFloat(rec[lat], 64)
		if err1 != nil || err2 != nil {
			b.Fatal(c.Errorf(lon, "bad coordinates"))
		}
		pts = append(pts, []float64{x, y})
	}
	m, err := NewEuclidean(pts, 1)
	if err != nil {
		b.Fatal(err)
	}
	if m.Len() != 842 {
		b.Fatalf("%d places, want 842", m.Len())
	}
	return m
}

func BenchmarkScale(b *testing.B) {
	r := noise.NewSeeded(1)
	big, err := NewEuclidean(randomGridPoints(r, 10000, 1000), 1)
	if err != nil {
		b.Fatal(err)
	}
	for _, m := range []Metric{placesMetric(b), big} {
		n := m.Len()
		q := randomQueries(b, r, 1, n, false).Row(0)
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Scale(bg, m, q); err != nil {
					b.Fatal(err)
				}
			}
			pairs := float64(n) * float64(n-1) / 2
			b.ReportMetric(pairs*float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
		})
	}
}

func BenchmarkAllocate(b *testing.B) {
	m := placesMetric(b)
	r := noise.NewSeeded(2)
	q := randomQueries(b, r, 20, m.Len(), false)
	for _, s := range []Strategy{EqualShare, SameScale, Greedy, Optimal} {
		b.Run(fmt.Sprintf("N=842/k=20/%v", s), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Allocate(bg, m, q, s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkLaplaceRelease(b *testing.B) {
	m := placesMetric(b)
	r := noise.NewSeeded(3)
	q := randomQueries(b, r, 20, m.Len(), false)
	x := make([]int64, m.Len())
	var n int64
	for i := range x {
		x[i] = int64(r.Uint64N(1000))
		n += x[i]
	}
	lm, err := NewLaplace(bg, m, q, Optimal, n)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := lm.Release(r, x); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(20*float64(b.N)/b.Elapsed().Seconds(), "answers/s")
}
