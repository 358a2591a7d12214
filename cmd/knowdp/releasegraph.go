package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/knowdp/knowdp/graph"
	"github.com/knowdp/knowdp/internal/fileio"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/source"
)

func releaseGraphCommand() *command {
	return &command{
		name:    "release-graph",
		summary: "release a noisy graph consistent with public vertex degrees",
		run:     runReleaseGraph,
	}
}

type releaseGraphFlags struct {
	edges, known, out string
	vertices          int
	directed, json    bool
	force             bool
	epsilon           float64
	seed              seedFlag
}

func runReleaseGraph(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "release-graph", "release-graph --edges FILE --vertices N [--directed] [--known-degrees FILE] --epsilon X [--seed N] [--force] --out FILE")
	var f releaseGraphFlags
	fs.StringVar(&f.edges, "edges", "", "the graph: CSV `FILE` with a header and columns u and v, one row per edge, vertices numbered 0 to N-1 (required)")
	fs.IntVar(&f.vertices, "vertices", 0, "number of vertices `N` (public, like a schema's domain; required)")
	fs.BoolVar(&f.directed, "directed", false, "the graph is directed: a row u,v is an arc from u to v")
	fs.StringVar(&f.known, "known-degrees", "", "CSV `FILE` listing the vertices whose degree is public (column vertex; for a directed graph also a column direction, out or in); their degrees are computed from the graph and published exactly")
	fs.Float64Var(&f.epsilon, "epsilon", 0, "privacy loss eps > 0 with respect to the neighbours the known degrees induce (required)")
	fs.StringVar(&f.out, "out", "", "output CSV `FILE` (required): u,v,edge for every vertex pair; the privacy story goes to the same name with .json")
	fs.BoolVar(&f.json, "json", false, "print the summary as JSON (the sidecar's fields, full precision)")
	fs.BoolVar(&f.force, "force", false, forceUsage)
	fs.Var(&f.seed, "seed", seedUsage)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := requireFlags(fs, "edges", f.edges, "out", f.out); err != nil {
		return err
	}
	if f.vertices < 1 || f.vertices > 1<<16 {
		return usageErr(fs, "--vertices must be between 1 and 65536, got %d", f.vertices)
	}
	if graph.Pairs(f.vertices, f.directed) > graph.MaxGraphPairs {
		return usageErr(fs, "--vertices %d gives %d vertex pairs, more than %d", f.vertices, graph.Pairs(f.vertices, f.directed), graph.MaxGraphPairs)
	}
	eps, err := privacy.NewEpsilon(f.epsilon)
	if err != nil {
		return usageErr(fs, "--epsilon: %v", err)
	}
	sidecar := sidecarPath(f.out)
	inputs := []fileio.Named{{Flag: "--edges", Path: f.edges}}
	if f.known != "" {
		inputs = append(inputs, fileio.Named{Flag: "--known-degrees", Path: f.known})
	}
	if err := fileio.CheckOutputs(inputs, []fileio.Named{{Flag: "--out", Path: f.out}, {Flag: "sidecar", Path: sidecar}}, f.force); err != nil {
		return usageErr(fs, "%v", err)
	}
	spec := graph.GraphSpec{Vertices: f.vertices, Directed: f.directed, Epsilon: eps}
	if f.known != "" {
		if spec.KnownOut, spec.KnownIn, err = readKnownDegrees(f.known, f.vertices, f.directed); err != nil {
			return err
		}
	}
	edges, err := readEdges(f.edges, f.vertices, f.directed)
	if err != nil {
		return err
	}
	g, err := graph.ReleaseGraph(ctx, edges, spec, f.seed.rand(e))
	if err != nil {
		return err
	}
	meta := g.Metadata()
	metaJSON, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return err
	}
	if err := fileio.WritePair(
		fileio.File{Path: f.out, Write: func(w io.Writer) error { return g.WriteCSV(w) }},
		fileio.File{Path: sidecar, Write: func(w io.Writer) error { _, err := w.Write(append(metaJSON, '\n')); return err }}, f.force,
	); err != nil {
		return err
	}
	if f.json {
		return writeJSON(e.stdout, struct {
			Out     string              `json:"out"`
			Sidecar string              `json:"sidecar"`
			Pairs   int                 `json:"pairs"`
			Privacy graph.GraphMetadata `json:"privacy"`
		}{f.out, sidecar, len(g.Values), meta})
	}
	kind := "an undirected"
	if g.Directed {
		kind = "a directed"
	}
	fmt.Fprintf(e.stdout, "released %s graph on %d vertices: %d vertex pairs\n", kind, g.Vertices, len(g.Values))
	fmt.Fprintf(e.stdout, "known degrees (published as they are): %d\n", len(g.KnownOut)+len(g.KnownIn))
	fmt.Fprintf(e.stdout, "epsilon %g w.r.t. %s\n", g.Epsilon, meta.Neighbours)
	if g.Sensitivity == 0 {
		fmt.Fprintf(e.stdout, "no noise: %s; the released graph is the TRUE graph\n", g.SensitivityRule)
	} else {
		fmt.Fprintf(e.stdout, "generic sensitivity %d (%s); Laplace scale %.6g per pair\n", g.Sensitivity, g.SensitivityRule, g.Scale)
	}
	if g.Seeded {
		fmt.Fprintln(e.stdout, "guarantee: none: this release is NOT differentially private (seeded)")
	}
	fmt.Fprintf(e.stdout, "wrote %s and %s\n", f.out, sidecar)
	return nil
}

