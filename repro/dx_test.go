package repro

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func TestDXQuick(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir, Seed: 1, Quick: true, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := DX().Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"dx_parameters.csv", "dx_summary.csv", "dx_fig2a_universe.png", "dx_fig2b_improvement.svg",
		"dx_fig2c_strategies.png", "dx_fig2d_strategies.png", "dx_fig3a_places.png", "dx_fig3b_improvement.png",
		"dx_fig4_blowfish_rmse_eps1.png", "dx_fig5_blowfish_improvement.png", "dx_fig2cd_strategies.csv"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("missing output: %v", err)
		}
	}
	rows := readCSV(t, dir, "dx_summary.csv")
	got := map[string]float64{}
	for _, r := range rows[1:] {
		v, err := strconv.ParseFloat(r[2], 64)
		if err != nil {
			t.Fatal(err)
		}
		got[r[0]+"/"+r[1]] = v
	}
	if got["3/places"] != 842 {
		t.Errorf("places = %v, want 842", got["3/places"])
	}
	// Improvement factors are >= 1 by construction for single queries.
	for _, k := range []string{"2b/mean improvement factor, random single queries", "3b/mean improvement factor, random queries",
		"3/improvement factor, average-elevation query (lon/lat Euclidean)"} {
		if v, ok := got[k]; !ok || v < 1 {
			t.Errorf("%s = %v (present %v), want >= 1", k, v, ok)
		}
	}
	// The optimal allocation never does worse than the other strategies in
	// squared error (rmse_per_query column).
	strat := readCSV(t, dir, "dx_fig2cd_strategies.csv")
	best := map[string]float64{}
	opt := map[string]float64{}
	for _, r := range strat[1:] {
		key := r[0] + "/" + r[1]
		v, _ := strconv.ParseFloat(r[4], 64)
		if r[2] == "optimal" {
			opt[key] = v
		} else if b, ok := best[key]; !ok || v < b {
			best[key] = v
		}
	}
	for k, v := range opt {
		if v > best[k]*(1+1e-9) {
			t.Errorf("%s: optimal RMSE %v > best strategy %v", k, v, best[k])
		}
	}
}
