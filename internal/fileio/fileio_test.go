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

func TestWritePair(t *testing.T) {
	dir := t.TempDir()
	csv, side := filepath.Join(dir, "r.csv"), filepath.Join(dir, "r.json")
	if err := WritePair(File{csv, writeString("c1")}, File{side, writeString("j1")}, false); err != nil {
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
			err := WritePair(File{csv, writeString("c2")}, File{tc.sidecar, writeString("j2")}, true)
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
	if err := WritePair(File{fresh, writeString("c")}, File{filepath.Join(dir, "dirside"), writeString("j")}, true); err == nil {
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
	must(os.WriteFile(p("exist.csv"), []byte("x"), 0o644))
	must(os.WriteFile(p("exist.json"), []byte("x"), 0o644))
	ro := unwritableDir(t)
	inputs := []Named{{Flag: "--data", Path: p("data.csv")}, {Flag: "--schema", Path: p("s.schema.json")}, {Flag: "--other", Path: p("real/in.csv")}, {Flag: "--unset", Path: ""}}
	for _, tc := range []struct {
		name    string
		outputs []Named
		force   bool
		want    string // "" for no error
	}{
		{"fresh", []Named{{Flag: "--out", Path: p("out.csv")}, {Flag: "sidecar", Path: p("out.json")}}, false, ""},
		{"same as data", []Named{{Flag: "--out", Path: p("data.csv")}}, false, "--out " + p("data.csv") + " is the same file as --data"},
		{"relative spelling", []Named{{Flag: "--out", Path: dir + "/./real/../data.csv"}}, false, "same file as --data"},
		{"sidecar is the schema", []Named{{Flag: "--out", Path: p("s.schema.csv")}, {Flag: "sidecar", Path: p("s.schema.json")}}, false, "sidecar"},
		{"symlink to data", []Named{{Flag: "--out", Path: p("link.csv")}}, false, "same file as --data"},
		{"hard link to data", []Named{{Flag: "--out", Path: p("hard.csv")}}, false, "same file as --data"},
		{"new file through symlinked dir", []Named{{Flag: "--out", Path: p("linkdir/in.csv")}}, false, "same file as --other"},
		{"outputs collide", []Named{{Flag: "--out", Path: p("a.json")}, {Flag: "sidecar", Path: p("a.json")}}, false, "sidecar " + p("a.json") + " is the same file as --out"},
		{"stdout", []Named{{Flag: "--out", Path: "-"}}, false, "standard output"},
		{"directory", []Named{{Flag: "--out", Path: p("real")}}, false, "is a directory"},
		{"directory, forced", []Named{{Flag: "--out", Path: p("real")}}, true, "is a directory"},
		{"existing file", []Named{{Flag: "--out", Path: p("exist.csv")}}, false, "--out " + p("exist.csv") + ": the file exists; nothing is overwritten: give --force to replace it"},
		{"existing sidecar", []Named{{Flag: "--out", Path: p("new.csv")}, {Flag: "sidecar", Path: p("exist.json")}}, false, "sidecar " + p("exist.json") + ": the file exists"},
		{"existing file, forced", []Named{{Flag: "--out", Path: p("exist.csv")}, {Flag: "sidecar", Path: p("exist.json")}}, true, ""},
		{"existing directory output", []Named{{Flag: "--out", Path: p("real"), Dir: true}}, false, "--out " + p("real") + ": the directory exists; nothing is overwritten: give --force to replace it"},
		{"existing directory output, forced", []Named{{Flag: "--out", Path: p("real"), Dir: true}}, true, ""},
		{"directory output is a file", []Named{{Flag: "--out", Path: p("exist.csv"), Dir: true}}, true, "exists and is not a directory"},
		{"forced output is still not an input", []Named{{Flag: "--out", Path: p("data.csv")}}, true, "same file as --data"},
		{"unwritable directory", []Named{{Flag: "--out", Path: filepath.Join(ro, "r.csv")}}, false, "--out " + filepath.Join(ro, "r.csv") + ": permission denied"},
		{"missing directory", []Named{{Flag: "--out", Path: p("nodir/r.csv")}}, false, "--out " + p("nodir/r.csv") + ": directory " + p("nodir") + " does not exist"},
		{"missing directory, relative", []Named{{Flag: "--out", Path: "nodir-knowdp-test/r.csv"}}, false, "--out nodir-knowdp-test/r.csv: directory nodir-knowdp-test does not exist"},
		{"parent is a file", []Named{{Flag: "--out", Path: p("data.csv/r.csv")}}, false, p("data.csv") + " is not a directory"},
		{"new directory in an existing one", []Named{{Flag: "--out", Path: p("real/new")}}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckOutputs(inputs, tc.outputs, tc.force)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestWriteDir(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "out")
	files := []File{
		{Path: "a.csv", Write: writeString("a\n")},
		{Path: "release.json", Write: writeString("{}\n")},
	}
	if err := WriteDir(dir, files, false); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a.csv")); err != nil || string(b) != "a\n" {
		t.Fatalf("a.csv: %q %v", b, err)
	}
	// An existing directory is never replaced without force, not even an
	// empty one (a plain rename would replace that).
	if err := WriteDir(dir, files[:1], false); !errors.Is(err, ErrExists) {
		t.Fatalf("error %v, want ErrExists", err)
	}
	empty := filepath.Join(parent, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteDir(empty, files[:1], false); !errors.Is(err, ErrExists) {
		t.Fatalf("empty directory: error %v, want ErrExists", err)
	}
	// With force it is replaced whole: the old files are gone.
	if err := WriteDir(dir, []File{{Path: "b.csv", Write: writeString("b\n")}}, true); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "b.csv" {
		t.Fatalf("replaced directory holds %v, want only b.csv", entries)
	}
	// A failing file leaves nothing behind, and the directory as it was.
	fail := File{Path: "c.csv", Write: func(w io.Writer) error { return errors.New("disk full") }}
	if err := WriteDir(dir, []File{files[0], fail}, true); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("error %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 || entries[0].Name() != "b.csv" {
		t.Fatalf("a failed forced write changed the directory: %v", entries)
	}
	entries, _ = os.ReadDir(parent)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "report.html")
	if err := WriteFile(p, false, writeString("one")); err != nil {
		t.Fatal(err)
	}
	// A file that exists (appeared after the check) is kept.
	if err := WriteFile(p, false, writeString("two")); !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("error %v, want ErrExists naming --force", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "one" {
		t.Fatalf("file is %q after a refused write", b)
	}
	if err := WriteFile(p, true, writeString("three")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "three" {
		t.Fatalf("file is %q after a forced write", b)
	}
	// Without force a pair never replaces either file: the first one
	// written is taken back when the second exists.
	csv, side := filepath.Join(dir, "r.csv"), filepath.Join(dir, "r.json")
	if err := os.WriteFile(side, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WritePair(File{csv, writeString("c")}, File{side, writeString("j")}, false); !errors.Is(err, ErrExists) {
		t.Fatalf("error %v, want ErrExists", err)
	}
	if _, err := os.Stat(csv); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("CSV left without its sidecar: %v", err)
	}
	if b, _ := os.ReadFile(side); string(b) != "old" {
		t.Errorf("sidecar is %q, want it untouched", b)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

func TestCommitDir(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "repro-out")
	for i, force := range []bool{false, true} {
		stage, err := StageDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteFileAtomic(filepath.Join(stage, "run.json"), []byte{byte('0' + i)}); err != nil {
			t.Fatal(err)
		}
		if err := CommitDir(stage, dir, force); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "run.json")); string(b) != string(rune('0'+i)) {
			t.Fatalf("commit %d: run.json is %q", i, b)
		}
		if st, _ := os.Stat(dir); st.Mode().Perm() != 0o755 {
			t.Errorf("directory mode %v, want 0755", st.Mode().Perm())
		}
	}
	stage, err := StageDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := CommitDir(stage, dir, false); !errors.Is(err, ErrExists) {
		t.Fatalf("error %v, want ErrExists", err)
	}
	os.RemoveAll(stage)
	if entries, _ := os.ReadDir(parent); len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
}

// unwritableDir returns a directory in which no file can be created, even
// by root (who ignores permissions): /sys, a read-only file system, for
// root, otherwise a directory of mode 0555.
func unwritableDir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() == 0 {
		if err := probeWritable("/sys"); err == nil {
			t.Fatal("/sys is writable here: no read-only directory for the test")
		}
		return "/sys"
	}
	dir := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestWriteErrorsNameTheOutput checks that a write that cannot create its
// temporary file names the output, never the temporary file, which the
// user did not give.
func TestWriteErrorsNameTheOutput(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nodir", "r.csv")
	for name, write := range map[string]func() error{
		"WriteAtomic": func() error { return WriteFileAtomic(missing, []byte("x")) },
		"WriteFile":   func() error { return WriteFile(missing, false, writeString("x")) },
		"WritePair": func() error {
			return WritePair(File{missing, writeString("c")}, File{filepath.Join(dir, "nodir", "r.json"), writeString("j")}, false)
		},
		"WriteDir": func() error { return WriteDir(filepath.Join(dir, "nodir", "out"), nil, false) },
	} {
		err := write()
		if err == nil || strings.Contains(err.Error(), ".tmp") || !strings.Contains(err.Error(), "no such file or directory") ||
			!strings.Contains(err.Error(), filepath.Join(dir, "nodir")) {
			t.Errorf("%s: %v; want the output named, no temporary name", name, err)
		}
	}
}
