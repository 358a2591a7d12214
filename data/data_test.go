package data

import (
	"context"
	"fmt"
	"testing"

	"github.com/knowdp/knowdp/cube"
)

func TestArrests(t *testing.T) {
	tab, s, err := Arrests()
	if err != nil {
		t.Fatal(err)
	}
	c, err := cube.Build(context.Background(), tab, s, cube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Cells() != 6720 || c.Total() != 5226 {
		t.Errorf("cells %d, rows %v; want 6720 and 5226", s.Cells(), c.Total())
	}
	// Released with a summons: 4334 of 5226 (carData's summary).
	rel, _ := s.CuboidOf("released")
	if got := c.Project(rel); got[1] != 4334 || got[0] != 892 {
		t.Errorf("released = %v, want [892 4334]", got)
	}
}

func TestUSPlaces(t *testing.T) {
	tab, err := USPlaces()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		if _, err := tab.Next(); err != nil {
			break
		}
		n++
	}
	if n != 842 {
		t.Errorf("%d places, want 842", n)
	}
}

func TestInstEval(t *testing.T) {
	tab, s, err := InstEval()
	if err != nil {
		t.Fatal(err)
	}
	if got := tab.Header(); len(got) != 6 || got[0] != InstEvalUnit {
		t.Fatalf("header %v", got)
	}
	c, err := cube.Build(context.Background(), tab, s, cube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Cells() != 3360 || c.Total() != 73421 {
		t.Errorf("cells %d, rows %v; want 3360 and 73421", s.Cells(), c.Total())
	}
	// table(InstEval$y) in R: 10186 12951 17609 16921 15754.
	y, _ := s.CuboidOf("rating")
	if got := c.Project(y); fmt.Sprint(got) != "[10186 12951 17609 16921 15754]" {
		t.Errorf("ratings %v", got)
	}
	// Rows per student: 2972 students, 1 to 92 ratings (summary(table(s))).
	tab, _, _ = InstEval()
	if _, err := tab.Column(InstEvalUnit); err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for {
		rec, err := tab.Next()
		if err != nil {
			break
		}
		per[rec[0]]++
	}
	lo, hi := 1<<30, 0
	for _, n := range per {
		lo, hi = min(lo, n), max(hi, n)
	}
	if len(per) != 2972 || lo != 1 || hi != 92 {
		t.Errorf("%d students with %d to %d ratings; want 2972, 1 to 92", len(per), lo, hi)
	}
}
