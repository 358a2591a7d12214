package testkit

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/knowdp/knowdp/domain"
)

// NationalGeo returns the schema of the national benchmarks: a 4-level
// geography (4 regions > 50 states > 3% as many counties as tracts >
// leaves tracts, groups of unequal sizes) crossed with sex and 18 age
// bands, and each tract's share of the population.
func NationalGeo(tb testing.TB, leaves int) (*domain.Schema, []float64) {
	tb.Helper()
	rng := rand.New(rand.NewPCG(2020, 1))
	counties := max(leaves*3/100, 1)
	states := min(50, counties)
	regions := min(4, states)
	// Unequal groups: each unit picks its parent with a skewed
	// probability, every parent getting at least one child.
	assign := func(children, parents int) []int {
		p := make([]int, children)
		for i := range p {
			if i < parents {
				p[i] = i
				continue
			}
			u := rng.Float64()
			p[i] = int(u * u * float64(parents))
		}
		rng.Shuffle(children, func(i, j int) { p[i], p[j] = p[j], p[i] })
		return p
	}
	tractCounty, countyState, stateRegion := assign(leaves, counties), assign(counties, states), assign(states, regions)
	d := domain.Dimension{Name: "geo", Levels: []string{"region", "state", "county", "tract"}, Parents: map[string]map[string]string{
		"county": {}, "state": {}, "region": {},
	}}
	for i := range leaves {
		v := "t" + strconv.Itoa(i)
		d.Values = append(d.Values, v)
		d.Parents["county"][v] = "c" + strconv.Itoa(tractCounty[i])
	}
	for i := range counties {
		d.Parents["state"]["c"+strconv.Itoa(i)] = "s" + strconv.Itoa(countyState[i])
	}
	for i := range states {
		d.Parents["region"]["s"+strconv.Itoa(i)] = "r" + strconv.Itoa(stateRegion[i])
	}
	ages := make([]string, 18)
	for i := range ages {
		ages[i] = fmt.Sprintf("%d-%d", 5*i, 5*i+4)
	}
	s, err := domain.NewSchema([]domain.Dimension{d, {Name: "sex", Values: []string{"F", "M"}}, {Name: "age", Values: ages}})
	if err != nil {
		tb.Fatal(err)
	}
	w := make([]float64, leaves)
	var total float64
	for i := range w {
		w[i] = 0.2 + rng.ExpFloat64()
		total += w[i]
	}
	for i := range w {
		w[i] /= total
	}
	return s, w
}

// NationalTables are the tables of the national benchmarks, as --cuboid
// flags: at each level of the geography the level alone, by sex and by sex
// and age, and the grand total; NationalExact is their invariant, the state
// totals.
var (
	NationalTables = []string{
		"geo:region", "geo:region,sex", "geo:region,sex,age",
		"geo:state", "geo:state,sex", "geo:state,sex,age",
		"geo:county", "geo:county,sex", "geo:county,sex,age",
		"geo:tract", "geo:tract,sex", "geo:tract,sex,age",
		"",
	}
	NationalExact = "geo:state"
)

// WriteNationalPersons writes n synthetic persons over the schema's tracts
// (in the tracts' proportions, sex and age uniform, rows in random order as
// a real file would have them) as CSV files with the header geo,sex,age:
// the rows in order, split evenly between the paths.
func WriteNationalPersons(tb testing.TB, paths []string, s *domain.Schema, weights []float64, n int) {
	tb.Helper()
	rng := rand.New(rand.NewPCG(2020, 2))
	cum := make([]float64, len(weights))
	var c float64
	for i, x := range weights {
		c += x
		cum[i] = c
	}
	tracts, ages := s.Dim(0).Values, s.Dim(2).Values
	for k, path := range paths {
		f, err := os.Create(path)
		if err != nil {
			tb.Fatal(err)
		}
		w := bufio.NewWriterSize(f, 1<<20)
		w.WriteString("geo,sex,age\n")
		for range n*(k+1)/len(paths) - n*k/len(paths) {
			u := rng.Float64()
			lo, hi := 0, len(cum)-1
			for lo < hi {
				mid := (lo + hi) / 2
				if cum[mid] < u {
					lo = mid + 1
				} else {
					hi = mid
				}
			}
			w.WriteString(tracts[lo])
			if rng.IntN(2) == 0 {
				w.WriteString(",F,")
			} else {
				w.WriteString(",M,")
			}
			w.WriteString(ages[rng.IntN(18)])
			w.WriteByte('\n')
		}
		if err := w.Flush(); err != nil {
			tb.Fatal(err)
		}
		if err := f.Close(); err != nil {
			tb.Fatal(err)
		}
	}
}
