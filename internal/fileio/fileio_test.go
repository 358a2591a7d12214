package fileio

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.csv")
	if err := WriteFileAtomic(p, []byte("old")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := WriteAtomic(p, func(w io.Writer) error {
		io.WriteString(w, "half-written")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("error %v does not wrap the writer's error", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Errorf("failed write changed the file to %q", b)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	if err := WriteFileAtomic(p, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "new" {
		t.Errorf("file is %q, want new", b)
	}
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "x"), nil); err == nil {
		t.Error("write into a missing directory succeeded")
	}
}
