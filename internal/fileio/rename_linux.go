package fileio

import (
	"errors"

	"golang.org/x/sys/unix"
)

// errUnsupported marks a file system without the rename flags used here.
var errUnsupported = errors.New("rename flag not supported")

// renameExcl renames from to to unless to exists (fs.ErrExist).
func renameExcl(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.ENOTSUP) {
		return errUnsupported
	}
	return err
}

// exchange swaps two existing paths in one step.
func exchange(a, b string) error {
	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.ENOTSUP) {
		return errUnsupported
	}
	return err
}
