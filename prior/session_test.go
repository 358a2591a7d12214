package prior

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
)

func TestLaplaceSessionComposition(t *testing.T) {
	s, err := NewLaplaceSession([]float64{3, 5}, mustEps(t, 1), 1)
	if err != nil {
		t.Fatal(err)
	}
	r := noise.NewSeeded(5)
	if _, err := s.Answer(r, []float64{1, 0}); err != nil {
		t.Fatal(err)
	}
	// Asking about cell 0 again would double its column norm.
	_, err = s.Answer(r, []float64{1, 0})
	var oe *privacy.OverspendError
	if !errors.Is(err, privacy.ErrOverspend) || !errors.As(err, &oe) || oe.Excess.Epsilon() != 1 {
		t.Fatalf("second query on cell 0: %v", err)
	}
	if s.Spent().Epsilon() != 1 || s.Answered() != 1 {
		t.Errorf("a refused query spent something: %v, %d answered", s.Spent(), s.Answered())
	}
	// Cell 1 is a disjoint set of individuals: parallel composition.
	if _, err := s.Answer(r, []float64{0, 1}); err != nil {
		t.Fatalf("query on cell 1: %v", err)
	}
	if s.Spent().Epsilon() != 1 || s.Sensitivity() != 1 || s.Answered() != 2 {
		t.Errorf("spent %v, sensitivity %v", s.Spent(), s.Sensitivity())
	}
	if s.Lambda() != 1 {
		t.Errorf("Lambda() = %v", s.Lambda())
	}
}

func TestLaplaceSessionNoise(t *testing.T) {
	s, err := NewLaplaceSession([]float64{10, 7}, mustEps(t, 4000), 1)
	if err != nil {
		t.Fatal(err)
	}
	r := noise.NewSeeded(6)
	const n = 4000
	var sum, sq float64
	for range n {
		x, err := s.Answer(r, []float64{1, 0})
		if err != nil {
			t.Fatal(err)
		}
		sum += x
		sq += (x - 10) * (x - 10)
	}
	mean, v := sum/n, sq/n
	// Laplace(1): variance 2, kurtosis 6, so Var(sample variance) ~ 4*5/n.
	if math.Abs(mean-10) > 5*math.Sqrt(2.0/n) || math.Abs(v-2) > 5*2*math.Sqrt(5.0/n) {
		t.Errorf("mean %v, variance %v; want 10 and 2", mean, v)
	}
	if _, err := s.Answer(r, []float64{1, 0}); !errors.Is(err, privacy.ErrOverspend) {
		t.Errorf("query %d: %v", n+1, err)
	}
}

func TestLaplaceSessionExactArithmetic(t *testing.T) {
	s, err := NewLaplaceSession([]float64{1 << 52, 1 << 52, 3}, mustEps(t, 1), 1)
	if err != nil {
		t.Fatal(err)
	}
	g := s.lap.Grid()
	for _, c := range []struct {
		units []int64
		want  int64
	}{
		{[]int64{3, -3, 0}, 0}, // cancels exactly although the terms are 3*2^52
		{[]int64{0, 0, -5}, -15},
		{[]int64{1 << 40, 0, 0}, maxAnswerUnit},
		{[]int64{-(1 << 40), 1, 0}, -maxAnswerUnit},
	} {
		if got := s.exactAnswer(c.units); got != c.want {
			t.Errorf("exactAnswer(%v) = %v, want %v", c.units, got, c.want)
		}
	}
	// A coefficient is rounded to the grid; its loss is exact in grid units.
	if _, err := s.Answer(noise.NewSeeded(1), []float64{0, 0, 0.5 + g/4}); err != nil {
		t.Fatal(err)
	}
	if got := s.Sensitivity(); got != 0.5 {
		t.Errorf("sensitivity %v, want 0.5", got)
	}
	if got := s.Spent().Epsilon(); math.Abs(got-0.5) > 2*privacy.EpsilonStep {
		t.Errorf("spent %v, want 0.5", got)
	}
}

func TestLaplaceSessionErrors(t *testing.T) {
	eps := mustEps(t, 1)
	for _, c := range []struct {
		hist   []float64
		lambda float64
		want   string
	}{
		{nil, 1, "at least one cell"},
		{[]float64{1, 2.5}, 1, "cell 1 = 2.5"},
		{[]float64{-1}, 1, "cell 0 = -1"},
		{[]float64{math.NaN()}, 1, "cell 0 = NaN"},
		{[]float64{1}, 0, "lambda"},
		{[]float64{1}, math.Inf(1), "lambda"},
	} {
		if _, err := NewLaplaceSession(c.hist, eps, c.lambda); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewLaplaceSession(%v, %v): %v, want %q", c.hist, c.lambda, err, c.want)
		}
	}
	if _, err := NewLaplaceSession([]float64{1}, privacy.Epsilon{}, 1); err == nil {
		t.Error("epsilon 0 accepted")
	}
	s, _ := NewLaplaceSession([]float64{1, 2}, eps, 1)
	r := noise.NewSeeded(1)
	for _, c := range []struct {
		q    []float64
		want string
	}{
		{[]float64{1}, "1 coefficients; the histogram has 2"},
		{[]float64{math.NaN(), 0}, "coefficient 0 = NaN"},
		{[]float64{0, 1e30}, "coefficient 1 = 1e+30"},
	} {
		if _, err := s.Answer(r, c.q); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Answer(%v): %v, want %q", c.q, err, c.want)
		}
	}
	if s.Answered() != 0 || !s.Spent().IsZero() {
		t.Error("failed queries spent budget")
	}
}

