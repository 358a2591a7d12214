package fileio

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
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

func writeString(s string) func(io.Writer) error {
	return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
}

func TestWritePairAtomic(t *testing.T) {
	dir := t.TempDir()
	csv, side := filepath.Join(dir, "r.csv"), filepath.Join(dir, "r.json")
	if err := WritePairAtomic(File{csv, writeString("c1")}, File{side, writeString("j1")}); err != nil {
		t.Fatal(err)
	}
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return string(b)
	}
	if read(csv) != "c1" || read(side) != "j1" {
		t.Fatalf("pair written as %q, %q", read(csv), read(side))
	}
	for _, tc := range []struct {
		name    string
		sidecar string
		setup   func(t *testing.T, sidecar string)
		wantCSV string // what r.csv holds after the failed write
	}{
		// The sidecar's directory does not exist: no temporary file.
		{"missing directory", filepath.Join(dir, "missing", "r.json"), func(*testing.T, string) {}, "c1"},
		// The sidecar's name is a non-empty directory: both temporary files
		// are written, the CSV is renamed into place, then the sidecar's
		// rename fails and the CSV must be put back.
		{"second rename fails", filepath.Join(dir, "dirside"), func(t *testing.T, p string) {
			if err := os.MkdirAll(filepath.Join(p, "x"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, "c1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.setup(t, tc.sidecar)
			err := WritePairAtomic(File{csv, writeString("c2")}, File{tc.sidecar, writeString("j2")})
			if err == nil {
				t.Fatal("write succeeded")
			}
			if got := read(csv); got != tc.wantCSV {
				t.Errorf("CSV is %q after a failed sidecar write, want %q", got, tc.wantCSV)
			}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if e.Name()[0] == '.' {
					t.Errorf("temporary file %s left behind", e.Name())
				}
			}
		})
	}
	// A new CSV (none before) is removed when its sidecar cannot be placed.
	fresh := filepath.Join(dir, "fresh.csv")
	if err := WritePairAtomic(File{fresh, writeString("c")}, File{filepath.Join(dir, "dirside"), writeString("j")}); err == nil {
		t.Fatal("write succeeded")
	}
	if _, err := os.Stat(fresh); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("CSV left behind without its sidecar: %v", err)
	}
}

func TestCheckOutputs(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	for _, name := range []string{"data.csv", "s.schema.json"} {
		if err := os.WriteFile(p(name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(p("real"), 0o755); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(p("data.csv"), p("link.csv")))
	must(os.Symlink(p("real"), p("linkdir")))
	must(os.Link(p("data.csv"), p("hard.csv")))
	must(os.WriteFile(p("real/in.csv"), []byte("x"), 0o644))
	inputs := []Named{{"--data", p("data.csv")}, {"--schema", p("s.schema.json")}, {"--other", p("real/in.csv")}, {"--unset", ""}}
	for _, tc := range []struct {
		name    string
		outputs []Named
		want    string // "" for no error
	}{
		{"fresh", []Named{{"--out", p("out.csv")}, {"sidecar", p("out.json")}}, ""},
		{"same as data", []Named{{"--out", p("data.csv")}}, "--out " + p("data.csv") + " is the same file as --data"},
		{"relative spelling", []Named{{"--out", dir + "/./real/../data.csv"}}, "same file as --data"},
		{"sidecar is the schema", []Named{{"--out", p("s.schema.csv")}, {"sidecar", p("s.schema.json")}}, "sidecar"},
		{"symlink to data", []Named{{"--out", p("link.csv")}}, "same file as --data"},
		{"hard link to data", []Named{{"--out", p("hard.csv")}}, "same file as --data"},
		{"new file through symlinked dir", []Named{{"--out", p("linkdir/in.csv")}}, "same file as --other"},
		{"outputs collide", []Named{{"--out", p("a.json")}, {"sidecar", p("a.json")}}, "sidecar " + p("a.json") + " is the same file as --out"},
		{"stdout", []Named{{"--out", "-"}}, "standard output"},
		{"directory", []Named{{"--out", p("real")}}, "is a directory"},
		{"missing directory", []Named{{"--out", p("nodir/r.csv")}}, "--out " + p("nodir/r.csv") + ": directory " + p("nodir") + " does not exist"},
		{"missing directory, relative", []Named{{"--out", "nodir-knowdp-test/r.csv"}}, "--out nodir-knowdp-test/r.csv: directory nodir-knowdp-test does not exist"},
		{"parent is a file", []Named{{"--out", p("data.csv/r.csv")}}, p("data.csv") + " is not a directory"},
		{"new directory in an existing one", []Named{{"--out", p("real/new")}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckOutputs(inputs, tc.outputs)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestWriteDirAtomic(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "out")
	files := []File{
		{Path: "a.csv", Write: func(w io.Writer) error { _, err := io.WriteString(w, "a\n"); return err }},
		{Path: "release.json", Write: func(w io.Writer) error { _, err := io.WriteString(w, "{}\n"); return err }},
	}
	if err := WriteDirAtomic(dir, files); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a.csv")); err != nil || string(b) != "a\n" {
		t.Fatalf("a.csv: %q %v", b, err)
	}
	// An existing, non-empty directory is never overwritten.
	if err := WriteDirAtomic(dir, files[:1]); err == nil {
		t.Fatal("overwrote an existing directory")
	}
	// A failing file leaves nothing behind.
	bad := filepath.Join(parent, "bad")
	fail := File{Path: "b.csv", Write: func(w io.Writer) error { return errors.New("disk full") }}
	if err := WriteDirAtomic(bad, []File{files[0], fail}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("error %v", err)
	}
	entries, _ := os.ReadDir(parent)
	if len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
}

// TestWriteErrorsNameTheOutput checks that a write that cannot create its
// temporary file names the output, never the temporary file, which the
// user did not give.
func TestWriteErrorsNameTheOutput(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nodir", "r.csv")
	for name, write := range map[string]func() error{
		"WriteAtomic": func() error { return WriteFileAtomic(missing, []byte("x")) },
		"WritePairAtomic": func() error {
			return WritePairAtomic(File{missing, writeString("c")}, File{filepath.Join(dir, "nodir", "r.json"), writeString("j")})
		},
		"WriteDirAtomic": func() error { return WriteDirAtomic(filepath.Join(dir, "nodir", "out"), nil) },
	} {
		err := write()
		if err == nil || strings.Contains(err.Error(), ".tmp") || !strings.Contains(err.Error(), "no such file or directory") ||
			!strings.Contains(err.Error(), filepath.Join(dir, "nodir")) {
			t.Errorf("%s: %v; want the output named, no temporary name", name, err)
		}
	}
}
