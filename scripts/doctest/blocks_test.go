package main

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseBlocks(t *testing.T) {
	doc := "# T\n\n```sh\n./knowdp help\n```\n\n```go\nfmt.Println()\n```\n\n" +
		"<!-- doc-test: skip needs a cluster -->\n```sh\nknowdp-beam --runner=dataflow\n```\n" +
		"<!-- doc-test: background 8080 -->\n```bash\nknowdp serve\n```\n" +
		"<!-- doc-test: bench -->\n```sh\ngo test ./x -bench B\n```\n\n```\nplain text\n```\n"
	blocks, err := ParseBlocks("d.md", doc)
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{
		{File: "d.md", Line: 3, Text: "./knowdp help\n"},
		{File: "d.md", Line: 12, Text: "knowdp-beam --runner=dataflow\n", Mode: Skip, Reason: "needs a cluster"},
		{File: "d.md", Line: 16, Text: "knowdp serve\n", Mode: Background, Port: 8080},
		{File: "d.md", Line: 20, Text: "go test ./x -bench B\n", Mode: Bench},
	}
	if !reflect.DeepEqual(blocks, want) {
		t.Errorf("blocks\n%+v\nwant\n%+v", blocks, want)
	}
	for _, tc := range []struct{ doc, want string }{
		{"<!-- doc-test: skip -->\n```sh\nx\n```\n", "skip needs its reason"},
		{"<!-- doc-test: later -->\n```sh\nx\n```\n", `unknown doc-test directive "later"`},
		{"<!-- doc-test: background http -->\n```sh\nx\n```\n", "needs the port"},
		{"<!-- doc-test: bench -->\n\n```sh\nx\n```\n", "right before its block"},
		{"<!-- doc-test: bench -->\n```go\nx\n```\n", "not a shell block"},
		{"```sh\nx\n", "not closed"},
	} {
		if _, err := ParseBlocks("d.md", tc.doc); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.doc, err, tc.want)
		}
	}
}

func TestParseBench(t *testing.T) {
	c, ok := ParseBench(strings.Fields("test ./pipeline/ -run ^$ -bench BenchmarkRelease|BenchmarkWorkload|BenchmarkCells/jobserver -benchtime=3x -cpu 1,2"))
	if !ok {
		t.Fatal("not recognised")
	}
	if want := []string{"test", "./pipeline/", "-run", "^$", "-list", "BenchmarkRelease|BenchmarkWorkload|BenchmarkCells/jobserver"}; !reflect.DeepEqual(c.Args, want) {
		t.Errorf("args %q, want %q", c.Args, want)
	}
	if want := []string{"BenchmarkRelease", "BenchmarkWorkload", "BenchmarkCells"}; !reflect.DeepEqual(c.Patterns, want) {
		t.Errorf("patterns %q, want %q", c.Patterns, want)
	}
	if got := c.MissingBenchmarks("BenchmarkRelease\nBenchmarkCells\nTestX\nok  pkg 0.1s\n"); !reflect.DeepEqual(got, []string{"BenchmarkWorkload"}) {
		t.Errorf("missing %q, want BenchmarkWorkload", got)
	}
	if _, ok := ParseBench(strings.Fields("build ./cmd/knowdp")); ok {
		t.Error("go build taken for a benchmark")
	}
	if _, ok := ParseBench(strings.Fields("test ./x -run TestY")); ok {
		t.Error("a test run taken for a benchmark")
	}
}
