// Package fileio writes a command's outputs by one rule: an output is
// written atomically (a failed or interrupted write leaves nothing
// half-written), an output and its privacy sidecar appear together or not
// at all, and nothing that exists is replaced unless the user said so
// (--force), in which case it is replaced atomically too. CheckOutputs
// checks every output against that rule, and against the inputs, before a
// command reads anything.
package fileio

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrExists is wrapped by the errors of an output that exists when the
// command may not replace it.
var ErrExists = errors.New("exists")

// ErrOverwrite is wrapped by CheckOutputs' errors for an output that is
// an input or another output of the command.
var ErrOverwrite = errors.New("output would overwrite another file of the command")

// WriteAtomic writes path by calling write on a buffered temporary file in
// the same directory, syncing it and renaming it over path. If write or any
// step fails, path is untouched and the temporary file is removed. It
// replaces an existing file: it is for files inside a directory the
// command is creating (a staging directory), not for a command's outputs,
// which WriteFile writes.
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

// WriteFileAtomic writes data to path atomically (see WriteAtomic).
func WriteFileAtomic(path string, data []byte) error {
	return WriteAtomic(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFile writes a command's output file atomically. Unless force is
// set it never replaces anything: if path has come to exist since it was
// checked, the write fails with ErrExists and leaves it as it is.
func WriteFile(path string, force bool, write func(w io.Writer) error) error {
	tmp, err := writeTemp(path, write)
	if err != nil {
		return err
	}
	if err := place(tmp, path, force); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// File is one file of WritePair or WriteDir.
type File struct {
	Path  string
	Write func(w io.Writer) error
}

// WritePair writes two files all or nothing: both are written to
// temporary files and synced before either is put in place, and if the
// second cannot be put in place the first is put back as it was (restored,
// or removed if it did not exist). It is how an output and the sidecar
// that states its privacy guarantee are written, so that neither is ever
// left without the other. Unless force is set neither may exist.
func WritePair(a, b File, force bool) error {
	tmpA, err := writeTemp(a.Path, a.Write)
	if err != nil {
		return err
	}
	tmpB, err := writeTemp(b.Path, b.Write)
	if err != nil {
		os.Remove(tmpA)
		return err
	}
	// With force, keep the old a (if any) under a temporary name until b
	// is in place.
	backup := ""
	if _, err := os.Lstat(a.Path); err == nil && force {
		if backup, err = tempName(a.Path, ".old*"); err != nil {
			os.Remove(tmpA)
			os.Remove(tmpB)
			return fmt.Errorf("write %s: %w", a.Path, tempError(err))
		}
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
	if err := place(tmpA, a.Path, force); err != nil {
		os.Remove(tmpA)
		os.Remove(tmpB)
		if backup != "" {
			if rerr := restore(); rerr != nil {
				return fmt.Errorf("%w (and restoring it from %s failed: %v)", err, backup, rerr)
			}
		}
		return err
	}
	if err := place(tmpB, b.Path, force); err != nil {
		os.Remove(tmpB)
		if rerr := restore(); rerr != nil {
			return fmt.Errorf("%w; %s was written without it and could not be undone: %v", err, a.Path, rerr)
		}
		return fmt.Errorf("%w (%s left as it was)", err, a.Path)
	}
	if backup != "" {
		os.Remove(backup)
	}
	return nil
}

// WriteDir creates the directory dir holding the given files (paths
// relative to dir), all or nothing: the files are written and synced in a
// staging directory beside dir, which then takes dir's place. Unless force
// is set dir must not exist; with force an existing directory is replaced
// at once (see CommitDir).
func WriteDir(dir string, files []File, force bool) (err error) {
	stage, err := StageDir(dir)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(stage)
		}
	}()
	for _, f := range files {
		if f.Path != filepath.Base(f.Path) {
			return fmt.Errorf("write %s: file name %q must not contain a directory", dir, f.Path)
		}
		name, err := writeTemp(filepath.Join(stage, f.Path), f.Write)
		if err != nil {
			return err
		}
		if err := os.Rename(name, filepath.Join(stage, f.Path)); err != nil {
			return fmt.Errorf("write %s: %w", dir, err)
		}
	}
	return CommitDir(stage, dir, force)
}

// StageDir creates an empty staging directory beside dir, for a command
// that writes the files of its output directory one by one; CommitDir puts
// it in dir's place when they are all written. The caller removes it if it
// gives up.
func StageDir(dir string) (string, error) {
	parent, base := filepath.Split(filepath.Clean(dir))
	if parent == "" {
		parent = "."
	}
	stage, err := os.MkdirTemp(parent, "."+base+".tmp*")
	if err != nil {
		return "", fmt.Errorf("write %s: %w", dir, tempError(err))
	}
	if err := os.Chmod(stage, 0o755); err != nil {
		os.Remove(stage)
		return "", fmt.Errorf("write %s: %w", dir, err)
	}
	return stage, nil
}

// CommitDir puts the staging directory stage (StageDir) in dir's place,
// its files synced first. Unless force is set, dir must not exist (not even
// empty); with force an existing directory is replaced in one step where
// the file system can exchange two directories (Linux), and otherwise by
// moving it aside first (put back if the second rename fails), then
// removed. On failure stage is left for the caller to remove.
func CommitDir(stage, dir string, force bool) error {
	if err := syncTree(stage); err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	parent := filepath.Dir(filepath.Clean(dir))
	st, err := os.Lstat(dir)
	switch {
	case err == nil && !force:
		return existsError(dir)
	case err == nil && !st.IsDir():
		return fmt.Errorf("write %s: it exists and is not a directory", dir)
	case err == nil:
		if err := exchange(stage, dir); err == nil {
			// stage now holds the old directory.
			os.RemoveAll(stage)
			return syncDir(parent)
		}
		old, err := tempName(dir, ".old*")
		if err != nil {
			return fmt.Errorf("write %s: %w", dir, tempError(err))
		}
		os.Remove(old)
		if err := os.Rename(dir, old); err != nil {
			return fmt.Errorf("write %s: %w", dir, err)
		}
		if err := os.Rename(stage, dir); err != nil {
			if rerr := os.Rename(old, dir); rerr != nil {
				return fmt.Errorf("write %s: %w (and putting the old directory back from %s failed: %v)", dir, err, old, rerr)
			}
			return fmt.Errorf("write %s: %w", dir, err)
		}
		os.RemoveAll(old)
		return syncDir(parent)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("write %s: %w", dir, err)
	}
	if err := renameNoReplace(stage, dir); err != nil {
		return err
	}
	return syncDir(parent)
}

// place renames the temporary file tmp to path: over an existing file
// with force, and otherwise only if path does not exist.
func place(tmp, path string, force bool) error {
	if force {
		if err := os.Rename(tmp, path); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		return nil
	}
	return renameNoReplace(tmp, path)
}

// renameNoReplace renames from to to, failing with ErrExists if to exists:
// with the file system's no-replace rename where there is one, otherwise
// (a file) by a hard link, which fails if to exists, or (a directory, or a
// file system without links) after checking once more.
func renameNoReplace(from, to string) error {
	err := renameExcl(from, to)
	if err == nil {
		return nil
	}
	if errors.Is(err, fs.ErrExist) {
		return existsError(to)
	}
	if !errors.Is(err, errUnsupported) {
		return fmt.Errorf("write %s: %w", to, unwrapPath(err))
	}
	if st, serr := os.Lstat(from); serr == nil && !st.IsDir() {
		if lerr := os.Link(from, to); lerr == nil {
			os.Remove(from)
			return nil
		} else if errors.Is(lerr, fs.ErrExist) {
			return existsError(to)
		}
	}
	if _, serr := os.Lstat(to); serr == nil {
		return existsError(to)
	}
	if err := os.Rename(from, to); err != nil {
		return fmt.Errorf("write %s: %w", to, err)
	}
	return nil
}

// existsError is the refusal of an output that exists.
func existsError(path string) error {
	return fmt.Errorf("%s %w (it appeared after the outputs were checked); nothing was replaced: give --force to replace it", path, ErrExists)
}

// unwrapPath returns a link or rename error's cause, without the paths
// (one of which is a temporary name the user never gave).
func unwrapPath(err error) error {
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return tempError(err)
}

// tempName reserves a temporary name beside path (a file it creates and
// leaves empty).
func tempName(path, pattern string) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+pattern)
	if err != nil {
		return "", err
	}
	name := f.Name()
	f.Close()
	return name, nil
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

// Named is a path with the flag (or role) that named it, for error
// messages. Dir marks an output that is a directory the command creates
// whole (a release of several tables), rather than a file.
type Named struct {
	Flag, Path string
	Dir        bool
}

// CheckOutputs checks a command's outputs before it reads any input, so
// that every refusal depends on the paths alone and comes before the work.
// It refuses, naming the flag:
//
//   - an output that resolves to an input or to another output: the same
//     file after symbolic links are followed (also for an output that does
//     not exist yet, through a symlinked directory), or the same file under
//     another name (a hard link);
//   - an output that exists, unless force is set (a file output that is a
//     directory, or a directory output that is not a directory, even then);
//   - an output whose directory does not exist, is not a directory, or
//     cannot be written (a file is created there and removed to find out);
//   - "-": outputs are files.
func CheckOutputs(inputs, outputs []Named, force bool) error {
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
	probed := map[string]bool{}
	for _, n := range outputs {
		if n.Path == "-" {
			return fmt.Errorf("%s -: writing to standard output is not supported; give a file name", n.Flag)
		}
		if n.Path == "" {
			return fmt.Errorf("%s: give a file name", n.Flag)
		}
		r, err := resolve(n)
		if err != nil {
			return err
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
		if _, err := os.Lstat(n.Path); err == nil {
			isDir := r.info != nil && r.info.IsDir()
			switch {
			case n.Dir && !isDir:
				return fmt.Errorf("%s %s exists and is not a directory: %w", n.Flag, n.Path, ErrExists)
			case !n.Dir && isDir:
				return fmt.Errorf("%s %s: is a directory", n.Flag, n.Path)
			case !force && n.Dir:
				return fmt.Errorf("%s %s: the directory %w; nothing is overwritten: give --force to replace it", n.Flag, n.Path, ErrExists)
			case !force:
				return fmt.Errorf("%s %s: the file %w; nothing is overwritten: give --force to replace it", n.Flag, n.Path, ErrExists)
			}
		}
		// The output is created in its directory, which must exist and
		// take new files.
		parent := filepath.Dir(r.abs)
		if st, err := os.Stat(parent); err != nil {
			return fmt.Errorf("%s %s: directory %s does not exist", n.Flag, n.Path, filepath.Dir(n.Path))
		} else if !st.IsDir() {
			return fmt.Errorf("%s %s: %s is not a directory", n.Flag, n.Path, filepath.Dir(n.Path))
		}
		if !probed[parent] {
			if err := probeWritable(parent); err != nil {
				return fmt.Errorf("%s %s: %w", n.Flag, n.Path, err)
			}
			probed[parent] = true
		}
		outs = append(outs, r)
	}
	return nil
}

// probeWritable finds out whether files can be created in dir by creating
// one and removing it: permissions, read-only file systems and the
// privileges of the user all decide, and only trying tells.
func probeWritable(dir string) error {
	f, err := os.CreateTemp(dir, ".knowdp-probe*")
	if err != nil {
		return tempError(err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
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

// syncTree syncs every file and directory under dir, so that a directory
// put in place by a rename holds its files after a crash.
func syncTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		return f.Sync()
	})
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
