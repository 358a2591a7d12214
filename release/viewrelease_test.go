package release

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/estimate"
	"github.com/knowdp/knowdp/internal/testkit"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
)

// middleGeoJSON is smallGeoJSON with the hierarchy between two flat
// dimensions, so that tables must be reordered for the estimator.
const middleGeoJSON = `{"dimensions":[
 {"name":"sex","values":["F","M"]},
 {"name":"geo","levels":["region","state","county"],
  "values":["c1","c2","c3","c4","c5","c6","c7","c8","c9","c10"],
  "parents":{"state":{"c1":"s1","c2":"s1","c3":"s2","c4":"s2","c5":"s2","c6":"s3","c7":"s4","c8":"s4","c9":"s4","c10":"s4"},
             "region":{"s1":"r1","s2":"r1","s3":"r2","s4":"r2"}}},
 {"name":"age","values":["0-17","18-64","65+"]}]}`

// rollUpMatrix returns the matrix of the roll-up from the base cuboid to v.
func rollUpMatrix(t *testing.T, s *domain.Schema, v domain.View) *mat.Dense {
	n := s.Cells()
	m := mat.NewDense(s.ViewSize(v), n, nil)
	e := make([]float64, n)
	for c := range n {
		e[c] = 1
		col, err := s.RollUp(domain.View{Dims: domain.Base(s.NumDims())}, e, v)
		if err != nil {
			t.Fatal(err)
		}
		for r, x := range col {
			m.Set(r, c, x)
		}
		e[c] = 0
	}
	return m
}

// denseViewEstimate solves the weighted least-squares problem with equality
// constraints by the pseudo-inverse of its KKT system, and returns the
// tables of the views.
func denseViewEstimate(t *testing.T, s *domain.Schema, meas []domain.View, vars []float64, z [][]float64, exact []domain.View, e [][]float64, views []domain.View) [][]float64 {
	n := s.Cells()
	var rows int
	for _, x := range exact {
		rows += s.ViewSize(x)
	}
	kkt := mat.NewDense(n+rows, n+rows, nil)
	rhs := mat.NewVecDense(n+rows, nil)
	for j, v := range meas {
		a := rollUpMatrix(t, s, v)
		var ata mat.Dense
		ata.Mul(a.T(), a)
		ata.Scale(2/vars[j], &ata)
		sub := kkt.Slice(0, n, 0, n).(*mat.Dense)
		sub.Add(sub, &ata)
		var atz mat.VecDense
		atz.MulVec(a.T(), mat.NewVecDense(len(z[j]), z[j]))
		for i := range n {
			rhs.SetVec(i, rhs.AtVec(i)+2/vars[j]*atz.AtVec(i))
		}
	}
	off := n
	for k, v := range exact {
		a := rollUpMatrix(t, s, v)
		r, _ := a.Dims()
		for i := range r {
			for c := range n {
				kkt.Set(off+i, c, a.At(i, c))
				kkt.Set(c, off+i, a.At(i, c))
			}
			rhs.SetVec(off+i, e[k][i])
		}
		off += r
	}
	var svd mat.SVD
	if !svd.Factorize(kkt, mat.SVDThin) {
		t.Fatal("SVD failed")
	}
	var x mat.VecDense
	svd.SolveVecTo(&x, rhs, svd.Rank(1e-10))
	out := make([][]float64, len(views))
	for q, v := range views {
		a := rollUpMatrix(t, s, v)
		var y mat.VecDense
		y.MulVec(a, x.SliceVec(0, n))
		out[q] = make([]float64, y.Len())
		for i := range out[q] {
			out[q][i] = y.AtVec(i)
		}
	}
	return out
}

