package pipeline

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/privacy"
)

// TestOneCPU (issue 24): an 18-block release at GOMAXPROCS=1 finishes in
// seconds. While the noisy blocks went through the runner as 2 MiB
// elements, Prism at GOMAXPROCS=1 took 281 s (and over 300 s with 110
// CPU-seconds here) for what took 6.6 s at 2; the blocks now go through
// files of the output's temporary directory and only their keys through
// the runner.
func TestOneCPU(t *testing.T) {
	dir := t.TempDir()
	tb := writeTable(t, dir, []int{18, 512, 512}, 20_000, 2, 3)
	eps, _ := privacy.NewEpsilon(1)
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	start := time.Now()
	_, err := Run(ctx, seeded(cuboidSpec(tb, domain.Base(3), []domain.Cuboid{1}, eps, filepath.Join(dir, "r.csv")), 2))
	if err != nil {
		t.Fatalf("after %v: %v", time.Since(start), err)
	}
	t.Logf("18 blocks at GOMAXPROCS=1: %v", time.Since(start))
}
