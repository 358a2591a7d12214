package metricdp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// The optimal allocation. With precisions t_l = 1/b_l the
// expected squared error 2 sum_l b_l^2 of the Laplace mechanism is minimised
// by
//
//	minimise   f(t) = sum_l 1/t_l^2
//	subject to a_p . t <= 1  for every pair p = (i,j) at finite distance,
//	           t > 0,
//
// where a_pl = |F[l,i] - F[l,j]| / d(u_i,u_j). f is convex on t > 0 and the
// constraints are linear, so this is a convex program (the paper calls the
// problem non-convex because it optimises the scales b themselves). There are
// N(N-1)/2 constraints, about 354,000 for N = 842, but only a few are active
// at the optimum, so allocateOptimal solves it by cutting planes: it solves
// the problem on a small working set of pairs with a log-barrier Newton
// method, scans all pairs for constraints the solution violates, adds the
// worst, and repeats. Each working-set problem relaxes the full one, so when
// no pair is violated the solution is optimal for all pairs.
//
// Inside, the variables are y_l = beta_l t_l with beta_l the query's
// stand-alone scale, so that every y_l lies in (0, 1] (query l's own binding
// pair caps it). The objective's weights beta_l^2 still differ by the square
// of the spread of the queries' scales (1e16 for an elevation in metres next
// to a 0/1 indicator), so the Newton systems are solved by a column-scaled
// QR of their square root rather than by Cholesky of the Hessian, and each
// working-set problem is solved twice, the second time with the barrier
// weighted by the first solve's multipliers (see solveWorkingSet). If the
// solver still fails, NewAllocation falls back to the best of strategies
// 1-3 and says so in the Allocation's Note.

// optResult is the optimal allocation with the certificate tests check.
type optResult struct {
	t      []float64 // precisions; +Inf for queries that need no noise
	pairs  [][2]int  // the final working set of constraint pairs
	lambda []float64 // their Lagrange multipliers
	rounds int       // cutting-plane rounds
	newton int       // Newton steps in all
}

// Solver tolerances.
const (
	optViolationTol = 1e-9 // a pair is violated when its load exceeds 1 + this
	optGapTol       = 1e-9 // relative duality gap of each working-set solve
	optMaxRounds    = 200  // cutting-plane rounds
)

func allocateOptimal(ctx context.Context, m Metric, q *Queries, beta []float64) (optResult, error) {
	k := q.k
	var live []int // queries that need noise
	for l, b := range beta {
		if b > 0 {
			live = append(live, l)
		}
	}
	res := optResult{t: make([]float64, k)}
	for l := range res.t {
		res.t[l] = math.Inf(1)
	}
	if len(live) == 0 {
		return res, nil
	}
	// The cheap strategies give a feasible start and a floor the result is
	// checked against.
	tEqual := allocateEqual(beta)
	tSame, err := allocateSame(ctx, m, q, beta)
	if err != nil {
		return res, err
	}

	// Initial working set: each query's binding pair and the pairs that bind
	// the same-scale allocation.
	ws := newWorkingSet()
	binding, err := bindingPairs(ctx, m, q, beta)
	if err != nil {
		return res, err
	}
	for _, p := range binding {
		ws.add(p)
	}
	top, err := loadedPairs(ctx, m, q, tSame, 1-1e-6, 4*len(live))
	if err != nil {
		return res, err
	}
	for _, p := range top {
		ws.add(p.pair)
	}

	kk := len(live)
	c := make([]float64, kk) // objective sum_l c_l / y_l^2 with c_l = beta_l^2
	for a, l := range live {
		c[a] = beta[l] * beta[l]
	}
	y0 := make([]float64, kk)
	for a, l := range live {
		y0[a] = 0.5 * beta[l] * tEqual[l] // strictly feasible for every pair
	}
	perRound := max(2*kk, 20)
	t := slices.Clone(tSame)
	var lambda []float64
	for res.rounds = 1; ; res.rounds++ {
		if res.rounds > optMaxRounds {
			return res, fmt.Errorf("metricdp: optimal allocation did not converge in %d cutting-plane rounds", optMaxRounds)
		}
		// Constraint rows in y-space: a_pl / beta_l.
		A := make([][]float64, len(ws.pairs))
		for r, p := range ws.pairs {
			A[r] = make([]float64, kk)
			d := m.Dist(p[0], p[1])
			ci, cj := q.col(p[0]), q.col(p[1])
			for a, l := range live {
				A[r][a] = math.Abs(ci[l]-cj[l]) / d / beta[l]
			}
		}
		y, lam, steps, err := solveWorkingSet(ctx, A, c, y0)
		res.newton += steps
		if err != nil {
			return res, err
		}
		lambda = lam
		for a, l := range live {
			t[l] = y[a] / beta[l]
		}
		viol, err := loadedPairs(ctx, m, q, t, 1+optViolationTol, perRound)
		if err != nil {
			return res, err
		}
		added := 0
		for _, p := range viol {
			if ws.add(p.pair) {
				added++
			}
		}
		if added == 0 {
			// Either nothing is violated, or the violated pairs are already in
			// the working set (and violated only by the solver's tolerance).
			break
		}
	}
	if err := normalise(ctx, m, q, t); err != nil {
		return res, err
	}
	// Guard against a numerical failure of the solver: the optimum can be no
	// worse than any feasible allocation. Tests check that the guard never
	// fires on the instances they try.
	if f := objective(t); f > objective(tEqual)*(1+1e-9) || f > objective(tSame)*(1+1e-9) {
		return res, errors.New("metricdp: optimal allocation lost to a simple strategy (solver failure)")
	}
	res.t = t
	res.pairs = ws.pairs
	res.lambda = lambda
	return res, nil
}

