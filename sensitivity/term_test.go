package sensitivity

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/query"
)

// testTerms returns query terms over s: every marginal, every residual
// (Helmert contrasts on a subset, totals elsewhere), and prefix sums and
// ranges along the first dimension crossed with identities or Helmert rows
// on the second.
func testTerms(s *domain.Schema) []query.Term {
	d := s.NumDims()
	var out []query.Term
	for c := range domain.Cuboid(1) << d {
		marg := make(query.Term, d)
		res := make(query.Term, d)
		okRes := true
		for i := range d {
			n := s.Size(i)
			if c.Has(i) {
				marg[i] = query.NewIdentity(n)
				if n == 1 {
					okRes = false
				} else {
					res[i] = query.NewResidual(n)
				}
			} else {
				marg[i] = query.NewTotal(n)
				res[i] = query.NewTotal(n)
			}
		}
		out = append(out, marg)
		if okRes {
			out = append(out, res)
		}
	}
	for _, first := range []query.Factor{query.NewPrefix(s.Size(0)), query.NewRanges(s.Size(0))} {
		t := make(query.Term, d)
		t[0] = first
		for i := 1; i < d; i++ {
			t[i] = query.NewTotal(s.Size(i))
		}
		out = append(out, t)
		if d > 1 && s.Size(1) > 1 {
			u := append(query.Term(nil), t...)
			u[1] = query.NewResidual(s.Size(1))
			out = append(out, u)
			v := append(query.Term(nil), t...)
			v[1] = query.NewIdentity(s.Size(1))
			out = append(out, v)
		}
	}
	return out
}

// bruteTermAll returns, per term, the largest ||t g||_1 and ||t g||_2 over
// the Graver basis of the exact cuboids q, from the basis itself.
func bruteTermAll(t testing.TB, s *domain.Schema, q []domain.Cuboid, terms []query.Term) (l1, l2 []float64) {
	t.Helper()
	basis, err := GraverBasis(context.Background(), s.Cells(), testkit.CuboidRows(s, q...))
	if err != nil {
		t.Fatal(err)
	}
	l1 = make([]float64, len(terms))
	l2 = make([]float64, len(terms))
	x := make([]float64, s.Cells())
	for _, g := range basis {
		for a, v := range g {
			x[a] = float64(v)
		}
		for k, term := range terms {
			var a1, a2 float64
			for _, v := range term.Apply(x) {
				a1 += math.Abs(v)
				a2 += v * v
			}
			l1[k], l2[k] = max(l1[k], a1), max(l2[k], math.Sqrt(a2))
		}
	}
	return l1, l2
}

