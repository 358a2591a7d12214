package pipeline

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/fileio"
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
// staging directory stage, atomically under a temporary name of its own
// (fileio.WriteAtomic: two attempts at a bundle never write into one
// file, and a failed one leaves no half file). moe90 is given the cell's
// index in the whole table; integer says the table's counts are integers
// (tablefile.WriteRows).
func writePart(ctx context.Context, s *domain.Schema, v domain.View, stage, stem string, b int, x []float64, moe90 func(cell int) float64, f tablefile.Format, integer bool) error {
	path := filepath.Join(stage, partFile(stem, Blocks(s.ViewSize(v)), b, f))
	return fileio.WriteAtomic(path, func(w io.Writer) error {
		if err := tablefile.WriteRows(w, f, s, v, b*BlockSize, x, moe90, integer); err != nil {
			return err
		}
		return ctx.Err()
	})
}
