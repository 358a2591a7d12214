package source

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCSV(t *testing.T) {
	c, err := NewCSV("t.csv", strings.NewReader("\ufeffsex, age\nF,30\nM,41\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Header(); len(got) != 2 || got[0] != "sex" || got[1] != "age" {
		t.Fatalf("header %q", got)
	}
	col, err := c.Column("age")
	if err != nil || col != 1 {
		t.Fatalf("Column(age) = %d, %v", col, err)
	}
	if _, err := c.Column("salary"); err == nil || !strings.Contains(err.Error(), "sex, age") {
		t.Errorf("missing column error %v does not list the header", err)
	}
	var rows []string
	for {
		rec, err := c.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, rec[0]+rec[1])
	}
	if strings.Join(rows, " ") != "F30 M41" || c.Row() != 3 {
		t.Errorf("rows %v, last row %d", rows, c.Row())
	}
}

func TestCSVErrorsNameFileAndRow(t *testing.T) {
	c, err := NewCSV("t.csv", strings.NewReader("a,b\n1,2\n3\n"))
	if err != nil {
		t.Fatal(err)
	}
	c.Next()
	_, err = c.Next()
	if err == nil || !strings.Contains(err.Error(), "t.csv: row 3: wrong number of fields (1, the header has 2)") {
		t.Errorf("short row error %v does not name file and row", err)
	}
	c, _ = NewCSV("t.csv", strings.NewReader("a,b\n1,x\n"))
	c.Next()
	if e := c.Errorf(1, "bad value %q", "x"); !strings.Contains(e.Error(), `t.csv: row 2, column "b": bad value "x"`) {
		t.Errorf("Errorf = %v", e)
	}
	if _, err := NewCSV("empty.csv", strings.NewReader("")); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty file error %v", err)
	}
	if _, err := OpenCSV(filepath.Join(t.TempDir(), "missing.csv")); err == nil {
		t.Error("missing file opened")
	}
	p := filepath.Join(t.TempDir(), "f.csv")
	os.WriteFile(p, []byte("x\n1\n"), 0o644)
	f, err := OpenCSV(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Next()
	if f.BytesRead() == 0 {
		t.Error("no bytes counted")
	}
	f.Close()
}

// TestOpenPicksTheFormat opens the same facts as CSV, Parquet and SQLite by
// content, whatever the file is called.
func TestOpenPicksTheFormat(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "facts.parquet") // a misleading name
	os.WriteFile(csvPath, []byte("sex,age\nF,30\n"), 0o644)
	pq := writeParquet(t, people(3), 10)
	db := sqliteFacts(t)
	for _, tc := range []struct {
		spec Spec
		want string
	}{
		{Spec{Path: csvPath}, "*source.CSV"},
		{Spec{Path: pq}, "*source.Parquet"},
		{Spec{Path: db, Table: "people"}, "*source.SQL"},
	} {
		tab, err := Open(ctx, tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%T", tab); got != tc.want {
			t.Errorf("Open(%v) = %s, want %s", tc.spec, got, tc.want)
		}
		if err := tab.Select(ctx, []string{"sex"}); err != nil {
			t.Errorf("%v: %v", tc.spec, err)
		}
		tab.Close()
	}
	for _, tc := range []struct {
		spec  Spec
		words string
	}{
		{Spec{}, "no path"},
		{Spec{Path: csvPath, Table: "people"}, "only for databases; this is a CSV file"},
		{Spec{Path: pq, Table: "people"}, "this is a parquet file"},
		{Spec{Path: filepath.Join(dir, "missing.csv")}, "missing.csv"},
	} {
		if _, err := Open(ctx, tc.spec); err == nil || !strings.Contains(err.Error(), tc.words) {
			t.Errorf("Open(%v) error %v, want %q", tc.spec, err, tc.words)
		}
	}
}

// TestCSVNextStringsSurviveTheNextRow: Next reuses its slice but not the
// strings, which callers keep (metricdp keeps ids).
func TestCSVNextStringsSurviveTheNextRow(t *testing.T) {
	c, err := NewCSV("t.csv", strings.NewReader("a,b\n\"x,1\",y\n\nz,\"w\"\"\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	r1, _ := c.Next()
	first := []string{r1[0], r1[1]}
	r2, err := c.Next()
	if err != nil {
		t.Fatal(err)
	}
	if first[0] != "x,1" || first[1] != "y" || r2[0] != "z" || r2[1] != `w"` {
		t.Errorf("rows %q then %q", first, r2)
	}
	// The blank line makes the row and line numbers differ.
	if e := c.Errorf(0, "bad"); e.Error() != `t.csv: row 3 (line 4), column "a": bad` {
		t.Errorf("Errorf = %v", e)
	}
}
