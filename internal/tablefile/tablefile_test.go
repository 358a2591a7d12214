package tablefile

import (
	"bytes"
	"encoding/csv"
	"io"
	"math"
	"strconv"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/noise"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/release"
)

// readParquet returns the column names and the rows of a Parquet file,
// every value as the text the CSV writes (numbers parsed back to float64).
func readParquet(t *testing.T, b []byte) ([]string, [][]parquet.Value) {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range f.Schema().Fields() {
		names = append(names, c.Name())
	}
	r := parquet.NewReader(f)
	defer r.Close()
	var rows [][]parquet.Value
	buf := make([]parquet.Row, 100)
	for {
		n, err := r.ReadRows(buf)
		for _, row := range buf[:n] {
			rows = append(rows, append([]parquet.Value(nil), row.Clone()...))
		}
		if err != nil {
			break
		}
	}
	return names, rows
}

// TestTablesMatch writes the same releases as CSV (this package's and
// release's Table.WriteCSV) and Parquet and checks that all three
// have the same columns in the same order, the same rows in the same order
// and the same labels; that the CSV's numbers parse back to the released
// float64 values exactly; and that the Parquet file holds them exactly.
func TestTablesMatch(t *testing.T) {
	s, err := domain.NewSchema([]domain.Dimension{
		{Name: "sex", Values: []string{"F", "M"}},
		{Name: "town", Values: []string{"Ash", "Elm, North", "Oak"}},
		{Name: "age", Values: []string{"0-17", "18-64", "65+", "80+"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cb, err := cube.New(s, cube.DefaultCellLimit)
	if err != nil {
		t.Fatal(err)
	}
	for i := range cb.Counts {
		cb.Counts[i] = float64(i % 7)
	}
	eps, _ := privacy.NewEpsilon(1)
	for _, tc := range []struct {
		name   string
		cuboid []string
		exact  []string
	}{
		{"two dimensions, out of name order", []string{"town", "age"}, []string{"town"}},
		{"base cuboid", []string{"sex", "town", "age"}, nil},
		{"one dimension", []string{"age"}, nil},
		{"grand total", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := s.CuboidOf(tc.cuboid...)
			if err != nil {
				t.Fatal(err)
			}
			spec := release.Spec{Epsilon: eps, Tables: []domain.View{domain.ViewOf(c)}}
			if tc.exact != nil {
				e, _ := s.CuboidOf(tc.exact...)
				spec.Exact = []domain.View{domain.ViewOf(e)}
			}
			plan, err := release.NewPlan(s, spec)
			if err != nil {
				t.Fatal(err)
			}
			counts, err := cb.ProjectViews(plan.Needs())
			if err != nil {
				t.Fatal(err)
			}
			w, err := plan.Run(t.Context(), counts, noise.NewSeeded(7))
			if err != nil {
				t.Fatal(err)
			}
			rel := w.Tables[0]
			var cubeb, csvb, pb bytes.Buffer
			if err := rel.WriteCSV(&cubeb, s); err != nil {
				t.Fatal(err)
			}
			if err := Write(&csvb, CSV, s, rel.Cuboid, rel.Counts, rel.CellMOE90()); err != nil {
				t.Fatal(err)
			}
			if err := WriteParquet(&pb, s, rel.Cuboid, rel.Counts, rel.CellMOE90()); err != nil {
				t.Fatal(err)
			}
			recs, err := csv.NewReader(&csvb).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			cubeRecs, err := csv.NewReader(&cubeb).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			if len(cubeRecs) != len(recs) || !slicesEqual(cubeRecs[0], recs[0]) {
				t.Fatalf("header %q, cube writes %q", recs[0], cubeRecs[0])
			}
			names, rows := readParquet(t, pb.Bytes())
			if !slicesEqual(names, recs[0]) {
				t.Fatalf("Parquet columns %q, CSV columns %q", names, recs[0])
			}
			if len(rows) != len(recs)-1 || len(rows) != len(rel.Counts) {
				t.Fatalf("%d Parquet rows, %d CSV rows, %d cells", len(rows), len(recs)-1, len(rel.Counts))
			}
			k := len(names) - 2
			for i, row := range rows {
				rec := recs[i+1]
				for j := range k {
					if got := row[j].String(); got != rec[j] {
						t.Fatalf("row %d column %q: %q, CSV %q", i+1, names[j], got, rec[j])
					}
				}
				count, moe := row[k].Double(), row[k+1].Double()
				if count != rel.Counts[i] || moe != rel.CellMOE90() {
					t.Fatalf("row %d: count %v moe90 %v, released %v and %v", i+1, count, moe, rel.Counts[i], rel.CellMOE90())
				}
				cc, err1 := strconv.ParseFloat(rec[k], 64)
				cm, err2 := strconv.ParseFloat(rec[k+1], 64)
				if err1 != nil || err2 != nil || cc != count || cm != moe {
					t.Fatalf("row %d: CSV %q %q, released %v %v", i+1, rec[k], rec[k+1], count, moe)
				}
				// cube's CSV: the same labels, the same numbers to 6 decimals.
				want := cubeRecs[i+1]
				wc, _ := strconv.ParseFloat(want[k], 64)
				if !slicesEqual(want[:k], rec[:k]) || math.Abs(wc-cc) > 5.0000001e-7 {
					t.Fatalf("row %d: %q, cube writes %q", i+1, rec, want)
				}
			}
		})
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestFormatNumber(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {math.Copysign(0, -1), "0"}, {5226, "5226"}, {12345678, "12345678"}, {-2.5, "-2.5"},
		{12.000000953674316, "12.000000953674316"}, {1 << 53, "9007199254740992"}, {1<<53 - 1, "9007199254740991"},
		{math.Nextafter(0.3, 1), "0.30000000000000004"}, {1e-7, "0.0000001"},
	} {
		got := FormatNumber(tc.v)
		back, err := strconv.ParseFloat(got, 64)
		if got != tc.want || err != nil || back != tc.v {
			t.Errorf("FormatNumber(%v) = %q (parses back to %v), want %q", tc.v, got, back, tc.want)
		}
	}
	// In a table, a negative zero count is written 0 too.
	s, _ := domain.NewSchema([]domain.Dimension{{Name: "a", Values: []string{"x", "y"}}})
	var b bytes.Buffer
	if err := WriteCSV(&b, s, domain.Base(1), []float64{math.Copysign(0, -1), 1.5}, 0.25); err != nil || b.String() != "a,count,moe90\nx,0,0.25\ny,1.5,0.25\n" {
		t.Errorf("WriteCSV: %q, %v", b.String(), err)
	}
}

func TestFormats(t *testing.T) {
	for _, tc := range []struct {
		path string
		want Format
	}{{"r.csv", CSV}, {"r.parquet", Parquet}, {"dir/R.PARQUET", Parquet}, {"r", CSV}, {"r.txt", CSV}} {
		if got := FormatOf(tc.path); got != tc.want {
			t.Errorf("FormatOf(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
	for _, tc := range []struct {
		in   string
		want Format
		ok   bool
	}{{"csv", CSV, true}, {"Parquet", Parquet, true}, {"json", "", false}, {"", "", false}} {
		got, err := ParseFormat(tc.in)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("ParseFormat(%q) = %q, %v", tc.in, got, err)
		}
	}
	s, _ := domain.NewSchema([]domain.Dimension{{Name: "count", Values: []string{"a"}}})
	if err := WriteParquet(&bytes.Buffer{}, s, domain.Base(1), []float64{1}, 0); err == nil {
		t.Error("a dimension named count: no error")
	}
	if err := WriteParquet(&bytes.Buffer{}, s, domain.Base(1), []float64{1, 2}, 0); err == nil {
		t.Error("two counts for one cell: no error")
	}
}

// TestWriteRowsShards writes tables in shards of a few rows each, CSV and
// Parquet, including a view at a coarser level of a hierarchy: every shard
// has the header, and the shards' rows in order are the whole table's.
func TestWriteRowsShards(t *testing.T) {
	s, err := domain.ParseSchema([]byte(`{"dimensions":[
 {"name":"geo","levels":["region","state"],"values":["a","b","c","d","e"],
  "parents":{"region":{"a":"N","b":"N","c":"S","d":"S","e":"S"}}},
 {"name":"sex","values":["F","M"]},
 {"name":"age","values":["0-17","18+",",odd\""]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	region, err := s.ParseView("geo:region,age")
	if err != nil {
		t.Fatal(err)
	}
	views := []domain.View{domain.ViewOf(domain.Base(3)), region, domain.ViewOf(0)}
	for _, v := range views {
		n := s.ViewSize(v)
		counts := make([]float64, n)
		for i := range counts {
			counts[i] = float64(i)*1.5 - 3
		}
		moe := func(cell int) float64 { return float64(cell) / 7 }
		for _, f := range []Format{CSV, Parquet} {
			var whole bytes.Buffer
			if err := WriteRows(&whole, f, s, v, 0, counts, moe, false); err != nil {
				t.Fatal(err)
			}
			wantHeader, wantRows := tableRows(t, f, whole.Bytes())
			var gotRows [][]string
			for lo := 0; lo < n; lo += 4 {
				var part bytes.Buffer
				if err := WriteRows(&part, f, s, v, lo, counts[lo:min(lo+4, n)], moe, false); err != nil {
					t.Fatal(err)
				}
				header, rows := tableRows(t, f, part.Bytes())
				if !slicesEqual(header, wantHeader) {
					t.Fatalf("%s %s shard at %d: header %q, want %q", s.FormatView(v), f, lo, header, wantHeader)
				}
				gotRows = append(gotRows, rows...)
			}
			if len(gotRows) != len(wantRows) {
				t.Fatalf("%s %s: %d rows in the shards, %d in the table", s.FormatView(v), f, len(gotRows), len(wantRows))
			}
			for i := range gotRows {
				if !slicesEqual(gotRows[i], wantRows[i]) {
					t.Fatalf("%s %s row %d: %q in the shards, %q in the table", s.FormatView(v), f, i, gotRows[i], wantRows[i])
				}
			}
			if len(wantRows) != n {
				t.Fatalf("%s %s: %d rows for %d cells", s.FormatView(v), f, len(wantRows), n)
			}
		}
		if err := WriteRows(io.Discard, CSV, s, v, n-1, []float64{1, 2}, moe, false); err == nil {
			t.Errorf("%s: rows past the end of the table were written", s.FormatView(v))
		}
	}
}

// tableRows reads a CSV or Parquet table as its header and rows of text.
func tableRows(t *testing.T, f Format, b []byte) ([]string, [][]string) {
	t.Helper()
	if f == CSV {
		recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		return recs[0], recs[1:]
	}
	names, rows := readParquet(t, b)
	out := make([][]string, len(rows))
	for i, row := range rows {
		for _, v := range row {
			if v.Kind() == parquet.Double {
				out[i] = append(out[i], FormatNumber(v.Double()))
			} else {
				out[i] = append(out[i], v.String())
			}
		}
	}
	return names, out
}
