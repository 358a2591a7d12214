package metricdp

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/source"
)

// bruteOptimal2 computes the optimal allocation of two queries
// independently of the barrier solver: for a fixed t1 the best t2 is the
// largest feasible one, t2(t1) = min over pairs of (d - a1 t1)/a2, a
// concave function, so g(t1) = 1/t1^2 + 1/t2(t1)^2 is convex on (0, t1max]
// and ternary search finds its minimum. It returns the scales.
func bruteOptimal2(m Metric, q *Queries) [2]float64 {
	type row struct{ a1, a2, d float64 }
	var rows []row
	for i := range q.N() {
		for j := i + 1; j < q.N(); j++ {
			d := m.Dist(i, j)
			if math.IsInf(d, 1) {
				continue
			}
			rows = append(rows, row{math.Abs(q.Coef(0, i) - q.Coef(0, j)), math.Abs(q.Coef(1, i) - q.Coef(1, j)), d})
		}
	}
	t1max := math.Inf(1)
	for _, r := range rows {
		if r.a1 > 0 {
			t1max = min(t1max, r.d/r.a1)
		}
	}
	t2 := func(t1 float64) float64 {
		v := math.Inf(1)
		for _, r := range rows {
			if r.a2 > 0 {
				v = min(v, (r.d-r.a1*t1)/r.a2)
			}
		}
		return v
	}
	g := func(t1 float64) float64 {
		v := t2(t1)
		if !(v > 0) {
			return math.Inf(1)
		}
		return 1/(t1*t1) + 1/(v*v)
	}
	lo, hi := 0.0, t1max
	for range 300 {
		a, b := lo+(hi-lo)/3, hi-(hi-lo)/3
		if g(a) <= g(b) {
			hi = b
		} else {
			lo = a
		}
	}
	t1 := (lo + hi) / 2
	return [2]float64{1 / t1, 1 / t2(t1)}
}

