package hier

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// randomCase builds a random problem: a hierarchy with the given level
// sizes, the given flat sizes, nmeas random measurements (some exact) of
// random integer data.
type randomCase struct {
	name   string
	levels []int
	flat   []int
	nmeas  int
	pExact float64
	// forced measurements added first: exact at given levels and flat sets.
	exact []View
}

func (rc randomCase) build(seed uint64) (Problem, []float64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	h, err := NewHierarchy(rc.levels, randomHierarchy(rng, rc.levels))
	if err != nil {
		panic(err)
	}
	p := Problem{Hierarchy: h, FlatSizes: rc.flat}
	d := newDense(&p)
	x := make([]float64, d.nx)
	for i := range x {
		x[i] = float64(rng.IntN(10))
	}
	xv := mat.NewVecDense(len(x), x)
	add := func(v View, variance float64) {
		var y mat.VecDense
		y.MulVec(d.marginal(v), xv)
		vals := y.RawVector().Data
		for i := range vals {
			if variance > 0 {
				vals[i] += rng.NormFloat64() * math.Sqrt(variance)
			}
		}
		p.Measurements = append(p.Measurements, Measurement{Flat: v.Flat, Level: v.Level, Values: vals, Variance: variance})
	}
	for _, v := range rc.exact {
		add(v, 0)
	}
	for range rc.nmeas {
		v := View{Flat(rng.IntN(1 << len(rc.flat))), rng.IntN(h.Levels())}
		variance := 0.3 + 3*rng.Float64()
		if rng.Float64() < rc.pExact {
			variance = 0
		}
		add(v, variance)
	}
	return p, x
}

// allViews lists every view of a problem.
func allViews(p *Problem) []View {
	var out []View
	for f := range Flat(1 << len(p.FlatSizes)) {
		for l := range p.Hierarchy.Levels() {
			out = append(out, View{f, l})
		}
	}
	return out
}

func maxAbs(x []float64) float64 {
	var m float64
	for _, v := range x {
		m = max(m, math.Abs(v))
	}
	return m
}

var randomCases = []randomCase{
	{name: "noisy", levels: []int{10, 4, 2}, flat: []int{2, 3}, nmeas: 5},
	{name: "mixed", levels: []int{10, 4, 2}, flat: []int{2, 3}, nmeas: 6, pExact: 0.25},
	{name: "exact-levels", levels: []int{10, 4, 2}, flat: []int{2, 3}, nmeas: 4, pExact: 0.1,
		exact: []View{{0, 1}, {1, 2}, {0, 3}}},
	{name: "exact-leaves", levels: []int{10, 4, 2}, flat: []int{2, 3}, nmeas: 4,
		exact: []View{{1, 0}, {2, 1}}},
	{name: "trivial-dim", levels: []int{10, 4, 2}, flat: []int{2, 1, 3}, nmeas: 6, pExact: 0.2},
	{name: "two-levels", levels: []int{7}, flat: []int{3, 2}, nmeas: 4, pExact: 0.2},
	{name: "single-child-groups", levels: []int{6, 6, 3}, flat: []int{2}, nmeas: 3, pExact: 0.2},
	{name: "no-flat", levels: []int{9, 3}, flat: nil, nmeas: 3, pExact: 0.3},
	{name: "deep", levels: []int{12, 5, 3, 2}, flat: []int{2, 2}, nmeas: 7, pExact: 0.2},
	{name: "deep-exact-chain", levels: []int{12, 5, 3, 2}, flat: []int{3}, nmeas: 4,
		exact: []View{{0, 4}, {1, 2}, {0, 1}}},
}

