package pipeline

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
)

// workloadSourceConfig plans a workload over a 1024 x 512 schema, tables
// {d0,d1} (2^19 cells, 2 blocks) and {d0}, measured as requested with
// Laplace noise, and returns its Config and the index of the source that
// is the measurement of {d0,d1}.
func workloadSourceConfig(t *testing.T) (Config, int) {
	t.Helper()
	s := numberedSchema(t, 1024, 512)
	pl, err := NewPlan(Spec{Files: []string{"unread.csv"}, Schema: s, Out: "unused",
		Job: Job{Cuboids: []string{"d0,d1", "d0"}, Epsilon: 1, Strategy: "requested"}, Seeded: true})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Mode() != ModeWorkload {
		t.Fatalf("mode %d, want ModeWorkload", pl.Mode())
	}
	cfg := pl.cfg
	for i, c := range cfg.Counted {
		if c == 0b11 && cfg.Noise[i].Measured {
			if !cfg.Local[i] {
				t.Fatal("the table {d0,d1} is not its own measurement's block")
			}
			return cfg, i
		}
	}
	t.Fatalf("no measurement of {d0,d1} among the sources %v", cfg.Counted)
	return cfg, 0
}

// noisySource runs the noise stage of a workload (sourceFn) on block 1 of
// source i, whose counts are cnt, and returns the noisy block (kept in the
// scratch directory, as the table {d0,d1} is the source itself) and the
// marginals emitted, by pair.
func noisySource(t *testing.T, cfg Config, i int, seed uint64, cnt []uint64) ([]float64, map[int]margAcc) {
	t.Helper()
	cfg.Seed, cfg.Scratch = seed, t.TempDir()
	f := &sourceFn{Cfg: cfg}
	if err := f.Setup(); err != nil {
		t.Fatal(err)
	}
	parts := [][]byte{nil, encodeSparse(cnt)}
	iter := func(p *[]byte) bool {
		if len(parts) == 0 {
			return false
		}
		*p, parts = parts[0], parts[1:]
		return true
	}
	margs := map[int]margAcc{}
	err := f.process(context.Background(), f.st.key(i, 1), iter, func(k int, v []byte) {
		if _, dup := margs[k]; dup || cfg.Pairs[k].Source != i {
			t.Fatalf("marginal %d (%+v) emitted for source %d", k, cfg.Pairs[k], i)
		}
		acc, err := margCombine{}.AddInput(margAcc{}, v)
		if err != nil {
			t.Fatal(err)
		}
		margs[k] = acc
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(cfg.Scratch, sourceFile(i, 1)))
	if err != nil {
		t.Fatal(err)
	}
	x, err := decodeFloats(b)
	if err != nil || len(x) != BlockSize {
		t.Fatalf("noisy block of %d cells: %v", len(x), err)
	}
	return x, margs
}

func constCounts(c uint64) []uint64 {
	cnt := make([]uint64, BlockSize)
	for i := range cnt {
		cnt[i] = c
	}
	return cnt
}

// TestSourceStageNeighbours checks the noise stage of a workload release
// against its guarantee. Each cell's noise is drawn independently, so a
// block whose 2^18 cells all hold 0 and one whose cells all hold 1 give
// 2^18 samples each of one cell's output on neighbouring inputs (counts
// differing by one, the measurement's sensitivity): in every bin with
// enough mass the two frequencies may differ by at most a factor
// e^(share/sensitivity) <= e^eps, up to five standard errors of the
// estimates, and next to the input the factor must be nearly met (a wrong
// scale would fail it). The same seed on blocks differing in one cell
// gives the same noise, so the outputs differ in that cell alone, by one.
// The marginals emitted are the sums of the noisy block.
func TestSourceStageNeighbours(t *testing.T) {
	cfg, i := workloadSourceConfig(t)
	m := cfg.Noise[i].Measurement
	if m.Sensitivity != 1 || !(m.Share > 0 && m.Share <= 1) {
		t.Fatalf("measurement %+v: want sensitivity 1 and a share of eps = 1", m)
	}
	x0, margs := noisySource(t, cfg, i, 11, constCounts(0))
	x1, _ := noisySource(t, cfg, i, 12, constCounts(1))

	// The noise has the measurement's distribution, and the outputs on
	// neighbouring inputs are within e^eps of each other.
	lap, err := noise.NewLaplace(float64(m.Sensitivity), m.Share)
	if err != nil {
		t.Fatal(err)
	}
	checkNeighbours(t, x0, x1, lap, m.Share/float64(m.Sensitivity))

	// Neighbouring blocks under the same seed: one cell apart, by one.
	one := constCounts(0)
	one[777] = 1
	y, _ := noisySource(t, cfg, i, 11, one)
	for j := range y {
		d := y[j] - x0[j]
		if (j == 777 && d != 1) || (j != 777 && d != 0) {
			t.Fatalf("cell %d: %v with the count of cell 777 raised, %v without", j, y[j], x0[j])
		}
	}

	// Every marginal emitted is the sum of the noisy block on its margin
	// (block 1 is rows 512..1023 of d0).
	var wantPairs int
	for _, p := range cfg.Pairs {
		if p.Source == i {
			wantPairs++
		}
	}
	if len(margs) == 0 || len(margs) != wantPairs {
		t.Fatalf("%d marginals emitted, want %d (one per pair of the source)", len(margs), wantPairs)
	}
	for k, acc := range margs {
		margin := domain.Cuboid(cfg.Pairs[k].Margin)
		sums := map[int]float64{}
		for j, z := range x0 {
			cell := BlockSize + j
			d0, d1 := cell/512, cell%512
			key := 0
			switch margin {
			case 0b11:
				key = cell
			case 0b01:
				key = d0
			case 0b10:
				key = d1
			}
			sums[key] += z
		}
		if len(acc.Noisy) != len(sums) || len(acc.Exact) != 0 {
			t.Fatalf("margin %b: %d cells from %d (exact %v), want %d", margin, len(acc.Noisy), acc.Lo, len(acc.Exact) != 0, len(sums))
		}
		for j, got := range acc.Noisy {
			want, ok := sums[acc.Lo+j]
			if !ok || math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
				t.Fatalf("margin %b cell %d: %v, want %v", margin, acc.Lo+j, got, want)
			}
		}
	}
}
