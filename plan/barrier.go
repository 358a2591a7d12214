package plan

import (
	"math"
	"slices"
)

// model is Σ_i a_i / D_i(x) with D_i(x) = d_i + Σ_{k ∈ cov_i} (q_k x_k + r_k x_k²),
// or, for the terms i with sq[i], D_i(x) = (Σ_{k ∈ cov_i} s_k x_k)².
// The split problem has d = 0 and either q = c (p = 1) or r = c (p = 2).
// Its relaxations (relax) use convex forms only: r = 0 (1/linear), or
// squared-linear terms (1/linear²).
type model struct {
	a    []float64
	cov  [][]int
	d    []float64
	q, r []float64
	s    []float64
	sq   []bool
	// sv, when set, is charged the work of every evaluation (see Work).
	sv *solver
	// vcost and hcost are the work of one value and of one Hessian:
	// Σ_i (1 + |cov_i|) and Σ_i (1 + |cov_i|²), computed on first use.
	vcost, hcost float64
}

// charge adds the work of an evaluation (with the Hessian or not) to the
// solver's count.
func (m *model) charge(hessian bool) {
	if m.sv == nil {
		return
	}
	if m.vcost == 0 {
		for _, cov := range m.cov {
			m.vcost += float64(1 + len(cov))
			m.hcost += float64(1 + len(cov)*len(cov))
		}
	}
	if hessian {
		m.sv.work += m.hcost
	} else {
		m.sv.work += m.vcost
	}
}

// value returns the model at x, +Inf where a denominator is not > 0.
func (m *model) value(x []float64) float64 {
	m.charge(false)
	var f float64
	for i, a := range m.a {
		var den float64
		if m.sq != nil && m.sq[i] {
			for _, k := range m.cov[i] {
				den += m.s[k] * x[k]
			}
			den *= den
		} else {
			den = m.d[i]
			for _, k := range m.cov[i] {
				den += m.q[k]*x[k] + m.r[k]*x[k]*x[k]
			}
		}
		if !(den > 0) {
			return math.Inf(1)
		}
		f += a / den
	}
	return f
}

// eval returns the model at x and sets its gradient g and, when h is not
// nil, its Hessian h (n×n, row-major). Denominators must be > 0.
func (m *model) eval(x, g, h []float64) float64 {
	m.charge(h != nil)
	n := len(x)
	clear(g)
	if h != nil {
		clear(h)
	}
	var f float64
	var dd [64]float64
	for i, a := range m.a {
		cov := m.cov[i]
		if m.sq != nil && m.sq[i] {
			// a / L², L = Σ s_k x_k: gradient -2a s/L³, Hessian 6a s s^T/L⁴.
			var lin float64
			for _, k := range cov {
				lin += m.s[k] * x[k]
			}
			f += a / (lin * lin)
			g1 := 2 * a / (lin * lin * lin)
			for _, k := range cov {
				g[k] -= g1 * m.s[k]
			}
			if h != nil {
				h2 := 6 * a / (lin * lin * lin * lin)
				for _, k := range cov {
					row := h[k*n:]
					for _, kk := range cov {
						row[kk] += h2 * m.s[k] * m.s[kk]
					}
				}
			}
			continue
		}
		den := m.d[i]
		for _, k := range cov {
			den += m.q[k]*x[k] + m.r[k]*x[k]*x[k]
		}
		f += a / den
		var grad []float64
		if len(cov) <= len(dd) {
			grad = dd[:len(cov)]
		} else {
			grad = make([]float64, len(cov))
		}
		d2 := a / (den * den)
		for j, k := range cov {
			grad[j] = m.q[k] + 2*m.r[k]*x[k]
			g[k] -= d2 * grad[j]
		}
		if h == nil {
			continue
		}
		d3 := 2 * a / (den * den * den)
		for j, k := range cov {
			row := h[k*n:]
			gj := d3 * grad[j]
			for l, kk := range cov {
				row[kk] += gj * grad[l]
			}
			row[k] -= 2 * m.r[k] * d2
		}
	}
	return f
}

// lowerBound returns f(x) - max_s ∇f(x)·(x - s) over s in the box ∩ simplex
// (the Frank-Wolfe gap): for a convex model, a lower bound of its minimum on
// the box. x must be feasible.
func (m *model) lowerBound(x, lo, hi []float64) float64 {
	n := len(x)
	g := make([]float64, n)
	f := m.eval(x, g, nil)
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return math.Inf(-1)
	}
	order := make([]int, n)
	for k := range order {
		order[k] = k
	}
	slices.SortFunc(order, func(i, j int) int {
		switch {
		case g[i] < g[j]:
			return -1
		case g[i] > g[j]:
			return 1
		}
		return 0
	})
	rest := 1.0
	var gs, gx float64
	for k := range x {
		rest -= lo[k]
		gs += g[k] * lo[k]
		gx += g[k] * x[k]
	}
	for _, k := range order {
		if rest <= 0 {
			break
		}
		add := min(hi[k]-lo[k], rest)
		gs += g[k] * add
		rest -= add
	}
	return f - (gx - gs)
}

