package report_test

import (
	"fmt"
	"io"
	"log"
	"testing/fstest"

	"github.com/knowdp/knowdp/report"
)

// A release of sex by age and of sex alone whose files disagree: the
// report's check finds the difference from the released numbers alone.
func ExampleCheck() {
	fsys := fstest.MapFS{
		"release.json": {Data: []byte(`{"mechanism": "Laplace noise", "epsilon": 1, "private": true, "seeded": false, "guarantee": "unconditional",
			"tables": [{"cuboid": ["sex", "age"], "file": "sex-age.csv", "measured": true, "moe90": 4.6},
			           {"cuboid": ["sex"], "file": "sex.csv", "measured": true, "moe90": 3.3}],
			"exact": []}`)},
		"sex-age.csv": {Data: []byte("sex,age,count,moe90\nF,young,12,4.6\nF,old,30,4.6\nM,young,15,4.6\nM,old,25,4.6\n")},
		"sex.csv":     {Data: []byte("sex,count,moe90\nF,42,3.3\nM,41.5,3.3\n")},
	}
	rel, err := report.Load(fsys, "release.json")
	if err != nil {
		log.Fatal(err)
	}
	c, err := report.Check(rel, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range c.Pairs {
		fmt.Printf("%s and %s on %s: largest deviation %s at %s (agree: %v)\n",
			rel.Tables[p.A].Name(), rel.Tables[p.B].Name(), report.CuboidName(p.Margin), report.Up(p.MaxDeviation, 3), p.At, p.OK())
	}
	fmt.Println(rel.Meta.Verdict().Headline)
	if err := report.Render(io.Discard, rel, report.Options{Title: "sex and age"}); err != nil {
		log.Fatal(err)
	}
	// Output:
	// {sex,age} and {sex} on {sex}: largest deviation 1.5 at M (agree: false)
	// Differentially private: ε = 1.
}

// Numbers that state a loss or an error are rounded up, never down.
func ExampleUp() {
	fmt.Println(report.Up(0.9999999999990905, 6), report.Up(26.84598205795642, 4), report.Percent(0.46091294814050343))
	// Output: 1 26.85 46.1%
}
