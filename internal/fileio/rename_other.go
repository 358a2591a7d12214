//go:build !linux

package fileio

import "errors"

// errUnsupported marks a file system without the rename flags used here.
var errUnsupported = errors.New("rename flag not supported")

// renameExcl reports that no atomic no-replace rename is available here:
// renameNoReplace then links or checks first.
func renameExcl(from, to string) error { return errUnsupported }

// exchange reports that no atomic exchange is available here: CommitDir
// then moves the old directory aside first.
func exchange(a, b string) error { return errUnsupported }