func TestRefinementSession(t *testing.T) {
	p, _ := NewNumeric("x", []float64{0, 1}, []float64{0.5, 0.5})
	quarter := mustNew(t, p, Config{Kind: Statistical, Epsilon: mustEps(t, 0.25)})
	half := mustNew(t, p, Config{Kind: Individual, Epsilon: mustEps(t, 0.5), Delta: mustDelta(t, 1e-6)})
	total, _ := privacy.NewBudget(1, 2e-6)
	s, err := NewRefinementSession(total)
	if err != nil {
		t.Fatal(err)
	}
	r := noise.NewSeeded(7)
	answer := func(m *Mechanism, scope ...string) error {
		t.Helper()
		_, err := s.Answer(r, m, Point{1}, scope...)
		return err
	}
	steps := []struct {
		m      *Mechanism
		scope  []string
		ok     bool
		wantEp float64
	}{
		{half, []string{"alice"}, true, 0.5},
		{half, []string{"bob"}, true, 0.5}, // disjoint individuals: max, not sum
		{half, []string{"alice", "alice"}, true, 1},
		{half, []string{"alice"}, false, 1}, // alice would be at 1.5
		{quarter, nil, false, 1},            // everyone: 0.25 + max 1
		{quarter, []string{"bob"}, true, 1}, // bob at 0.75
		{quarter, []string{"bob"}, true, 1}, // bob at 1
		{quarter, []string{"carol"}, true, 1},
	}
	for i, st := range steps {
		err := answer(st.m, st.scope...)
		if st.ok != (err == nil) {
			t.Fatalf("step %d: %v", i, err)
		}
		if err != nil && !errors.Is(err, privacy.ErrOverspend) {
			t.Fatalf("step %d: refusal is not an overspend: %v", i, err)
		}
		if got := s.Spent().Epsilon(); got != st.wantEp {
			t.Fatalf("step %d: spent %v, want %v", i, got, st.wantEp)
		}
	}
	if s.Answered() != 6 || s.Spent().Delta() > 2e-6 {
		t.Errorf("answered %d, spent %v", s.Answered(), s.Spent())
	}
	// Delta is accounted too: a third delta on one individual does not fit.
	s2, _ := NewRefinementSession(total)
	tiny := mustNew(t, p, Config{Kind: Individual, Epsilon: mustEps(t, 0.01), Delta: mustDelta(t, 1e-6)})
	for i, ok := range []bool{true, true, false} {
		if _, err := s2.Answer(r, tiny, Point{0}, "dave"); ok != (err == nil) {
			t.Errorf("delta step %d: %v", i, err)
		}
	}
	// Errors that are not refusals spend nothing either.
	before := s.Spent()
	if _, err := s.Answer(r, quarter, Point{1, 2}); err == nil {
		t.Error("a truth of the wrong shape was accepted")
	}
	if _, err := s.Answer(r, quarter, Point{1}, ""); err == nil {
		t.Error("an unnamed scope part was accepted")
	}
	if _, err := s.Answer(r, nil, Point{1}); err == nil {
		t.Error("a nil mechanism was accepted")
	}
	if s.Spent() != before {
		t.Error("failed queries spent budget")
	}
	if _, err := NewRefinementSession(privacy.Budget{}); err == nil {
		t.Error("an empty budget was accepted")
	}
}

// Concurrent queries never overspend: exactly the affordable number is
// answered.
func TestRefinementSessionConcurrent(t *testing.T) {
	p, _ := NewNumeric("x", []float64{0, 1}, []float64{0.5, 0.5})
	m := mustNew(t, p, Config{Kind: Statistical, Epsilon: mustEps(t, 0.125)})
	s, _ := NewRefinementSession(privacy.Pure(mustEps(t, 1)))
	root := noise.NewSeeded(8)
	var wg sync.WaitGroup
	for range 4 {
		r := root.Split()
		wg.Go(func() {
			for range 10 {
				_, _ = s.Answer(r, m, Point{0})
			}
		})
	}
	wg.Wait()
	if s.Answered() != 8 || s.Spent().Epsilon() != 1 {
		t.Errorf("answered %d, spent %v; want 8 and eps=1", s.Answered(), s.Spent())
	}
}
