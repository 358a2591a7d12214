package source

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// splitRecords reads every part of t.Split(n, minBytes) in order and
// returns their records joined with "|", and whether the parts joined.
func splitRecords(t *testing.T, tab interface {
	Split(int, int64) ([]func() ([][]byte, int64, error), func() bool)
}, n int, minBytes int64) (recs []string, parts int, joined bool) {
	t.Helper()
	ps, j := tab.Split(n, minBytes)
	for _, next := range ps {
		for {
			rec, w, err := next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return recs, len(ps), false
			}
			if w != 1 {
				t.Fatalf("weight %d", w)
			}
			var f []string
			for _, v := range rec {
				f = append(f, string(v))
			}
			recs = append(recs, strings.Join(f, "|"))
		}
	}
	if len(ps) == 0 {
		return nil, 0, false
	}
	return recs, len(ps), j()
}

// wholeRecords reads t with NextRecord.
func wholeRecords(t *testing.T, tab Table) []string {
	t.Helper()
	var recs []string
	for {
		rec, _, err := tab.NextRecord()
		if errors.Is(err, io.EOF) {
			return recs
		}
		if err != nil {
			t.Fatal(err)
		}
		var f []string
		for _, v := range rec {
			f = append(f, string(v))
		}
		recs = append(recs, strings.Join(f, "|"))
	}
}

