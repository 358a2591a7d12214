package main

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/knowdp/knowdp/internal/pgtest"
)

// releaseFor runs a seeded release into dir/name and returns its path.
func releaseFor(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	out := filepath.Join(dir, name)
	all := append(append([]string{"release"}, args...), "--seed", "7", "--out", out)
	if code, stdout, stderr := runCLI(t, all...); code != 0 {
		t.Fatalf("release: exit %d\n%s\n%s", code, stdout, stderr)
	}
	return out
}

// geoViews releases the bundled US places at four levels, state totals
// exact, as integer tables.
func geoViews(t *testing.T, dir string) string {
	return releaseFor(t, dir, "geo", append(append([]string(nil), usGeo...), "--epsilon", "1", "--exact", "geo:state", "--integer",
		"--cuboid", "", "--cuboid", "geo:region", "--cuboid", "geo:division,sex", "--cuboid", "geo:state,sex", "--cuboid", "geo,sex")...)
}

func TestReportCommand(t *testing.T) {
	dir := t.TempDir()
	rel := releaseFor(t, dir, "rel", append(append([]string(nil), arrests...), "--epsilon", "1", "--exact", "year",
		"--cuboid", "year,colour", "--cuboid", "sex,agegroup", "--cuboid", "")...)
	out := filepath.Join(dir, "r.html")
	code, stdout, stderr := runCLI(t, "report", rel, "--out", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "wrote "+out+" (3 tables): NOT differentially private") {
		t.Errorf("stdout %q", stdout)
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<title>knowdp report: rel</title>", "the noise was seeded (--seed)", `id="table-3"`,
		"Every table adds up", "3 pair(s) of tables"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("the page lacks %q", want)
		}
	}

	// An existing page is kept without --force, and replaced with it.
	os.WriteFile(out, []byte("mine"), 0o644)
	code, _, stderr = runCLI(t, "report", rel, "--out", out)
	if b, _ := os.ReadFile(out); code != 2 || string(b) != "mine" || !strings.Contains(stderr, "--out "+out+": the file exists; nothing is overwritten: give --force to replace it") {
		t.Errorf("existing --out without --force: exit %d, %q, file %q", code, stderr, b)
	}
	if code, _, stderr = runCLI(t, "report", "--force", "--out", out, rel); code != 0 {
		t.Errorf("--force: exit %d: %s", code, stderr)
	}
	if b, _ := os.ReadFile(out); !bytes.Equal(b, page) {
		t.Error("--force did not write the same page again")
	}

	meta := filepath.Join(rel, "release.json")
	before, _ := os.ReadFile(meta)
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no argument", []string{"report"}, 2, "missing argument: the release's directory or metadata file"},
		{"two arguments", []string{"report", rel, rel}, 2, "unexpected argument"},
		{"an input as output", []string{"report", rel, "--force", "--out", meta}, 2, "is the same file as metadata"},
		{"a table as output", []string{"report", rel, "--force", "--out", filepath.Join(rel, "total.csv")}, 2, "is the same file as table"},
		{"no directory", []string{"report", rel, "--out", filepath.Join(dir, "nodir", "r.html")}, 2, "does not exist"},
		{"stdout", []string{"report", rel, "--out", "-"}, 2, "writing to standard output is not supported"},
		{"missing release", []string{"report", filepath.Join(dir, "none"), "--out", filepath.Join(dir, "x.html")}, 1, "none: no such file or directory"},
		{"not a release", []string{"report", repoFile("data/arrests.schema.json"), "--out", filepath.Join(dir, "x.html")}, 1, "not the metadata of a knowdp release"},
		{"wrong schema", []string{"report", rel, "--schema", repoFile("data/us-geo.schema.json"), "--out", filepath.Join(dir, "x.html")}, 1, `dimension "year" is not in the schema`},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, %q; want %d and %q", c.name, code, stderr, c.code, c.want)
		}
	}
	if after, _ := os.ReadFile(meta); !bytes.Equal(before, after) {
		t.Error("release.json was changed")
	}
	if _, err := os.Stat(filepath.Join(dir, "x.html")); err == nil {
		t.Error("a failed report left a page")
	}
	if code, stdout, _ := runCLI(t, "report", "--help"); code != 0 || !strings.Contains(stdout, "Usage: knowdp report DIR|FILE.json") {
		t.Errorf("--help: exit %d, %q", code, stdout)
	}
}

