package plan_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/knowdp/knowdp/plan"
)

// checkResult fails unless res is a point of the simplex whose objective
// is F there, finite, with a bound in [0, objective] and the gap they
// give.
func checkResult(t *testing.T, pr plan.Problem, res plan.Result) {
	t.Helper()
	var sum float64
	for _, v := range res.X {
		if !(v >= 0) || math.IsInf(v, 0) {
			t.Fatalf("share %v in %v", v, res.X)
		}
		sum += v
	}
	if math.Abs(sum-1) > 1e-9 {
		t.Fatalf("shares sum to %v", sum)
	}
	if f := pr.Value(res.X); f != res.Objective || math.IsInf(f, 0) || !(f > 0) {
		t.Fatalf("objective %v, F(X) %v", res.Objective, f)
	}
	if !(res.Bound >= 0 && res.Bound <= res.Objective) || math.Abs(res.Gap-(res.Objective-res.Bound)/res.Objective) > 1e-15 ||
		res.Global != (res.Gap <= 1e-6) {
		t.Fatalf("bound %v, objective %v, gap %v, global %v", res.Bound, res.Objective, res.Gap, res.Global)
	}
}

// solveWithin runs Solve under a deadline and fails the test if it does
// not return soon after: a solver loop that ignores its context, or does
// not end, shows here instead of hanging the test binary.
func solveWithin(t *testing.T, pr plan.Problem, limit time.Duration) (plan.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	type out struct {
		res plan.Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := plan.Solve(ctx, pr, plan.Options{})
		done <- out{res, err}
	}()
	select {
	case o := <-done:
		return o.res, o.err
	case <-time.After(limit + 5*time.Second):
		t.Fatalf("Solve did not return %v after its deadline (%v)", 5*time.Second, limit)
		return plan.Result{}, nil
	}
}

// Weights and coefficients spanning up to 600 orders of magnitude, and
// magnitudes near the ends of float64: Solve returns within its deadline
// a valid result (certified where the case says so) or ErrNotFinite, never
// a hang. Before the
// guards, a coefficient of 1e-300 beside 1 hung the barrier's Cholesky
// loop (the shifted Hessian never became positive definite once it held
// Inf). Scaling makes the magnitude itself harmless: [1e300, 1e300] is
// [1, 1].
func TestSolveExtreme(t *testing.T) {
	two := [][]int{{0}, {1}}
	shared := [][]int{{0}, {1}, {0, 1}}
	for _, tc := range []struct {
		name string
		pr   plan.Problem
		// solved: a certified result is wanted (not ErrNotFinite); x0,
		// when > 0, is the optimal first share (closed form) to 1e-6.
		solved bool
		x0     float64
	}{
		{"weights 1e300:1, laplace", plan.Problem{Power: 2, Coef: []float64{1, 1}, Weights: []float64{1e300, 1}, Covers: two}, true, 0},
		{"weights 1e300:1, gaussian", plan.Problem{Power: 1, Coef: []float64{1, 1}, Weights: []float64{1e300, 1}, Covers: two}, true, 0},
		{"coefficients 1e-300:1, laplace", plan.Problem{Power: 2, Coef: []float64{1e-300, 1}, Weights: []float64{1, 1}, Covers: two}, false, 0},
		{"coefficients 1e-300:1, gaussian", plan.Problem{Power: 1, Coef: []float64{1e-300, 1}, Weights: []float64{1, 1}, Covers: two}, false, 0},
		{"weights 1e300 both", plan.Problem{Power: 2, Coef: []float64{1, 1}, Weights: []float64{1e300, 1e300}, Covers: two}, true, 0.5},
		{"weights 1e308 both: F overflows", plan.Problem{Power: 2, Coef: []float64{1, 1}, Weights: []float64{1e308, 1e308}, Covers: two}, false, 0},
		{"weights 4e-324 both", plan.Problem{Power: 1, Coef: []float64{1, 1}, Weights: []float64{4e-324, 4e-324}, Covers: two}, true, 0.5},
		{"coefficients 1e-308, weights 1e308", plan.Problem{Power: 2, Coef: []float64{1e-308, 1e-308}, Weights: []float64{1e308, 1e308}, Covers: two}, false, 0},
		{"shared, weights 1e300:1e-300", plan.Problem{Power: 2, Coef: []float64{1, 1}, Weights: []float64{1e300, 1e-300, 1}, Covers: shared}, false, 0},
		{"shared, coefficients 1e-300:1e300", plan.Problem{Power: 2, Coef: []float64{1e-300, 1e300}, Weights: []float64{1, 1, 1}, Covers: shared}, false, 0},
		{"shared gaussian, coefficients 1e-300:1e300", plan.Problem{Power: 1, Coef: []float64{1e-300, 1e300}, Weights: []float64{1, 1, 1}, Covers: shared}, false, 0},
		{"weights 1e24:1 (what a workload can reach), laplace", plan.Problem{Power: 2, Coef: []float64{1, 3}, Weights: []float64{1e24, 1, 1}, Covers: shared}, true, 0},
		{"weights 1e24:1, gaussian", plan.Problem{Power: 1, Coef: []float64{1, 3}, Weights: []float64{1e24, 1, 1}, Covers: shared}, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := solveWithin(t, tc.pr, 20*time.Second)
			switch {
			case errors.Is(err, plan.ErrNotFinite) && !tc.solved:
				return
			case err != nil:
				t.Fatal(err)
			}
			checkResult(t, tc.pr, res)
			if tc.x0 > 0 && math.Abs(res.X[0]-tc.x0) > 1e-6 {
				t.Errorf("split %v, want %v first", res.X, tc.x0)
			}
			if tc.solved && !res.Global {
				t.Errorf("not certified: gap %v (%s)", res.Gap, res.Method)
			}
		})
	}
}

