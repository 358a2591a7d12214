package pipeline

import (
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/privacy"
)

// fact is a row of writeTable's 3-dimension tables, as Parquet.
type fact struct {
	D2 string `parquet:"d2,dict"`
	D1 string `parquet:"d1"`
	D0 string `parquet:"d0"`
}

// toParquet rewrites a CSV shard of writeTable as Parquet in small row
// groups.
func toParquet(t *testing.T, csvPath string) string {
	t.Helper()
	f, err := os.Open(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var rows []fact
	for _, r := range recs[1:] { // header d2,d1,d0,note
		rows = append(rows, fact{D2: r[0], D1: r[1], D0: r[2]})
	}
	p := strings.TrimSuffix(csvPath, ".csv") + ".parquet"
	out, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[fact](out, parquet.MaxRowsPerRowGroup(1000))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestParquetShards releases from Parquet shards (one of them CSV) and
// checks the result against the single-machine release of the same rows.
func TestParquetShards(t *testing.T) {
	dir := t.TempDir()
	tb := writeTable(t, dir, []int{30, 40, 50}, 9000, 3, 3)
	files := []string{toParquet(t, tb.shards[0]), toParquet(t, tb.shards[1]), tb.shards[2]}
	exact := []domain.Cuboid{0b001, 0b110}
	eps, _ := privacy.NewEpsilon(1)
	want := coreRelease(t, tb, domain.Base(3), exact, eps, 9)
	out := filepath.Join(dir, "pq.csv")
	if _, err := Run(context.Background(), seeded(cuboidSpec(table{schema: tb.schema, shards: files}, domain.Base(3), exact, eps, out), 9)); err != nil {
		t.Fatal(err)
	}
	compare(t, out, want)

	// A value outside the domain is named by file, row group and column.
	bad := filepath.Join(dir, "bad.parquet")
	wf, _ := os.Create(bad)
	w := parquet.NewGenericWriter[fact](wf)
	w.Write([]fact{{D0: "d0_1", D1: "d1_1", D2: "d2_1"}, {D0: "d0_1", D1: "nope", D2: "d2_1"}})
	w.Close()
	wf.Close()
	_, err := Run(context.Background(), cuboidSpec(table{schema: tb.schema, shards: []string{bad}}, 1, nil, eps, filepath.Join(dir, "bad.csv")))
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), `"d1"`) || !strings.Contains(err.Error(), `value "nope" is not in the declared domain`) {
		t.Fatalf("got %v, want an error naming %s, column d1 and the value", err, bad)
	}
	t.Log(err)
}
