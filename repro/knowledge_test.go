package repro

import (
	"context"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// decimals returns the number of decimal places printed in s.
func decimals(s string) int {
	if i := strings.IndexByte(s, '.'); i >= 0 {
		return len(s) - i - 1
	}
	return 0
}

func TestKnowledge(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir, Seed: 1, Quick: true, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := Knowledge().Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}

	// Table 5: the refinement columns and the Laplace variance match the
	// paper to its printed precision; the Laplace P(K in [0,1]) column does
	// not follow from the mechanism and is 1 - e^(-eps/2).
	rows := readCSV(t, dir, "knowledge_table5.csv")
	if len(rows) != 5 {
		t.Fatalf("table 5 has %d rows", len(rows))
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	for _, r := range rows[1:] {
		for _, pair := range [][2]string{
			{"refinement_variance", "paper_refinement_variance"},
			{"size_Uu", "paper_size_Uu"},
			{"P_in_Uu", "paper_P_in_Uu"},
			{"laplace_variance", "paper_laplace_variance"},
		} {
			ours, paper := num(t, r[col[pair[0]]]), r[col[pair[1]]]
			tol := 0.5 * math.Pow(10, -float64(decimals(paper)))
			if math.Abs(ours-num(t, paper)) > tol+1e-9 {
				t.Errorf("eps=%s: %s = %v, paper %s", r[0], pair[0], ours, paper)
			}
		}
		eps := num(t, strings.Replace(r[0], "ln(2)", strconv.FormatFloat(math.Ln2, 'g', -1, 64), 1))
		in01 := num(t, r[col["laplace_P_in_0_1"]])
		if math.Abs(in01-(1-math.Exp(-eps/2))) > 1e-5 {
			t.Errorf("eps=%s: P(Laplace in [0,1]) = %v, want 1 - e^(-eps/2)", r[0], in01)
		}
		if math.Abs(in01-num(t, r[col["paper_laplace_P_in_0_1"]])) < 0.02 && eps != 2 {
			t.Errorf("eps=%s: the paper's Laplace column unexpectedly agrees", r[0])
		}
	}

	// The Boolean example.
	want := map[string][2]float64{ // ours, tolerance
		"laplace P(K=1|B=0)":    {0.184, 5e-4},
		"laplace P(K=1)":        {0.19, 5e-3},
		"refinement P(K=1|B=0)": {0.003679, 5e-7},
		"refinement P(K=1|B=1)": {0.027183, 5e-7},
		"refinement P(K=1)":     {0.0039138, 5e-8},
	}
	for _, r := range readCSV(t, dir, "knowledge_boolean.csv")[1:] {
		w, ok := want[r[0]+" "+r[1]]
		if !ok {
			continue
		}
		delete(want, r[0]+" "+r[1])
		if got := num(t, r[2]); math.Abs(got-w[0]) > w[1] {
			t.Errorf("%s %s = %v, want %v", r[0], r[1], got, w[0])
		}
		if r[3] != "" && math.Abs(num(t, r[3])-num(t, r[2])) > 1e-6 {
			t.Errorf("%s %s: the grid mechanism gives %s, the continuous one %s", r[0], r[1], r[3], r[2])
		}
	}
	if len(want) > 0 {
		t.Errorf("missing rows %v", want)
	}

	// Protocols: 15 answered by Protocol 1, 4 by Protocol 2, 15 with scopes.
	prot := readCSV(t, dir, "knowledge_protocols.csv")
	for _, r := range prot {
		if r[0] == "answered" && (r[3] != "15" || r[4] != "4" || r[5] != "15") {
			t.Errorf("answered %v", r[3:])
		}
	}

	// The sampled frequencies agree with the exact probabilities (5 SE).
	for _, r := range readCSV(t, dir, "knowledge_sampling.csv")[1:] {
		if d := math.Abs(num(t, r[1]) - num(t, r[2])); d > 5*num(t, r[3]) {
			t.Errorf("%s: sampled %s, exact %s", r[0], r[2], r[1])
		}
	}

	for _, fig := range []string{"fig1", "fig2", "fig3", "fig5", "fig6", "fig7"} {
		png, _ := os.ReadFile(filepath.Join(dir, "knowledge_"+fig+".png"))
		svg, _ := os.ReadFile(filepath.Join(dir, "knowledge_"+fig+".svg"))
		if !strings.HasPrefix(string(png), "\x89PNG") || !strings.Contains(string(svg), "<svg") {
			t.Errorf("%s: not PNG and SVG", fig)
		}
	}
	readme, err := os.ReadFile(filepath.Join(dir, "knowledge_README.md"))
	if err != nil || !strings.Contains(string(readme), "does not follow from the stated mechanism") || !strings.Contains(string(readme), "NOT differentially private") {
		t.Errorf("README: %v\n%s", err, readme)
	}
}
