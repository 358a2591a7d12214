package metricdp

import (
	"math"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/noise"
)

// moved returns x with one record moved from u_i to u_j.
func moved(x []int64, i, j int) []int64 {
	y := append([]int64(nil), x...)
	y[i]--
	y[j]++
	return y
}

// checkRatios fails if any output probability on x and x' differs by more
// than a factor exp(d).
func checkRatios(t *testing.T, what string, p, p2 []float64, d float64) {
	t.Helper()
	for o := range p {
		if p[o] == 0 && p2[o] == 0 {
			continue
		}
		if lr := math.Abs(math.Log(p[o] / p2[o])); lr > d*(1+1e-9)+1e-12 {
			t.Fatalf("%s: output %d log ratio %v > d = %v", what, o, lr, d)
		}
	}
}

func TestExponentialExactRatios(t *testing.T) {
	r := noise.NewSeeded(12)
	n := 10
	for name, m := range randomMetrics(t, r, n) {
		u := randomQueries(t, r, 6, n, false)
		x := make([]int64, n)
		for i := range x {
			x[i] = 1 + int64(r.Uint64N(4))
		}
		var total int64
		for _, v := range x {
			total += v
		}
		e, err := NewExponential(bg, m, u, total)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := e.Probabilities(x)
		for i := range n {
			for j := range n {
				if i == j || math.IsInf(m.Dist(i, j), 1) {
					continue
				}
				p2, err := e.Probabilities(moved(x, i, j))
				if err != nil {
					t.Fatal(err)
				}
				checkRatios(t, name, p, p2, m.Dist(i, j))
			}
		}
	}
}

func TestExponentialSampling(t *testing.T) {
	m, _ := NewEuclidean([][]float64{{0}, {1}, {2}}, 1)
	u, _ := NewQueries([][]float64{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}})
	e, err := NewExponential(bg, m, u, 4)
	if err != nil {
		t.Fatal(err)
	}
	// Scale: max over pairs of |dU| / d = 1/1 plus a rounding margin.
	if b := e.Scale(); b < 1 || b > 1+1e-12 {
		t.Fatalf("scale %v, want 1", b)
	}
	x := []int64{0, 1, 3}
	p, _ := e.Probabilities(x)
	// P(r) ∝ exp(x_r / 2).
	z := 1 + math.Exp(0.5) + math.Exp(1.5)
	for i, w := range []float64{1 / z, math.Exp(0.5) / z, math.Exp(1.5) / z} {
		if !near(p[i], w, 1e-9) {
			t.Fatalf("P = %v, want %v at %d", p, w, i)
		}
	}
	r := noise.NewSeeded(13)
	const reps = 30000
	counts := make([]float64, 3)
	for range reps {
		c, err := e.Choose(r, x)
		if err != nil {
			t.Fatal(err)
		}
		counts[c]++
	}
	for i := range counts {
		se := math.Sqrt(p[i] * (1 - p[i]) / reps)
		if math.Abs(counts[i]/reps-p[i]) > 5*se {
			t.Errorf("frequency of %d: %v, want %v (5 SE %v)", i, counts[i]/reps, p[i], 5*se)
		}
	}
	flat, _ := NewQueries([][]float64{{1, 1, 1}})
	if _, err := NewExponential(bg, m, flat, 4); err == nil {
		t.Error("data-independent utility accepted")
	}
	if _, err := NewExponential(bg, m, u, 0); err == nil {
		t.Error("n = 0 accepted")
	}
}

func TestSmallDBExactRatios(t *testing.T) {
	r := noise.NewSeeded(14)
	n := 5
	metrics := randomMetrics(t, r, n)
	for _, name := range []string{"euclidean", "graph", "closure"} {
		m := metrics[name]
		q := randomQueries(t, r, 3, n, false)
		x := []int64{2, 0, 1, 3, 1}
		s, err := NewSmallDB(bg, m, q, 7, 3)
		if err != nil {
			t.Fatal(err)
		}
		if c := s.Candidates(); c != 35 { // C(5+3-1, 3)
			t.Fatalf("%d candidates, want 35", c)
		}
		p, _ := s.Probabilities(x)
		for i := range n {
			for j := range n {
				if i == j || x[i] == 0 || math.IsInf(m.Dist(i, j), 1) {
					continue
				}
				p2, _ := s.Probabilities(moved(x, i, j))
				checkRatios(t, name, p, p2, m.Dist(i, j))
			}
		}
		y, err := s.Release(noise.NewSeeded(1), x)
		if err != nil {
			t.Fatal(err)
		}
		var tot int64
		for _, v := range y {
			tot += v
		}
		if tot != 3 {
			t.Fatalf("synthetic histogram %v has %d records, want 3", y, tot)
		}
	}
	m, _ := NewEuclidean(randomGridPoints(r, 40, 10), 1)
	q := randomQueries(t, r, 2, 40, false)
	if _, err := NewSmallDB(bg, m, q, 10, 8); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("oversized SmallDB: %v", err)
	}
}

