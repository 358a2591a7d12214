package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/cli"
	"github.com/knowdp/knowdp/internal/fileio"
	"github.com/knowdp/knowdp/source"
)

func schemaCommand() *command {
	return &command{
		name:    "schema",
		summary: "write a schema: hierarchies (geo=region,state,place) from a public lookup file, flat dimensions from their values",
		run:     runSchema,
	}
}

const schemaHelp = `Builds a schema's dimensions from public information, never from the data:

  --hierarchy NAME=LEVEL,...,LEVEL  a hierarchical dimension, its levels coarsest
        first, each a column of --from (LEVEL:COLUMN reads the level from another
        column). Every row of --from is one value of the finest level with its
        ancestors; the values keep the order of their first row, and each value
        of a level must have one parent in the level above.
  --dimension NAME=VALUE,...        a flat dimension and its values.
  --schema FILE                     start from this schema: a dimension of the
        same name is replaced where it stands, new ones are added at the end.

The lookup file must be public (a gazetteer, a classification): a value read
from the private data would make the release's domain depend on who is in it.
Errors name the file, the row and the column.

Example (the bundled hierarchy of US places):

  knowdp schema --hierarchy geo=region,division,state,place --from data/us-geo-places.csv \
      --dimension sex=F,M --out geo.schema.json
`

// hierarchyFlag is one --hierarchy NAME=LEVEL[:COLUMN],...
type hierarchyFlag struct {
	name            string
	levels, columns []string
}

// parseHierarchyFlag parses NAME=LEVEL[:COLUMN],... (at least two levels).
func parseHierarchyFlag(v string) (hierarchyFlag, error) {
	name, spec, ok := strings.Cut(v, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" || spec == "" {
		return hierarchyFlag{}, fmt.Errorf("--hierarchy %q: want NAME=LEVEL,...,LEVEL (coarsest first)", v)
	}
	h := hierarchyFlag{name: name}
	for _, item := range strings.Split(spec, ",") {
		level, column, _ := strings.Cut(strings.TrimSpace(item), ":")
		if column == "" {
			column = level
		}
		switch {
		case level == "":
			return hierarchyFlag{}, fmt.Errorf("--hierarchy %q: a level has no name", v)
		case strings.Contains(level, "."):
			return hierarchyFlag{}, fmt.Errorf("--hierarchy %q: level name %q must not contain '.'", v, level)
		case slices.Contains(h.levels, level):
			return hierarchyFlag{}, fmt.Errorf("--hierarchy %q: level %q is listed twice", v, level)
		}
		h.levels, h.columns = append(h.levels, level), append(h.columns, column)
	}
	if len(h.levels) < 2 {
		return hierarchyFlag{}, fmt.Errorf("--hierarchy %q: a hierarchy has at least two levels (a flat dimension is --dimension NAME=VALUE,...)", v)
	}
	return h, nil
}

