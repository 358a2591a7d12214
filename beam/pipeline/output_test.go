package pipeline

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestWriteDirDropsTemporaryFiles: a shard's temporary file left by a
// worker that died while writing it (the shard written again by the
// retry) does not reach the output directory.
func TestWriteDirDropsTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	tb := workloadTable(t, dir)
	out := filepath.Join(dir, "rel")
	pl, err := NewPlan(Spec{Files: tb.shards, Schema: tb.schema, Job: Job{Cuboids: []string{"d0,d1", "d1"}, Epsilon: 1}, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	stage := filepath.Join(dir, ".rel.stage")
	want := []string{"d0-d1/part-00000.csv", "d0-d1/part-00001.csv", "d1.csv"}
	if err := os.MkdirAll(filepath.Join(stage, "d0-d1"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range append(slices.Clone(want), "d0-d1/part-00001.csv.12345.tmp", "d1.csv.678.tmp") {
		if err := os.WriteFile(filepath.Join(stage, f), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files, err := pl.writeDir(stage, []byte("{}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(files, append(want, "release.json")) {
		t.Errorf("files %q, want %q", files, append(want, "release.json"))
	}
	var got []string
	filepath.WalkDir(out, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(out, path)
			got = append(got, rel)
		}
		return err
	})
	if !slices.Equal(got, append(want, "release.json")) {
		t.Errorf("the output holds %q, want %q", got, append(want, "release.json"))
	}
	// A missing shard fails the release.
	stage2 := filepath.Join(dir, ".rel2.stage")
	os.MkdirAll(filepath.Join(stage2, "d0-d1"), 0o755)
	os.WriteFile(filepath.Join(stage2, "d1.csv"), []byte("x\n"), 0o644)
	pl.spec.Out = filepath.Join(dir, "rel2")
	if _, err := pl.writeDir(stage2, []byte("{}\n")); err == nil {
		t.Error("a release with missing shards was written")
	}
}
