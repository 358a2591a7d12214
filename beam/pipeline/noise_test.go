package pipeline

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
)

// noisyBlock runs the noise stage on block 1 of a 1024 x 512 cuboid whose
// cells all hold count, and returns the noisy cells and the marginals it
// emits on the first dimension.
func noisyBlock(t *testing.T, count uint64, seed uint64) (x []float64, lo int, noisyM, exactM []float64) {
	t.Helper()
	s := numberedSchema(t, 1024, 512)
	sj, _ := schemaJSON(s)
	dir := t.TempDir()
	f := &noiseFn{Cfg: Config{Schema: sj, Cuboid: 3, Keeps: []uint64{1}, Sensitivity: 1, Epsilon: 1, Seeded: true, Seed: seed, Scratch: dir, Counted: []uint64{3}}}
	if err := f.Setup(); err != nil {
		t.Fatal(err)
	}
	cnt := make([]uint64, BlockSize)
	for i := range cnt {
		cnt[i] = count
	}
	parts := [][]byte{nil, encodeSparse(cnt)}
	iter := func(p *[]byte) bool {
		if len(parts) == 0 {
			return false
		}
		*p, parts = parts[0], parts[1:]
		return true
	}
	var margs [][]byte
	err := f.ProcessElement(context.Background(), 1, iter,
		func(b int64, v []byte) {
			if b != 1 {
				t.Fatalf("noisy block emitted as block %d", b)
			}
			// The noisy block is in its file; the element is the key alone.
			b2, err := os.ReadFile(filepath.Join(dir, noisyFile(b)))
			if err != nil || len(v) != 0 {
				t.Fatalf("noisy block file: %v; element of %d bytes", err, len(v))
			}
			x, _ = decodeFloats(b2)
		},
		func(i int, v []byte) {
			if i != 0 {
				t.Fatalf("marginal emitted for invariant %d", i)
			}
			margs = append(margs, v)
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(x) != BlockSize || len(margs) != 1 {
		t.Fatalf("%d cells and %d marginals emitted", len(x), len(margs))
	}
	acc, err := margCombine{}.AddInput(margAcc{}, margs[0])
	if err != nil {
		t.Fatal(err)
	}
	return x, acc.Lo, acc.Noisy, acc.Exact
}

// TestNoiseStageNeighbours checks the noise of one block (drawn from a split
// generator, block 1 of 2) against the guarantee: with sensitivity 1 and
// eps = 1, every cell's output distribution for count 0 and for count 1
// differ by at most a factor e in every bin, and the noise has the
// mechanism's variance. 2^18 cells give 2^18 independent samples per input.
func TestNoiseStageNeighbours(t *testing.T) {
	x0, lo, noisyM, exactM := noisyBlock(t, 0, 11)
	x1, _, _, _ := noisyBlock(t, 1, 12)
	// The marginals on d0: block 1 is rows 512..1023 of d0, 512 cells each.
	if lo != 512 || len(exactM) != 512 {
		t.Fatalf("marginal over d0 cells [%d, %d), want [512, 1024)", lo, lo+len(exactM))
	}
	for j := range noisyM {
		var sum float64
		for _, v := range x0[j*512 : (j+1)*512] {
			sum += v
		}
		if exactM[j] != 0 || math.Abs(noisyM[j]-sum) > 1e-9*math.Max(1, math.Abs(sum)) {
			t.Fatalf("d0=%d: marginals exact %v noisy %v, want 0 and %v", lo+j, exactM[j], noisyM[j], sum)
		}
	}
	lap, err := noise.NewLaplace(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	checkNeighbours(t, x0, x1, lap, 1)
}

// checkNeighbours checks samples x0 and x1 of one cell's output on the
// neighbouring counts 0 and 1 under Laplace noise lap of privacy loss eps:
// their mean and variance are lap's, every bin of width 1 with enough mass
// has frequencies within a factor e^eps of each other (five standard
// errors of each frequency carried through the bound), and in bin [1, 2),
// above both inputs, the ratio is nearly e^eps itself, so that a wrong
// scale cannot pass.
func checkNeighbours(t *testing.T, x0, x1 []float64, lap noise.Laplace, eps float64) {
	t.Helper()
	n := float64(len(x0))
	var mean, v float64
	for _, z := range x0 {
		mean += z
		v += z * z
	}
	mean /= n
	v = v/n - mean*mean
	// Laplace noise has kurtosis 6: the sample variance has standard error
	// sqrt(5/n) times the variance.
	if want := lap.Variance(); math.Abs(v-want) > 5*math.Sqrt(5/n)*want || math.Abs(mean) > 5*math.Sqrt(want/n) {
		t.Fatalf("noise mean %v variance %v, want 0 and %v", mean, v, want)
	}
	hist := func(x []float64) map[int]float64 {
		h := map[int]float64{}
		for _, z := range x {
			h[int(math.Floor(z))]++
		}
		return h
	}
	h0, h1 := hist(x0), hist(x1)
	bound := math.Exp(eps)
	checked := 0
	for b := -10; b <= 10; b++ {
		if h0[b] < 1000 || h1[b] < 1000 { // too little mass to tell
			continue
		}
		checked++
		p0, p1 := h0[b]/n, h1[b]/n
		if p0 > bound*p1+5*(math.Sqrt(p0/n)+bound*math.Sqrt(p1/n)) || p1 > bound*p0+5*(math.Sqrt(p1/n)+bound*math.Sqrt(p0/n)) {
			t.Errorf("bin [%d, %d): P(count 0) = %.5f, P(count 1) = %.5f: ratio beyond e^%.4g", b, b+1, p0, p1, eps)
		}
	}
	if checked < 6 {
		t.Fatalf("only %d bins with enough mass", checked)
	}
	// With 2^18 samples and eps near 1 about 12% of count 0's samples
	// fall in [1, 2): the ratio's standard error is under 1%, and 10% is
	// over ten of them.
	if r := h1[1] / h0[1]; r < bound/1.1 || r > bound*1.1 {
		t.Errorf("P(bin [1,2) | count 1) / P(bin [1,2) | count 0) = %v, want about %v", r, bound)
	}
}

func TestSparseRoundTrip(t *testing.T) {
	cnt := []uint64{0, 3, 0, 0, 1 << 40, 0, 1}
	b := encodeSparse(cnt)
	x := make([]float64, len(cnt))
	if err := addSparse(x, b); err != nil {
		t.Fatal(err)
	}
	if err := addSparse(x, b); err != nil {
		t.Fatal(err)
	}
	for i, c := range cnt {
		if x[i] != 2*float64(c) {
			t.Fatalf("cell %d: %v, want %v", i, x[i], 2*float64(c))
		}
	}
	if err := addSparse(x[:4], b); err == nil {
		t.Fatal("an offset beyond the block was accepted")
	}
}

// numberedSchema is a schema of dimensions d0, d1, ... with the given
// sizes, whose values are 0, 1, ...
func numberedSchema(t *testing.T, sizes ...int) *domain.Schema {
	t.Helper()
	dims := make([]domain.Dimension, len(sizes))
	for i, n := range sizes {
		dims[i].Name = fmt.Sprintf("d%d", i)
		for j := range n {
			dims[i].Values = append(dims[i].Values, fmt.Sprint(j))
		}
	}
	s, err := domain.NewSchema(dims)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