// TestReportKinds reports a one-table release (CSV and Parquet, Laplace
// and Gaussian), a Parquet workload and an estimate.
func TestReportKinds(t *testing.T) {
	dir := t.TempDir()
	one := releaseFor(t, dir, "one.csv", append(append([]string(nil), arrests...), "--epsilon", "1", "--exact", "year,colour", "--cuboid", "year,colour,released")...)
	gauss := releaseFor(t, dir, "gauss.parquet", append(append([]string(nil), arrests...), "--mechanism", "gaussian", "--rho", "1", "--exact", "year", "--cuboid", "year,sex")...)
	pq := releaseFor(t, dir, "pq", append(append([]string(nil), arrests...), "--epsilon", "1", "--format", "parquet", "--integer", "--cuboid", "year,colour", "--cuboid", "year")...)
	est := filepath.Join(dir, "est")
	m := filepath.Join(dir, "m.json")
	releaseFor(t, dir, "wm", append(append([]string(nil), arrests...), "--epsilon", "1", "--exact", "year", "--cuboid", "year,colour", "--cuboid", "sex", "--measurements", m)...)
	if code, _, stderr := runCLI(t, "estimate", "--measurements", m, "--cuboid", "colour", "--cuboid", "year", "--out", est); code != 0 {
		t.Fatalf("estimate: %s", stderr)
	}
	for _, c := range []struct {
		name, target string
		want         []string
	}{
		{"one table", strings.TrimSuffix(one, ".csv") + ".json", []string{"One table, measured once", "<code>one.csv</code>", "Laplace, scale 2"}},
		{"gaussian parquet", strings.TrimSuffix(gauss, ".parquet") + ".json", []string{"ρ = 1 (zero-concentrated DP)", "<code>gauss.parquet</code>", "Gaussian, σ"}},
		{"parquet workload", pq, []string{"<code>year-colour.parquet</code>", "{year,colour} rolled up to {year} equals {year}", "integer table: every count a non-negative integer"}},
		{"estimate", est, []string{"<code>colour.csv</code>", "post-processing", "The metadata (estimate.json) does not list the invariants"}},
	} {
		out := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".html")
		code, stdout, stderr := runCLI(t, "report", c.target, "--out", out)
		if code != 0 {
			t.Errorf("%s: exit %d\n%s%s", c.name, code, stdout, stderr)
			continue
		}
		page, _ := os.ReadFile(out)
		for _, w := range c.want {
			if !bytes.Contains(page, []byte(w)) {
				t.Errorf("%s: the page lacks %q", c.name, w)
			}
		}
	}
}