func TestViewEstimateAgainstDense(t *testing.T) {
	for _, doc := range []string{testkit.SmallGeoJSON, middleGeoJSON} {
		s, err := domain.ParseSchema([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(7, 8))
		base := make([]float64, s.Cells())
		for i := range base {
			base[i] = float64(rng.IntN(30))
		}
		for _, tc := range []struct {
			views, exact []string
		}{
			{[]string{"geo:region", "geo:state,sex", "geo,sex,age"}, []string{"geo:state"}},
			{[]string{"geo:region,age", "geo:state,sex", "geo,sex"}, nil},
			{[]string{"geo:state,sex,age", "geo,age", "sex,age"}, []string{"geo:region,sex", ""}},
			{[]string{"geo:region", "geo:state", "geo"}, []string{"geo:state"}},
		} {
			spec := viewSpec{Epsilon: mustEps(t, 1), Split: SplitSpine}
			for _, x := range tc.views {
				spec.Views = append(spec.Views, testkit.MustView(t, s, x))
			}
			for _, x := range tc.exact {
				spec.Exact = append(spec.Exact, testkit.MustView(t, s, x))
			}
			p, err := planViews(s, spec)
			if err != nil {
				t.Fatal(err)
			}
			full := domain.View{Dims: domain.Base(3)}
			var inv []estimate.Invariant
			var ev [][]float64
			for _, e := range p.exact {
				x, _ := s.RollUp(full, base, e)
				inv = append(inv, estimate.Invariant{Cuboid: e.Dims, View: e, Counts: x})
				ev = append(ev, x)
			}
			var mv []domain.View
			var vars []float64
			noisy := make([][]float64, len(p.meas))
			for k, m := range p.meas {
				x, _ := s.RollUp(full, base, m.v)
				for i := range x {
					x[i] += rng.NormFloat64() * math.Sqrt(m.variance)
				}
				noisy[k] = x
				mv, vars = append(mv, m.v), append(vars, m.variance)
			}
			tables := append([]Table(nil), p.tables...)
			if err := p.estimate(context.Background(), tables, inv, append([][]float64(nil), noisy...)); err != nil {
				t.Fatalf("%v: %v", tc.views, err)
			}
			var views []domain.View
			for _, tb := range tables {
				views = append(views, tb.View)
			}
			want := denseViewEstimate(t, s, mv, vars, noisy, p.exact, ev, views)
			for q, tb := range tables {
				for i := range tb.Counts {
					if d := math.Abs(tb.Counts[i] - want[q][i]); d > 1e-9*math.Max(1, math.Abs(want[q][i])) {
						t.Fatalf("%v exact %v: %s cell %d: %v, dense %v", tc.views, tc.exact, s.FormatView(tb.View), i, tb.Counts[i], want[q][i])
					}
				}
			}
		}
	}
}

func mustEps(t testing.TB, x float64) privacy.Epsilon {
	e, err := privacy.NewEpsilon(x)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestReleaseViewsConsistent releases three levels under one budget and
// checks every table against every roll-up relation and the invariants.
func TestReleaseViewsConsistent(t *testing.T) {
	s := testkit.SmallGeo(t)
	rng := rand.New(rand.NewPCG(9, 9))
	base := make([]float64, s.Cells())
	for i := range base {
		base[i] = float64(rng.IntN(30))
	}
	spec := viewSpec{Epsilon: mustEps(t, 1), Split: SplitSpine,
		Views: []domain.View{testkit.MustView(t, s, "geo:region"), testkit.MustView(t, s, "geo:state,sex"), testkit.MustView(t, s, "geo,sex,age"), testkit.MustView(t, s, "geo:state")},
		Exact: []domain.View{testkit.MustView(t, s, "geo:state")}}
	needs, err := needsOf(s, spec.spec())
	if err != nil {
		t.Fatal(err)
	}
	counts := map[domain.View][]float64{}
	for _, v := range needs {
		counts[v], _ = s.RollUp(domain.View{Dims: domain.Base(3)}, base, v)
	}
	rel, err := runViews(context.Background(), s, counts, spec, noise.NewSeeded(1))
	if err != nil {
		t.Fatal(err)
	}
	if rel.Epsilon > 1 {
		t.Fatalf("spent %v > 1", rel.Epsilon)
	}
	byView := map[domain.View][]float64{}
	for _, tb := range rel.Tables {
		byView[tb.View] = tb.Counts
	}
	for a, xa := range byView {
		for b, xb := range byView {
			if a == b || !b.RollUpOf(a) {
				continue
			}
			r, _ := s.RollUp(a, xa, b)
			for i := range r {
				if math.Abs(r[i]-xb[i]) > 1e-9 {
					t.Fatalf("%s rolled up to %s: cell %d %v != %v", s.FormatView(a), s.FormatView(b), i, r[i], xb[i])
				}
			}
		}
	}
	states, _ := s.RollUp(domain.View{Dims: domain.Base(3)}, base, testkit.MustView(t, s, "geo:state"))
	for i, x := range byView[testkit.MustView(t, s, "geo:state")] {
		if x != states[i] {
			t.Fatalf("state %d: %v, invariant %v", i, x, states[i])
		}
	}
	if len(rel.Levels) != 3 || rel.Levels[0].Level != "region" || rel.Levels[2].Level != "county" {
		t.Fatalf("levels %+v", rel.Levels)
	}
}

// TestReleaseViewsCoverage checks that moe90 covers the true count in 90%
// ± 1.5% of the cells of every level, for Laplace and Gaussian noise, over
// many seeded releases (the standard error of a level's coverage is below
// 0.25% at these sample sizes, so the band is six standard errors).
func TestReleaseViewsCoverage(t *testing.T) {
	s := testkit.SmallGeo(t)
	rng := rand.New(rand.NewPCG(10, 11))
	base := make([]float64, s.Cells())
	for i := range base {
		base[i] = float64(rng.IntN(30))
	}
	runs := 600
	if testing.Short() {
		runs = 100
	}
	for _, gaussian := range []bool{false, true} {
		spec := viewSpec{Split: SplitSpine,
			Views: []domain.View{testkit.MustView(t, s, "geo:region,sex,age"), testkit.MustView(t, s, "geo:state,sex"), testkit.MustView(t, s, "geo,sex,age"), testkit.MustView(t, s, "sex,age")},
			Exact: []domain.View{testkit.MustView(t, s, "geo:state")}}
		if gaussian {
			spec.Mechanism, spec.Rho, spec.Delta = MechanismGaussian, mustRho(t, 0.5), 1e-6
		} else {
			spec.Epsilon = mustEps(t, 1)
		}
		needs, err := needsOf(s, spec.spec())
		if err != nil {
			t.Fatal(err)
		}
		counts := map[domain.View][]float64{}
		for _, v := range needs {
			counts[v], _ = s.RollUp(domain.View{Dims: domain.Base(3)}, base, v)
		}
		in, all := map[string]int{}, map[string]int{}
		r := noise.NewSeeded(12)
		for range runs {
			rel, err := runViews(context.Background(), s, counts, spec, r.Split())
			if err != nil {
				t.Fatal(err)
			}
			for _, tb := range rel.Tables {
				if tb.Public {
					continue
				}
				truth, _ := s.RollUp(domain.View{Dims: domain.Base(3)}, base, tb.View)
				name := s.FormatView(tb.View)
				for i, x := range tb.Counts {
					all[name]++
					if math.Abs(x-truth[i]) <= tb.MOE90s[i] {
						in[name]++
					}
				}
			}
		}
		for name, n := range all {
			cov := float64(in[name]) / float64(n)
			// The band, 1.5%, is at least three standard errors of
			// every table's coverage at 600 runs; -short runs fewer and
			// allows four standard errors.
			tol := 1.5
			if testing.Short() {
				tol = max(tol, 400*math.Sqrt(0.09/float64(n)))
			}
			if math.Abs(cov-0.9) > tol/100 {
				t.Errorf("gaussian=%v %s: coverage %.4f over %d cells, want 0.90 ± %.1f%%", gaussian, name, cov, n, tol)
			}
			t.Logf("gaussian=%v %s: coverage %.4f over %d cells", gaussian, name, cov, n)
		}
	}
}

func mustRho(t testing.TB, x float64) privacy.Rho {
	r, err := privacy.NewRho(x)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