// objective returns sum_l 1/t_l^2 over queries that need noise.
func objective(t []float64) float64 {
	var f float64
	for _, v := range t {
		if !math.IsInf(v, 1) {
			f += 1 / (v * v)
		}
	}
	return f
}

type workingSet struct {
	pairs [][2]int
	seen  map[[2]int]bool
}

func newWorkingSet() *workingSet { return &workingSet{seen: map[[2]int]bool{}} }

func (w *workingSet) add(p [2]int) bool {
	if w.seen[p] {
		return false
	}
	w.seen[p] = true
	w.pairs = append(w.pairs, p)
	return true
}

// bindingPairs returns, for each query that needs noise, a pair achieving
// its stand-alone scale beta_l.
func bindingPairs(ctx context.Context, m Metric, q *Queries, beta []float64) ([][2]int, error) {
	k := q.k
	nw := scanWorkers(q.n)
	best := make([][]float64, nw)
	arg := make([][][2]int, nw)
	for w := range nw {
		best[w] = make([]float64, k)
		arg[w] = make([][2]int, k)
	}
	err := scanPairs(ctx, m, func(w, i int, d []float64) {
		ci := q.col(i)
		for o, dij := range d {
			if math.IsInf(dij, 1) {
				continue
			}
			j := i + 1 + o
			cj := q.col(j)
			for l, c := range ci {
				if r := math.Abs(c-cj[l]) / dij; r > best[w][l] {
					best[w][l], arg[w][l] = r, [2]int{i, j}
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}
	var out [][2]int
	for l, b := range beta {
		if b == 0 {
			continue
		}
		bw := 0
		for w := range nw {
			if best[w][l] > best[bw][l] {
				bw = w
			}
		}
		out = append(out, arg[bw][l])
	}
	return out, nil
}

type loadedPair struct {
	pair [2]int
	load float64
}

// loadedPairs returns up to limit pairs whose load a_p . t exceeds thresh,
// the most loaded first.
func loadedPairs(ctx context.Context, m Metric, q *Queries, t []float64, thresh float64, limit int) ([]loadedPair, error) {
	tt := finitePart(t)
	nw := scanWorkers(q.n)
	found := make([][]loadedPair, nw)
	err := scanPairs(ctx, m, func(w, i int, d []float64) {
		ci := q.col(i)
		for o, dij := range d {
			if math.IsInf(dij, 1) {
				continue
			}
			j := i + 1 + o
			cj := q.col(j)
			var s float64
			for l, c := range ci {
				s += math.Abs(c-cj[l]) * tt[l]
			}
			if s > thresh*dij {
				found[w] = append(found[w], loadedPair{[2]int{i, j}, s / dij})
				if len(found[w]) > 4*limit {
					found[w] = keepTop(found[w], limit)
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}
	var all []loadedPair
	for _, f := range found {
		all = append(all, f...)
	}
	return keepTop(all, limit), nil
}

func keepTop(p []loadedPair, limit int) []loadedPair {
	slices.SortFunc(p, func(a, b loadedPair) int {
		if c := cmp.Compare(b.load, a.load); c != 0 {
			return c
		}
		return cmp.Compare(a.pair[0]*1<<31+a.pair[1], b.pair[0]*1<<31+b.pair[1])
	})
	if len(p) > limit {
		p = p[:limit]
	}
	return p
}

// solveWorkingSet solves a working-set problem by barrierSolve twice: with
// equal weights, then with each constraint's weight its multiplier from the
// first solve. With equal weights the central path has lambda_p s_p = 1/tau
// for every pair, so a pair with a small multiplier (one that caps a query
// of small scale, whose term in the objective is tiny) keeps a large slack
// until tau is far beyond what float64 allows for the pairs with large
// multipliers, whose slacks 1/(tau lambda_p) fall below rounding: the small
// queries' scales came out up to a few per cent too large. With weights
// w_p ~ lambda_p the slacks w_p/(tau lambda_p) shrink together.
func solveWorkingSet(ctx context.Context, A [][]float64, c, y0 []float64) ([]float64, []float64, int, error) {
	w := make([]float64, len(A))
	for p := range w {
		w[p] = 1
	}
	y, lam, steps, err := barrierSolve(ctx, A, c, y0, w)
	if err != nil {
		return nil, nil, steps, err
	}
	top := slices.Max(lam)
	for p, l := range lam {
		// The floor keeps every weight a normal float64 well above
		// underflow; such pairs are inactive by orders of magnitude.
		w[p] = max(l/top, 1e-30)
	}
	y2, lam2, steps2, err := barrierSolve(ctx, A, c, y, w)
	steps += steps2
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, steps, err
		}
		// The first solve stands: feasible, and optimal up to its gap.
		return y, lam, steps, nil
	}
	return y2, lam2, steps, nil
}

// barrierSolve minimises sum_l c_l / y_l^2 subject to A y <= 1 (A >= 0,
// every column nonzero so the problem is bounded) from a strictly feasible
// y0 > 0, by the weighted log-barrier method: it minimises tau f(y) -
// sum_p w_p log(1 - a_p . y) with damped Newton steps for increasing tau
// until the duality gap sum_p w_p/tau is below optGapTol * f. It returns y,
// the multipliers lambda_p = w_p/(tau s_p) (which satisfy the KKT
// conditions up to the gap), and the number of Newton steps.
func barrierSolve(ctx context.Context, A [][]float64, c, y0, w []float64) ([]float64, []float64, int, error) {
	k, m := len(c), len(A)
	var wsum float64
	for _, v := range w {
		wsum += v
	}
	y := slices.Clone(y0)
	s := make([]float64, m)
	slack := func(y []float64, s []float64) bool {
		for _, v := range y {
			if !(v > 0) {
				return false
			}
		}
		for p, a := range A {
			var v float64
			for l, x := range a {
				v += x * y[l]
			}
			s[p] = 1 - v
			if !(s[p] > 0) {
				return false
			}
		}
		return true
	}
	f := func(y []float64) float64 {
		var v float64
		for l, x := range y {
			v += c[l] / (x * x)
		}
		return v
	}
	phi := func(tau float64, y, s []float64) float64 {
		v := tau * f(y)
		for p, x := range s {
			v -= w[p] * math.Log(x)
		}
		return v
	}
	if !slack(y, s) {
		return nil, nil, 0, errors.New("metricdp: barrier start is not strictly feasible")
	}
	tau := wsum / f(y)
	grad := make([]float64, k)
	dsc := make([]float64, k)
	M := mat.NewDense(k+m, k, nil)
	rhs := mat.NewVecDense(k+m, nil)
	var qr mat.QR
	dir := mat.NewVecDense(k, nil)
	yn := make([]float64, k)
	sn := make([]float64, m)
	steps := 0
	for outer := 0; ; outer++ {
		if outer > 200 {
			return nil, nil, steps, errors.New("metricdp: barrier method did not converge")
		}
		for inner := 0; ; inner++ {
			if err := ctx.Err(); err != nil {
				return nil, nil, steps, err
			}
			if inner > 500 {
				return nil, nil, steps, errors.New("metricdp: Newton centering did not converge")
			}
			// The Newton system is H dir = -grad with H = D + B^T B, D =
			// diag(6 tau c_l / y_l^4) and B the rows sqrt(w_p) a_p / s_p. It
			// is solved as the least-squares problem
			//	min || [D^(1/2); B] dir - [-D^(-1/2) grad; 0] ||
			// (whose normal equations it is) by QR, with the columns scaled
			// to unit norm. Forming H squares the conditioning: the
			// objective's curvature varies with c_l = beta_l^2, by 1e16 when
			// the queries' scales differ by 1e4 (a count next to an
			// indicator), and near the optimum B^T B grows without bound
			// across the active pairs while D alone holds the directions
			// along them, so the Cholesky factorisation of H failed
			// ("matrix singular").
			M.Zero()
			for l, x := range y {
				grad[l] = -2 * tau * c[l] / (x * x * x)
				M.Set(l, l, math.Sqrt(6*tau*c[l])/(x*x))
			}
			for p, a := range A {
				is := 1 / s[p]
				r := math.Sqrt(w[p]) * is
				for l, x := range a {
					if x != 0 {
						grad[l] += w[p] * x * is
						M.Set(k+p, l, r*x)
					}
				}
			}
			for l := range k {
				rhs.SetVec(l, -grad[l]/M.At(l, l))
				dsc[l] = 1 / mat.Norm(M.ColView(l), 2)
			}
			for l := range k {
				for i := range k + m {
					M.Set(i, l, M.At(i, l)*dsc[l])
				}
			}
			qr.Factorize(M)
			if err := qr.SolveVecTo(dir, false, rhs); err != nil {
				return nil, nil, steps, fmt.Errorf("metricdp: Newton step: %w", err)
			}
			for l := range k {
				dir.SetVec(l, dir.AtVec(l)*dsc[l])
			}
			g := mat.NewVecDense(k, grad)
			dec := -mat.Dot(g, dir) // Newton decrement squared
			// Centred? Near the optimum the decrement is about the squared
			// relative stationarity residual along the active constraints,
			// so it is driven far down; at large tau the ill-conditioned
			// Hessian puts a floor near 1e-8 under it, accepted after 30
			// steps (the step-size test below usually stops first).
			if dec/2 <= 1e-16 || (inner >= 30 && dec/2 <= 1e-7) {
				break
			}
			steps++
			// Backtracking: stay strictly feasible, then Armijo. Close to the
			// centre (Newton decrement below 0.1) pure Newton steps converge
			// quadratically, and the decrease they make is below what
			// phi's floating-point value can show, so Armijo is skipped.
			phi0 := phi(tau, y, s)
			alpha := 1.0
			for {
				for l := range y {
					yn[l] = y[l] + alpha*dir.AtVec(l)
				}
				if slack(yn, sn) && (dec < 0.01 || phi(tau, yn, sn) <= phi0-0.25*alpha*dec) {
					break
				}
				alpha /= 2
				if alpha < 1e-20 {
					break
				}
			}
			var rel float64
			for l := range y {
				rel = max(rel, math.Abs(yn[l]-y[l])/y[l])
			}
			if alpha < 1e-20 || rel < 1e-13 {
				break // no progress possible in floating point: centred
			}
			copy(y, yn)
			copy(s, sn)
		}
		if wsum/tau <= optGapTol*f(y) {
			break
		}
		tau *= 8
	}
	lambda := make([]float64, m)
	for p := range lambda {
		lambda[p] = w[p] / (tau * s[p])
	}

	return y, lambda, steps, nil
}