// readVertex parses column col of the current row as a vertex number.
func readVertex(t *source.CSV, rec []string, col, n int) (int, error) {
	v, err := strconv.Atoi(rec[col])
	if err != nil || v < 0 || v >= n {
		return 0, t.Errorf(col, "%q is not a vertex: use a number from 0 to %d", rec[col], n-1)
	}
	return v, nil
}

// readEdges reads the edge list: columns u and v, one row per edge of a
// simple graph.
func readEdges(path string, n int, directed bool) ([][2]int, error) {
	if err := checkInput("--edges", path); err != nil {
		return nil, err
	}
	t, err := source.OpenCSV(path)
	if err != nil {
		return nil, fmt.Errorf("--edges: %w", err)
	}
	defer t.Close()
	cu, err := t.Column("u")
	if err != nil {
		return nil, fmt.Errorf("--edges: %w", err)
	}
	cv, err := t.Column("v")
	if err != nil {
		return nil, fmt.Errorf("--edges: %w", err)
	}
	seen := map[[2]int]int{}
	var edges [][2]int
	for {
		rec, err := t.Next()
		if errors.Is(err, io.EOF) {
			return edges, nil
		}
		if err != nil {
			return nil, fmt.Errorf("--edges: %w", err)
		}
		u, err := readVertex(t, rec, cu, n)
		if err != nil {
			return nil, fmt.Errorf("--edges: %w", err)
		}
		v, err := readVertex(t, rec, cv, n)
		if err != nil {
			return nil, fmt.Errorf("--edges: %w", err)
		}
		if u == v {
			return nil, fmt.Errorf("--edges: %w", t.Errorf(cv, "a loop %d-%d; graphs are simple", u, v))
		}
		key := [2]int{u, v}
		if !directed && u > v {
			key = [2]int{v, u}
		}
		if row, dup := seen[key]; dup {
			return nil, fmt.Errorf("--edges: %w", t.Errorf(cv, "edge %d-%d repeats row %d; graphs are simple", u, v, row))
		}
		seen[key] = t.Row()
		edges = append(edges, [2]int{u, v})
	}
}

// readKnownDegrees reads the vertices whose degrees are public: a column
// vertex and, for a directed graph, a column direction (out or in).
func readKnownDegrees(path string, n int, directed bool) (out, in []int, err error) {
	if err := checkInput("--known-degrees", path); err != nil {
		return nil, nil, err
	}
	t, err := source.OpenCSV(path)
	if err != nil {
		return nil, nil, fmt.Errorf("--known-degrees: %w", err)
	}
	defer t.Close()
	cv, err := t.Column("vertex")
	if err != nil {
		return nil, nil, fmt.Errorf("--known-degrees: %w", err)
	}
	cd := -1
	if directed {
		if cd, err = t.Column("direction"); err != nil {
			return nil, nil, fmt.Errorf("--known-degrees: a directed graph needs a direction column (out or in): %w", err)
		}
	}
	for {
		rec, err := t.Next()
		if errors.Is(err, io.EOF) {
			return out, in, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("--known-degrees: %w", err)
		}
		v, err := readVertex(t, rec, cv, n)
		if err != nil {
			return nil, nil, fmt.Errorf("--known-degrees: %w", err)
		}
		switch {
		case cd < 0 || rec[cd] == "out":
			out = append(out, v)
		case rec[cd] == "in":
			in = append(in, v)
		default:
			return nil, nil, fmt.Errorf("--known-degrees: %w", t.Errorf(cd, "%q: use out or in", rec[cd]))
		}
	}
}
