package tablefile

import (
	"fmt"
	"io"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/release"
)

// queryLabels returns, for a table of cuboid c publishing q, its header and
// every row's labels, in the order of the term's rows.
func queryLabels(s *domain.Schema, c domain.Cuboid, q release.TableQuery) (header []string, rows func(yield func(labels []string) bool)) {
	dims := c.Dims()
	per := make([][][]string, len(dims)) // per dimension: per row, its columns
	for k, d := range dims {
		vals := s.Dim(d).Values
		name := s.Dim(d).Name
		switch {
		case d == q.Dim && q.Kind == release.QueryPrefix:
			header = append(header, name+"_from", name+"_to")
			for j := range vals {
				per[k] = append(per[k], []string{vals[0], vals[j]})
			}
		case d == q.Dim && q.Kind == release.QueryRanges:
			header = append(header, name+"_from", name+"_to")
			for i := range vals {
				for j := i; j < len(vals); j++ {
					per[k] = append(per[k], []string{vals[i], vals[j]})
				}
			}
		default:
			header = append(header, name)
			for _, v := range vals {
				per[k] = append(per[k], []string{v})
			}
		}
	}
	return header, func(yield func([]string) bool) {
		idx := make([]int, len(dims))
		for {
			var labels []string
			for k := range dims {
				labels = append(labels, per[k][idx[k]]...)
			}
			if !yield(labels) {
				return
			}
			k := len(dims) - 1
			for ; k >= 0; k-- {
				idx[k]++
				if idx[k] < len(per[k]) {
					break
				}
				idx[k] = 0
			}
			if k < 0 {
				return
			}
		}
	}
}

// WriteQueryCSV writes a released table t of s that publishes prefix sums
// or ranges: one column per dimension of its cuboid (two, DIM_from and
// DIM_to, for the ordered one), then "count" and "moe90", one row per query
// in the order of release.TableTerm's rows.
func WriteQueryCSV(w io.Writer, s *domain.Schema, t release.Table) error {
	header, rows := queryLabels(s, t.Cuboid, t.Query)
	buf := make([]byte, 0, 1<<16)
	for _, h := range header {
		buf = append(buf, domain.CsvField(h)...)
		buf = append(buf, ',')
	}
	buf = append(buf, "count,moe90\n"...)
	i := 0
	var err error
	for labels := range rows {
		if i >= len(t.Counts) {
			err = fmt.Errorf("the table %s has %d answers for more rows", s.Format(t.Cuboid), len(t.Counts))
			break
		}
		for _, l := range labels {
			buf = append(buf, domain.CsvField(l)...)
			buf = append(buf, ',')
		}
		buf = domain.AppendExact(buf, t.Counts[i])
		buf = append(buf, ',')
		buf = domain.AppendExact(buf, t.CellMOE(i))
		buf = append(buf, '\n')
		i++
		if len(buf) > 1<<15 {
			if _, err = w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	if err != nil {
		return err
	}
	if i != len(t.Counts) {
		return fmt.Errorf("the table %s has %d answers for %d rows", s.Format(t.Cuboid), len(t.Counts), i)
	}
	_, err = w.Write(buf)
	return err
}
