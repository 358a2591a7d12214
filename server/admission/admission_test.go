package admission

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

// TestRateLimit: a key's bucket lets a burst through and refuses the
// next request; other keys have their own; Rate 0 admits everything.
func TestRateLimit(t *testing.T) {
	// A rate so low that nothing refills during the test.
	c := New(Config{Rate: 1e-6, Burst: 3})
	for i := range 3 {
		if !c.Allow("k") {
			t.Fatalf("request %d of a burst of 3 refused", i+1)
		}
	}
	if c.Allow("k") {
		t.Fatal("a fourth request admitted")
	}
	if !c.Allow("other") {
		t.Fatal("another key refused")
	}
	open := New(Config{})
	for range 100 {
		if !open.Allow("k") {
			t.Fatal("Rate 0 refused a request")
		}
	}
	if n, ok := open.Afford("k", 1<<40); n != 0 || !ok {
		t.Fatalf("Rate 0: Afford %d %v", n, ok)
	}
	open.ChargeRefused("k", 1<<40)
	if !open.Allow("k") {
		t.Fatal("Rate 0: refused after a charge")
	}
}

// TestRefusedWork: the planning work of a refused request costs its key a
// token per WorkPerToken base cells (at most 2^16), beyond the burst; a
// request whose planning the bucket could not pay is refused beforehand.
func TestRefusedWork(t *testing.T) {
	c := New(Config{Rate: 1e-6, Burst: 4})
	for _, tc := range []struct {
		work   int
		tokens int
		ok     bool
	}{
		{WorkPerToken - 1, 0, true},
		{3 * WorkPerToken, 3, true},
		{4 * WorkPerToken, 4, true},
		{100 * WorkPerToken, 4, true}, // at most a burst
	} {
		if n, ok := c.Afford("k", tc.work); n != tc.tokens || ok != tc.ok {
			t.Errorf("work %d: Afford %d %v, want %d %v", tc.work, n, ok, tc.tokens, tc.ok)
		}
	}
	c.ChargeRefused("k", 10*WorkPerToken+5) // 10 tokens, in reservations of 4, 4 and 2
	if got := c.Tokens("k"); math.Abs(got-(4-10)) > 1e-3 {
		t.Fatalf("after a refusal of 10 tokens' work: %v tokens, want -6", got)
	}
	if c.Allow("k") {
		t.Fatal("a key in debt admitted")
	}
	if n, ok := c.Afford("k", WorkPerToken); n != 1 || ok {
		t.Fatalf("a key in debt: Afford %d %v", n, ok)
	}
	c.ChargeRefused("other", math.MaxInt)
	if got := c.Tokens("other"); math.Abs(got-(4-maxRefusedTokens)) > 1e-3 {
		t.Fatalf("the cap: %v tokens, want %d", got, 4-maxRefusedTokens)
	}
}

// TestSlots: an analyst's queries beyond InFlight are refused; Compute of
// them compute at once, the others wait (or give up with their context);
// leaving frees the analyst's place.
func TestSlots(t *testing.T) {
	c := New(Config{Compute: 1, InFlight: 2})
	a1, leave1, err := c.Enter("alice")
	if err != nil {
		t.Fatal(err)
	}
	a2, leave2, err := c.Enter("alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Enter("alice"); !errors.Is(err, ErrInFlight) {
		t.Fatalf("a third query in flight: %v", err)
	}
	if _, leave, err := c.Enter("bob"); err != nil {
		t.Fatalf("another analyst: %v", err)
	} else {
		leave()
	}
	if err := a1.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := a2.Acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second computation of one slot: %v", err)
	}
	got := make(chan error)
	go func() { got <- a2.Acquire(context.Background()) }()
	a1.Release()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	a2.Release()
	leave1()
	leave2()
	if n := len(c.analysts); n != 0 {
		t.Fatalf("%d analysts still counted after every query left", n)
	}
	if _, leave, err := c.Enter("alice"); err != nil {
		t.Fatalf("after leaving: %v", err)
	} else {
		leave()
	}
}

// TestHeavy: at most Heavy costly plannings at once, whoever asks.
func TestHeavy(t *testing.T) {
	c := New(Config{Heavy: 2})
	r1, err := c.Heavy(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.Heavy(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.Heavy(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a third heavy planning: %v", err)
	}
	r1()
	r3, err := c.Heavy(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r2()
	r3()
	if New(Config{}).heavy == nil || cap(New(Config{}).heavy) != 1 {
		t.Fatal("Heavy 0 must still admit one at a time")
	}
}
