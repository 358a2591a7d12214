package testkit

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
	"gonum.org/v1/gonum/mat"
)

// testSchema returns a schema with the given domain sizes, dimensions named
// d0, d1, ... and values v0, v1, ....
func TestSchema(t testing.TB, sizes ...int) *domain.Schema {
	t.Helper()
	dims := make([]domain.Dimension, len(sizes))
	for i, n := range sizes {
		dims[i].Name = fmt.Sprintf("d%d", i)
		for j := range n {
			dims[i].Values = append(dims[i].Values, fmt.Sprintf("v%d", j))
		}
	}
	s, err := domain.NewSchema(dims)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// marginalMatrix returns the matrix mapping the cells of cuboid over (row-
// major) to the cells of its sub-cuboid keep, built cell by cell from the
// definition (independently of project).
func MarginalMatrix(s *domain.Schema, over, keep domain.Cuboid) *mat.Dense {
	od := over.Dims()
	rows, cols := s.CuboidSize(keep), s.CuboidSize(over)
	m := mat.NewDense(rows, cols, nil)
	coord := make([]int, len(od))
	for cell := range cols {
		rem := cell
		for k := len(od) - 1; k >= 0; k-- {
			coord[k] = rem % s.Size(od[k])
			rem /= s.Size(od[k])
		}
		row := 0
		for k, d := range od {
			if keep.Has(d) {
				row = row*s.Size(d) + coord[k]
			}
		}
		m.Set(row, cell, 1)
	}
	return m
}

// pinvProject returns the point of {y : A y = rhs} nearest x, computed as
// x + A^+ (rhs - A x) with the Moore-Penrose pseudo-inverse from an SVD.
func PinvProject(t *testing.T, a *mat.Dense, rhs, x []float64) []float64 {
	t.Helper()
	rows, n := a.Dims()
	var svd mat.SVD
	if !svd.Factorize(a, mat.SVDThin) {
		t.Fatal("SVD failed")
	}
	vals := svd.Values(nil)
	var u, v mat.Dense
	svd.UTo(&u)
	svd.VTo(&v)
	res := mat.NewVecDense(rows, nil)
	res.MulVec(a, mat.NewVecDense(n, x))
	res.ScaleVec(-1, res)
	res.AddVec(res, mat.NewVecDense(rows, rhs))
	// A^+ res = V diag(1/s) U^T res over the non-zero singular values.
	var utr mat.VecDense
	utr.MulVec(u.T(), res)
	for i, sv := range vals {
		if sv > 1e-10*vals[0] {
			utr.SetVec(i, utr.AtVec(i)/sv)
		} else {
			utr.SetVec(i, 0)
		}
	}
	var corr mat.VecDense
	corr.MulVec(&v, &utr)
	y := make([]float64, n)
	for i := range y {
		y[i] = x[i] + corr.AtVec(i)
	}
	return y
}

func RandomTable(r *noise.Rand, n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = float64(r.Uint64N(20))
	}
	return x
}

func CuboidOf(dims []int) domain.Cuboid {
	var c domain.Cuboid
	for _, d := range dims {
		c |= 1 << d
	}
	return c
}

// smallGeoJSON is 2 regions > 4 states > 10 counties (unequal groups),
// crossed with sex and a 3-band age.
const SmallGeoJSON = `{"dimensions":[
 {"name":"geo","levels":["region","state","county"],
  "values":["c1","c2","c3","c4","c5","c6","c7","c8","c9","c10"],
  "parents":{"state":{"c1":"s1","c2":"s1","c3":"s2","c4":"s2","c5":"s2","c6":"s3","c7":"s4","c8":"s4","c9":"s4","c10":"s4"},
             "region":{"s1":"r1","s2":"r1","s3":"r2","s4":"r2"}}},
 {"name":"sex","values":["F","M"]},
 {"name":"age","values":["0-17","18-64","65+"]}]}`

func SmallGeo(t testing.TB) *domain.Schema {
	t.Helper()
	s, err := domain.ParseSchema([]byte(SmallGeoJSON))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func MustView(t testing.TB, s *domain.Schema, x string) domain.View {
	t.Helper()
	v, err := s.ParseView(x)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// errorCase is a call that must fail with an error that wraps is (when not
// nil) and says words.
type ErrorCase = struct {
	Name  string
	Run   func() error
	Is    error
	Words string
}

func CheckErrors(t *testing.T, cases []ErrorCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			err := tc.Run()
			if err == nil {
				t.Fatal("no error")
			}
			if tc.Is != nil && !errors.Is(err, tc.Is) {
				t.Errorf("error %q does not wrap %v", err, tc.Is)
			}
			if !strings.Contains(err.Error(), tc.Words) {
				t.Errorf("error %q does not say %q", err, tc.Words)
			}
		})
	}
}

