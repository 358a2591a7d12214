package sidecar_test

import (
	"encoding/json"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/knowdp/knowdp/sidecar"
)

// Reading the release.json that knowdp release wrote beside its tables:
// whether it is private, what it spent, and the margin of error of each
// table.
func ExampleMetadata() {
	b, err := os.ReadFile("testdata/lower-bound.json")
	if err != nil {
		log.Fatal(err)
	}
	var m sidecar.Metadata
	if err := json.Unmarshal(b, &m); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("private: %v (guarantee %s)\n", m.Private, m.Guarantee)
	fmt.Printf("epsilon: %v (exactly %v)\n", m.Epsilon, m.EpsilonExact)
	for _, t := range m.Tables {
		fmt.Printf("%s: %d cells, moe90 %.2f\n", strings.Join(t.Cuboid, ","), t.Cells, t.MOE90)
	}
	fmt.Println(m.Warnings[0])
	// Output:
	// private: false (guarantee none)
	// epsilon: 1 (exactly 0.9999999999990905)
	// year,colour: 12 cells, moe90 4.35
	// sex,agegroup: 10 cells, moe90 4.63
	// seeded noise: the release is reproducible and NOT differentially private
}

// StatedUp states a spend as a reader reads it: never below it.
func ExampleStatedUp() {
	fmt.Println(sidecar.StatedUp(0.9999999999990905))
	fmt.Println(sidecar.StatedUp(0.12180726190399582))
	// Output:
	// 1
	// 0.121807262
}