func writeFile(t *testing.T, name, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCSVSplitIsTheWholeFile cuts files with empty lines, CRLF and quoted
// fields with line breaks at every byte count: whenever the parts say they
// joined, their records are the file's in order, and the file is still
// read whole afterwards.
func TestCSVSplitIsTheWholeFile(t *testing.T) {
	files := map[string]string{
		"plain":        "a,b\n1,x\n2,y\n3,z\n4,w\n5,v\n",
		"no final LF":  "a,b\n1,x\n2,y\n3,z",
		"CRLF":         "a,b\r\n1,x\r\n2,y\r\n\r\n3,z\r\n",
		"empty lines":  "a,b\n\n\n1,x\n\n2,y\n\n\n\n3,z\n\n",
		"quoted break": "a,b\n1,\"x\ny\nz\"\n2,\"p,q\"\n3,\"\"\"\n\"\n4,w\n",
		"header only":  "a,b\n",
	}
	for name, data := range files {
		t.Run(name, func(t *testing.T) {
			path := writeFile(t, "t.csv", data)
			whole, err := OpenCSV(path)
			if err != nil {
				t.Fatal(err)
			}
			defer whole.Close()
			if err := whole.Select(context.Background(), []string{"b", "a"}); err != nil {
				t.Fatal(err)
			}
			want := wholeRecords(t, whole)
			cut := 0
			for n := 1; n <= 6; n++ {
				for minBytes := int64(1); minBytes <= int64(len(data)); minBytes++ {
					c, err := OpenCSV(path)
					if err != nil {
						t.Fatal(err)
					}
					if err := c.Select(context.Background(), []string{"b", "a"}); err != nil {
						t.Fatal(err)
					}
					got, parts, joined := splitRecords(t, c, n, minBytes)
					if parts > n {
						t.Fatalf("n=%d: %d parts", n, parts)
					}
					if joined {
						cut++
						if !slices.Equal(got, want) {
							t.Fatalf("n=%d minBytes=%d: parts read %q, the file is %q", n, minBytes, got, want)
						}
					}
					if again := wholeRecords(t, c); !slices.Equal(again, want) {
						t.Fatalf("after Split: %q, want %q", again, want)
					}
					c.Close()
				}
			}
			if cut == 0 && name != "header only" {
				t.Fatal("no split joined")
			}
		})
	}
}

// TestCSVSplitInsideAQuote cuts after a newline inside a quoted field: the
// parts must not say they joined.
func TestCSVSplitInsideAQuote(t *testing.T) {
	// The cut at half the rows falls inside the long quoted field.
	data := "a,b\n1,\"" + strings.Repeat("x\n", 50) + "\"\n2,y\n"
	c, err := OpenCSV(writeFile(t, "t.csv", data))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Select(context.Background(), []string{"a"}); err != nil {
		t.Fatal(err)
	}
	got, parts, joined := splitRecords(t, c, 2, 1)
	if parts != 2 {
		t.Fatalf("%d parts", parts)
	}
	if joined {
		t.Fatalf("parts that cut a quoted field joined: %q", got)
	}
}

// TestCSVSplitOnlyFromTheStart: a reader that has returned rows, or was
// not opened from a file, is not split.
func TestCSVSplitOnlyFromTheStart(t *testing.T) {
	data := "a\n1\n2\n3\n"
	c, err := OpenCSV(writeFile(t, "t.csv", data))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Select(context.Background(), []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.NextRecord(); err != nil {
		t.Fatal(err)
	}
	if ps, _ := c.Split(2, 1); ps != nil {
		t.Fatal("split after a row was read")
	}
	r, err := NewCSV("mem", strings.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Select(context.Background(), []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if ps, _ := r.Split(2, 1); ps != nil {
		t.Fatal("split a reader that is not a file")
	}
}

// TestParquetSplitIsTheWholeFile cuts a file of 7 row groups into runs of
// groups: their rows are the file's, in order.
func TestParquetSplitIsTheWholeFile(t *testing.T) {
	path := writeParquet(t, people(70), 10)
	cols := []string{"sex", "age", "region"}
	whole, err := OpenParquet(path)
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	if err := whole.Select(context.Background(), cols); err != nil {
		t.Fatal(err)
	}
	want := wholeRecords(t, whole)
	for n := 2; n <= 8; n++ {
		p, err := OpenParquet(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Select(context.Background(), cols); err != nil {
			t.Fatal(err)
		}
		got, parts, joined := splitRecords(t, p, n, 1)
		if parts != min(n, 7) || !joined {
			t.Fatalf("n=%d: %d parts, joined %v", n, parts, joined)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("n=%d: parts read %q, the file is %q", n, got, want)
		}
		if again := wholeRecords(t, p); !slices.Equal(again, want) {
			t.Fatalf("after Split: %q, want %q", again, want)
		}
		p.Close()
	}
}

// TestCountColumnSplit: the parts of a table read with a count column
// weigh each row by its count, and a bad count fails the part.
func TestCountColumnSplit(t *testing.T) {
	path := writeFile(t, "t.csv", "sex,n\nF,3\nM,0\nF,2\nM,4\n")
	tab, err := Open(context.Background(), Spec{Path: path, CountColumn: "n"})
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	if err := tab.Select(context.Background(), []string{"sex"}); err != nil {
		t.Fatal(err)
	}
	ps, joined := tab.(splitter).Split(2, 1)
	sum := map[string]int64{}
	for _, next := range ps {
		for {
			rec, w, err := next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			sum[string(rec[0])] += w
		}
	}
	if len(ps) != 2 || !joined() || sum["F"] != 5 || sum["M"] != 4 {
		t.Fatalf("%d parts, sums %v", len(ps), sum)
	}

	bad := writeFile(t, "bad.csv", "sex,n\nF,3\nM,x\n")
	tab2, err := Open(context.Background(), Spec{Path: bad, CountColumn: "n"})
	if err != nil {
		t.Fatal(err)
	}
	defer tab2.Close()
	if err := tab2.Select(context.Background(), []string{"sex"}); err != nil {
		t.Fatal(err)
	}
	ps, _ = tab2.(splitter).Split(2, 1)
	failed := false
	for _, next := range ps {
		for {
			_, _, err := next()
			if err != nil {
				failed = failed || !errors.Is(err, io.EOF)
				break
			}
		}
	}
	if len(ps) == 0 || !failed {
		t.Fatalf("%d parts, a bad count failed none", len(ps))
	}
}

// TestParquetSplitIndexedGivesPositions: the parts of SplitIndexed give
// the positions of the file's values in the domains (dictionary-encoded
// and plain columns), in order, and a value outside its domain fails its
// part.
func TestParquetSplitIndexedGivesPositions(t *testing.T) {
	path := writeParquet(t, people(70), 10)
	cols := []string{"sex", "age", "region"}
	whole, err := OpenParquet(path)
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	if err := whole.Select(context.Background(), cols); err != nil {
		t.Fatal(err)
	}
	want := wholeRecords(t, whole)
	domains := [][]string{{"M", "F"}, nil, {"r4", "r3", "r2", "r1", "r0"}}
	for a := -1; a < 90; a++ {
		domains[1] = append(domains[1], strconv.Itoa(a))
	}
	for n := 1; n <= 4; n++ {
		p, err := OpenParquet(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Select(context.Background(), cols); err != nil {
			t.Fatal(err)
		}
		ps, joined := p.SplitIndexed(n, 1, domains)
		var got []string
		pos := [][]int32{make([]int32, 7), make([]int32, 7), make([]int32, 7)}
		for _, next := range ps {
			for {
				k, err := next(pos)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil || k < 1 {
					t.Fatalf("n=%d: %d rows, %v", n, k, err)
				}
				for r := range k {
					got = append(got, domains[0][pos[0][r]]+"|"+domains[1][pos[1][r]]+"|"+domains[2][pos[2][r]])
				}
			}
		}
		if len(ps) != n || !joined() || !slices.Equal(got, want) {
			t.Fatalf("n=%d: %d parts read %q, the file is %q", n, len(ps), got, want)
		}
		p.Close()
	}
	// Without "F", the dictionary-encoded column has a value outside it.
	domains[0] = []string{"M"}
	p, err := OpenParquet(path)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Select(context.Background(), cols); err != nil {
		t.Fatal(err)
	}
	ps, _ := p.SplitIndexed(1, 1, domains)
	pos := [][]int32{make([]int32, 100), make([]int32, 100), make([]int32, 100)}
	if _, err := ps[0](pos); err == nil {
		t.Fatal("a value outside its domain gave a position")
	}
}
