package source

import (
	"encoding/csv"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// readAll returns the records of the fast reader with a buffer of size
// bytes, and the error that ended them (nil at the end of the input) with
// the line its record started on, reading through r.
func readAll(r io.Reader, size int) ([][]string, int, error) {
	cr := newCSVReaderSize(r, size)
	var out [][]string
	for {
		rec, err := cr.read()
		if err == io.EOF {
			return out, 0, nil
		}
		if err != nil {
			return out, cr.start, err
		}
		row := make([]string, len(rec))
		for i, f := range rec {
			row[i] = string(f)
		}
		out = append(out, row)
	}
}

// stdAll is readAll with encoding/csv (any number of fields per record).
func stdAll(in string) ([][]string, int, error) {
	r := csv.NewReader(strings.NewReader(in))
	r.FieldsPerRecord = -1
	var out [][]string
	for {
		rec, err := r.Read()
		if err == io.EOF {
			return out, 0, nil
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return out, pe.StartLine, pe.Err
			}
			return out, 0, err
		}
		out = append(out, rec)
	}
}

// compareWithStd checks the fast reader against encoding/csv on in, read
// whole, one byte at a time, and through buffers smaller than a record.
func compareWithStd(t *testing.T, in string) {
	t.Helper()
	want, wantLine, wantErr := stdAll(in)
	for _, rd := range []struct {
		name string
		r    io.Reader
		size int
	}{
		{"whole", strings.NewReader(in), csvBufSize},
		{"one byte", iotest.OneByteReader(strings.NewReader(in)), csvBufSize},
		{"1-byte buffer", strings.NewReader(in), 1},
		{"5-byte buffer", iotest.HalfReader(strings.NewReader(in)), 5},
	} {
		got, gotLine, gotErr := readAll(rd.r, rd.size)
		if !equalRecords(got, want) {
			t.Fatalf("%s: %q: records %q, encoding/csv %q", rd.name, in, got, want)
		}
		if (gotErr == nil) != (wantErr == nil) || (wantErr != nil && !errors.Is(gotErr, wantErr)) {
			t.Fatalf("%s: %q: error %v, encoding/csv %v", rd.name, in, gotErr, wantErr)
		}
		if wantErr != nil && gotLine != wantLine {
			t.Fatalf("%s: %q: error on the record starting on line %d, encoding/csv says %d", rd.name, in, gotLine, wantLine)
		}
	}
}

func equalRecords(a, b [][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			if a[i][j] != b[i][j] {
				return false
			}
		}
	}
	return true
}

var csvCases = []string{
	"",
	"a",
	"a,b\n1,2\n",
	"a,b\r\n1,2\r\n",
	"a,b\n1,2",
	"a,b\n1,2\r",
	"\n\na\n\n\nb\n\n",
	"\r\n\r\na\r\n",
	"\r",
	"\r\r\n",
	"a\rb,c\n",
	`"a","b"` + "\n",
	`"a""b",c` + "\n",
	`"a` + "\n" + `b",c` + "\n",
	`"a` + "\r\n" + `b",c` + "\r\n",
	`"",""` + "\n",
	`,,` + "\n",
	`"a,b",c`,
	`"unterminated`,
	`"unterminated` + "\n",
	`a"b,c` + "\n",
	`"a"b,c` + "\n",
	`"a" ,c` + "\n",
	`"a"` + "\r",
	`x,"a` + "\n\n" + `b"` + "\n" + `y` + "\n",
	"a,b\n1,2,3\n4\n",
	"\ufeffa,b\n1,2\n",
	`"a""` + "\n",
	`""""` + "\n",
	"a,\"b\n\"\n\n\nc\n",
}

func TestCSVReaderMatchesEncodingCSV(t *testing.T) {
	for _, in := range csvCases {
		compareWithStd(t, in)
	}
}

// TestCSVReaderLongRecords crosses the read buffer: records longer than one
// read, and records straddling a refill.
func TestCSVReaderLongRecords(t *testing.T) {
	long := strings.Repeat("x", 3*csvBufSize)
	var b strings.Builder
	for i := range 5000 {
		b.WriteString(`"q""uo` + "\n" + `ted",plain,`)
		b.WriteString(strings.Repeat("y", i%700))
		b.WriteString("\r\n")
	}
	compareWithStd(t, "a,"+long+"\n\""+long+"\",b\n")
	compareWithStd(t, b.String())
}

// FuzzCSVReader compares the fast reader with encoding/csv on arbitrary
// input: same records, and an error of the same kind on the same record.
// Run it with go test ./source -run '^$' -fuzz FuzzCSVReader -fuzztime 30s.
func FuzzCSVReader(f *testing.F) {
	for _, c := range csvCases {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, in string) {
		compareWithStd(t, in)
	})
}

// TestCSVReadError: a failed read is an error naming the file and row, not
// a short last record.
func TestCSVReadError(t *testing.T) {
	in := io.MultiReader(strings.NewReader("a,b\n1,2\n3,4"), iotest.ErrReader(errors.New("disk on fire")))
	c, err := NewCSV("t.csv", in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Next(); err != nil {
		t.Fatal(err)
	}
	if rec, err := c.Next(); err == nil || !strings.Contains(err.Error(), "t.csv: row 3") || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("Next = %q, %v; want the read error", rec, err)
	}
}
