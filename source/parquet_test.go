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

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/knowdp/knowdp/noise"
)

// person has a dictionary-encoded string, a plain string, two integer
// columns and a wide column no fact table query should read.
type person struct {
	Sex    string `parquet:"sex,dict"`
	Region string `parquet:"region"`
	Age    int32  `parquet:"age"`
	Income int64  `parquet:"income"`
	Notes  string `parquet:"notes"`
}

// writeParquet writes rows in row groups of at most perGroup rows.
func writeParquet[T any](t *testing.T, rows []T, perGroup int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "t.parquet")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[T](f, parquet.MaxRowsPerRowGroup(perGroup))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

func people(n int) []person {
	r := noise.NewSeeded(7)
	rows := make([]person, n)
	notes := make([]byte, 2000)
	for i := range rows {
		for j := range notes {
			notes[j] = byte('a' + r.Uint64N(26))
		}
		rows[i] = person{
			Sex:    []string{"F", "M"}[r.Uint64N(2)],
			Region: "r" + strconv.Itoa(int(r.Uint64N(5))),
			Age:    int32(r.Uint64N(90)) - 1, // -1 checks the sign
			Income: int64(r.Uint64N(3)) * 1_000_000_000_000,
			Notes:  string(notes),
		}
	}
	return rows
}

func TestParquetReadsSelectedColumnsAcrossRowGroups(t *testing.T) {
	rows := people(2500)
	path := writeParquet(t, rows, 1000)
	p, err := OpenParquet(path)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	md := p.pf.Metadata()
	if len(md.RowGroups) != 3 {
		t.Fatalf("%d row groups, want 3", len(md.RowGroups))
	}
	if enc := md.RowGroups[0].Columns[0].MetaData.Encoding; !slices.Contains(enc, format.RLEDictionary) {
		t.Fatalf("sex is not dictionary-encoded: %v", enc)
	}
	if enc := md.RowGroups[0].Columns[1].MetaData.Encoding; slices.Contains(enc, format.RLEDictionary) {
		t.Fatalf("region is dictionary-encoded: %v", enc)
	}
	if err := p.Select(context.Background(), []string{"age", "sex", "region", "income"}); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		rec, w, err := p.NextRecord()
		if err == io.EOF {
			if i != len(rows) {
				t.Fatalf("%d rows read, want %d", i, len(rows))
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		want := []string{strconv.Itoa(int(rows[i].Age)), rows[i].Sex, rows[i].Region, strconv.FormatInt(rows[i].Income, 10)}
		for c := range want {
			if string(rec[c]) != want[c] || w != 1 {
				t.Fatalf("row %d: %q weight %d, want %q", i+1, rec, w, want)
			}
		}
	}
	// Column projection: the 2000-byte notes (5 MB in all, random letters)
	// are never read.
	st, _ := os.Stat(path)
	if n := p.BytesRead(); n <= 0 || n > st.Size()/10 {
		t.Errorf("read %d bytes of a %d-byte file for four small columns", n, st.Size())
	}
}

func TestParquetErrors(t *testing.T) {
	ctx := context.Background()
	path := writeParquet(t, people(30), 10)
	p, err := OpenParquet(path)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	err = p.Select(ctx, []string{"sex", "tenure"})
	if err == nil || !strings.Contains(err.Error(), `no column "tenure"`) || !strings.Contains(err.Error(), "sex, region, age, income, notes") {
		t.Errorf("missing column: %v", err)
	}
	if err := p.Select(ctx, []string{"sex", "age"}); err != nil {
		t.Fatal(err)
	}
	for range 17 {
		if _, _, err := p.NextRecord(); err != nil {
			t.Fatal(err)
		}
	}
	got := p.FieldError(1, "bad").Error()
	if want := path + `: row group 2, row 7 (row 17 of the file), column "age": bad`; got != want {
		t.Errorf("FieldError = %q, want %q", got, want)
	}

	type withNull struct {
		Sex *string `parquet:"sex,optional"`
		X   float64 `parquet:"x"`
	}
	f, m := "F", "M"
	path = writeParquet(t, []withNull{{Sex: &f}, {Sex: &m}, {Sex: &f}, {Sex: nil}}, 3)
	p2, err := OpenParquet(path)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	if err := p2.Select(ctx, []string{"x"}); err == nil || !strings.Contains(err.Error(), `column "x" has type DOUBLE`) {
		t.Errorf("float column: %v", err)
	}
	if err := p2.Select(ctx, []string{"sex"}); err != nil {
		t.Fatal(err)
	}
	var last error
	for n := 0; n < 10; n++ {
		if _, _, last = p2.NextRecord(); last != nil {
			break
		}
	}
	want := path + `: row group 2, row 1 (row 4 of the file), column "sex": null value`
	if last == nil || !strings.Contains(last.Error(), want) {
		t.Errorf("null: %v, want %q", last, want)
	}
	if _, _, again := p2.NextRecord(); !errors.Is(again, last) && again.Error() != last.Error() {
		t.Errorf("after an error NextRecord returned %v", again)
	}
	type address struct {
		City string `parquet:"city,dict"`
	}
	type nested struct {
		Home address `parquet:"home"`
	}
	path = writeParquet(t, []nested{{address{"Oslo"}}, {address{"Rome"}}}, 10)
	p3, err := OpenParquet(path)
	if err != nil {
		t.Fatal(err)
	}
	defer p3.Close()
	if err := p3.Select(ctx, []string{"home.city"}); err != nil {
		t.Fatal(err)
	}
	if rec, _, err := p3.NextRecord(); err != nil || string(rec[0]) != "Oslo" {
		t.Errorf("home.city = %q, %v", rec, err)
	}

	bad := filepath.Join(t.TempDir(), "bad.parquet")
	os.WriteFile(bad, []byte("PAR1 not really"), 0o644)
	if _, err := OpenParquet(bad); err == nil || !strings.Contains(err.Error(), "bad.parquet") {
		t.Errorf("corrupt file: %v", err)
	}
}