// minimize approximately minimises the model on {Σ x = 1, lo ≤ x ≤ hi} by a
// log-barrier method with Newton steps (Hessian shifted where it is not
// positive definite, so a non-convex model gets a local minimum), from
// near x0 (nil: the box's centre on the simplex). It stops when the
// barrier's duality bound 2n/t is below tol relative to the model, after
// at most maxOuter×maxInner Newton steps, when a step's arithmetic is not
// finite, or when sv's context ends, and returns the last feasible point.
// It returns nil when the box does not meet the simplex.
func (m *model) minimize(sv *solver, lo, hi, x0 []float64, tol float64) []float64 {
	n := len(lo)
	x := make([]float64, n)
	var free []int
	rest := 1.0
	for k := range lo {
		if hi[k]-lo[k] > 1e-13 {
			free = append(free, k)
			continue
		}
		x[k] = (lo[k] + hi[k]) / 2
		rest -= x[k]
	}
	var sl, su float64
	for _, k := range free {
		sl += lo[k]
		su += hi[k]
	}
	if rest < sl-1e-9 || rest > su+1e-9 {
		return nil
	}
	theta := 0.5
	if su > sl {
		theta = min(max((rest-sl)/(su-sl), 0), 1)
	}
	for _, k := range free {
		x[k] = lo[k] + theta*(hi[k]-lo[k])
	}
	if len(free) <= 1 || rest-sl < 1e-12 || su-rest < 1e-12 {
		return x // the box meets the simplex in (about) one point
	}
	t := 1.0
	if x0 != nil {
		// x0 moved into the box (clamped, then the excess or the
		// shortfall spread over the free coordinates in proportion to
		// their room), and 2% of the way to the centre, strictly inside.
		try := make([]float64, n)
		var sum float64
		for k := range x {
			try[k] = min(max(x0[k], lo[k]), hi[k])
			sum += try[k]
		}
		var room float64
		for _, k := range free {
			if sum > 1 {
				room += try[k] - lo[k]
			} else {
				room += hi[k] - try[k]
			}
		}
		for _, k := range free {
			switch {
			case room <= 0:
			case sum > 1:
				try[k] -= (sum - 1) * (try[k] - lo[k]) / room
			default:
				try[k] += (1 - sum) * (hi[k] - try[k]) / room
			}
		}
		for _, k := range free {
			try[k] = 0.98*try[k] + 0.02*x[k]
		}
		if !math.IsInf(m.value(try), 0) {
			copy(x, try)
			// Start the barrier where its duality bound matches how far
			// the start is from optimal (its Frank-Wolfe gap), so that a
			// good start is not first pulled to the centre.
			if f := m.value(x); f > 0 {
				if gap := f - m.lowerBound(x, lo, hi); gap > 0 {
					t = max(1, 2*float64(len(free))*f/gap)
				}
			}
		}
	}
	f0 := m.value(x)
	if math.IsInf(f0, 0) || !(f0 > 0) {
		return x
	}
	scale := 1 / f0
	nf := len(free)
	g := make([]float64, n)
	h := make([]float64, n*n)
	gb := make([]float64, nf)
	hb := make([]float64, nf*nf)
	chol := make([]float64, nf*nf)
	u := make([]float64, nf)
	w := make([]float64, nf)
	dir := make([]float64, nf)
	next := make([]float64, n)
	barrier := func(x []float64, t float64) float64 {
		f := m.value(x)
		if math.IsInf(f, 0) {
			return math.Inf(1)
		}
		v := t * scale * f
		for _, k := range free {
			a, b := x[k]-lo[k], hi[k]-x[k]
			if !(a > 0) || !(b > 0) {
				return math.Inf(1)
			}
			v -= math.Log(a) + math.Log(b)
		}
		return v
	}
outer:
	for outer := 0; outer < maxOuter; outer++ {
		for inner := 0; inner < maxInner; inner++ {
			if sv.stopped() {
				break outer
			}
			m.eval(x, g, h)
			var maxDiag float64
			finite := true
			for a, k := range free {
				lk, hk := x[k]-lo[k], hi[k]-x[k]
				gb[a] = t*scale*g[k] - 1/lk + 1/hk
				finite = finite && isFinite(gb[a])
				for b, kk := range free {
					hb[a*nf+b] = t * scale * h[k*n+kk]
					finite = finite && isFinite(hb[a*nf+b])
				}
				hb[a*nf+a] += 1/(lk*lk) + 1/(hk*hk)
				maxDiag = max(maxDiag, math.Abs(hb[a*nf+a]))
			}
			if !finite || !isFinite(maxDiag) {
				// Newton cannot go on from here; x is feasible, and the
				// caller's checks say whether it is good for anything.
				break outer
			}
			tries, ok := factorShifted(hb, chol, nf, maxDiag)
			sv.work += float64(tries) * float64(nf*nf*nf) / 6
			sv.steps++
			if !ok {
				break outer
			}
			for a := range w {
				w[a] = 1
			}
			copy(u, gb)
			cholSolve(chol, nf, u)
			cholSolve(chol, nf, w)
			var su, sw float64
			for a := range u {
				su += u[a]
				sw += w[a]
			}
			nu := su / sw
			var dec float64
			for a := range dir {
				dir[a] = -u[a] + nu*w[a]
				dec -= gb[a] * dir[a]
			}
			if !(dec > 1e-14) {
				break
			}
			// The longest step that stays inside the box.
			step := 1.0
			for a, k := range free {
				switch {
				case dir[a] < 0:
					step = min(step, 0.99*(x[k]-lo[k])/-dir[a])
				case dir[a] > 0:
					step = min(step, 0.99*(hi[k]-x[k])/dir[a])
				}
			}
			cur := barrier(x, t)
			moved := false
			for ; step > 1e-16; step /= 2 {
				copy(next, x)
				for a, k := range free {
					next[k] += step * dir[a]
				}
				if v := barrier(next, t); v <= cur-0.25*step*dec {
					moved = true
					break
				}
			}
			if !moved {
				break
			}
			copy(x, next)
			if dec < 1e-12 {
				break
			}
		}
		f := m.value(x)
		if 2*float64(nf)/t <= tol*scale*f/4 {
			break
		}
		t *= 40
	}
	return x
}

