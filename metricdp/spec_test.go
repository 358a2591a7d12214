package metricdp

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseSpec(t *testing.T) {
	u, err := LoadUniverse("testdata/places.csv")
	if err != nil {
		t.Fatal(err)
	}
	if u.Len() != 3 || u.IDs()[2] != "c" {
		t.Fatalf("universe %v", u.IDs())
	}
	deg := 2 * math.Pi * EarthRadiusKm / 360
	cases := []struct {
		spec string
		i, j int
		want float64
	}{
		{"euclidean:scale=0.5", 0, 2, 1.5},
		{"euclidean:scale=2,cols=x+t2", 0, 1, 2 * math.Sqrt(2)},
		{"greatcircle:eps_per_km=0.01", 0, 1, 0.01 * 0.1 * deg},
		{"dates:eps_per_day=0.5", 0, 2, 15.5},
		{"linf:scale=3,cols=t1+t2", 0, 1, 3},
		{"attribute:budgets=testdata/budgets.csv", 0, 1, 0.1},         // gender free, native Y/N: 0.1
		{"attribute:budgets=testdata/budgets.csv", 1, 2, math.Inf(1)}, // differ in gender only
		{"graph:file=testdata/graph.csv", 0, 2, 1.5},
		{"threshold:theta=1.5,eps=0.2", 0, 2, math.Inf(1)}, // 0-1 within, 1-2 at 2 > 1.5
		{"threshold:theta=2,eps=0.2", 0, 2, 0.4},
		{"smooth-threshold:theta=2,eps=0.2", 0, 2, 0.3},
		{"threshold:theta=20,eps=1,base=greatcircle", 0, 1, 1},
	}
	for _, c := range cases {
		m, _, err := ParseSpec(bg, c.spec, u)
		if err != nil {
			t.Errorf("%s: %v", c.spec, err)
			continue
		}
		if got := m.Dist(c.i, c.j); !near(got, c.want, 1e-12) {
			t.Errorf("%s: d(%d,%d) = %v, want %v", c.spec, c.i, c.j, got, c.want)
		}
	}
}

func TestParseSpecErrors(t *testing.T) {
	u, err := LoadUniverse("testdata/places.csv")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	badBudget := write("b.csv", "attribute,value,eps\nnative,Y,-1\n")
	partial := write("p.csv", "attribute,value,eps\nnative,Y,0.1\n")
	badEdge := write("g.csv", "from,to,weight\na,zz,1\n")
	for _, c := range []struct{ spec, want string }{
		{"", "empty"},
		{"manhattan:scale=1", "unknown kind"},
		{"euclidean", "missing parameter scale"},
		{"euclidean:scale=0", "scale=0 must be"},
		{"euclidean:scale=1,colz=x", "unknown parameter \"colz\""},
		{"euclidean:scale=1,cols=x+nope", "no column \"nope\""},
		{"euclidean:scale=1,scale=2", "twice"},
		{"euclidean:scale", "not key=value"},
		{"euclidean:scale=1,cols=gender", "row 2, column \"gender\": \"M\" is not a finite number"},
		{"dates:eps_per_day=1,col=gender", "not a date"},
		{"threshold:theta=1,eps=1,base=moon", "base=moon"},
		{"attribute:budgets=" + badBudget, "row 2, column \"eps\""},
		{"attribute:budgets=" + partial, "value \"N\" has no budget"},
		{"graph:file=" + badEdge, "unknown id \"zz\""},
		{"graph:file=" + filepath.Join(dir, "missing.csv"), "no such file"},
	} {
		if _, _, err := ParseSpec(bg, c.spec, u); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseSpec(%q) error %v, want %q", c.spec, err, c.want)
		}
	}
	for body, want := range map[string]string{
		"x,y\n1,2\n3,4\n":    "no column \"id\"",
		"id,x\na,1\na,2\n":   "already used",
		"id,x\na,1\n,2\n":    "empty id",
		"id,x\na,1\n":        "at least 2",
		"id,x\na,1\nb,2,3\n": "row 3",
	} {
		if _, err := LoadUniverse(write("u.csv", body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("LoadUniverse(%q) error %v, want %q", body, err, want)
		}
	}
}