// TestMatchesDenseGLS compares every determined table with the dense
// equality-constrained GLS estimate, checks that the determinacy criterion
// agrees with dense estimability, that exact measurements are reproduced and
// that all tables agree, and that the error laws equal the dense estimator's
// rows.
func TestMatchesDenseGLS(t *testing.T) {
	for _, rc := range randomCases {
		for seed := range uint64(12) {
			t.Run(fmt.Sprintf("%s/%d", rc.name, seed), func(t *testing.T) {
				p, _ := rc.build(seed)
				d := newDense(&p)
				g := d.solve()
				var queries []View
				for _, v := range allViews(&p) {
					err := p.Determined(v)
					est := g.estimable(d.marginal(v))
					if (err == nil) != est {
						t.Fatalf("view %v level %d: Determined says %v, dense estimability %v", v.Flat, v.Level, err, est)
					}
					if err == nil {
						queries = append(queries, v)
					}
				}
				sol, err := Solve(context.Background(), p, queries)
				if err != nil {
					t.Fatal(err)
				}
				tables := map[View][]float64{}
				for q, v := range queries {
					var want mat.VecDense
					want.MulVec(d.marginal(v), g.xhat)
					w := want.RawVector().Data
					tol := 1e-9 * max(1, maxAbs(w))
					for i := range w {
						if math.Abs(w[i]-sol.Tables[q][i]) > tol {
							t.Fatalf("view %v level %d cell %d: got %v, dense %v", v.Flat, v.Level, i, sol.Tables[q][i], w[i])
						}
					}
					tables[v] = sol.Tables[q]
				}
				checkExact(t, &p, tables)
				checkAgree(t, &p, tables)
				checkLaws(t, &p, d, g, sol, queries)
			})
		}
	}
}

// checkExact checks that exact measurements are reproduced.
func checkExact(t *testing.T, p *Problem, tables map[View][]float64) {
	t.Helper()
	for j, m := range p.Measurements {
		if m.Variance != 0 {
			continue
		}
		got := tables[View{m.Flat, m.Level}]
		if got == nil {
			t.Fatalf("exact measurement %d's view not determined", j)
		}
		tol := 1e-9 * max(1, maxAbs(m.Values))
		for i, v := range m.Values {
			if math.Abs(got[i]-v) > tol {
				t.Fatalf("exact measurement %d cell %d: got %v, want %v", j, i, got[i], v)
			}
		}
	}
}

// checkAgree checks that children sum to parents and that every table's
// flat margins are the coarser tables.
func checkAgree(t *testing.T, p *Problem, tables map[View][]float64) {
	t.Helper()
	h := p.Hierarchy
	for v, x := range tables {
		cells := p.cells(v.Flat)
		tol := 1e-9 * max(1, maxAbs(x))
		if up, ok := tables[View{v.Flat, v.Level + 1}]; ok {
			sum := make([]float64, len(up))
			for i := range h.Nodes(v.Level) {
				a := h.Parent(v.Level, i)
				for c := range cells {
					sum[a*cells+c] += x[i*cells+c]
				}
			}
			for i := range sum {
				if math.Abs(sum[i]-up[i]) > tol {
					t.Fatalf("view %v level %d: children sum %v, parent %v", v.Flat, v.Level, sum[i], up[i])
				}
			}
		}
		for _, dd := range v.Flat.dims() {
			sub := v.Flat &^ (1 << dd)
			y, ok := tables[View{sub, v.Level}]
			if !ok {
				continue
			}
			cm := cellMap(p.FlatSizes, v.Flat.dims(), sub.dims())
			sc := p.cells(sub)
			sum := make([]float64, len(y))
			for i := range h.Nodes(v.Level) {
				for c := range cells {
					sum[i*sc+int(cm[c])] += x[i*cells+c]
				}
			}
			for i := range sum {
				if math.Abs(sum[i]-y[i]) > tol {
					t.Fatalf("view %v level %d: margin over %d is %v, table %v", v.Flat, v.Level, dd, sum[i], y[i])
				}
			}
		}
	}
}

