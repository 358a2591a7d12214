package tablefile

import (
	"bytes"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/release"
)

// TestWriteQueryCSV writes a prefix and a ranges table with their ends.
func TestWriteQueryCSV(t *testing.T) {
	s, err := domain.NewSchema([]domain.Dimension{{Name: "x", Ordered: true, Values: []string{"0", "1", "2"}}, {Name: "a", Values: []string{"0", "1"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		q    release.TableQuery
		want string
	}{
		{release.TableQuery{Kind: release.QueryPrefix}, "x_from,x_to,a,count,moe90\n0,0,0,1,0.5\n0,0,1,2,0.5\n0,1,0,3,0.5\n0,1,1,4,0.5\n0,2,0,5,0.5\n0,2,1,6,0.5\n"},
		{release.TableQuery{Kind: release.QueryRanges}, "x_from,x_to,a,count,moe90\n0,0,0,1,0.5\n0,0,1,2,0.5\n0,1,0,3,0.5\n0,1,1,4,0.5\n0,2,0,5,0.5\n0,2,1,6,0.5\n1,1,0,7,0.5\n1,1,1,8,0.5\n1,2,0,9,0.5\n1,2,1,10,0.5\n2,2,0,11,0.5\n2,2,1,12,0.5\n"},
	} {
		n := release.TableTerm(s, domain.ViewOf(0b11), c.q).Rows()
		tb := release.Table{Cuboid: 0b11, Query: c.q, MOE90: 0.5}
		for i := range n {
			tb.Counts = append(tb.Counts, float64(i+1))
		}
		var b bytes.Buffer
		if err := WriteQueryCSV(&b, s, tb); err != nil {
			t.Fatal(err)
		}
		if b.String() != c.want {
			t.Errorf("%v:\n%s\nwant\n%s", c.q.Kind, b.String(), c.want)
		}
		if name := tb.FileName(s); !strings.HasSuffix(name, "-"+c.q.Kind.String()+".csv") {
			t.Errorf("file name %q", name)
		}
	}
}