func TestMWEM(t *testing.T) {
	r := noise.NewSeeded(15)
	n := 12
	m, _ := NewEuclidean(randomGridPoints(r, n, 6), 2)
	q := randomQueries(t, r, 8, n, true)
	x := make([]int64, n)
	for i := range x {
		x[i] = int64(50 * (i % 3))
	}
	const T = 5
	res, err := MWEM(bg, noise.NewSeeded(16), m, q, x, T)
	if err != nil {
		t.Fatal(err)
	}
	var total, want float64
	for i, v := range res.Synthetic {
		if v < 0 {
			t.Fatalf("negative synthetic count %v", v)
		}
		total += v
		want += float64(x[i])
	}
	if !near(total, want, 1e-9) || len(res.Selected) != T || len(res.Measured) != T {
		t.Fatalf("synthetic total %v (want %v), %d selections", total, want, len(res.Selected))
	}
	// Privacy, component by component: each selection and each measurement
	// spends at most d/(2T) on every pair, so T rounds spend d.
	round := scaled{m, 1.0 / (2 * T)}
	var fmax float64
	for _, v := range q.f {
		fmax = math.Max(fmax, math.Abs(v))
	}
	bSel, _ := pairLinfScale(bg, round, q, 1, want*fmax*roundingMargin)
	A := make([]float64, n)
	for i := range A {
		A[i] = want / float64(n)
	}
	sel := func(x []int64) []float64 {
		w := make([]float64, q.Len())
		for l := range w {
			var est float64
			for i, a := range A {
				est += q.Coef(l, i) * a
			}
			w[l] = math.Abs(est-exactDot(q, l, x, 0)) / (2 * bSel)
		}
		return softmax(w)
	}
	beta, _ := StandaloneScales(bg, round, q)
	p := sel(x)
	for i := range n {
		for j := range n {
			if i == j || x[i] == 0 {
				continue
			}
			d := m.Dist(i, j) / (2 * T)
			checkRatios(t, "selection", p, sel(moved(x, i, j)), d)
		}
	}
	for l := range q.Len() {
		one, _ := NewQueries([][]float64{q.Row(l)})
		lm, err := NewLaplaceScales(bg, round, one, []float64{beta[l]}, int64(want))
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			for j := i + 1; j < n; j++ {
				if loss := lm.PairLoss(i, j); loss > m.Dist(i, j)/(2*T) {
					t.Fatalf("measurement loss %v > d/(2T) = %v", loss, m.Dist(i, j)/(2*T))
				}
			}
		}
	}
	if _, err := MWEM(bg, r, m, q, x, 0); err == nil {
		t.Error("0 rounds accepted")
	}
	if _, err := MWEM(bg, r, m, q, make([]int64, n), 3); err == nil {
		t.Error("empty histogram accepted")
	}
}

func TestMarginalScaleMatchesEnumeration(t *testing.T) {
	r := noise.NewSeeded(17)
	for trial := range 10 {
		var attrs []Attribute
		for a := range 3 {
			at := Attribute{Name: string(rune('a' + a))}
			for v := range 1 + int(r.Uint64N(3)) {
				at.Values = append(at.Values, string(rune('p'+v)))
				e := 0.05 + 2*uniform(r)
				if r.Uint64N(6) == 0 {
					e = math.Inf(1)
				}
				at.Budgets = append(at.Budgets, e)
			}
			attrs = append(attrs, at)
		}
		rows := FullProduct(attrs)
		if len(rows) < 2 {
			continue
		}
		m, err := NewAttributeMetric(attrs, rows)
		if err != nil {
			t.Fatal(err)
		}
		for _, S := range [][]int{{0}, {1, 2}, {0, 1, 2}} {
			mq := Marginal{Attrs: S}
			for _, k := range S {
				mq.Values = append(mq.Values, int(r.Uint64N(uint64(len(attrs[k].Values)))))
			}
			const nrows = 20
			got, err := m.MarginalScale(mq, nrows)
			if err != nil {
				t.Fatal(err)
			}
			// The same query as a linear query on the histogram: phi/n.
			coef := make([]float64, len(rows))
			for i, row := range rows {
				match := true
				for c, k := range S {
					match = match && row[k] == mq.Values[c]
				}
				if match {
					coef[i] = 1.0 / nrows
				}
			}
			want, err := Scale(bg, m, coef)
			if err != nil {
				t.Fatal(err)
			}
			if !near(got, want, 1e-12) {
				t.Errorf("trial %d S=%v: MarginalScale %v, enumerated %v", trial, S, got, want)
			}
			ml, err := m.NewMarginal(mq, nrows)
			if err != nil {
				t.Fatal(err)
			}
			if got > 0 {
				// One row moving changes the count by 1: loss <= the
				// cheapest change of the predicate.
				if loss := ml.mech.Loss(1); loss > 1/(nrows*got) {
					t.Errorf("marginal loss %v > %v", loss, 1/(nrows*got))
				}
				if s := ml.Scale(); s < got || s > got*(1+0x1p-17) {
					t.Errorf("marginal release scale %v, want %v", s, got)
				}
			}
		}
	}
	m := exampleOne(t, 0.1, 1)
	for _, c := range []struct {
		q    Marginal
		want string
	}{
		{Marginal{Attrs: []int{0}, Values: nil}, "same positive"},
		{Marginal{Attrs: []int{5}, Values: []int{0}}, "out of range"},
		{Marginal{Attrs: []int{0, 0}, Values: []int{0, 1}}, "twice"},
		{Marginal{Attrs: []int{0}, Values: []int{2}}, "out of range"},
	} {
		if _, err := m.MarginalScale(c.q, 10); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("MarginalScale(%v) error %v, want %q", c.q, err, c.want)
		}
	}
	// Example 1: the Native=Y marginal needs scale 1/(n eps).
	if b, _ := m.MarginalScale(Marginal{Attrs: []int{1}, Values: []int{0}}, 10); !near(b, 1/(10*0.1), 1e-15) {
		t.Errorf("Native=Y marginal scale %v, want 1", b)
	}
	ml, _ := m.NewMarginal(Marginal{Attrs: []int{1}, Values: []int{0}}, 10)
	if _, err := ml.Release(noise.NewSeeded(1), 11); err == nil {
		t.Error("count above n accepted")
	}
	if v, err := ml.Release(noise.NewSeeded(1), 4); err != nil || math.IsNaN(v) {
		t.Errorf("Release = %v, %v", v, err)
	}
}
