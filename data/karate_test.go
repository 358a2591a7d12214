package data

import (
	"crypto/md5"
	"encoding/csv"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestKarate checks the bundled karate club network against what is
// published about it (Zachary 1977; networkx's karate_club_graph): 34
// members, 78 ties, a simple undirected graph, the instructor (0) with 16
// ties and the administrator (33) with 17, and the known-degrees file
// naming those two; and that README.md gives the edge file's checksum.
func TestKarate(t *testing.T) {
	read := func(name string) [][]string {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		rows, err := csv.NewReader(f).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	edges := read("karate-edges.csv")
	if strings.Join(edges[0], ",") != "u,v" || len(edges) != 79 {
		t.Fatalf("karate-edges.csv: header %v, %d edges; want u,v and 78", edges[0], len(edges)-1)
	}
	deg := make([]int, 34)
	seen := map[[2]int]bool{}
	for i, e := range edges[1:] {
		u, err1 := strconv.Atoi(e[0])
		v, err2 := strconv.Atoi(e[1])
		if err1 != nil || err2 != nil || u < 0 || v >= 34 || u >= v || seen[[2]int{u, v}] {
			t.Fatalf("row %d: %v is not a new edge u < v of 0..33", i+2, e)
		}
		seen[[2]int{u, v}] = true
		deg[u]++
		deg[v]++
	}
	for v, d := range deg {
		if d == 0 {
			t.Errorf("member %d has no tie", v)
		}
	}
	if deg[0] != 16 || deg[33] != 17 {
		t.Errorf("degrees of 0 and 33: %d and %d, want 16 and 17", deg[0], deg[33])
	}
	if known := read("karate-known.csv"); fmt.Sprint(known) != "[[vertex] [0] [33]]" {
		t.Errorf("karate-known.csv: %v", known)
	}
	b, err := os.ReadFile("karate-edges.csv")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	sum := md5.Sum(b)
	if line := "`md5sum karate-edges.csv` = `" + hex.EncodeToString(sum[:]) + "`"; !strings.Contains(string(readme), line) {
		t.Errorf("README.md does not say %s", line)
	}
}
