package hier

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// markedForm is an independent canonical form of the tree with one node
// marked: the sorted nested strings of the AHU test, built top-down from
// the root, with the marked node's string tagged. Two nodes of a level
// have the same form exactly when an automorphism maps one onto the other.
func markedForm(h *Hierarchy, level, node int) string {
	var form func(k, i int) string
	form = func(k, i int) string {
		var kids []string
		if k > 0 {
			for c := range h.Nodes(k - 1) {
				if h.Parent(k-1, c) == i {
					kids = append(kids, form(k-1, c))
				}
			}
		}
		slices.Sort(kids)
		mark := ""
		if k == level && i == node {
			mark = "*"
		}
		return mark + "(" + strings.Join(kids, "") + ")"
	}
	return form(h.RootLevel(), 0)
}

// symmetricHierarchy returns a hierarchy with many repeated shapes: groups
// of 1 to 3 children.
func symmetricHierarchy(t *testing.T, rng *rand.Rand, levels int) *Hierarchy {
	sizes := []int{1}
	var parents [][]int32
	for range levels - 1 {
		n := sizes[0]
		var par []int32
		for g := range n {
			for range 1 + rng.IntN(3) {
				par = append(par, int32(g))
			}
		}
		rng.Shuffle(len(par), func(i, j int) { par[i], par[j] = par[j], par[i] })
		sizes = append([]int{len(par)}, sizes...)
		parents = append([][]int32{par}, parents...)
	}
	// The coarsest given level is the one node under the root.
	h, err := NewHierarchy(sizes, parents)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestClassesAreOrbits checks the classes against the marked canonical
// forms: two nodes share a class exactly when their forms agree, and a
// class's representative is its lowest-numbered node.
func TestClassesAreOrbits(t *testing.T) {
	shared, split := false, false
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 31))
		h := symmetricHierarchy(t, rng, 5)
		for k := range h.Levels() {
			class, reps := h.Classes(k)
			forms := map[string]int32{}
			for i := range h.Nodes(k) {
				f := markedForm(h, k, i)
				c, ok := forms[f]
				if !ok {
					forms[f] = class[i]
					if reps[class[i]] != i {
						t.Fatalf("seed %d level %d: class %d first seen at node %d, representative %d", seed, k, class[i], i, reps[class[i]])
					}
					continue
				}
				if c != class[i] {
					t.Fatalf("seed %d level %d: node %d has the form of class %d, but class %d", seed, k, i, c, class[i])
				}
			}
			if len(forms) != len(reps) {
				t.Fatalf("seed %d level %d: %d orbits, %d classes", seed, k, len(forms), len(reps))
			}
			shared = shared || len(reps) < h.Nodes(k)
			split = split || len(reps) > 1
		}
	}
	if !shared || !split {
		t.Fatalf("the hierarchies test nothing: classes shared %v, levels with several classes %v", shared, split)
	}
}