// A context that has ended stops Solve: at once when it ended before, and
// within a few Newton steps when it ends during the branch-and-bound.
func TestSolveContext(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	pr := randomProblem(rng, 6, 30, 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := plan.Solve(ctx, pr, plan.Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled context: %v", err)
	}
	// 5000 boxes of a hard problem take seconds; a 20 ms deadline ends it.
	hard := randomProblem(rng, 6, 40, 2)
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := plan.Solve(ctx, hard, plan.Options{Tol: 1e-15, MaxNodes: 1 << 30})
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took > time.Second {
		t.Fatalf("after %v: %v", took, err)
	}
}

// FuzzSolve drives Solve with arbitrary finite weights and coefficients
// (any exponent float64 has) on small problems with shared terms: every
// call returns within its deadline with a valid result or ErrNotFinite,
// and never panics. The seed corpus runs as a normal test.
func FuzzSolve(f *testing.F) {
	f.Add(uint8(2), uint8(3), 1.0, 1e300, 1.0, 1e-300, uint8(0b101))
	f.Add(uint8(1), uint8(2), 1e308, 1e308, 1e-308, 1.0, uint8(0b11))
	f.Add(uint8(2), uint8(4), 5e-324, 1.0, 1.0, 1.0, uint8(0b110))
	f.Add(uint8(1), uint8(5), 1e-200, 1e200, 1e100, 1e-100, uint8(0b1111))
	f.Fuzz(func(t *testing.T, power, n uint8, w0, w1, c0, c1 float64, shape uint8) {
		pr := plan.Problem{Power: 1 + int(power%2)}
		m := 2 + int(n%5)
		for k := range m {
			c := c0
			if k%2 == 1 {
				c = c1
			}
			pr.Coef = append(pr.Coef, math.Abs(c)*float64(k+1))
			pr.Covers = append(pr.Covers, []int{k})
			w := w0
			if k%2 == 1 {
				w = w1
			}
			pr.Weights = append(pr.Weights, math.Abs(w))
			if shape&(1<<k) != 0 {
				pr.Covers = append(pr.Covers, []int{k, (k + 1) % m})
				pr.Weights = append(pr.Weights, math.Abs(w1))
			}
		}
		if pr.Validate() != nil {
			return // zero, infinite or NaN entries: refused, as tested elsewhere
		}
		res, err := solveWithin(t, pr, 10*time.Second)
		switch {
		case errors.Is(err, plan.ErrNotFinite):
		case err != nil:
			t.Fatal(err)
		default:
			checkResult(t, pr, res)
		}
	})
}

// The work Solve does stays within WorkBound of the problem's shape, on
// workload-shaped problems of both powers, within and beyond GlobalMax; a
// small MaxWork stops it early with a valid, honestly certified result.
func TestWorkBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, power := range []int{1, 2} {
		for _, n := range []int{1, 3, 6, 9, 20} {
			pr := randomProblem(rng, n, 3*n, power)
			res, err := plan.Solve(context.Background(), pr, plan.Options{})
			if err != nil {
				t.Fatal(err)
			}
			bound := plan.WorkBound(pr.Shape(), plan.Options{})
			if !(res.Work > 0 && (res.Steps > 0 || n == 1)) || res.Work > bound {
				t.Errorf("power %d, n %d: work %v (%d steps), bound %v", power, n, res.Work, res.Steps, bound)
			}
			if n == 1 {
				continue // one measurement: nothing to search
			}
			capped, err := plan.Solve(context.Background(), pr, plan.Options{MaxWork: res.Work / 10})
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, pr, capped)
			if capped.Work > res.Work/2 || capped.Gap < res.Gap {
				t.Errorf("power %d, n %d: capped at %v, work %v, gap %v (uncapped %v)", power, n, res.Work/10, capped.Work, capped.Gap, res.Gap)
			}
		}
	}
	// WorkBound grows with every part of the shape but the number of
	// measurements, whose threshold changes the search.
	sh := plan.Shape{Measurements: 8, Covers: 40, CoverSquares: 100, Power: 2}
	base := plan.WorkBound(sh, plan.Options{})
	for _, more := range []plan.Shape{{Measurements: 9, Covers: 40, CoverSquares: 100, Power: 2},
		{Measurements: 8, Covers: 41, CoverSquares: 100, Power: 2}, {Measurements: 8, Covers: 40, CoverSquares: 101, Power: 2}} {
		if b := plan.WorkBound(more, plan.Options{}); !(b > base) {
			t.Errorf("%+v: bound %v, not above %v", more, b, base)
		}
	}
}

// A meter on the context adds up the work of every solve under it, also
// of one its context stopped.
func TestMeter(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	var m plan.Meter
	ctx := plan.WithMeter(context.Background(), &m)
	var sum float64
	for range 3 {
		res, err := plan.Solve(ctx, randomProblem(rng, 5, 12, 2), plan.Options{})
		if err != nil {
			t.Fatal(err)
		}
		sum += res.Work
	}
	if m.Work() != sum || !(sum > 0) {
		t.Fatalf("meter %v, the solves' work %v", m.Work(), sum)
	}
	stopped, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	if _, err := plan.Solve(stopped, randomProblem(rng, 6, 40, 2), plan.Options{Tol: 1e-15, MaxNodes: 1 << 30}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v, want the deadline", err)
	}
	if !(m.Work() > sum) {
		t.Fatalf("the stopped solve's work was not metered: %v", m.Work())
	}
}