// The caps on minimize's Newton steps: maxOuter values of the barrier's
// parameter t (growing 40-fold each), at most maxInner steps for each.
const (
	maxOuter = 60
	maxInner = 80
)

// factorShifted factors h + shift·I into l with the first shift of the
// sequence 0, 1e-10 d, 1e-9 d, ... (d the largest diagonal entry in
// magnitude) that makes it positive definite, and reports whether one did
// and how many factorisations it tried.
// The sequence stops once the shift is past twice the Gershgorin bound
// (max_i Σ_{j≠i} |h_ij| - h_ii), beyond which h + shift·I is diagonally
// dominant: at most a few hundred factorisations for any finite h.
func factorShifted(h, l []float64, n int, maxDiag float64) (tries int, ok bool) {
	if cholesky(h, l, n, 0) {
		return 1, true
	}
	var gersh float64
	for i := range n {
		r := -h[i*n+i]
		for j := range n {
			if j != i {
				r += math.Abs(h[i*n+j])
			}
		}
		gersh = max(gersh, r)
	}
	d := maxDiag
	if !(d > 0) {
		d = max(gersh, 1)
	}
	tries = 1
	for shift := 1e-10 * d; ; shift *= 10 {
		last := shift > 2*gersh
		tries++
		if cholesky(h, l, n, shift) {
			return tries, true
		}
		if last || math.IsInf(shift, 0) {
			return tries, false
		}
	}
}

// isFinite reports whether v is neither infinite nor NaN.
func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// cholesky factors h + shift I (n×n) into l (lower, row-major) and reports
// whether it is positive definite.
func cholesky(h, l []float64, n int, shift float64) bool {
	for i := range n {
		for j := 0; j <= i; j++ {
			s := h[i*n+j]
			if i == j {
				s += shift
			}
			for k := range j {
				s -= l[i*n+k] * l[j*n+k]
			}
			if i == j {
				if !(s > 0) {
					return false
				}
				l[i*n+i] = math.Sqrt(s)
			} else {
				l[i*n+j] = s / l[j*n+j]
			}
		}
	}
	return true
}

// cholSolve solves (l l^T) y = b in place.
func cholSolve(l []float64, n int, b []float64) {
	for i := range n {
		s := b[i]
		for k := range i {
			s -= l[i*n+k] * b[k]
		}
		b[i] = s / l[i*n+i]
	}
	for i := n - 1; i >= 0; i-- {
		s := b[i]
		for k := i + 1; k < n; k++ {
			s -= l[k*n+i] * b[k]
		}
		b[i] = s / l[i*n+i]
	}
}