// TestTermSensitivityMatchesBruteForce pins every rule of term.go to the
// brute force over the Graver basis, on every shape of at most 3
// dimensions of size at most 3 (27 cells), with no, one and two exact
// cuboids and the terms of testTerms: an exact value must equal the brute
// force, a bound must not be below it. The closed forms are checked on
// their own (oneExact, supportBound), and so is what TermL1Sensitivity and
// TermL2Sensitivity return (brute force themselves up to 24 cells).
func TestTermSensitivityMatchesBruteForce(t *testing.T) {
	const tol = 1e-9
	var cases, exactOne, bounds int
	for _, sizes := range sortedShapes(27) {
		s := sizedSchema(t, sizes...)
		terms := testTerms(s)
		for _, q := range knowledgeSets(len(sizes), false) {
			b1, b2 := bruteTermAll(t, s, q, terms)
			maximal := maximalCuboids(q, TrivialDims(s))
			for k, term := range terms {
				cases++
				where := fmt.Sprintf("%v exact %v term %v", sizes, q, term)
				for p, want := range map[int]float64{1: b1[k], 2: b2[k]} {
					got, err := termSensitivity(s, q, term, p)
					if err != nil {
						t.Fatalf("%s L%d: %v", where, p, err)
					}
					if got.Exact && math.Abs(got.Value-want) > tol*(1+want) || got.Value < want-tol*(1+want) {
						t.Fatalf("%s L%d: %v (exact %v, %s), brute force %v", where, p, got.Value, got.Exact, got.Rule, want)
					}
					st, err := termStats(s, term)
					if err != nil {
						t.Fatal(err)
					}
					if len(maximal) == 1 && !support(st).AncestorOf(maximal[0]|TrivialDims(s)) {
						if v, ok := oneExact(s, maximal[0], st, p); ok {
							if v.Exact {
								exactOne++
							}
							if v.Exact && math.Abs(v.Value-want) > tol*(1+want) || v.Value < want-tol*(1+want) {
								t.Fatalf("%s L%d one exact: %v (exact %v), brute force %v", where, p, v.Value, v.Exact, want)
							}
						}
					}
					if len(maximal) > 0 {
						if v, err := supportBound(s, q, st, support(st)&^TrivialDims(s), p); err == nil {
							bounds++
							if v.Value < want-tol*(1+want) {
								t.Fatalf("%s L%d support bound %v below the brute force %v (%s)", where, p, v.Value, want, v.Rule)
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d cases, %d exact one-cuboid values, %d support bounds", cases, exactOne, bounds)
}

// TestResidualSensitivityNumbers pins the residual rules to numbers: with
// no knowledge sqrt(Π(1 - 1/n_i)); under one exact cuboid 2 π_A n/(n - 1)
// with n the smallest dimension of A outside it.
func TestResidualSensitivityNumbers(t *testing.T) {
	s := sizedSchema(t, 6, 2, 5, 7)
	res := func(dims ...int) query.Term {
		t := make(query.Term, 4)
		for i := range t {
			t[i] = query.NewTotal(s.Size(i))
		}
		for _, d := range dims {
			t[d] = query.NewResidual(s.Size(d))
		}
		return t
	}
	cub := func(dims ...int) domain.Cuboid {
		var c domain.Cuboid
		for _, d := range dims {
			c |= 1 << d
		}
		return c
	}
	for _, c := range []struct {
		exact   []domain.Cuboid
		term    query.Term
		want    float64
		isExact bool
	}{
		{nil, res(0, 2), math.Sqrt(5.0 / 6 * 4 / 5), true},
		{nil, res(1, 2, 3), math.Sqrt(0.5 * 0.8 * 6.0 / 7), true},
		// A = {0, 2} outside K = {1}: n = 5, 2 (5/6)(4/5)(5/4).
		{[]domain.Cuboid{cub(1)}, res(0, 2), math.Sqrt(2 * 5.0 / 6 * 4 / 5 * 5 / 4), true},
		// A = {0, 2} with K = {0}: only dimension 2 is outside: 2 (5/6)(4/5)(5/4).
		{[]domain.Cuboid{cub(0)}, res(0, 2), math.Sqrt(2 * 5.0 / 6 * 4 / 5 * 5 / 4), true},
		// With K = {0, 2} the residual is public.
		{[]domain.Cuboid{cub(0, 2)}, res(0, 2), 0, true},
		// A = {1, 3}, K = {0}: n = 2: 2 (1/2)(6/7)(2).
		{[]domain.Cuboid{cub(0)}, res(1, 3), math.Sqrt(2 * 0.5 * 6.0 / 7 * 2), true},
	} {
		got, err := TermL2Sensitivity(s, c.exact, c.term)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got.Value-c.want) > 1e-12 || got.Exact != c.isExact {
			t.Errorf("exact %v, %v: %v (exact %v, %s), want %v", c.exact, c.term, got.Value, got.Exact, got.Rule, c.want)
		}
	}
}

// TestJointL2MatchesBruteForce checks JointL2Squared against the largest
// weighted sum of squared norms over the Graver basis, and that it never
// exceeds the composition bound (the sum of the terms' own sensitivities).
func TestJointL2MatchesBruteForce(t *testing.T) {
	for _, sizes := range [][]int{{2, 3}, {3, 3}, {2, 2, 3}, {3, 3, 3}, {2, 2, 2}} {
		s := sizedSchema(t, sizes...)
		all := testTerms(s)
		var terms []query.Term
		for _, term := range all {
			ok := true
			for _, f := range term {
				ok = ok && (f.Kind == query.Identity || f.Kind == query.Total || f.Kind == query.Residual)
			}
			if ok {
				terms = append(terms, term)
			}
		}
		w := make([]float64, len(terms))
		for k := range w {
			w[k] = 1 + float64(k%3)
		}
		for _, q := range knowledgeSets(len(sizes), false) {
			basis, err := GraverBasis(context.Background(), s.Cells(), testkit.CuboidRows(s, q...))
			if err != nil {
				t.Fatal(err)
			}
			x := make([]float64, s.Cells())
			var want, comp float64
			for _, g := range basis {
				for a, v := range g {
					x[a] = float64(v)
				}
				var sum float64
				for k, term := range terms {
					for _, y := range term.Apply(x) {
						sum += w[k] * y * y
					}
				}
				want = max(want, sum)
			}
			for k, term := range terms {
				l2, err := TermL2Sensitivity(s, q, term)
				if err != nil {
					t.Fatal(err)
				}
				comp += w[k] * l2.Value * l2.Value
			}
			got, rule, ok, err := JointL2Squared(s, q, terms, w)
			if err != nil {
				t.Fatal(err)
			}
			if !ok && s.Cells() <= autoBruteCells {
				t.Fatalf("%v exact %v: no joint value on a tiny domain", sizes, q)
			}
			if ok && math.Abs(got-want) > 1e-9*(1+want) {
				t.Errorf("%v exact %v: joint %v (%s), brute force %v", sizes, q, got, rule, want)
			}
			if got > comp*(1+1e-12) {
				t.Errorf("%v exact %v: joint %v above the composition %v", sizes, q, got, comp)
			}
			// The one-cuboid enumeration on its own.
			if m := maximalCuboids(q, TrivialDims(s)); len(m) == 1 {
				stats := make([][]factorStats, len(terms))
				for k, term := range terms {
					stats[k], _ = termStats(s, term)
				}
				v, ok := jointOneExact(s, m[0], terms, stats, w)
				if !ok || math.Abs(v-want) > 1e-9*(1+want) {
					t.Errorf("%v exact %v: one-cuboid joint %v (%v), brute force %v", sizes, q, v, ok, want)
				}
			}
		}
	}
}
