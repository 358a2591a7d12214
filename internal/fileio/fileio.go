// Package fileio writes files atomically, so that a failed or interrupted
// write never leaves a half-written output behind, writes pairs of files
// (an output and its privacy sidecar) all or nothing, and refuses output
// paths that would overwrite an input.
package fileio

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteAtomic writes path by calling write on a buffered temporary file in
// the same directory, syncing it and renaming it over path. If write or any
// step fails, path is untouched and the temporary file is removed.
func WriteAtomic(path string, write func(w io.Writer) error) error {
	tmp, err := writeTemp(path, write)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// WriteFileAtomic writes data to path atomically.
func WriteFileAtomic(path string, data []byte) error {
	return WriteAtomic(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// File is one file of a WritePairAtomic.
type File struct {
	Path  string
	Write func(w io.Writer) error
}

// WritePairAtomic writes two files all or nothing: both are written to
// temporary files and synced before either is renamed into place, and if
// the second rename fails the first file is put back as it was (restored,
// or removed if it did not exist). It is how an output and the sidecar
// that states its privacy guarantee are written, so that neither is ever
// left without the other.
func WritePairAtomic(a, b File) error {
	tmpA, err := writeTemp(a.Path, a.Write)
	if err != nil {
		return err
	}
	tmpB, err := writeTemp(b.Path, b.Write)
	if err != nil {
		os.Remove(tmpA)
		return err
	}
	// Keep the old a (if any) under a temporary name until b is in place.
	backup := ""
	if _, err := os.Lstat(a.Path); err == nil {
		f, err := os.CreateTemp(filepath.Dir(a.Path), "."+filepath.Base(a.Path)+".old*")
		if err != nil {
			os.Remove(tmpA)
			os.Remove(tmpB)
			return fmt.Errorf("write %s: %w", a.Path, err)
		}
		backup = f.Name()
		f.Close()
		if err := os.Rename(a.Path, backup); err != nil {
			os.Remove(backup)
			os.Remove(tmpA)
			os.Remove(tmpB)
			return fmt.Errorf("write %s: %w", a.Path, err)
		}
	}
	restore := func() error {
		if backup == "" {
			return os.Remove(a.Path)
		}
		return os.Rename(backup, a.Path)
	}
	if err := os.Rename(tmpA, a.Path); err != nil {
		os.Remove(tmpA)
		os.Remove(tmpB)
		if rerr := restore(); rerr != nil && backup != "" {
			return fmt.Errorf("write %s: %w (and restoring it from %s failed: %v)", a.Path, err, backup, rerr)
		}
		return fmt.Errorf("write %s: %w", a.Path, err)
	}
	if err := os.Rename(tmpB, b.Path); err != nil {
		os.Remove(tmpB)
		if rerr := restore(); rerr != nil {
			return fmt.Errorf("write %s: %w; %s was written without it and could not be undone: %v", b.Path, err, a.Path, rerr)
		}
		return fmt.Errorf("write %s: %w (%s left as it was)", b.Path, err, a.Path)
	}
	if backup != "" {
		os.Remove(backup)
	}
	return nil
}

// writeTemp writes a synced temporary file beside path and returns its name.
func writeTemp(path string, write func(w io.Writer) error) (name string, err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp*")
	if err != nil {
		return "", fmt.Errorf("write %s: %w", path, tempError(err))
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<16)
	if err := write(bw); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return f.Name(), nil
}

// tempError is the error of creating a temporary file or directory
// without the temporary name, which the user never gave and cannot act on
// ("no such file or directory", "permission denied").
func tempError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Named is a path with the flag (or role) that named it, for error messages.
type Named struct {
	Flag, Path string
}

// ErrOverwrite is wrapped by CheckOutputs' errors.
var ErrOverwrite = errors.New("output would overwrite another file of the command")

// CheckOutputs refuses output paths that resolve to an input or to another
// output: the same file after symbolic links are followed (also for an
// output that does not exist yet, through a symlinked directory), or the
// same file under another name (a hard link). Call it before reading any
// input, so that the refusal depends on the paths only. An output named
// "-" is refused too: outputs are files.
func CheckOutputs(inputs, outputs []Named) error {
	type resolved struct {
		Named
		abs  string
		info os.FileInfo
	}
	resolve := func(n Named) (resolved, error) {
		abs, err := Resolve(n.Path)
		if err != nil {
			return resolved{}, fmt.Errorf("%s %s: %w", n.Flag, n.Path, err)
		}
		info, _ := os.Stat(abs)
		return resolved{n, abs, info}, nil
	}
	same := func(a, b resolved) bool {
		return a.abs == b.abs || (a.info != nil && b.info != nil && os.SameFile(a.info, b.info))
	}
	var ins, outs []resolved
	for _, n := range inputs {
		if n.Path == "" {
			continue
		}
		r, err := resolve(n)
		if err != nil {
			return err
		}
		ins = append(ins, r)
	}
	for _, n := range outputs {
		if n.Path == "-" {
			return fmt.Errorf("%s -: writing to standard output is not supported; give a file name", n.Flag)
		}
		r, err := resolve(n)
		if err != nil {
			return err
		}
		if r.info != nil && r.info.IsDir() {
			return fmt.Errorf("%s %s: is a directory", n.Flag, n.Path)
		}
		// The output is created in its directory, which must exist.
		if parent := filepath.Dir(r.abs); r.info == nil {
			if st, err := os.Stat(parent); err != nil {
				return fmt.Errorf("%s %s: directory %s does not exist", n.Flag, n.Path, filepath.Dir(n.Path))
			} else if !st.IsDir() {
				return fmt.Errorf("%s %s: %s is not a directory", n.Flag, n.Path, filepath.Dir(n.Path))
			}
		}
		for _, in := range ins {
			if same(r, in) {
				return fmt.Errorf("%s %s is the same file as %s %s: %w", n.Flag, n.Path, in.Flag, in.Path, ErrOverwrite)
			}
		}
		for _, o := range outs {
			if same(r, o) {
				return fmt.Errorf("%s %s is the same file as %s %s: %w", n.Flag, n.Path, o.Flag, o.Path, ErrOverwrite)
			}
		}
		outs = append(outs, r)
	}
	return nil
}

// Resolve returns the absolute path that path refers to with every
// symbolic link followed. For a path that does not exist yet it resolves
// the longest existing ancestor and appends the rest, so that a new file
// through a symlinked directory resolves where it will be created.
func Resolve(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	rest := ""
	for p := abs; ; {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest), nil
		}
		parent := filepath.Dir(p)
		if parent == p {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// WriteDirAtomic creates the directory dir holding the given files (paths
// relative to dir), all or nothing: the files are written and synced in a
// temporary directory beside dir, which is then renamed to dir. dir must
// not exist (an empty directory is replaced); nothing is ever overwritten.
func WriteDirAtomic(dir string, files []File) (err error) {
	parent, base := filepath.Split(filepath.Clean(dir))
	if parent == "" {
		parent = "."
	}
	tmp, err := os.MkdirTemp(parent, "."+base+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", dir, tempError(err))
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	for _, f := range files {
		if f.Path != filepath.Base(f.Path) {
			return fmt.Errorf("write %s: file name %q must not contain a directory", dir, f.Path)
		}
		name, err := writeTemp(filepath.Join(tmp, f.Path), f.Write)
		if err != nil {
			return err
		}
		if err := os.Rename(name, filepath.Join(tmp, f.Path)); err != nil {
			return fmt.Errorf("write %s: %w", dir, err)
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	if err := syncDir(tmp); err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	return syncDir(parent)
}

// syncDir makes a directory's entries durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