// TestReportHierarchy checks, with the schema, that every level adds up to
// the next and to the state totals.
func TestReportHierarchy(t *testing.T) {
	dir := t.TempDir()
	rel := geoViews(t, dir)
	out := filepath.Join(dir, "r.html")
	if code, stdout, stderr := runCLI(t, "report", rel, "--schema", repoFile("data/us-geo.schema.json"), "--out", out); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	page, _ := os.ReadFile(out)
	for _, want := range []string{
		"Every table adds up exactly: 10 pair(s) of tables compared on their common margins, with no deviation.",
		"{geo,sex} rolled up to {geo:state,sex} equals {geo:state,sex} (100 cells)",
		"{geo:state,sex} rolled up to {geo:division,sex} equals {geo:division,sex} (18 cells)",
		"held by {geo:state,sex}, {geo,sex}",
		`<h3 id="levels">By level of the hierarchy</h3>`,
	} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

// TestReportInChromium opens a report in headless Chromium from a file://
// URL: it renders (title, every section, every table's section, plots of
// non-zero size) and makes no request but the page itself. A control page
// with an image from the network shows that the listener sees requests.
// Set KNOWDP_REPORT_SCREENSHOT to a file name to keep a PNG of the page.
func TestReportInChromium(t *testing.T) {
	const chromium = "/usr/bin/chromium" // scripts/test.sh installs Debian's
	if _, err := os.Stat(chromium); err != nil {
		pgtest.Missing(t, chromium+" is not installed (Debian's chromium package)")
	}
	if testing.Short() {
		t.Skip("skipped under -short: starts a browser")
	}
	dir := t.TempDir()
	rel := geoViews(t, dir)
	page := filepath.Join(dir, "report.html")
	if code, stdout, stderr := runCLI(t, "report", rel, "--schema", repoFile("data/us-geo.schema.json"), "--out", page); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	control := filepath.Join(dir, "control.html")
	os.WriteFile(control, []byte(`<!DOCTYPE html><title>c</title><img src="http://127.0.0.1:9/x.png">`), 0o644)

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1100, 900),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	var mu sync.Mutex
	var requests []string
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithListener(func(ev any) {
		if ev, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			requests = append(requests, ev.Request.URL)
			mu.Unlock()
		}
	}))
	defer bcancel()
	seen := func() []string {
		mu.Lock()
		defer mu.Unlock()
		r := slices.Clone(requests)
		requests = nil
		return r
	}
	fileURL := func(p string) string { return (&url.URL{Scheme: "file", Path: p}).String() }

	// The control: the listener sees a page's request for an image.
	if err := chromedp.Do(bctx, chromedp.Navigate(fileURL(control))); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	if r := seen(); !slices.Contains(r, "http://127.0.0.1:9/x.png") {
		t.Fatalf("the listener did not see the control page's image request: %v", r)
	}

	if err := chromedp.Do(bctx, chromedp.Navigate(fileURL(page))); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	type shown struct {
		Title    string
		Sections []string
		Tables   []string
		Plots    [][2]float64
		Verdict  string
	}
	got, err := chromedp.Run(bctx, chromedp.Evaluate[shown](`({
		title: document.title,
		sections: Array.from(document.querySelectorAll('main > section[id]')).map(s => s.id),
		tables: Array.from(document.querySelectorAll('section.rtable h3')).map(h => h.textContent),
		plots: Array.from(document.querySelectorAll('svg.plot')).map(s => { const r = s.getBoundingClientRect(); return [r.width, r.height]; }),
		verdict: document.querySelector('#privacy .verdict').textContent,
	})`))
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	if name := os.Getenv("KNOWDP_REPORT_SCREENSHOT"); name != "" {
		if shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(90)); err == nil {
			os.WriteFile(name, shot, 0o644)
		}
	}
	if r := seen(); len(r) != 1 || r[0] != fileURL(page) {
		t.Errorf("the page made requests besides itself: %v", r)
	}
	if got.Title != "knowdp report: geo" {
		t.Errorf("title %q", got.Title)
	}
	if want := []string{"privacy", "budget", "exact", "error", "checks", "tables"}; !slices.Equal(got.Sections, want) {
		t.Errorf("sections %v, want %v", got.Sections, want)
	}
	if len(got.Tables) != 5 || !strings.HasPrefix(got.Tables[0], "{}") || !strings.HasPrefix(got.Tables[4], "{geo,sex}") {
		t.Errorf("table sections %q", got.Tables)
	}
	if !strings.Contains(got.Verdict, "NOT differentially private") {
		t.Errorf("verdict %q", got.Verdict)
	}
	// The budget split, standard errors, margins per table, error and
	// margins per level, and the relative margins of the three noisy tables.
	if len(got.Plots) != 8 {
		t.Errorf("%d plots, want 8", len(got.Plots))
	}
	for i, wh := range got.Plots {
		if wh[0] < 100 || wh[1] < 50 {
			t.Errorf("plot %d is %v x %v pixels", i+1, wh[0], wh[1])
		}
	}
}