// Issue 10: u.csv a,0,0 / b,100,0 / c,100,1 with q1 = (0,0,100) and
// q2 = (0,1,1) failed with "Newton step: matrix singular". By hand: pair
// (b,c) caps t1 <= 1/100 and the objective's 1/t1^2 dominates, so t1 =
// 1/100; pair (a,c) then leaves t2 = sqrt(100^2+1) - 100 t1 = sqrt(10001) -
// 1 (pair (a,b) allows 100). b = (100, 1/(sqrt(10001)-1)) = (100, 0.0101005).
func TestOptimalThreeElements(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "u.csv")
	if err := os.WriteFile(path, []byte("id,x,y\na,0,0\nb,100,0\nc,100,1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	u, err := LoadUniverse(path)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := ParseSpec(bg, "euclidean:scale=1", u)
	if err != nil {
		t.Fatal(err)
	}
	q, _ := NewQueries([][]float64{{0, 0, 100}, {0, 1, 1}})
	a, err := NewAllocation(bg, m, q, Optimal)
	if err != nil {
		t.Fatal(err)
	}
	if a.Strategy != Optimal || a.Note != "" {
		t.Fatalf("fell back: %v %q", a.Strategy, a.Note)
	}
	want := [2]float64{100, 1 / (math.Sqrt(10001) - 1)}
	brute := bruteOptimal2(m, q)
	for l := range 2 {
		if !near(a.Scales[l], want[l], 1e-8) || !near(brute[l], want[l], 1e-8) {
			t.Errorf("scale %d: optimal %v, brute force %v, by hand %v", l, a.Scales[l], brute[l], want[l])
		}
	}
	if load := bruteLoad(m, q, a.Scales); load > 1 {
		t.Errorf("load %v > 1", load)
	}
}

// placesData reads longitude, latitude, elevation and the California
// indicator of the bundled US places.
func placesData(t testing.TB) (pts [][]float64, elev, ca []float64) {
	t.Helper()
	c, err := source.OpenCSV("../data/us-places.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	col := func(name string) int {
		i, err := c.Column(name)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	lat, lon, el, st := col("lat"), col("lon"), col("elevation"), col("admin1")
	for {
		rec, err := c.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		x, err1 := strconv.ParseFloat(rec[lon], 64)
		y, err2 := strconv.ParseFloat(rec[lat], 64)
		e, err3 := strconv.ParseFloat(rec[el], 64)
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("bad row %v", rec)
		}
		pts = append(pts, []float64{x, y})
		elev = append(elev, e)
		ind := 0.0
		if strings.TrimSpace(rec[st]) == "CA" {
			ind = 1
		}
		ca = append(ca, ind)
	}
	return pts, elev, ca
}

// Issue 10: elevation (metres, scale ~1e3) together with a California
// indicator (scale 1) failed on the US places, already on three of them.
func TestOptimalPlacesElevationAndCalifornia(t *testing.T) {
	pts, elev, ca := placesData(t)
	firstCA := -1
	for i, v := range ca {
		if v == 1 {
			firstCA = i
			break
		}
	}
	if firstCA < 2 {
		t.Fatalf("no California place after the first two (at %d)", firstCA)
	}
	subsets := map[string][]int{
		"three":  {firstCA - 2, firstCA - 1, firstCA},
		"three2": {0, firstCA, firstCA + 1},
	}
	all := make([]int, len(pts))
	for i := range all {
		all[i] = i
	}
	subsets["all"] = all
	for name, idx := range subsets {
		t.Run(name, func(t *testing.T) {
			var p [][]float64
			rows := [][]float64{make([]float64, len(idx)), make([]float64, len(idx))}
			for a, i := range idx {
				p = append(p, pts[i])
				rows[0][a], rows[1][a] = elev[i], ca[i]
			}
			m, err := NewEuclidean(p, 1)
			if err != nil {
				t.Fatal(err)
			}
			q, _ := NewQueries(rows)
			a, err := NewAllocation(bg, m, q, Optimal)
			if err != nil {
				t.Fatal(err)
			}
			if a.Strategy != Optimal {
				t.Fatalf("fell back: %s", a.Note)
			}
			if load := bruteLoad(m, q, a.Scales); load > 1+1e-12 {
				t.Errorf("load %v > 1", load)
			}
			checkNeverLoses(t, m, q, a.Scales)
			if len(idx) <= 3 {
				brute := bruteOptimal2(m, q)
				for l := range 2 {
					if !near(a.Scales[l], brute[l], 1e-7) {
						t.Errorf("scale %d: optimal %v, brute force %v", l, a.Scales[l], brute[l])
					}
				}
			}
		})
	}
}

func checkNeverLoses(t *testing.T, m Metric, q *Queries, b []float64) {
	t.Helper()
	opt := sumSquares(b)
	for _, s := range []Strategy{EqualShare, SameScale, Greedy} {
		bs, err := Allocate(bg, m, q, s)
		if err != nil {
			t.Fatal(err)
		}
		if other := sumSquares(bs); opt > other*(1+1e-9) {
			t.Errorf("optimal %v loses to %v %v", opt, s, other)
		}
	}
}

// Queries whose scales are spread over 1e-4..1e4 (each row multiplied by
// 10^u, u uniform in [-4, 4]): the optimal allocation must not fall back,
// must never lose to strategies 1-3, and must meet the KKT conditions.
func TestOptimalSpreadScales(t *testing.T) {
	r := noise.NewSeeded(11)
	for trial := range 24 {
		n := 15 + int(r.Uint64N(30))
		k := 2 + int(r.Uint64N(6))
		metrics := randomMetrics(t, r, n)
		name := []string{"euclidean", "graph", "threshold", "closure"}[trial%4]
		m := metrics[name]
		rows := make([][]float64, k)
		for l := range rows {
			f := math.Pow(10, -4+8*uniform(r))
			rows[l] = make([]float64, n)
			for i := range rows[l] {
				if trial%2 == 0 {
					rows[l][i] = f * float64(r.Uint64N(2))
				} else {
					rows[l][i] = f * uniform(r)
				}
			}
		}
		q, err := NewQueries(rows)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(fmt.Sprintf("%d/%s/k=%d", trial, name, k), func(t *testing.T) {
			a, err := NewAllocation(bg, m, q, Optimal)
			if err != nil {
				t.Fatal(err)
			}
			if a.Strategy != Optimal {
				t.Fatalf("fell back: %s", a.Note)
			}
			if load := bruteLoad(m, q, a.Scales); load > 1+1e-12 {
				t.Errorf("load %v > 1", load)
			}
			checkNeverLoses(t, m, q, a.Scales)
			beta, _ := StandaloneScales(bg, m, q)
			res, err := allocateOptimal(bg, m, q, beta)
			if err != nil {
				t.Fatal(err)
			}
			checkKKT(t, m, q, res)
		})
	}
}

// checkKKT checks dual feasibility, complementary slackness and
// stationarity 2/t_l^3 = sum_p lambda_p a_pl of an optimal allocation.
func checkKKT(t *testing.T, m Metric, q *Queries, res optResult) {
	t.Helper()
	tt := res.t
	k := len(tt)
	grad := make([]float64, k)
	for p, pr := range res.pairs {
		lam := res.lambda[p]
		if lam < 0 {
			t.Fatalf("multiplier %v < 0", lam)
		}
		d := m.Dist(pr[0], pr[1])
		var load float64
		for l := range k {
			if math.IsInf(tt[l], 1) {
				continue
			}
			a := math.Abs(q.Coef(l, pr[0])-q.Coef(l, pr[1])) / d
			load += a * tt[l]
			grad[l] += lam * a
		}
		if cs := lam * (1 - load); math.Abs(cs) > 1e-8*objective(tt) {
			t.Errorf("complementary slackness %v at pair %v", cs, pr)
		}
	}
	for l := range k {
		if math.IsInf(tt[l], 1) {
			continue
		}
		if want := 2 / (tt[l] * tt[l] * tt[l]); !near(grad[l], want, 1e-4) {
			t.Errorf("query %d: stationarity sum lambda a = %v, 2/t^3 = %v", l, grad[l], want)
		}
	}
}

// When the solver fails, the result is the best of strategies 1-3 with a
// note naming the cause.
func TestOptimalFallback(t *testing.T) {
	m, _ := NewEuclidean([][]float64{{0}, {1}, {3}}, 1)
	q, _ := NewQueries([][]float64{{0, 1, 3}, {0, 0, 1}})
	beta, err := StandaloneScales(bg, m, q)
	if err != nil {
		t.Fatal(err)
	}
	a, err := fallbackAllocation(bg, m, q, beta, errors.New("test cause"))
	if err != nil {
		t.Fatal(err)
	}
	best := math.Inf(1)
	var bestS Strategy
	for _, s := range []Strategy{EqualShare, SameScale, Greedy} {
		b, _ := Allocate(bg, m, q, s)
		if v := sumSquares(b); v < best {
			best, bestS = v, s
		}
	}
	if a.Strategy != bestS || sumSquares(a.Scales) != best {
		t.Errorf("fallback %v (%v), want %v (%v)", a.Strategy, sumSquares(a.Scales), bestS, best)
	}
	if !strings.Contains(a.Note, "test cause") || !strings.Contains(a.Note, bestS.String()) {
		t.Errorf("note %q", a.Note)
	}
	// A mechanism built from NewLaplace reports the allocation.
	lm, err := NewLaplace(bg, m, q, Optimal, 10)
	if err != nil {
		t.Fatal(err)
	}
	if al := lm.Allocation(); al.Strategy != Optimal || al.Note != "" || len(al.Scales) != 2 {
		t.Errorf("Laplace.Allocation = %+v", al)
	}
}
