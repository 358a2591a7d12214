package data

import (
	"context"
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