var BenchExact = map[int][][]int{
	1: {{0, 1, 2}},
	2: {{0, 1, 2}, {2, 3}},
	4: {{0, 1, 2}, {2, 3}, {0, 4}, {5}},
}

// isPrimitiveMove checks a move of simple graphs from the definition: it
// keeps every row, and no nonempty proper subset of its edge changes does.
func IsPrimitiveMove(t *testing.T, rows [][]int, move map[int]int) bool {
	t.Helper()
	keeps := func(z map[int]int) bool {
		for _, r := range rows {
			s := 0
			for _, c := range r {
				s += z[c]
			}
			if s != 0 {
				return false
			}
		}
		return true
	}
	if !keeps(move) {
		t.Fatalf("move %v changes a known degree", move)
	}
	var cs []int
	for c := range move {
		cs = append(cs, c)
	}
	for sub := 1; sub < 1<<len(cs)-1; sub++ {
		z := map[int]int{}
		for i, c := range cs {
			if sub&(1<<i) != 0 {
				z[c] = move[c]
			}
		}
		if keeps(z) {
			return false
		}
	}
	return true
}

// benchShapes are cubes of 1e6, 1e7 and 1e8 cells with ten values per
// dimension; the exact cuboids overlap the way census invariants do.
var BenchShapes = []struct {
	Name  string
	Dims  int
	exact [][]int
}{
	{"1e6", 6, nil},
	{"1e7", 7, nil},
	{"1e8", 8, nil},
}

// cuboidRows returns, for each exact cuboid, the rows of the constraint
// matrix: the base cells of each of its cells, computed from coordinates.
func CuboidRows(s *domain.Schema, exact ...domain.Cuboid) [][]int {
	var rows [][]int
	for _, c := range exact {
		byCell := map[string][]int{}
		var keys []string
		for a := range s.Cells() {
			k := ""
			for i := range s.NumDims() {
				if c.Has(i) {
					k += fmt.Sprintf("%d,", a/s.Stride(i)%s.Size(i))
				}
			}
			if _, ok := byCell[k]; !ok {
				keys = append(keys, k)
			}
			byCell[k] = append(byCell[k], a)
		}
		for _, k := range keys {
			rows = append(rows, byCell[k])
		}
	}
	return rows
}

// canonical returns a key for the pair ±g.
func Canonical(g []int) string {
	sign := 1
	for _, v := range g {
		if v != 0 {
			if v < 0 {
				sign = -1
			}
			break
		}
	}
	var b strings.Builder
	for _, v := range g {
		fmt.Fprintf(&b, "%d,", sign*v)
	}
	return b.String()
}

func L1(g []int) int {
	t := 0
	for _, v := range g {
		t += max(v, -v)
	}
	return t
}

func Noisy(r *noise.Rand, x []float64, scale float64) []float64 {
	l, _ := noise.NewLaplace(1, 1/scale)
	y := append([]float64(nil), x...)
	l.AddTo(r, y)
	return y
}

// CrossedJSON is geography (2 regions > 4 states > 9 counties, unequal
// groups) crossed with age (2 broad bands > 4 bands > 8 years) and sex.
const CrossedJSON = `{"dimensions":[
 {"name":"geo","levels":["region","state","county"],
  "values":["c1","c2","c3","c4","c5","c6","c7","c8","c9"],
  "parents":{"state":{"c1":"s1","c2":"s1","c3":"s2","c4":"s2","c5":"s2","c6":"s3","c7":"s4","c8":"s4","c9":"s4"},
             "region":{"s1":"r1","s2":"r1","s3":"r2","s4":"r2"}}},
 {"name":"sex","values":["F","M"]},
 {"name":"age","levels":["broad","band","year"],
  "values":["0","1","2","3","4","5","6","7"],
  "parents":{"band":{"0":"b0","1":"b0","2":"b1","3":"b1","4":"b2","5":"b2","6":"b3","7":"b3"},
             "broad":{"b0":"young","b1":"young","b2":"old","b3":"old"}}}]}`

// Crossed parses CrossedJSON.
func Crossed(t testing.TB) *domain.Schema {
	t.Helper()
	s, err := domain.ParseSchema([]byte(CrossedJSON))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
