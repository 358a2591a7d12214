package server

import (
	"sync"
	"testing"

	"github.com/knowdp/knowdp/noise"
)

// A cached sampler is shared by concurrent queries (run with -race) and
// draws what a fresh one draws from the same generator.
func TestSamplerCache(t *testing.T) {
	var c samplerCache
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				dl, err := c.get(float64(1 + i%7))
				if err != nil {
					t.Error(err)
					return
				}
				fresh, _ := noise.NewDiscreteLaplace(float64(1 + i%7))
				r1, r2 := noise.NewSeeded(uint64(g*100+i)), noise.NewSeeded(uint64(g*100+i))
				for range 20 {
					if a, b := dl.Sample(r1), fresh.Sample(r2); a != b {
						t.Errorf("scale %d: cached sampler drew %d, a fresh one %d", 1+i%7, a, b)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if len(c.m) != 7 {
		t.Errorf("%d samplers cached, want 7", len(c.m))
	}
	for i := range maxCachedSamplers + 1 {
		if _, err := c.get(100 + float64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.m) > maxCachedSamplers {
		t.Errorf("cache grew to %d", len(c.m))
	}
	if _, err := c.get(0); err == nil {
		t.Error("scale 0 accepted")
	}
}