// checkLaws compares the laws with the dense estimator: every coefficient,
// the variance, and the claim that every flat cell of a node has the same
// law up to a permutation of the noise variables.
func checkLaws(t *testing.T, p *Problem, d *dense, g *denseGLS, sol *Solution, queries []View) {
	t.Helper()
	h := p.Hierarchy
	for q, v := range queries {
		qm := d.marginal(v)
		var rows *mat.Dense
		if g.g != nil {
			rows = new(mat.Dense)
			rows.Mul(qm, g.g) // cells × noisy rows
		}
		cells := p.cells(v.Flat)
		vd := v.Flat.dims()
		for node := range h.Nodes(v.Level) {
			law, err := sol.Law(q, node, LawOptions{})
			if err != nil {
				t.Fatal(err)
			}
			checkBounded(t, p, sol, q, node, law)
			mcs, err := sol.coefs(q, node)
			if err != nil {
				t.Fatal(err)
			}
			byJ := map[int]*measCoefs{}
			for _, mc := range mcs {
				byJ[mc.j] = mc
			}
			// The law, expanded into one coefficient per noise variable.
			var lawList [][2]float64
			for _, tm := range law.Terms {
				if math.Abs(tm.Coef) <= 1e-9 {
					continue
				}
				for range tm.Count {
					lawList = append(lawList, [2]float64{float64(tm.Measurement), tm.Coef})
				}
			}
			slices.SortFunc(lawList, cmpPair)
			for c := range cells {
				cell := node*cells + c
				var variance float64
				var list [][2]float64
				var kmax float64
				if rows != nil {
					_, nr := rows.Dims()
					for r := range nr {
						kmax = max(kmax, math.Abs(rows.At(cell, r)))
					}
					for r := range nr {
						k := rows.At(cell, r)
						j := g.which[r]
						m := p.Measurements[j]
						variance += k * k * m.Variance
						if math.Abs(k) > 1e-9 {
							list = append(list, [2]float64{float64(j), k})
						}
						// Our coefficient for this noise cell.
						var ours float64
						if mc := byJ[j]; mc != nil {
							mcells := p.cells(m.Flat)
							kn, kc := g.row[r]/mcells, g.row[r]%mcells
							pat := pattern(p, vd, c, m.Flat.dims(), kc, mc.common)
							ours = mc.k[kn*(1<<len(mc.common))+pat]
						}
						if math.Abs(ours-k) > 1e-9*max(kmax, 1) {
							t.Fatalf("view %v level %d node %d cell %d: coefficient on measurement %d row %d: got %v, dense %v", v.Flat, v.Level, node, c, j, g.row[r], ours, k)
						}
					}
				}
				if math.Abs(variance-law.Variance) > 1e-9*max(variance, 1e-12) {
					t.Fatalf("view %v level %d node %d cell %d: variance %v, dense %v", v.Flat, v.Level, node, c, law.Variance, variance)
				}
				slices.SortFunc(list, cmpPair)
				if len(list) != len(lawList) {
					t.Fatalf("view %v level %d node %d cell %d: %d noise terms, law has %d", v.Flat, v.Level, node, c, len(list), len(lawList))
				}
				for i := range list {
					if list[i][0] != lawList[i][0] || math.Abs(list[i][1]-lawList[i][1]) > 1e-9*max(kmax, 1) {
						t.Fatalf("view %v level %d node %d cell %d: term %d is %v, law %v", v.Flat, v.Level, node, c, i, list[i], lawList[i])
					}
				}
			}
		}
	}
}

func cmpPair(a, b [2]float64) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) }

// pattern returns the bits (over common) of the common dimensions on
// which cell c of a table over vd and cell kc of a table over md agree.
func pattern(p *Problem, vd []int, c int, md []int, kc int, common []int) int {
	coord := func(dims []int, cell int) map[int]int {
		out := map[int]int{}
		for k := len(dims) - 1; k >= 0; k-- {
			n := p.FlatSizes[dims[k]]
			out[dims[k]] = cell % n
			cell /= n
		}
		return out
	}
	a, b := coord(vd, c), coord(md, kc)
	pat := 0
	for i, dd := range common {
		if a[dd] == b[dd] {
			pat |= 1 << i
		}
	}
	return pat
}

