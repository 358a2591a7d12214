package query

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// explicit builds each factor's matrix from its definition, independently
// of Apply.
func explicit(f Factor) [][]float64 {
	n := f.N
	row := func() []float64 { return make([]float64, n) }
	var m [][]float64
	switch f.Kind {
	case Identity:
		for i := range n {
			r := row()
			r[i] = 1
			m = append(m, r)
		}
	case Total:
		r := row()
		for i := range r {
			r[i] = 1
		}
		m = append(m, r)
	case RollUp:
		for g := range f.Groups {
			r := row()
			for i := range n {
				if int(f.Group[i]) == g {
					r[i] = 1
				}
			}
			m = append(m, r)
		}
	case Prefix:
		for i := range n {
			r := row()
			for j := 0; j <= i; j++ {
				r[j] = 1
			}
			m = append(m, r)
		}
	case Ranges:
		for i := range n {
			for j := i; j < n; j++ {
				r := row()
				for k := i; k <= j; k++ {
					r[k] = 1
				}
				m = append(m, r)
			}
		}
	case Residual:
		for k := 1; k < n; k++ {
			r := row()
			c := math.Sqrt(float64(k * (k + 1)))
			for j := range k {
				r[j] = 1 / c
			}
			r[k] = -float64(k) / c
			m = append(m, r)
		}
	case Matrix:
		for i := range f.rows {
			m = append(m, f.M[i*n:(i+1)*n])
		}
	}
	return m
}

func factors(t *testing.T) []Factor {
	ru, err := NewRollUp([]int32{0, 0, 1, 2, 1})
	if err != nil {
		t.Fatal(err)
	}
	mx, err := NewMatrix(2, 5, []float64{1, -2, 0, 3, 0.5, 0, 0, 1, 1, -1})
	if err != nil {
		t.Fatal(err)
	}
	return []Factor{NewIdentity(5), NewTotal(5), ru, NewPrefix(5), NewRanges(5), NewResidual(5), mx, NewResidual(2), NewRanges(1)}
}

func TestFactorsAgainstDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, f := range factors(t) {
		m := explicit(f)
		if len(m) != f.Rows() {
			t.Fatalf("%v: %d rows, want %d", f.Kind, f.Rows(), len(m))
		}
		x := make([]float64, f.N)
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		y := make([]float64, f.Rows())
		f.Apply(x, y)
		yt := make([]float64, f.Rows())
		for i := range yt {
			yt[i] = rng.NormFloat64()
		}
		xt := make([]float64, f.N)
		f.ApplyT(yt, xt)
		for i, r := range m {
			var s float64
			for j, v := range r {
				s += v * x[j]
			}
			if math.Abs(s-y[i]) > 1e-12 {
				t.Errorf("%v: row %d: Apply %v, want %v", f.Kind, i, y[i], s)
			}
		}
		for j := range f.N {
			var s float64
			for i, r := range m {
				s += r[j] * yt[i]
			}
			if math.Abs(s-xt[j]) > 1e-12 {
				t.Errorf("%v: column %d: ApplyT %v, want %v", f.Kind, j, xt[j], s)
			}
		}
	}
}

// The Helmert rows are orthonormal and orthogonal to the all-ones vector.
func TestResidualOrthonormal(t *testing.T) {
	for n := 2; n <= 9; n++ {
		m := explicit(NewResidual(n))
		for i := range m {
			var one float64
			for j := range m[i] {
				one += m[i][j]
			}
			if math.Abs(one) > 1e-12 {
				t.Errorf("n=%d row %d sums to %v", n, i, one)
			}
			for k := range m {
				var dot float64
				for j := range m[i] {
					dot += m[i][j] * m[k][j]
				}
				want := 0.0
				if i == k {
					want = 1
				}
				if math.Abs(dot-want) > 1e-12 {
					t.Errorf("n=%d rows %d,%d: %v", n, i, k, dot)
				}
			}
		}
	}
}

// kron is the dense Kronecker product of the factors' explicit matrices.
func kron(term Term) [][]float64 {
	out := [][]float64{{1}}
	for _, f := range term {
		m := explicit(f)
		var next [][]float64
		for _, a := range out {
			for _, b := range m {
				r := make([]float64, 0, len(a)*len(b))
				for _, u := range a {
					for _, v := range b {
						r = append(r, u*v)
					}
				}
				next = append(next, r)
			}
		}
		out = next
	}
	return out
}

func TestTermAgainstDenseKronecker(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	fs := factors(t)
	small := []Factor{NewIdentity(3), NewTotal(3), NewPrefix(3), NewRanges(3), NewResidual(3)}
	for trial := range 40 {
		term := Term{fs[trial%len(fs)], small[rng.IntN(len(small))], fs[rng.IntN(len(fs))]}
		m := kron(term)
		if len(m) != term.Rows() || len(m[0]) != term.Cells() {
			t.Fatalf("%d x %d, want %d x %d", len(m), len(m[0]), term.Rows(), term.Cells())
		}
		x := make([]float64, term.Cells())
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		y := term.Apply(x)
		yt := make([]float64, term.Rows())
		for i := range yt {
			yt[i] = rng.NormFloat64()
		}
		xt := term.ApplyT(yt)
		for i, r := range m {
			var s float64
			for j, v := range r {
				s += v * x[j]
			}
			if math.Abs(s-y[i]) > 1e-10 {
				t.Fatalf("trial %d row %d: %v, want %v", trial, i, y[i], s)
			}
		}
		for j := range x {
			var s float64
			for i := range m {
				s += m[i][j] * yt[i]
			}
			if math.Abs(s-xt[j]) > 1e-10 {
				t.Fatalf("trial %d column %d: %v, want %v", trial, j, xt[j], s)
			}
		}
	}
}

func TestConstructorsRefuse(t *testing.T) {
	if _, err := NewRollUp([]int32{0, 2}); err == nil {
		t.Error("a roll-up with an empty group was accepted")
	}
	if _, err := NewRollUp([]int32{0, -1}); err == nil {
		t.Error("a negative group was accepted")
	}
	if _, err := NewMatrix(2, 2, []float64{1, 2, 3}); err == nil {
		t.Error("a short matrix was accepted")
	}
	if _, err := NewMatrix(1, 1, []float64{math.NaN()}); err == nil {
		t.Error("a NaN entry was accepted")
	}
	w := Workload{{Term: Term{NewIdentity(2)}, Weight: 1}, {Term: Term{NewIdentity(3)}, Weight: 1}}
	if err := w.Check([]int{2}); err == nil {
		t.Error("a term of the wrong shape was accepted")
	}
	if err := (Workload{{Term: Term{NewIdentity(2)}, Weight: math.Inf(1)}}).Check([]int{2}); err == nil {
		t.Error("an infinite weight was accepted")
	}
}

// A cuboid and a prefix workload are terms of one model.
func ExampleTerm_Apply() {
	// A 2 x 3 table: sex x an ordered age band.
	x := []float64{1, 2, 3, 4, 5, 6}
	bySex := Term{NewIdentity(2), NewTotal(3)}
	cumulative := Term{NewTotal(2), NewPrefix(3)}
	fmt.Println(bySex.Apply(x), cumulative.Apply(x))
	// Output: [6 15] [5 12 21]
}
