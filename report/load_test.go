package report

import (
	"bytes"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/tablefile"
)

// flatRelease is the release of workloadJSON: {a,b}, {a} and the total,
// with {a}'s y cell 0.5 above {a,b}'s y margin (3 + 4 = 7).
func flatRelease() fstest.MapFS {
	return fstest.MapFS{
		"release.json": {Data: []byte(workloadJSON)},
		"ab.csv":       {Data: []byte("a,b,count,moe90\nx,p,1,4.5\nx,q,2,4.5\ny,p,3,4.5\ny,q,4,4.5\n")},
		"a.csv":        {Data: []byte("\ufeffa,count,moe90\r\nx,3,3\r\ny,7.5,3\r\n")},
		"total.csv":    {Data: []byte("count,moe90\n10,0\n")},
	}
}

func TestLoad(t *testing.T) {
	rel, err := Load(flatRelease(), "")
	if err != nil {
		t.Fatal(err)
	}
	if rel.Meta.File != "release.json" || len(rel.Tables) != 3 {
		t.Fatalf("%+v", rel.Meta)
	}
	a := rel.Tables[1]
	if strings.Join(a.Columns, ",") != "a,count,moe90" || a.Cells() != 2 || a.Counts[1] != 7.5 || a.Margins[0] != 3 ||
		a.Label(1) != "y" || a.Row(1) != 3 || rel.Tables[2].Label(0) != "total" || rel.Tables[0].Label(2) != "y, p" {
		t.Errorf("table {a}: %+v", a)
	}
}

// TestLoadColumnsByPosition reads dimensions by position: a release may
// name a column by its level ("state") rather than its dimension.
func TestLoadColumnsByPosition(t *testing.T) {
	fsys := flatRelease()
	fsys["ab.csv"] = &fstest.MapFile{Data: []byte("first,second,n,margin\nx,p,1,4.5\nx,q,2,4.5\ny,p,3,4.5\ny,q,4,4.5\n")}
	rel, err := Load(fsys, "release.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := rel.Tables[0]; got.Values[1][3] != "q" || got.Counts[3] != 4 || got.Margins[3] != 4.5 {
		t.Errorf("%+v", got)
	}
}

func TestLoadParquet(t *testing.T) {
	s, err := domain.ParseSchema([]byte(`{"dimensions":[{"name":"a","values":["x","y"]},{"name":"b","values":["p","q"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.ParseCuboid("a,b")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := tablefile.Write(&buf, tablefile.Parquet, s, c, []float64{1, 2, 3, 4.25}, 4.5); err != nil {
		t.Fatal(err)
	}
	fsys := flatRelease()
	fsys["ab.csv"] = &fstest.MapFile{Data: buf.Bytes()} // the content decides, not the name
	rel, err := Load(fsys, "release.json")
	if err != nil {
		t.Fatal(err)
	}
	got := rel.Tables[0]
	if got.Cells() != 4 || got.Label(3) != "y, q" || got.Counts[3] != 4.25 || got.Margins[0] != 4.5 || got.Row(0) != 1 {
		t.Errorf("parquet table: %+v", got)
	}
}

func TestLoadOneTable(t *testing.T) {
	table := []byte("a,b,count,moe90\nx,p,1.5,1.2\nx,q,2,1.2\ny,p,3,1.2\ny,q,4,1.2\n")
	rel, err := Load(fstest.MapFS{"t.json": {Data: []byte(sidecarJSON)}, "t.csv": {Data: table}}, "t.json")
	if err != nil {
		t.Fatal(err)
	}
	if rel.Tables[0].File != "t.csv" || rel.Tables[0].Counts[0] != 1.5 {
		t.Errorf("%+v", rel.Tables[0])
	}
}

func TestLoadErrors(t *testing.T) {
	for _, c := range []struct {
		name  string
		edit  func(fstest.MapFS)
		which string
		want  string
	}{
		{"no metadata", func(f fstest.MapFS) { delete(f, "release.json") }, "", "no release.json or estimate.json"},
		{"missing table", func(f fstest.MapFS) { delete(f, "a.csv") }, "", "table {a}: open a.csv"},
		{"bad number", func(f fstest.MapFS) { f["a.csv"] = &fstest.MapFile{Data: []byte("a,count,moe90\nx,3,3\ny,seven,3\n")} },
			"", `a.csv: row 3, column "count": "seven" is not a finite number`},
		{"NaN", func(f fstest.MapFS) { f["a.csv"] = &fstest.MapFile{Data: []byte("a,count,moe90\nx,NaN,3\n")} },
			"", `a.csv: row 2, column "count": "NaN" is not a finite number`},
		{"Inf", func(f fstest.MapFS) { f["a.csv"] = &fstest.MapFile{Data: []byte("a,count,moe90\nx,3,+Inf\n")} },
			"", `a.csv: row 2, column "moe90": "+Inf" is not a finite number`},
		{"negative margin", func(f fstest.MapFS) { f["a.csv"] = &fstest.MapFile{Data: []byte("a,n,m\nx,-3,-1\n")} },
			"", `a.csv: row 2, column "m": a margin of error of -1 is below 0`},
		{"short row", func(f fstest.MapFS) { f["a.csv"] = &fstest.MapFile{Data: []byte("a,count,moe90\nx,3\n")} }, "", "a.csv: record on line 2: wrong number of fields"},
		{"too few columns", func(f fstest.MapFS) { f["ab.csv"] = &fstest.MapFile{Data: []byte("a,count,moe90\nx,1,1\n")} },
			"", "ab.csv: 3 columns (a, count, moe90), but the cuboid {a,b} needs 4"},
		{"empty", func(f fstest.MapFS) { f["total.csv"] = &fstest.MapFile{} }, "", "total.csv: empty file"},
		{"path", func(f fstest.MapFS) {
			f["release.json"] = &fstest.MapFile{Data: []byte(strings.Replace(workloadJSON, `"file": "a.csv"`, `"file": "../a.csv"`, 1))}
		}, "", `table 2 ({a}): file "../a.csv" is not a file name in the release's directory`},
		{"not a release", func(f fstest.MapFS) { f["s.json"] = &fstest.MapFile{Data: []byte(`{"dimensions":[]}`)} }, "s.json", "not the metadata of a knowdp release"},
		{"one table missing", func(f fstest.MapFS) { f["t.json"] = &fstest.MapFile{Data: []byte(sidecarJSON)} }, "t.json", "open t.csv"},
	} {
		fsys := flatRelease()
		c.edit(fsys)
		_, err := Load(fsys, c.which)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}