func TestInconsistentInvariants(t *testing.T) {
	h, err := NewHierarchy([]int{4, 2}, [][]int32{{0, 1, 0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	leaf := []float64{1, 2, 3, 4, 5, 6, 7, 8} // 4 leaves × flat 2
	state := []float64{1 + 5, 2 + 6, 3 + 7, 4 + 8}
	total := []float64{36}
	tests := []struct {
		name string
		meas []Measurement
		want []string
	}{
		{"across levels", []Measurement{
			{Flat: 1, Level: 0, Values: leaf},
			{Flat: 1, Level: 1, Values: []float64{6, 8, 10, 13}},
		}, []string{"inconsistent invariants", "exact measurement 1", "[0]", "level 1 node 1"}},
		{"same level", []Measurement{
			{Flat: 0, Level: 1, Values: []float64{14, 22}},
			{Flat: 1, Level: 1, Values: state},
			{Flat: 0, Level: 1, Values: []float64{14, 22.5}},
		}, []string{"inconsistent invariants", "measurements 0 and 2", "level 1 node 1"}},
		{"total against leaves", []Measurement{
			{Flat: 0, Level: 2, Values: []float64{37}},
			{Flat: 1, Level: 0, Values: leaf, Variance: 1},
			{Flat: 0, Level: 0, Values: []float64{6, 8, 10, 12}},
		}, []string{"inconsistent invariants", "exact measurement 0", "[2]"}},
		{"flat residual", []Measurement{
			{Flat: 1, Level: 2, Values: []float64{15, 21}},
			{Flat: 0, Level: 2, Values: total},
			{Flat: 1, Level: 1, Values: state},
		}, []string{"inconsistent invariants", "exact measurement 0", "flat residual {0}"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := Problem{Hierarchy: h, FlatSizes: []int{2}, Measurements: tc.meas}
			_, err := Solve(context.Background(), p, []View{{0, 2}})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	// Agreeing invariants within rounding are accepted.
	p := Problem{Hierarchy: h, FlatSizes: []int{2}, Measurements: []Measurement{
		{Flat: 1, Level: 0, Values: leaf},
		{Flat: 1, Level: 1, Values: []float64{6, 8, 10, 12 * (1 + 1e-13)}},
		{Flat: 0, Level: 2, Values: total},
	}}
	if _, err := Solve(context.Background(), p, []View{{1, 2}}); err != nil {
		t.Fatal(err)
	}
}

func TestUndeterminedAndBadInput(t *testing.T) {
	h, err := NewHierarchy([]int{4, 2}, [][]int32{{0, 1, 0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	states := make([]float64, 2*3)
	meas := []Measurement{
		{Flat: 1, Level: 1, Values: states, Variance: 1},
		{Flat: 2, Level: 0, Values: make([]float64, 4*2), Variance: 1},
	}
	p := Problem{Hierarchy: h, FlatSizes: []int{3, 2}, Measurements: meas}
	tests := []struct {
		name string
		q    View
		want string // "" when determined
	}{
		{"measured", View{1, 1}, ""},
		{"coarser", View{1, 2}, ""},
		{"total", View{0, 0}, ""},
		{"finer than measured", View{1, 0}, "not determined"},
		{"crossed residual unmeasured", View{3, 2}, "no measurement contains the flat dimensions {0,1}"},
		{"bad level", View{0, 3}, "level 3"},
		{"bad flat", View{4, 0}, "outside"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Solve(context.Background(), p, []View{tc.q})
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if err := p.Determined(tc.q); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	bad := []struct {
		name  string
		sizes []int
		par   [][]int32
		want  string
	}{
		{"empty group", []int{3, 2}, [][]int32{{0, 0, 0}}, "group 1 of level 1 is empty"},
		{"out of range", []int{3, 2}, [][]int32{{0, 2, 1}}, "parent 2"},
		{"length", []int{3, 2}, [][]int32{{0, 1}}, "2 entries"},
		{"maps", []int{3, 2}, nil, "parent maps"},
	}
	for _, tc := range bad {
		if _, err := NewHierarchy(tc.sizes, tc.par); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	badMeas := []struct {
		name string
		m    Measurement
		want string
	}{
		{"length", Measurement{Flat: 1, Level: 1, Values: make([]float64, 5), Variance: 1}, "has 5 values, want 6"},
		{"variance", Measurement{Flat: 1, Level: 1, Values: states, Variance: -1}, "variance -1"},
		{"nan", Measurement{Flat: 0, Level: 2, Values: []float64{math.NaN()}, Variance: 1}, "NaN"},
	}
	for _, tc := range badMeas {
		p := Problem{Hierarchy: h, FlatSizes: []int{3, 2}, Measurements: []Measurement{tc.m}}
		if _, err := Solve(context.Background(), p, []View{{0, 2}}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// checkBounded checks the fast variance and the bounded laws against the
// full law of the same cells.
func checkBounded(t *testing.T, p *Problem, sol *Solution, q, node int, full Law) {
	t.Helper()
	v := sol.queries[q]
	fast, err := sol.Variance(q, node)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(fast-full.Variance) > 1e-9*max(full.Variance, 1e-12) {
		t.Fatalf("view %v level %d node %d: Variance %v, law %v", v.Flat, v.Level, node, fast, full.Variance)
	}
	for _, maxTerms := range []int{1, 3, 1 << 30} {
		b, err := sol.Law(q, node, LawOptions{MaxTerms: maxTerms})
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(b.Variance-full.Variance) > 1e-9*max(full.Variance, 1e-12) {
			t.Fatalf("view %v level %d node %d MaxTerms %d: variance %v, full %v", v.Flat, v.Level, node, maxTerms, b.Variance, full.Variance)
		}
		want := full.Terms
		if len(want) > maxTerms {
			want = want[:maxTerms]
		}
		if len(b.Terms) != len(want) {
			t.Fatalf("view %v level %d node %d MaxTerms %d: %d terms, want %d (%v vs %v)", v.Flat, v.Level, node, maxTerms, len(b.Terms), len(want), b.Terms, want)
		}
		var kept float64
		for i, tm := range b.Terms {
			// Ties in |Coef| may come in another order; the magnitudes
			// must agree.
			if math.Abs(math.Abs(tm.Coef)-math.Abs(want[i].Coef)) > 1e-9*math.Abs(want[i].Coef) {
				t.Fatalf("view %v level %d node %d MaxTerms %d: term %d is %v, want %v", v.Flat, v.Level, node, maxTerms, i, tm, want[i])
			}
			kept += tm.Coef * tm.Coef * float64(tm.Count) * p.Measurements[tm.Measurement].Variance
		}
		if math.Abs(kept+b.Dropped-full.Variance) > 1e-9*max(full.Variance, 1e-12) {
			t.Fatalf("view %v level %d node %d MaxTerms %d: kept %v + dropped %v != %v", v.Flat, v.Level, node, maxTerms, kept, b.Dropped, full.Variance)
		}
		// DroppedMax bounds every left-out noise variable's standard
		// deviation.
		for _, tm := range full.Terms[len(b.Terms):] {
			if sd := math.Abs(tm.Coef) * math.Sqrt(p.Measurements[tm.Measurement].Variance); sd > b.DroppedMax*(1+1e-9) {
				t.Fatalf("view %v level %d node %d MaxTerms %d: dropped term %v has sd %v > DroppedMax %v", v.Flat, v.Level, node, maxTerms, tm, sd, b.DroppedMax)
			}
		}
		if b.Dropped > 1e-9*full.Variance && b.DroppedMax == 0 {
			t.Fatalf("view %v level %d node %d MaxTerms %d: Dropped %v with DroppedMax %v", v.Flat, v.Level, node, maxTerms, b.Dropped, b.DroppedMax)
		}
	}
}

// TestTwoLeafClosedForm checks the tree pass against the closed form for
// two leaves and their total, all measured with variance 1 (Hay et al.):
// leaf estimate y_1 + (y_r - y_1 - y_2)/3, variance 2/3; and with the total
// exact: y_1 + (y_r - y_1 - y_2)/2, variance 1/2.
func TestTwoLeafClosedForm(t *testing.T) {
	h, err := NewHierarchy([]int{2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		vRoot    float64
		share    float64
		variance float64
	}{
		{"noisy total", 1, 1.0 / 3, 2.0 / 3},
		{"exact total", 0, 1.0 / 2, 1.0 / 2},
		{"precise total", 1e-6, 1 / (2 + 1e-6), 1 - 1/(2+1e-6)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y1, y2, yr := 3.0, 5.0, 10.0
			p := Problem{Hierarchy: h, Measurements: []Measurement{
				{Level: 0, Values: []float64{y1, y2}, Variance: 1},
				{Level: 1, Values: []float64{yr}, Variance: tc.vRoot},
			}}
			sol, err := Solve(context.Background(), p, []View{{0, 0}})
			if err != nil {
				t.Fatal(err)
			}
			want := y1 + (yr-y1-y2)*tc.share
			if got := sol.Tables[0][0]; math.Abs(got-want) > 1e-9 {
				t.Fatalf("leaf 0: got %v, want %v", got, want)
			}
			v, err := sol.Variance(0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(v-tc.variance) > 1e-9 {
				t.Fatalf("variance %v, want %v", v, tc.variance)
			}
		})
	}
}

func TestCancelled(t *testing.T) {
	p, queries := nationalProblemSmall()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Solve(ctx, p, queries); err != context.Canceled {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	// Workers 1 and many give the same tables.
	p.Workers = 1
	a, err := Solve(context.Background(), p, queries)
	if err != nil {
		t.Fatal(err)
	}
	p.Workers = 8
	b, err := Solve(context.Background(), p, queries)
	if err != nil {
		t.Fatal(err)
	}
	for q := range a.Tables {
		if !slices.Equal(a.Tables[q], b.Tables[q]) {
			t.Fatalf("query %d differs between 1 and 8 workers", q)
		}
	}
}

// nationalProblemSmall is a few-hundred-leaf problem of the benchmark's
// shape.
func nationalProblemSmall() (Problem, []View) {
	rc := randomCase{levels: []int{300, 40, 6, 2}, flat: []int{2, 5}, nmeas: 8, pExact: 0.1}
	p, _ := rc.build(99)
	var queries []View
	for _, v := range allViews(&p) {
		if p.Determined(v) == nil {
			queries = append(queries, v)
		}
	}
	return p, queries
}

// TestBoundedLawLarge compares the bounded laws and the fast variance with
// the full law on a few-hundred-leaf hierarchy, for every view and a
// sample of nodes.
func TestBoundedLawLarge(t *testing.T) {
	p, queries := nationalProblemSmall()
	sol, err := Solve(context.Background(), p, queries)
	if err != nil {
		t.Fatal(err)
	}
	for q, v := range queries {
		n := p.Hierarchy.Nodes(v.Level)
		for node := 0; node < n; node += 1 + n/7 {
			full, err := sol.Law(q, node, LawOptions{})
			if err != nil {
				t.Fatal(err)
			}
			checkBounded(t, &p, sol, q, node, full)
		}
	}
}

// TestSolveSplitRows checks a problem large enough that its rows are split
// between workers: the tables are the same, bit for bit, with 1 worker and
// with 3; they reproduce the exact totals (also given twice, so that two
// exact measurements are compared chunk by chunk) and add up from level to
// level and from table to table.
func TestSolveSplitRows(t *testing.T) {
	p, queries := synthProblem(t, rand.New(rand.NewPCG(3, 4)), []int{6000, 300, 20, 3}, []int{2, 9})
	if p.Hierarchy.Nodes(0)*18 < 4*rowGrain {
		t.Fatalf("the leaf level has %d cells, not several chunks of %d", p.Hierarchy.Nodes(0)*18, rowGrain)
	}
	last := p.Measurements[len(p.Measurements)-1]
	p.Measurements = append(p.Measurements, Measurement{Flat: last.Flat, Level: last.Level, Values: slices.Clone(last.Values)})
	var tables [2][][]float64
	for i, workers := range []int{1, 3} {
		p.Workers = workers
		sol, err := Solve(context.Background(), p, queries)
		if err != nil {
			t.Fatal(err)
		}
		tables[i] = sol.Tables
	}
	byView := map[View][]float64{}
	for q, v := range queries {
		if !slices.Equal(tables[0][q], tables[1][q]) {
			t.Fatalf("view %v level %d differs between 1 and 3 workers", v.Flat, v.Level)
		}
		byView[v] = tables[0][q]
	}
	checkExact(t, &p, byView)
	checkAgree(t, &p, byView)
}