// TestTableLawsMatchNodeLaws checks that the law of a class, computed once,
// is the law of each of its nodes computed on its own, in full, bounded
// and as a variance, and that it does not depend on the number of workers.
func TestTableLawsMatchNodeLaws(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	h := symmetricHierarchy(t, rng, 5)
	p := Problem{Hierarchy: h, FlatSizes: []int{2, 3}}
	for k := range h.Levels() - 1 {
		for f := range Flat(4) {
			n := h.Nodes(k) * p.cells(f)
			p.Measurements = append(p.Measurements, Measurement{Flat: f, Level: k, Values: make([]float64, n), Variance: 1 + float64(k) + float64(f)})
		}
	}
	p.Measurements = append(p.Measurements, Measurement{Flat: 0, Level: 1, Values: make([]float64, h.Nodes(1))})
	var queries []View
	for _, v := range allViews(&p) {
		if p.Determined(v) == nil {
			queries = append(queries, v)
		}
	}
	sol, err := Solve(context.Background(), p, queries)
	if err != nil {
		t.Fatal(err)
	}
	p1 := p
	p1.Workers = 1
	sol1, err := Solve(context.Background(), p1, queries)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for q, v := range queries {
		for _, maxTerms := range []int{0, 2} {
			laws, class, err := sol.TableLaws(ctx, q, LawOptions{MaxTerms: maxTerms})
			if err != nil {
				t.Fatal(err)
			}
			laws1, _, err := sol1.TableLaws(ctx, q, LawOptions{MaxTerms: maxTerms})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(laws) != fmt.Sprint(laws1) {
				t.Fatalf("view %v level %d: laws differ between 1 and GOMAXPROCS workers", v.Flat, v.Level)
			}
			for node := range h.Nodes(v.Level) {
				own, err := sol.Law(q, node, LawOptions{MaxTerms: maxTerms})
				if err != nil {
					t.Fatal(err)
				}
				sameLaw(t, fmt.Sprintf("view %v level %d node %d MaxTerms %d", v.Flat, v.Level, node, maxTerms), own, laws[class[node]])
			}
		}
		vars, class, err := sol.TableVariances(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for node := range h.Nodes(v.Level) {
			own, err := sol.Variance(q, node)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(own-vars[class[node]]) > 1e-12*own {
				t.Fatalf("view %v level %d node %d: variance %v, its class's %v", v.Flat, v.Level, node, own, vars[class[node]])
			}
		}
	}
	if _, _, err := sol.TableLaws(ctx, len(queries), LawOptions{}); err == nil {
		t.Fatal("TableLaws accepted a query out of range")
	}
}

// sameLaw fails unless two laws have the same terms (coefficients to 1e-12
// relative), variance and dropped variance.
func sameLaw(t *testing.T, what string, a, b Law) {
	t.Helper()
	close := func(x, y float64) bool { return math.Abs(x-y) <= 1e-12*max(math.Abs(x), math.Abs(y), 1e-300) }
	if len(a.Terms) != len(b.Terms) || !close(a.Variance, b.Variance) || math.Abs(a.Dropped-b.Dropped) > 1e-12*a.Variance {
		t.Fatalf("%s: law %+v, its class's %+v", what, a, b)
	}
	for i := range a.Terms {
		x, y := a.Terms[i], b.Terms[i]
		if x.Measurement != y.Measurement || x.Count != y.Count || !close(x.Coef, y.Coef) {
			t.Fatalf("%s: term %d is %+v, its class's %+v", what, i, x, y)
		}
	}
}

// TestShapeTree checks the shape tree against the hierarchy node by node:
// every node's children have the shapes its shape's Kids list, every node
// of a class has the class's shape and parent class, the classes count the
// nodes, and a bottom-up quantity (leaves under a node) computed per shape
// and a top-down one (the product of the fan-outs above a node) computed
// per class agree with the same computed over every node.
func TestShapeTree(t *testing.T) {
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 77))
		h := symmetricHierarchy(t, rng, 5)
		st := h.ShapeTree()
		L := h.RootLevel()
		// Per node: its shape, found through its class.
		shapeOf := func(k, i int) int {
			class, _ := h.Classes(k)
			return st.Classes[k][class[i]].Shape
		}
		leaves := make([][]int, L+1)  // per level, per node: leaves under it
		fan := make([][]float64, L+1) // per level, per node: Π over its ancestors of their fan-outs
		for k := range L + 1 {
			leaves[k] = make([]int, h.Nodes(k))
			fan[k] = make([]float64, h.Nodes(k))
		}
		for i := range h.Nodes(0) {
			leaves[0][i] = 1
		}
		for k := 1; k <= L; k++ {
			kids := make([]map[int]int, h.Nodes(k))
			for i := range kids {
				kids[i] = map[int]int{}
			}
			for c := range h.Nodes(k - 1) {
				p := h.Parent(k-1, c)
				leaves[k][p] += leaves[k-1][c]
				kids[p][shapeOf(k-1, c)]++
			}
			for i := range h.Nodes(k) {
				want := map[int]int{}
				for _, sc := range st.Kids[k][shapeOf(k, i)] {
					want[sc.Shape] += sc.Count
				}
				if fmt.Sprint(want) != fmt.Sprint(kids[i]) {
					t.Fatalf("seed %d level %d node %d: children's shapes %v, Kids %v", seed, k, i, kids[i], want)
				}
			}
		}
		fan[L][0] = 1
		for k := L - 1; k >= 0; k-- {
			count := make([]int, h.Nodes(k+1))
			for i := range h.Nodes(k) {
				count[h.Parent(k, i)]++
			}
			for i := range h.Nodes(k) {
				fan[k][i] = fan[k+1][h.Parent(k, i)] * float64(count[h.Parent(k, i)])
			}
		}
		// The same per shape (bottom-up) and per class (top-down).
		for k := range L + 1 {
			class, _ := h.Classes(k)
			nodes := 0
			for _, ci := range st.Classes[k] {
				nodes += ci.Nodes
			}
			if nodes != h.Nodes(k) {
				t.Fatalf("seed %d level %d: classes hold %d nodes, the level %d", seed, k, nodes, h.Nodes(k))
			}
			for i := range h.Nodes(k) {
				ci := st.Classes[k][class[i]]
				if k < L {
					pc, _ := h.Classes(k + 1)
					if ci.Parent != int(pc[h.Parent(k, i)]) {
						t.Fatalf("seed %d level %d node %d: parent class %d, ShapeTree says %d", seed, k, i, pc[h.Parent(k, i)], ci.Parent)
					}
				} else if ci.Parent != -1 {
					t.Fatalf("the root's parent class is %d", ci.Parent)
				}
			}
		}
		shapeLeaves := make([][]int, L+1)
		shapeLeaves[0] = []int{1}
		for k := 1; k <= L; k++ {
			shapeLeaves[k] = make([]int, len(st.Kids[k]))
			for s, kids := range st.Kids[k] {
				for _, sc := range kids {
					shapeLeaves[k][s] += sc.Count * shapeLeaves[k-1][sc.Shape]
				}
			}
		}
		classFan := make([][]float64, L+1)
		classFan[L] = []float64{1}
		for k := L - 1; k >= 0; k-- {
			classFan[k] = make([]float64, len(st.Classes[k]))
			for c, ci := range st.Classes[k] {
				ps := st.Classes[k+1][ci.Parent].Shape
				n := 0
				for _, sc := range st.Kids[k+1][ps] {
					n += sc.Count
				}
				classFan[k][c] = classFan[k+1][ci.Parent] * float64(n)
			}
		}
		for k := range L + 1 {
			class, _ := h.Classes(k)
			for i := range h.Nodes(k) {
				ci := st.Classes[k][class[i]]
				if shapeLeaves[k][ci.Shape] != leaves[k][i] || classFan[k][class[i]] != fan[k][i] {
					t.Fatalf("seed %d level %d node %d: leaves %d / %d, fan-out product %v / %v", seed, k, i, shapeLeaves[k][ci.Shape], leaves[k][i], classFan[k][class[i]], fan[k][i])
				}
			}
		}
	}
}