func runSchema(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "schema", "schema --hierarchy NAME=LEVEL,...,LEVEL --from FILE [--dimension NAME=VALUE,...]... [--schema FILE] [--out FILE] [--force]")
	var hierarchies, dims stringList
	fs.Var(&hierarchies, "hierarchy", "a hierarchical dimension `NAME=LEVEL,...,LEVEL`, coarsest level first, each a column of --from (LEVEL:COLUMN for another column name); repeatable")
	from := fs.String("from", "", "the public lookup CSV `FILE` holding the hierarchies' levels: one row per value of the finest level")
	fs.Var(&dims, "dimension", "a flat dimension `NAME=VALUE,...`; repeatable")
	base := fs.String("schema", "", "schema JSON `FILE` to start from: dimensions of the same name are replaced in place, new ones added at the end")
	out := fs.String("out", "", "write the schema to this JSON `FILE` (default: standard output)")
	force := fs.Bool("force", false, forceUsage)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: knowdp schema --hierarchy NAME=LEVEL,...,LEVEL --from FILE [--dimension NAME=VALUE,...]... [--schema FILE] [--out FILE] [--force]\n\n%s\nFlags:\n", schemaHelp)
		cli.PrintFlags(fs.Output(), fs)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var hs []hierarchyFlag
	for _, v := range hierarchies {
		h, err := parseHierarchyFlag(v)
		if err != nil {
			return usageErr(fs, "%v", err)
		}
		hs = append(hs, h)
	}
	var flat []domain.Dimension
	for _, v := range dims {
		name, values, ok := strings.Cut(v, "=")
		if name = strings.TrimSpace(name); !ok || name == "" || values == "" {
			return usageErr(fs, "--dimension %q: want NAME=VALUE,...", v)
		}
		flat = append(flat, domain.Dimension{Name: name, Values: strings.Split(values, ",")})
	}
	switch {
	case len(hs) == 0 && len(flat) == 0:
		return usageErr(fs, "give at least one --hierarchy (with --from) or --dimension")
	case len(hs) > 0 && *from == "":
		return usageErr(fs, "missing required flag --from (the lookup file --hierarchy reads)")
	case len(hs) == 0 && *from != "":
		return usageErr(fs, "--from is read by --hierarchy, which is not given")
	}
	if *out != "" {
		if err := fileio.CheckOutputs([]fileio.Named{{Flag: "--from", Path: *from}, {Flag: "--schema", Path: *base}}, []fileio.Named{{Flag: "--out", Path: *out}}, *force); err != nil {
			return usageErr(fs, "%v", err)
		}
	}
	var all []domain.Dimension
	if *base != "" {
		s, err := domain.LoadSchema(*base)
		if err != nil {
			return fmt.Errorf("--schema: %w", err)
		}
		for i := range s.NumDims() {
			all = append(all, s.Dim(i))
		}
	}
	if len(hs) > 0 {
		if err := checkInput("--from", *from); err != nil {
			return err
		}
		built, err := readHierarchies(ctx, *from, hs)
		if err != nil {
			return fmt.Errorf("--from: %w", err)
		}
		flat = append(built, flat...)
	}
	for _, d := range flat {
		if i := slices.IndexFunc(all, func(x domain.Dimension) bool { return x.Name == d.Name }); i >= 0 {
			all[i] = d
		} else {
			all = append(all, d)
		}
	}
	b, err := json.MarshalIndent(struct {
		Dimensions []domain.Dimension `json:"dimensions"`
	}{all}, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	// The schema is checked as release will read it: whatever the lookup
	// file holds that a schema may not (a value twice in a flat dimension,
	// a name used twice) is found here, not at release time.
	if _, err := domain.ParseSchema(b); err != nil {
		return fmt.Errorf("the schema built is not valid: %w", err)
	}
	if *out == "" {
		_, err := e.stdout.Write(b)
		return err
	}
	if err := fileio.WriteFile(*out, *force, func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	var summary []string
	for _, d := range all {
		n := fmt.Sprintf("%s (%d values", d.Name, len(d.Values))
		if len(d.Levels) > 0 {
			n += " in levels " + strings.Join(d.Levels, " > ")
		}
		summary = append(summary, n+")")
	}
	fmt.Fprintf(e.stdout, "wrote %s: %s\n", *out, strings.Join(summary, ", "))
	return nil
}

// readHierarchies reads every hierarchy from the lookup file: per row, the
// value of each level; the finest level's values in the order of their
// first row, each coarser value's parent checked to be the same on every
// row. Errors name the file, the row and the column.
func readHierarchies(ctx context.Context, path string, hs []hierarchyFlag) ([]domain.Dimension, error) {
	t, err := source.OpenCSV(path)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	type state struct {
		cols   []int
		leaves []string
		// parent[k][v] is the parent (at level k-1) of value v of level k,
		// and row[k][v] the row that gave it.
		parent []map[string]string
		row    []map[string]int
	}
	st := make([]*state, len(hs))
	for i, h := range hs {
		s := &state{parent: make([]map[string]string, len(h.levels)), row: make([]map[string]int, len(h.levels))}
		for k, c := range h.columns {
			j, err := t.Column(c)
			if err != nil {
				return nil, fmt.Errorf("--hierarchy %s: %w", h.name, err)
			}
			s.cols = append(s.cols, j)
			s.parent[k], s.row[k] = map[string]string{}, map[string]int{}
		}
		st[i] = s
	}
	for n := 0; ; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		rec, err := t.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		for i, h := range hs {
			s := st[i]
			for k, j := range s.cols {
				if strings.TrimSpace(rec[j]) == "" {
					return nil, t.Errorf(j, "empty value of level %q of %s", h.levels[k], h.name)
				}
			}
			// From the finest level up: a value seen before must have the
			// same parent as then.
			for k := len(s.cols) - 1; k >= 0; k-- {
				v := rec[s.cols[k]]
				p := ""
				if k > 0 {
					p = rec[s.cols[k-1]]
				}
				if old, seen := s.parent[k][v]; seen {
					if old != p {
						return nil, t.Errorf(s.cols[k-1], "%s %q is in %s %q here but in %q at row %d; each value has one parent", h.levels[k], v, h.levels[k-1], p, old, s.row[k][v])
					}
					continue
				}
				s.parent[k][v], s.row[k][v] = p, t.Row()
				if k == len(s.cols)-1 {
					s.leaves = append(s.leaves, v)
				}
			}
		}
	}
	var out []domain.Dimension
	for i, h := range hs {
		s := st[i]
		if len(s.leaves) == 0 {
			return nil, fmt.Errorf("%s has no rows: --hierarchy %s has no values", path, h.name)
		}
		d := domain.Dimension{Name: h.name, Levels: h.levels, Values: s.leaves, Parents: map[string]map[string]string{}}
		for k := 0; k+1 < len(h.levels); k++ {
			d.Parents[h.levels[k]] = s.parent[k+1]
		}
		out = append(out, d)
	}
	return out, nil
}
