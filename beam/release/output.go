package release

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/knowdp/knowdp/cube"
	"github.com/knowdp/knowdp/internal/tablefile"
)

// The output of a release is written by the workers as shards, one per
// block of BlockSize cells of a table, into a staging directory beside
// --out; after the pipeline succeeds the driver renames the directory to
// --out (or, for the single-file form, joins the shards into one CSV).
// Every shard is a table file of its own, header included, so a reader can
// take any of them alone or all of them as one table.

// sidecarName is the privacy story's name in an output directory, as
// knowdp release names it for a directory of tables.
const sidecarName = "release.json"

// measurementsName is where the one-worker release leaves the noisy
// measurements (--measurements) in the scratch directory.
const measurementsName = "measurements.json"

// partFile is the path, within the output directory, of block b of a
// table of the given number of blocks whose files are named stem:
// part-NNNNN.EXT for the only table of a release (stem ""), and otherwise
// STEM.EXT (one block: the file knowdp release writes) or
// STEM/part-NNNNN.EXT.
func partFile(stem string, blocks, b int, f tablefile.Format) string {
	part := fmt.Sprintf("part-%05d%s", b, f.Ext())
	switch {
	case stem == "":
		return part
	case blocks == 1:
		return stem + f.Ext()
	}
	return filepath.Join(stem, part)
}

// writePart writes block b of the table of view v, its counts x, into the
// staging directory stage, atomically (a retried bundle never leaves half
// a file). moe90 is given the cell's index in the whole table.
func writePart(ctx context.Context, s *cube.Schema, v cube.View, stage, stem string, b int, x []float64, moe90 func(cell int) float64, f tablefile.Format) error {
	path := filepath.Join(stage, partFile(stem, Blocks(s.ViewSize(v)), b, f))
	return writeAtomic(path, func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 1<<20)
		if err := tablefile.WriteRows(bw, f, s, v, b*BlockSize, x, moe90); err != nil {
			return err
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		return ctx.Err()
	})
}

// writeFileAtomic writes a file under a temporary name and renames it, so
// that a failed or retried bundle never leaves a half-written file behind.
func writeFileAtomic(path string, b []byte) error {
	return writeAtomic(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// writeAtomic writes path with write, under a temporary name of its own
// (two attempts at the same bundle, as a runner may start, do not write
// into one file), then renames it.
func writeAtomic(path string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
