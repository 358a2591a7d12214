package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// checkNewDir refuses an output directory that exists: a workload release
// creates its directory, and never writes into or over an existing one.
func checkNewDir(dir string) error {
	if dir == "-" {
		return errors.New("-: a workload release writes a directory; give its name")
	}
	if _, err := os.Lstat(dir); err == nil {
		return fmt.Errorf("%s exists; a release of several cuboids creates a new directory (nothing is overwritten)", dir)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
