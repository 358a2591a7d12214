package source

import (
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
	if err == nil || !strings.Contains(err.Error(), "t.csv: row 3") {
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
