package refine

import (
	"math"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/noise"
)

// randomForest draws parent links for n nodes in which every internal node
// has at least two children.
func randomForest(r *noise.Rand, n int) []int {
	for {
		parent := make([]int, n)
		count := make([]int, n)
		for i := range parent {
			parent[i] = -1
			if i > 0 && r.Uint64N(5) != 0 {
				parent[i] = int(r.Uint64N(uint64(i))) // earlier node: no cycles
				count[parent[i]]++
			}
		}
		ok := true
		for _, c := range count {
			ok = ok && c != 1
		}
		if ok {
			// Shuffle the numbering so that parents do not always come first.
			perm := make([]int, n)
			for i := range perm {
				perm[i] = i
			}
			for i := n - 1; i > 0; i-- {
				j := int(r.Uint64N(uint64(i + 1)))
				perm[i], perm[j] = perm[j], perm[i]
			}
			out := make([]int, n)
			for i, p := range parent {
				if p < 0 {
					out[perm[i]] = -1
				} else {
					out[perm[i]] = perm[p]
				}
			}
			return out
		}
	}
}

func TestHierarchyMatchesDenseLeastSquares(t *testing.T) {
	r := noise.NewSeeded(5)
	for trial := range 300 {
		n := 3 + int(r.Uint64N(30))
		h, err := NewHierarchy(randomForest(r, n))
		if err != nil {
			t.Fatal(err)
		}
		eqs := h.Equalities()
		if len(eqs) == 0 {
			continue
		}
		y := randVec(r, n, -20, 20)
		got := make([]float64, n)
		if err := h.Refine(got, y); err != nil {
			t.Fatal(err)
		}
		want := denseLS(t, y, eqs)
		if d := maxAbsDiff(got, want); d > 1e-9 {
			t.Fatalf("trial %d: tree refinement differs from the dense solve by %g", trial, d)
		}
		// Through Equalities (detected as a hierarchy) and, forced, by QR.
		e, err := NewEqualities(n, eqs)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range e.comps {
			if len(c.cons) > 1 && c.tree == nil {
				t.Fatalf("trial %d: a hierarchy component was not detected", trial)
			}
		}
		viaEq := make([]float64, n)
		if err := e.Refine(viaEq, y); err != nil {
			t.Fatal(err)
		}
		if d := maxAbsDiff(viaEq, want); d > 1e-9 {
			t.Fatalf("trial %d: Equalities differs from the dense solve by %g", trial, d)
		}
		cols := make([][]float64, len(eqs))
		for k, eq := range eqs {
			cols[k] = make([]float64, n)
			for j, i := range eq.Index {
				cols[k][i] = eq.Coef[j]
			}
		}
		qr, err := factor(cols)
		if err != nil {
			t.Fatal(err)
		}
		viaQR := append([]float64(nil), y...)
		qr.project(viaQR, make([]float64, len(eqs)))
		if d := maxAbsDiff(viaQR, want); d > 1e-9 {
			t.Fatalf("trial %d: QR differs from the dense solve by %g", trial, d)
		}
	}
}

// hayRefine is Hay et al.'s (2010) formula for a complete b-ary tree in
// level order with `levels` levels, written out independently:
// bottom-up z[v] = (b^i − b^(i−1))/(b^i − 1) x[v] + (b^(i−1) − 1)/(b^i − 1)
// Σ z[children] at height i (leaves have height 1), then top-down
// h[v] = z[v] + (h[parent] − Σ z[siblings and v]) / b.
func hayRefine(x []float64, b, levels int) []float64 {
	n := len(x)
	z := make([]float64, n)
	height := func(v int) int {
		// Level of v (root 0), height = levels − level.
		lvl, first, width := 0, 0, 1
		for v >= first+width {
			first += width
			width *= b
			lvl++
		}
		return levels - lvl
	}
	for v := n - 1; v >= 0; v-- {
		i := height(v)
		if i == 1 {
			z[v] = x[v]
			continue
		}
		bi, bi1 := math.Pow(float64(b), float64(i)), math.Pow(float64(b), float64(i-1))
		var s float64
		for c := b*v + 1; c <= b*v+b; c++ {
			s += z[c]
		}
		z[v] = (bi-bi1)/(bi-1)*x[v] + (bi1-1)/(bi-1)*s
	}
	h := make([]float64, n)
	h[0] = z[0]
	for v := 1; v < n; v++ {
		p := (v - 1) / b
		var s float64
		for c := b*p + 1; c <= b*p+b; c++ {
			s += z[c]
		}
		h[v] = z[v] + (h[p]-s)/float64(b)
	}
	return h
}

func TestCompleteTreeIsHayEtAl(t *testing.T) {
	r := noise.NewSeeded(9)
	for _, tc := range []struct{ b, levels int }{{2, 1}, {2, 2}, {2, 5}, {3, 4}, {4, 3}, {16, 2}} {
		h, err := CompleteTree(tc.b, tc.levels)
		if err != nil {
			t.Fatal(err)
		}
		x := randVec(r, h.Len(), -100, 100)
		got := make([]float64, h.Len())
		if err := h.Refine(got, x); err != nil {
			t.Fatal(err)
		}
		if d := maxAbsDiff(got, hayRefine(x, tc.b, tc.levels)); d > 1e-9 {
			t.Errorf("b=%d levels=%d: differs from Hay et al.'s formula by %g", tc.b, tc.levels, d)
		}
	}
}

func TestHierarchyRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name   string
		parent []int
		want   string
	}{
		{"empty", nil, "no nodes"},
		{"out of range", []int{-1, 5, 0}, "parent[1] = 5 is not a node"},
		{"self parent", []int{-1, 1, 0}, "node 1 is its own parent"},
		{"single child", []int{-1, 0}, "node 0 has a single child"},
		{"cycle", []int{1, 2, 0, 0, 1, 2}, "no root"},
		{"cycle beside a tree", []int{-1, 0, 0, 4, 5, 3, 3, 4, 5}, "6 nodes are not reachable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewHierarchy(tc.parent); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	for _, tc := range []struct{ b, levels int }{{1, 3}, {2, 0}, {2, 40}} {
		if _, err := CompleteTree(tc.b, tc.levels); err == nil {
			t.Errorf("CompleteTree(%d, %d) accepted", tc.b, tc.levels)
		}
	}
	h, _ := CompleteTree(2, 2)
	if err := h.Refine(make([]float64, 3), []float64{1, math.NaN(), 2}); err == nil || !strings.Contains(err.Error(), "NaN") {
		t.Errorf("NaN answer: %v", err)
	}
}
